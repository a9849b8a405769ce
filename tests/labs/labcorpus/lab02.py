"""Wrong solutions of lab 02 (softmax): the online softmax and its tile."""

from .harness import Wrong

LAB = "02_softmax"
SETUP = ["02_sof-356a192b"]
KERNEL = ["02_sof-b1d57811"]
CHECKS = {
    "check-softmax": SETUP + KERNEL,
    "check-softmax-tile": SETUP + KERNEL + ["02_sof-choose"],
}
RESCALE = "s = s * math.exp(m - m_new) + self.reduce(ns.reduce_sum, w, n)"
THREE_PASS = '''        m, s = -math.inf, 0.0
        for off, n in self.chunks():
            m = max(m, self.reduce(ns.reduce_max, self.load(base, off, n), n))
        for off, n in self.chunks():
            w = self.load(base, off, n)
            ns.adds(w, w, -m, n)
            ns.exp(w, w, n)
            s += self.reduce(ns.reduce_sum, w, n)
        for off, n in self.chunks():'''

WRONG = [
    Wrong("no-rescale", "check-softmax", ("max in a later chunk", "rescaled by exp(m_old - m_new)"),
          edits=((RESCALE, "s = s + self.reduce(ns.reduce_sum, w, n)"),), why="never rescales the running sum"),
    Wrong("max-starts-at-zero", "check-softmax", ("very negative", "instead of -inf"),
          edits=(("m, s = -math.inf, 0.0", "m, s = 0.0, 0.0"),), why="running max starts at 0"),
    Wrong("flipped-factor", "check-softmax", "0 x inf",
          edits=((RESCALE, RESCALE.replace("math.exp(m - m_new)", "math.exp(m_new - m)")),),
          why="rescale factor the wrong way round"),
    Wrong("three-pass", "check-softmax", "three times",
          edits=(("        m, s = -math.inf, 0.0\n        for off, n in self.chunks():\n            w = self.load(base, off, n)\n"
                  "            m_new = max(m, self.reduce(ns.reduce_max, w, n))\n"
                  "            if m_new == -math.inf:       # masked so far (all -inf): this chunk adds nothing\n"
                  "                continue\n            ns.adds(w, w, -m_new, n)\n"
                  "            ns.exp(w, w, n)\n            " + RESCALE + "\n            m = m_new\n"
                  "        for off, n in self.chunks():", THREE_PASS),),
          why="max, sum and output in three passes"),
    Wrong("no-max-shift", "check-softmax", ("ZeroDivisionError", "underflows"),
          edits=(("            ns.adds(w, w, -m, n)\n            ns.exp(w, w, n)\n            self.store",
                  "            ns.exp(w, w, n)\n            self.store"),
                 ("1.0 / s if s > 0", "1.0 / (s * math.exp(m)) if s > 0")),
          why="pass 2 computes exp(x) and divides by the rescaled sum: fine in maths, overflows in fp16"),
    Wrong("no-v-s-flag", "check-softmax", "V_S",
          edits=(("        ns.set_flag(ns.HardEvent.V_S, 0)\n        ns.wait_flag(ns.HardEvent.V_S, 0)\n", ""),),
          why="reads the reduction on the scalar unit without the V -> S flag"),
    Wrong("chunk-max-in-pass-2", "check-softmax", "WHOLE row",
          edits=(("            w = self.load(base, off, n)\n            ns.adds(w, w, -m, n)\n            ns.exp(w, w, n)\n"
                  "            self.store(base, off, n, w, 1.0 / s",
                  "            w = self.load(base, off, n)\n            mc = self.reduce(ns.reduce_max, w, n)\n"
                  "            ns.adds(w, w, -mc, n)\n            ns.exp(w, w, n)\n"
                  "            self.store(base, off, n, w, 1.0 / s"),),
          why="pass 2 subtracts each chunk's own maximum"),
    Wrong("tile-default", "check-softmax-tile", ("the fastest tile that fits", "a longer tile is faster"),
          cells={"02_sof-choose": "def choose_tile(cols, dtype):\n    return 4096\n"},
          why="always the default tile of 4096"),
    Wrong("tile-fp16-for-all", "check-softmax-tile", "does not fit UB",
          cells={"02_sof-choose": "def choose_tile(cols, dtype):\n    return 16128\n"},
          why="the fp16 answer for fp32 too"),
    Wrong("tile-whole-row", "check-softmax-tile", "does not fit UB",
          cells={"02_sof-choose": "def choose_tile(cols, dtype):\n    return -(-cols // 16) * 16\n"},
          why="the whole row as one tile, however long"),
    Wrong("tile-float", "check-softmax-tile", "must be an int",
          cells={"02_sof-choose": "def choose_tile(cols, dtype):\n    return 196608 / 12.0625\n"},
          why="a float tile"),
]

MASK_GUARD = ("            if m_new == -math.inf:       # masked so far (all -inf): this chunk adds nothing\n"
              "                continue\n")
NAN_FACTOR = "1.0 / s if s > 0 else math.nan"
WRONG += [
    Wrong("masked-chunk-nan", "check-softmax", ("masked first chunks", "exp(-inf - (-inf))"),
          edits=((MASK_GUARD, ""),),
          why="no guard for a chunk that is all -inf while the running maximum is -inf: NaN for the whole row"),
    Wrong("masked-row-divides-by-zero", "check-softmax", ("fully masked", "NaN"),
          edits=((NAN_FACTOR, "1.0 / s"),), why="1 / s for a row that is -inf everywhere (s = 0)"),
    Wrong("masked-row-zeros", "check-softmax", ("fully masked", "torch.softmax"),
          edits=(("            ns.adds(w, w, -m, n)\n            ns.exp(w, w, n)\n            self.store",
                  "            ns.adds(w, w, -m if m > -math.inf else 0.0, n)\n            ns.exp(w, w, n)\n"
                  "            self.store"),
                 (NAN_FACTOR, "1.0 / s if s > 0 else 0.0")),
          why="a fully masked row written as zeros (the flash-attention convention), not NaN"),
    Wrong("tile-constant-that-fits-fp32", "check-softmax-tile",
          ("16 elements longer than your tile", "a longer tile is faster"),
          cells={"02_sof-choose": "def choose_tile(cols, dtype):\n    return min(9728, -(-cols // 16) * 16)\n"},
          why="fp32's largest tile for both dtypes: fits everywhere, an extra chunk on rows just longer than it"),
    Wrong("host-softmax", "check-softmax", ("did not compute it on the simulator", "ns.exp"),
          cells={"02_sof-b1d57811": __import__("labcorpus.harness", fromlist=["notebook"]).notebook("02_softmax")[
              "02_sof-b1d57811"] + """

class MySoftmax(MySoftmax):
    def process_row(self, base: int) -> None:
        row = self.x.buf.flat[base:base + self.cols].astype(np.float64)
        with np.errstate(invalid="ignore"):
            e = np.exp(row - row.max())
            self.y.buf.flat[base:base + self.cols] = e / e.sum()
        self.load(base, 0, min(self.cols, self.tile))   # one dummy chunk through UB
"""},
          why="the softmax in numpy on the host, one dummy load"),
]
