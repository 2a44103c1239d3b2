"""ladle.torch's modules over the layers of layers_extra.py and the
all-gather and reduce-scatter primitives (import them from ladle.torch)."""

import torch

from . import layers_extra as _extra
from . import primitives as _prims
from .torch import LadleModule, _np, _np_dtype, _OpModule


def AllGather(p, shape, dim=0, dtype=torch.float64, **kw):
    """The all-gather along a partition axis (adjoint: reduce-scatter)."""
    return _OpModule(_prims.all_gather(p, shape, dim, dtype=_np_dtype(dtype), **kw), dtype)


def ReduceScatter(p, shape, dim=0, dtype=torch.float64, **kw):
    """The reduce-scatter along a partition axis (adjoint: all-gather)."""
    return _OpModule(_prims.reduce_scatter(p, shape, dim, dtype=_np_dtype(dtype), **kw), dtype)


# the layers of layers_extra (their options as keywords, as there)
def GroupNorm(x_shape, num_groups, dtype=torch.float32, **kw):
    return _module(_extra.GroupNorm, (x_shape, num_groups), dtype, kw,
                   ("eps", "affine"))


def LayerNorm(x_shape, normalized_ndim=1, dtype=torch.float32, **kw):
    return _module(_extra.LayerNorm, (x_shape, normalized_ndim), dtype, kw,
                   ("eps", "elementwise_affine", "bias"))


def ConvTranspose2d(x_shape, out_channels, kernel, dtype=torch.float32, **kw):
    return _module(_extra.ConvTranspose, (x_shape, out_channels, kernel), dtype, kw, _CT_OPTS)


def AdaptiveAvgPool2d(x_shape, out_size, dtype=torch.float32, **kw):
    return _module(_extra.AdaptivePool, (x_shape, out_size, "avg"), dtype, kw, ())


def AdaptiveMaxPool2d(x_shape, out_size, dtype=torch.float32, **kw):
    return _module(_extra.AdaptivePool, (x_shape, out_size, "max"), dtype, kw, ())


def DistGroupNorm(p_x, x_shape, num_groups, dtype=torch.float32, **kw):
    return _module(_extra.DistGroupNorm, (p_x, x_shape, num_groups), dtype, kw,
                   ("eps", "affine", "checked"))


def DistConvTranspose2d(p_x, x_shape, out_channels, kernel, dtype=torch.float32, **kw):
    """x (global x_shape) over p_x along batch and space; y in balance."""
    return _module(_extra.DistConvTranspose, (p_x, x_shape, out_channels, kernel), dtype, kw,
                   _CT_OPTS + ("checked",))


def DistAdaptivePool2d(p_x, x_shape, out_size, kind="avg", dtype=torch.float32, **kw):
    return _module(_extra.DistAdaptivePool, (p_x, x_shape, out_size, kind), dtype, kw,
                   ("checked",))


_CT_OPTS = ("stride", "padding", "output_padding", "dilation", "groups", "bias", "seed")


def _module(factory, args, dtype, kw, opts):
    """A LadleModule over factory(*args, options): the keywords named in
    opts go to the layer, the others to LadleModule."""
    layer_kw = {k: kw.pop(k) for k in opts if k in kw}
    return LadleModule(factory(*args, dtype=_np(dtype), **layer_kw), dtype, **kw)
