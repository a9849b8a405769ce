"""Tensors: GlobalTensor wraps a numpy array in GM; LocalTensor is a typed window of on-chip memory.

Indexing gives a view that starts at an element offset, as ``xLocal[offset]`` does in Ascend C:
``x_gm[i * tile:]`` or ``x_gm[a:b]``. Bounds are checked when an instruction touches the data.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from . import dtypes
from .errors import OutOfBoundsError, TensorStateError, UsageError
from .pipes import TPosition
from .sanitizer import AccessTracker, call_site, describe_tensor, format_site, guess_name, tensor_body

GM_ALIGN = 512  # simulated GM allocations start on 512 B boundaries, like device malloc

# GetValue/SetValue are instructions of the scalar unit: npusim.instructions.scalar (a layer above these
# classes, which it checks against) installs them here when imported, as ``import npusim`` always does.
_scalar_unit: dict = {}


def install_scalar_unit(get_value, set_value) -> None:
    """Route ``get_value``/``set_value`` of both tensor classes to the scalar unit's instructions."""
    _scalar_unit.update(get=get_value, set=set_value)


class GmBuffer:
    """One device allocation: a flat numpy view of the caller's array, a GM address, a tracker."""

    __slots__ = ("array", "flat", "raw", "name", "addr", "nbytes", "tracker", "dtype")

    def __init__(self, array: np.ndarray, name: str, addr: int, check: bool):
        if not isinstance(array, np.ndarray):
            raise UsageError(f"{name}: a GM argument must be a numpy array, not {type(array).__name__}",
                             hint=f"pass np.asarray({name}) (a torch tensor: {name}.numpy())")
        if not array.flags.c_contiguous:
            raise UsageError(f"{name}: a GM argument must be C-contiguous (this one is a strided view)",
                             hint=f"pass np.ascontiguousarray({name})")
        self.dtype = dtypes.as_dtype(array.dtype, name)
        self.array = array
        self.flat = array.reshape(-1)
        self.raw = self.flat.view(np.uint8)
        self.name = name
        self.addr = addr
        self.nbytes = array.nbytes
        self.tracker = AccessTracker(f"GM '{name}'", self.nbytes) if check else None


class GlobalTensor:
    """A tensor in global memory (GM): ``GlobalTensor`` over a launch argument, viewed from ``offset``.

    Kernels receive GlobalTensors for every numpy array passed to :func:`npusim.launch`.
    """

    __slots__ = ("buf", "offset", "size", "dtype")
    position = TPosition.GM

    def __init__(self, buf: GmBuffer, offset: int = 0, size: int | None = None):
        self.buf = buf
        self.offset = offset
        self.size = buf.flat.size - offset if size is None else size
        self.dtype = buf.dtype

    @property
    def name(self) -> str:
        return self.buf.name

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the whole launch argument (for reading sizes in a kernel)."""
        return self.buf.array.shape

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key) -> "GlobalTensor":
        # no check of the end here: the instruction that touches the data reports the exact range
        start, stop = _bounds(key, self.size, self)
        if start < 0 or stop < 0:
            n = self.buf.flat.size
            lo, hi = self.offset + start, self.offset + stop
            raise OutOfBoundsError(
                f"negative GM offset: {guess_name(self) or self.name}[{_key_text(key)}] asks for elements "
                f"[{lo}, {hi}) of '{self.name}', which has {n} elements ({self.dtype.name}); GM offsets do not "
                f"wrap around to the end as Python's negative indices do",
                hint="an offset computed from the previous tile (e.g. off - tile with off = 0) is negative: "
                     "start at the first tile or clamp it with max(0, ...); for the last k elements write "
                     "x[len(x) - k:]", where=format_site(call_site()), tensor=self.name, range=(lo, hi), size=n)
        return GlobalTensor(self.buf, self.offset + start, max(0, stop - start))

    def byte_addr(self, elem: int = 0) -> int:
        return self.buf.addr + (self.offset + elem) * self.dtype.itemsize

    def check_range(self, start: int, count: int, op: str, site) -> None:
        """Elements [start, start+count) from this view must lie inside the view and the allocation."""
        lo = self.offset + start
        if 0 <= lo and lo + count <= self.buf.flat.size and start + count > self.size:
            raise OutOfBoundsError(
                f"{op} touches elements [{start}, {start + count}) of the slice {self.name}"
                f"[{self.offset}:{self.offset + self.size}], which has {self.size} elements: "
                f"{start + count - self.size} element(s) past the end of the slice",
                hint="make the slice as long as the copy, or copy fewer elements",
                where=format_site(site), tensor=self.name, range=(lo, lo + count), size=self.size)
        if lo < 0 or lo + count > self.buf.flat.size or count < 0:
            n = self.buf.flat.size
            how = (f"it starts {-lo} element(s) before the first" if lo < 0 else
                   f"{lo + count - n} element(s) past the end")
            raise OutOfBoundsError(
                f"GM out of bounds: {op} touches elements [{lo}, {lo + count}) of '{self.name}', which has "
                f"{n} elements ({self.dtype.name}); {how}",
                hint=("GM offsets and indices count from the first element and must be >= 0" if lo < 0 else
                      f"it starts at element {lo}, at or past the end: the offset (the index you slice GM with) is "
                      f"too large" if lo >= n else
                      "either the count is too long (a last tile is shorter than the others: compute its length "
                      "from the total size, e.g. min(tile, total - offset)) or the offset is too large (the "
                      "earlier tiles already cover the part before it)"),
                where=format_site(site), tensor=self.name, range=(lo, lo + count), size=n)

    def get_value(self, index: int):
        """Read one element through the scalar unit (GetValue on GM)."""
        return _scalar_unit["get"](self, index)

    def set_value(self, index: int, value) -> None:
        """Write one element through the scalar unit (SetValue on GM)."""
        _scalar_unit["set"](self, index, value)

    def __repr__(self) -> str:
        return f"GlobalTensor('{self.name}', {self.dtype.name}, offset={self.offset}, size={self.size})"


class Slot:
    """A block of on-chip memory handed out by a queue or TBuf; tracks the tensor lifecycle."""

    __slots__ = ("memory", "addr", "nbytes", "label", "state", "gen", "owner",
                 "ready_t", "ready_vc", "free_t", "free_vc", "site", "views")

    FREE, ALLOCATED, QUEUED, DEQUEUED, SCRATCH, ENDED = ("free", "allocated", "enqueued", "dequeued", "scratch",
                                                         "ended")   # ENDED: its launch is over

    def __init__(self, memory, addr: int, nbytes: int, label: str, owner):
        self.memory = memory
        self.addr = addr
        self.nbytes = nbytes
        self.label = label
        self.owner = owner
        self.state = Slot.FREE
        self.gen = 0
        self.ready_t = self.free_t = 0.0
        self.ready_vc = self.free_vc = None
        self.site = None
        self.views: dict = {}  # dtype -> numpy view of the whole block


class LocalTensor:
    """A typed view of on-chip memory at a position (VECIN, A1, CO1, ...), from alloc_tensor or TBuf.get."""

    __slots__ = ("slot", "gen", "addr", "size", "dtype", "position", "_view")

    def __init__(self, slot: Slot, addr: int, size: int, dtype, position: TPosition):
        self.slot = slot
        self.gen = slot.gen
        self.addr = addr
        self.size = size
        self.dtype = dtype
        self.position = position
        self._view = None

    @property
    def memory(self):
        return self.slot.memory

    @property
    def name(self) -> str:
        return self.slot.label

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        return self.size

    def view(self) -> np.ndarray:
        """The numpy view of the whole tensor (no timing, no checks: for the simulator's own use)."""
        v = self._view
        if v is None:
            slot, d = self.slot, self.dtype
            whole = slot.views.get(d)
            if whole is None:
                whole = slot.views[d] = slot.memory.buf[slot.addr:slot.addr + slot.nbytes].view(d)
            if self.addr == slot.addr and self.size == whole.size:
                v = whole
            elif (self.addr - slot.addr) % d.itemsize:  # a reinterpreted, unaligned sub-tensor
                v = slot.memory.buf[self.addr:self.addr + self.nbytes].view(d)
            else:
                first = (self.addr - slot.addr) // d.itemsize
                v = whole[first:first + self.size]
            self._view = v
        return v

    def __getitem__(self, key) -> "LocalTensor":
        start, size = _slice(key, self.size, self)
        t = LocalTensor(self.slot, self.addr + start * self.dtype.itemsize, size, self.dtype, self.position)
        t.gen = self.gen
        return t

    def reinterpret_cast(self, dtype) -> "LocalTensor":
        """The same bytes seen as another dtype (ReinterpretCast)."""
        d = dtypes.as_dtype(dtype, "reinterpret_cast(dtype)")
        if self.nbytes % d.itemsize:
            raise UsageError(f"reinterpret_cast of {describe_tensor(self)}: {self.nbytes} B cannot be viewed as "
                             f"{d.name}", hint=f"reinterpret a part of a multiple of {d.itemsize} B")
        t = LocalTensor(self.slot, self.addr, self.nbytes // d.itemsize, d, self.position)
        t.gen = self.gen
        return t

    def get_value(self, index: int):
        """Read one element through the scalar unit (GetValue): needs a flag after vector writes."""
        return _scalar_unit["get"](self, index)

    def set_value(self, index: int, value) -> None:
        """Write one element through the scalar unit (SetValue)."""
        _scalar_unit["set"](self, index, value)

    def to_numpy(self) -> np.ndarray:
        """A copy of the contents, for debugging only: free, untimed and unchecked (like a printf)."""
        return self.view().copy()

    def check_usable(self, op: str, site, start: int = 0, count: int | None = None,
                     hint: "str | Callable[[], str]" = "") -> None:
        """The tensor must be live and owned by the caller, and [start, start+count) inside it (``hint``:
        the caller's advice when it is not, e.g. a padding rule; a function of none, to build it only then)."""
        slot = self.slot
        if slot.state == Slot.ENDED:
            raise TensorStateError(
                f"{op} uses {self.name} from a launch that has ended",
                hint="a tensor lives for one launch: take it from alloc_tensor/deque or TBuf.get in the kernel "
                     "that uses it, not from a variable kept from an earlier launch",
                where=format_site(site), tensor=self.name)
        if slot.gen != self.gen or slot.state == Slot.FREE:
            raise TensorStateError(
                f"{op} uses {self.name} after free_tensor (it was freed at "
                f"{format_site(slot.site) if slot.site else '?'})",
                hint="use a tensor only between alloc_tensor/deque and free_tensor; take a new one with "
                     "alloc_tensor() or deque() for the next tile",
                where=format_site(site), tensor=self.name)
        if slot.state == Slot.QUEUED:
            raise TensorStateError(
                f"{op} uses {self.name} while it is enqueued: the consumer must deque() it first",
                hint="after enque(t), get the tensor back with t = queue.deque() before using it",
                where=format_site(site), tensor=self.name)
        if count is not None and (start < 0 or start + count > self.size):
            var = guess_name(self)
            isz = self.dtype.itemsize
            first = (self.addr - slot.addr) // isz
            part = (f"; it is the part [{first}:{first + self.size}] of a buffer of {slot.nbytes // isz} elements "
                    f"({slot.nbytes} B)" if first or self.nbytes != slot.nbytes else "")
            raise OutOfBoundsError(
                f"{op} touches elements [{start}, {start + count}) of local tensor {self.name}"
                f"{f' (variable {var})' if var else ''}, which has {self.size} elements ({self.dtype.name}, "
                f"{self.nbytes} B at {self.position.name}){part}: "
                f"{f'{start + count - self.size} element(s) past its end' if start >= 0 else 'a negative start'}",
                hint=(hint() if callable(hint) else hint) or "make the count fit the tensor, or allocate a bigger buffer in "
                                         "init_buffer", where=format_site(site), tensor=self.name)

    def __repr__(self) -> str:
        return (f"LocalTensor({self.name}, {self.position.name}, {self.dtype.name}, size={self.size}, "
                f"addr={self.addr:#x})")


def _bounds(key, size: int, t) -> tuple[int, int]:
    """(start, stop) of ``t[key]`` in elements of ``t``, unchecked: an int is ``t[key:]``."""
    if type(key) is slice and key.step is None and type(key.start) is int and key.stop is None:
        return key.start, size   # x[offset:], the form of every tile loop
    if isinstance(key, (int, np.integer)):
        return int(key), size
    if isinstance(key, slice):
        if key.step not in (None, 1):
            raise UsageError(f"{describe_tensor(t)}: only contiguous slices [start:stop] are supported, not a "
                             f"step of {key.step}", hint="copy with DataCopyParams strides for every k-th block")
        return (0 if key.start is None else int(key.start)), (size if key.stop is None else int(key.stop))
    raise UsageError(f"{describe_tensor(t)}: index with an element offset, not {type(key).__name__}",
                     hint="write t[offset:] or t[a:b] (element offsets)")


def _key_text(key) -> str:
    if isinstance(key, slice):
        return f"{'' if key.start is None else key.start}:{'' if key.stop is None else key.stop}"
    return f"{key}:"


def _slice(key, size: int, t) -> tuple[int, int]:
    """(start, size) of a local tensor's ``t[key]``; it must lie inside the tensor."""
    start, stop = _bounds(key, size, t)
    if start < 0 or start > size or stop < start or stop > size:
        if start < 0 or stop < 0:
            why, hint = ("negative offsets do not wrap around to the end", "compute an offset >= 0")
        elif stop > size:
            why = f"{stop - size} element(s) past its end"
            hint = (f"offsets count elements, not bytes: the tensor holds {size} {t.dtype.name} elements "
                    f"({size * t.dtype.itemsize} B)")
        else:
            why, hint = "stop is before start", "write t[a:b] with a <= b"
        raise OutOfBoundsError(f"{guess_name(t) or t.name}[{_key_text(key)}] is outside its {size} elements "
                               f"({tensor_body(t)}): {why}", hint=hint, where=format_site(call_site()),
                               tensor=t.name)
    return start, stop - start
