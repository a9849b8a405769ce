"""Wrong solutions of lab 04 (blocked Conv2D): the input-reuse blocking, the NC1HWC0 transform, the img2col
kernel's load_data_3d call, and the tiling that beats the default."""

from .harness import Wrong

LAB = "04_conv2d"
SETUP = ["04_con-356a192b"]
CHECKS = {
    "check-conv-reuse": SETUP + ["04_con-bd307a3e"],
    "check-nc1hwc0-transform": SETUP + ["04_con-f6e1126c"],
    "check-conv-img2col": SETUP + ["04_con-img2col"],
    "check-conv-tiling": SETUP + ["04_con-77de68da", "04_con-761f22b2", "04_con-92cfceb3"],
}

BANDS = "for n in range(g.n) for ho0 in range(0, g.ho, t.rows)]"
FIRST_COUNT = "return ho0 * g.sh, (rows - 1) * g.sh + (g.kh - 1) * g.dh + 1"
BAND_ROW = "return r * self.g.sh + i * self.g.dh"
LOAD = "                self.load_row(copies, band, j, slot, first + slot)"
REUSE = "check-conv-reuse"

ROUND_IN = "ns.data_copy_pad(t, x[src + p0:], ns.DataCopyExtParams(cnt, isz, 0, 0))"
ROUND_OUT = "ns.data_copy_pad(x5[dst + p0 * c0:], t, ns.DataCopyExtParams(cnt, isz, 0, (c0 - 1) * isz))"
TRANSFORM = "check-nc1hwc0-transform"

IMG2COL = "check-conv-img2col"
TILING = "check-conv-tiling"
MY_TILING = "return choose_tiling(g3).replace(rows=4, m_tile=112)"

WRONG = [
    # --- exercise 1: the band -------------------------------------------------------------------------
    Wrong("no-last-band", REUSE, "in no band",
          edits=((BANDS, "for n in range(g.n) for ho0 in range(0, g.ho - t.rows + 1, t.rows)]"),),
          why="drops the shorter last band"),
    Wrong("band-past-the-end", REUSE, "does not fit",
          edits=(("return [(n, ho0, min(t.rows, g.ho - ho0))", "return [(n, ho0, t.rows)"),),
          why="every band has t.rows rows, the last one past the output"),
    Wrong("one-row-bands", REUSE, ("output is right", "shorter bands load more"),
          edits=(("return [(n, ho0, min(t.rows, g.ho - ho0)) for n in range(g.n) for ho0 in range(0, g.ho, t.rows)]",
                  "return [(n, ho0, 1) for n in range(g.n) for ho0 in range(g.ho)]"),),
          why="correct, but bands of one output row: every band reloads its halo"),
    Wrong("band-row-no-stride", REUSE, "ignores the stride",
          edits=((BAND_ROW, "return r + i * self.g.dh"),), why="band_row steps by one row per output row"),
    Wrong("band-row-no-dilation", REUSE, "ignores the dilation",
          edits=((BAND_ROW, "return r * self.g.sh + i"),), why="band_row steps by one row per height tap"),
    Wrong("no-dilation-anywhere", REUSE, "ignores the dilation",
          edits=((FIRST_COUNT, "return ho0 * g.sh, (rows - 1) * g.sh + g.kh"), (BAND_ROW, "return r * self.g.sh + i")),
          why="forgets the dilation in the band's row count and in band_row"),
    Wrong("stride-dilation-swapped", REUSE, "swaps the stride and the dilation",
          edits=((BAND_ROW, "return r * self.g.dh + i * self.g.sh"),), why="stride and dilation swapped"),
    Wrong("no-halo", REUSE, "are missing",
          edits=((FIRST_COUNT, "return ho0 * g.sh, rows * g.sh"),),
          why="loads one stride per output row: the rows below the band's last window start are missing"),
    Wrong("band-start-without-stride", REUSE, "first input row",
          edits=((FIRST_COUNT, "return ho0, (rows - 1) * g.sh + (g.kh - 1) * g.dh + 1"),),
          why="the band starts at input row ho0 instead of ho0 * stride"),
    Wrong("image-coordinates", REUSE, "padded input has rows",
          edits=((FIRST_COUNT, "return ho0 * g.sh - g.ph, (rows - 1) * g.sh + (g.kh - 1) * g.dh + 1"),),
          why="counts rows in image coordinates (minus the padding): load_row takes padded rows"),
    Wrong("one-copy", REUSE, "no copy for width tap",
          edits=(("        for j in range(self.g.kw):\n            for slot in range(count):",
                  "        for j in range(1):\n            for slot in range(count):"),),
          why="loads the band once, for width tap 0 only"),
    Wrong("loads-per-output-row", REUSE, ("output is right", "times"),
          edits=((LOAD, "                for r in range(band.rows):\n"
                        "                    if slot in [r * self.g.sh + i * self.g.dh for i in range(self.g.kh)]:\n"
                        "                        self.load_row(copies, band, j, slot, first + slot)"),),
          why="loads each row once per (output row, tap) that reads it, as the direct kernel does"),
    # --- exercise 2: the transform ----------------------------------------------------------------------
    Wrong("no-rounds", TRANSFORM, ("SLOTS", "2,350 positions"),
          edits=(("            for p0 in range(0, hw, SLOTS):\n                cnt = min(SLOTS, hw - p0)\n",
                  "            for p0 in [0]:\n                cnt = hw\n"),),
          why="one DMA per channel plane, however long the plane"),
    Wrong("round-source-not-advanced", TRANSFORM, "hold the values of positions 0",
          edits=((ROUND_IN, ROUND_IN.replace("x[src + p0:]", "x[src:]")),), why="every round reads the plane's start"),
    Wrong("round-destination-without-c0", TRANSFORM, "where does round p0 write",
          edits=((ROUND_OUT, ROUND_OUT.replace("x5[dst + p0 * c0:]", "x5[dst + p0:]")),),
          why="round p0 lands p0 elements on, not p0 positions"),
    Wrong("no-padding-zeros", TRANSFORM, "padding channels",
          edits=(("            zeros(x5[(b * c1 + c1 - 1) * hw * c0:], hw * c0)", "            pass"),),
          why="forgets the zero padding channels"),
    Wrong("lane-without-modulo", TRANSFORM, ("past the end", "'x5'", "channels from C0 on"),
          edits=(("dst = (b * c1 + ch // c0) * hw * c0 + ch % c0", "dst = (b * c1 + ch // c0) * hw * c0 + ch"),),
          why="lane ch instead of ch % C0"),
    Wrong("gap-of-c0", TRANSFORM, "C0",
          edits=((ROUND_OUT, ROUND_OUT.replace("(c0 - 1) * isz", "c0 * isz")),),
          why="a gap of C0 elements instead of C0 - 1: positions land C0 + 1 apart"),
    Wrong("images-overlap", TRANSFORM, "image 0's place",
          edits=(("dst = (b * c1 + ch // c0) * hw * c0 + ch % c0", "dst = (ch // c0) * hw * c0 + ch % c0"),),
          why="forgets the image in x5: every image lands on image 0"),
    Wrong("zeros-after-channels", TRANSFORM, "written after",
          edits=(("        if c % c0:\n            zeros(x5[(b * c1 + c1 - 1) * hw * c0:], hw * c0)   # MTE3, before the "
                  "channels (same pipe: in order)\n", ""),
                 ("                q.free_tensor(t)\n",
                  "                q.free_tensor(t)\n        if c % c0:\n"
                  "            zeros(x5[(b * c1 + c1 - 1) * hw * c0:], hw * c0)\n")),
          why="writes the zero block after the channels, over the last block's real channels"),
    # --- exercise 3: the load_data_3d call ----------------------------------------------------------------
    Wrong("pad-top-every-band", IMG2COL, "pad_top",
          edits=(("pad_top=tile.first_row - top", "pad_top=g.ph"),), why="the layer's padding above every band"),
    Wrong("no-row-padding", IMG2COL, "pad_top",
          edits=(("pad_top=tile.first_row - top, pad_bottom=bottom - (tile.first_row + tile.l1_rows)",
                  "pad_top=0, pad_bottom=0"),), why="no padding rows at all"),
    Wrong("m-extension-not-rounded", IMG2COL, "multiple of 16",
          edits=(("m_extension=-(-tile.m // 16) * 16", "m_extension=tile.m"),), why="m_extension = tile.m"),
    Wrong("m-extension-m-tile", IMG2COL, ("output is right", "larger m_extension"),
          edits=(("m_extension=-(-tile.m // 16) * 16", "m_extension=self.t.m_tile"),),
          why="always a whole m_tile: the last Mmad of a band builds rows no one reads"),
    Wrong("k-extension-k-tile", IMG2COL, "k_extension",
          edits=(("k_extension=tile.k", "k_extension=self.t.k_tile"),),
          why="always a whole k_tile: a Cin block's K can be shorter"),
    Wrong("m-start-zero", IMG2COL, "m_start",
          edits=(("m_start=tile.m0", "m_start=0"),), why="every Mmad of a band starts at position 0"),
    Wrong("k-start-zero", IMG2COL, "k_start",
          edits=(("k_start=tile.k0", "k_start=0"),), why="every K step reads the first columns"),
    Wrong("no-stride", IMG2COL, "stride",
          edits=(("stride_h=g.sh, stride_w=g.sw", "stride_h=1, stride_w=1"),), why="forgets the stride"),
    Wrong("no-dilation", IMG2COL, "dilation",
          edits=(("dilation_h=g.dh, dilation_w=g.dw", "dilation_h=1, dilation_w=1"),), why="forgets the dilation"),
    Wrong("channels-not-rounded", IMG2COL, "channel_size",
          edits=(("channel_size=-(-tile.cin // g.c0) * g.c0", "channel_size=tile.cin"),),
          why="the block's channels, not rounded up to C0"),
    Wrong("channels-of-the-layer", IMG2COL, ("channel_size x l1_h x l1_w", "split into blocks"),
          edits=(("channel_size=-(-tile.cin // g.c0) * g.c0", "channel_size=g.c1 * g.c0"),),
          why="all the layer's channels, not the Cin block's"),
    Wrong("l1-rows-of-the-window", IMG2COL, ("channel_size x l1_h x l1_w", "no padding rows"),
          edits=(("l1_h=tile.l1_rows", "l1_h=g.in_rows(tile.rows)"),), why="the window's rows, padding included"),
    Wrong("left-padding-of-rows", IMG2COL, "pad_left",
          edits=(("pad_left=g.pw, pad_right=g.pw", "pad_left=g.ph, pad_right=g.ph"),),
          why="the row padding for the columns too"),
    # --- exercise 4: the tiling ----------------------------------------------------------------------------
    Wrong("the-default", TILING, ("M padding", "3% faster"),
          edits=((MY_TILING, "return choose_tiling(g3)"),), why="the default itself"),
    Wrong("small-bands", TILING, "M padding",
          edits=((MY_TILING, "return choose_tiling(g3).replace(rows=2, m_tile=64)"),),
          why="smaller bands for a shorter start: the wrong lever, and 56-position Mmads"),
    Wrong("rows-6", TILING, "M padding",
          edits=((MY_TILING, "return choose_tiling(g3).replace(rows=6)"),), why="168 positions: 112 + 56"),
    Wrong("m-tile-128", TILING, "M padding",
          edits=((MY_TILING, "return choose_tiling(g3).replace(m_tile=128)"),), why="196 positions: 128 + 68"),
    Wrong("too-big", TILING, "does not run",
          edits=((MY_TILING, "return choose_tiling(g3).replace(rows=14)"),), why="a band that does not fit L1"),
    Wrong("not-a-tiling", TILING, "ConvTiling",
          edits=((MY_TILING, 'return "rows=4"'),), why="a string"),
    # --- messages that used to point elsewhere (issue 25 item 5) -----------------------------------------
    Wrong("gap-too-large", TRANSFORM, ("gap of 34 b", "gap between the blocks or the start offset"),
          edits=((ROUND_OUT, ROUND_OUT.replace("(c0 - 1) * isz", "(c0 + 1) * isz")),),
          why="a gap of C0 + 1 elements: the write runs past x5's end (not a 'shorter last tile')"),
    Wrong("destination-offset-too-large", TRANSFORM, ("from byte 70", "start offset is too large"),
          edits=((ROUND_OUT, ROUND_OUT.replace("x5[dst + p0 * c0:]", "x5[dst + p0 * c0 + hw:]")),),
          why="each plane written hw elements too far on (not a 'shorter last tile')"),
    Wrong("k-extension-too-large", IMG2COL, ("k_start + k_extension", "not more"),
          edits=(("k_extension=tile.k,", "k_extension=tile.k + g.c0,"),),
          why="one C0 of columns more than the K step: not a buffer to enlarge"),
    Wrong("host-transform", TRANSFORM, ("did not compute it on the simulator", "data_copy_pad"),
          edits=(("    for b in range(n):\n", "    x5.buf.flat[:] = formats.nchw_to_nc1hwc0(x.buf.flat.reshape(n, c, h, w)).ravel()\n"
                                           "    for b in range(0):\n"),),
          why="x5 written from numpy on the host: no DMA at all"),
]
