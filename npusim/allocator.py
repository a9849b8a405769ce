"""LocalMemAllocator: on-chip tensors handed out in order of request, without queues (Ascend C's static
Tensor programming: ``LocalMemAllocator<Hardware::L1> a; a.Alloc<TPosition::A1, half>(count)``) [S3].

Every tensor it gives out is a TBuf of its own: accesses are ordered by flags only, as in C++.
"""

from __future__ import annotations

from enum import Enum

from . import dtypes
from .errors import UsageError
from .memory import TBuf, TPipe
from .pipes import TPosition


class Hardware(Enum):
    """Physical memories of ``LocalMemAllocator<Hardware::X>``."""

    UB = "UB"
    L1 = "L1"
    L0A = "L0A"
    L0B = "L0B"
    L0C = "L0C"


_DEFAULT = {Hardware.UB: TPosition.VECCALC, Hardware.L1: TPosition.A1, Hardware.L0A: TPosition.A2,
            Hardware.L0B: TPosition.B2, Hardware.L0C: TPosition.CO1}


def init_soc_state() -> None:
    """InitSocState: resets the core's mode registers at a kernel's start; nothing to do in npusim."""


class LocalMemAllocator:
    """Hands out tensors of one memory one after another."""

    def __init__(self, hardware: Hardware = Hardware.UB):
        if not isinstance(hardware, Hardware):
            raise UsageError(f"LocalMemAllocator takes a Hardware memory, not {hardware!r}",
                             hint="LocalMemAllocator(Hardware.L1)")
        self.hardware = hardware
        self.pipe = TPipe()
        self.bufs: list[TBuf] = []

    def alloc(self, *args):
        """``alloc(position, dtype, count)`` (Alloc<TPosition, T>(count)) or ``alloc(dtype, count)``
        (Alloc<T, N>(), at the memory's usual position): the next ``count`` elements, 32 B aligned."""
        if len(args) == 3:
            position, dtype, count = args
        elif len(args) == 2:
            (dtype, count), position = args, _DEFAULT[self.hardware]
        else:
            raise UsageError(f"LocalMemAllocator.alloc takes (position, dtype, count) or (dtype, count), got "
                             f"{len(args)} arguments", hint="alloc(ns.TPosition.A1, ns.float16, 1024)")
        pos = TPosition(position)
        if pos.memory != self.hardware.value:
            raise UsageError(f"LocalMemAllocator({self.hardware.name}).alloc: {pos.name} is in {pos.memory}",
                             hint=f"allocate {pos.name} tensors from a LocalMemAllocator(Hardware.{pos.memory})")
        d = dtypes.as_dtype(dtype, "alloc(dtype)")
        buf = TBuf(pos)
        self.pipe.init_buffer(buf, count * d.itemsize)
        self.bufs.append(buf)
        return buf.get(d, count)
