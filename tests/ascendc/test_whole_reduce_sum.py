"""Row sums of an unaligned matrix with WholeReduceSum's lane mask and DataCopyPad tails, transliterated.

Source: cannmirror/asc-devkit (mirror of gitcode cann/asc-devkit),
examples/00_introduction/10_unaligned_wholereduces/whole_reduce_sum_custom.asc
(commit 0d78e35affbfd4530add2ff20dd9bdd1fe86188a). The tiling struct arrives as a Python object.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import npusim as ns

pytestmark = pytest.mark.ascendc
byteAlign = 32


@dataclass
class WholeReduceSumCustomTilingData:
    totalLength: int
    rows: int
    cols: int


def ceil_div(a, b):
    if b == 0:
        return a
    return (a + b - 1) // b


class KernelWholeReduceSum:
    def Init(self, x, y, tilingData, datatype):
        self.datatype = datatype
        self.pipe = ns.TPipe()
        self.inQueueX, self.outQueueY = ns.TQue(ns.TPosition.VECIN), ns.TQue(ns.TPosition.VECOUT)
        self.rows = tilingData.rows
        self.cols = tilingData.cols
        self.totalLength = tilingData.totalLength
        size = datatype.itemsize
        self.colAligned = ceil_div(self.cols * size, byteAlign) * byteAlign
        self.totalSizeAligned = self.colAligned * self.rows
        reducedSizeAligned = ceil_div(self.rows * size, byteAlign) * byteAlign
        self.xGm = x
        self.yGm = y
        self.pipe.init_buffer(self.inQueueX, 1, self.totalSizeAligned)
        self.pipe.init_buffer(self.outQueueY, 1, reducedSizeAligned)

    def Process(self):
        self.CopyIn()
        self.Compute()
        self.CopyOut()

    def CopyIn(self):
        size = self.datatype.itemsize
        xLocal = self.inQueueX.alloc_tensor(self.datatype)
        colBytes = self.cols * size
        copyParams = ns.DataCopyExtParams(self.rows, colBytes, 0, 0, 0)
        rpad = (self.colAligned - self.cols * size) // size
        padParams = ns.DataCopyPadExtParams(False, 0, rpad, 0)
        ns.data_copy_pad(xLocal, self.xGm, copyParams, padParams)
        self.inQueueX.enque(xLocal)

    def Compute(self):
        xLocal = self.inQueueX.deque()
        yLocal = self.outQueueY.alloc_tensor(self.datatype)
        mask = 256 // self.datatype.itemsize  # noqa: F841 (unused in the source too)
        srcStride = self.colAligned // byteAlign
        ns.whole_reduce_sum(yLocal, xLocal, self.cols, self.rows, 1, 1, srcStride)
        self.outQueueY.enque(yLocal)
        self.inQueueX.free_tensor(xLocal)

    def CopyOut(self):
        yLocal = self.outQueueY.deque()
        reducedBytes = self.rows * self.datatype.itemsize
        copyParams = ns.DataCopyExtParams(1, reducedBytes, 0, 0, 0)
        ns.data_copy_pad(self.yGm, yLocal, copyParams)
        self.outQueueY.free_tensor(yLocal)


@ns.kernel
def whole_reduce_sum_custom(x, y, tiling):
    op = KernelWholeReduceSum()
    op.Init(x, y, tiling, ns.float16)
    op.Process()


def test_whole_reduce_sum_matches_numpy():
    ROWS, COLS = 13, 123
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (ROWS, COLS)).astype(np.float16)
    y = np.zeros(ROWS, np.float16)
    ns.launch(whole_reduce_sum_custom, 1, x, y, WholeReduceSumCustomTilingData(ROWS * COLS, ROWS, COLS))
    np.testing.assert_allclose(y.astype(np.float32), x.astype(np.float32).sum(1), rtol=5e-3, atol=5e-2)
