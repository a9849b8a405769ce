"""The lab-08 training helpers and charts, and the lab-08 checks on wrong answers."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from matplotlib.figure import Figure  # noqa: E402

import npusim.torch as nt  # noqa: E402
from npusim import checks  # noqa: E402
from npusim.checks import CheckFailed  # noqa: E402
from npusim.torch import charts, training  # noqa: E402
from npusim.torch import kernels as sim  # noqa: E402
from npusim.views.layout import layout_problems  # noqa: E402

pytestmark = pytest.mark.lab08


def test_dataset_is_seeded_balanced_and_standardised():
    x, y = training.shapes_dataset(90, seed=3)
    x2, y2 = training.shapes_dataset(90, seed=3)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert x.shape == (90, 1, 16, 16) and x.dtype == torch.float32
    assert abs(x.mean().item()) < 1e-5 and abs(x.std().item() - 1) < 1e-3
    assert set(y.tolist()) == {0, 1, 2}


def test_train_records_steps_and_dynamic_scaling_skips_overflow():
    x, y = training.shapes_dataset(32, size=8, seed=1)
    model = nt.swap_modules(training.tiny_cnn(), compute_dtype=torch.float16)
    run = training.train(model, x, y, steps=3, batch=8, loss_scale=2.0 ** 24)
    assert len(run.losses) == len(run.scales) == len(run.flushed) == 3
    assert run.skipped[0] and run.scales[1] == run.scales[0] / 2        # overflow: skipped, scale halved
    assert run.profile is not None and run.last_step.backward_us() > 0
    fp32 = training.train(nt.swap_modules(training.tiny_cnn()), x, y, steps=2, batch=8)
    assert not any(fp32.skipped) and fp32.flushed == [0.0, 0.0]


def test_charts_draw():
    x, y = training.shapes_dataset(16, size=8)
    model = nt.swap_modules(training.tiny_cnn())
    run = training.train(model, x, y, steps=2, batch=8)
    meter = nt.SavedTensorMeter(model)
    with meter:
        torch.nn.functional.cross_entropy(model(x[:8]), y[:8]).backward()
    report = training.fp16_gradient_report(training.tiny_cnn(), x[:8], y[:8], scales=(1.0, 1024.0))
    for fig in (charts.three_layers(), charts.transposed_conv(), charts.loss_curves([run]),
                charts.step_breakdown(run.last_step), charts.saved_tensors(meter), charts.gradient_histogram(report)):
        assert isinstance(fig, Figure)
        assert layout_problems(fig) == []  # text inside, legends off the data (draws the figure)


# --- the checks reject wrong answers with a useful message --------------------------------------------
def test_matmul_backward_check_rejects_numpy_and_wrong_transposes():
    with pytest.raises(CheckFailed, match="sim.matmul"):
        checks.matmul_backward(lambda a, b, g: (g @ b.T, a.T @ g))
    with pytest.raises(CheckFailed, match="has shape"):
        checks.matmul_backward(lambda a, b, g: (sim.matmul(g, b.T), sim.matmul(g.T, a)))   # dB^T


def test_custom_op_check_refuses_a_package_op_and_verify_op_a_test_of_one_loss():
    from npusim.checks import matmul16

    # the learner's own op with tensors on ctx is the corpus case 08-op-ctx-tuple (tests/labs/labcorpus/lab08.py);
    # an operator the package built is not the learner's work, whatever it does
    with pytest.raises(CheckFailed, match="hands the work to npusim's"):
        checks.custom_op(matmul16.get("ctx_attr"))
    with pytest.raises(CheckFailed, match="never checks that gradients accumulate"):
        checks.verify_op(lambda op: op(torch.ones(2, 2, requires_grad=True), torch.ones(2, 2)).sum().backward())


def test_grad_accumulation_check_catches_one_big_backward():
    F = torch.nn.functional

    def one_backward(model, opt, x, y, micro):
        opt.zero_grad()
        parts = zip(x.tensor_split(micro), y.tensor_split(micro))
        (sum(F.cross_entropy(model(xb), yb, reduction="sum") for xb, yb in parts) / len(x)).backward()
        opt.step()

    with pytest.raises(CheckFailed, match="before the next forward"):
        checks.grad_accumulation(one_backward)
