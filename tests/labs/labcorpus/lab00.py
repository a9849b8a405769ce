"""Wrong solutions of lab 00 (tour): the Cube's peak and a copy's cycles."""

from .harness import Wrong

LAB = "00_tour"
SETUP = ["00_tou-356a192b"]
CHECKS = {
    "check-peak-tflops": SETUP + ["00_tou-902ba3cd"],
    "check-copy-cycles": SETUP + ["00_tou-9e6a55b6", "00_tou-predict"],
}
PEAK = 'config.cube_macs_per_cycle["float16"] * 2 * config.clock_ghz * 1e9 / 1e12'
COPY = "config.gm_startup_cycles + config.gm_burst_overhead_cycles + moved / config.gm_rate(1)"

WRONG = [
    Wrong("peak-no-factor-2", "check-peak-tflops", "two floating-point operations",
          edits=((PEAK, 'config.cube_macs_per_cycle["float16"] * config.clock_ghz * 1e9 / 1e12'),),
          why="counts a MAC as one FLOP"),
    Wrong("peak-gflops", "check-peak-tflops", "GFLOPS",
          edits=((PEAK, 'config.cube_macs_per_cycle["float16"] * 2 * config.clock_ghz * 1e9 / 1e9'),),
          why="GFLOPS instead of TFLOPS"),
    Wrong("peak-chip", "check-peak-tflops", "ONE core",
          edits=((PEAK, PEAK + " * config.num_cores"),), why="the chip's peak, not one core's"),
    Wrong("peak-int8", "check-peak-tflops", "int8",
          edits=((PEAK, PEAK.replace("float16", "int8")),), why="the int8 MAC rate"),
    Wrong("peak-hard-coded", "check-peak-tflops", "a2's answer",
          edits=((PEAK, "14.7456"),), why="the a2 answer hard-coded"),
    Wrong("copy-no-round-up", "check-copy-cycles", "round the bytes up",
          edits=((COPY, COPY.replace("moved /", "nbytes /")),), why="bytes not rounded up to 32 B granules"),
    Wrong("copy-round-down", "check-copy-cycles", "rounded the bytes down",
          edits=(("moved = -(-nbytes // granule) * granule", "moved = nbytes // granule * granule"),),
          why="bytes rounded down"),
    Wrong("copy-no-startup", "check-copy-cycles", "start-up",
          edits=((COPY, COPY.replace("config.gm_startup_cycles + ", "")),), why="forgets the DMA start-up"),
    Wrong("copy-no-burst-overhead", "check-copy-cycles", "burst's own overhead",
          edits=((COPY, COPY.replace(" + config.gm_burst_overhead_cycles", "")),), why="forgets the burst overhead"),
    Wrong("copy-hard-coded-a2", "check-copy-cycles", "other DMA numbers",
          edits=((COPY, "64 + 1 + moved / 64"),), why="a2's constants hard-coded"),
    Wrong("copy-chip-share", "check-copy-cycles", "copy took",
          edits=((COPY, COPY.replace("gm_rate(1)", "gm_rate(config.num_cores)")),),
          why="uses the per-core share of a full chip instead of one core's rate"),
    Wrong("copy-wrong-prediction", "check-copy-cycles", "hand prediction",
          edits=(("return 64 + 1 + 1024 / 64", "return 64 + 1 + 1000 / 64"),),
          why="the hand prediction forgets the granule rounding"),
]
