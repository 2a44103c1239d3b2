"""Layers from Python: sequential ones against numpy, the distributed
linear layer against numpy on the gathered tensors, gradients."""

import numpy as np
import pytest

import ladle
from conftest import gather_global


def test_linear_forward_backward_match_numpy(rng):
    x = rng.uniform(-1, 1, (5, 3))
    lin = ladle.Linear(x.shape, 4, seed=3)
    W, b = lin.param(0).copy(), lin.param(1).copy()
    ctx = lin.ctx()
    y = lin.forward(x, ctx=ctx)
    np.testing.assert_allclose(y, x @ W.T + b, rtol=1e-13, atol=1e-14)
    dy = rng.uniform(-1, 1, y.shape)
    dx = lin.backward(ctx, dy)
    np.testing.assert_allclose(dx, dy @ W, rtol=1e-13, atol=1e-14)
    lin.zero_grad()
    lin.backward_weight(ctx, dy)
    np.testing.assert_allclose(lin.grad(0), dy.T @ x, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(lin.grad(1), dy.sum(axis=0), rtol=1e-13, atol=1e-14)


def test_sequential_layers_pass_gradient_test():
    shape = (2, 3, 6, 6)
    # no conv bias before batch norm: its gradient is exactly zero there,
    # and the finite differences would measure only their own noise
    layers = [ladle.Conv(shape, 4, 3, padding=1, bias=False, seed=1),
              ladle.BatchNorm((2, 4, 6, 6)),
              ladle.Activation((2, 4, 6, 6), "tanh"),
              ladle.Pool((2, 4, 6, 6), 2, kind="avg"),
              ladle.Flatten((2, 4, 3, 3)),
              ladle.Linear((2, 36), 5, seed=2)]
    for layer in layers:
        assert ladle.gradient_test(layer, seed=5) < 1e-6, layer
    # linear in x (no bias): the adjoint test applies too
    conv = ladle.Conv(shape, 4, 3, padding=1, bias=False)
    assert ladle.adjoint_test(conv) <= ladle.adjoint_tolerance(np.float64)
    seq = ladle.Sequential(layers)
    assert seq.num_params == 1 + 2 + 2
    assert ladle.gradient_test(seq, seed=6) < 1e-6


def test_loss_matches_numpy(rng):
    logits = rng.uniform(-2, 2, (6, 4))
    labels = rng.integers(0, 4, 6).astype(np.int64)
    loss = ladle.LossLayer(logits.shape, "cross_entropy")
    ctx = loss.ctx()
    value = loss.forward(logits, labels, ctx=ctx)
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    assert abs(value - (-logp[np.arange(6), labels].mean())) < 1e-13
    d = loss.backward(ctx)
    p = np.exp(logp)
    p[np.arange(6), labels] -= 1
    np.testing.assert_allclose(d, p / 6, rtol=1e-12, atol=1e-14)


def test_loss_descriptor_flags(comm):
    """The losses take a ladle_loss_desc, the flags in it; a distributed
    loss or batch norm takes its ndim from p_x, and a shape of another
    length is refused before the C call reads it."""
    d = ladle.layers.loss_desc("mse", "sum", checked=True)
    assert d.size > 0 and d.flags == ladle._capi.CHECKED and not d.weights
    assert d.kind == ladle.layers.LOSSES["mse"] and d.num_weights == 0
    p_x = ladle.Partition(comm, [comm.size, 1])
    loss = ladle.DistLoss(p_x, (2 * comm.size, 3), "cross_entropy", checked=True)
    assert loss is not None
    with pytest.raises(ladle.LadleError):
        ladle.DistLoss(p_x, (2 * comm.size, 3, 1), "mse")
    with pytest.raises(ladle.LadleError):
        ladle.DistBatchNorm(p_x, (2 * comm.size, 3, 4), sync="global")


def grid(size):
    """(Pout, Pin) for a weight grid of `size` ranks."""
    return {1: (1, 1), 2: (2, 1), 3: (3, 1), 4: (2, 2)}[size]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dist_linear_equals_numpy(comm, rng, dtype):
    size = comm.size
    pout, pin = grid(size)
    batch, fin, fout = 5, 7, 6
    p_x = ladle.Partition(comm, [1, pin])
    p_w = ladle.Partition(comm, [pout, pin])
    p_y = ladle.Partition(comm, [1, pout])
    lin = ladle.DistLinear(p_x, p_w, p_y, batch, fin, fout, dtype=dtype, seed=11)
    # its sequential twin starts from the same weights
    twin = ladle.Linear((batch, fin), fout, dtype=dtype, seed=11)
    W, b = twin.param(0).astype(np.float64), twin.param(1).astype(np.float64)
    X = rng.uniform(-1, 1, (batch, fin)).astype(dtype)
    lx, ly = ladle.Layout(p_x, (batch, fin)), ladle.Layout(p_y, (batch, fout))
    assert lin.x_shape == lx.local_shape and lin.y_shape == ly.local_shape
    ctx = lin.ctx()
    y = lin.forward(np.ascontiguousarray(X[lx.slices()]), ctx=ctx)
    Y = gather_global(comm, ly, y)
    rtol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(Y, X.astype(np.float64) @ W.T + b, rtol=rtol, atol=rtol)
    # backward: dx on the gathered tensors
    DY = rng.uniform(-1, 1, (batch, fout)).astype(dtype)
    dx = lin.backward(ctx, np.ascontiguousarray(DY[ly.slices()]))
    np.testing.assert_allclose(gather_global(comm, lx, dx), DY.astype(np.float64) @ W,
                               rtol=rtol, atol=rtol)
    lin.close()


def test_dist_linear_without_bias_passes_adjoint_test(comm):
    pout, pin = grid(comm.size)
    p_x = ladle.Partition(comm, [1, pin])
    p_w = ladle.Partition(comm, [pout, pin])
    p_y = ladle.Partition(comm, [1, pout])
    with ladle.DistLinear(p_x, p_w, p_y, 4, 8, 6, bias=False) as lin:
        assert ladle.adjoint_test(lin, seed=3) <= ladle.adjoint_tolerance(np.float64)


def spatial(comm, X):
    p_x = ladle.Partition(comm, [1, 1, comm.size, 1])
    lx = ladle.Layout(p_x, X.shape)
    return p_x, lx, np.ascontiguousarray(X[lx.slices()])


@pytest.mark.parametrize("kind", ["conv", "maxpool", "avgpool", "batchnorm"])
def test_spatial_dist_layers_equal_their_twins(comm, rng, kind):
    """Each distributed layer equals its sequential twin on the gathered
    tensors (forward and input gradient)."""
    X = rng.uniform(-1, 1, (2, 3, 8, 6))
    p_x, lx, x = spatial(comm, X)
    if kind == "conv":
        dist = ladle.DistConv(p_x, X.shape, 4, 3, padding=1, seed=9)
        twin = ladle.Conv(X.shape, 4, 3, padding=1, seed=9)
    elif kind == "batchnorm":
        dist = ladle.DistBatchNorm(p_x, X.shape, sync="global")
        twin = ladle.BatchNorm(X.shape)
    else:
        k = kind[:3]
        dist = ladle.DistPool(p_x, X.shape, 2, kind=k)
        twin = ladle.Pool(X.shape, 2, kind=k)
    ctx, tctx = dist.ctx(), twin.ctx()
    y = dist.forward(x, ctx=ctx)
    Y = twin.forward(X, ctx=tctx)
    ly = ladle.Layout(p_x, Y.shape)
    np.testing.assert_allclose(gather_global(comm, ly, y), Y, rtol=1e-12, atol=1e-13)
    DY = rng.uniform(-1, 1, Y.shape)
    dx = dist.backward(ctx, np.ascontiguousarray(DY[ly.slices()]))
    np.testing.assert_allclose(gather_global(comm, lx, dx), twin.backward(tctx, DY),
                               rtol=1e-11, atol=1e-12)


def test_dist_flatten_is_a_permutation(comm, rng):
    X = rng.uniform(-1, 1, (2, 3, 8, 6))
    p_x, lx, x = spatial(comm, X)
    p_y = ladle.Partition(comm, [1, comm.size])
    with ladle.DistFlatten(p_x, X.shape, p_y) as flat:
        assert ladle.adjoint_test(flat) <= ladle.adjoint_tolerance(np.float64)
        ly = ladle.Layout(p_y, (2, 3 * 8 * 6))
        y = flat.forward(x)
        np.testing.assert_array_equal(gather_global(comm, ly, y), X.reshape(2, -1))
        assert y.shape == ly.local_shape


def test_bind_param_puts_weights_in_numpy(comm, rng):
    """A distributed layer's weights and gradients in caller-owned numpy
    arrays: ladle trains them in place."""
    pout, pin = grid(comm.size)
    p_x = ladle.Partition(comm, [1, pin])
    p_w = ladle.Partition(comm, [pout, pin])
    p_y = ladle.Partition(comm, [1, pout])
    lin = ladle.DistLinear(p_x, p_w, p_y, 3, 5, 4, seed=2)
    before = lin.param(0).copy()
    w, gw = np.empty_like(before), np.zeros_like(before)
    lin.bind_param(0, w, gw)
    np.testing.assert_array_equal(w, before)       # ladle's initial values, copied
    # and ladle's tensor is the array now
    assert lin.param(0).ctypes.data == w.ctypes.data or w.size == 0
    lx = ladle.Layout(p_x, (3, 5))
    X = rng.uniform(-1, 1, (3, 5))
    ctx = lin.ctx()
    y = lin.forward(np.ascontiguousarray(X[lx.slices()]), ctx=ctx)
    lin.zero_grad()
    lin.backward_weight(ctx, np.ones_like(y))
    lin.sync_gradients()
    if gw.size:
        assert np.any(gw != 0)                     # the gradient landed in gw
    with pytest.raises(ladle.LadleError) as e:
        lin.bind_param(0, np.zeros((7, 7)))
    assert e.value.name == "LADLE_ERR_SHAPE"
