"""Wrong solutions of lab 05 (FP16 precision): the accuracy bar, a layer that meets it, a dynamic loss scaler."""

from .harness import Wrong

LAB = "05_fp16"
SETUP = ["05_fp1-356a192b"]
CHECKS = {
    "check-accuracy-bar": SETUP + ["05_fp1-bd307a3e"],
    "check-fp16-layer": SETUP + ["05_fp1-f6e1126c"],
    "check-loss-scaler": SETUP + ["05_fp1-scaler"],
}
LAYER = "05_fp1-f6e1126c"
ISFINITE = "if not all(np.isfinite(g).all() for g in grads16):"
UNSCALE = "grads = [g.astype(np.float32) / np.float32(self.scale) for g in grads16]"
GROW = ("        if self.clean_steps == self.growth_interval:\n            self.scale *= 2\n"
        "            self.clean_steps = 0\n")


def _layer(body: str) -> dict:
    return {LAYER: "def fp16_layer(x16, w16, conv):\n" + body}


WRONG = [
    # --- exercise 1: the accuracy bar ------------------------------------------------------------------
    Wrong("bar-at-the-bar", "check-accuracy-bar", "not >=",
          edits=(("np.count_nonzero(err > 1e-3)", "np.count_nonzero(err >= 1e-3)"),),
          why="an error exactly at 0.1 % counted as above the bar"),
    Wrong("bar-fraction-strict", "check-accuracy-bar", "not <",
          edits=(("bool(fraction <= 1e-3)", "bool(fraction < 1e-3)"),), why="a fraction exactly at 0.1 % fails"),
    Wrong("bar-no-floor", "check-accuracy-bar", "floor",
          edits=(("np.maximum(np.abs(e[both]), floor)", "np.abs(e[both])"),), why="a pure relative error near zero"),
    Wrong("bar-nan-disagrees", "check-accuracy-bar", "where e is nan",
          edits=(("    err[np.isnan(e) & np.isnan(a)] = 0.0            # both NaN: they agree\n", ""),),
          why="NaN against NaN counted as an error"),
    Wrong("bar-any-infinity", "check-accuracy-bar", "the same infinity",
          edits=(("err[np.isinf(e) & (a == e)] = 0.0", "err[np.isinf(e) & np.isinf(a)] = 0.0"),),
          why="+inf against -inf counted as agreement"),
    Wrong("bar-count-not-share", "check-accuracy-bar", "their share",
          edits=(("fraction = np.count_nonzero(err > 1e-3) / err.size", "fraction = np.count_nonzero(err > 1e-3)"),),
          why="the number of elements above the bar instead of their share"),
    Wrong("bar-len", "check-accuracy-bar", "err.size",
          edits=(("np.count_nonzero(err > 1e-3) / err.size", "np.count_nonzero(err > 1e-3) / len(err)"),),
          why="len() of a 2-D array is its number of rows"),
    Wrong("bar-naive-formula", "check-accuracy-bar", "nan",
          edits=(("    err = np.full(a.shape, np.inf)\n    both = np.isfinite(a) & np.isfinite(e)\n"
                  "    err[both] = np.abs(a[both] - e[both]) / np.maximum(np.abs(e[both]), floor)\n",
                  "    err = np.abs(a - e) / np.maximum(np.abs(e), floor)\n    both = None\n"),),
          why="the formula alone: inf - inf and NaN give NaN errors that count as passing"),
    Wrong("bar-empty", "check-accuracy-bar", "empty array",
          edits=(("    if err.size == 0:\n        return True, 0.0, 0.0\n", ""),), why="np.max of an empty array"),
    # --- exercise 2: a layer that meets the bar ---------------------------------------------------------
    Wrong("layer-naive", "check-fp16-layer", "accumulates in fp16",
          cells=_layer("    return conv(x16, w16, acc_dtype='float16', out_dtype=np.float16, config=mp.FP16_ACC).output, 1.0"),
          why="the lab's naive layer: an fp16 accumulator"),
    Wrong("layer-host-cast", "check-fp16-layer", ("writes float32 from the cube", "host"),
          cells=_layer("    y = conv(x16, w16, acc_dtype='float32', out_dtype=np.float32).output\n"
                       "    s = 2.0 ** int(np.ceil(np.log2(max(float(np.abs(y).max()) / 60000, 1.0))))\n"
                       "    return (y / s).astype(np.float16), s"),
          why="the Cube writes fp32 and the host scales and casts afterwards"),
    Wrong("layer-always-divide", "check-fp16-layer", "subnormal",
          edits=(("    scale = 1.0\n", "    scale = 256.0\n"),),
          why="always divides by 256, pushing small inputs into the subnormals"),
    Wrong("layer-no-scale", "check-fp16-layer", "65504",
          cells=_layer("    return conv(x16, w16, acc_dtype='float32', out_dtype=np.float16).output, 1.0"),
          why="the right accumulator, no scale"),
    Wrong("layer-not-power-of-two", "check-fp16-layer", "not a power of two",
          edits=(("        scale *= 2.0", "        scale *= 3.0"),), why="scales by 3: every input is rounded"),
    Wrong("layer-scale-not-returned", "check-fp16-layer", ("too small everywhere", "not the divisor"),
          edits=(("            return y16, scale", "            return y16, 1.0"),),
          why="divides the input but returns scale 1"),
    Wrong("layer-fp32-operands", "check-fp16-layer", "operands",
          cells=_layer("    y = conv(x16.astype(np.float32), w16.astype(np.float32), out_dtype=np.float32).output\n"
                       "    return (y / 16).astype(np.float16), 16.0"),
          why="fp32 operands on the Cube"),
    Wrong("layer-host-only", "check-fp16-layer", "never called",
          cells=_layer("    return mp.conv_reference(x16, w16).astype(np.float16), 1.0"), why="the convolution on the host"),
    Wrong("layer-multiplied-back", "check-fp16-layer", "not what the cube wrote",
          edits=(("            return y16, scale", "            return (y16.astype(np.float32) * scale / 2).astype(np.float16), 2.0"),),
          why="post-processes the Cube's output on the host"),
    # --- exercise 3: the loss scaler --------------------------------------------------------------------
    Wrong("scaler-isinf-only", "check-loss-scaler", "nan",
          edits=((ISFINITE, "if any(np.isinf(g).any() for g in grads16):"),), why="tests for inf but not NaN"),
    Wrong("scaler-first-parameter", "check-loss-scaler", "parameter 2",
          edits=((ISFINITE, "if not np.isfinite(grads16[0]).all():"),), why="looks at the first parameter only"),
    Wrong("scaler-threshold", "check-loss-scaler", "largest finite",
          edits=((ISFINITE, "if any(not (np.abs(g) < 65504).all() for g in grads16):"),),
          why="treats 65504 as an overflow"),
    Wrong("scaler-no-skip", "check-loss-scaler", "must be skipped",
          edits=(("            self.clean_steps = 0\n            return None\n", "            self.clean_steps = 0\n"),),
          why="halves the scale but applies the step anyway"),
    Wrong("scaler-no-halve", "check-loss-scaler", "halves the scale",
          edits=(("            self.scale /= 2\n", ""),), why="skips the step but keeps the scale"),
    Wrong("scaler-no-reset", "check-loss-scaler", "resets the count",
          edits=(("            self.clean_steps = 0\n            return None\n", "            return None\n"),),
          why="an overflow does not reset the count of clean steps"),
    Wrong("scaler-no-growth", "check-loss-scaler", "the scale doubles",
          edits=((GROW, ""),), why="never grows again"),
    Wrong("scaler-off-by-one", "check-loss-scaler", "the scale doubles",
          edits=(("if self.clean_steps == self.growth_interval:", "if self.clean_steps > self.growth_interval:"),),
          why="grows one step late"),
    Wrong("scaler-count-not-restarted", "check-loss-scaler", "the count starts again",
          edits=(("if self.clean_steps == self.growth_interval:", "if self.clean_steps >= self.growth_interval:"),
                 ("            self.scale *= 2\n            self.clean_steps = 0\n", "            self.scale *= 2\n")),
          why="after a growth the count is not restarted: it grows at every step"),
    Wrong("scaler-unscale-in-fp16", "check-loss-scaler", "divided in fp16",
          edits=((UNSCALE, "grads = [(g / self.scale).astype(np.float32) for g in grads16]"),),
          why="divides the fp16 gradients in fp16"),
    Wrong("scaler-float64", "check-loss-scaler", "float32",
          edits=((UNSCALE, "grads = [g.astype(np.float64) / self.scale for g in grads16]"),),
          why="float64 gradients"),
    Wrong("scaler-unscale-after-update", "check-loss-scaler", "updated scale",
          edits=(("        " + UNSCALE + "   # the scale they were computed with\n", ""),
                 ("        return grads\n", "        " + UNSCALE + "\n        return grads\n")),
          why="unscales with the scale of the next step"),
]
