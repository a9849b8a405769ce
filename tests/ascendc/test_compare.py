"""Compare (into a tensor and into the mask register, read back with GetCmpMask) and Compares with a scalar
read by GetValue between fetched event ids, transliterated call by call.

Source: cannmirror/asc-devkit (mirror of gitcode cann/asc-devkit),
examples/01_simd_cpp_api/02_features/03_basic_api/02_memory_vector_compute/compare/compare.asc
(commit 68eb55191616e7a7b08961a5c82a706272353b5f). SCENARIO_NUM is an argument; scenario 4 (Ascend 950
only) is left out as the source leaves it out on A2.
"""

from __future__ import annotations

import numpy as np
import pytest

import npusim as ns

pytestmark = pytest.mark.ascendc


class KernelCmp:
    def __init__(self, T, INPUT_SIZE, INPUT_Y_SIZE, OUTPUT_SIZE, SCENARIO_NUM):
        self.T, self.INPUT_SIZE, self.INPUT_Y_SIZE, self.OUTPUT_SIZE = T, INPUT_SIZE, INPUT_Y_SIZE, OUTPUT_SIZE
        self.SCENARIO_NUM = SCENARIO_NUM

    def Init(self, src0Gm, src1Gm, dstGm, mode, pipeIn):
        self.pipe = pipeIn
        self.cmpMode = mode
        self.src0Global, self.src1Global, self.dstGlobal = src0Gm, src1Gm, dstGm
        self.inQueueSrc0, self.inQueueSrc1 = ns.TQue(ns.TPosition.VECIN), ns.TQue(ns.TPosition.VECIN)
        self.outQueueDst = ns.TQue(ns.TPosition.VECOUT)
        self.pipe.init_buffer(self.inQueueSrc0, 1, self.INPUT_SIZE * self.T.itemsize)
        self.pipe.init_buffer(self.inQueueSrc1, 1, self.INPUT_Y_SIZE * self.T.itemsize)
        self.pipe.init_buffer(self.outQueueDst, 1, self.OUTPUT_SIZE * 1)

    def Process(self):
        src0Local = self.inQueueSrc0.alloc_tensor(self.T)
        src1Local = self.inQueueSrc1.alloc_tensor(self.T)
        ns.data_copy(src0Local, self.src0Global, self.INPUT_SIZE)
        ns.data_copy(src1Local, self.src1Global, self.INPUT_Y_SIZE)
        self.inQueueSrc0.enque(src0Local)
        self.inQueueSrc1.enque(src1Local)
        self.Compute()
        dstLocal = self.outQueueDst.deque()
        ns.data_copy(self.dstGlobal, dstLocal, self.OUTPUT_SIZE)
        self.outQueueDst.free_tensor(dstLocal)

    def Compute(self):
        src0Local = self.inQueueSrc0.deque()
        src1Local = self.inQueueSrc1.deque()
        dstLocal = self.outQueueDst.alloc_tensor(ns.uint8)
        if self.SCENARIO_NUM == 1:
            ns.compare(dstLocal, src0Local, src1Local, self.cmpMode, self.INPUT_SIZE)
        elif self.SCENARIO_NUM == 2:
            ns.duplicate(dstLocal.reinterpret_cast(ns.float32), 0.0, 8)
            repeatParams = ns.BinaryRepeatParams()
            mask = 256 // self.T.itemsize
            ns.compare(src0Local, src1Local, self.cmpMode, mask, repeatParams)
            ns.pipe_barrier(ns.Pipe.V)
            ns.get_cmp_mask(dstLocal)
        elif self.SCENARIO_NUM == 3:
            eventID = ns.get_tpipe_ptr().fetch_event_id(ns.HardEvent.MTE2_S)
            ns.set_flag(ns.HardEvent.MTE2_S, eventID)
            ns.wait_flag(ns.HardEvent.MTE2_S, eventID)
            src1Scalar = src1Local.get_value(0)
            eventID = ns.get_tpipe_ptr().fetch_event_id(ns.HardEvent.S_V)
            ns.set_flag(ns.HardEvent.S_V, eventID)
            ns.wait_flag(ns.HardEvent.S_V, eventID)
            ns.compare_scalar(dstLocal, src0Local, src1Scalar, self.cmpMode, self.INPUT_SIZE)
        self.outQueueDst.enque(dstLocal)
        self.inQueueSrc0.free_tensor(src0Local)
        self.inQueueSrc1.free_tensor(src1Local)


@ns.kernel
def compare_custom(x, y, z, T, INPUT_SIZE, INPUT_Y_SIZE, OUTPUT_SIZE, SCENARIO_NUM):
    pipe = ns.TPipe()
    op = KernelCmp(T, INPUT_SIZE, INPUT_Y_SIZE, OUTPUT_SIZE, SCENARIO_NUM)
    op.Init(x, y, z, ns.CMPMODE.LT, pipe)
    op.Process()


@pytest.mark.parametrize("scenario", [1, 2, 3])
def test_compare_matches_numpy(scenario):
    INPUT_SIZE = 64 if scenario == 2 else 256
    INPUT_Y_SIZE = 256 if scenario == 1 else (64 if scenario == 2 else 16)
    rng = np.random.default_rng(scenario)
    x = rng.standard_normal(INPUT_SIZE).astype(np.float32)
    y = rng.standard_normal(INPUT_Y_SIZE).astype(np.float32)
    z = np.zeros(32, np.uint8)
    ns.launch(compare_custom, 1, x, y, z, ns.float32, INPUT_SIZE, INPUT_Y_SIZE, 32, scenario)
    bits = np.unpackbits(z, bitorder="little").astype(bool)
    if scenario == 1:
        want = x < y
    elif scenario == 2:   # the register's 128 bits: 64 lanes of one float repeat, then zeros
        want = np.concatenate([x < y, np.zeros(192, bool)])
    else:
        want = x < y[0]
    np.testing.assert_array_equal(bits[:want.size], want)
