"""npusim.kernels.loss_scaling (lab 05): the dynamic loss-scaling rule, and the fp16 training it enables."""

import numpy as np
import pytest

from npusim.kernels import loss_scaling as ls

pytestmark = pytest.mark.lab05


def half(*values):
    return [np.array(values, np.float16)]


def test_the_rule_skips_halves_and_grows_after_clean_steps_in_a_row():
    s = ls.DynamicLossScaler(scale=8.0, growth_interval=2)
    out = s.step(half(1.0, -2.0))
    assert out[0].dtype == np.float32 and out[0].tolist() == [0.125, -0.25] and s.scale == 8.0
    assert s.step(half(1.0)) is not None and s.scale == 16.0               # the 2nd clean step in a row
    assert s.step(half(np.inf)) is None and s.scale == 8.0                 # overflow: skip, halve
    assert s.step(half(1.0)) is not None and s.scale == 8.0                # the count restarted
    assert s.step([np.zeros(2, np.float16), np.array([np.nan], np.float16)]) is None and s.scale == 4.0
    assert s.step(half(65504.0)) is not None                               # the largest finite fp16 value


def test_unscaling_is_exact_in_fp32_for_subnormal_fp16_gradients():
    g = np.array([6e-8, 1e-6, -3e-5], np.float16)                           # fp16 subnormals
    out = ls.DynamicLossScaler(scale=2.0 ** 20).step([g])[0]
    np.testing.assert_array_equal(out, g.astype(np.float64) / 2 ** 20)      # a power of two: exact in fp32
    assert (out != 0).all()


def test_fp16_training_stalls_without_scaling_diverges_with_a_fixed_scale_and_trains_with_a_dynamic_one():
    fp32 = ls.train(fp32=True, steps=200)
    none = ls.train(None, steps=200)
    fixed = ls.train(ls.FixedScale(2.0 ** 40), steps=200)
    dyn = ls.train(ls.DynamicLossScaler(2.0 ** 40, 20), steps=200)
    assert fp32.final_loss() < 0.3 * fp32.losses[0]
    assert none.flushed.mean() > 0.95 and none.final_loss() > 0.8 * none.losses[0]    # the gradients are 0
    assert np.isnan(fixed.final_loss())                                                 # inf, then NaN
    assert dyn.skipped[:4] == [0, 1, 2, 3] and 2.0 ** 36 <= dyn.scales.min() <= dyn.scales.max() <= 2.0 ** 40
    assert dyn.final_loss() <= 1.1 * fp32.final_loss()
