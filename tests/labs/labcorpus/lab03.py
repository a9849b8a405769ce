"""Wrong solutions of lab 03 (matmul): the tiled kernel and the tiling target."""

from .harness import Wrong, notebook

LAB = "03_matmul"
SETUP = ["03_mat-356a192b"]
KERNEL = ["03_mat-ex1"]
CHECKS = {
    "check-matmul": SETUP + KERNEL,
    "check-matmul-reuse": SETUP + ["03_mat-reuse"],
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
    Wrong("reuse-none", "check-matmul-reuse", "copied once",
          cells={"03_mat-reuse": notebook("03_matmul")["03_mat-ex1"].replace("def matmul_kernel", "def matmul_reuse_kernel")
                 + "\n\ndef reuse_tiling():\n    return MatmulTiling(128, 128, 128, 2)\n"},
          why="exercise 1's kernel: A copied once per output tile"),
    Wrong("reuse-start-index", "check-matmul-reuse", "start at fractal",
          edits=(("start_index=i * k1_all + kk // 16", "start_index=i * k1 + kk // 16"),),
          why="the strip's fractal rows are k1 (this step's) apart instead of ceil(k / 16)"),
    Wrong("reuse-same-rows", "check-matmul-reuse", "7 of the 8 blocks did (almost) nothing",
          edits=(("for row in range(ns.get_block_idx(), tiles_m, ns.get_block_num()):",
                  "for row in range(tiles_m):\n        if ns.get_block_idx():\n            break"),),
          why="block 0 does every row; other blocks nothing (correct, but 1 core of 8)"),
    Wrong("reuse-small-tiling", "check-matmul-reuse", ("reaches", "the target is 65%"),
          edits=(("return MatmulTiling(base_m=128, base_n=128, base_k=128, buffer_num=2)",
                  "return MatmulTiling(base_m=64, base_n=64, base_k=64, buffer_num=2)"),),
          why="a correct but small tile"),
    Wrong("reuse-one-buffer", "check-matmul-reuse", ("reaches", "second buffer"),
          edits=(("return MatmulTiling(base_m=128, base_n=128, base_k=128, buffer_num=2)",
                  "return MatmulTiling(base_m=128, base_n=128, base_k=128, buffer_num=1)"),),
          why="B's copies cannot overlap the Mmads"),
    Wrong("reuse-too-big", "check-matmul-reuse", "does not run",
          edits=(("return MatmulTiling(base_m=128, base_n=128, base_k=128, buffer_num=2)",
                  "return MatmulTiling(base_m=256, base_n=256, base_k=128, buffer_num=2)"),),
          why="the accumulator and strip do not fit"),
    Wrong("every-block-every-tile", "check-matmul", ("every block computes the same part", "get_block_idx"),
          edits=(("for tile in range(ns.get_block_idx(), tiles_m * tiles_n, ns.get_block_num()):",
                  "for tile in range(tiles_m * tiles_n):"),),
          why="every block computes every output tile (not a reduction: 'one partial result per block' is wrong)"),
    Wrong("host-matmul", "check-matmul", ("did not compute it on the simulator", "ns.mmad"),
          edits=(("    tiles_m, tiles_n = -(-m // t.base_m), -(-n // t.base_n)\n    for tile in range(ns.get_block_idx()",
                  "    if ns.get_block_idx() == 0:\n"
                  "        c.buf.flat[:] = (a.buf.flat.reshape(m, k).astype(np.float64)\n"
                  "                         @ b.buf.flat.reshape(k, n).astype(np.float64)).ravel()\n"
                  "    tiles_m, tiles_n = -(-m // t.base_m), -(-n // t.base_n)\n    for tile in range(0 * ns.get_block_idx()"),
                 ("ns.fixpipe(c[i0 * n + j0:], c_l0, ns.FixpipeParams(tm, tn, dst_stride=n))", "pass"),
                 ("for kk in range(0, k, t.base_k):", "for kk in range(0, 0, t.base_k):")),
          why="c from numpy on the host; the tile loop issues nothing of the product"),
]
