"""Host work: what the framework prepares on the CPU before a launch (not timed by the simulator).

A real Conv2D operator gets its weights already in FRACTAL_Z: weights are constants, converted once
when the model is loaded (offline, by the graph compiler), not at every call. The small constant tiles
below (the bias as a fractal, a fractal of ones, identity matrices for the Cube transpose) are
prepared the same way. Every function here is listed in ``ConvResult.host_work`` when it was used, so
that a profile never hides work done outside the simulator.
"""

from __future__ import annotations

import numpy as np

import npusim as ns
from npusim import formats

from .geometry import ConvGeometry, dtype_of


def fractal_z_weights(w: np.ndarray, g: ConvGeometry) -> np.ndarray:
    """(Cout, Cin, Kh, Kw) -> FRACTAL_Z, flat: fractal ``(k1, n1)`` at ``(k1 * N1 + n1) * 512`` bytes, with
    ``k1 = (c1 * Kh + i) * Kw + j``. Each fractal is 16 output channels x C0 input channels, row-major:
    the ZN fractal of the (K x Cout) matrix and, read the other way, the ZZ fractal of (Cout x K)."""
    dt = dtype_of(g.dtype)
    return formats.weights_to_fractal_z(np.asarray(w).astype(dt)).reshape(-1)


def ones_fractal(g: ConvGeometry) -> np.ndarray:
    """One 16 x K0 fractal whose column 0 is 1: the "ones" operand of the bias Mmad (see ``bias_*``)."""
    f = np.zeros((16, g.c0), dtype=dtype_of(g.dtype))
    f[:, 0] = 1
    return f.reshape(-1)


def bias_column_zz(bias: np.ndarray, g: ConvGeometry) -> np.ndarray:
    """Bias as the left matrix (Cout x K0, column 0 = bias), ZZ fractals (N1, 1, 16, K0), flat.

    ``C[cout, pos] = bias_column @ ones_row`` puts ``bias[cout]`` in every position of an L0C tile: the
    first Mmad of a tile (with ``k = 1``) initialises the accumulator with the bias."""
    col = np.zeros((g.n1 * 16, 1), dtype=dtype_of(g.dtype))
    col[:g.cout, 0] = bias
    return formats.nd_to_zz(col).reshape(-1)


def bias_row_zn(bias: np.ndarray, g: ConvGeometry) -> np.ndarray:
    """Bias as the right matrix (K0 x Cout, row 0 = bias), ZN fractals (1, N1, 16, K0), flat; the
    transposed twin of :func:`bias_column_zz` for kernels whose L0C tile is positions x Cout."""
    row = np.zeros((1, g.n1 * 16), dtype=dtype_of(g.dtype))
    row[0, :g.cout] = bias
    return formats.nd_to_zn(row).reshape(-1)


def identity_zz(size: int, dtype) -> np.ndarray:
    """The ``size x size`` identity as ZZ fractals (L0A layout), flat: the left matrix of a Cube transpose."""
    return formats.nd_to_zz(np.eye(size, dtype=np.dtype(dtype))).reshape(-1)


def check_bias(bias, g: ConvGeometry) -> np.ndarray | None:
    """The bias as a 1-D array of Cout values in the input dtype, or None."""
    if bias is None:
        return None
    b = np.asarray(bias)
    if b.shape != (g.cout,):
        raise ns.UsageError(f"conv2d: bias must have shape ({g.cout},), got {b.shape}")
    if g.dtype == "int8":
        raise ns.UsageError(
            "conv2d: an int8 convolution with bias is not supported: the int32 bias would have to be added "
            "by Fixpipe (npusim's fixpipe has no bias input) or by the Cube with int8 operands, and an "
            "int32 bias does not fit int8. Add the bias to the int32 output afterwards.")
    return b.astype(dtype_of(g.dtype))
