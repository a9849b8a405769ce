"""Pins of what the simulator computes on the benchmark cases (and a few more paths): every launch's
cycle counts, instruction count, pipe busy cycles, bytes per path, L2/HBM counters, a digest of its whole
timeline (every record: pipe, start, end, op, bytes, kernel line) and a digest of its output bytes.

The pins in ``timing_pins.json`` were written by the code before the speed work (issue 18) and must not
move with it: a faster simulator computes the same numbers, bit for bit. After an intended change of the
cost model or of a kernel, rewrite them with ``python tests/core/timing_pins.py --write`` and say why in
the commit.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

PINS = Path(__file__).with_name("timing_pins.json")


def _digest(parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else repr(p).encode())
    return h.hexdigest()[:20]


def profile_pin(p) -> dict:
    """The figures of one launch's profile, floats as their exact ``repr``."""
    records = _digest((r[0], repr(r[1]), repr(r[2]), r[3], r[4], os.path.basename(r[5][0]), r[5][1])
                      for recs in p.block_records for r in recs)
    occupancy = _digest((repr(t), m, n) for occ in p.block_occupancy for t, m, n in occ)
    return {"total_cycles": repr(p.total_cycles), "instructions": p.instruction_count,
            "block_end_cycles": [repr(t) for t in p.block_end_cycles],
            "pipe_busy_cycles": {k: repr(v) for k, v in sorted(p.pipe_busy_cycles.items())},
            "path_bytes": dict(sorted(p.path_bytes.items())), "cube_macs": p.cube_macs,
            "issued_macs": p.issued_macs, "vector_ops": p.vector_ops,
            "l2": [p.l2_hit_bytes, p.l2_miss_bytes, p.hbm_read_bytes, p.hbm_write_bytes,
                   repr(p.hbm_drain_cycles)],
            "records": records, "occupancy": occupancy}


def _out(a: np.ndarray) -> str:
    return _digest([str(a.dtype), a.shape, np.ascontiguousarray(a).tobytes()])


def _rng():
    return np.random.default_rng(0)


def case_vector_add():
    """The ``vector_add`` bench case: 1M fp16, 4096-element tiles, double-buffered, one block."""
    from npusim.kernels.vector_add import run_vector_add

    rng = _rng()
    x, y = (rng.random(1 << 20).astype(np.float16) for _ in range(2))
    r = run_vector_add(x, y, tile=4096, buffer_num=2)
    return [("vector_add", r.profile, r["z"])]


def case_vector_add_blocks_tail():
    """8 blocks (interleaved GM on the shared HBM) and a tail that needs data_copy_pad."""
    from npusim.kernels.vector_add import run_vector_add

    rng = _rng()
    x, y = (rng.random(100_003).astype(np.float16) for _ in range(2))
    r = run_vector_add(x, y, tile=2048, buffer_num=2, block_dim=8)
    return [("vector_add_8_blocks", r.profile, r["z"])]


def case_matmul():
    """The ``matmul`` bench case: 256^3 fp16 -> fp32, 64^3 base blocks, one block."""
    from npusim.kernels.matmul import MatmulTiling, run_matmul

    rng = _rng()
    a, b = (rng.standard_normal((256, 256)).astype(np.float16) for _ in range(2))
    r = run_matmul(a, b, tiling=MatmulTiling(64, 64, 64, 2))
    return [("matmul", r.profile, r["c"])]


def case_matmul_classic():
    """The classic preset (no Fixpipe): L0C -> UB, cast, data_copy_pad rows out; a ragged shape."""
    from npusim.kernels.matmul import MatmulTiling, run_matmul

    rng = _rng()
    a = rng.standard_normal((72, 90)).astype(np.float16)
    b = rng.standard_normal((90, 56)).astype(np.float16)
    r = run_matmul(a, b, tiling=MatmulTiling(32, 32, 32, 2), out_dtype=np.float16, config="classic")
    return [("matmul_classic", r.profile, r["c"])]


def case_ops_matmul_chip():
    """``ops.call("matmul")`` 512^3 on the 24 cores of a2, twice in one L2 (cold, then warm)."""
    import npusim as ns
    from npusim import ops

    rng = _rng()
    a, b = (rng.standard_normal((512, 512)).astype(np.float16) for _ in range(2))
    with ns.shared_l2():
        cold = ops.call("matmul", a, b)
        warm = ops.call("matmul", a, b)
    return [("ops_matmul_cold", cold.profile, cold.out), ("ops_matmul_warm", warm.profile, warm.out)]


def case_ops_add_chip():
    """``ops.call("add")`` of 2048 x 2048 fp16 on every core (the HBM budget)."""
    from npusim import ops

    rng = _rng()
    x, y = (rng.random((2048, 2048)).astype(np.float16) for _ in range(2))
    r = ops.call("add", x, y)
    return [("ops_add", r.profile, r.out)]


def case_softmax():
    """Softmax rows (reductions, exp, muls, cast) on 2 blocks, fp16."""
    from npusim.kernels.softmax import run_softmax

    x = _rng().standard_normal((64, 1000)).astype(np.float16)
    r = run_softmax(x, tile=1024, block_dim=2)
    return [("softmax", r.profile, r["y"])]


def _conv(variant: str, x, w, **kw):
    from npusim.conv import conv2d

    r = conv2d(x, w, padding=1, variant=variant, **kw)
    out = [(f"conv_{variant}", r.profile, r.output)]
    out += [(f"conv_{variant}_{name}", p, None) for name, p in sorted(r.transforms.items())]
    out += [(f"conv_{variant}_{name}", p, None) for name, p in sorted(r.separate.items())]
    return out


def case_conv2d_img2col():
    """The ``conv2d_img2col`` bench case: 1x64x56x56 -> 64, 3x3, pad 1, with both transforms."""
    from npusim.conv.api import run_img2col

    rng = _rng()
    x = rng.standard_normal((1, 64, 56, 56)).astype(np.float16)
    w = (rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float16)
    r = run_img2col(x, w, padding=1, stride=1)
    return ([("conv2d_img2col", r.profile, r.output)]
            + [(f"conv2d_img2col_{k}", p, None) for k, p in sorted(r.transforms.items())])


def case_conv2d_variants():
    """The direct, reuse and layout variants on a small layer, and img2col with a fused ReLU."""
    rng = _rng()
    x = rng.standard_normal((1, 32, 20, 20)).astype(np.float16)
    w = (rng.standard_normal((32, 32, 3, 3)) / 17).astype(np.float16)
    out = []
    for v in ("direct", "reuse", "layout"):
        out += _conv(v, x, w)
    out += _conv("img2col", x, w, relu=True)
    return out


def case_resnet_stem():
    """The ResNet stem (1x3x224x224, 64 7x7 filters, stride 2, pad 3) of the ``resnet_stem`` bench case."""
    from npusim.conv import conv2d

    rng = _rng()
    x = rng.standard_normal((1, 3, 224, 224)).astype(np.float16)
    w = (rng.standard_normal((64, 3, 7, 7)) / 12).astype(np.float16)
    r = conv2d(x, w, stride=2, padding=3)
    return [("resnet_stem", r.profile, r.output)]


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def compute(name: str) -> dict:
    """The pins of one case, as stored in ``timing_pins.json``."""
    out = {}
    for label, profile, result in CASES[name]():
        d = profile_pin(profile)
        if result is not None:
            d["output"] = _out(result)
        out[label] = d
    return out


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/core/timing_pins.py --write   (rewrites timing_pins.json)")
    PINS.write_text(json.dumps({n: compute(n) for n in CASES}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {PINS}")
