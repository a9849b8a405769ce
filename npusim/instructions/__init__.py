"""The instruction set: data movement, Cube, vector, scalar and synchronisation."""

from .cube import mmad
from .datamove import data_copy, data_copy_pad, load_data, load_data_3d, set_pad_value
from .fixpipe import fixpipe
from .gm_init import init_global_memory
from .scalar import scalar_get, scalar_set  # noqa: F401  (installs LocalTensor/GlobalTensor.get_value, set_value)
from .sync import pipe_barrier, set_flag, wait_flag
from .compare import CMPMODE, SELMODE, compare, compare_scalar, get_cmp_mask, select, set_cmp_mask
from .events import alloc_event_id, fetch_event_id, get_tpipe_ptr, release_event_id
from .reduce import (ReduceOrder, block_reduce_max, block_reduce_min, block_reduce_sum, get_reduce_repeat_sum_spr,
                     reduce_max, reduce_min, reduce_sum, whole_reduce_max, whole_reduce_min, whole_reduce_sum)
from .repeat import (MASK_PLACEHOLDER, BinaryRepeatParams, UnaryRepeatParams, reset_mask, set_mask_count,
                     set_mask_norm, set_vector_mask)
from .vector import abs, add, adds, cast, div, duplicate, exp, ln, max, maxs, min, mins, mul, muls, reciprocal, relu, sqrt, sub
from .vector_more import (BrcbRepeatParams, GatherMaskParams, axpy, bitwise_and, bitwise_not, bitwise_or, brcb,
                          gather, gather_mask, leaky_relu, power, rsqrt, shift_left, shift_right, sigmoid, tanh)

__all__ = ["mmad", "data_copy", "data_copy_pad", "fixpipe", "load_data", "load_data_3d", "pipe_barrier",
           "set_flag", "wait_flag", "CMPMODE", "add", "adds", "cast", "compare", "div", "duplicate", "exp",
           "ln", "maxs", "mins", "mul", "muls", "reciprocal", "reduce_max", "reduce_sum", "relu", "select",
           "sqrt", "sub", "SELMODE", "compare_scalar", "alloc_event_id", "fetch_event_id", "release_event_id",
           "ReduceOrder", "block_reduce_max", "block_reduce_min", "block_reduce_sum", "reduce_min", "whole_reduce_max",
           "whole_reduce_min", "whole_reduce_sum", "MASK_PLACEHOLDER", "BinaryRepeatParams", "UnaryRepeatParams",
           "reset_mask", "set_mask_count", "set_mask_norm", "set_vector_mask", "BrcbRepeatParams",
           "GatherMaskParams", "axpy", "bitwise_and", "bitwise_not", "bitwise_or", "brcb", "gather", "gather_mask",
           "leaky_relu", "power", "rsqrt", "shift_left", "shift_right", "sigmoid", "tanh", "set_pad_value", "get_cmp_mask",
           "set_cmp_mask", "get_tpipe_ptr", "init_global_memory",
           "get_reduce_repeat_sum_spr"]
