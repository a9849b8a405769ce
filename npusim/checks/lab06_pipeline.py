"""Checks of lab 06 (Conv2D + ReLU fusion), exercise 3: the fused pipeline, synchronised by hand."""

from __future__ import annotations

import numpy as np

from ..config import a2, classic
from ..errors import RaceError, SyncError
from ..kernels import fusion_lab as fl
from ..pipes import Pipe
from ..tracebacks import innermost_learner_site
from ._core import CheckFailed, Mismatch, call_learner, compare, describe, passed
from ._flow import Skeleton
from .lab06_fusion import _layer, _random_layers, _words

__all__ = ["fused_pipeline"]

HINTS = {
    "fused-pipeline": (
        "A queue is two pairs of flags: enque/deque is the producer's set_flag and the consumer's wait_flag "
        "(data ready), free_tensor/alloc_tensor the consumer's set_flag and the producer's wait_flag "
        "(buffer free). Section 5's ReLU kernel shows the pattern for two buffers; your kernel has four "
        "(band, L0A/L0B, L0C, and on classic UB), and the classic epilogue is a cast and a ReLU.",
        "Walk the loops band -> tile -> step. Before each stage writes a buffer it waits for that buffer's "
        "'free' flag; after it writes, it sets 'ready', and the reader waits for 'ready' before it reads; "
        "after the reader is done, it sets 'free'. Each buffer pair alternates ids 0 and 1, counted per band, "
        "per tile and per step (not per loop of the inner level). Every 'free' flag starts set, and every "
        "flag set must be waited for once before the kernel ends. The epilogue: which order of cast and ReLU "
        "costs the vector pipe less?",
        Skeleton(
            "class MyFusedConvRelu(fl.FusedStages):\n"
            "    def epilogue(self, dst, acc, count):\n"
            "        ___                                # cast acc into dst, then the ReLU\n"
            "\n"
            "    def process(self):\n"
            "        ready, free = (E.M_FIX, E.FIX_M) if self.fixpipe else (E.M_V, E.V_M)\n"
            "        frees = [___] + ([] if self.fixpipe else [E.MTE3_V])   # every 'free' flag of the table\n"
            "        for i in (0, 1):\n"
            "            for ev in frees:\n"
            "                ns.set_flag(ev, i)\n"
            "        n_steps = n_tiles = 0\n"
            "        for nb, band in enumerate(self.bands()):\n"
            "            b = nb % 2\n"
            "            ns.wait_flag(___, b)\n"
            "            self.load_band(b, band)\n"
            "            ns.set_flag(E.MTE2_MTE1, b)\n"
            "            ns.wait_flag(E.MTE2_MTE1, b)\n"
            "            for tile in self.tiles(band):\n"
            "                c = n_tiles % 2\n"
            "                ns.wait_flag(free, c)\n"
            "                for step in self.steps(band):\n"
            "                    s = n_steps % 2\n"
            "                    ns.wait_flag(___, s)\n"
            "                    self.load_step(s, b, band, tile, step)\n"
            "                    ns.set_flag(___, s)\n"
            "                    ns.wait_flag(___, s)\n"
            "                    self.mmad(c, s, tile, step)\n"
            "                    ns.set_flag(___, s)\n"
            "                    n_steps += 1\n"
            "                ns.set_flag(ready, c)\n"
            "                ns.wait_flag(ready, c)\n"
            "                if self.fixpipe:\n"
            "                    self.fixpipe_out(c, band, tile)\n"
            "                else:\n"
            "                    ___                    # drain_to_ub, then write_out, ordered by UB's flag pair\n"
            "                ns.set_flag(free, c)\n"
            "                n_tiles += 1\n"
            "            ns.set_flag(___, b)\n"
            "        for i in (0, 1):\n"
            "            for ev in frees:\n"
            "                ns.wait_flag(ev, i)\n",
            call="check.fused_pipeline(MyFusedConvRelu)",
            setup="import npusim as ns\nfrom npusim import checks as check\nfrom npusim.kernels import "
                  "fusion_lab as fl\nE = ns.HardEvent"),
    ),
}


# (n, cin, h, w, cout, k, stride, padding, bias) on both presets: bands of padding only (1 x 1, padding 3,
# stride 2), a 5 x 5 window with padding 2 (every band touches the border), Cout above 16 (several blocks of
# 16 columns) and below, Cout above the block's n (two tiles per position range), batch 2, odd sizes
_PIPE_FIXED = [
    (1, 4, 5, 5, 3, 1, 2, 3, True), (2, 7, 9, 6, 40, 5, 2, 2, True), (1, 3, 7, 9, 5, 3, 1, 1, False),
    (2, 19, 11, 13, 21, 3, 2, 1, True), (1, 16, 8, 8, 72, 3, 1, 1, False),
]
_PIPE_BLOCKS = {4: fl.Block(32, 48, 48)}     # case index -> a block with n < Cout: two Cout blocks per tile
PIPE_SPEED_LAYER = (1, 16, 32, 32, 32, 3, 1, 1, False)
PIPE_TIME_TARGET = 1.10
"""The learner's synchronisation may take at most this times the reference's on :data:`PIPE_SPEED_LAYER`
(same block). Measured: one buffer everywhere 1.5-1.7x, one accumulator 1.3-1.4x, pipe_barrier 2x."""

_STAGES = {  # (memory, pipe) -> the stage that accesses it, and the buffer
    ("L1", Pipe.MTE2): "load_band (MTE2)", ("L1", Pipe.MTE1): "load_step (MTE1)",
    ("L0A", Pipe.MTE1): "load_step (MTE1)", ("L0B", Pipe.MTE1): "load_step (MTE1)",
    ("L0A", Pipe.M): "mmad (M)", ("L0B", Pipe.M): "mmad (M)", ("L0C", Pipe.M): "mmad (M)",
    ("L0C", Pipe.FIX): "fixpipe_out (FIX)", ("L0C", Pipe.V): "drain_to_ub (V)",
    ("UB", Pipe.V): "drain_to_ub (V)", ("UB", Pipe.MTE3): "write_out (MTE3)",
}
_BUFFER = {"L1": "band buffer", "L0A": "L0A buffer", "L0B": "L0B buffer", "L0C": "accumulator",
           "UB": "output buffer"}


def _race_message(e: RaceError) -> str:
    """A race between two stages, in the terms of the exercise: which stages, which buffer, which flag."""
    mem, pipes, kind = e.facts.get("memory"), e.facts.get("pipes"), e.facts.get("kind")
    if not (isinstance(pipes, tuple) and len(pipes) == 2 and all(isinstance(p, Pipe) for p in pipes)):
        return f"the simulator stopped your kernel with RaceError:\n{e}"
    a, b = pipes
    first, then = _STAGES.get((mem, a), f"PIPE_{a.name}"), _STAGES.get((mem, b), f"PIPE_{b.name}")
    buf = _BUFFER.get(mem, mem)
    ev = f"HardEvent.{a.name}_{b.name}"
    if kind == "RAW":
        what = (f"{then} read the {buf} before {first} had finished writing it. A consumer waits for its "
                f"producer: set_flag({ev}, i) after {first.split()[0]}, wait_flag({ev}, i) before {then.split()[0]}")
    elif kind == "WAR":
        what = (f"{then} overwrote the {buf} while {first} could still be reading it. A producer waits until "
                f"the consumer is done with the buffer: set_flag({ev}, i) after {first.split()[0]}, "
                f"wait_flag({ev}, i) before {then.split()[0]} writes it again (set once per buffer before the "
                f"loop, so that the first use does not wait)")
    else:
        what = f"{first} and {then} both write the {buf} unordered: order them with {ev}"
    return f"the sanitizer found a {kind} hazard in {mem}: {what}."


def _run_pipeline(name: str, cls, cfg, case, seed: int, block=None):
    """The learner's kernel on one layer; a race or a flag error becomes a message in the exercise's terms."""
    x, wt, b = _layer(case, seed)
    words = _words(cfg, case)
    try:
        return fl.run_fused(x, wt, b, case[6], case[7], kernel=cls, block=block, config=cfg)
    except RaceError as e:
        at = innermost_learner_site(e.__traceback__)
        raise CheckFailed(name, f"on [{describe(words)}] " + _race_message(e) + (f" (stopped at {at})" if at else "")) \
            from None
    except SyncError as e:
        at = innermost_learner_site(e.__traceback__)
        raise CheckFailed(name, f"on [{describe(words)}] the simulator stopped your kernel with SyncError (on "
                                f"hardware it would hang or corrupt the next kernel):\n{e}"
                                + (f"\n  your line: {at}" if at else "")) from None
    except Exception:  # noqa: BLE001 - anything else: run it the checked way, which translates it for the learner
        return call_learner(name, fl.run_fused, x, wt, b, case[6], case[7], kernel=cls, block=block, config=cfg,
                            case=words, what="your kernel")


def _pipeline_causes(pre: np.ndarray, bias):
    """Likely causes of a wrong output, from what it holds: NaN (never written), negatives (no ReLU),
    one fp16 step off (rounding), the pair's values without the bias."""

    def causes(mm: Mismatch) -> str:
        g, w = mm.got, mm.want
        bad = mm.bad
        if mm.never_written == mm.count:
            return ("Those elements were never written: every tile must reach the drain (fixpipe_out on A2, "
                    "drain_to_ub then write_out on classic), in every band, including bands of padding only.")
        if np.all(g[bad][~np.isnan(g[bad])] < 0):
            return "They are negative where the pair has 0: the epilogue does not apply the ReLU."
        with np.errstate(invalid="ignore"):
            step = np.abs(g[bad] - w[bad]) <= np.spacing(np.abs(w[bad]).astype(np.float16)).astype(np.float64) * 1.01
        if step.all():
            return ("Each is one fp16 step from the pair's value: the cast must round to nearest "
                    "(RoundMode.CAST_RINT), as the conv kernel's output is rounded.")
        if bias is not None:
            nb = np.maximum(pre - np.broadcast_to(bias.astype(np.float32)[None, :, None, None], pre.shape), 0)
            if np.allclose(g[bad], nb.reshape(-1)[bad], rtol=2e-3, atol=2e-3):
                return "They are the convolution without its bias: every tile's steps start with the bias step."
        return ("Look at which buffer index each stage uses: a stage must read the buffer its producer wrote "
                "(the same b for load_band and that band's load_steps, the same s for a load_step and its mmad, "
                "the same c for a tile's mmads and its drain).")

    return causes


def _overlap(prof, p: Pipe, q: Pipe) -> float:
    """Cycles during which pipes ``p`` and ``q`` are both busy (block 0)."""
    def spans(pipe):
        return sorted((i.start, i.end) for i in prof.instructions if i.pipe is pipe and i.block == 0)
    a, b = spans(p), spans(q)
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0.0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _slow_causes(prof, ref) -> str:
    """What the learner's synchronisation serialises, measured against the reference's timeline."""
    barriers = sum(1 for i in prof.instructions if i.op.startswith("pipe_barrier"))
    if barriers:
        return (f"Your kernel issues {barriers} pipe_barrier(ALL): each makes every pipe wait for all the work "
                f"issued before it, so no stage overlaps another. Flags order only the two pipes that share a "
                f"buffer.")
    drain = Pipe.FIX if prof.config.has_fixpipe else Pipe.V
    pairs = [((Pipe.M, drain), "the Cube computes the next tile while this one drains (two accumulators: "
                               "c alternates 0, 1)"),
             ((Pipe.MTE1, Pipe.M), "MTE1 loads the next step while the Cube computes this one (two L0A/L0B "
                                   "buffers: s alternates)"),
             ((Pipe.MTE2, Pipe.MTE1), "MTE2 loads the next band while MTE1 reads this one (two band buffers)")]
    lines = []
    for (p, q), what in pairs:
        mine, theirs = _overlap(prof, p, q), _overlap(ref, p, q)
        if theirs > 0 and mine < 0.5 * theirs:
            lines.append(f"{p.name} and {q.name} are busy together {mine:,.0f} cycles against {theirs:,.0f} in the "
                         f"reference: with two buffers {what}; a wait on the wrong id, or a wait right after the "
                         f"set of the same buffer, serialises them.")
    return " ".join(lines) or "Compare the two timelines (views.compare([yours, reference])): which lane has gaps?"


def fused_pipeline(cls) -> None:
    """Lab 06, exercise 3: ``cls`` (a :class:`~npusim.kernels.fusion_lab.FusedStages` subclass with
    ``process`` and ``epilogue``) gives exactly the separate pair's output on hidden layers with padding
    (bands of padding only, several channel blocks, bias) on A2 and classic, with a clean sanitizer run, the
    ReLU after the cast, and at most :data:`PIPE_TIME_TARGET` times the reference synchronisation's time."""
    __tracebackhide__ = True
    name = "fused_pipeline"
    if not (isinstance(cls, type) and issubclass(cls, fl.FusedStages)):
        raise CheckFailed(name, f"pass your class (a subclass of fl.FusedStages), not {cls!r}")
    cases = [(cfg, c) for c in _PIPE_FIXED for cfg in (a2, classic)] + _random_layers(name, 2)
    for i, (cfg, case) in enumerate(cases):
        block = _PIPE_BLOCKS.get(i // 2)
        fused = _run_pipeline(name, cls, cfg, case, 640 + i, block)
        x, wt, b = _layer(case, 640 + i)
        words = _words(cfg, case)
        pre = fl.run_fused(x, wt, b, case[6], case[7], block=block, config=cfg, relu=False).output
        pair = np.maximum(pre, np.float16(0))       # the separate pair: the conv kernel, then ReLU
        compare(name, fused.output, pair, words, causes=_pipeline_causes(pre, b))
        if not cfg.has_fixpipe:
            recs = fused.profile.instructions
            relu = sum(r.nbytes for r in recs if r.op == "relu")
            cast = sum(r.nbytes for r in recs if r.op == "cast")
            if relu >= cast > 0:
                raise CheckFailed(name, f"on [{describe(words)}] the values are right, but your ReLU reads "
                                        f"{relu:,} B, as much as the cast: it runs on the fp32 tile. After the cast "
                                        f"it works on fp16, half the bytes and half the vector cycles; ReLU commutes "
                                        f"with rounding (section 3), so the order is free.")
    for cfg in (a2, classic):
        fused = _run_pipeline(name, cls, cfg, PIPE_SPEED_LAYER, 699)
        x, wt, b = _layer(PIPE_SPEED_LAYER, 699)
        ref = fl.run_fused(x, wt, b, 1, 1, config=cfg).profile
        ratio = fused.profile.total_cycles / ref.total_cycles
        if ratio > PIPE_TIME_TARGET:
            raise CheckFailed(name, f"on [{describe(_words(cfg, PIPE_SPEED_LAYER))}] correct and clean, but your "
                                    f"kernel takes {fused.profile.time_us:.2f} us, {ratio:.2f}x the "
                                    f"{ref.time_us:.2f} us of the reference synchronisation with the same block "
                                    f"(target {PIPE_TIME_TARGET}x). " + _slow_causes(fused.profile, ref))
    passed(name, f"{len(cases)} hidden layers on a2 and classic (padding-only bands, several channel blocks, "
                 f"bias) equal to the separate pair, sanitizer clean, as fast as the reference")
