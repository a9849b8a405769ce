"""Pipes, positions and hardware events: the vocabulary of Ascend C, with Python names.

A pipe is an in-order execution queue of the AI core. A position says which on-chip memory a tensor lives
in. A HardEvent names the (source pipe, destination pipe) pair that a set_flag/wait_flag orders [S1, S2].
"""

from __future__ import annotations

from enum import Enum, IntEnum


class Pipe(IntEnum):
    """Execution pipes (PIPE_S, PIPE_V, ...). ``ALL`` is only valid for pipe_barrier."""

    S = 0      # scalar: issues every instruction, GetValue/SetValue
    V = 1      # vector unit (and L0C->UB on coupled cores without Fixpipe)
    M = 2      # Cube (Mmad)
    MTE1 = 3   # L1 -> L0A/L0B/UB
    MTE2 = 4   # GM -> UB/L1
    MTE3 = 5   # UB -> GM
    FIX = 6    # Fixpipe: L0C -> GM/L1 (A2)
    ALL = 7

    @property
    def label(self) -> str:
        """Name as the Ascend docs print it, e.g. ``PIPE_MTE2``."""
        return f"PIPE_{self.name}"

    @property
    def msprof_name(self) -> str:
        """Name of this pipe's column in msprof PipeUtilization (cube, vec, scalar, mte1, ...)."""
        return _MSPROF[self]


N_PIPES = 7
PIPES = tuple(Pipe(i) for i in range(N_PIPES))
_MSPROF = {Pipe.S: "scalar", Pipe.V: "vec", Pipe.M: "cube", Pipe.MTE1: "mte1", Pipe.MTE2: "mte2",
           Pipe.MTE3: "mte3", Pipe.FIX: "fixp"}
#: Display order of pipes, following the flow of data through the core.
PIPE_ORDER = (Pipe.MTE2, Pipe.MTE1, Pipe.M, Pipe.V, Pipe.FIX, Pipe.MTE3, Pipe.S)


class TPosition(str, Enum):
    """Logical positions of local tensors, mapped to physical memories [S1]."""

    GM = "GM"
    VECIN = "VECIN"
    VECOUT = "VECOUT"
    VECCALC = "VECCALC"
    A1 = "A1"
    B1 = "B1"
    A2 = "A2"
    B2 = "B2"
    CO1 = "CO1"
    CO2 = "CO2"
    TSCM = "TSCM"

    @property
    def memory(self) -> str:
        """Physical memory: UB, L1, L0A, L0B, L0C or GM (CO2 is UB on the coupled cores we model)."""
        return _MEMORY[self]


QuePosition = TPosition  # older Ascend C name

_MEMORY = {
    TPosition.GM: "GM", TPosition.VECIN: "UB", TPosition.VECOUT: "UB", TPosition.VECCALC: "UB",
    TPosition.CO2: "UB", TPosition.A1: "L1", TPosition.B1: "L1", TPosition.TSCM: "L1",
    TPosition.A2: "L0A", TPosition.B2: "L0B", TPosition.CO1: "L0C",
}
ON_CHIP_MEMORIES = ("UB", "L1", "L0A", "L0B", "L0C")


def queue_pipes(src: TPosition, dst: TPosition | None, has_fixpipe: bool) -> tuple[Pipe, Pipe]:
    """(producer, consumer) pipes that a queue at ``src`` (or bound ``src``->``dst``) synchronises.

    EnQue is a set_flag from the producer, DeQue the consumer's wait_flag; FreeTensor is a set_flag from
    the consumer and AllocTensor the producer's wait, which guards the buffer against early overwrite [S3].
    """
    if dst is not None and dst != src:
        key = (src, dst)
        if key not in _BOUND:
            from .errors import UsageError

            raise UsageError(f"TQueBind({src.name}, {dst.name}) is not a supported pair; "
                             f"supported: {', '.join(f'{a.name}->{b.name}' for a, b in _BOUND)}",
                             hint="use two queues (e.g. a VECIN queue into the compute, a VECOUT queue out of it)")
        return _BOUND[key]
    if src == TPosition.CO1:
        return (Pipe.M, Pipe.FIX if has_fixpipe else Pipe.V)
    try:
        return _QUEUE[src]
    except KeyError:
        from .errors import UsageError

        raise UsageError(f"{src.name} has no queue", hint=f"use a TBuf({src.name}) for scratch space: its "
                                                          f"accesses are ordered with flags") from None


_QUEUE = {
    TPosition.VECIN: (Pipe.MTE2, Pipe.V),
    TPosition.VECOUT: (Pipe.V, Pipe.MTE3),
    TPosition.CO2: (Pipe.V, Pipe.MTE3),
    TPosition.A1: (Pipe.MTE2, Pipe.MTE1),
    TPosition.B1: (Pipe.MTE2, Pipe.MTE1),
    TPosition.A2: (Pipe.MTE1, Pipe.M),
    TPosition.B2: (Pipe.MTE1, Pipe.M),
}
_BOUND = {
    (TPosition.VECIN, TPosition.VECOUT): (Pipe.MTE2, Pipe.MTE3),
    (TPosition.A1, TPosition.VECIN): (Pipe.MTE2, Pipe.MTE1),
}


class HardEvent(Enum):
    """A (source pipe, destination pipe) pair for set_flag/wait_flag, named SRC_DST as in Ascend C [S2]."""

    MTE2_MTE1 = (Pipe.MTE2, Pipe.MTE1)
    MTE1_MTE2 = (Pipe.MTE1, Pipe.MTE2)
    MTE1_M = (Pipe.MTE1, Pipe.M)
    M_MTE1 = (Pipe.M, Pipe.MTE1)
    MTE2_V = (Pipe.MTE2, Pipe.V)
    V_MTE2 = (Pipe.V, Pipe.MTE2)
    MTE3_V = (Pipe.MTE3, Pipe.V)
    V_MTE3 = (Pipe.V, Pipe.MTE3)
    M_V = (Pipe.M, Pipe.V)
    V_M = (Pipe.V, Pipe.M)
    V_V = (Pipe.V, Pipe.V)
    MTE3_MTE1 = (Pipe.MTE3, Pipe.MTE1)
    MTE1_MTE3 = (Pipe.MTE1, Pipe.MTE3)
    MTE1_V = (Pipe.MTE1, Pipe.V)
    MTE2_M = (Pipe.MTE2, Pipe.M)
    M_MTE2 = (Pipe.M, Pipe.MTE2)
    V_MTE1 = (Pipe.V, Pipe.MTE1)
    M_FIX = (Pipe.M, Pipe.FIX)
    FIX_M = (Pipe.FIX, Pipe.M)
    MTE3_MTE2 = (Pipe.MTE3, Pipe.MTE2)
    MTE2_MTE3 = (Pipe.MTE2, Pipe.MTE3)
    S_V = (Pipe.S, Pipe.V)
    V_S = (Pipe.V, Pipe.S)
    S_MTE2 = (Pipe.S, Pipe.MTE2)
    MTE2_S = (Pipe.MTE2, Pipe.S)
    S_MTE3 = (Pipe.S, Pipe.MTE3)
    MTE3_S = (Pipe.MTE3, Pipe.S)
    MTE2_FIX = (Pipe.MTE2, Pipe.FIX)
    FIX_MTE2 = (Pipe.FIX, Pipe.MTE2)
    FIX_S = (Pipe.FIX, Pipe.S)
    M_S = (Pipe.M, Pipe.S)
    FIX_MTE3 = (Pipe.FIX, Pipe.MTE3)
    MTE1_FIX = (Pipe.MTE1, Pipe.FIX)
    FIX_MTE1 = (Pipe.FIX, Pipe.MTE1)
    FIX_FIX = (Pipe.FIX, Pipe.FIX)

    @property
    def src(self) -> Pipe:
        return self.value[0]

    @property
    def dst(self) -> Pipe:
        return self.value[1]
