"""Conv2D on the simulated Da Vinci core, four ways (the story of labs 04-05).

``conv2d(x, w, bias, stride, padding, dilation, variant=...)`` takes NCHW numpy arrays and returns a
:class:`ConvResult` (NCHW output, the kernel's Profile, the layout transforms' Profiles, the host work).

- ``"direct"`` (a): output tiling; every output block reads its input from NCHW GM, again and again.
- ``"reuse"`` (b): input tiling; a band of input is loaded once and used by every tap, row and Cout block.
- ``"layout"`` (c): b on NC1HWC0 input, produced by a transform kernel: long contiguous DMA runs.
- ``"img2col"`` (d): load_data_3d builds the im2col matrix on chip from one copy of the input band.

Fusion (lab 06): ``conv2d(..., relu=True)`` applies ReLU in the img2col kernel's drain (an ``Epilogue``:
inside Fixpipe on A2, a vector pass in UB on 'classic'), or as a separate kernel with ``fuse=False``;
``deq_scale`` dequantises an int8 convolution to float16 there too. ``compare_fusion`` runs both ways.

Modules: geometry (shape arithmetic), tiling (block sizes, ``explain()``), host (host-side constants),
transform (layout transform kernels), staging (NCHW padding), rowwise (what a-c share), direct, reuse,
layout, img2col (the kernels), staged (img2col on the whole chip: per-group weights in L1, a staged
start), common (Drain, Epilogue), epilogue (the separate ReLU launch, dequant
scales, ``chain``), api (the host-side runners), fusion (fused vs separate). ``npusim bench``'s conv cases
are in :mod:`npusim.bench.conv`.
"""

from .api import ConvResult, conv2d, run_direct, run_img2col, run_layout, run_reuse
from .common import Epilogue
from .fusion import FusionComparison, compare_fusion
from .geometry import ConvGeometry
from .choose import choose_tiling
from .tiling import VARIANTS, ConvTiling
from . import staged as _staged  # noqa: F401  (registers the staged img2col kernel)
from .transform import to_nc1hwc0, to_nchw

__all__ = ["conv2d", "run_direct", "run_reuse", "run_layout", "run_img2col", "ConvResult", "ConvGeometry",
           "ConvTiling", "choose_tiling", "VARIANTS", "to_nc1hwc0", "to_nchw", "Epilogue", "compare_fusion",
           "FusionComparison"]
