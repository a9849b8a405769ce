"""Drop-in ``nn.Module`` replacements running on the simulator, and :func:`swap_modules`.

``NPUConv2d`` and ``NPULinear`` subclass ``nn.Conv2d`` and ``nn.Linear``: same constructor, same
parameters (``weight``, ``bias`` as ``nn.Parameter``), same initialisation and ``state_dict`` keys, so an
optimiser, a checkpoint or ``model.parameters()`` do not notice the difference. Only ``forward`` changes.

Mixed precision: ``compute_dtype=torch.float16`` keeps the parameters (the *master weights*) in their
own dtype and casts input, weight and bias to fp16 for the simulated kernel, then the output back, as
``torch.autocast`` does for PyTorch's own layers. The backward casts the gradients the same way, so the
grad arriving at the kernel is fp16: this is where small gradients underflow without loss scaling.
"""

from __future__ import annotations

import copy
from typing import Optional

import torch
from torch import nn

from . import custom_ops
from .kernels import options


def _cast(t: Optional[torch.Tensor], dtype: Optional[torch.dtype]) -> Optional[torch.Tensor]:
    return t if t is None or dtype is None or t.dtype == dtype else t.to(dtype)


class NPUConv2d(nn.Conv2d):
    """``nn.Conv2d`` on the simulated core (``groups=1``, ``padding_mode="zeros"``).

    Extra keyword arguments: ``relu`` (fuse a ReLU into the operator: one kernel, and the backward masks
    the grad with the output's sign), ``variant`` (the npusim.conv variant; default
    ``npusim.torch.options.variant``), ``compute_dtype`` (e.g. ``torch.float16``, see the module doc)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None, *,
                 relu: bool = False, variant: Optional[str] = None,
                 compute_dtype: Optional[torch.dtype] = None) -> None:
        if groups != 1:
            raise NotImplementedError(f"NPUConv2d supports groups=1 only (got groups={groups}): the "
                                      f"simulated conv2d operator has no grouped or depthwise variant")
        if padding_mode != "zeros":
            raise NotImplementedError(f"NPUConv2d supports padding_mode='zeros' only, got {padding_mode!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)
        self.relu = bool(relu)
        self.variant = variant
        self.compute_dtype = compute_dtype

    def _explicit_padding(self) -> tuple[int, int]:
        if isinstance(self.padding, str):
            if self.padding == "valid":
                return 0, 0
            pads = []  # "same" (stride 1): symmetric only
            for k, d in zip(self.kernel_size, self.dilation):
                total = d * (k - 1)
                if total % 2:
                    raise NotImplementedError("NPUConv2d: padding='same' with an even effective kernel needs "
                                              "asymmetric padding, which the operator does not take")
                pads.append(total // 2)
            return tuple(pads)
        return tuple(self.padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cd = self.compute_dtype
        y = custom_ops.conv2d(_cast(x, cd), _cast(self.weight, cd), _cast(self.bias, cd), self.stride,
                              self._explicit_padding(), self.dilation, self.relu, self.variant or options.variant)
        return _cast(y, x.dtype if cd is not None else None)

    def extra_repr(self) -> str:
        s = super().extra_repr()
        if self.relu:
            s += ", relu=True"
        if self.compute_dtype is not None:
            s += f", compute_dtype={self.compute_dtype}"
        return s

    @classmethod
    def from_torch(cls, conv: nn.Conv2d, *, relu: bool = False, variant: Optional[str] = None,
                   compute_dtype: Optional[torch.dtype] = None) -> "NPUConv2d":
        """An NPUConv2d with ``conv``'s hyper-parameters and a copy of its weight and bias."""
        new = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
                  conv.dilation, conv.groups, conv.bias is not None, conv.padding_mode,
                  device=conv.weight.device, dtype=conv.weight.dtype, relu=relu, variant=variant,
                  compute_dtype=compute_dtype)
        with torch.no_grad():
            new.weight.copy_(conv.weight)
            if conv.bias is not None:
                new.bias.copy_(conv.bias)
        new.train(conv.training)
        return new


class NPULinear(nn.Linear):
    """``nn.Linear`` on the simulated Cube (the bias folded into the matmul, see
    :func:`npusim.torch.linear`). ``compute_dtype`` as for :class:`NPUConv2d`."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None, *,
                 compute_dtype: Optional[torch.dtype] = None) -> None:
        super().__init__(in_features, out_features, bias, device, dtype)
        self.compute_dtype = compute_dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cd = self.compute_dtype
        y = custom_ops.linear(_cast(x, cd), _cast(self.weight, cd), _cast(self.bias, cd))
        return _cast(y, x.dtype if cd is not None else None)

    @classmethod
    def from_torch(cls, lin: nn.Linear, *, compute_dtype: Optional[torch.dtype] = None) -> "NPULinear":
        new = cls(lin.in_features, lin.out_features, lin.bias is not None, device=lin.weight.device,
                  dtype=lin.weight.dtype, compute_dtype=compute_dtype)
        with torch.no_grad():
            new.weight.copy_(lin.weight)
            if lin.bias is not None:
                new.bias.copy_(lin.bias)
        new.train(lin.training)
        return new


def _swappable(m: nn.Module) -> bool:
    return (type(m) is nn.Conv2d and m.groups == 1 and m.padding_mode == "zeros") or type(m) is nn.Linear


def swap_modules(model: nn.Module, *, fuse_relu: bool = True, compute_dtype: Optional[torch.dtype] = None,
                 variant: Optional[str] = None, inplace: bool = False) -> nn.Module:
    """A model whose ``nn.Conv2d`` and ``nn.Linear`` layers run on the simulator; returns it.

    - every ``nn.Conv2d`` (groups=1, zero padding) becomes an :class:`NPUConv2d`, every ``nn.Linear`` an
      :class:`NPULinear`, with copies of their weights (``inplace=False``, the default, deep-copies the
      model first; the original is untouched);
    - ``fuse_relu``: inside an ``nn.Sequential``, a Conv2d directly followed by an ``nn.ReLU`` becomes one
      ``NPUConv2d(relu=True)`` and the ReLU an ``nn.Identity`` (positions and state_dict keys unchanged);
    - other layers (grouped convs, pooling, norms...) stay PyTorch layers.

    The new model records what changed in ``model.npusim_swaps`` (a list of strings).
    """
    new = model if inplace else copy.deepcopy(model)
    log: list[str] = []
    kw = {"compute_dtype": compute_dtype}

    def visit(parent: nn.Module, prefix: str) -> None:
        names = list(parent._modules)
        skip = set()
        for i, name in enumerate(names):
            child = parent._modules[name]
            if child is None or name in skip:
                continue
            path = f"{prefix}{name}"
            if _swappable(child):
                if isinstance(child, nn.Conv2d):
                    nxt = parent._modules.get(names[i + 1]) if i + 1 < len(names) else None
                    fuse = fuse_relu and isinstance(parent, nn.Sequential) and type(nxt) is nn.ReLU
                    parent._modules[name] = NPUConv2d.from_torch(child, relu=fuse, variant=variant, **kw)
                    if fuse:
                        parent._modules[names[i + 1]] = nn.Identity()
                        skip.add(names[i + 1])
                        log.append(f"{path} + {prefix}{names[i + 1]}: Conv2d + ReLU -> NPUConv2d(relu=True)")
                    else:
                        log.append(f"{path}: Conv2d -> NPUConv2d")
                else:
                    parent._modules[name] = NPULinear.from_torch(child, **kw)
                    log.append(f"{path}: Linear -> NPULinear")
            elif not isinstance(child, (NPUConv2d, NPULinear)):
                visit(child, path + ".")

    visit(new, "")
    new.npusim_swaps = log
    return new
