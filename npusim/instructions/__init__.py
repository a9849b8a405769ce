"""The instruction set: data movement, Cube, vector, scalar and synchronisation."""

from .cube import mmad
from .datamove import data_copy, data_copy_pad, load_data, load_data_3d
from .fixpipe import fixpipe
from .scalar import scalar_get, scalar_set  # noqa: F401  (installs LocalTensor/GlobalTensor.get_value, set_value)
from .sync import pipe_barrier, set_flag, wait_flag
from .vector import (CMPMODE, abs, add, adds, cast, compare, div, duplicate, exp, ln, max, maxs, min, mins,
                     mul, muls, reciprocal, reduce_max, reduce_sum, relu, select, sqrt, sub)

__all__ = ["mmad", "data_copy", "data_copy_pad", "fixpipe", "load_data", "load_data_3d", "pipe_barrier",
           "set_flag", "wait_flag", "CMPMODE", "add", "adds", "cast", "compare", "div", "duplicate", "exp",
           "ln", "maxs", "mins", "mul", "muls", "reciprocal", "reduce_max", "reduce_sum", "relu", "select",
           "sqrt", "sub"]
