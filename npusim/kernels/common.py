"""Small helpers shared by the reference kernels."""

from __future__ import annotations

import npusim as ns


def copy(dst, src, count: int) -> None:
    """GM <-> UB copy of any length: DataCopy when it is a whole number of 32 B blocks, else DataCopyPad."""
    if (count * src.dtype.itemsize) % 32 == 0:
        ns.data_copy(dst, src, count)
    else:
        ns.data_copy_pad(dst, src, count)
