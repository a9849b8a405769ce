"""The framework adapter: npusim's operators as real PyTorch operators (the ``torch`` extra).

Three layers, as on an Ascend stack::

    model code (nn.Module, autograd, optimiser)          PyTorch
      -> npusim.torch   custom ops + autograd + modules  torch_npu's op plugin (OpPlugin / aclnn calls)
        -> npusim.ops   OpDef, shape inference, tiling   aclnn: GetWorkspaceSize + launch
          -> kernels    Ascend C on the simulated core   the AI core

What is here:

- :func:`conv2d`, :func:`matmul`, :func:`linear`: functions on tensors, backed by the custom operators
  ``torch.ops.npusim.conv2d`` and ``torch.ops.npusim.matmul`` (registered with :mod:`torch.library`,
  forward, fake (shape) implementation and backward, all on the simulator; see :mod:`.custom_ops`);
- :class:`NPUConv2d`, :class:`NPULinear`: drop-in ``nn.Module`` replacements, and :func:`swap_modules`,
  which swaps them into an existing model (fusing Conv2d + ReLU pairs);
- :class:`SavedTensorMeter`: what autograd keeps for backward, layer by layer, and when it is released;
- :func:`fresh_namespace`: a ``torch.library`` namespace of its own for each registration of a notebook cell;
- :func:`record`: every simulated launch of a forward/backward, with its device time;
- :data:`options`: the hardware preset, sanitizer mode and tiling cache the adapter uses;
- :mod:`.kernels` (the numpy side: every forward and backward formula as calls of ``npusim.ops``),
  :mod:`.training` and :mod:`.charts` (lab 08's data set, training loop and figures).

The rest of npusim never imports this package and works without PyTorch. Without PyTorch, importing it
raises :class:`TorchNotInstalledError` (an ImportError) saying how to install it.
"""

from __future__ import annotations


class TorchNotInstalledError(ImportError):
    """``npusim.torch`` needs PyTorch, which is not importable here."""


try:
    import torch as _torch  # noqa: F401
except ImportError as _e:  # also the `sys.modules["torch"] = None` case
    raise TorchNotInstalledError(
        f"npusim.torch needs PyTorch, which cannot be imported here ({_e}). Install the CPU build the course "
        "uses with `pip install torch==2.13.0` (or the extra: `pip install -e \".[torch]\"`, then pin "
        "torch==2.13.0). The rest of npusim works without it.") from None

from .kernels import Launch, Recording, options, record  # noqa: E402
from .custom_ops import conv2d, fresh_namespace, linear, matmul  # noqa: E402
from .memory import SavedTensorMeter  # noqa: E402
from .modules import NPUConv2d, NPULinear, swap_modules  # noqa: E402

__all__ = ["TorchNotInstalledError", "conv2d", "matmul", "linear", "fresh_namespace", "NPUConv2d", "NPULinear",
           "swap_modules", "SavedTensorMeter", "record", "Recording", "Launch", "options"]
