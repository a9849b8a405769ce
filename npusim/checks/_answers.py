"""The one table of what is an answer: for every check, the package objects that ARE the exercise's answer
(reference kernels and classes, the checks' oracles), what an explorer runs until the learner's code exists
(``stand_in``), and the package helpers the exercise explicitly allows beyond the building blocks.

The building blocks are always allowed: the instruction set and the simulator itself, ``formats``, the
hardware configs, ``precision`` helpers that are not the answer, torch, numpy. Everything listed under
``answers`` is refused while the learner's code runs (see :mod:`npusim.checks._authorship`); a helper under
``allowed`` is one the lab hands the learner (lab 03's ``copy_strips``, lab 04's ``ZeroWriter``, the lab
frameworks the learner subclasses). Names are dotted paths; ``Class.method`` names one method.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any

_K = "npusim.kernels."
_C = "npusim.checks."
_Q = "npusim.checks.qmatmul."


@dataclass(frozen=True)
class Exercise:
    """One check's exercise: ``check`` (the check function's name), ``key`` (its hint key), ``answers``
    (dotted names of the package's answers), ``stand_in`` (what :func:`mine_or_reference` returns before the
    learner's code exists; None when no explorer needs one) and ``allowed`` (package helpers it allows)."""

    check: str
    key: str
    answers: tuple[str, ...]
    stand_in: str | None = None
    allowed: tuple[str, ...] = ()
    why_none: str = ""        # when ``answers`` is empty: why the package holds no answer to refuse
    predicts: bool = False    # the learner predicts what the simulator does: their code may not launch


_VECTOR_ADD = (_K + "vector_add.vector_add", _K + "vector_add.KernelAdd")
_SOFTMAX = (_K + "softmax.softmax", _K + "softmax.KernelSoftmax")
_MATMUL = (_K + "matmul.matmul",)
_MATMUL_HELPERS = (_K + "matmul.copy_strips", _K + "matmul.MatmulTiling")
_QREF = (_Q + "reference",)   # the complete operator; `build` assembles the learner's parts

EXERCISES: tuple[Exercise, ...] = (
    # lab 00
    Exercise("peak_tflops", "peak-tflops", ("npusim.config.HardwareConfig.cube_peak_flops",)),
    Exercise("copy_cycles", "copy-cycles", (_C + "lab00_tour.simulated_copy_cycles", _C + "lab00_tour._copy_kernel"),
             predicts=True),
    # lab 01
    Exercise("vector_add", "vector-add", _VECTOR_ADD, stand_in=_K + "vector_add.vector_add",
             allowed=(_K + "vector_add.block_range",)),     # the lab's add_kernel splits with it
    Exercise("vector_add_fast", "vector-add-fast", _VECTOR_ADD, allowed=(_K + "vector_add.block_range",)),
    Exercise("block_range", "block-range", _VECTOR_ADD + (_K + "vector_add.block_range",),
             stand_in=_K + "vector_add.vector_add"),
    # lab 02
    Exercise("softmax", "softmax", _SOFTMAX, stand_in=_K + "softmax.softmax"),
    Exercise("softmax_tile", "softmax-tile", _SOFTMAX + (_C + "lab02_softmax._fastest",)),
    # lab 03
    Exercise("matmul", "matmul", _MATMUL, stand_in=_K + "matmul.matmul", allowed=_MATMUL_HELPERS),
    Exercise("matmul_reuse", "matmul-reuse", _MATMUL + (_K + "matmul_tiling.choose_matmul_tiling",),
             stand_in=_K + "matmul.matmul", allowed=_MATMUL_HELPERS),
    # lab 04
    Exercise("conv_reuse", "conv-reuse", (_C + "conv_lab.band.ReferenceBand",),
             stand_in=_C + "conv_lab.band.ReferenceBand", allowed=(_C + "conv_lab.band.BandConv",)),
    Exercise("nc1hwc0_transform", "nc1hwc0-transform",
             (_C + "conv_lab.transform.dma_to_nc1hwc0", "npusim.conv.transform.to_nc1hwc0"),
             stand_in=_C + "conv_lab.transform.dma_to_nc1hwc0", allowed=(_C + "conv_lab.transform.ZeroWriter",)),
    Exercise("conv_img2col", "conv-img2col",
             (_C + "conv_lab.im2col.ReferenceIm2col", _C + "conv_lab.im2col.Im2colConv.expected_params"),
             stand_in=_C + "conv_lab.im2col.ReferenceIm2col", allowed=(_C + "conv_lab.im2col.Im2colConv",)),
    Exercise("conv_tiling", "conv-tiling", ("npusim.conv.sweep.sweep", "npusim.conv.sweep.candidates")),
    # lab 05
    Exercise("accuracy_bar", "accuracy-bar", ("npusim.precision.double_thousandth",)),
    Exercise("fp16_layer", "fp16-layer", (), why_none="the layer runs through the check's own conv; the "
             "scaling is the learner's, the package has no function that does it"),
    Exercise("loss_scaler", "loss-scaler", (_K + "loss_scaling.DynamicLossScaler",),
             stand_in=_K + "loss_scaling.DynamicLossScaler"),
    # lab 06
    Exercise("round_trip_bytes", "round-trip-bytes", ("npusim.conv.fusion.compare_fusion",)),
    Exercise("fused_block", "fused-block", (_K + "fusion_lab.reference_block",)),
    Exercise("fused_pipeline", "fused-pipeline", (_K + "fusion_lab.FusedConvRelu",),
             stand_in=_K + "fusion_lab.FusedConvRelu", allowed=(_K + "fusion_lab.FusedStages",)),
    # lab 07
    Exercise("qmatmul_opdef", "qmatmul-opdef", (_Q + "declare",) + _QREF),
    Exercise("qmatmul_inference", "qmatmul-infer", (_Q + "infer_shape", _Q + "infer_dtype") + _QREF),
    Exercise("qmatmul_tiling", "qmatmul-tiling", (_Q + "tiling",) + _QREF),
    Exercise("tiling_cache", "tiling-cache", (_Q + "BucketCache",) + _QREF, stand_in=_Q + "BucketCache"),
    Exercise("int8_accuracy", "int8-accuracy", (_Q + "quantize_per_channel",) + _QREF),
    # lab 08
    Exercise("matmul_backward", "matmul-backward", ("npusim.torch.custom_ops._matmul_backward",
                                                    "npusim.torch.custom_ops.matmul")),
    Exercise("conv_grad_input", "conv-grad-input",
             ("npusim.torch.kernels.conv2d_grad_input", "npusim.torch.custom_ops._conv2d_grad_input")),
    Exercise("grad_accumulation", "grad-accumulation", (), why_none="the package has no accumulating step; the "
             "check compares with torch's own full-batch gradient"),
    Exercise("custom_op", "custom-op", ("npusim.torch.custom_ops._matmul", "npusim.torch.custom_ops.matmul",
                                        _C + "matmul16._register")),
    Exercise("verify_op", "verify-op", (), why_none="the package has no verifier; the check feeds the "
             "learner's verify_op broken operators"),
    # lab 09
    Exercise("read_profile", "read-profile", (_C + "lab09_model.copies_by_op", _C + "lab09_model.launch_share")),
    Exercise("launch_budget", "launch-budget", (_C + "lab09_model.compute_bound_launch_us",)),
    Exercise("fold_bn", "fold-bn", ("npusim.model.passes.fold_bn",)),
    Exercise("graph_pass", "graph-pass", ("npusim.model.passes.fuse_conv_bn_relu", "npusim.model.passes.apply_match",
                                          "npusim.model.passes.optimize", "npusim.model.passes.fold_bn")),
    Exercise("placement", "placement", ("npusim.model.passes.offload", "npusim.model.passes.optimize")),
)

BY_CHECK = {e.check: e for e in EXERCISES}
BY_KEY = {e.key: e for e in EXERCISES}


_MODULE_OF: dict[str, tuple[str, list[str]]] = {}   # dotted -> (module name, attribute path)


def loaded(dotted: str) -> bool:
    """Whether the module holding ``dotted`` is imported already (resolving it imports nothing, e.g. torch)."""
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        mod = sys.modules.get(".".join(parts[:i]))
        if mod is not None:
            return hasattr(mod, parts[i])
    return False


def resolve(dotted: str) -> Any:
    """The object a dotted name names now: the longest importable module prefix, then attributes."""
    known = _MODULE_OF.get(dotted)
    if known is not None and known[0] in sys.modules:
        obj = sys.modules[known[0]]
        for p in known[1]:
            obj = getattr(obj, p)
        return obj
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        _MODULE_OF[dotted] = (".".join(parts[:i]), parts[i:])
        return obj
    raise ImportError(f"no module in {dotted!r}")


def all_answers() -> set[str]:
    """Every dotted name that is the answer of some exercise."""
    return {a for e in EXERCISES for a in e.answers}
