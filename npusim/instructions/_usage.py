"""A call that does not match an instruction's signature gets a UsageError naming the Ascend C signature
(never Python's TypeError about the simulator's internals, e.g. ``_binary.<locals>.instr()``): launch turns
the TypeError of such a call into one (:func:`from_type_error`)."""

from __future__ import annotations

import inspect
import os
import re

from .. import tracebacks
from ..errors import UsageError

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_BINARY = "{C}(dst, src0, src1, count) or {C}(dst, src0, src1, mask, repeatTimes, BinaryRepeatParams)"
_UNARY = "{C}(dst, src, count) or {C}(dst, src, mask, repeatTimes, UnaryRepeatParams)"
_SCALAR = "{C}(dst, src, scalar, count) or {C}(dst, src, scalar, mask, repeatTimes, UnaryRepeatParams)"
#: the Ascend C signature of each instruction, for messages
CPP = {
    **{n: _BINARY.format(C=c) for n, c in (("add", "Add"), ("sub", "Sub"), ("mul", "Mul"), ("div", "Div"),
                                           ("max", "Max"), ("min", "Min"), ("bitwise_and", "And"),
                                           ("bitwise_or", "Or"))},
    **{n: _UNARY.format(C=c) for n, c in (("exp", "Exp"), ("ln", "Ln"), ("sqrt", "Sqrt"), ("rsqrt", "Rsqrt"),
                                          ("reciprocal", "Reciprocal"), ("abs", "Abs"), ("relu", "Relu"),
                                          ("bitwise_not", "Not"), ("sigmoid", "Sigmoid"), ("tanh", "Tanh"))},
    **{n: _SCALAR.format(C=c) for n, c in (("adds", "Adds"), ("muls", "Muls"), ("maxs", "Maxs"), ("mins", "Mins"),
                                           ("leaky_relu", "LeakyRelu"), ("shift_left", "ShiftLeft"),
                                           ("shift_right", "ShiftRight"))},
    "data_copy": "DataCopy(dst, src, count | DataCopyParams | Nd2NzParams)",
    "data_copy_pad": "DataCopyPad(dst, src, DataCopyExtParams[, DataCopyPadExtParams])",
    "load_data": "LoadData(dst, src, LoadData2DParams)", "load_data_3d": "LoadData(dst, src, LoadData3DParamsV2)",
    "mmad": "Mmad(dst, fm, filter, MmadParams) or Mmad(dst, fm, filter, bias, MmadParams)",
    "fixpipe": "Fixpipe<dstT, srcT, CFG_ROW_MAJOR>(dst, src, FixpipeParamsV220)",
    "set_flag": "SetFlag<HardEvent::SRC_DST>(eventId)", "wait_flag": "WaitFlag<HardEvent::SRC_DST>(eventId)",
    "pipe_barrier": "PipeBarrier<PIPE_X>()", "cast": "Cast(dst, src, RoundMode, count)",
    "duplicate": "Duplicate(dst, scalar, count)", "compare": "Compare(dstMask, src0, src1, CMPMODE, count)",
    "compare_scalar": "CompareScalar(dstMask, src0, scalar, CMPMODE, count)",
    "select": "Select(dst, selMask, src0, src1, SELMODE, count)",
    "reduce_max": "ReduceMax(dst, src, sharedTmpBuffer, count[, calIndex])",
    "reduce_min": "ReduceMin(dst, src, sharedTmpBuffer, count[, calIndex])",
    "reduce_sum": "ReduceSum(dst, src, sharedTmpBuffer, count)",
    "whole_reduce_sum": "WholeReduceSum(dst, src, mask, repeatTimes, dstRepStride, srcBlkStride, srcRepStride)",
    "whole_reduce_max": "WholeReduceMax(dst, src, mask, repeatTimes, dstRepStride, srcBlkStride, srcRepStride[, order])",
    "whole_reduce_min": "WholeReduceMin(dst, src, mask, repeatTimes, dstRepStride, srcBlkStride, srcRepStride[, order])",
    "block_reduce_sum": "BlockReduceSum(dst, src, repeatTimes, mask, dstRepStride, srcBlkStride, srcRepStride)",
    "block_reduce_max": "BlockReduceMax(dst, src, repeatTimes, mask, dstRepStride, srcBlkStride, srcRepStride)",
    "block_reduce_min": "BlockReduceMin(dst, src, repeatTimes, mask, dstRepStride, srcBlkStride, srcRepStride)",
    "brcb": "Brcb(dst, src, repeatTimes, BrcbRepeatParams)", "axpy": "Axpy(dst, src, scalar, count)",
    "power": "Power(dst, src0, src1, count)", "gather": "Gather(dst, src, srcOffset, srcBaseAddr, count)",
    "gather_mask": "GatherMask(dst, src0, src1Pattern, reduceMode, mask, GatherMaskParams, rsvdCnt)",
    "set_vector_mask": "SetVectorMask(maskHigh, maskLow)", "alloc_event_id": "AllocEventID<HardEvent>()",
    "fetch_event_id": "FetchEventID(HardEvent)", "release_event_id": "ReleaseEventID<HardEvent>(id)",
}


def from_type_error(e: TypeError) -> UsageError | None:
    """The UsageError for a TypeError raised by calling an instruction with arguments its signature does not
    take (Python raises it at the call, before the instruction runs), or None for any other TypeError. Found
    from the message Python gives (``add() missing 1 required positional argument: 'src1'``) and the
    traceback, whose innermost frame is then the kernel's own line: no instruction pays for the check."""
    import npusim.instructions as instructions

    m = re.match(r"(\w+)\(\) (missing|takes|got)", str(e))
    if m is None or isinstance(e, UsageError) or m.group(1) not in CPP:
        return None
    tb = e.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    if os.path.dirname(os.path.abspath(tb.tb_frame.f_code.co_filename)).startswith(_PKG):
        return None   # raised inside the simulator: not the kernel's call
    name = m.group(1)
    fn = getattr(instructions, name, None)
    try:
        sig = inspect.signature(fn)
        plain = sig.replace(parameters=[p.replace(annotation=p.empty) for p in sig.parameters.values()],
                            return_annotation=sig.empty)
    except (TypeError, ValueError):
        plain = "(...)"
    site = tracebacks.site(tb.tb_frame.f_code.co_filename, tb.tb_lineno)
    return UsageError(f"{e}: the call must match {name}{plain}", where=site,
                      hint=f"Ascend C: {CPP[name]}; npusim takes the same arguments in the same order")
