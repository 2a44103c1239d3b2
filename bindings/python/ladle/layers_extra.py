"""Layers added to the C API after layers.py: group, layer and RMS norm,
transposed convolution, adaptive pooling, interpolation, the token
embedding, multi-head attention, and the distributed forms of those that have one. The
factories follow layers.py: a *_desc helper per descriptor, dtype and
device arguments, and checked=True for LADLE_CHECKED on distributed ones.
Distributed factories are collective over p_x; a bad call raises
LadleError on every rank alike."""

from ctypes import byref, c_size_t, c_void_p

import numpy as np

from . import _capi
from . import _core
from ._capi import i64_array
from ._core import _error, _shape, as_tensor, check, ladle_device, ladle_dtype
from .layers import (Layer, _create, _dist_shape, _flags, _lookup, _loss, _made, _triple,
                     linear_desc, loss_desc)

INTERP_MODES = {"nearest": 0, "linear": 1}


def _spatial(shape, what):
    """The spatial extents of an N x C x S... shape (1 to 3 of them)."""
    if not 3 <= len(shape) <= 5:
        raise _error("LADLE_ERR_SHAPE", "%s has %d dimensions; it needs N x C and 1 to 3 "
                     "spatial ones" % (what, len(shape)))
    return len(shape) - 2


# ---- group norm -------------------------------------------------------------------

def groupnorm_desc(num_groups, num_channels, eps=1e-5, affine=True, checked=False):
    """A ladle_groupnorm_desc: num_channels channels in num_groups groups."""
    d = _capi.ladle_groupnorm_desc()
    _core.lib.ladle_groupnorm_desc_init(byref(d), int(num_groups), int(num_channels))
    d.eps, d.affine, d.flags = float(eps), int(bool(affine)), _flags(checked)
    return d


def GroupNorm(x_shape, num_groups, eps=1e-5, affine=True, dtype=np.float64, device="cpu"):
    """Group normalisation of x (N x C x ...), as torch.nn.GroupNorm;
    parameters weight (gamma) and bias (beta) per channel when affine."""
    shape = _shape(x_shape)
    d = groupnorm_desc(num_groups, shape[1] if len(shape) > 1 else 0, eps, affine)
    return _create(_core.lib.ladle_groupnorm_create, byref(d), len(shape), i64_array(shape),
                   ladle_dtype(dtype), ladle_device(device))


def DistGroupNorm(p_x, x_shape, num_groups, eps=1e-5, affine=True, dtype=np.float64,
                  device="cpu", checked=False):
    """GroupNorm with x (global x_shape, p_x's ndim) in balanced blocks over
    p_x: batch and space split freely, channels only in whole groups."""
    shape = _dist_shape(p_x, x_shape, "x_shape")
    d = groupnorm_desc(num_groups, shape[1] if len(shape) > 1 else 0, eps, affine, checked)
    h = c_void_p()
    check(_core.lib.ladle_dist_groupnorm_create(byref(d), p_x.handle, i64_array(shape),
                                                ladle_dtype(dtype), ladle_device(device),
                                                byref(h)))
    return _made(h, keep=[p_x])


# ---- transposed convolution ---------------------------------------------------------

def conv_transpose_desc(nd, in_channels, out_channels, kernel, stride=1, padding=0,
                        output_padding=0, dilation=1, groups=1, bias=True, checked=False):
    """A ladle_conv_transpose_desc (the options of torch's ConvTransposeNd)."""
    d = _capi.ladle_conv_transpose_desc()
    _core.lib.ladle_conv_transpose_desc_init(byref(d), nd, int(in_channels), int(out_channels), 1)
    for name, v in (("kernel", kernel), ("stride", stride), ("padding", padding),
                    ("output_padding", output_padding), ("dilation", dilation)):
        arr = getattr(d, name)
        for i, a in enumerate(_triple(v, nd, name)):
            arr[i] = a
    d.groups, d.bias, d.flags = int(groups), int(bool(bias)), _flags(checked)
    return d


def _ct_desc(shape, out_channels, kernel, stride, padding, output_padding, dilation, groups,
             bias, checked):
    nd = _spatial(shape, "x_shape")
    return conv_transpose_desc(nd, shape[1], out_channels, kernel, stride, padding,
                               output_padding, dilation, groups, bias, checked)


def ConvTranspose(x_shape, out_channels, kernel, stride=1, padding=0, output_padding=0,
                  dilation=1, groups=1, bias=True, dtype=np.float64, device="cpu", seed=0):
    """Transposed convolution over x of x_shape (N x C_in x S..., 1 to 3
    spatial dims); weight C_in x C_out/groups x K..., as torch's."""
    shape = _shape(x_shape)
    d = _ct_desc(shape, out_channels, kernel, stride, padding, output_padding, dilation, groups,
                 bias, False)
    return _create(_core.lib.ladle_conv_transpose_create, byref(d), i64_array(shape),
                   ladle_dtype(dtype), ladle_device(device), seed)


def DistConvTranspose(p_x, x_shape, out_channels, kernel, stride=1, padding=0, output_padding=0,
                      dilation=1, groups=1, bias=True, dtype=np.float64, device="cpu", seed=0,
                      checked=False):
    """ConvTranspose with space split over p_x: y in balanced blocks, x as
    the layer's x_layout says (the adjoint of a spatial DistConv)."""
    shape = _dist_shape(p_x, x_shape, "x_shape")
    d = _ct_desc(shape, out_channels, kernel, stride, padding, output_padding, dilation, groups,
                 bias, checked)
    h = c_void_p()
    check(_core.lib.ladle_dist_conv_transpose_create(byref(d), p_x.handle, i64_array(shape),
                                                     ladle_dtype(dtype), ladle_device(device),
                                                     seed, byref(h)))
    return _made(h, keep=[p_x])


# ---- adaptive pooling -----------------------------------------------------------------

ADAPTIVE = {"max": ("ladle_adaptive_max_pool_create", "ladle_dist_adaptive_max_pool_create"),
            "avg": ("ladle_adaptive_avg_pool_create", "ladle_dist_adaptive_avg_pool_create")}


def _adaptive(kind, shape, out_size):
    if kind not in ADAPTIVE:
        raise _error("LADLE_ERR_ARG", "unknown adaptive pooling %r (one of avg, max)" % (kind,))
    return ADAPTIVE[kind], i64_array(_triple(out_size, _spatial(shape, "x_shape"), "out_size"))


def AdaptivePool(x_shape, out_size, kind="avg", dtype=np.float64, device="cpu"):
    """Adaptive average or max pooling of N x C x S... to N x C x out_size
    (an int for every spatial dimension, or one per dimension)."""
    shape = _shape(x_shape)
    (seq, _), out = _adaptive(kind, shape, out_size)
    return _create(getattr(_core.lib, seq), len(shape), i64_array(shape), out,
                   ladle_dtype(dtype), ladle_device(device))


def DistAdaptivePool(p_x, x_shape, out_size, kind="avg", dtype=np.float64, device="cpu",
                     checked=False):
    """AdaptivePool with x and y both in balanced blocks over p_x (any
    dimension split)."""
    shape = _dist_shape(p_x, x_shape, "x_shape")
    (_, dist), out = _adaptive(kind, shape, out_size)
    h = c_void_p()
    check(getattr(_core.lib, dist)(p_x.handle, i64_array(shape), out, ladle_dtype(dtype),
                                   ladle_device(device), _flags(checked), byref(h)))
    return _made(h, keep=[p_x])


def DistGlobalAvgPool(p_x, x_shape, p_y, dtype=np.float64, device="cpu", checked=False):
    """x [N, C, S...] over p_x to y [N, C] over p_y (D x Pc)."""
    shape = _dist_shape(p_x, x_shape, "x_shape")
    h = c_void_p()
    check(_core.lib.ladle_dist_global_avg_pool_create(p_x.handle, i64_array(shape), p_y.handle,
                                                      ladle_dtype(dtype), ladle_device(device),
                                                      _flags(checked), byref(h)))
    return _made(h, keep=[p_x, p_y])


# ---- interpolation --------------------------------------------------------------------

def interp_desc(nd, mode="nearest", scale=1, out_size=None, align_corners=False, checked=False):
    """A ladle_interp_desc: integer scale factors, or explicit out_size."""
    d = _capi.ladle_interp_desc()
    _core.lib.ladle_interp_desc_init(byref(d), _lookup(INTERP_MODES, mode, "interpolation"), nd,
                                     1)
    for i, a in enumerate(_triple(scale, nd, "scale")):
        d.scale[i] = a
    if out_size is not None:
        for i, a in enumerate(_triple(out_size, nd, "out_size")):
            d.out_size[i] = a
    d.align_corners, d.flags = int(bool(align_corners)), _flags(checked)
    return d


def Interpolate(x_shape, mode="nearest", scale=1, out_size=None, align_corners=False,
                dtype=np.float64, device="cpu"):
    """Upsampling of N x C x S... as torch.nn.functional.interpolate
    (nearest, or linear/bilinear/trilinear by the spatial rank)."""
    shape = _shape(x_shape)
    d = interp_desc(_spatial(shape, "x_shape"), mode, scale, out_size, align_corners)
    return _create(_core.lib.ladle_interp_create, byref(d), i64_array(shape),
                   ladle_dtype(dtype), ladle_device(device))


def DistInterpolate(p_x, x_shape, mode="nearest", scale=1, out_size=None, align_corners=False,
                    dtype=np.float64, device="cpu", checked=False):
    """Interpolate with x and y both in balanced blocks over p_x."""
    shape = _dist_shape(p_x, x_shape, "x_shape")
    d = interp_desc(_spatial(shape, "x_shape"), mode, scale, out_size, align_corners, checked)
    h = c_void_p()
    check(_core.lib.ladle_dist_interp_create(byref(d), p_x.handle, i64_array(shape),
                                             ladle_dtype(dtype), ladle_device(device), byref(h)))
    return _made(h, keep=[p_x])


# ---- layer norm, RMS norm, embedding -----------------------------------------------------

def LayerNorm(x_shape, normalized_ndim=1, eps=1e-5, elementwise_affine=True, bias=True,
              dtype=np.float64, device="cpu"):
    """Layer normalisation over the last normalized_ndim dimensions, as
    torch.nn.LayerNorm(x_shape[-normalized_ndim:])."""
    shape = _shape(x_shape)
    d = _capi.ladle_layernorm_desc()
    _core.lib.ladle_layernorm_desc_init(byref(d), int(normalized_ndim))
    d.eps, d.elementwise_affine, d.bias = float(eps), int(bool(elementwise_affine)), \
        int(bool(bias))
    return _create(_core.lib.ladle_layernorm_create, byref(d), len(shape), i64_array(shape),
                   ladle_dtype(dtype), ladle_device(device))


def RMSNorm(x_shape, normalized_ndim=1, eps=1e-6, elementwise_affine=True, dtype=np.float64,
            device="cpu"):
    """RMS normalisation over the last normalized_ndim dimensions (eps
    1e-6 by default; torch's default is the dtype's epsilon)."""
    shape = _shape(x_shape)
    d = _capi.ladle_rmsnorm_desc()
    _core.lib.ladle_rmsnorm_desc_init(byref(d), int(normalized_ndim))
    d.eps, d.elementwise_affine = float(eps), int(bool(elementwise_affine))
    return _create(_core.lib.ladle_rmsnorm_create, byref(d), len(shape), i64_array(shape),
                   ladle_dtype(dtype), ladle_device(device))


def embedding_desc(num_embeddings, embedding_dim, checked=False):
    d = _capi.ladle_embedding_desc()
    _core.lib.ladle_embedding_desc_init(byref(d), int(num_embeddings), int(embedding_dim))
    d.flags = _flags(checked)
    return d


def Embedding(ids_shape, num_embeddings, embedding_dim, dtype=np.float64, device="cpu", seed=0):
    """y = weight[ids] for int64 ids of ids_shape; y is ids_shape + (E,).
    No input gradient: call backward(ctx, dy, need_dx=False) or only
    backward_weight."""
    shape = _shape(ids_shape)
    d = embedding_desc(num_embeddings, embedding_dim)
    return _create(_core.lib.ladle_embedding_create, byref(d), len(shape), i64_array(shape),
                   ladle_dtype(dtype), ladle_device(device), seed)


def DistVocabEmbedding(p_w, p_y, ids_shape, num_embeddings, embedding_dim, dtype=np.float64,
                       device="cpu", seed=0, checked=False):
    """Embedding with the weight's rows split over p_w (1-d), the ids
    (N x T) whole on every rank of p_w and y on the one rank of p_y.
    Collective over p_w and p_y."""
    d = embedding_desc(num_embeddings, embedding_dim, checked)
    parts = _capi.ladle_dist_partitions(None, p_w.handle, p_y.handle)
    h = c_void_p()
    check(_core.lib.ladle_dist_vocab_embedding_create(byref(d), byref(parts),
                                                      i64_array(_shape(ids_shape)),
                                                      ladle_dtype(dtype), ladle_device(device),
                                                      seed, byref(h)))
    return _made(h, keep=[p_w, p_y])


def DistVocabLoss(p_x, x_shape, reduction="mean", label_smoothing=0.0, dtype=np.float64,
                  device="cpu", checked=False):
    """Cross entropy over logits M x C split over p_x (D x P): rows over D,
    classes over P; each rank passes the labels of its rows."""
    d = loss_desc("cross_entropy", reduction, label_smoothing, checked)
    h = c_void_p()
    check(_core.lib.ladle_dist_vocab_loss_create(byref(d), p_x.handle,
                                                 i64_array(_shape(x_shape)), ladle_dtype(dtype),
                                                 ladle_device(device), byref(h)))
    return _loss(h, d.kind, d.reduction, keep=[p_x])


class PosEmbeddingLayer(Layer):
    """A learned positional embedding (made by PosEmbedding)."""

    def set_offset(self, offset):
        """x's positions are offset .. offset + T - 1 from now on."""
        check(_core.lib.ladle_pos_embedding_set_offset(self.handle, int(offset)))


def PosEmbedding(x_shape, max_len, dtype=np.float64, device="cpu", seed=0):
    """y[n, t] = x[n, t] + weight[offset + t] over x (N x T x E); weight
    max_len x E."""
    shape = _shape(x_shape)
    h = c_void_p()
    check(_core.lib.ladle_pos_embedding_create(len(shape), i64_array(shape), int(max_len),
                                               ladle_dtype(dtype), ladle_device(device), seed,
                                               byref(h)))
    return _made(h, PosEmbeddingLayer)


# ---- attention --------------------------------------------------------------------------

class AttentionLayer(Layer):
    """A multi-head attention layer (made by Attention): a Layer with
    memory()."""

    def memory(self):
        """(saved, workspace, probs) in bytes: what a ctx keeps, the op's
        scratch, and what storing the probabilities would take instead."""
        sizes = [c_size_t() for _ in range(3)]
        check(_core.lib.ladle_attention_memory(self.handle, *[byref(v) for v in sizes]))
        return tuple(v.value for v in sizes)


def attention_desc(embed_dim, num_heads, head_dim=0, causal=True, qkv_bias=True,
                   out_bias=True, scale=0.0, block=0, f32_tiles=False, checked=False):
    """A ladle_attention_desc (head_dim 0: E / H; scale 0: 1 / sqrt(d))."""
    d = _capi.ladle_attention_desc()
    _core.lib.ladle_attention_desc_init(byref(d), int(embed_dim), int(num_heads))
    if head_dim:
        d.head_dim = int(head_dim)
    d.causal, d.qkv_bias, d.out_bias = int(bool(causal)), int(bool(qkv_bias)), \
        int(bool(out_bias))
    d.scale, d.block, d.f32_tiles = float(scale), int(block), int(bool(f32_tiles))
    d.flags = _flags(checked)
    return d


def Attention(x_shape, num_heads, dtype=np.float64, device="cpu", seed=0, **opts):
    """Multi-head self-attention over x (N x T x E): qkv = x W_qkv^T + b_qkv
    ([Q K V], each H d wide, d = E / H unless head_dim), per head
    softmax(scale Q K^T) V (causal unless causal=False; scale 0: 1/sqrt(d)),
    then y = O W_out^T + b_out. opts: those of attention_desc."""
    shape = _shape(x_shape)
    d = attention_desc(shape[-1] if shape else 0, num_heads, **opts)
    h = c_void_p()
    check(_core.lib.ladle_attention_create(byref(d), len(shape), i64_array(shape),
                                           ladle_dtype(dtype), ladle_device(device), seed,
                                           byref(h)))
    return _made(h, AttentionLayer)


def DistTPAttention(p, x_shape, num_heads, dtype=np.float64, device="cpu", seed=0, **opts):
    """Attention with x (N x T x E) over p (D x S x 1: batch and sequence
    blocks), the heads split S ways (Megatron-style). Collective over p."""
    shape = _shape(x_shape)
    d = attention_desc(shape[-1] if shape else 0, num_heads, **opts)
    h = c_void_p()
    check(_core.lib.ladle_dist_tp_attention_create(byref(d), p.handle, i64_array(shape),
                                                   ladle_dtype(dtype), ladle_device(device),
                                                   seed, byref(h)))
    return _made(h, AttentionLayer, keep=[p])


def DistTPLinear(p, x_shape, features, row=False, bias=True, dtype=np.float64, device="cpu",
                 seed=0, checked=False):
    """The tensor-parallel linear over p (D x S x 1), x_shape the stream's
    N x T x E: column-parallel E -> features (y split by batch block and
    features), or with row=True row-parallel features -> E (x a column
    layer's y). Collective over p."""
    shape = _shape(x_shape)
    e = shape[-1] if shape else 0
    d = linear_desc(features if row else e, e if row else features, bias,
                    _flags(checked) | (_capi.TP_ROW if row else 0))
    h = c_void_p()
    check(_core.lib.ladle_dist_tp_linear_create(byref(d), p.handle, i64_array(shape),
                                                ladle_dtype(dtype), ladle_device(device), seed,
                                                byref(h)))
    return _made(h, keep=[p])



# ---- residual blocks and the parameterless functions ------------------------------------

def _wrap(body, create, keep=()):
    """The layer create(&body, &wrapper) makes, owning body from then on:
    body's Python object stays usable as a view while the wrapper lives."""
    h, b = c_void_p(), c_void_p(body.handle.value)
    check(create(byref(b), byref(h)))
    block = Layer(h, keep=keep)
    body._disown(block)
    body._keep.append(block)
    block._layers = [body]
    return block


def Residual(body):
    """y = x + body(x), itself a layer; it owns body from then on."""
    return _wrap(body, _core.lib.ladle_residual_create)


def DistReplicate(p, layer, checked=False):
    """Data parallelism for a sequential layer with parameters: the layer
    runs on each member of p on its own block, its weights copies of
    partition rank 0's (sync_gradients sums the copies' gradients). Owns
    layer from then on. Collective over p (its members only)."""
    return _wrap(layer, lambda b, h: _core.lib.ladle_dist_replicate_create(
        p.handle, b, _flags(checked), h), keep=[p])


def DistReplicateOn(x_layout, y_layout, layer, checked=False):
    """DistReplicate told which blocks the ranks hold: this rank's x is its
    box of x_layout, y its box of y_layout (the layer then has those
    layouts). Collective over x_layout's partition."""
    return _wrap(layer, lambda b, h: _core.lib.ladle_dist_replicate_create_on(
        x_layout.handle, y_layout.handle, b, _flags(checked), h), keep=[x_layout, y_layout])


def add(a, b, y=None):
    """y = a + b elementwise (y may be a or b); returns y."""
    if y is None:
        y = np.zeros(np.shape(a), dtype=np.asarray(a).dtype)
    at, bt, yt = as_tensor(a, "a"), as_tensor(b, "b"), as_tensor(y, "y", True)
    check(_core.lib.ladle_add(at.handle, bt.handle, yt.handle))
    return y


def _handles(tensors):
    return (c_void_p * max(len(tensors), 1))(*[t.handle.value for t in tensors])


def concat(xs, dim=1, y=None):
    """The arrays xs concatenated along dim (into y when given); returns y."""
    xs = [as_tensor(x, "x") for x in xs]
    if y is None:
        shapes = [t.shape for t in xs]
        shape = list(shapes[0]) if shapes else []
        if shape and 0 <= dim < len(shape):
            shape[dim] = sum(s[dim] for s in shapes)
        y = np.zeros(shape, dtype=xs[0].numpy().dtype if xs else np.float64)
    yt = as_tensor(y, "y", True)
    check(_core.lib.ladle_concat(len(xs), _handles(xs), int(dim), yt.handle))
    return y


def concat_backward(dy, dim, dxs):
    """Split dy along dim back into the arrays dxs (their shapes say
    where); returns dxs."""
    dyt = as_tensor(dy, "dy")
    outs = [as_tensor(d, "dx", True) for d in dxs]
    check(_core.lib.ladle_concat_backward(dyt.handle, int(dim), len(outs), _handles(outs)))
    return dxs
