"""Select in its three modes (mask from a padded unaligned copy, tensor/scalar with GetValue, tensor/tensor),
transliterated call by call.

Source: cannmirror/asc-devkit (mirror of gitcode cann/asc-devkit),
examples/01_simd_cpp_api/02_features/03_basic_api/02_memory_vector_compute/select/select.asc
(commit 68eb55191616e7a7b08961a5c82a706272353b5f). SCENARIO_NUM, a compile-time macro there, is an argument;
scenario 4 (Ascend 950 only) is left out as the source leaves it out on A2.
"""

from __future__ import annotations

import numpy as np
import pytest

import npusim as ns

pytestmark = pytest.mark.ascendc
E = ns.HardEvent


class KernelSelect:
    def __init__(self, T, U, INPUT_SIZE, INPUT_Y_SIZE, INPUT_SEL_SIZE, SCENARIO_NUM):
        self.T, self.U = T, U
        self.INPUT_SIZE, self.INPUT_Y_SIZE, self.INPUT_SEL_SIZE = INPUT_SIZE, INPUT_Y_SIZE, INPUT_SEL_SIZE
        self.SCENARIO_NUM = SCENARIO_NUM

    def Init(self, src0Gm, src1Gm, selGm, dstGm):
        self.src0Global, self.src1Global, self.selMaskGlobal, self.dstGlobal = src0Gm, src1Gm, selGm, dstGm

    def Process(self):
        T, U = self.T, self.U
        ubAllocator = ns.LocalMemAllocator(ns.Hardware.UB)
        src0Local = ubAllocator.alloc(T, self.INPUT_SIZE)
        src1Local = ubAllocator.alloc(T, self.INPUT_Y_SIZE)
        SEL_ALLOC_NUM = 32 if self.SCENARIO_NUM == 1 else self.INPUT_SEL_SIZE
        selMaskLocal = ubAllocator.alloc(U, SEL_ALLOC_NUM)
        dstLocal = ubAllocator.alloc(T, self.INPUT_SIZE)

        ns.data_copy(src0Local, self.src0Global, self.INPUT_SIZE)
        ns.data_copy(src1Local, self.src1Global, self.INPUT_Y_SIZE)
        if self.SCENARIO_NUM == 1:
            copyParams = ns.DataCopyExtParams(1, self.INPUT_SEL_SIZE * U.itemsize, 0, 0, 0)
            padParams = ns.DataCopyPadExtParams()
            padParams = padParams._replace(is_pad=False, left_padding=0, right_padding=24)
            ns.set_pad_value(0)
            ns.data_copy_pad(selMaskLocal, self.selMaskGlobal, copyParams, padParams)
        else:
            ns.data_copy(selMaskLocal, self.selMaskGlobal, self.INPUT_SEL_SIZE)
        ns.set_flag(E.MTE2_V, 0)
        ns.wait_flag(E.MTE2_V, 0)

        self.Compute(src0Local, src1Local, selMaskLocal, dstLocal)

        ns.set_flag(E.V_MTE3, 0)
        ns.wait_flag(E.V_MTE3, 0)

        ns.data_copy(self.dstGlobal, dstLocal, self.INPUT_SIZE)

    def Compute(self, src0Local, src1Local, maskLocal, dstLocal):
        if self.SCENARIO_NUM in (1, 3):
            selMode = ns.SELMODE.VSEL_CMPMASK_SPR if self.SCENARIO_NUM == 1 else ns.SELMODE.VSEL_TENSOR_TENSOR_MODE
            ns.select(dstLocal, maskLocal, src0Local, src1Local, selMode, self.INPUT_SIZE)
        elif self.SCENARIO_NUM == 2:
            ns.set_flag(E.MTE2_S, 0)
            ns.wait_flag(E.MTE2_S, 0)
            src1Scalar = src1Local.get_value(0)
            ns.set_flag(E.S_V, 0)
            ns.wait_flag(E.S_V, 0)
            ns.select(dstLocal, maskLocal, src0Local, src1Scalar, ns.SELMODE.VSEL_TENSOR_SCALAR_MODE, self.INPUT_SIZE)


@ns.kernel
def select_custom(x, y, sel, z, T, U, INPUT_SIZE, INPUT_Y_SIZE, INPUT_SEL_SIZE, SCENARIO_NUM):
    ns.init_soc_state()
    op = KernelSelect(T, U, INPUT_SIZE, INPUT_Y_SIZE, INPUT_SEL_SIZE, SCENARIO_NUM)
    op.Init(x, y, sel, z)
    op.Process()
    ns.pipe_barrier(ns.Pipe.ALL)


SIZES = {1: (256, 8), 2: (8, 32), 3: (256, 32)}   # (input_y elements, sel bytes), as main() picks them


@pytest.mark.parametrize("scenario", [1, 2, 3])
def test_select_matches_numpy(scenario):
    y_size, sel_size = SIZES[scenario]
    rng = np.random.default_rng(scenario)
    x = rng.standard_normal(256).astype(np.float32)
    y = rng.standard_normal(y_size).astype(np.float32)
    sel = rng.integers(0, 256, sel_size).astype(np.uint8)
    z = np.zeros(256, np.float32)
    ns.launch(select_custom, 1, x, y, sel, z, ns.float32, ns.uint8, 256, y_size, sel_size, scenario)
    bits = np.unpackbits(sel, bitorder="little").astype(bool)
    if scenario == 1:   # one repeat's 64 bits (8 B) serve all 4 repeats of 64 floats
        want = np.where(np.tile(bits[:64], 4), x, y)
    elif scenario == 2:
        want = np.where(bits[:256], x, y[0])
    else:
        want = np.where(bits[:256], x, y)
    np.testing.assert_array_equal(z, want)
