"""Did the learner's launch really do the exercise's work on the simulator? A right output is not enough:
a kernel can write it from numpy on the host (``z.buf.flat[:] = ...``) and issue nothing, or one dummy
instruction. A check states the work its exercise implies (bytes on each data path, bytes through each kind
of instruction, Cube MACs) as lower bounds any correct kernel meets, and :func:`require_work` compares them
with the launch's profile."""

from __future__ import annotations

from collections import Counter

from ._core import CheckFailed, describe


def _ops(profile) -> Counter:
    out: Counter = Counter()
    for r in profile.raw_records:
        out[str(r[4])] += int(r[5])
    return out


def require_work(check: str, profile, case: dict, *, moved: dict[str, int] | None = None,
                 ops: dict[str, int] | None = None, macs: int = 0, how: str = "") -> None:
    """Fail unless the launch moved at least ``moved[path]`` bytes on each data path (``"GM->UB"``), pushed
    at least ``ops[op]`` bytes through instructions named ``op`` (``"add"``; several names joined by ``|``
    count together), and issued at least ``macs`` Cube MACs. ``how`` names the instructions the exercise
    is about, for the message."""
    __tracebackhide__ = True
    short = []
    for path, need in (moved or {}).items():
        got = profile.path_bytes.get(path, 0)
        if got < need:
            short.append(f"{got:,} B {path} where the data alone is {need:,} B")
    counts = _ops(profile)
    for op, need in (ops or {}).items():
        got = sum(counts.get(o, 0) for o in op.split("|"))
        if got < need:
            short.append(f"{got:,} B through {op.replace('|', ' or ')} where the data is {need:,} B")
    if macs and profile.cube_macs < macs:
        short.append(f"{profile.cube_macs:,} Cube MACs where the product needs {macs:,}")
    if short:
        raise CheckFailed(check, f"on [{describe(case)}] the output is there, but your kernel did not compute it "
                                 f"on the simulator: it issued {'; '.join(short)}. Every element must go through "
                                 f"the kernel's own instructions{f' ({how})' if how else ''}, not be written "
                                 f"from the host.")
