"""Ascend C's high-level APIs, written with npusim's instructions: the Matmul object (``lib/matmul_intf.h``)
and its host tiling (``TCubeTiling``, ``MultiCoreMatmulTiling``).

    from npusim.highlevel import Matmul, MatmulType, CubeFormat, regist_matmul_obj

    mm = Matmul(MatmulType(TPosition.GM, CubeFormat.ND, ns.float16), MatmulType(..., ns.float16),
                MatmulType(..., ns.float32))
    regist_matmul_obj(pipe, None, mm, tiling)     # REGIST_MATMUL_OBJ(&pipe, workspace, mm, &tiling)
    mm.set_tensor_a(gm_a); mm.set_tensor_b(gm_b); mm.iterate_all(gm_c); mm.end()
"""

from .matmul import CubeFormat, Matmul, MatmulType, regist_matmul_obj
from .tiling import MultiCoreMatmulTiling, PlatformAscendC, TCubeTiling

__all__ = ["CubeFormat", "Matmul", "MatmulType", "regist_matmul_obj", "MultiCoreMatmulTiling", "PlatformAscendC",
           "TCubeTiling"]
