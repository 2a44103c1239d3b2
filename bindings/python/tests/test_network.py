"""A distributed network trained one step from Python, against numpy on
the gathered tensors; checkpoints round trip."""

import os
import tempfile

import numpy as np
import pytest

import ladle
from conftest import gather_global

GRID = {1: (1, 1), 2: (2, 1), 3: (3, 1), 4: (2, 2)}


def make_net(comm, batch, fin, fout, seed):
    pout, pin = GRID[comm.size]
    p_x = ladle.Partition(comm, [1, pin])
    p_w = ladle.Partition(comm, [pout, pin])
    p_y = ladle.Partition(comm, [1, pout])
    lin = ladle.DistLinear(p_x, p_w, p_y, batch, fin, fout, seed=seed)
    act = ladle.Activation(lin.y_shape, "tanh")
    loss = ladle.DistLoss(p_y, (batch, fout), "mse")
    net = ladle.Network([lin, act], loss)
    return net, lin, ladle.Layout(p_x, (batch, fin)), ladle.Layout(p_y, (batch, fout)), p_y


def test_network_step_matches_numpy(comm, rng):
    batch, fin, fout, lr = 4, 6, 5, 0.1
    net, lin, lx, ly, p_y = make_net(comm, batch, fin, fout, seed=21)
    twin = ladle.Linear((batch, fin), fout, seed=21)
    W, b = twin.param(0).copy(), twin.param(1).copy()
    X = rng.uniform(-1, 1, (batch, fin))
    T = rng.uniform(-1, 1, (batch, fout))
    opt = ladle.Optimizer("sgd", lr=lr).add(net)

    y = net.forward(np.ascontiguousarray(X[lx.slices()]))
    Y = gather_global(comm, ly, np.array(y))
    H = np.tanh(X @ W.T + b)
    np.testing.assert_allclose(Y, H, rtol=1e-12, atol=1e-13)
    loss = net.loss(np.ascontiguousarray(T[ly.slices()]))
    # the whole batch's loss on every rank of the loss's partition (ranks
    # outside it, at 4 ranks, hold no part of y)
    losses = [v for v, a in comm.allgather((loss, p_y.active)) if a]
    assert len(losses) == p_y.size
    for v in losses:
        assert abs(v - np.mean((H - T) ** 2)) < 1e-12

    net.zero_grad()
    net.backward()
    opt.step()
    # numpy: dL/dz = 2 (H - T) / numel * (1 - H^2)
    dz = 2 * (H - T) / H.size * (1 - H ** 2)
    W1, b1 = W - lr * dz.T @ X, b - lr * dz.sum(axis=0)
    # every rank's shard of the weights, where it sits in the global one
    gshape, off, _ = lin.param_shard(0)
    w = lin.param(0)
    assert gshape == W.shape
    block = tuple(slice(o, o + n) for o, n in zip(off, w.shape))
    np.testing.assert_allclose(w, W1[block], rtol=1e-12, atol=1e-13)
    _, boff, _ = lin.param_shard(1)
    bb = lin.param(1)
    np.testing.assert_allclose(bb, b1[boff[0]:boff[0] + bb.shape[0]], rtol=1e-12, atol=1e-13)
    # state checks happen in C: a second backward needs a new loss
    with pytest.raises(ladle.LadleError) as e:
        net.backward()
    assert e.value.name == "LADLE_ERR_STATE"


def shared_tmpdir(comm):
    path = tempfile.mkdtemp(prefix="ladle-py-") if comm.rank == 0 else None
    return comm.bcast(path, root=0)


def test_checkpoint_round_trip(comm, rng):
    batch, fin, fout = 4, 6, 5
    net, lin, lx, ly, p_y = make_net(comm, batch, fin, fout, seed=5)
    opt = ladle.Optimizer("adam", lr=0.01).add(net)
    X = np.ascontiguousarray(rng.uniform(-1, 1, (batch, fin))[lx.slices()])
    T = np.ascontiguousarray(rng.uniform(-1, 1, (batch, fout))[ly.slices()])

    def step():
        net.forward(X)
        loss = net.loss(T)
        net.zero_grad()
        net.backward()
        opt.step()
        return loss

    step()
    d = shared_tmpdir(comm)
    path = os.path.join(d, "net.ckpt")
    ladle.check_checkpoint_path(path, comm)
    ladle.save_checkpoint(path, comm, net, opt, meta=[7, 42])
    saved = lin.param(0).copy()
    after_save = step()
    assert not np.array_equal(lin.param(0), saved) or lin.param(0).size == 0
    assert ladle.load_checkpoint(path, comm, net, opt) == [7, 42]
    np.testing.assert_array_equal(lin.param(0), saved)
    assert ladle.read_checkpoint_meta(path, comm) == [7, 42]
    # the same step again gives the same loss: the optimizer state came back
    assert step() == after_save
    # a missing file: LADLE_ERR_IO on every rank, with the reason
    with pytest.raises(ladle.LadleError) as e:
        ladle.load_checkpoint(os.path.join(d, "missing.ckpt"), comm, net)
    assert e.value.name == "LADLE_ERR_IO" and e.value.message
    comm.Barrier()
    if comm.rank == 0:
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
        os.rmdir(d)
