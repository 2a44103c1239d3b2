"""ladle from PyTorch: autograd Functions for the five primitives and
nn.Modules for the distributed layers, on torch CPU tensors without copies.

    import ladle, ladle.torch as lt
    conv = lt.DistConv2d(p, (64, 1, 28, 28), 6, 5, padding=2, seed=1)
    y = conv(x)                  # x: this rank's block, a torch tensor
    loss.backward()              # every rank, through every ladle module

Each module holds one ladle layer; its forward calls the layer's forward on
the torch tensors' own memory (a contiguous CPU tensor is wrapped, never
copied; others are made contiguous first) and its backward the layer's
backward (the hand-written adjoint). The calls are collective as in C: every
rank of a layer's partitions must run each forward and each backward, in the
same order, so every rank builds the same modules and runs backward from a
loss that reaches all of them (ranks outside a layer pass zero-volume
tensors; the modules keep them in the graph).

Parameters are torch's: each weight is an nn.Parameter whose memory torch
allocated and ladle reads through ladle_op_bind_param (so torch.optim steps
them in place and ladle sees the step); with LADLE_TORCH_BIND=0, or where the
library has no bind call, the Parameter is a view of ladle's own memory
instead, equally zero-copy.
Gradients are not bound: the backward lets ladle accumulate into its own
gradient buffers (zeroed first), sums replicated copies over their ranks
(ladle_layer_sync_gradients) and returns them to autograd, which adds them
into param.grad. That costs one copy of each gradient per backward but keeps
torch's contract: zero_grad(set_to_none=True), gradient accumulation over
several backwards, hooks, gradcheck and every torch optimizer work as usual.
Binding .grad instead would break as soon as torch replaced or dropped the
.grad tensor (set_to_none, the default of zero_grad since torch 2.0).
"""

import atexit
import ctypes
import weakref
from ctypes import byref, c_double, c_int, c_int64, c_void_p

import numpy as np
import torch

from . import _capi
from . import _core
from . import layers as _layers
from . import primitives as _prims
from ._capi import MAX_NDIM
from ._core import LadleError, check

__all__ = ["Broadcast", "SumReduce", "AllSumReduce", "Repartition", "HaloExchange",
           "broadcast", "sum_reduce", "all_sum_reduce", "repartition", "halo_exchange",
           "LadleModule", "Linear", "Conv2d", "MaxPool2d", "AvgPool2d", "BatchNorm",
           "Flatten", "Loss", "CrossEntropyLoss", "MSELoss", "ReLU", "DistLinear",
           "DistConv2d", "DistPool2d", "DistBatchNorm", "DistFlatten", "DistLoss",
           "AllGather", "ReduceScatter", "GroupNorm", "LayerNorm", "ConvTranspose2d",
           "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "DistGroupNorm", "DistConvTranspose2d",
           "DistAdaptivePool2d", "lib", "wrap"]

lib = _core.lib

_TORCH_TO_LADLE = {torch.float32: _capi.F32, torch.float64: _capi.F64, torch.int64: _capi.I64}
_TORCH_TO_NP = {torch.float32: np.float32, torch.float64: np.float64}

# a tensor the modules feed every autograd Function, so that each output
# requires grad (and each backward runs) on every rank alike, even where this
# rank's own inputs are zero-volume tensors that need no gradient
_ANCHOR = torch.zeros(0, requires_grad=True)


def _np_dtype(dtype):
    try:
        return _TORCH_TO_NP[dtype]
    except KeyError:
        raise LadleError(_core.ERR.get("LADLE_ERR_DTYPE", 1),
                         "ladle.torch takes torch.float32 or torch.float64, not %s" % dtype)


def _bind_available():
    """Whether parameters are bound (ladle_op_bind_param, the default where
    the library has it) or view ladle's parameter memory (LADLE_TORCH_BIND=0,
    or an older libladle): both are zero-copy and step the same memory."""
    import os
    if os.environ.get("LADLE_TORCH_BIND", "1") == "0":
        return False
    return not isinstance(getattr(lib, "ladle_op_bind_param", None), (_capi._Missing, type(None)))


_BIND_SET = [False]


def _bind_fn():
    f = lib.ladle_op_bind_param
    if not _BIND_SET[0]:
        f.argtypes = [c_void_p, c_int, c_void_p, c_void_p]
        f.restype = c_int
        _BIND_SET[0] = True
    return f


# ---- wrapping torch tensors -------------------------------------------------------

class _Wrapper:
    """One ladle_tensor over torch memory of one shape and dtype, re-pointed
    (ladle_tensor_set_data) at each call's tensor: no allocation per call."""

    __slots__ = ("h", "shape", "ptr")

    def __init__(self):
        self.h = c_void_p()
        self.shape = None
        self.ptr = None

    def point(self, t):
        ptr = t.data_ptr() or None  # 0 for a zero-volume tensor
        if ptr == self.ptr and self.shape == t.shape and self.h.value:
            return self.h  # the same memory as the last call (an input used again)
        if self.shape != t.shape or not self.h.value:
            shape = tuple(t.shape)
            self.close()
            nd = len(shape)
            strides, acc = [0] * nd, 1
            for i in range(nd - 1, -1, -1):
                strides[i] = acc
                acc *= max(shape[i], 1)
            code = _TORCH_TO_LADLE[t.dtype]
            check(lib.ladle_tensor_wrap(code, _capi.CPU, nd, _capi.i64_array(shape),
                                        _capi.i64_array(strides), ptr, byref(self.h)))
            self.shape = t.shape
        elif ptr is not None and lib.ladle_tensor_set_data(self.h, ptr):
            check(lib.ladle_tensor_set_data(self.h, ptr))
        self.ptr = ptr
        return self.h

    def close(self):
        if self.h.value and not _core._finalizing[0]:
            lib.ladle_tensor_destroy(byref(self.h))
        self.h = c_void_p()
        self.shape = None
        self.ptr = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _cpu_contig(t, what):
    if t.device.type != "cpu":
        raise LadleError(_core.ERR.get("LADLE_ERR_DEVICE", 1),
                         "ladle.torch: %s is on %s; ladle's layers here live on the CPU"
                         % (what, t.device))
    return t if t.is_contiguous() else t.contiguous()


def wrap(t):
    """A ladle.Tensor over a CPU torch tensor's memory (no copy for a
    contiguous one; keeps it alive)."""
    t = _cpu_contig(t, "the tensor")
    return _core.Tensor.wrap(t.detach().numpy())


# ---- the five primitives ------------------------------------------------------------

class _LinearOpFn(torch.autograd.Function):
    """y = F x through ladle_op_forward; dx = F* dy through ladle_op_adjoint."""

    @staticmethod
    def forward(ctx, mod, x, anchor):
        x = _cpu_contig(x, "x")
        y = torch.empty(mod.y_shape, dtype=mod.dtype)
        check(lib.ladle_op_forward(mod._h, mod._wx.point(x), mod._wy.point(y)))
        ctx.mod = mod
        return y

    @staticmethod
    def backward(ctx, dy):
        mod = ctx.mod
        dy = _cpu_contig(dy, "dy")
        dx = torch.empty(mod.x_shape, dtype=mod.dtype)
        check(lib.ladle_op_adjoint(mod._h, mod._wdy.point(dy), mod._wdx.point(dx)))
        return None, dx, None


class _OpModule(torch.nn.Module):
    """A ladle linear operator (a primitive) as a module: forward is the
    operator, its backward the adjoint. Holds the ladle.Op."""

    def __init__(self, op, dtype):
        super().__init__()
        self.op = op
        self.dtype = dtype
        self._h = op.handle
        self.x_shape = op.x_shape
        self.y_shape = op.y_shape
        self._wx, self._wy, self._wdy, self._wdx = (_Wrapper() for _ in range(4))

    def forward(self, x):
        if x.dtype != self.dtype:
            raise LadleError(_core.ERR.get("LADLE_ERR_DTYPE", 1),
                             "ladle.torch: x is %s, the op %s" % (x.dtype, self.dtype))
        if not torch.is_grad_enabled():
            # nothing to record: the operator alone (autograd's apply costs
            # more than the call)
            if not x.is_contiguous() or x.device.type != "cpu":
                x = _cpu_contig(x, "x")
            y = torch.empty(self.y_shape, dtype=self.dtype)
            check(lib.ladle_op_forward(self._h, self._wx.point(x), self._wy.point(y)))
            return y
        return _LinearOpFn.apply(self, x, _ANCHOR)

    def extra_repr(self):
        return "%s: x%s -> y%s" % (self.op.name, self.x_shape, self.y_shape)


def Broadcast(p_x, p_y, shape, dtype=torch.float64, **kw):
    """The broadcast P_x -> P_y of a block of `shape` (adjoint: sum-reduce)."""
    return _OpModule(_prims.broadcast(p_x, p_y, shape, _np_dtype(dtype), **kw), dtype)


def SumReduce(p_x, p_y, shape, dtype=torch.float64, **kw):
    """The sum-reduce P_x -> P_y (adjoint: broadcast)."""
    return _OpModule(_prims.sum_reduce(p_x, p_y, shape, _np_dtype(dtype), **kw), dtype)


def AllSumReduce(p, axes, shape, dtype=torch.float64, **kw):
    """The all-sum-reduce over the partition axes (self-adjoint)."""
    return _OpModule(_prims.all_sum_reduce(p, axes, shape, _np_dtype(dtype), **kw), dtype)


def Repartition(x_layout, y_layout, dtype=torch.float64, **kw):
    """Between two decompositions of one global shape (adjoint: the reverse)."""
    return _OpModule(_prims.repartition(x_layout, y_layout, _np_dtype(dtype), **kw), dtype)


def HaloExchange(x_layout, kernel, dtype=torch.float64, **kw):
    """The halo exchange on padded local tensors (x_shape == y_shape): the
    forward fills the halos, the adjoint adds them back into the bulk. Out
    of place here (torch tensors are not overwritten)."""
    return _OpModule(_prims.halo_exchange(x_layout, kernel, dtype=_np_dtype(dtype), **kw), dtype)


def _apply(make):
    def fn(x, *args, **kw):
        return make(*args, dtype=x.dtype, **kw)(x)
    return fn


broadcast = _apply(Broadcast)
sum_reduce = _apply(SumReduce)
all_sum_reduce = _apply(AllSumReduce)
repartition = _apply(Repartition)
halo_exchange = _apply(HaloExchange)
for _f, _m in ((broadcast, "Broadcast"), (sum_reduce, "SumReduce"),
               (all_sum_reduce, "AllSumReduce"), (repartition, "Repartition"),
               (halo_exchange, "HaloExchange")):
    _f.__doc__ = "%s(...)(x) in one call (builds the op each time: use the module in loops)." % _m


# ---- layers -------------------------------------------------------------------------

class _Ctx:
    """A ladle_ctx with its own wrappers for the forward's x and y (which it
    references until its backward is done)."""

    __slots__ = ("ctx", "wx", "wy", "wdy", "wdx")

    def __init__(self, layer):
        self.ctx = _layers.Ctx(layer)
        self.wx, self.wy, self.wdy, self.wdx = _Wrapper(), _Wrapper(), _Wrapper(), _Wrapper()


class _Lease:
    """A ctx lent to one recorded forward: back to the module's pool when
    autograd drops that forward's node (after its last backward; a graph
    kept with retain_graph=True may run backward again)."""

    __slots__ = ("mod", "c", "used")

    def __init__(self, mod, c):
        self.mod, self.c, self.used = mod, c, False

    def take(self):
        """The ctx for this forward's one backward."""
        if self.used:
            raise RuntimeError("ladle.torch: a ladle layer's forward serves one backward (its "
                               "saved state is spent); run the forward again instead of "
                               "backward with retain_graph=True")
        self.used = True
        return self.c

    def __del__(self):
        self.mod._free.append(self.c)



def _keep_for_backward(ctx, mod, c, *saved):
    """What a forward leaves its backward: the module, a lease on its ctx c
    (None where the forward ran without gradients), the saved tensors."""
    ctx.mod, ctx.lease = mod, (_Lease(mod, c) if c is not None else None)
    ctx.save_for_backward(*saved)


def _take_back(ctx):
    """The ctx a backward takes back from its forward's lease."""
    if ctx.lease is None:
        raise RuntimeError("ladle.torch: backward of a forward run without gradients")
    return ctx.lease.take()


class _LayerFn(torch.autograd.Function):

    @staticmethod
    def forward(ctx, mod, grad, x, anchor, *params):
        # grad: whether autograd records this call (decided outside: grad
        # mode is always off inside a Function's forward)
        x = _cpu_contig(x, "x")
        mod._check_params(params)
        y = torch.empty(mod.y_shape_for(x), dtype=mod.dtype)
        c = mod._take_ctx() if grad else None
        if c is None:
            wx, wy = mod._wx, mod._wy
            check(lib.ladle_layer_forward(mod._h, None, wx.point(x), wy.point(y)))
        else:
            check(lib.ladle_layer_forward(mod._h, c.ctx.handle, c.wx.point(x), c.wy.point(y)))
        _keep_for_backward(ctx, mod, c, x, y)
        return y

    @staticmethod
    def backward(ctx, dy):
        mod = ctx.mod
        ctx.saved_tensors  # torch checks that x and y were not changed in place
        c = _take_back(ctx)
        dy = _cpu_contig(dy, "dy")
        need_dx = mod.input_grad if mod.input_grad is not None else ctx.needs_input_grad[2]
        dx = torch.empty(mod.x_shape_for(dy), dtype=mod.dtype) if need_dx else None
        check(lib.ladle_layer_backward(mod._h, c.ctx.handle, c.wdy.point(dy),
                                       c.wdx.point(dx) if need_dx else None))
        grads = [None] * len(mod._params)
        if mod._params:
            check(lib.ladle_op_zero_grad(mod._h))
            check(lib.ladle_layer_backward_weight(mod._h, c.ctx.handle, c.wdy.h))
            if mod.sync:
                check(lib.ladle_layer_sync_gradients(mod._h))
            grads = [g.clone() for g in mod._grad_views]
        return (None, None, dx, None) + tuple(grads)


_LIVE = {}  # id -> weakref, in creation order (the same on every rank)


def close_all():
    """Destroy the ladle layers of every live module now (their contexts
    first), before the partitions they use: the garbage collector frees a
    cycle's objects in any order, and a partition destroyed before its layer
    crashes the layer's destroy. Runs at interpreter exit too; call it (or
    module.close()) when a set of modules is done with."""
    for ref in reversed(list(_LIVE.values())):
        m = ref()
        if m is not None:
            try:
                m.close()
            except Exception:
                pass
    _LIVE.clear()


atexit.register(close_all)


class LadleModule(torch.nn.Module):
    """A ladle layer (ladle.Layer) as a torch module with torch-owned
    parameters. input_grad: None (the input's requires_grad decides), True
    or False: whether the backward computes dx (the same on every rank);
    sync: sum replicated parameters' gradients over their copies in each
    backward (the default)."""

    def __init__(self, layer, dtype, input_grad=None, sync=True):
        super().__init__()
        self.layer = layer
        self.dtype = dtype
        self.input_grad = input_grad
        self.sync = sync
        self._h = layer.handle
        self.x_shape = layer.x_shape
        self.y_shape = layer.y_shape
        self._wx, self._wy = _Wrapper(), _Wrapper()
        _LIVE[id(self)] = weakref.ref(self)
        self._free = []
        self._params = []
        self._grad_views = []
        self._bound = []
        names = layer.param_names()
        for i, name in enumerate(names):
            init = layer.param(i)
            if _bind_available():
                p = torch.nn.Parameter(torch.from_numpy(np.array(init, copy=True)))
                self._bind(i, p)
            else:
                # no bind call in this libladle: the parameter views ladle's memory
                p = torch.nn.Parameter(torch.from_numpy(init))
            self._bound.append(p.data_ptr())
            self.register_parameter(name, p)
            self._params.append(p)
            # torch views of ladle's gradient buffers, cloned for autograd
            self._grad_views.append(torch.from_numpy(layer.grad(i)))

    # ---- parameters
    def _bind(self, i, p):
        if p.numel():  # a rank without a shard has nothing to bind
            check(_bind_fn()(self._h, i, p.data_ptr(), None))

    def _check_params(self, params):
        """Re-bind a parameter whose memory torch replaced (param.data = ...)."""
        for i, p in enumerate(params):
            if p.data_ptr() != self._bound[i] and p.numel():
                if not p.is_contiguous() or p.dtype != self.dtype or p.device.type != "cpu":
                    raise LadleError(_core.ERR.get("LADLE_ERR_ARG", 1),
                                     "ladle.torch: parameter %d must stay a contiguous CPU %s "
                                     "tensor" % (i, self.dtype))
                if _bind_available():
                    self._bind(i, p)
                else:
                    np.copyto(self.layer.param(i), p.detach().numpy())
                    continue
                self._bound[i] = p.data_ptr()

    def param_shard(self, name):
        """(global_shape, offset, owner) of this rank's shard of a parameter."""
        i = [n for n, _ in self.named_parameters(recurse=False)].index(name)
        return self.layer.param_shard(i)

    # ---- contexts (one per forward in flight, reused)
    def _take_ctx(self):
        return self._free.pop() if self._free else _Ctx(self.layer)

    # ---- shapes: the batch may be smaller than at creation
    def y_shape_for(self, x):
        n = x.shape[0] if x.dim() else 0
        if len(self.y_shape) and n != self.x_shape[0] and self.x_shape[0] > 0:
            return (n,) + tuple(self.y_shape[1:])
        return self.y_shape

    def x_shape_for(self, dy):
        n = dy.shape[0] if dy.dim() else 0
        if len(self.x_shape) and n != self.y_shape[0] and self.y_shape[0] > 0:
            return (n,) + tuple(self.x_shape[1:])
        return self.x_shape

    def close(self):
        """Destroy the ladle layer (and its contexts) now, before the
        partitions it uses go; the module is unusable afterwards."""
        for c in self._free:
            c.ctx.close()
        self._free = []
        self.layer.close()
        _LIVE.pop(id(self), None)

    def train(self, mode=True):
        super().train(mode)
        self.layer.train(mode)
        return self

    def forward(self, x):
        if x.dtype != self.dtype:
            raise LadleError(_core.ERR.get("LADLE_ERR_DTYPE", 1),
                             "ladle.torch: x is %s, the layer %s" % (x.dtype, self.dtype))
        return _LayerFn.apply(self, torch.is_grad_enabled(), x, _ANCHOR, *self._params)

    def extra_repr(self):
        return "%s: x%s -> y%s" % (self.layer.name, self.x_shape, self.y_shape)


def _np(dtype):
    return _np_dtype(dtype)


# sequential layers (local: every rank its own)
def Linear(x_shape, out_features, bias=True, dtype=torch.float32, seed=0, **kw):
    return LadleModule(_layers.Linear(x_shape, out_features, bias, _np(dtype), seed=seed),
                       dtype, **kw)


def Conv2d(x_shape, out_channels, kernel, stride=1, padding=0, dilation=1, groups=1, bias=True,
           dtype=torch.float32, seed=0, **kw):
    return LadleModule(_layers.Conv(x_shape, out_channels, kernel, stride, padding, dilation,
                                    groups, bias, _np(dtype), seed=seed), dtype, **kw)


def MaxPool2d(x_shape, kernel, stride=None, padding=0, dtype=torch.float32, **kw):
    return LadleModule(_layers.Pool(x_shape, kernel, "max", stride, padding, dtype=_np(dtype)),
                       dtype, **kw)


def AvgPool2d(x_shape, kernel, stride=None, padding=0, dtype=torch.float32, **kw):
    return LadleModule(_layers.Pool(x_shape, kernel, "avg", stride, padding, dtype=_np(dtype)),
                       dtype, **kw)


def BatchNorm(x_shape, dtype=torch.float32, **kw):
    opts = {k: kw.pop(k) for k in ("eps", "momentum", "affine", "track_running_stats")
            if k in kw}
    return LadleModule(_layers.BatchNorm(x_shape, dtype=_np(dtype), **opts), dtype, **kw)


def Flatten(x_shape, dtype=torch.float32, **kw):
    return LadleModule(_layers.Flatten(x_shape, dtype=_np(dtype)), dtype, **kw)


def ReLU(shape, dtype=torch.float32, **kw):
    return LadleModule(_layers.Activation(shape, "relu", dtype=_np(dtype)), dtype, **kw)


# distributed layers (collective over their partitions)
def DistLinear(p_x, p_w, p_y, batch, in_features, out_features, bias=True,
               dtype=torch.float32, seed=0, **kw):
    """x [batch, in] over p_x (D x Pin), W over p_w, y over p_y (D x Pout)."""
    return LadleModule(_layers.DistLinear(p_x, p_w, p_y, batch, in_features, out_features, bias,
                                          _np(dtype), seed=seed), dtype, **kw)


def DistConv2d(p_x, x_shape, out_channels, kernel, stride=1, padding=0, dilation=1, groups=1,
               bias=True, dtype=torch.float32, seed=0, **kw):
    """x (global x_shape) over p_x along batch and space (halo exchanges)."""
    return LadleModule(_layers.DistConv(p_x, x_shape, out_channels, kernel, stride, padding,
                                        dilation, groups, bias, _np(dtype), seed=seed),
                       dtype, **kw)


def DistPool2d(p_x, x_shape, kernel, kind="max", stride=None, padding=0, dtype=torch.float32,
               **kw):
    return LadleModule(_layers.DistPool(p_x, x_shape, kernel, kind, stride, padding,
                                        dtype=_np(dtype)), dtype, **kw)


def DistBatchNorm(p_x, x_shape, sync="global", group_size=0, dtype=torch.float32, **kw):
    opts = {k: kw.pop(k) for k in ("eps", "momentum", "affine", "track_running_stats")
            if k in kw}
    return LadleModule(_layers.DistBatchNorm(p_x, x_shape, sync, group_size, dtype=_np(dtype),
                                             **opts), dtype, **kw)


def DistFlatten(p_x, x_shape, p_y, dtype=torch.float32, **kw):
    """x [N, ...] over p_x into y [N, F] over p_y (D x Pf)."""
    return LadleModule(_layers.DistFlatten(p_x, x_shape, p_y, dtype=_np(dtype)), dtype, **kw)


# ---- losses --------------------------------------------------------------------------

class _LossFn(torch.autograd.Function):

    @staticmethod
    def forward(ctx, mod, grad, input, target, anchor):
        input = _cpu_contig(input, "input")
        target = _cpu_contig(target, "target")
        c = mod._take_ctx() if grad else None
        loss = torch.zeros((), dtype=mod.dtype)
        check(lib.ladle_loss_forward(mod._h, c.ctx.handle if c else None,
                                     (c.wx if c else mod._wx).point(input),
                                     (c.wy if c else mod._wy).point(target),
                                     mod._wl.point(loss)))
        _keep_for_backward(ctx, mod, c, input, target)
        return loss

    @staticmethod
    def backward(ctx, dloss):
        mod = ctx.mod
        input, _ = ctx.saved_tensors
        c = _take_back(ctx)
        dloss = _cpu_contig(dloss.to(mod.dtype), "dloss")
        dinput = torch.empty(tuple(input.shape), dtype=mod.dtype)
        check(lib.ladle_loss_backward(mod._h, c.ctx.handle, c.wdy.point(dloss),
                                      c.wdx.point(dinput)))
        return None, None, dinput, None, None


class Loss(LadleModule):
    """A ladle loss (sequential or distributed) as a module: loss(input,
    target) is a 0-dim tensor, mean and sum giving the whole batch's loss on
    every rank of the input's partition (0 on ranks outside it, which must
    still call backward)."""

    def __init__(self, layer, dtype):
        super().__init__(layer, dtype)
        self._wl = _Wrapper()

    def forward(self, input, target):
        return _LossFn.apply(self, torch.is_grad_enabled(), input, target, _ANCHOR)


def CrossEntropyLoss(input_shape, dtype=torch.float32, reduction="mean"):
    return Loss(_layers.LossLayer(input_shape, "cross_entropy", reduction, dtype=_np(dtype)),
                dtype)


def MSELoss(input_shape, dtype=torch.float32, reduction="mean"):
    return Loss(_layers.LossLayer(input_shape, "mse", reduction, dtype=_np(dtype)), dtype)


def DistLoss(p_x, input_shape, kind="cross_entropy", reduction="mean", dtype=torch.float32):
    """A loss over an input (global input_shape) decomposed over p_x."""
    return Loss(_layers.DistLoss(p_x, input_shape, kind, reduction, dtype=_np(dtype)), dtype)


# the wrappers of the newer layers and primitives live in their own file
from ._torch_extra import (AdaptiveAvgPool2d, AdaptiveMaxPool2d, AllGather,  # noqa: E402
                           ConvTranspose2d, DistAdaptivePool2d, DistConvTranspose2d,
                           DistGroupNorm, GroupNorm, LayerNorm, ReduceScatter)
