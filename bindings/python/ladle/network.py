"""Networks (a chain of layers ending in a loss), optimizers, and
checkpoints of global tensors."""

import os
from ctypes import byref, c_double, c_int, c_void_p

from . import _capi
from . import _core
from ._capi import i64_array
from ._core import _Handle, as_tensor, check, tensor_view
from .layers import Layer, _lookup

OPTIMIZERS = {"sgd": 0, "adam": 1, "adamw": 2}


class Network(_Handle):
    """Network(layers, loss, bucket_bytes=0): owns its layers and loss from
    then on. A training step is forward(x), loss(target), backward(), then
    an optimizer's step(). forward, loss and backward are collective over
    the layers' ranks."""

    _destroy = "ladle_network_destroy"

    def __init__(self, layers, loss, bucket_bytes=0):
        layers = list(layers)
        arr = (c_void_p * max(len(layers), 1))(*[l.handle.value for l in layers])
        h = c_void_p()
        check(_core.lib.ladle_network_create(len(layers), arr, loss.handle, int(bucket_bytes),
                                             byref(h)))
        self._adopt(h)
        for obj in layers + [loss]:
            obj._disown(self)
            obj._keep.append(self)  # a layer object keeps its network alive
        self.layers = layers
        self.loss_op = loss
        self._x = self._target = None

    def forward(self, x):
        """This rank's block of the output: a numpy view of the network's
        memory, valid until the next forward (copy it to keep it)."""
        xt = as_tensor(x, "x")
        y = c_void_p()
        check(_core.lib.ladle_network_forward(self.handle, xt.handle, byref(y)))
        self._x = xt  # the layers saved it for the backward
        return tensor_view(y.value, owner=self)

    __call__ = forward

    def loss(self, target):
        """The loss of the last forward's output (the whole batch's)."""
        tt = as_tensor(target, "target")
        v = c_double()
        check(_core.lib.ladle_network_loss(self.handle, tt.handle, byref(v)))
        self._target = tt
        return v.value

    def backward(self, sync=True):
        """Every gradient from the last loss (accumulating); sync=False to
        accumulate microbatches before summing replicated gradients."""
        check(_core.lib.ladle_network_backward(self.handle, int(bool(sync))))

    def zero_grad(self):
        check(_core.lib.ladle_network_zero_grad(self.handle))

    def train(self, mode=True):
        check(_core.lib.ladle_network_set_training(self.handle, int(bool(mode))))
        return self

    def eval(self):
        return self.train(False)

    def parameters(self):
        """[(layer index, name, param view, grad view)] over every layer."""
        out = []
        for i, l in enumerate(self.layers):
            for n, p, g in l.parameters():
                out.append((i, n, p, g))
        return out


class Optimizer(_Handle):
    """SGD, Adam or AdamW over parameters added with add(layer or network).
    Local: each rank steps the parameters it holds."""

    _destroy = "ladle_optimizer_destroy"

    def __init__(self, kind="sgd", lr=0.01, momentum=None, dampening=None, nesterov=None,
                 betas=None, eps=None, weight_decay=None, params=()):
        d = _capi.ladle_optimizer_desc()
        _core.lib.ladle_optimizer_desc_init(byref(d), _lookup(OPTIMIZERS, kind, "optimizer"),
                                            float(lr))
        if momentum is not None:
            d.momentum = float(momentum)
        if dampening is not None:
            d.dampening = float(dampening)
        if nesterov is not None:
            d.nesterov = int(bool(nesterov))
        if betas is not None:
            d.beta1, d.beta2 = float(betas[0]), float(betas[1])
        if eps is not None:
            d.eps = float(eps)
        if weight_decay is not None:
            d.weight_decay = float(weight_decay)
        h = c_void_p()
        check(_core.lib.ladle_optimizer_create(byref(d), byref(h)))
        self._adopt(h)
        for p in params:
            self.add(p)

    def add(self, what):
        """Add a Network's or a Layer's parameters."""
        self._keep.append(what)
        if isinstance(what, Network):
            check(_core.lib.ladle_optimizer_add_network(self.handle, what.handle))
        elif isinstance(what, Layer):
            check(_core.lib.ladle_optimizer_add_op(self.handle, what.handle))
        else:
            raise TypeError("ladle: Optimizer.add takes a Network or a Layer")
        # the optimizer reads and writes what's parameters (and keeps state
        # beside them): closing what, or collecting it in a cycle, destroys
        # the optimizer first (through the shared handle cell)
        what._children[id(self)] = (self._destroy, self._h)
        return self

    def step(self):
        check(_core.lib.ladle_optimizer_step(self.handle))

    def zero_grad(self):
        check(_core.lib.ladle_optimizer_zero_grad(self.handle))

    @property
    def lr(self):
        return _core.lib.ladle_optimizer_lr(self.handle)

    @lr.setter
    def lr(self, value):
        check(_core.lib.ladle_optimizer_set_lr(self.handle, float(value)))

    @property
    def steps(self):
        return _core.lib.ladle_optimizer_steps(self.handle)


# ---- checkpoints ---------------------------------------------------------------

MAX_META = 16


def _path(path):
    return os.fsencode(path)


def save_checkpoint(path, comm, net, optimizer=None, meta=()):
    """Save net's parameters (and optimizer's state) as global tensors with
    up to 16 integers of yours. Collective over comm (an mpi4py Comm)."""
    meta = [int(m) for m in meta]
    check(_core.lib.ladle_checkpoint_save(_path(path), _capi.Comm.of(comm), net.handle,
                                            _core._th(optimizer), len(meta), i64_array(meta)))


def load_checkpoint(path, comm, net, optimizer=None):
    """Load a checkpoint into net (and optimizer); returns its integers.
    Collective over comm."""
    meta = i64_array([0] * MAX_META)
    n = c_int()
    check(_core.lib.ladle_checkpoint_load(_path(path), _capi.Comm.of(comm), net.handle,
                                            _core._th(optimizer), MAX_META, meta, byref(n)))
    return [meta[i] for i in range(n.value)]


def read_checkpoint_meta(path, comm):
    """Only the integers of the checkpoint at path. Collective over comm."""
    meta = i64_array([0] * MAX_META)
    n = c_int()
    check(_core.lib.ladle_checkpoint_read_meta(_path(path), _capi.Comm.of(comm), MAX_META, meta,
                                                 byref(n)))
    return [meta[i] for i in range(n.value)]


def check_checkpoint_path(path, comm):
    """Raise LadleError now if a save to path could not be written."""
    check(_core.lib.ladle_checkpoint_check_path_f(_path(path), comm.py2f()))
