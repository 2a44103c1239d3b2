"""The five primitives from Python: each passes the dot-product test and
equals a numpy reference computed on the gathered data."""

import numpy as np
import pytest

import ladle
from conftest import gather_global

DTYPES = [np.float64, np.float32]


def tol(dtype):
    return ladle.adjoint_tolerance(dtype)


def adjoint_ok(op, dtype, seed=7):
    """The dot-product test passes, and is not vacuous where data moves."""
    mismatch, fx_y, x_fty = ladle.adjoint_test(op, seed, full=True)
    assert mismatch <= tol(dtype), (mismatch, fx_y, x_fty)
    assert fx_y != 0.0 or not op.active


def close(a, b, dtype):
    rtol = 1e-12 if np.dtype(dtype) == np.float64 else 1e-5
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast(comm, rng, dtype):
    size = comm.size
    p_x = ladle.Partition(comm, [1], ranks=[0])
    p_y = ladle.Partition(comm, [size])
    shape = (6, 8)
    with ladle.broadcast(p_x, p_y, shape, dtype=dtype) as op:
        assert op.x_shape == (shape if comm.rank == 0 else (0, 0)) or \
            np.prod(op.x_shape) == 0
        assert op.y_shape == shape
        adjoint_ok(op, dtype)
        X = rng.uniform(-1, 1, shape).astype(dtype)
        x = X.copy() if comm.rank == 0 else np.zeros(op.x_shape, dtype)
        y = op.forward(x)
        close(y, X, dtype)
        # adjoint: the sum of every rank's dy onto rank 0
        DY = rng.uniform(-1, 1, (size,) + shape).astype(dtype)
        dx = op.adjoint(DY[comm.rank].copy())
        if comm.rank == 0:
            close(dx, DY.astype(np.float64).sum(axis=0), dtype)
        else:
            assert dx.size == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_reduce(comm, rng, dtype):
    size = comm.size
    p_x = ladle.Partition(comm, [size])
    p_y = ladle.Partition(comm, [1], ranks=[size - 1])
    shape = (4, 16)
    with ladle.sum_reduce(p_x, p_y, shape, dtype=dtype) as op:
        adjoint_ok(op, dtype)
        X = rng.uniform(-1, 1, (size,) + shape).astype(dtype)
        y = op.forward(X[comm.rank].copy())
        if comm.rank == size - 1:
            close(y, X.astype(np.float64).sum(axis=0), dtype)
        # adjoint: a broadcast of dy from the last rank
        DY = rng.uniform(-1, 1, shape).astype(dtype)
        dy = DY.copy() if comm.rank == size - 1 else np.zeros(op.y_shape, dtype)
        close(op.adjoint(dy), DY, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_all_sum_reduce(comm, rng, dtype):
    size = comm.size
    # a 2-d grid where the size allows, reducing over its first axis
    shape_p = [2, size // 2] if size % 2 == 0 else [size, 1]
    p = ladle.Partition(comm, shape_p)
    with ladle.all_sum_reduce(p, [0], (4, 8), dtype=dtype) as op:
        adjoint_ok(op, dtype)
        X = rng.uniform(-1, 1, (size, 4, 8)).astype(dtype)
        y = op.forward(X[comm.rank].copy())
        coords = comm.allgather(p.coords)
        mine = [r for r in range(size) if coords[r][1] == p.coords[1]]
        close(y, X[mine].astype(np.float64).sum(axis=0), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_repartition(comm, rng, dtype):
    size = comm.size
    G = rng.uniform(-1, 1, (7, 5)).astype(dtype)
    lx = ladle.Layout(ladle.Partition(comm, [size, 1]), G.shape)
    ly = ladle.Layout(ladle.Partition(comm, [1, size]), G.shape)
    with ladle.repartition(lx, ly, dtype=dtype) as op:
        assert op.x_shape == lx.local_shape and op.y_shape == ly.local_shape
        adjoint_ok(op, dtype)
        y = op.forward(np.ascontiguousarray(G[lx.slices()]))
        np.testing.assert_array_equal(y, G[ly.slices()])
        np.testing.assert_array_equal(gather_global(comm, ly, y), G)
        # the adjoint is the inverse permutation
        dx = op.adjoint(y)
        np.testing.assert_array_equal(dx, G[lx.slices()])


def test_repartition_unbalanced(comm, rng):
    size = comm.size
    n = 3 * size + 1
    G = rng.uniform(-1, 1, (n,))
    sizes = [1] * (size - 1) + [n - (size - 1)]
    lx = ladle.Layout.split(ladle.Partition(comm, [size]), (n,), [sizes])
    ly = ladle.Layout(ladle.Partition(comm, [size]), (n,))
    with ladle.repartition(lx, ly) as op:
        y = op.forward(np.ascontiguousarray(G[lx.slices()]))
        np.testing.assert_array_equal(y, G[ly.slices()])


@pytest.mark.parametrize("dtype", DTYPES)
def test_halo_exchange(comm, rng, dtype):
    size = comm.size
    n = 4 * size + 2
    G = rng.uniform(-1, 1, (2, 1, n)).astype(dtype)
    layout = ladle.Layout(ladle.Partition(comm, [1, 1, size]), G.shape)
    with ladle.halo_exchange(layout, kernel=(1, 1, 3), padding=(0, 0, 1), dtype=dtype) as op:
        adjoint_ok(op, dtype)
        off, bulk = layout.box()
        padded = op.padded_shape
        assert padded[:2] == bulk[:2] and padded[2] == bulk[2] + 2
        t = np.zeros(padded, dtype)
        t[:, :, 1:-1] = G[layout.slices()]
        op.forward(t)  # in place
        # the halos hold the neighbours' cells, zero (the padding) at the ends
        ref = np.zeros((2, 1, n + 2), dtype)
        ref[:, :, 1:-1] = G
        np.testing.assert_array_equal(t, ref[:, :, off[2]:off[2] + bulk[2] + 2])
        # adjoint: the halos added back into their owners, then zeroed
        t2 = t.copy()
        op.adjoint(t2)
        assert np.all(t2[:, :, 0] == 0) and np.all(t2[:, :, -1] == 0)


def test_partition_from_mpi4py(comm):
    size = comm.size
    p = ladle.Partition(comm, [1, size])
    assert p.shape == (1, size) and p.size == size and p.active
    assert p.rank == comm.rank and p.coords == (0, comm.rank)
    # its private communicator, back in mpi4py through MPI_Fint
    c = p.comm
    assert c.Get_size() == size and c.Get_rank() == p.rank
    assert c.allreduce(1) == size
    # a sub-grid and a partition of one rank: the others are inactive
    row = p.sub([False, True])
    assert row.shape == (size,) and row.size == size
    one = ladle.Partition(comm, [1], ranks=[size - 1])
    assert one.active == (comm.rank == size - 1)
    assert one.rank == (0 if comm.rank == size - 1 else -1)
    from mpi4py import MPI
    assert (one.comm == MPI.COMM_NULL) == (comm.rank != size - 1)


def mpi_reduce_scatter(comm, pieces):
    """mpi4py's Reduce_scatter (f64): member k gets the sum of pieces[k]."""
    from mpi4py import MPI
    send = np.concatenate([np.ravel(a) for a in pieces])
    mine = pieces[comm.rank]
    recv = np.empty(mine.size)
    comm.Reduce_scatter(send, recv, [a.size for a in pieces], op=MPI.SUM)
    return recv.reshape(mine.shape)


def shard_counts(n, size, uneven):
    """Balanced counts, or uneven ones with an empty shard where size > 1."""
    if not uneven or size == 1:
        return None, [n // size + (1 if k < n % size else 0) for k in range(size)]
    counts = [0] + [1] * (size - 2) + [n - (size - 2)]
    return counts, counts


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uneven", [False, True])
def test_all_gather_matches_mpi4py(comm, rng, dtype, uneven):
    size = comm.size
    n = 2 * size + 1
    given, counts = shard_counts(n, size, uneven)
    p = ladle.Partition(comm, [size])
    with ladle.all_gather(p, (3, n, 2), dim=1, counts=given, dtype=dtype) as op:
        assert op.x_shape == (3, counts[comm.rank], 2) and op.y_shape == (3, n, 2)
        adjoint_ok(op, dtype)
        x = rng.uniform(-1, 1, op.x_shape).astype(dtype) + comm.rank
        y = op.forward(x)
        np.testing.assert_array_equal(y, np.concatenate(comm.allgather(x), axis=1))
        # the adjoint is the reduce-scatter of every rank's dy
        dy = rng.uniform(-1, 1, op.y_shape).astype(dtype) * (comm.rank + 1)
        cut = np.cumsum(counts)[:-1]
        ref = mpi_reduce_scatter(comm, np.split(dy.astype(np.float64), cut, axis=1))
        close(op.adjoint(dy), ref, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_scatter_matches_mpi4py(comm, rng, dtype):
    size = comm.size
    # a 2-d grid where the size allows: groups along axis 1
    shape_p = [2, size // 2] if size % 2 == 0 else [1, size]
    p = ladle.Partition(comm, shape_p)
    g = shape_p[1]
    shape = (3 * g + 1, 4)
    with ladle.reduce_scatter(p, shape, dim=0, axis=1, dtype=dtype) as op:
        assert op.x_shape == shape
        adjoint_ok(op, dtype)
        x = rng.uniform(-1, 1, shape).astype(dtype) * (comm.rank + 1)
        y = op.forward(x)
        row = comm.Split(p.coords[0], p.coords[1])
        counts = [shape[0] // g + (1 if k < shape[0] % g else 0) for k in range(g)]
        pieces = np.split(x.astype(np.float64), np.cumsum(counts)[:-1], axis=0)
        ref = mpi_reduce_scatter(row, pieces)
        row.Free()
        close(y, ref, dtype)
        assert y.shape == (counts[p.coords[1]], 4)


def test_all_gather_bad_arguments(comm):
    p = ladle.Partition(comm, [comm.size])
    for kw, name in [(dict(axis=1), "LADLE_ERR_ARG"), (dict(dim=2), "LADLE_ERR_ARG"),
                     (dict(counts=[5] * comm.size), "LADLE_ERR_ARG")]:
        with pytest.raises(ladle.LadleError) as e:
            ladle.all_gather(p, (4, 3), **kw)
        assert set(comm.allgather(e.value.name)) == {name}, e.value
    with pytest.raises(ladle.LadleError) as e:
        ladle.reduce_scatter(p, (4, 3), counts=[-1] + [0] * (comm.size - 2) + [5])
    assert e.value.name == "LADLE_ERR_ARG"


def test_halo_exchange_split_phases(comm, rng):
    """begin/end give the one-call forward's and adjoint's results."""
    size = comm.size
    G = rng.uniform(-1, 1, (1, 2, 3 * size + 1))
    layout = ladle.Layout(ladle.Partition(comm, [1, 1, size]), G.shape)
    with ladle.halo_exchange(layout, kernel=(1, 1, 3), padding=(0, 0, 1)) as op:
        t = np.zeros(op.padded_shape)
        t[:, :, 1:-1] = G[layout.slices()]
        ref = op.forward(t.copy())
        assert op.begin(t) is t
        op.progress()
        assert op.end() is t
        np.testing.assert_array_equal(t, ref)
        ref = op.adjoint(t.copy())
        op.adjoint_begin(t)
        op.adjoint_end()
        np.testing.assert_array_equal(t, ref)
        with pytest.raises(ladle.LadleError) as e:
            op.end()                                   # no exchange in flight
        assert e.value.name == "LADLE_ERR_STATE"
