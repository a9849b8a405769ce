"""Wrong solutions of lab 07 (from kernel to operator): qmatmul's declaration, inference, tiling, the
tiling cache, and per-channel int8."""

from .harness import Wrong

LAB = "07_operators"
SETUP = ["07_ope-356a192b"]
CHECKS = {
    "check-qmatmul-opdef": SETUP + ["07_ope-0ade7c2c"],
    "check-qmatmul-infer": SETUP + ["07_ope-infer"],
    "check-qmatmul-tiling": SETUP + ["07_ope-tilingfn"],
    "check-tiling-cache": SETUP + ["07_ope-cache"],
    "check-int8-accuracy": SETUP + ["07_ope-4d134bc0"],
}

SCALE = 'op.input("scale", ["float32", "float32"], ["ND", "ND"], optional=True)'
OUT = 'op.output("y", ["float32", "float16"], ["ND", "ND"])'
RELU = 'op.attr("relu", bool, False, doc="ReLU on the result, applied in the Fixpipe")'
INNER = '''    if x[1] != w[0]:
        ctx.fail(f"x is {x} and w is {w}: x has k={x[1]} columns but w has {w[0]} rows")
'''
FIXPIPE = '''    if int8 and not ctx.config.has_fixpipe:
        ctx.fail(f"int8 inputs are dequantised in the Fixpipe, which the '{ctx.config.name}' core does not have")
    if ctx.attrs["relu"] and not ctx.config.has_fixpipe:
        ctx.fail(f"relu=True is applied in the Fixpipe, which the '{ctx.config.name}' core does not have")
'''
SEARCH_BLOCKS = "blocks = MatmulTiling(bm, bn, bk, bufs)"
BLOCK_DIM = "block_dim = min(cfg.num_cores, -(-m // bm) * -(-n // bn))"
RETURN = '''    return ops.TilingData(block_dim=block_dim, tiling_key=int(dt == "int8"),
                          fields={"blocks": blocks, "relu": ctx.attrs["relu"]})'''
KEY = 'return ctx.op, -(-m // 16), n, k, ctx.input_dtypes[0].name, ctx.attrs["relu"], ctx.config.key'
QUANT = "np.clip(np.rint(w / s), -127, 127).astype(np.int8)"

WRONG = [
    # --- exercise 1: the declaration
    Wrong("opdef-scale-required", "check-qmatmul-opdef", "only scale is optional",
          edits=((SCALE, SCALE.replace(", optional=True", "")),), why="scale declared as a required input"),
    Wrong("opdef-int8-out-fp32", "check-qmatmul-opdef", "dequantises them to float16",
          edits=((OUT, OUT.replace('"float16"]', '"float32"]')),), why="int8 results declared as float32"),
    Wrong("opdef-misaligned", "check-qmatmul-opdef", "disagree within a combination",
          edits=(('op.input("w", ["float16", "int8"]', 'op.input("w", ["int8", "float16"]'),),
          why="w's dtypes listed in another order than x's: the combinations mix float16 and int8"),
    Wrong("opdef-relu-default-on", "check-qmatmul-opdef", "default",
          edits=((RELU, RELU.replace("bool, False", "bool, True")),), why="ReLU on unless asked"),
    Wrong("opdef-relu-int", "check-qmatmul-opdef", "bool",
          edits=((RELU, RELU.replace("bool, False", "int, 0")),), why="relu declared as an int"),
    Wrong("opdef-no-scale", "check-qmatmul-opdef", "inputs ['x', 'w', 'scale']",
          edits=(("    " + SCALE + "\n", ""),), why="forgets the scale input of the int8 combination"),
    Wrong("opdef-nz-weights", "check-qmatmul-opdef", "ND",
          edits=(('op.input("w", ["float16", "int8"], ["ND", "ND"])',
                  'op.input("w", ["float16", "int8"], ["ND", "FRACTAL_NZ"])'),),
          why="declares the int8 weights as packed although the operator packs them itself"),
    # --- exercise 2: inference
    Wrong("infer-no-inner-check", "check-qmatmul-infer", "x has 7 columns, w has 8 rows",
          edits=((INNER, ""),), why="never compares x's columns with w's rows"),
    Wrong("infer-vague-message", "check-qmatmul-infer", "does not say what to change",
          edits=(('ctx.fail(f"x is {x} and w is {w}: x has k={x[1]} columns but w has {w[0]} rows")',
                  'ctx.fail("the shapes do not match")'),), why="refuses without saying which argument"),
    Wrong("infer-transposed", "check-qmatmul-infer", "your output shape is",
          edits=(("return [(x[0], w[1])]", "return [(w[1], x[0])]"),), why="output shape (n, m)"),
    Wrong("infer-dtype-of-input", "check-qmatmul-infer", "output dtype is float16, expected float32",
          edits=(("return [np.dtype(np.float16 if ctx.input_dtypes[0] == np.int8 else np.float32)]",
                  "return [ctx.input_dtypes[0]]"),), why="the output dtype copied from the input"),
    Wrong("infer-no-fixpipe", "check-qmatmul-infer", "which has no Fixpipe",
          edits=((FIXPIPE, ""),), why="lets int8 and relu through on a core without a Fixpipe"),
    Wrong("infer-valueerror", "check-qmatmul-infer", "ctx.fail",
          edits=(('ctx.fail(f"x must be 2-D (m, k), got shape {x}")',
                  'raise ValueError(f"x must be 2-D (m, k), got shape {x}")'),),
          why="raises ValueError instead of refusing through the context"),
    Wrong("infer-refuses-scale-n", "check-qmatmul-infer", ("you refused a valid call", "]: qmatmul: 'scale'"),
          edits=(("if scale is not None and (len(scale) != 1 or scale[0] not in (1, w[1])):",
                  "if scale is not None and (len(scale) != 1 or scale[0] != 1):"),),
          why="refuses one scale per column; the message quotes the operator by its public name"),
    Wrong("infer-scale-count", "check-qmatmul-infer", "5 scale values",
          edits=(("if scale is not None and (len(scale) != 1 or scale[0] not in (1, w[1])):",
                  "if scale is not None and len(scale) != 1:"),), why="never compares the scale's length with n"),
    # --- exercise 3: the tiling function
    Wrong("tiling-tiny-blocks", "check-qmatmul-tiling", "K steps",
          edits=((SEARCH_BLOCKS, "blocks = MatmulTiling(16, 16, 32, 2)"),),
          why="the smallest legal blocks for every call (the 47x slower tile of the issue)"),
    Wrong("tiling-fixed-64", "check-qmatmul-tiling", "nothing to do",
          edits=((SEARCH_BLOCKS, "blocks = MatmulTiling(64, 64, 64, 2)"),), why="one block size for every shape"),
    Wrong("tiling-all-cores", "check-qmatmul-tiling", "nothing to do",
          edits=(("    return ops.TilingData(block_dim=block_dim,", "    return ops.TilingData(block_dim=cfg.num_cores,"),),
          why="every core on every call, one output tile or not"),
    Wrong("tiling-key-0", "check-qmatmul-tiling", "tiling_key",
          edits=(('tiling_key=int(dt == "int8")', "tiling_key=0"),), why="always the float16 kernel"),
    Wrong("tiling-no-relu", "check-qmatmul-tiling", "relu",
          edits=((RETURN, '    return ops.TilingData(block_dim=block_dim, tiling_key=int(dt == "int8"), '
                          'fields={"blocks": blocks})'),), why="the attribute never reaches the kernel"),
    Wrong("tiling-a2-capacity", "check-qmatmul-tiling", "do not fit the 'a2-small-l0' core",
          edits=(("blocks.check(cfg, dt, \"float32\")", "blocks.check(ns.a2, dt, \"float32\")"),),
          why="checks the buffers against a2's capacities, whatever the core"),
    Wrong("tiling-no-capacity-check", "check-qmatmul-tiling", "do not fit",
          edits=(("blocks.check(cfg, dt, \"float32\")", "pass"),), why="never checks that the buffers fit"),
    # --- exercise 4: the tiling cache
    Wrong("cache-exact-m", "check-tiling-cache", "a key on the exact shapes",
          edits=((KEY, KEY.replace("-(-m // 16)", "m")),), why="keys on the exact m"),
    Wrong("cache-no-m", "check-tiling-cache", ("differ in m", "need different keys"),
          edits=((KEY, KEY.replace("-(-m // 16), ", "")),), why="one tiling for every m"),
    Wrong("cache-no-relu", "check-tiling-cache", "differ in relu",
          edits=((KEY, KEY.replace(', ctx.attrs["relu"]', "")),), why="forgets that relu rides in the tiling"),
    Wrong("cache-no-dtype", "check-tiling-cache", "differ in dtype",
          edits=((KEY, KEY.replace(", ctx.input_dtypes[0].name", "")),), why="int8 calls get float16 tilings"),
    Wrong("cache-no-k", "check-tiling-cache", ("differ in k", "tell them apart by k"),
          edits=((KEY, KEY.replace(" n, k,", " n,")),), why="k left out: layers with the same n share a tiling"),
    Wrong("cache-no-n", "check-tiling-cache", ("differ in n", "tell them apart by n"),
          edits=((KEY, KEY.replace(" n, k,", " k,")),), why="n left out: layers with the same k share a tiling"),
    Wrong("cache-no-hardware", "check-tiling-cache", "differ in the hardware",
          edits=((KEY, KEY.replace(", ctx.config.key", "")),), why="tilings shared across cores"),
    Wrong("cache-floor-m", "check-tiling-cache", "slower with the tiling cached",
          edits=((KEY, KEY.replace("-(-m // 16)", "m // 16")),),
          why="rounds m down: m=16 and m=17 share an entry, though 17 fills a second fractal row"),
    Wrong("cache-unhashable", "check-tiling-cache", "hashable",
          edits=((KEY, KEY.replace("return ctx.op,", "return [ctx.op,") + "]"),), why="returns a list"),
    # --- exercise 5: per-channel int8
    Wrong("int8-truncate", "check-int8-accuracy", "truncates toward zero",
          edits=((QUANT, "np.clip(w / s, -127, 127).astype(np.int8)"),), why="astype(int8) without rounding"),
    Wrong("int8-floor", "check-int8-accuracy", "rounds down",
          edits=((QUANT, QUANT.replace("np.rint", "np.floor")),), why="floor instead of the nearest level"),
    Wrong("int8-per-tensor", "check-int8-accuracy", "full resolution",
          edits=(("s = np.abs(w).max(axis=0) / 127", "s = np.full(w.shape[1], np.abs(w).max() / 127)"),),
          why="one scale for the whole matrix"),
    Wrong("int8-scale-128", "check-int8-accuracy", "beyond ±127",
          edits=(("s = np.abs(w).max(axis=0) / 127", "s = np.abs(w).max(axis=0) / 128"),),
          why="the largest weight maps to 128, which int8 symmetric quantisation cannot hold"),
    Wrong("int8-zero-column", "check-int8-accuracy", "all zeros",
          edits=(("    s = np.where(s == 0, 1.0, s)\n", ""),), why="a column of zeros gets scale 0"),
    Wrong("int8-per-row", "check-int8-accuracy", "one scale per column",
          edits=(("s = np.abs(w).max(axis=0) / 127", "s = np.abs(w).max(axis=1, keepdims=True) / 127"),
                 ("s.astype(np.float32)", "s.reshape(-1).astype(np.float32)")),
          why="scales per row of w (input channel) instead of per output column"),
    Wrong("int8-scales-2d", "check-int8-accuracy", "of shape",
          edits=(("s = np.abs(w).max(axis=0) / 127", "s = np.abs(w).max(axis=0, keepdims=True) / 127"),),
          why="the scales returned as a (1, n) row"),
]
