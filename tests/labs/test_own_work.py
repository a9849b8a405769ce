"""Only the learner's own work passes (issue 25): every exercise is in the one table of answers
(:mod:`npusim.checks._answers`), and for each one a corpus of shortcuts - the package's answer itself, an
import of it under another name, a thin wrapper, a subclass, a call from inside the learner's code, a
monkeypatched module attribute, a check's oracle - is refused with the authorship message. The solutions
still pass: ``test_wrong_solutions.test_solution_passes`` runs them with the same mechanism on."""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass

import pytest

import npusim.checks as check
from npusim.checks import CheckFailed, _answers, _authorship

from labcorpus import harness  # noqa: E402  (tests/labs is on sys.path)
from test_wrong_solutions import CORPORA

_BY_LAB = {m.LAB: m for m in CORPORA}
HANDS = "hands the work to npusim's"
REPLACED = "was replaced"


@dataclass(frozen=True)
class Shortcut:
    """A shortcut of one check: ``source`` runs after the solution's cells and before the check cell."""

    lab: str
    check: str            # the check cell's id
    name: str
    source: str
    expect: str = HANDS   # what the refusal must say
    names: str = ""       # the answer the message must name
    restore: str = ""     # dotted name the shortcut reassigns (put back afterwards)


def _alias(lab, cell, learner, dotted, short=None):
    mod, _, attr = dotted.rpartition(".")
    return Shortcut(lab, cell, f"alias-{learner}", f"from {mod} import {attr} as {learner}\n",
                    names=short or attr)


def _wrapper(lab, cell, learner, dotted, short=None):
    mod, _, attr = dotted.rpartition(".")
    src = (f"def {learner}(*args, **kwargs):\n    from {mod} import {attr} as theirs   # hidden from the globals\n"
           f"    return theirs(*args, **kwargs)\n")
    return Shortcut(lab, cell, f"wrapper-{learner}", src, names=short or attr)


def _subclass(lab, cell, learner, dotted):
    mod, _, attr = dotted.rpartition(".")
    return Shortcut(lab, cell, f"subclass-{learner}",
                    f"import {mod} as _m\n\n\nclass {learner}(_m.{attr}):\n    pass\n", names=attr)


def _patch(lab, cell, learner, dotted, short=None):
    mod, _, attr = dotted.rpartition(".")
    return Shortcut(lab, cell, f"patch-{attr}", f"import {mod} as _m\n_m.{attr} = {learner}\n", expect=REPLACED,
                    names=short or attr, restore=dotted)


K, C, Q = "npusim.kernels.", "npusim.checks.", "npusim.checks.qmatmul."
SHORTCUTS = [
    # lab 00: the Cube's peak from the config's own method; a copy's cycles from the check's oracle
    Shortcut("00_tour", "check-peak-tflops", "config-method",
             "def peak_tflops(config):\n    return config.cube_peak_flops('float16') / 1e12\n",
             names="HardwareConfig.cube_peak_flops"),
    _wrapper("00_tour", "check-copy-cycles", "copy_cycles", C + "lab00_tour.simulated_copy_cycles"),
    Shortcut("00_tour", "check-copy-cycles", "oracle-prediction",
             "def predicted_1000():\n    from npusim.checks import lab00_tour\n"
             "    return lab00_tour.simulated_copy_cycles(ns.a2, 1000)\n", names="simulated_copy_cycles"),
    _patch("00_tour", "check-copy-cycles", "copy_cycles", C + "lab00_tour.simulated_copy_cycles"),
    Shortcut("00_tour", "check-copy-cycles", "measures",
             "def copy_cycles(config, nbytes):\n    x = np.zeros(nbytes // 2, np.float16)\n"
             "    prof = run_vector_add(x, x, tile=x.size, buffer_num=1, config=config).profile\n"
             "    copy = next(i for i in prof.instructions if i.pipe.name == 'MTE2')\n"
             "    return copy.end - copy.start\n", expect="runs a kernel on the simulator", names="cost model"),
    # lab 01
    _alias("01_vector_add", "check-vector-add", "add_kernel", K + "vector_add.vector_add"),
    _wrapper("01_vector_add", "check-vector-add", "add_kernel", K + "vector_add.vector_add"),
    Shortcut("01_vector_add", "check-vector-add", "class-alias",
             "from npusim.kernels.vector_add import KernelAdd as MyKernelAdd\n", names="KernelAdd"),
    Shortcut("01_vector_add", "check-vector-add", "method-call",
             "class MyKernelAdd(MyKernelAdd):\n    def process(self):\n"
             "        from npusim.kernels.vector_add import KernelAdd\n        KernelAdd.process(self)\n",
             names="KernelAdd.process"),
    _patch("01_vector_add", "check-vector-add", "add_kernel", K + "vector_add.vector_add"),
    Shortcut("01_vector_add", "check-vector-add", "package-kernel",   # rule 3: no answer, but not the learner's
             "@ns.kernel\ndef add_kernel(x, y, z, total, tile, buffer_num=2):\n"
             "    from npusim.kernels.elementwise import relu\n    relu(x, z, total)\n", names="relu"),
    _alias("01_vector_add", "check-vector-add-fast", "add_kernel", K + "vector_add.vector_add"),
    _alias("01_vector_add", "check-block-range", "my_block_range", K + "vector_add.block_range"),
    _wrapper("01_vector_add", "check-block-range", "my_block_range", K + "vector_add.block_range"),
    # lab 02
    _alias("02_softmax", "check-softmax", "softmax_kernel", K + "softmax.softmax"),
    _wrapper("02_softmax", "check-softmax", "softmax_kernel", K + "softmax.softmax"),
    _alias("02_softmax", "check-softmax-tile", "softmax_kernel", K + "softmax.softmax"),
    # lab 03: exercise 1, and exercise 2 handed exercise 1's reference inside a wrapper
    _alias("03_matmul", "check-matmul", "matmul_kernel", K + "matmul.matmul"),
    _wrapper("03_matmul", "check-matmul", "matmul_kernel", K + "matmul.matmul"),
    _wrapper("03_matmul", "check-matmul-reuse", "matmul_reuse_kernel", K + "matmul.matmul"),
    # lab 04
    _alias("04_conv2d", "check-conv-reuse", "MyReuse", C + "conv_lab.band.ReferenceBand"),
    _subclass("04_conv2d", "check-conv-reuse", "MyReuse", C + "conv_lab.band.ReferenceBand"),
    Shortcut("04_conv2d", "check-conv-reuse", "method-alias",
             "from npusim.checks.conv_lab.band import ReferenceBand\n\n\nclass MyReuse(MyReuse):\n"
             "    output_bands = ReferenceBand.output_bands\n", names="ReferenceBand.output_bands"),
    _alias("04_conv2d", "check-nc1hwc0-transform", "my_to_nc1hwc0", C + "conv_lab.transform.dma_to_nc1hwc0"),
    _wrapper("04_conv2d", "check-nc1hwc0-transform", "my_to_nc1hwc0", C + "conv_lab.transform.dma_to_nc1hwc0"),
    _subclass("04_conv2d", "check-conv-img2col", "MyImg2col", C + "conv_lab.im2col.ReferenceIm2col"),
    Shortcut("04_conv2d", "check-conv-img2col", "check-helper",
             "class MyImg2col(Im2colConv):\n    def load_3d(self, a, x_l1, tile):\n"
             "        ns.load_data_3d(a, x_l1, self.expected_params(tile))\n", names="Im2colConv.expected_params"),
    Shortcut("04_conv2d", "check-conv-tiling", "sweep",
             "def my_tiling():\n    from npusim.conv import sweep\n    return sweep.candidates(g)[0]\n",
             names="candidates"),
    # lab 05
    Shortcut("05_fp16", "check-accuracy-bar", "wrapper",
             "def my_double_thousandth(actual, expected, floor):\n    from npusim import precision\n"
             "    r = precision.double_thousandth(actual, expected, floor=floor)\n"
             "    return r.passed, r.fraction_above, r.max_error\n", names="double_thousandth"),
    _alias("05_fp16", "check-loss-scaler", "MyLossScaler", K + "loss_scaling.DynamicLossScaler"),
    _subclass("05_fp16", "check-loss-scaler", "MyLossScaler", K + "loss_scaling.DynamicLossScaler"),
    Shortcut("05_fp16", "check-loss-scaler", "composition",
             "class MyLossScaler:\n    def __init__(self, scale=2.0 ** 16, growth_interval=2000):\n"
             "        self.inner = ls.DynamicLossScaler(scale, growth_interval)\n\n"
             "    @property\n    def scale(self):\n        return self.inner.scale\n\n"
             "    def step(self, grads16):\n        return self.inner.step(grads16)\n",
             names="DynamicLossScaler.__init__"),
    _patch("05_fp16", "check-loss-scaler", "MyLossScaler", K + "loss_scaling.DynamicLossScaler"),
    # lab 06
    Shortcut("06_fusion", "check-round-trip-bytes", "compare-fusion",
             "def round_trip_bytes(x_shape, w_shape, stride, padding, itemsize):\n"
             "    from npusim.conv import fusion\n"
             "    return fusion.compare_fusion(np.zeros(x_shape, np.float16), np.zeros(w_shape, np.float16))\n",
             names="compare_fusion"),
    _alias("06_fusion", "check-fused-block", "fused_block", K + "fusion_lab.reference_block"),
    _wrapper("06_fusion", "check-fused-block", "fused_block", K + "fusion_lab.reference_block"),
    _patch("06_fusion", "check-fused-block", "fused_block", K + "fusion_lab.reference_block"),
    _subclass("06_fusion", "check-fused-pipeline", "MyFusedConvRelu", K + "fusion_lab.FusedConvRelu"),
    Shortcut("06_fusion", "check-fused-pipeline", "method-call",
             "class MyFusedConvRelu(MyFusedConvRelu):\n    def process(self):\n"
             "        fl.FusedConvRelu.process(self)\n", names="FusedConvRelu.process"),
    # lab 07: every exercise from checks.qmatmul
    _alias("07_operators", "check-qmatmul-opdef", "declare_qmatmul", Q + "declare"),
    _wrapper("07_operators", "check-qmatmul-opdef", "declare_qmatmul", Q + "declare"),
    _alias("07_operators", "check-qmatmul-infer", "qmatmul_shape", Q + "infer_shape"),
    _alias("07_operators", "check-qmatmul-tiling", "qmatmul_tiling", Q + "tiling"),
    _wrapper("07_operators", "check-qmatmul-tiling", "qmatmul_tiling", Q + "tiling"),
    _alias("07_operators", "check-tiling-cache", "ShapeBucketCache", Q + "BucketCache"),
    _subclass("07_operators", "check-tiling-cache", "ShapeBucketCache", Q + "BucketCache"),
    _alias("07_operators", "check-int8-accuracy", "quantize_per_channel", Q + "quantize_per_channel"),
    # lab 08
    Shortcut("08_torch", "check-matmul-backward", "package-autograd",
             "def matmul_backward(a, b, grad):\n    ta = torch.tensor(a, requires_grad=True)\n"
             "    tb = torch.tensor(b, requires_grad=True)\n    nt.matmul(ta, tb).backward(torch.tensor(grad))\n"
             "    return ta.grad.numpy(), tb.grad.numpy()\n", names="matmul"),
    _alias("08_torch", "check-conv-grad-input", "conv_grad_input", "npusim.torch.kernels.conv2d_grad_input"),
    _wrapper("08_torch", "check-conv-grad-input", "conv_grad_input", "npusim.torch.kernels.conv2d_grad_input"),
    Shortcut("08_torch", "check-custom-op", "lab-operator",
             "from npusim.checks import matmul16 as _lab16\nmatmul16 = _lab16.get('good')\n", names="_register"),
    # lab 09
    _alias("09_model", "check-read-profile", "copies_by_op", C + "lab09_model.copies_by_op"),
    _alias("09_model", "check-launch-budget", "compute_bound_launch_us", C + "lab09_model.compute_bound_launch_us"),
    _alias("09_model", "check-fold-bn", "fold_bn", "npusim.model.passes.fold_bn"),
    _wrapper("09_model", "check-fold-bn", "fold_bn", "npusim.model.passes.fold_bn"),
    Shortcut("09_model", "check-graph-pass", "package-pass",
             "def fuse_conv_bn_relu(graph):\n    return nm.fuse_conv_bn_relu(graph, fold=fold_bn)\n",
             names="fuse_conv_bn_relu"),
    Shortcut("09_model", "check-placement", "offload",
             "def place_on_device(graph, input_shape):\n    return nm.passes.offload(graph, input_shape=input_shape)\n",
             names="offload"),
]


def _marks(lab: str):
    return [getattr(pytest.mark, f"lab{lab[:2]}"), pytest.mark.labs]


@pytest.mark.parametrize("s", [pytest.param(s, id=f"{s.lab[:2]}-{s.check}-{s.name}", marks=_marks(s.lab))
                               for s in SHORTCUTS])
def test_shortcut_is_refused(s: Shortcut):
    cells = _BY_LAB[s.lab].CHECKS[s.check]
    extra = f"{s.check}-shortcut"
    wrong = harness.Wrong(s.name, s.check, s.expect)
    before = _answers.resolve(s.restore) if s.restore else None
    try:
        with pytest.raises(CheckFailed) as info:
            harness.run_check(s.lab, cells, s.check, wrong, extra=(extra, s.source))
            pytest.fail(f"the shortcut {s.name} passed")
    finally:
        if s.restore:
            mod, _, attr = s.restore.rpartition(".")
            setattr(importlib.import_module(mod), attr, before)
    message = str(info.value)
    assert s.expect in message, message
    assert f"npusim's `{s.names}`" in message or s.expect != HANDS and s.names in message, message
    if s.expect == HANDS:
        assert "this exercise is to write it yourself" in message, message


def test_every_check_is_in_the_table():
    checks = {n for n in check.__all__ if hasattr(getattr(check, n), "__wrapped_check__")}
    assert checks == set(_answers.BY_CHECK), (checks ^ set(_answers.BY_CHECK))
    assert set(check.HINTS) == set(_answers.BY_KEY), set(check.HINTS) ^ set(_answers.BY_KEY)
    for e in _answers.EXERCISES:
        assert e.answers or e.why_none, f"{e.check}: no answers and no reason why"
        for dotted in e.answers + e.allowed + ((e.stand_in,) if e.stand_in else ()):
            _answers.resolve(dotted)   # raises when a name no longer exists


def test_every_exercise_with_answers_has_a_shortcut():
    tested = {c for s in SHORTCUTS for c in [s.check]}
    cells = {m.LAB: m.CHECKS for m in CORPORA}
    by_fn = {}
    for lab, checks in cells.items():
        for cell in checks:
            src = harness.notebook(lab)[cell]
            by_fn[src.split("check.")[1].split("(")[0]] = cell
    missing = [e.check for e in _answers.EXERCISES if e.answers and by_fn.get(e.check) not in tested]
    assert not missing, f"exercises without a shortcut case: {missing}"


def test_a_swallowed_refusal_still_fails():
    ns = {"__name__": "__main__"}
    exec(compile("def peak_tflops(config):\n    try:\n        return config.cube_peak_flops('float16') / 1e12\n"
                 "    except BaseException:\n        return 0.0\n", "/notebook/own_work/swallow.py", "exec"), ns)
    with pytest.raises(CheckFailed, match="hands the work to npusim.s `HardwareConfig.cube_peak_flops` .called at swallow.py:3."):
        check.peak_tflops(ns["peak_tflops"])


def test_traps_keep_signatures_and_are_removed():
    from npusim.kernels.softmax import softmax

    sig, code = inspect.signature(softmax), softmax.__code__
    with _authorship.window("softmax", []):
        assert softmax.__code__ is not code and inspect.signature(softmax) == sig
    assert softmax.__code__ is code


def test_package_helper_errors_name_the_learners_call():
    """Item 5: an instruction a package helper issues for the learner is reported at the learner's line,
    with the helper's name (here copy_strips, copying 32 rows into a buffer of 16)."""
    import numpy as np

    import npusim as ns
    from npusim.errors import NpuSimError

    ns_ = {"__name__": "__main__", "ns": ns}
    src = ("from npusim.kernels.matmul import copy_strips\n"
           "def k(a, m, n):\n    pipe = ns.TPipe()\n    q = ns.TQue(ns.TPosition.A1)\n"
           "    pipe.init_buffer(q, 1, 16 * 16 * 2)\n    t = q.alloc_tensor(a.dtype)\n"
           "    copy_strips(t, a, 32, 16, 16)\n")
    harness_name = "/notebook/own_work/helper.py"
    import linecache

    linecache.cache[harness_name] = (len(src), None, src.splitlines(True), harness_name)
    exec(compile(src, harness_name, "exec"), ns_)
    with pytest.raises(NpuSimError) as info:
        ns.launch(ns_["k"], 1, np.zeros((32, 16), np.float16), 32, 16)
    assert "helper.py:7, in copy_strips" in str(info.value), str(info.value)
