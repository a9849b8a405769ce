"""Mmad on the Cube: C (L0C, NZ) [+]= A (L0A, ZZ) x B (L0B, ZN)."""

from __future__ import annotations

import numpy as np

from .. import costs, numerics
from ..dtypes import NAMES
from ..core import current
from ..errors import DtypeError, OutOfBoundsError, UsageError
from ..params import MmadParams
from ..pipes import Pipe
from ..sanitizer import call_site, describe_tensor, format_site
from ..tensor import LocalTensor
from ._access import check_align, local, touch

M = int(Pipe.M)

_ACC = {"float16": "float32", "bfloat16": "float32", "float32": "float32", "int8": "int32"}


def _operand(t, fractals, logical):
    """``logical(fractals)`` of the L0A/L0B tensor ``t``, converted once while its memory is unwritten: an
    operand that stays in L0 (an identity matrix, resident weights) is not converted at every Mmad."""
    ops = t.slot.memory.operands
    key = (t.addr, fractals.shape, t.dtype)
    x = ops.get(key)
    if x is None:
        x = ops[key] = logical(fractals)
    return x


def mmad(dst, a, b, params=None, bias_params: MmadParams | None = None, *, m: int | None = None,
         n: int | None = None, k: int | None = None, accumulate: bool = False) -> None:
    """Mmad: ``dst[m, n] = a[m, k] @ b[k, n]`` (or ``+=`` with ``accumulate=True`` /
    ``MmadParams(cmatrix_init_val=False)`` / ``is_bias``). ``mmad(dst, a, b, bias, params)`` is Ascend C's
    form with a bias: ``dst = bias[None, :n] + a @ b``, the bias a float32 tensor of n values (in Ascend C
    it sits in the bias table, C2, after a copy L1 -> C2; npusim reads it from L1).

    Layouts: ``a`` in L0A as ZZ fractals (M1, K1, 16, K0), ``b`` in L0B as ZN (K1, N1, 16, K0), ``dst`` in
    L0C as NZ (N1, M1, 16, 16). Type pairs: fp16/bf16 -> fp32, int8 -> int32, fp32 -> fp32 (A2 only), and
    fp16 -> fp16 where the preset allows fp16 accumulation (910; a teaching option on A2).
    """
    core = current()
    site = call_site()
    op = "mmad"
    bias = None
    if isinstance(params, LocalTensor):
        bias, params = params, bias_params
        if not isinstance(params, MmadParams):
            raise UsageError(f"{op}: with a bias, the fifth argument must be MmadParams, not {params!r}",
                             hint="mmad(c_l0, a_l0, b_l0, bias_l1, MmadParams(m, n, k)), as Mmad(dst, fm, filter, "
                                  "bias, params)")
    elif bias_params is not None:
        raise UsageError(f"{op}: a fifth argument is the MmadParams of the bias form; the fourth must then be the "
                         f"bias tensor, not {params!r}",
                         hint="mmad(dst, a, b, params) or mmad(dst, a, b, bias, params)")
    if params is not None:
        if not isinstance(params, MmadParams):
            raise UsageError(f"{op}: the fourth argument must be MmadParams (or the bias tensor), not {params!r}",
                             hint="mmad(c_l0, a_l0, b_l0, MmadParams(m, n, k)) or mmad(..., m=, n=, k=)")
        m, n, k, accumulate = params.m, params.n, params.k, params.accumulate
    if None in (m, n, k):
        raise UsageError(f"{op}: the sizes are missing", hint="pass MmadParams(m, n, k) or m=, n=, k=")
    for name, v in (("m", m), ("n", n), ("k", k)):
        if not (1 <= v <= 4095):
            raise UsageError(f"{op}: {name}={v}; each of m, n, k must be in 1..4095",
                             hint="skip the mmad of an empty tile (a K loop with K = 0 computes nothing: drain "
                                  "nothing either), and split sizes above 4095 into several mmads"
                             if v < 1 else "split the tile into several mmads of at most 4095")
    local(dst, op, "destination", ("L0C",))
    local(a, op, "a", ("L0A",))
    local(b, op, "b", ("L0B",))
    cfg = core.cfg
    ind = NAMES[a.dtype]
    if b.dtype != a.dtype:
        raise DtypeError(f"{op}: a is {ind} but b is {b.dtype.name} (a: {describe_tensor(a)}, b: "
                         f"{describe_tensor(b)}); the Cube multiplies equal types",
                         hint="load both operands as one type (cast in UB before the copy to L1, or on the host)",
                         where=format_site(site))
    if ind not in cfg.cube_macs_per_cycle:
        raise DtypeError(f"{op}: the '{cfg.name}' Cube does not take {ind} inputs (it takes "
                         f"{', '.join(cfg.cube_macs_per_cycle)})",
                         hint="cast the inputs to float16 first" if ind == "float32" else
                         f"use one of {', '.join(cfg.cube_macs_per_cycle)} inputs, or another preset",
                         where=format_site(site))
    acc = NAMES[dst.dtype]
    fp16_acc = ind == "float16" and acc == "float16"
    if acc != _ACC.get(ind) and not fp16_acc:
        raise DtypeError(f"{op}: {ind} inputs accumulate into {_ACC.get(ind)}, not {acc} (destination "
                         f"{describe_tensor(dst)})",
                         hint=f"allocate the L0C (CO1) tensor as {_ACC.get(ind)}: alloc_tensor(ns.{_ACC.get(ind)})",
                         where=format_site(site))
    if fp16_acc and not cfg.cube_fp16_accumulate:
        raise DtypeError(f"{op}: fp16 -> fp16 accumulation is not supported on '{cfg.name}' (A2 accumulates "
                         f"in fp32)",
                         hint="use a float32 L0C tensor; to demonstrate fp16 accumulation use the 'classic' "
                              "preset or config.replace(cube_fp16_accumulate=True)", where=format_site(site))
    check_align(core, dst, cfg.l0c_align_bytes, op, site)
    check_align(core, a, cfg.l0ab_align_bytes, op, site)
    check_align(core, b, cfg.l0ab_align_bytes, op, site)
    k0 = 32 // a.dtype.itemsize
    m1, n1, k1 = -(-m // 16), -(-n // 16), -(-k // k0)
    need = ((a, m1 * k1 * 16 * k0), (b, k1 * n1 * 16 * k0), (dst, m1 * n1 * 256))
    for t, cnt in need:
        t.check_usable(op, site)
        if cnt > t.size:
            whole = t.slot.nbytes // t.dtype.itemsize
            raise OutOfBoundsError(f"{op}: m={m}, n={n}, k={k} needs {cnt} elements in {describe_tensor(t)} "
                                   f"but it holds {t.size} (its buffer {whole})",
                                   hint=f"sizes are rounded up to whole fractals of 16 x K0 (K0 = {k0} for "
                                        f"{ind}): a needs ceil(m/16)*16 x ceil(k/K0)*K0, b ceil(k/K0)*K0 x "
                                        f"ceil(n/16)*16, the L0C tensor ceil(m/16)*16 x ceil(n/16)*16 elements",
                                   where=format_site(site), tensor=t.name)
    if bias is not None:
        local(bias, op, "bias", ("L1",))
        if NAMES[bias.dtype] != "float32" or acc != "float32":
            raise DtypeError(f"{op}: the bias must be float32 for a float32 result, not {describe_tensor(bias)} "
                             f"(result {acc})", hint="copy the bias into an L1 tensor allocated as float32",
                             where=format_site(site))
        bias.check_usable(op, site, 0, n)
    if core.check:
        vc = core.epoch(M)
        if bias is not None:
            touch(core, bias, 0, n, False, M, vc, site, op)
        touch(core, a, 0, m1 * k1 * 16 * k0, False, M, vc, site, op)
        touch(core, b, 0, k1 * n1 * 16 * k0, False, M, vc, site, op)
        if accumulate and bias is None:  # += reads L0C: the first K step must write it (initcheck)
            touch(core, dst, 0, m1 * n1 * 256, False, M, vc, site, op)
        touch(core, dst, 0, m1 * n1 * 256, True, M, vc, site, op)
    if bias is not None:   # C starts from the bias row (cmatrixSource = bias table), then accumulates
        row = np.zeros(n1 * 16, np.float32)
        row[:n] = bias.view()[:n]
        dst.view()[:m1 * n1 * 256].reshape(n1, m1, 16, 16)[...] = row.reshape(n1, 1, 1, 16)
        accumulate = True
    a_zz = a.view()[:m1 * k1 * 16 * k0].reshape(m1, k1, 16, k0)
    b_zn = b.view()[:k1 * n1 * 16 * k0].reshape(k1, n1, 16, k0)
    numerics.mmad(dst.view()[:m1 * n1 * 256].reshape(n1, m1, 16, 16), a_zz, b_zn, k, accumulate,
                  _operand(a, a_zz, numerics.logical_a), _operand(b, b_zn, numerics.logical_b))
    core.issue(M, costs.cube_cycles(cfg, m, n, k, ind), op, 0, site)
    macs = m * n * k
    core.cube_macs += macs
    core.issued_macs += m1 * n1 * k1 * 16 * 16 * k0
    core.cube_ideal_cycles += macs / cfg.cube_macs_per_cycle[ind]
    core.cube_peak_dtype = core.cube_peak_dtype or ind
