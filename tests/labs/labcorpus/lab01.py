"""Wrong solutions of lab 01 (vector add): the tiled kernel, the speed target, the multi-core split."""

from .harness import Wrong

LAB = "01_vector_add"
SETUP = ["01_vec-356a192b"]
KERNEL = ["01_vec-c1dfd96e"]
CHECKS = {
    "check-vector-add": SETUP + KERNEL,
    "check-vector-add-fast": SETUP + KERNEL + ["01_vec-f1abd670"],
    "check-block-range": SETUP + KERNEL + ["01_vec-block"],
}

RUN_CLASS = "    MyKernelAdd(x[start:], y[start:], z[start:], length, tile, buffer_num).process()"
MULTI_SPLIT = "my_block_range(total, x.dtype.itemsize, ns.get_block_idx(), ns.get_block_num())\n"
HOST_ADD = "    z.buf.flat[start:start + length] = x.buf.flat[start:start + length] + y.buf.flat[start:start + length]"

WRONG = [
    Wrong("y-from-x", "check-vector-add", "y's tile is copied from x",
          edits=(("self.copy(y_local, self.y[offset:], count)", "self.copy(y_local, self.x[offset:], count)"),),
          why="copies y's tile from x"),
    Wrong("no-tail", "check-vector-add", "last tile",
          edits=(("for offset in range(0, self.length, self.tile):",
                  "for offset in range(0, self.length - self.tile + 1, self.tile):"),),
          why="drops the last, shorter tile"),
    Wrong("no-pad", "check-vector-add", "data_copy_pad",
          edits=(("        if (count * self.dtype.itemsize) % 32 == 0:\n            ns.data_copy(dst, src, count)\n"
                  "        else:\n            ns.data_copy_pad(dst, src, count)",
                  "        ns.data_copy(dst, src, count)"),),
          why="data_copy for tails that are not whole 32 B blocks"),
    Wrong("ignores-buffer-num", "check-vector-add", "buffer_num has no effect",
          edits=(("self.pipe.init_buffer(q, buffer_num, tile * self.dtype.itemsize)",
                  "self.pipe.init_buffer(q, 1, tile * self.dtype.itemsize)"),),
          why="always one buffer per queue"),
    Wrong("full-tile-always", "check-vector-add", "past the end",
          edits=(("count = min(self.tile, self.length - offset)", "count = self.tile"),),
          why="the last tile copies a whole tile, past the end of the vector"),
    Wrong("offset-not-advanced", "check-vector-add", "own offset",
          edits=(("self.copy(self.z[offset:], z_local, count)", "self.copy(self.z[offset // 2:], z_local, count)"),),
          why="copy_out writes to the wrong place"),
    Wrong("tile-in-elements", "check-vector-add", "init_buffer",
          edits=(("self.pipe.init_buffer(q, buffer_num, tile * self.dtype.itemsize)",
                  "self.pipe.init_buffer(q, buffer_num, tile)"),),
          why="init_buffer length in elements instead of bytes"),
    Wrong("slow-tile", "check-vector-add-fast", "start-up",
          edits=(("return 16384, 2", "return 4096, 2"),), why="a correct but short tile"),
    Wrong("misaligned-tile", "check-vector-add-fast", "512 B",
          edits=(("return 16384, 2", "return 16000, 2"),), why="tile bytes not a multiple of 512"),
    Wrong("one-buffer", "check-vector-add-fast", "two buffers",
          edits=(("return 16384, 2", "return 16384, 1"),), why="one buffer per queue"),
    Wrong("too-big", "check-vector-add-fast", "does not fit",
          edits=(("return 16384, 2", "return 32768, 2"),), why="more UB than there is"),
    Wrong("not-a-tuple", "check-vector-add-fast", "tuple",
          edits=(("return 16384, 2", "return 16384"),), why="returns the tile only"),
    Wrong("split-unaligned", "check-block-range", "not a multiple of 512",
          edits=(("    per = -(-per // align) * align         # ...to whole 512 B\n", ""),),
          why="equal shares without the 512 B rounding"),
    Wrong("split-floor", "check-block-range", "never computed",
          edits=(("per = -(-total // blocks)", "per = total // blocks"),
                 ("per = -(-per // align) * align", "per = per // align * align")),
          why="rounds the shares down: the end of the vector belongs to no block"),
    Wrong("split-negative", "check-block-range", "negative length",
          edits=(("start = min(block * per, total)", "start = block * per"),),
          why="blocks past the end get a negative length"),
    Wrong("split-float", "check-block-range", "must be an int",
          edits=(("per = -(-total // blocks)", "per = total / blocks"),), why="float shares"),
    Wrong("split-last-takes-all", "check-block-range", "not balanced",
          edits=(("    return start, min(per, total - start)",
                  "    if block == blocks - 1:\n        return start, total - start\n    return start, min(per, total - start)"),
                 ("per = -(-total // blocks)", "per = total // (2 * blocks)")),
          why="the last block takes whatever is left: unbalanced"),
    # --- messages that used to point elsewhere (issue 25 item 5) -----------------------------------------
    Wrong("barrier-serialises", "check-vector-add", ("pipe_barrier", "drop the barriers"),
          edits=(("            self.copy_out(offset, count)\n",
                  "            self.copy_out(offset, count)\n            ns.pipe_barrier(ns.Pipe.ALL)\n"),),
          why="a barrier after every tile: the two buffers are reserved, the stages cannot overlap"),
    Wrong("every-block-every-part", "check-block-range", ("every block computes the same part", "get_block_idx"),
          edits=(("    start, length = " + MULTI_SPLIT, "    start, length = 0, total\n"),),
          why="every block adds the whole vector (not a reduction across blocks)"),
    Wrong("output-offset-past-the-end", "check-vector-add", ("starts at byte 32", "offset"),
          edits=(("self.copy(self.z[offset:], z_local, count)", "self.copy(self.z[offset + 16:], z_local, count)"),),
          why="copy_out writes 16 elements on: its start is past the end of a short z (not a 'shorter last tile')"),
    # --- the work must be issued on the simulator (issue 25 item 3) ---------------------------------------
    Wrong("host-add", "check-vector-add", ("did not compute it on the simulator", "ns.add"),
          edits=((RUN_CLASS, HOST_ADD),), why="writes z from numpy on the host: no DMA, no vector add"),
    Wrong("host-add-one-copy", "check-block-range", ("did not compute it on the simulator", "ns.add"),
          edits=((MULTI_SPLIT + RUN_CLASS,
                  MULTI_SPLIT + RUN_CLASS.replace(", length,", ", min(length, 16),") + "\n" + HOST_ADD),),
          why="one real tile per block, the rest from numpy on the host"),
]
