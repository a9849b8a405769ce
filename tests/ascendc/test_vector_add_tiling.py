"""Element-wise Add with a host tiling struct that splits the data over 8 cores (whole and tail cores, a last
tile that overlaps the one before it), transliterated call by call.

Source: cannmirror/asc-devkit (mirror of gitcode cann/asc-devkit),
examples/00_introduction/11_vectoradd/add_tiling/vector_add_custom.asc
(commit 48913666224279976c977380b97a6a1b8c6ea1b6): the host's TilingParamsCalc/GenerateTilingData, and the
kernel's generic KernelAdd<dataType> (half, float, int16, int32) and KernelAdd<bfloat16_t> (Cast to float).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import npusim as ns

pytestmark = pytest.mark.ascendc

DATA_TYPE_SIZE = [2, 2, 4, 1, 2, 4]
BLOCK_SIZE = 32
BUFFER_NUM = 2
UB_BLOCK_NUM = 100
MAX_AVAILABLE_UB_BLOCK_NUM = UB_BLOCK_NUM // BUFFER_NUM * BUFFER_NUM
ADD_BFLOAT16, ADD_FLOAT16, ADD_FLOAT32, ADD_INT8, ADD_INT16, ADD_INT32 = range(6)
LAST_TWO_TILE = 2


@dataclass
class AddCustomTilingData:
    totalLength: int = 0
    dataType: int = 0
    blockLength: int = 0
    tileNum: int = 0
    tileLength: int = 0
    lastTileLength: int = 0
    formerNum: int = 0
    formerLength: int = 0
    formerTileNum: int = 0
    formerTileLength: int = 0
    formerLastTileLength: int = 0
    tailNum: int = 0
    tailLength: int = 0
    tailTileNum: int = 0
    tailTileLength: int = 0
    tailLastTileLength: int = 0
    isEvenCore: int = 0


def TilingParamsCalc(length, alignNum):
    """-> (tileNum, tileLength, lastTileLength); the C++ returns them through references."""
    assert alignNum != 0
    tileNum = length // (alignNum * MAX_AVAILABLE_UB_BLOCK_NUM)
    if (length // alignNum) % MAX_AVAILABLE_UB_BLOCK_NUM == 0 or tileNum == 0:
        if tileNum == 0:
            tileNum = 1
        if length < MAX_AVAILABLE_UB_BLOCK_NUM * alignNum:
            tileLength = ((length + alignNum - 1) // alignNum) * alignNum
            lastTileLength = tileLength
        else:
            tileLength = MAX_AVAILABLE_UB_BLOCK_NUM * alignNum
            lastTileLength = length - (tileNum - 1) * tileLength
    else:
        tileNum += 1
        tileLength = MAX_AVAILABLE_UB_BLOCK_NUM * alignNum
        lastTileLength = length - (tileNum - 1) * tileLength
    return tileNum, tileLength, lastTileLength


def GenerateTilingData(tiling, blockDim):
    totalLength = tiling.totalLength
    dataTypeSize = DATA_TYPE_SIZE[tiling.dataType]
    alignNum = BLOCK_SIZE // dataTypeSize
    assert alignNum != 0 and blockDim != 0
    totalLengthAligned = totalLength if totalLength % alignNum == 0 else \
        ((totalLength + alignNum - 1) // alignNum) * alignNum
    if (totalLengthAligned // alignNum) % blockDim == 0:
        blockLength = totalLengthAligned // blockDim
        tileNum, tileLength, lastTileLength = TilingParamsCalc(blockLength, alignNum)
        tiling.blockLength = blockLength
        tiling.tileNum = tileNum
        tiling.tileLength = tileLength
        tiling.lastTileLength = lastTileLength
        tiling.isEvenCore = 1
    else:
        formerNum = (totalLengthAligned // alignNum) % blockDim
        tailNum = blockDim - formerNum
        formerLength = (((totalLengthAligned + blockDim - 1) // blockDim + alignNum - 1) // alignNum) * alignNum
        tailLength = (totalLengthAligned // blockDim // alignNum) * alignNum
        formerTileNum, formerTileLength, formerLastTileLength = TilingParamsCalc(formerLength, alignNum)
        tailTileNum, tailTileLength, tailLastTileLength = TilingParamsCalc(tailLength, alignNum)
        tiling.formerNum = formerNum
        tiling.formerLength = formerLength
        tiling.formerTileNum = formerTileNum
        tiling.formerTileLength = formerTileLength
        tiling.formerLastTileLength = formerLastTileLength
        tiling.tailNum = tailNum
        tiling.tailLength = tailLength
        tiling.tailTileNum = tailTileNum
        tiling.tailTileLength = tailTileLength
        tiling.tailLastTileLength = tailLastTileLength
        tiling.isEvenCore = 0


class KernelAdd:
    """KernelAdd<dataType>; with ``bf16`` the KernelAdd<bfloat16_t> specialisation (adds in float)."""

    def __init__(self, dataType, bf16=False):
        self.dataType, self.bf16 = dataType, bf16

    def Init(self, x, y, z, tiling):
        self.pipe = ns.TPipe()
        self.inQueueX, self.inQueueY = ns.TQue(ns.TPosition.VECIN), ns.TQue(ns.TPosition.VECIN)
        self.outQueueZ = ns.TQue(ns.TPosition.VECOUT)
        b = ns.get_block_idx()
        if tiling.isEvenCore:
            self.blockLength = tiling.blockLength
            self.tileNum = tiling.tileNum
            self.tileLength = tiling.tileLength // BUFFER_NUM
            self.lastTileLength = tiling.lastTileLength
            self.xGm = x[self.blockLength * b:self.blockLength * b + self.blockLength]
            self.yGm = y[self.blockLength * b:self.blockLength * b + self.blockLength]
            self.zGm = z[self.blockLength * b:self.blockLength * b + self.blockLength]
        else:
            if b < tiling.formerNum:
                self.tileNum = tiling.formerTileNum
                self.tileLength = tiling.formerTileLength // BUFFER_NUM
                self.lastTileLength = tiling.formerLastTileLength
                start, n = tiling.formerLength * b, tiling.formerLength
            else:
                self.tileNum = tiling.tailTileNum
                self.tileLength = tiling.tailTileLength // BUFFER_NUM
                self.lastTileLength = tiling.tailLastTileLength
                start = tiling.formerLength * tiling.formerNum + tiling.tailLength * (b - tiling.formerNum)
                n = tiling.tailLength
            self.xGm, self.yGm, self.zGm = x[start:start + n], y[start:start + n], z[start:start + n]
        size = self.dataType.itemsize
        self.pipe.init_buffer(self.inQueueX, BUFFER_NUM, self.tileLength * size)
        self.pipe.init_buffer(self.inQueueY, BUFFER_NUM, self.tileLength * size)
        self.pipe.init_buffer(self.outQueueZ, BUFFER_NUM, self.tileLength * size)
        if self.bf16:
            self.tmpBuf0, self.tmpBuf1 = ns.TBuf(ns.TPosition.VECCALC), ns.TBuf(ns.TPosition.VECCALC)
            self.pipe.init_buffer(self.tmpBuf0, self.tileLength * 4)
            self.pipe.init_buffer(self.tmpBuf1, self.tileLength * 4)

    def Process(self):
        loopCount = self.tileNum * BUFFER_NUM
        for i in range(loopCount):
            self.CopyIn(i)
            self.Compute(i)
            self.CopyOut(i)

    def _offset(self, progress):
        if progress == self.tileNum * BUFFER_NUM - 1:
            return (progress - LAST_TWO_TILE) * self.tileLength + self.lastTileLength
        return progress * self.tileLength

    def CopyIn(self, progress):
        xLocal = self.inQueueX.alloc_tensor(self.dataType)
        yLocal = self.inQueueY.alloc_tensor(self.dataType)
        off = self._offset(progress)
        ns.data_copy(xLocal, self.xGm[off:], self.tileLength)
        ns.data_copy(yLocal, self.yGm[off:], self.tileLength)
        self.inQueueX.enque(xLocal)
        self.inQueueY.enque(yLocal)

    def Compute(self, progress):
        xLocal = self.inQueueX.deque()
        yLocal = self.inQueueY.deque()
        zLocal = self.outQueueZ.alloc_tensor(self.dataType)
        if self.bf16:
            tmpTensor0 = self.tmpBuf0.get(ns.float32)
            tmpTensor1 = self.tmpBuf1.get(ns.float32)
            ns.cast(tmpTensor0, xLocal, ns.RoundMode.CAST_NONE, self.tileLength)
            ns.cast(tmpTensor1, yLocal, ns.RoundMode.CAST_NONE, self.tileLength)
            ns.add(tmpTensor0, tmpTensor0, tmpTensor1, self.tileLength)
            ns.cast(zLocal, tmpTensor0, ns.RoundMode.CAST_RINT, self.tileLength)
        else:
            ns.add(zLocal, xLocal, yLocal, self.tileLength)
        self.outQueueZ.enque(zLocal)
        self.inQueueX.free_tensor(xLocal)
        self.inQueueY.free_tensor(yLocal)

    def CopyOut(self, progress):
        zLocal = self.outQueueZ.deque()
        ns.data_copy(self.zGm[self._offset(progress):], zLocal, self.tileLength)
        self.outQueueZ.free_tensor(zLocal)


@ns.kernel
def add_custom(x, y, z, tiling):
    types = {ADD_BFLOAT16: ns.bfloat16, ADD_FLOAT16: ns.float16, ADD_FLOAT32: ns.float32, ADD_INT16: ns.int16,
             ADD_INT32: ns.int32}
    if tiling.dataType not in types:
        return
    op = KernelAdd(types[tiling.dataType], bf16=tiling.dataType == ADD_BFLOAT16)
    op.Init(x, y, z, tiling)
    op.Process()


def _run(dtype_code, np_dtype, total):
    BLOCK_DIM = 8
    tiling = AddCustomTilingData(totalLength=total, dataType=dtype_code)
    GenerateTilingData(tiling, BLOCK_DIM)
    dt = np.dtype(ns.bfloat16) if np_dtype == "bfloat16" else np.dtype(np_dtype)
    rng = np.random.default_rng(total)
    x = rng.uniform(-10, 10, total).astype(dt)
    y = rng.uniform(-10, 10, total).astype(dt)
    z = np.zeros(total, dt)
    ns.launch(add_custom, BLOCK_DIM, x, y, z, tiling)
    return x, y, z, dt


@pytest.mark.parametrize("dtype_code, np_dtype, total", [
    (ADD_FLOAT16, np.float16, 8 * 16 * 1000),               # even split, 10 tiles per core
    (ADD_FLOAT16, np.float16, 19216),                        # one whole core, 7 tail cores
    (ADD_FLOAT32, np.float32, 9608),
    (ADD_BFLOAT16, "bfloat16", 19216)])
def test_vector_add_tiling_matches_numpy(dtype_code, np_dtype, total):
    x, y, z, dt = _run(dtype_code, np_dtype, total)
    np.testing.assert_array_equal(z, (x.astype(np.float32) + y.astype(np.float32)).astype(dt))


def test_the_sanitizer_finds_the_sources_overrun_of_a_short_last_tile():
    """A bug of the source: when a core's last tile is shorter than half a UB tile (here 2208 elements: tiles of
    800, the last 608), the next-to-last tile (progress tileNum * 2 - 2) copies [1600, 2400), past the core's
    2208 elements: on hardware it reads and writes the next core's data (the same sums, so the result hides
    it) and, on the last core, past the end of GM."""
    with pytest.raises(ns.OutOfBoundsError, match=r"data_copy touches elements \[0, 800\) of the slice "
                                                   r"x\[1600:2208\], which has 608 elements: 192 element\(s\) "
                                                   r"past the end of the slice"):
        _run(ADD_FLOAT16, np.float16, 8 * 16 * 137 + 16 * 5)


def test_the_sanitizer_finds_the_sources_unaligned_half_tile():
    """A second bug of the source: a core of 1456 elements gets one UB tile of 1456, halved for double
    buffering into copies of 728 fp16 = 1456 B, not a multiple of 32 B: hardware silently drops the last
    16 B of every copy (the tiling aligns the tile, not its half)."""
    with pytest.raises(ns.AlignmentError, match=r"data_copy of 728 float16 elements = 1456 B, not a multiple of "
                                                r"32 B \(GM -> UB\): real hardware silently drops the last 16 B"):
        _run(ADD_FLOAT16, np.float16, 8 * 16 * 90 + 16 * 5)
