"""What autograd keeps alive for backward, and when it lets go.

Every tensor an operator saves for its backward (``ctx.save_for_backward`` in a custom op, the inputs of
a built-in convolution, the indices of a max-pool...) stays in memory from the forward until the backward
has used it. On an NPU with 32-64 GB of HBM these *activations* are what limit the batch size, and a
tensor that is never released is a leak that grows every step.

:class:`SavedTensorMeter` watches this through PyTorch's own hook
(``torch.autograd.graph.saved_tensors_hooks``): autograd hands every tensor it saves to the meter's pack
hook, the meter gives back a small holder object, and autograd keeps that holder instead of the tensor
until the backward has used it, then drops it. A ``weakref.finalize`` on each holder tells the meter when
autograd dropped it. So ``live_count`` is exactly the number of saved tensors the autograd graph still
holds, and after a backward it must be 0: anything else is a leak (or ``retain_graph=True``).

The holder keeps a *detached* alias of the tensor (same storage): a holder that kept the tensor itself
would, for a saved output, reference the output's own grad_fn, a reference cycle through C++ that the
garbage collector cannot see (with ``retain_graph=True``, or a forward without backward, the graph would
never be freed).

A tensor stored as a ``ctx`` attribute (``ctx.y = y``) bypasses the hook: it is not counted, and it is
not released after backward either, only when the graph itself dies (for an output stored on its own
ctx, that is a reference cycle: only the garbage collector frees it). The adapter never does that.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class SavedEvent:
    """One save (``kind="save"``) or release (``"free"``) of a tensor saved for backward."""

    index: int
    kind: str
    label: str
    nbytes: int            # bytes of the saved tensor (numel x element size)
    new_bytes: int         # bytes this event added (save) or removed (free) from the unique live total
    live_bytes: int        # unique bytes held for backward after the event
    live_count: int        # saved tensors held after the event
    phase: str             # "forward" or "backward" (the phase when the event happened)
    shape: tuple = ()
    dtype: str = ""


class _Saved:
    """The holder autograd keeps in place of a saved tensor."""

    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor


@dataclass
class SavedTensorMeter:
    """Context manager recording every tensor saved for backward inside it, by layer::

        meter = SavedTensorMeter(model)
        with meter:
            loss = loss_fn(model(x), y)
            meter.mark("backward")
            loss.backward()
        meter.live_count          # 0: everything saved was released
        meter.peak_bytes, meter.by_layer()

    ``model``: optional; forward hooks on its modules label each saved tensor with the innermost module
    that was running (``"0: NPUConv2d"``, ``"fc: Linear"``: name and type), else ``"(outside modules)"``. Bytes are the saved tensors' own bytes (numel x
    element size), each tensor counted once even when several operators save it (a conv's output saved
    by its fused ReLU and by the next layer costs its bytes once). (A saved slice keeps its whole storage
    alive; the meter counts the slice.)
    """

    model: Any = None
    events: list[SavedEvent] = field(default_factory=list)
    live_count: int = 0
    live_bytes: int = 0
    peak_bytes: int = 0
    phase: str = "forward"

    def __post_init__(self) -> None:
        self._storages: dict[Any, list[int]] = {}   # (storage, offset, shape, stride) -> [holders, nbytes]
        self._stack: list[str] = []
        self._handles: list[Any] = []
        self._hooks = None

    # --- context -------------------------------------------------------------------------------------
    def __enter__(self) -> "SavedTensorMeter":
        if self.model is not None:
            for name, mod in self.model.named_modules():
                label = f"{name}: {type(mod).__name__}" if name else type(mod).__name__
                self._handles.append(mod.register_forward_pre_hook(self._enter_module(label)))
                self._handles.append(mod.register_forward_hook(self._leave_module))
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._stack.clear()

    def _enter_module(self, label: str):
        def hook(module, args) -> None:
            self._stack.append(label)
        return hook

    def _leave_module(self, module, args, output) -> None:  # must return None: a value replaces the output
        if self._stack:
            self._stack.pop()

    def mark(self, phase: str) -> None:
        """Name the phase of the following events (e.g. ``"backward"`` before ``loss.backward()``)."""
        self.phase = phase

    # --- hooks ---------------------------------------------------------------------------------------
    def _pack(self, t: torch.Tensor) -> _Saved:
        # keep a detached alias (same storage, no grad_fn): autograd restores the autograd metadata on
        # unpack. Holding `t` itself would make a saved *output* reference its own grad_fn through the
        # holder, a cycle through C++ that the garbage collector cannot break (a leak whenever the graph
        # is dropped without a backward, or after retain_graph=True).
        holder = _Saved(t.detach())
        nbytes = t.numel() * t.element_size()
        try:  # the same tensor (or the same view of a storage) saved twice is held once
            key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()))
        except (RuntimeError, NotImplementedError):  # no storage (e.g. a tensor subclass)
            key = id(holder)
        label = self._stack[-1] if self._stack else "(outside modules)"
        entry = self._storages.setdefault(key, [0, nbytes])
        new = nbytes if entry[0] == 0 else 0
        entry[0] += 1
        self.live_count += 1
        self.live_bytes += new
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        self.events.append(SavedEvent(len(self.events), "save", label, nbytes, new, self.live_bytes,
                                      self.live_count, self.phase, tuple(t.shape), str(t.dtype)))
        weakref.finalize(holder, self._free, key, label, nbytes, tuple(t.shape), str(t.dtype))
        return holder

    @staticmethod
    def _unpack(holder: _Saved) -> torch.Tensor:
        return holder.tensor

    def _free(self, key: Any, label: str, nbytes: int, shape: tuple, dtype: str) -> None:
        entry = self._storages[key]
        entry[0] -= 1
        gone = 0
        if entry[0] == 0:
            gone = entry[1]
            del self._storages[key]
        self.live_count -= 1
        self.live_bytes -= gone
        self.events.append(SavedEvent(len(self.events), "free", label, nbytes, -gone, self.live_bytes,
                                      self.live_count, self.phase, shape, dtype))

    # --- summaries -------------------------------------------------------------------------------------
    @property
    def saved_count(self) -> int:
        return sum(e.kind == "save" for e in self.events)

    def by_layer(self) -> dict[str, int]:
        """Unique bytes each layer added to what is held for backward (in order of first save)."""
        out: dict[str, int] = {}
        for e in self.events:
            if e.kind == "save":
                out[e.label] = out.get(e.label, 0) + e.new_bytes
        return out

    def summary(self) -> str:
        return (f"{self.saved_count} tensors saved for backward, peak {self.peak_bytes:,} B held; "
                f"now {self.live_count} held ({self.live_bytes:,} B)")
