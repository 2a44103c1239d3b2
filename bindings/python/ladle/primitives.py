"""The parallel primitives, each a linear Op with its adjoint:
broadcast, sum_reduce, all_sum_reduce, all_gather, reduce_scatter,
repartition, halo_exchange.
Every create is collective over the ranks the op touches (in SPMD style
every rank calls it); a bad call raises LadleError on every rank alike."""

from ctypes import byref, c_int, c_void_p

import numpy as np

from . import _capi
from ._capi import i64_array, int_array
from ._core import Op, _shape, check, ladle_device, ladle_dtype
from . import _core


def _flags(transpose_src=False, transpose_dest=False, checked=False):
    return ((_capi.TRANSPOSE_SRC if transpose_src else 0)
            | (_capi.TRANSPOSE_DEST if transpose_dest else 0)
            | (_capi.CHECKED if checked else 0))


def _pair(create, p_x, p_y, shape, dtype, device, flags):
    """A broadcast or a sum-reduce of a block of `shape` (they share one
    descriptor)."""
    shape = _shape(shape)
    extents = i64_array(shape)  # kept alive until the create returns
    d = _capi.ladle_broadcast_desc()
    _core.lib.ladle_broadcast_desc_init(byref(d), len(shape), extents)
    d.flags = flags
    h = c_void_p()
    check(create(byref(d), p_x.handle, p_y.handle, ladle_dtype(dtype), ladle_device(device),
                 byref(h)))
    return Op(h, keep=[p_x, p_y])


def broadcast(p_x, p_y, shape, dtype=np.float64, device="cpu", transpose_src=False,
              transpose_dest=False, checked=False):
    """Broadcast P_x -> P_y of a block of `shape` held by each member of
    P_x (adjoint: the sum-reduce P_y -> P_x)."""
    return _pair(_core.lib.ladle_broadcast_create, p_x, p_y, shape, dtype, device,
                 _flags(transpose_src, transpose_dest, checked))


def sum_reduce(p_x, p_y, shape, dtype=np.float64, device="cpu", transpose_src=False,
               transpose_dest=False, checked=False):
    """SumReduce P_x -> P_y (adjoint: the broadcast P_y -> P_x)."""
    return _pair(_core.lib.ladle_sum_reduce_create, p_x, p_y, shape, dtype, device,
                 _flags(transpose_src, transpose_dest, checked))


def all_sum_reduce(p, axes, shape, dtype=np.float64, device="cpu", checked=False):
    """AllSumReduce over the partition axes `axes` of p (self-adjoint)."""
    shape = _shape(shape)
    axes = [int(a) for a in axes]
    extents, axis_list = i64_array(shape), int_array(axes)  # alive until the create returns
    d = _capi.ladle_all_sum_reduce_desc()
    _core.lib.ladle_all_sum_reduce_desc_init(byref(d), len(axes), axis_list, len(shape), extents)
    d.flags = _flags(checked=checked)
    h = c_void_p()
    check(_core.lib.ladle_all_sum_reduce_create(byref(d), p.handle, ladle_dtype(dtype),
                                                ladle_device(device), byref(h)))
    return Op(h, keep=[p])


def _gather_pair(create, p, shape, dim, axis, counts, dtype, device, checked):
    """An all-gather or a reduce-scatter (they share one descriptor)."""
    shape = _shape(shape)
    extents = i64_array(shape)  # kept alive until the create returns
    d = _capi.ladle_all_gather_desc()
    _core.lib.ladle_all_gather_desc_init(byref(d), int(axis), len(shape), extents, int(dim))
    if counts is not None:
        counts = i64_array([int(c) for c in counts])
        d.counts = counts
    d.flags = _flags(checked=checked)
    h = c_void_p()
    check(create(byref(d), p.handle, ladle_dtype(dtype), ladle_device(device), byref(h)))
    return Op(h, keep=[p])


def all_gather(p, shape, dim=0, axis=0, counts=None, dtype=np.float64, device="cpu",
               checked=False):
    """AllGather along partition axis `axis` of p: member k of each group
    holds shard k of a tensor of `shape` cut along tensor dimension `dim`
    (counts[k] indices; None: balanced) and every member gets the whole
    tensor. Its adjoint is the reduce-scatter."""
    return _gather_pair(_core.lib.ladle_all_gather_create, p, shape, dim, axis, counts, dtype,
                        device, checked)


def reduce_scatter(p, shape, dim=0, axis=0, counts=None, dtype=np.float64, device="cpu",
                   checked=False):
    """ReduceScatter along partition axis `axis` of p: every member holds a
    tensor of `shape`; member k keeps shard k (along `dim`) of the group's
    sum. Its adjoint is the all-gather."""
    return _gather_pair(_core.lib.ladle_reduce_scatter_create, p, shape, dim, axis, counts,
                        dtype, device, checked)


def repartition(x_layout, y_layout, dtype=np.float64, device="cpu", checked=False):
    """Repartition between two decompositions of one global shape (its
    adjoint is the reverse repartition)."""
    h = c_void_p()
    check(_core.lib.ladle_repartition_create(x_layout.handle, y_layout.handle, ladle_dtype(dtype),
                                             ladle_device(device), _flags(checked=checked),
                                             byref(h)))
    return Op(h, keep=[x_layout, y_layout])


def window(ndim, kernel=None, stride=None, padding=None, dilation=None, ceil_mode=False):
    """A ladle_window of ndim dimensions: kernel/stride/padding/dilation are
    sequences of ndim values (dimensions without a window take 1/1/0/1)."""
    w = _capi.ladle_window()
    _core.lib.ladle_window_init(byref(w), ndim)
    for name, values in (("kernel", kernel), ("stride", stride), ("padding", padding),
                         ("dilation", dilation)):
        if values is not None:
            values = list(values)
            if len(values) != ndim:
                raise _core._error("LADLE_ERR_ARG", "window %s has %d values for %d dimensions"
                                   % (name, len(values), ndim))
            arr = getattr(w, name)
            for i, v in enumerate(values):
                arr[i] = int(v)
    w.ceil_mode = int(bool(ceil_mode))
    return w


class HaloExchange(Op):
    """A halo exchange: x and y are the padded local tensors (see
    .padded_shape); forward fills the halos from the neighbours' bulk,
    adjoint adds them back and zeroes them. Works in place (x is y)."""

    def forward(self, x, y=None):
        if y is None:
            y = x
        return Op.forward(self, x, y)

    def adjoint(self, dy, dx=None):
        if dx is None:
            dx = dy
        return Op.adjoint(self, dy, dx)

    # the split phases: begin posts the messages, end waits for them, so
    # work on the bulk can go between (the tensor is kept alive meanwhile)
    def begin(self, t):
        """Start the in-place forward on padded t (numpy or Tensor)."""
        return self._phase("ladle_halo_exchange_begin", t, True)

    def end(self):
        """Finish the forward begin started; returns its tensor."""
        return self._phase("ladle_halo_exchange_end", None, False)

    def adjoint_begin(self, t):
        return self._phase("ladle_halo_exchange_adjoint_begin", t, True)

    def adjoint_end(self):
        return self._phase("ladle_halo_exchange_adjoint_end", None, False)

    def progress(self):
        """Move the messages in flight on; True when end would not wait."""
        done = c_int()
        check(_core.lib.ladle_halo_exchange_progress(self.handle, byref(done)))
        return bool(done.value)

    def _phase(self, fn, t, starting):
        held = getattr(self, "_in_flight", None)
        if starting:
            tt = _core.as_tensor(t, "t", True)
        else:
            tt, t = held if held else (_core.Tensor.zeros((0,)), None)
        check(getattr(_core.lib, fn)(self.handle, tt.handle))
        self._in_flight = (tt, t) if starting else None
        return t

    @property
    def padded_shape(self):
        return self.x_shape

    @property
    def bulk_layout(self):
        h = _core.lib.ladle_halo_exchange_bulk_layout(self.handle)
        return _core.Layout._borrowed(h, self) if h else None

    @property
    def output_layout(self):
        h = _core.lib.ladle_halo_exchange_output_layout(self.handle)
        return _core.Layout._borrowed(h, self) if h else None


def halo_exchange(x_layout, kernel, stride=None, padding=None, dilation=None, ceil_mode=False,
                  dtype=np.float64, device="cpu", checked=False):
    """The halo exchange of a tensor decomposed by x_layout for a windowed
    kernel (per tensor dimension; batch and channels take 1/1/0/1)."""
    w = window(len(kernel), kernel, stride, padding, dilation, ceil_mode)
    h = c_void_p()
    check(_core.lib.ladle_halo_exchange_create(x_layout.handle, byref(w), ladle_dtype(dtype),
                                               ladle_device(device), _flags(checked=checked),
                                               byref(h)))
    return HaloExchange(h, keep=[x_layout])
