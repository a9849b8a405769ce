"""npusim: a functional and timed simulator of an Ascend (Da Vinci) style AI core, for teaching.

Kernels are plain Python functions written against Ascend C's programming model with Python names::

    import npusim as ns

    @ns.kernel
    def copy(x, y, n):
        pipe = ns.TPipe()
        q = ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.VECOUT)
        pipe.init_buffer(q, 1, n * 2)
        t = q.alloc_tensor(ns.float16)
        ns.data_copy(t, x, n)
        q.enque(t)
        t = q.deque()
        ns.data_copy(y, t, n)
        q.free_tensor(t)

    run = ns.launch(copy, 1, x, y, 1024)
    print(run.profile)

The numbers behind the model are in ``docs/hardware.md`` and ``docs/cost-model.md``.
"""

from . import costs, formats, numerics
from .config import PRESETS, HardwareConfig, a2, classic, get_config
from .chipsync import (ascend_is_aic, ascend_is_aiv, cross_core_set_flag, cross_core_wait_flag, get_core_num_aic,
                       get_core_num_aiv, get_sub_block_idx, get_sub_block_num, init_determine_compute_workspace,
                       notify_next_block, set_atomic_add, set_atomic_max, set_atomic_min, set_atomic_none, sync_all,
                       wait_pre_block)
from .core import get_block_idx, get_block_num, get_core_config
from .dtypes import bfloat16, float16, float32, int8, int16, int32, uint8
from .errors import (AlignmentError, CapacityError, DtypeError, NpuSimError, OutOfBoundsError, QueueError,
                     RaceError, SanitizerError, SanitizerWarning, SyncError, TensorStateError,
                     UninitializedReadError, UsageError)
from .instructions import *  # noqa: F401,F403  (the instruction set)
from .instructions import abs, max, min  # noqa: F401  (kept out of __all__: they shadow builtins)
from .instructions import __all__ as _instructions
from .l2 import L2Cache, shared_l2
from .launch import LaunchResult, kernel, launch
from .memory import TBuf, TPipe, TQue, TQueBind
from .allocator import Hardware, LocalMemAllocator, init_soc_state
from .numerics import RoundMode
from .params import (CFG_COLUMN_MAJOR, CFG_NZ, CFG_ROW_MAJOR, CO2Layout, DataCopyExtParams, DataCopyPadExtParams,
                     DataCopyParams, FixpipeParams, FixpipeParamsV220, LoadData2DParams, LoadData3DParams, MmadParams,
                     Nd2NzParams, QuantMode)
from .pipes import HardEvent, Pipe, QuePosition, TPosition
from .profile import Profile
from .tracebacks import install as _install_tracebacks, show_internals

presets = PRESETS

__version__ = "0.1.0"

__all__ = [
    "HardwareConfig", "PRESETS", "a2", "classic", "get_config", "get_block_idx", "get_block_num", "get_core_config",
    "bfloat16", "float16", "float32", "int8", "int16", "int32", "uint8",
    "NpuSimError", "UsageError", "SanitizerError", "SanitizerWarning", "CapacityError", "AlignmentError",
    "OutOfBoundsError", "TensorStateError", "QueueError", "RaceError", "UninitializedReadError", "SyncError",
    "DtypeError",
    "LaunchResult", "kernel", "launch", "L2Cache", "shared_l2", "TBuf", "TPipe", "TQue", "TQueBind", "RoundMode",
    "DataCopyParams", "DataCopyExtParams", "DataCopyPadExtParams", "Nd2NzParams", "LoadData2DParams",
    "LoadData3DParams", "MmadParams", "FixpipeParams", "FixpipeParamsV220", "CO2Layout", "CFG_NZ",
    "CFG_ROW_MAJOR", "CFG_COLUMN_MAJOR", "QuantMode", "HardEvent", "Pipe", "TPosition", "QuePosition",
    "Profile", "costs", "formats", "numerics", "show_internals", "Hardware", "LocalMemAllocator", "init_soc_state",
    *_instructions,
    "sync_all", "cross_core_set_flag", "cross_core_wait_flag", "set_atomic_add", "set_atomic_max", "set_atomic_min",
    "set_atomic_none", "ascend_is_aiv", "ascend_is_aic", "get_sub_block_idx", "get_sub_block_num",
    "get_core_num_aiv", "get_core_num_aic", "init_determine_compute_workspace", "wait_pre_block",
    "notify_next_block",
]

_install_tracebacks()  # in a notebook, simulator errors show the learner's frames only
