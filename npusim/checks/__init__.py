"""The checks that lab notebooks call: ``from npusim import checks as check`` then ``check.vector_add(k)``.

A check runs the learner's code on hidden inputs (odd sizes, tails, one element, the largest that fits),
compares with a reference at a tolerance suited to the dtype, requires a clean sanitizer run, and where the
lab is about speed, a performance target. A failure raises :class:`CheckFailed` saying what was expected,
what came back, on which input, and what to look at; a pass prints one line.
"""

from ._core import CheckFailed
from .lab00_01 import copy_cycles, peak_tflops, vector_add, vector_add_fast
from .lab02_03 import matmul, matmul_tiling, softmax

__all__ = ["CheckFailed", "peak_tflops", "copy_cycles", "vector_add", "vector_add_fast", "softmax", "matmul",
           "matmul_tiling"]
