"""TPipe, TQue and TBuf: on-chip memory management whose queue calls carry the synchronisation [S3].

- ``TPipe.init_buffer(que, num, length)`` reserves ``num`` blocks of ``length`` bytes (rounded up to 32 B);
  ``num=2`` is double buffering.
- ``alloc_tensor`` takes a free block; the producer pipe waits until the block's previous consumer freed
  it (that guards against overwriting data still being read).
- ``enque`` marks the data ready (a set_flag from the producer pipe); ``deque`` makes the consumer pipe
  wait for it; ``free_tensor`` releases the block (a set_flag from the consumer pipe).
- ``TBuf`` is scratch memory that cannot be queued: ordering accesses to it is up to the kernel.
"""

from __future__ import annotations

import sys
from collections import deque as _deque

from . import dtypes
from .core import current
from .errors import CapacityError, QueueError, TensorStateError, UsageError, report
from .pipes import Pipe, TPosition, queue_pipes
from .sanitizer import call_site, format_site, frame_site, guess_name, queue_text
from .tensor import LocalTensor, Slot


def _align_for(cfg, memory: str) -> int:
    return {"UB": cfg.ub_align_bytes, "L1": cfg.l1_align_bytes, "L0A": cfg.l0ab_align_bytes,
            "L0B": cfg.l0ab_align_bytes, "L0C": cfg.l0c_align_bytes}[memory]


class TPipe:
    """Owns the on-chip memory of a kernel; one per kernel (TPipe)."""

    def __init__(self) -> None:
        self.core = current()

    def init_buffer(self, target: "TQue | TBuf", num: int = 1, length: int | None = None) -> None:
        """Reserve memory for a queue (``init_buffer(que, num, length)``) or a TBuf
        (``init_buffer(buf, length)``). ``length`` is in bytes per block, rounded up to 32 B."""
        if isinstance(target, TBuf):
            if length is not None:
                raise UsageError(f"init_buffer({guess_name(target) or 'buf'}, {num}, {length}): a TBuf has one "
                                 f"buffer, so no buffer count", hint="call init_buffer(buf, length)")
            length, num = num, 1
        elif not isinstance(target, TQue):
            raise UsageError(f"init_buffer needs a TQue, TQueBind or TBuf, not {type(target).__name__}",
                             hint="create the queue first, e.g. q = TQue(TPosition.VECIN), then "
                                  "pipe.init_buffer(q, num, length)")
        if length is None:
            raise UsageError(f"init_buffer({queue_text(target)}, {num}) without a length",
                             hint="init_buffer(que, num, length): give the length of each buffer in bytes")
        if not isinstance(num, int) or num < 1:
            raise UsageError(f"init_buffer({queue_text(target)}, ...): num must be a positive int, got {num!r}",
                             hint="num is the buffer count: 1, or 2 for double buffering")
        if not isinstance(length, int) or length < 1:
            raise UsageError(f"init_buffer({queue_text(target)}, ...): length must be a positive int of bytes, "
                             f"got {length!r}", hint="length is in bytes: elements * dtype itemsize, e.g. "
                                                     "tile * 2 for float16")
        if target.slots:
            raise UsageError(f"init_buffer called twice for {queue_text(target)}",
                             hint="give each queue or TBuf its memory once; create another TQue for more buffers")
        core = self.core
        if core.n_buffers + num > core.cfg.max_buffers:
            raise CapacityError(f"too many buffers: a TPipe holds at most {core.cfg.max_buffers}, this "
                                f"init_buffer would make {core.n_buffers + num}",
                                hint="share buffers between stages or use fewer queues",
                                where=format_site(call_site()))
        target.name = target.name or guess_name(target, sys._getframe(1)) or f"{target.position.name}_{len(core.queues)}"
        target._attach(core)
        mem = core.memory(target.position.memory)
        length = -(-length // 32) * 32
        align = _align_for(core.cfg, mem.name)
        for i in range(num):
            label = f"'{target.name}'[{i}]" if num > 1 else f"'{target.name}'"
            addr = mem.allocate(length, align, f"{target.position.name} buffer {label}", target)
            target._add_slot(Slot(mem, addr, length, label, target))
        core.n_buffers += num


class TQue:
    """A FIFO of tensors between two pipes at one position, e.g. ``TQue(TPosition.VECIN)``.

    ``depth`` is how many tensors may be enqueued at once (default: as many as there are buffers).
    """

    def __init__(self, position: TPosition, depth: int | None = None, *, name: str | None = None):
        self.position = TPosition(position)
        self.dst_position: TPosition | None = None
        self.depth = depth
        self.name = name
        self.slots: list[Slot] = []
        self._free: _deque = _deque()
        self._queued: _deque = _deque()
        self.core = None
        self.producer = self.consumer = None

    def _attach(self, core) -> None:
        self.core = core
        p, c = queue_pipes(self.position, self.dst_position, core.cfg.has_fixpipe)
        self.producer, self.consumer = int(p), int(c)
        core.queues.append(self)

    def _add_slot(self, slot: Slot) -> None:
        self.slots.append(slot)
        self._free.append(slot)

    def _need_init(self, what: str):
        if self.core is None:
            name = self.name or guess_name(self) or "queue"
            if self.slots:   # Core.release() ran: its launch is over
                raise UsageError(f"{what} on queue {queue_text(self)} from a launch that has ended",
                                 hint="a queue lives for one launch: create it and init_buffer it in the kernel "
                                      "that uses it")
            raise UsageError(f"{what} on queue {queue_text(self)}, which has no memory: init_buffer was never "
                             f"called for it", hint=f"call pipe.init_buffer({name}, num, length) before using it")
        return self.core

    def alloc_tensor(self, dtype) -> LocalTensor:
        """Take a free buffer as a tensor of ``dtype`` (AllocTensor<T>). Its contents are undefined."""
        core = self.core or self._need_init("alloc_tensor")
        d = dtypes.as_dtype(dtype, "alloc_tensor(dtype)")
        free = self._free
        if not free:
            self._all_taken()
        slot = free.popleft()
        slot.state = Slot.ALLOCATED
        slot.site = frame_site(sys._getframe(1))
        core.scalar_issue()
        # the producer waits until the last consumer of this block released it
        p = self.producer
        core.wait_until(p, slot.free_t, slot.free_vc)
        live, ready = core.pipe_free[p], core.pipe_ready[p]
        if ready > live:
            live = ready
        core.occupancy.append((live, slot.memory.name, slot.nbytes))
        return LocalTensor(slot, slot.addr, slot.nbytes // d.itemsize, d, self.position)

    def _all_taken(self):
        held = ", ".join(f"{s.label} ({s.state} at {format_site(s.site) if s.site else '?'})" for s in self.slots)
        raise QueueError(
            f"alloc_tensor on '{self.name}' ({self.position.name}) but all {len(self.slots)} buffer(s) are in "
            f"use: {held}",
            hint="free_tensor() each tensor when you are done with it; a queue with num=N buffers holds at "
                 "most N tensors at once",
            where=format_site(call_site()), queue=self.name)

    def enque(self, tensor: LocalTensor) -> bool:
        """Hand a filled tensor to the consumer (EnQue: a set_flag from the producer pipe)."""
        core = self.core or self._need_init("enque")
        slot = self._own(tensor, "enque")
        if slot.state != Slot.ALLOCATED:
            raise TensorStateError(f"enque({slot.label}) but it is {slot.state}; only a tensor from "
                                   f"alloc_tensor() can be enqueued",
                                   hint="alloc_tensor -> write -> enque -> deque -> read -> free_tensor",
                                   where=format_site(call_site()))
        if len(self._queued) >= (self.depth or len(self.slots)):
            depth = self.depth or len(self.slots)
            raise QueueError(f"enque on '{self.name}' but it already holds {depth} tensor(s) (depth={depth})",
                             hint="deque before enqueuing more, or create the TQue with a larger depth",
                             where=format_site(call_site()))
        core.scalar_issue()
        slot.state = Slot.QUEUED
        slot.site = frame_site(sys._getframe(1))
        p = self.producer
        slot.ready_t = core.fire_time(p)
        slot.ready_vc = list(core.vc[p]) if core.check else None
        self._queued.append(tensor)
        return True

    def deque(self) -> LocalTensor:
        """Take the oldest enqueued tensor (DeQue: the consumer pipe waits until its data is ready)."""
        core = self.core or self._need_init("deque")
        if not self._queued:
            raise QueueError(f"deque() on '{self.name}' ({self.position.name}) but nothing is enqueued: on "
                             f"hardware {Pipe(self.consumer).label} would wait forever",
                             hint="enque a tensor before deque(), one deque per enque",
                             where=format_site(call_site()))
        tensor = self._queued.popleft()   # handed back as it was enqueued (its view is made already)
        slot = tensor.slot
        core.scalar_issue()
        slot.state = Slot.DEQUEUED
        slot.site = frame_site(sys._getframe(1))
        core.wait_until(self.consumer, slot.ready_t, slot.ready_vc)
        return tensor

    # Ascend C spellings
    EnQue = enque
    DeQue = deque

    def free_tensor(self, tensor: LocalTensor) -> None:
        """Release the tensor's buffer for the next alloc_tensor (FreeTensor: a set_flag from the consumer)."""
        core = self.core or self._need_init("free_tensor")
        slot = self._own(tensor, "free_tensor")
        if slot.state == Slot.QUEUED:
            raise TensorStateError(f"free_tensor({slot.label}) while it is enqueued",
                                   hint="deque() it first", where=format_site(call_site()))
        pipe = self.consumer if slot.state == Slot.DEQUEUED else self.producer
        core.scalar_issue()
        slot.free_t = core.fire_time(pipe)
        slot.free_vc = list(core.vc[pipe]) if core.check else None
        slot.state = Slot.FREE
        slot.site = frame_site(sys._getframe(1))
        slot.gen += 1
        core.occupancy.append((slot.free_t, slot.memory.name, -slot.nbytes))
        self._free.append(slot)

    def vacant(self) -> bool:
        """True when alloc_tensor would succeed (VacantInQue)."""
        return bool(self._free)

    def _own(self, tensor, op) -> Slot:
        if type(tensor) is LocalTensor:
            slot = tensor.slot
            if slot.owner is self and slot.gen == tensor.gen:
                return slot
        slot = getattr(tensor, "slot", None)
        if slot is None or not isinstance(tensor, LocalTensor):
            raise UsageError(f"{op} on {queue_text(self)} needs a LocalTensor from this queue, not "
                             f"{type(tensor).__name__}", hint=f"pass the tensor alloc_tensor() or deque() of "
                                                              f"'{self.name}' returned")
        if slot.state == Slot.ENDED:
            tensor.check_usable(op, call_site())   # raises: the tensor's launch is over
        if slot.owner is not self:
            raise UsageError(f"{op}: tensor {slot.label} belongs to '{slot.owner.name}', not to "
                             f"{queue_text(self)}", hint=f"call {slot.owner.name}.{op}(...) for it, or use the "
                                                         f"tensor this queue handed out")
        if slot.gen != tensor.gen:
            raise TensorStateError(f"{op}({slot.label}) on a tensor that was already freed",
                                   hint="each tensor is freed exactly once",
                                   where=format_site(call_site()))
        return slot

    def _check_at_end(self) -> None:
        for slot in self.slots:
            if slot.state in (Slot.ALLOCATED, Slot.QUEUED, Slot.DEQUEUED):
                report(QueueError(
                    f"kernel ended with buffer {slot.label} of queue '{self.name}' still {slot.state} (taken at "
                    f"{format_site(slot.site)}): its data was never consumed or its buffer never freed",
                    hint="every alloc_tensor needs an enque/deque pair and a free_tensor",
                    where=format_site(slot.site)), self.core.mode)


class TQueBind(TQue):
    """A queue whose buffers move between two positions, e.g. ``TQueBind(VECIN, VECOUT)`` for a copy
    that goes GM -> UB -> GM without computing (MTE2 produces, MTE3 consumes)."""

    def __init__(self, src: TPosition, dst: TPosition, depth: int | None = None, *, name: str | None = None):
        super().__init__(src, depth, name=name)
        self.dst_position = TPosition(dst)


class TBuf:
    """Scratch memory at a position (usually VECCALC) that cannot be enqueued (TBuf)."""

    def __init__(self, position: TPosition = TPosition.VECCALC, *, name: str | None = None):
        self.position = TPosition(position)
        self.name = name
        self.slots: list[Slot] = []
        self.core = None

    def _attach(self, core) -> None:
        self.core = core

    def _add_slot(self, slot: Slot) -> None:
        slot.state = Slot.SCRATCH
        self.slots.append(slot)

    def get(self, dtype, count: int | None = None) -> LocalTensor:
        """The buffer (or its first ``count`` elements) as a tensor of ``dtype`` (Get<T>)."""
        if not self.slots:
            name = self.name or guess_name(self) or "buf"
            raise UsageError(f"TBuf '{name}'.get before init_buffer: it has no memory",
                             hint=f"call pipe.init_buffer({name}, length) first")
        d = dtypes.as_dtype(dtype, "TBuf.get(dtype)")
        slot = self.slots[0]
        n = slot.nbytes // d.itemsize
        if count is not None:
            if count > n:
                raise CapacityError(f"TBuf '{self.name}'.get({d.name}, {count}) but it holds only {n} "
                                    f"{d.name} elements ({slot.nbytes} B)",
                                    hint="give init_buffer a larger length", where=format_site(call_site()))
            n = count
        return LocalTensor(slot, slot.addr, n, d, self.position)

    def get_with_offset(self, dtype, count: int, offset_bytes: int) -> LocalTensor:
        """``count`` elements of ``dtype`` starting ``offset_bytes`` into the buffer (GetWithOffset)."""
        t = self.get(dtypes.as_dtype(dtype))
        if offset_bytes % t.dtype.itemsize:
            raise UsageError(f"get_with_offset on TBuf '{self.name}': offset {offset_bytes} B is not a multiple "
                             f"of the {t.dtype.name} element size ({t.dtype.itemsize} B)",
                             hint="the offset is in bytes: elements * itemsize")
        return t[offset_bytes // t.dtype.itemsize: offset_bytes // t.dtype.itemsize + count]
