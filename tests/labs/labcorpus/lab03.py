"""Wrong solutions of lab 03 (matmul): the tiled kernel and the tiling target."""

from .harness import Wrong

LAB = "03_matmul"
SETUP = ["03_mat-356a192b"]
KERNEL = ["03_mat-ex1"]
CHECKS = {
    "check-matmul": SETUP + KERNEL,
    "check-matmul-tiling": SETUP + KERNEL + ["03_mat-fa35e192"],
}

WRONG = [
    Wrong("b-not-transposed", "check-matmul", "if_transpose=True",
          edits=(("ns.LoadData2DParams(repeat_times=k1 * n1, if_transpose=True)",
                  "ns.LoadData2DParams(repeat_times=k1 * n1)"),), why="B's fractals not transposed into ZN"),
    Wrong("init-every-step", "check-matmul", "only the last K step",
          edits=(("cmatrix_init_val=(kk == 0)", "cmatrix_init_val=True"),), why="resets L0C on every K step"),
    Wrong("never-init", "check-matmul", ("UninitializedReadError", "the first K step must overwrite it"),
          edits=(("cmatrix_init_val=(kk == 0)", "cmatrix_init_val=False"),), why="never resets L0C"),
    Wrong("wrong-dst-stride", "check-matmul", ("written tn (the tile's width) apart", "dst_stride"),
          edits=(("ns.FixpipeParams(tm, tn, dst_stride=n)", "ns.FixpipeParams(tm, tn, dst_stride=tn)"),),
          why="rows of a tile written tn apart instead of n"),
    Wrong("no-k-tail", "check-matmul", ("UninitializedReadError", "a K loop that runs zero times"),
          edits=(("for kk in range(0, k, t.base_k):", "for kk in range(0, k - t.base_k + 1, t.base_k):"),),
          why="drops the last, shorter K step"),
    Wrong("full-edge-tiles", "check-matmul", "past the end",
          edits=(("tm, tn = min(t.base_m, m - i0), min(t.base_n, n - j0)", "tm, tn = t.base_m, t.base_n"),),
          why="edge tiles copied as whole base blocks"),
    Wrong("a-offset", "check-matmul", "offsets",
          edits=(("copy_strips(a_l1, a[i0 * k + kk:], tm, tk, k)", "copy_strips(a_l1, a[i0 + kk:], tm, tk, k)"),),
          why="A's tile offset forgets that rows are k apart"),
    Wrong("tiling-small", "check-matmul-tiling", "MACs per byte",
          edits=(("return MatmulTiling(base_m=128, base_n=256, base_k=64, buffer_num=1)",
                  "return MatmulTiling(base_m=64, base_n=64, base_k=64, buffer_num=2)"),),
          why="a correct but low-intensity tile"),
    Wrong("tiling-too-big", "check-matmul-tiling", "does not run",
          edits=(("return MatmulTiling(base_m=128, base_n=256, base_k=64, buffer_num=1)",
                  "return MatmulTiling(base_m=128, base_n=256, base_k=64, buffer_num=2)"),),
          why="two L0C buffers of 128 x 256 fp32 do not fit"),
    Wrong("tiling-tuple", "check-matmul-tiling", "expected a MatmulTiling",
          edits=(("return MatmulTiling(base_m=128, base_n=256, base_k=64, buffer_num=1)", "return (128, 256, 64, 1)"),),
          why="a tuple instead of a MatmulTiling"),
]
