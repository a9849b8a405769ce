"""The operator wrapping layer: declare an operator (OpDef), infer shapes and dtypes, tile on the host (with
a cache for dynamic shapes), and launch its kernel; the two-stage call of aclnn. See :mod:`.opdef` and
:mod:`.runtime`."""

from .opdef import AttrDecl, InferContext, OpDef, OpError, TensorDecl, TilingData
from .runtime import (DEFAULT_CACHE, REGISTRY, CacheStats, Executor, OpResult, TilingCache, call,
                      execute, get, get_workspace_size, register)
from . import conv, library  # noqa: E402,F401  (register the built-in operators)

__all__ = ["AttrDecl", "InferContext", "OpDef", "OpError", "TensorDecl", "TilingData", "DEFAULT_CACHE", "REGISTRY",
           "CacheStats", "Executor", "OpResult", "TilingCache", "call", "execute", "get", "get_workspace_size",
           "register"]
