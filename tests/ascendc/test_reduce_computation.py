"""ReduceMax/ReduceMin with calIndex and ReduceSum, in the count and the mask/repeat forms, and a SetValue of a
special register's sum, transliterated call by call.

Source: cannmirror/asc-devkit (mirror of gitcode cann/asc-devkit),
examples/01_simd_cpp_api/02_features/03_basic_api/02_memory_vector_compute/reduce_computation/reduce_computation.asc
(commit 1069353b21fc9f930255c8122dcae31f5f4b6938). scenarioNum is an argument.

Scenario 5 writes ``dstLocal.SetValue(1, val)`` and enqueues it for MTE3 with no S -> MTE3 flag: it relies on
the compiler's auto-sync (launch's default), and stops with a RaceError with ``auto_sync=False``.
"""

from __future__ import annotations

import numpy as np
import pytest

import npusim as ns

pytestmark = pytest.mark.ascendc


class KernelReduce:
    def __init__(self, T, srcDataSize, workSizeFactor, scenarioNum):
        self.T, self.srcDataSize, self.workSizeFactor, self.scenarioNum = T, srcDataSize, workSizeFactor, scenarioNum
        self.dstDataSize = 16
        self.repStride = 8

    def Init(self, src, dstGm, pipeIn):
        self.pipe = pipeIn
        self.srcGlobal, self.dstGlobal = src, dstGm
        self.inQueueSrc = ns.TQue(ns.TPosition.VECIN)
        self.workQueue, self.outQueueDst = ns.TQue(ns.TPosition.VECOUT), ns.TQue(ns.TPosition.VECOUT)
        elePerRepeat = 256 // self.T.itemsize
        elePerBlock = 32 // self.T.itemsize
        self.mask = elePerRepeat
        if self.scenarioNum in (1, 3, 5):
            self.repeat = self.RoundUp(self.srcDataSize, elePerRepeat)
        else:
            self.repeat = self.RoundUp(self.srcDataSize, self.mask)
        self.workSize = self.RoundUp(self.repeat * self.workSizeFactor, elePerBlock) * elePerBlock
        self.pipe.init_buffer(self.inQueueSrc, 1, self.srcDataSize * self.T.itemsize)
        self.pipe.init_buffer(self.workQueue, 1, self.workSize * self.T.itemsize)
        self.pipe.init_buffer(self.outQueueDst, 1, self.dstDataSize * self.T.itemsize)

    def Process(self):
        self.CopyIn()
        self.Compute()
        self.CopyOut()

    def CopyIn(self):
        srcLocal = self.inQueueSrc.alloc_tensor(self.T)
        ns.data_copy(srcLocal, self.srcGlobal, self.srcDataSize)
        self.inQueueSrc.enque(srcLocal)

    def Compute(self):
        srcLocal = self.inQueueSrc.deque()
        dstLocal = self.outQueueDst.alloc_tensor(self.T)
        sharedTmpBuffer = self.workQueue.alloc_tensor(self.T)
        n = self.scenarioNum
        if n == 1:
            ns.reduce_max(dstLocal, srcLocal, sharedTmpBuffer, self.srcDataSize, True)
        elif n == 2:
            ns.reduce_max(dstLocal, srcLocal, sharedTmpBuffer, self.mask, self.repeat, self.repStride, True)
        elif n == 3:
            ns.reduce_min(dstLocal, srcLocal, sharedTmpBuffer, self.srcDataSize, True)
        elif n == 4:
            ns.reduce_min(dstLocal, srcLocal, sharedTmpBuffer, self.mask, self.repeat, self.repStride, True)
        elif n == 5:
            ns.reduce_sum(dstLocal, srcLocal, sharedTmpBuffer, self.srcDataSize)
            eventID = ns.get_tpipe_ptr().fetch_event_id(ns.HardEvent.V_S)
            ns.set_flag(ns.HardEvent.V_S, eventID)
            ns.wait_flag(ns.HardEvent.V_S, eventID)
            val = ns.get_reduce_repeat_sum_spr()
            dstLocal.set_value(1, val)
        elif n == 6:
            ns.reduce_sum(dstLocal, srcLocal, sharedTmpBuffer, self.mask, self.repeat, self.repStride)
        self.outQueueDst.enque(dstLocal)
        self.inQueueSrc.free_tensor(srcLocal)
        self.workQueue.free_tensor(sharedTmpBuffer)

    def CopyOut(self):
        dstLocal = self.outQueueDst.deque()
        ns.data_copy(self.dstGlobal, dstLocal, self.dstDataSize)
        self.outQueueDst.free_tensor(dstLocal)

    def RoundUp(self, a, b):
        return (a + b - 1) // b


SIZES = {1: (288, 2), 3: (288, 2), 2: (512, 2), 4: (512, 2), 5: (288, 1), 6: (8320, 1)}


@ns.kernel
def reduce_computation_custom(x, z, scenarioNum):
    srcDataSize, workSizeFactor = SIZES[scenarioNum]
    op = KernelReduce(ns.float16, srcDataSize, workSizeFactor, scenarioNum)
    pipe = ns.TPipe()
    op.Init(x, z, pipe)
    op.Process()


def _run(scenario, **kw):
    rng = np.random.default_rng(scenario)
    x = rng.permutation(np.linspace(-4, 4, SIZES[scenario][0])).astype(np.float16)
    z = np.zeros(16, np.float16)
    ns.launch(reduce_computation_custom, 1, x, z, scenario, **kw)
    return x, z


@pytest.mark.parametrize("scenario", [1, 2, 3, 4, 5, 6])
def test_reduce_computation_matches_numpy(scenario):
    # the source copies out all 16 elements of dstLocal, of which the reduction wrote 1 or 2: the rest is
    # whatever UB held (a finding of the sanitizer, kept below as a test of its message)
    with pytest.warns(ns.SanitizerWarning, match="uninitialised"):
        x, z = _run(scenario, sanitize="warn")
    index = z[1:2].view(np.uint16)[0]
    if scenario in (1, 2):
        assert z[0] == x.max() and index == np.argmax(x)
    elif scenario in (3, 4):
        assert z[0] == x.min() and index == np.argmin(x)
    else:
        np.testing.assert_allclose(float(z[0]), x.astype(np.float64).sum(), atol=1e-3 * np.abs(x).sum())
        if scenario == 5:
            assert z[1] == z[0]


def test_the_sanitizer_finds_the_copy_out_of_unwritten_elements():
    with pytest.raises(ns.UninitializedReadError, match=r"PIPE_MTE3 read \(data_copy\).*no instruction wrote these "
                                                        r"bytes in this launch \(28 of the 32 B it reads"):
        _run(1)


@pytest.mark.filterwarnings("ignore:UninitializedReadError")
def test_scenario_5_relies_on_the_compilers_auto_sync():
    with pytest.warns(ns.SanitizerWarning, match=r"RaceError: RAW hazard.*PIPE_MTE3 read \(data_copy\).*PIPE_S "
                                                  r"write \(set_value\)"):
        _run(5, auto_sync=False, sanitize="warn")
