"""Wrong solutions of lab 06 (fusion): the round trip's bytes, the fused block, the fused pipeline's flags."""

from .harness import Wrong

LAB = "06_fusion"
SETUP = ["06_fus-356a192b"]
CHECKS = {
    "check-round-trip-bytes": SETUP + ["06_fus-902ba3cd"],
    "check-fused-block": SETUP + ["06_fus-block"],
    "check-fused-pipeline": SETUP + ["06_fus-pipeline"],
}
RTB = "return 2 * n * cout * ho * wo * itemsize"
M_LINE = "m = min(room, 256, round_up(fl.band_rows(g, cfg) * g.wo, 16)) // 16 * 16"
UB_LINES = ("    if not cfg.has_fixpipe:\n"
            "        room = min(room, cfg.ub_bytes // (n * 10))            # the classic drain in UB\n")
BARRIER = '''class MyFusedConvRelu(fl.FusedStages):
    def epilogue(self, dst, acc, count):
        ns.cast(dst, acc, ns.RoundMode.CAST_RINT, count)
        ns.relu(dst, dst, count)

    def process(self):
        for band in self.bands():
            self.load_band(0, band)
            ns.pipe_barrier(ns.Pipe.ALL)
            for tile in self.tiles(band):
                for step in self.steps(band):
                    self.load_step(0, 0, band, tile, step)
                    ns.pipe_barrier(ns.Pipe.ALL)
                    self.mmad(0, 0, tile, step)
                    ns.pipe_barrier(ns.Pipe.ALL)
                if self.fixpipe:
                    self.fixpipe_out(0, band, tile)
                else:
                    self.drain_to_ub(0, 0, tile)
                    ns.pipe_barrier(ns.Pipe.ALL)
                    self.write_out(0, band, tile)
                ns.pipe_barrier(ns.Pipe.ALL)
'''

WRONG = [
    # --- exercise 1: the round trip's bytes ----------------------------------------------------------------
    Wrong("rtb-float", "check-round-trip-bytes", "must be an int",
          edits=((RTB, "return 2.0 * n * cout * ho * wo * itemsize"),), why="a float number of bytes"),
    Wrong("rtb-true-division", "check-round-trip-bytes", "must be an int",
          edits=(("ho = (h + 2 * padding - kh) // stride + 1", "ho = (h + 2 * padding - kh) / stride + 1"),),
          why="/ instead of // in the output height"),
    Wrong("rtb-one-way", "check-round-trip-bytes", "one way only",
          edits=((RTB, "return n * cout * ho * wo * itemsize"),), why="counts the ReLU kernel's read only"),
    Wrong("rtb-elements", "check-round-trip-bytes", "counts elements",
          edits=((RTB, "return 2 * n * cout * ho * wo"),), why="elements instead of bytes"),
    Wrong("rtb-input-size", "check-round-trip-bytes", "input's size",
          edits=(("n, _, h, wd = x_shape", "n, cin, h, wd = x_shape"), (RTB, "return 2 * n * cin * h * wd * itemsize")),
          why="the input's bytes instead of the output's"),
    Wrong("rtb-no-stride", "check-round-trip-bytes", "stride is missing",
          edits=(("ho = (h + 2 * padding - kh) // stride + 1", "ho = h + 2 * padding - kh + 1"),
                 ("wo = (wd + 2 * padding - kw) // stride + 1", "wo = wd + 2 * padding - kw + 1")),
          why="Ho and Wo without the stride"),
    Wrong("rtb-no-padding", "check-round-trip-bytes", "padding is missing",
          edits=(("ho = (h + 2 * padding - kh) // stride + 1", "ho = (h - kh) // stride + 1"),
                 ("wo = (wd + 2 * padding - kw) // stride + 1", "wo = (wd - kw) // stride + 1")),
          why="Ho and Wo without the padding"),
    # --- exercise 2: the block ----------------------------------------------------------------------------
    Wrong("block-16", "check-fused-block", ("k=16", "once per 16 positions"),
          edits=(("    n = round_up(g.cout, 16)  ", "    return 16, 16, 16\n    n = round_up(g.cout, 16)  "),),
          why="the smallest legal block"),
    Wrong("block-64", "check-fused-block", ("k=64", "once per 64 positions"),
          edits=(("    return m, n, min(k, round_up(g.c1 * g.kk * g.c0, 16))", "    return 64, n, 64"),),
          why="a moderate fixed block: a quarter of L0A, half of L0C"),
    Wrong("block-no-ub", "check-fused-block", ("UB", "classic"),
          edits=((UB_LINES, ""),), why="ignores the classic drain's UB"),
    Wrong("block-no-band-cap", "check-fused-block", "a band has",
          edits=((M_LINE, "m = min(room, 256) // 16 * 16"),), why="more positions per tile than a band has"),
    Wrong("block-n-not-rounded", "check-fused-block", "multiple of 16",
          edits=(("n = round_up(g.cout, 16)  ", "n = g.cout  "),), why="n = Cout, not whole 16-channel blocks"),
    Wrong("block-whole-k", "check-fused-block", "L0A",
          edits=(("    return m, n, min(k, round_up(g.c1 * g.kk * g.c0, 16))",
                  "    return m, n, round_up(g.c1 * g.kk * g.c0, 16)"),),
          why="the whole K in one step, whatever L0A and L0B hold"),
    Wrong("block-float", "check-fused-block", "must be an int",
          edits=((M_LINE, "m = min(room, 256, round_up(fl.band_rows(g, cfg) * g.wo, 16)) / 16 * 16"),),
          why="true division: a float m"),
    # --- exercise 3: the fused pipeline -----------------------------------------------------------------
    Wrong("pipe-relu-before-cast", "check-fused-pipeline", "runs on the fp32 tile",
          edits=(("        ns.cast(dst, acc, ns.RoundMode.CAST_RINT, count)\n        ns.relu(dst, dst, count)",
                  "        ns.relu(acc, acc, count)\n        ns.cast(dst, acc, ns.RoundMode.CAST_RINT, count)"),),
          why="ReLU on the fp32 tile, then the cast: the same values, twice the vector bytes"),
    Wrong("pipe-no-relu", "check-fused-pipeline", "does not apply the relu",
          edits=(("        ns.relu(dst, dst, count)                   # after the cast: half the bytes of the fp32 "
                  "tile\n", ""),),
          why="the classic epilogue forgets the ReLU"),
    Wrong("pipe-trunc", "check-fused-pipeline", "CAST_RINT",
          edits=(("ns.cast(dst, acc, ns.RoundMode.CAST_RINT, count)", "ns.cast(dst, acc, ns.RoundMode.CAST_TRUNC, count)"),),
          why="truncating cast"),
    Wrong("pipe-no-ready-l0", "check-fused-pipeline", ("RAW hazard in L0A", "MTE1_M"),
          edits=(("                    ns.set_flag(E.MTE1_M, s)\n                    ns.wait_flag(E.MTE1_M, s)\n", ""),),
          why="the Cube reads L0A/L0B without waiting for MTE1"),
    Wrong("pipe-free-too-early", "check-fused-pipeline", ("WAR hazard in L0C", "FIX_M"),
          edits=(("                ns.set_flag(ready, c)\n                ns.wait_flag(ready, c)\n",
                  "                ns.set_flag(ready, c)\n                ns.wait_flag(ready, c)\n"
                  "                ns.set_flag(free, c)\n"),
                 ("                ns.set_flag(free, c)\n                n_tiles += 1", "                n_tiles += 1")),
          why="the accumulator is declared free before its drain is issued: a later tile overwrites it"),
    Wrong("pipe-wrong-event-a2", "check-fused-pipeline", ("fixpipe_out (FIX) read the accumulator", "M_FIX"),
          edits=(("ready, free = (E.M_FIX, E.FIX_M) if self.fixpipe else (E.M_V, E.V_M)", "ready, free = E.M_V, E.V_M"),),
          why="the classic core's events on A2, whose drain is Fixpipe"),
    Wrong("pipe-no-free-wait", "check-fused-pipeline", ("M_MTE1", "still set"),
          edits=(("                    ns.wait_flag(E.M_MTE1, s)      # the Cube is done with L0A/L0B s\n", ""),),
          why="MTE1 overwrites L0A/L0B without waiting for the Cube"),
    Wrong("pipe-no-final-waits", "check-fused-pipeline", "unpaired set_flag",
          edits=(("        for i in (0, 1):                           # every flag set is waited for\n"
                  "            for ev in frees:\n                ns.wait_flag(ev, i)\n", ""),),
          why="the free flags are never waited for at the end"),
    Wrong("pipe-border-set-skipped", "check-fused-pipeline", "no set_flag before it",
          edits=(("            self.load_band(b, band)\n            ns.set_flag(E.MTE2_MTE1, b)\n",
                  "            if band.has_input:\n                self.load_band(b, band)\n"
                  "                ns.set_flag(E.MTE2_MTE1, b)\n"),),
          why="a band of padding only skips the load and its flag, but MTE1 still waits for it"),
    Wrong("pipe-border-skipped", "check-fused-pipeline", ("never written", "padding only"),
          edits=(("            b = nb % 2\n", "            b = nb % 2\n            if not band.has_input:\n"
                                             "                continue\n"),),
          why="bands of padding only are skipped: their outputs are never written"),
    Wrong("pipe-one-accumulator", "check-fused-pipeline", ("M and FIX are busy together", "two accumulators"),
          edits=(("                c = n_tiles % 2\n", "                c = 0\n"),),
          why="always accumulator 0: the Cube waits for every drain"),
    Wrong("pipe-barriers", "check-fused-pipeline", "pipe_barrier",
          cells={"06_fus-pipeline": BARRIER}, why="pipe_barrier(ALL) between the stages instead of flags"),
]
