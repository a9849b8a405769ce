"""Lab 04 (blocked Conv2D): the code its notebook and its checks share, around the kernels of
:mod:`npusim.conv`: the hooks a learner's code plugs into (one module per exercise) and the references.

- :mod:`.band` (exercise 1): :class:`BandConv`, the reuse kernel whose blocking the learner writes;
- :mod:`.transform` (exercise 2): :class:`ZeroWriter` and the reference DMA transform;
- :mod:`.im2col` (exercise 3): :class:`Im2colConv`, the img2col kernel whose ``load_data_3d`` call the
  learner writes;
- :mod:`.reference`: the float64 convolution and the explorer's tiling helper.
"""

from .band import Band, BandConv, ReferenceBand, band_conv, band_conv_args, band_reads_figure, run_band_conv
from .im2col import Im2colConv, Im2colTile, ReferenceIm2col, im2col_conv, im2col_conv_args, run_im2col_conv
from .reference import conv2d_float64, explore_tiling
from .transform import SLOTS, ZeroWriter, dma_to_nc1hwc0

__all__ = ["Band", "BandConv", "ReferenceBand", "band_conv", "band_conv_args", "band_reads_figure", "run_band_conv",
           "Im2colConv", "Im2colTile", "ReferenceIm2col", "im2col_conv", "im2col_conv_args", "run_im2col_conv",
           "conv2d_float64", "explore_tiling", "SLOTS", "ZeroWriter", "dma_to_nc1hwc0"]
