"""Operators written in Python: CustomOp turns numpy functions into a
ladle_op (through ladle_custom_create), which ladle's adjoint and gradient
tests, sequential containers and networks take like its own."""

import traceback
from ctypes import POINTER, byref, c_char_p, c_void_p

import numpy as np

from . import _capi
from . import _core
from ._capi import i64_array
from ._core import Tensor, _shape, check, ladle_device, ladle_dtype, tensor_view
from .layers import Layer


def _view(h):
    return tensor_view(h) if h else None


def _saved_view(ptr, nbytes):
    if not ptr or not nbytes:
        return None
    import ctypes
    buf = (ctypes.c_char * nbytes).from_address(ptr)
    return np.frombuffer(buf, dtype=np.uint8, count=nbytes)


class CustomOp(Layer):
    """An operator whose forward and adjoint are Python functions over numpy
    views of ladle's tensors (no copies):

        forward(x, y)     write y = F x into y (or return the array)
        adjoint(dy, dx)   write dx = F* dy (for linear=False: the backward,
                          the vector-Jacobian product at the saved point)
        backward_weight(dy)  optional: accumulate into the parameters' grads

    With saved_bytes > 0 each function also gets `saved`, a uint8 array of
    that many bytes, one per context (what a forward keeps for its
    backward). Shapes: x_shape and y_shape (a rank-local op), or x_layout and
    y_layout (a distributed op, its shards this rank's boxes). params and
    grads are numpy arrays the op exposes as its parameters (borrowed: the
    op keeps them alive). An exception in a function becomes
    LADLE_ERR_CALLBACK carrying the Python message. A subclass may define
    the methods compute_forward, compute_adjoint and compute_backward_weight
    instead of passing functions.
    """

    def __init__(self, forward=None, adjoint=None, x_shape=None, y_shape=None, x_layout=None,
                 y_layout=None, dtype=np.float64, linear=True, name="python",
                 backward_weight=None, params=(), grads=None, param_names=None, saved_bytes=0,
                 device="cpu", batched=False):
        forward = forward or getattr(self, "compute_forward", None)
        adjoint = adjoint or getattr(self, "compute_adjoint", None)
        backward_weight = backward_weight or getattr(self, "compute_backward_weight", None)
        if forward is None or adjoint is None:
            raise TypeError("ladle.CustomOp needs a forward and an adjoint function")
        self._errors = []
        saved_bytes = int(saved_bytes)
        d = _capi.ladle_custom_desc()
        _core.lib.ladle_custom_desc_init(byref(d))
        keep = []
        self._name_bytes = name.encode()
        d.name = self._name_bytes
        d.dtype = ladle_dtype(dtype)
        d.device = ladle_device(device)
        if x_layout is not None or y_layout is not None:
            d.x_layout = x_layout.handle if x_layout is not None else None
            d.y_layout = y_layout.handle if y_layout is not None else None
            keep += [x_layout, y_layout]
        else:
            xs, ys = _shape(x_shape), _shape(y_shape)
            self._xs, self._ys = i64_array(xs), i64_array(ys)
            d.x_ndim, d.x_shape = len(xs), self._xs
            d.y_ndim, d.y_shape = len(ys), self._ys
        d.linear = int(bool(linear))
        d.batched = int(bool(batched))
        d.saved_bytes = saved_bytes
        self._fns = [
            _capi.custom_forward_fn(self._wrap2(forward, "forward", saved_bytes)),
            _capi.custom_adjoint_fn(self._wrap2(adjoint, "adjoint", saved_bytes)),
        ]
        d.forward, d.adjoint = self._fns
        if backward_weight is not None:
            bw = _capi.custom_backward_weight_fn(self._wrap1(backward_weight, saved_bytes))
            self._fns.append(bw)
            d.backward_weight = bw
        params = list(params)
        if params:
            grads = list(grads) if grads is not None else [np.zeros_like(p) for p in params]
            names = list(param_names) if param_names is not None else \
                ["param%d" % i for i in range(len(params))]
            pt = [Tensor.wrap(p) for p in params]
            gt = [Tensor.wrap(g) for g in grads]
            self._pt, self._gt = pt, gt
            self._names = [n.encode() for n in names]
            self._pa = (c_void_p * len(pt))(*[t.handle.value for t in pt])
            self._ga = (c_void_p * len(gt))(*[t.handle.value for t in gt])
            self._na = (c_char_p * len(names))(*self._names)
            d.num_params, d.params, d.grads, d.param_names = \
                len(pt), self._pa, self._ga, self._na
            keep += pt + gt
        h = c_void_p()
        check(_core.lib.ladle_custom_create(byref(d), byref(h)))
        # the callbacks and everything the desc points at live as long as the op
        self._adopt(h, keep + [self._fns])

    def _fail(self, where, exc):
        msg = "%s in the Python %s of %r: %s" % (type(exc).__name__, where,
                                                 self._name_bytes.decode(), exc)
        self._errors.append((msg, traceback.format_exc()))
        del self._errors[:-4]
        try:
            _core.lib.ladle_custom_fail(msg.encode(errors="replace"))
        except Exception:
            pass
        return 1

    def _wrap2(self, fn, where, saved_bytes):
        def call(user, a, b, saved):
            try:
                av, bv = _view(a), _view(b)
                r = fn(av, bv, _saved_view(saved, saved_bytes)) if saved_bytes else fn(av, bv)
                if r is not None and r is not bv:
                    bv[...] = r
                return 0
            except BaseException as e:  # a callback must never unwind into C
                return self._fail(where, e)
        return call

    def _wrap1(self, fn, saved_bytes):
        def call(user, dy, saved):
            try:
                dyv = _view(dy)
                if saved_bytes:
                    fn(dyv, _saved_view(saved, saved_bytes))
                else:
                    fn(dyv)
                return 0
            except BaseException as e:
                return self._fail("backward_weight", e)
        return call

    @property
    def last_traceback(self):
        """The Python traceback of the last callback that failed, or None."""
        return self._errors[-1][1] if self._errors else None
