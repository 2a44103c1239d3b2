"""Layers: the sequential ones (local calls) and the distributed ones
(collective over their partitions), with forward, backward and
backward_weight over contexts, their parameters as numpy views, and the
losses."""

from ctypes import byref, c_int, c_int64, c_void_p

import numpy as np

from . import _capi
from . import _core
from ._capi import MAX_NDIM, i64_array
from ._core import (Op, Tensor, _error, _Handle, _shape, as_tensor, check,
                    ladle_device, ladle_dtype, tensor_view)

ACTIVATIONS = {"relu": 0, "leaky_relu": 1, "sigmoid": 2, "tanh": 3, "gelu": 4}
LOSSES = {"mse": 0, "l1": 1, "cross_entropy": 2, "nll": 3, "bce_with_logits": 4}
REDUCTIONS = {"mean": 0, "sum": 1, "none": 2}
POOLS = {"max": 0, "avg": 1}
BN_SYNC = {"global": 0, "local": 1, "group": 2}
INITS = {"default": 0, "kaiming_uniform": 1, "kaiming_normal": 2, "xavier_uniform": 3,
         "xavier_normal": 4, "zeros": 5}


def _lookup(table, key, what):
    if isinstance(key, int):
        return key
    try:
        return table[key]
    except KeyError:
        raise _error("LADLE_ERR_ARG", "unknown %s %r (one of %s)"
                     % (what, key, ", ".join(sorted(table))))


def _flags(checked):
    return _capi.CHECKED if checked else 0


def _dist_shape(p_x, shape, what):
    """A distributed layer's global shape: as many dimensions as p_x (the C
    call reads p_x's ndim of them)."""
    shape = _shape(shape)
    if len(shape) != p_x.ndim:
        raise _error("LADLE_ERR_PARTITION",
                     "%s has %d dimensions but p_x has %d" % (what, len(shape), p_x.ndim))
    return shape


class Ctx(_Handle):
    """What one forward saved for its backward (one per microbatch in
    flight). Keeps the forward's x and y alive until it is closed."""

    _destroy = "ladle_ctx_destroy"

    def __init__(self, layer):
        h = c_void_p()
        check(_core.lib.ladle_ctx_create(layer.handle, byref(h)))
        self._adopt(h, [layer])
        self._depend_on(layer)
        self.saved = ()


class Layer(Op):
    """A layer: forward(x, y=None, ctx=None) saves into ctx (make one with
    .ctx()) what backward(ctx, dy, dx=None) and backward_weight(ctx, dy)
    need. Without a ctx, forward runs the inference form."""

    def ctx(self):
        return Ctx(self)

    def forward(self, x, y=None, ctx=None):
        if y is None:
            y = np.zeros(self.y_shape, dtype=self.dtype)
        xt, yt = as_tensor(x, "x"), as_tensor(y, "y", True)
        check(_core.lib.ladle_layer_forward(self.handle, _core._th(ctx), xt.handle, yt.handle))
        if ctx is not None:
            ctx.saved = (xt, yt)
        return y

    __call__ = forward

    def backward(self, ctx, dy, dx=None, need_dx=True):
        """dx = (df/dx)^T dy (need_dx=False: skip it, as for a first layer)."""
        if need_dx and dx is None:
            dx = np.zeros(self.x_shape, dtype=self.dtype)
        dyt = as_tensor(dy, "dy")
        dxt = as_tensor(dx, "dx", True) if need_dx else None
        check(_core.lib.ladle_layer_backward(self.handle, _core._th(ctx), dyt.handle,
                                             _core._th(dxt)))
        return dx if need_dx else None

    def backward_weight(self, ctx, dy):
        """Accumulate the parameters' gradients (dW += (df/dW)^T dy)."""
        dyt = as_tensor(dy, "dy")
        check(_core.lib.ladle_layer_backward_weight(self.handle, _core._th(ctx), dyt.handle))

    # ---- parameters
    @property
    def num_params(self):
        return _core.lib.ladle_op_num_params(self.handle)

    def param_names(self):
        return [_core.lib.ladle_op_param_name(self.handle, i).decode()
                for i in range(self.num_params)]

    def param(self, i):
        """Parameter i as a numpy view of ladle's memory (this rank's shard)."""
        return tensor_view(_core.lib.ladle_op_param(self.handle, i), owner=self)

    def grad(self, i):
        return tensor_view(_core.lib.ladle_op_grad(self.handle, i), owner=self)

    def param_tensor(self, i):
        return Tensor._borrowed(_core.lib.ladle_op_param(self.handle, i), self)

    def grad_tensor(self, i):
        return Tensor._borrowed(_core.lib.ladle_op_grad(self.handle, i), self)

    def parameters(self):
        """[(name, param view, grad view)] for every parameter."""
        return [(n, self.param(i), self.grad(i)) for i, n in enumerate(self.param_names())]

    def bind_param(self, i, param, grad=None, copy_initial=True):
        """Parameter i (and its gradient, unless grad is None) lives in these
        numpy arrays from now on: C-contiguous, of the layer's dtype and of
        this rank's shard shape (self.param(i).shape). copy_initial: copy
        ladle's current values in first. The layer keeps the arrays alive."""
        for name, a in (("param", param), ("grad", grad)):
            if a is None:
                continue
            if not isinstance(a, np.ndarray) or not a.flags.c_contiguous or \
                    not a.flags.writeable:
                raise _error("LADLE_ERR_ARG", "bind_param: %s must be a writeable, "
                             "C-contiguous numpy array" % name)
            if a.dtype != self.dtype or a.shape != self.param(i).shape:
                raise _error("LADLE_ERR_SHAPE", "bind_param: %s is %s %s; parameter %d is %s %s"
                             % (name, a.dtype, a.shape, i, self.dtype, self.param(i).shape))
        if copy_initial:
            param[...] = self.param(i)
            if grad is not None:
                grad[...] = self.grad(i)
        ptr = lambda a: (a.ctypes.data if a.size else None) if a is not None else None
        check(_core.lib.ladle_op_bind_param(self.handle, i, ptr(param), ptr(grad)))
        self._keep += [param, grad]

    def param_shard(self, i):
        """(global_shape, offset, owner) of this rank's shard of parameter i."""
        nd = c_int()
        g, o = (c_int64 * MAX_NDIM)(), (c_int64 * MAX_NDIM)()
        owner = c_int()
        check(_core.lib.ladle_op_param_shard(self.handle, i, byref(nd), g, o, byref(owner)))
        return tuple(g[: nd.value]), tuple(o[: nd.value]), bool(owner.value)

    def zero_grad(self):
        check(_core.lib.ladle_op_zero_grad(self.handle))

    def sync_gradients(self):
        """Sum replicated parameters' gradients over their copies (collective)."""
        check(_core.lib.ladle_layer_sync_gradients(self.handle))

    def train(self, mode=True):
        check(_core.lib.ladle_layer_set_training(self.handle, int(bool(mode))))
        return self

    def eval(self):
        return self.train(False)

    def init(self, kind="default", seed=0):
        """Re-draw the weights (linear and convolution layers)."""
        check(_core.lib.ladle_layer_init(self.handle, _lookup(INITS, kind, "init"), seed))

    def running_stats(self):
        """(mean, var) numpy views of a batch norm's running statistics."""
        m, v = c_void_p(), c_void_p()
        check(_core.lib.ladle_batchnorm_running_stats(self.handle, byref(m), byref(v)))
        if not m.value:
            return None, None
        return tensor_view(m.value, owner=self), tensor_view(v.value, owner=self)


def _create(fn, *args):
    """A layer from fn(*args, &handle) (a ladle_*_create)."""
    h = c_void_p()
    check(fn(*args, byref(h)))
    return _made(h)


def _made(h, cls=Layer, keep=()):
    return cls(h, keep=keep)


# ---- sequential layers ------------------------------------------------------------

def linear_desc(in_features, out_features, bias=True, flags=0):
    """A ladle_linear_desc: in -> out features, with a bias unless bias is False."""
    d = _capi.ladle_linear_desc()
    _core.lib.ladle_linear_desc_init(byref(d), int(in_features), int(out_features))
    d.bias = int(bool(bias))
    d.flags = int(flags)
    return d


def Linear(x_shape, out_features, bias=True, dtype=np.float64, device="cpu", seed=0):
    """y = x W^T + b over x of x_shape (last extent: in_features)."""
    shape = _shape(x_shape)
    d = linear_desc(shape[-1] if len(shape) else 0, out_features, bias)
    return _create(_core.lib.ladle_linear_create, byref(d), len(shape), i64_array(shape),
                   ladle_dtype(dtype), ladle_device(device), seed)


def _triple(v, nd, what):
    if isinstance(v, (int, np.integer)):
        return [int(v)] * nd
    v = [int(a) for a in v]
    if len(v) != nd:
        raise _error("LADLE_ERR_ARG", "%s has %d values for %d spatial dimensions"
                     % (what, len(v), nd))
    return v


def conv_desc(nd, in_channels, out_channels, kernel, stride=1, padding=0, dilation=1, groups=1,
              bias=True):
    d = _capi.ladle_conv_desc()
    _core.lib.ladle_conv_desc_init(byref(d), nd, int(in_channels), int(out_channels), 1)
    for name, v in (("kernel", kernel), ("stride", stride), ("padding", padding),
                    ("dilation", dilation)):
        arr = getattr(d, name)
        for i, a in enumerate(_triple(v, nd, name)):
            arr[i] = a
    d.groups = int(groups)
    d.bias = int(bool(bias))
    return d


def Conv(x_shape, out_channels, kernel, stride=1, padding=0, dilation=1, groups=1, bias=True,
         dtype=np.float64, device="cpu", seed=0):
    """Convolution over x of x_shape (N x C_in x spatial, 1 to 3 spatial dims)."""
    shape = _shape(x_shape)
    d = conv_desc(len(shape) - 2, shape[1], out_channels, kernel, stride, padding, dilation,
                  groups, bias)
    return _create(_core.lib.ladle_conv_create,
                   byref(d), i64_array(shape), ladle_dtype(dtype), ladle_device(device), seed)


def pool_desc(nd, kernel, kind="max", stride=None, padding=0, dilation=1, ceil_mode=False,
              count_include_pad=True):
    d = _capi.ladle_pool_desc()
    _core.lib.ladle_pool_desc_init(byref(d), _lookup(POOLS, kind, "pooling"), nd, 1)
    for name, v in (("kernel", kernel), ("stride", kernel if stride is None else stride),
                    ("padding", padding), ("dilation", dilation)):
        arr = getattr(d, name)
        for i, a in enumerate(_triple(v, nd, name)):
            arr[i] = a
    d.ceil_mode = int(bool(ceil_mode))
    d.count_include_pad = int(bool(count_include_pad))
    return d


def Pool(x_shape, kernel, kind="max", stride=None, padding=0, dilation=1, ceil_mode=False,
         count_include_pad=True, dtype=np.float64, device="cpu"):
    """Max or average pooling (stride defaults to the kernel)."""
    shape = _shape(x_shape)
    d = pool_desc(len(shape) - 2, kernel, kind, stride, padding, dilation, ceil_mode,
                  count_include_pad)
    return _create(_core.lib.ladle_pool_create,
                   byref(d), i64_array(shape), ladle_dtype(dtype), ladle_device(device))


def GlobalAvgPool(x_shape, dtype=np.float64, device="cpu"):
    shape = _shape(x_shape)
    return _create(_core.lib.ladle_global_avg_pool_create,
                   len(shape), i64_array(shape), ladle_dtype(dtype), ladle_device(device))


def batchnorm_desc(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
    d = _capi.ladle_batchnorm_desc()
    _core.lib.ladle_batchnorm_desc_init(byref(d), int(num_features))
    d.eps, d.momentum = float(eps), float(momentum)
    d.affine, d.track_running_stats = int(bool(affine)), int(bool(track_running_stats))
    return d


def BatchNorm(x_shape, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
              dtype=np.float64, device="cpu"):
    """Batch normalisation over every dimension but the channels (dim 1)."""
    shape = _shape(x_shape)
    d = batchnorm_desc(shape[1], eps, momentum, affine, track_running_stats)
    return _create(_core.lib.ladle_batchnorm_create,
                   byref(d), len(shape), i64_array(shape), ladle_dtype(dtype), ladle_device(device))


def Activation(shape, kind="relu", param=float("nan"), dtype=np.float64, device="cpu"):
    """relu, leaky_relu (param: the slope, any finite value; nan: the
    default 0.01), sigmoid, tanh, gelu; in place when x is y."""
    shape = _shape(shape)
    return _create(_core.lib.ladle_activation_create,
                   _lookup(ACTIVATIONS, kind, "activation"), float(param), len(shape),
                   i64_array(shape), ladle_dtype(dtype), ladle_device(device))


def Softmax(shape, dim=-1, log=False, dtype=np.float64, device="cpu"):
    shape = _shape(shape)
    return _create(_core.lib.ladle_softmax_create,
                   len(shape), i64_array(shape), int(dim), int(bool(log)), ladle_dtype(dtype),
                   ladle_device(device))


class DropoutLayer(Layer):
    """A dropout layer (made by Dropout)."""

    def set_step(self, step):
        """The step the next training forward draws its mask with (each
        training forward advances it): set it to replay a run."""
        check(_core.lib.ladle_dropout_set_step(self.handle, int(step)))


def Dropout(shape, p, dtype=np.float64, device="cpu", seed=0):
    shape = _shape(shape)
    h = c_void_p()
    check(_core.lib.ladle_dropout_create(len(shape), i64_array(shape), float(p),
                                         ladle_dtype(dtype), ladle_device(device), seed,
                                         byref(h)))
    return _made(h, DropoutLayer)


def Reshape(in_shape, out_shape, dtype=np.float64, device="cpu"):
    a, b = _shape(in_shape), _shape(out_shape)
    return _create(_core.lib.ladle_reshape_create,
                   len(a), i64_array(a), len(b), i64_array(b), ladle_dtype(dtype),
                   ladle_device(device))


def Flatten(shape, dtype=np.float64, device="cpu"):
    """N x ... -> N x (product of the rest)."""
    shape = _shape(shape)
    return _create(_core.lib.ladle_flatten_create,
                   len(shape), i64_array(shape), ladle_dtype(dtype), ladle_device(device))


def Sequential(layers):
    """A chain of layers, itself a layer; it owns the layers from then on
    (their Python objects stay usable as views while it lives)."""
    layers = list(layers)
    arr = (c_void_p * max(len(layers), 1))(*[l.handle.value for l in layers])
    h = c_void_p()
    check(_core.lib.ladle_sequential_create(len(layers), arr, byref(h)))
    seq = Layer(h)
    for l in layers:
        l._disown(seq)
    # each layer's Python object keeps the container alive, and back
    for l in layers:
        l._keep.append(seq)
    seq._layers = layers
    return seq


class Loss(Layer):
    """A loss: forward(input, target, ctx=None) returns the loss (a float
    for mean and sum, an array for none); backward(ctx, dinput=None,
    dloss=1.0) its gradient with respect to the input."""

    def forward(self, input, target, ctx=None, loss=None):
        it, tt = as_tensor(input, "input"), as_tensor(target, "target")
        reduce_none = self._reduction == REDUCTIONS["none"]
        if loss is None:
            loss = np.zeros(self._loss_shape(input) if reduce_none else (), dtype=self.dtype)
        lt = as_tensor(loss, "loss", True)
        check(_core.lib.ladle_loss_forward(self.handle, _core._th(ctx), it.handle, tt.handle,
                                           lt.handle))
        if ctx is not None:
            ctx.saved = (it, tt)
        return loss if reduce_none else float(loss)

    __call__ = forward

    def _loss_shape(self, input):
        shape = tuple(np.shape(input.numpy() if isinstance(input, Tensor) else input))
        if self._kind in (LOSSES["cross_entropy"], LOSSES["nll"]):
            return shape[:1] + shape[2:]
        return shape

    def backward(self, ctx, dinput=None, dloss=1.0):
        if dinput is None:
            dinput = np.zeros(self.x_shape, dtype=self.dtype)
        dl = dloss if isinstance(dloss, (np.ndarray, Tensor)) else np.array(dloss, self.dtype)
        dlt, dit = as_tensor(dl, "dloss"), as_tensor(dinput, "dinput", True)
        check(_core.lib.ladle_loss_backward(self.handle, _core._th(ctx), dlt.handle, dit.handle))
        return dinput


def _loss(h, kind, reduction, keep=()):
    obj = Loss(h, keep=keep)
    obj._kind, obj._reduction = kind, reduction
    return obj


def loss_desc(kind="cross_entropy", reduction="mean", label_smoothing=0.0, checked=False):
    """A ladle_loss_desc (no class weights, no ignored label)."""
    d = _capi.ladle_loss_desc()
    _core.lib.ladle_loss_desc_init(byref(d), _lookup(LOSSES, kind, "loss"),
                                   _lookup(REDUCTIONS, reduction, "reduction"))
    d.label_smoothing, d.flags = float(label_smoothing), _flags(checked)
    return d


def LossLayer(input_shape, kind="cross_entropy", reduction="mean", label_smoothing=0.0,
              dtype=np.float64, device="cpu"):
    """mse, l1, cross_entropy (i64 labels), nll, bce_with_logits."""
    shape = _shape(input_shape)
    d = loss_desc(kind, reduction, label_smoothing)
    h = c_void_p()
    check(_core.lib.ladle_loss_create(byref(d), len(shape), i64_array(shape),
                                      ladle_dtype(dtype), ladle_device(device), byref(h)))
    return _loss(h, d.kind, d.reduction)


# ---- distributed layers -----------------------------------------------------------

def DistLinear(p_x, p_w, p_y, batch, in_features, out_features, bias=True, dtype=np.float64,
               device="cpu", seed=0, checked=False):
    """Linear with x [batch, in] over p_x (D x Pin), W over p_w (Pout x Pin or
    Pout x D x Pin), y [batch, out] over p_y (D x Pout). Collective."""
    d = linear_desc(in_features, out_features, bias, _flags(checked))
    parts = _capi.ladle_dist_partitions(p_x.handle, p_w.handle, p_y.handle)
    h = c_void_p()
    check(_core.lib.ladle_dist_linear_create(byref(d), byref(parts),
                                             i64_array([int(batch), int(in_features)]),
                                             ladle_dtype(dtype), ladle_device(device), seed,
                                             byref(h)))
    return _made(h, keep=[p_x, p_w, p_y])


def DistConv(p_x, x_shape, out_channels, kernel, stride=1, padding=0, dilation=1, groups=1,
             bias=True, dtype=np.float64, device="cpu", seed=0, checked=False):
    """Convolution with x (global x_shape) split over p_x along the batch and
    the spatial dimensions (halo exchange). Collective."""
    shape = _shape(x_shape)
    d = conv_desc(len(shape) - 2, shape[1], out_channels, kernel, stride, padding, dilation,
                  groups, bias)
    d.flags = _flags(checked)
    h = c_void_p()
    check(_core.lib.ladle_dist_conv_create(byref(d), p_x.handle, i64_array(shape),
                                           ladle_dtype(dtype), ladle_device(device), seed,
                                           byref(h)))
    return _made(h, keep=[p_x])


def DistConvGrid(p_x, p_w, p_y, x_shape, out_channels, kernel, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, dtype=np.float64, device="cpu", seed=0, checked=False):
    """The channel-partitioned (and general) convolution over a weight grid."""
    shape = _shape(x_shape)
    d = conv_desc(len(shape) - 2, shape[1], out_channels, kernel, stride, padding, dilation,
                  groups, bias)
    d.flags = _flags(checked)
    parts = _capi.ladle_dist_partitions(p_x.handle, p_w.handle, p_y.handle)
    h = c_void_p()
    check(_core.lib.ladle_dist_conv_grid_create(byref(d), byref(parts), i64_array(shape),
                                                ladle_dtype(dtype), ladle_device(device), seed,
                                                byref(h)))
    return _made(h, keep=[p_x, p_w, p_y])


def DistPool(p_x, x_shape, kernel, kind="max", stride=None, padding=0, dilation=1,
             ceil_mode=False, count_include_pad=True, dtype=np.float64, device="cpu",
             checked=False):
    shape = _shape(x_shape)
    d = pool_desc(len(shape) - 2, kernel, kind, stride, padding, dilation, ceil_mode,
                  count_include_pad)
    d.flags = _flags(checked)
    h = c_void_p()
    check(_core.lib.ladle_dist_pool_create(byref(d), p_x.handle, i64_array(shape),
                                           ladle_dtype(dtype), ladle_device(device), byref(h)))
    return _made(h, keep=[p_x])


def DistBatchNorm(p_x, x_shape, sync="global", group_size=0, eps=1e-5, momentum=0.1, affine=True,
                  track_running_stats=True, dtype=np.float64, device="cpu", checked=False):
    shape = _dist_shape(p_x, x_shape, "x_shape")
    d = batchnorm_desc(shape[1], eps, momentum, affine, track_running_stats)
    d.sync = _lookup(BN_SYNC, sync, "batch-norm sync")
    d.group_size, d.flags = int(group_size), _flags(checked)
    h = c_void_p()
    check(_core.lib.ladle_dist_batchnorm_create(byref(d), p_x.handle, i64_array(shape),
                                                ladle_dtype(dtype), ladle_device(device),
                                                byref(h)))
    return _made(h, keep=[p_x])


def DistLoss(p_x, input_shape, kind="cross_entropy", reduction="mean", label_smoothing=0.0,
             dtype=np.float64, device="cpu", checked=False):
    """A loss over an input (global input_shape) split over p_x; mean and
    sum give the whole batch's loss on every rank."""
    shape = _dist_shape(p_x, input_shape, "input_shape")
    d = loss_desc(kind, reduction, label_smoothing, checked)
    h = c_void_p()
    check(_core.lib.ladle_dist_loss_create(byref(d), p_x.handle, i64_array(shape),
                                           ladle_dtype(dtype), ladle_device(device), byref(h)))
    return _loss(h, d.kind, d.reduction, keep=[p_x])


def DistFlatten(p_x, x_shape, p_y, dtype=np.float64, device="cpu", checked=False):
    """x [N, ...] over p_x into y [N, F] over p_y (D x Pf)."""
    shape = _shape(x_shape)
    h = c_void_p()
    check(_core.lib.ladle_dist_flatten_create(p_x.handle, i64_array(shape),
                                              p_y.handle, ladle_dtype(dtype),
                                              ladle_device(device), _flags(checked), byref(h)))
    return _made(h, keep=[p_x, p_y])
