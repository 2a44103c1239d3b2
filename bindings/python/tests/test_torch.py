"""ladle.torch: torch.autograd.gradcheck (f64) of the five primitives and
of the layers, sequential and distributed, at whatever rank count the run
has (run-tests.sh: 1 to 4).

A distributed op maps every rank's block of x to every rank's block of y.
gradcheck perturbs its inputs one entry at a time, so each rank must see the
same inputs, or the ranks would call the collective op a different number
of times. Each check therefore runs on global vectors held alike by every
rank: the concatenation of all ranks' x blocks goes in (each rank takes its
own segment, and the adjoint of taking it gathers every rank's dx), and the
concatenation of all ranks' y blocks comes out (gathered; the adjoint hands
each rank its own segment of dy). A parameter is likewise one global tensor:
each rank takes its shard (ladle_op_param_shard) and the gradient is the sum
of the owners' shard gradients (replicated copies are summed by the layer
itself, then counted once)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mpi4py import MPI  # noqa: E402

import ladle  # noqa: E402
import ladle.torch as lt  # noqa: E402

F64 = torch.float64
COMM = MPI.COMM_WORLD


@pytest.fixture(autouse=True)
def _close_layers():
    """Each test's layers destroyed before its partitions (lt.close_all)."""
    yield
    lt.close_all()


def _gather_flat(t):
    parts = COMM.allgather(t.detach().reshape(-1).numpy())
    return torch.from_numpy(np.concatenate(parts)), [p.size for p in parts]


class _Take(torch.autograd.Function):
    """My segment of a global flat vector (adjoint: gather every rank's)."""

    @staticmethod
    def forward(ctx, flat, start, shape):
        n = int(np.prod(shape))
        ctx.n = n
        return flat[start:start + n].reshape(shape).clone()

    @staticmethod
    def backward(ctx, g):
        full, _ = _gather_flat(g.contiguous())
        return full, None, None


class _Gather(torch.autograd.Function):
    """Every rank's block, flattened and concatenated (adjoint: my segment)."""

    @staticmethod
    def forward(ctx, t):
        full, sizes = _gather_flat(t.contiguous())
        ctx.start = sum(sizes[:COMM.rank])
        ctx.shape = tuple(t.shape)
        return full

    @staticmethod
    def backward(ctx, g):
        n = int(np.prod(ctx.shape))
        return g[ctx.start:ctx.start + n].reshape(ctx.shape).clone()


class _One(torch.autograd.Function):
    """A value every rank holds alike, taken from rank 0."""

    @staticmethod
    def forward(ctx, t):
        return torch.from_numpy(np.array(COMM.bcast(t.detach().numpy(), root=0)))

    @staticmethod
    def backward(ctx, g):
        return g


class _Shard(torch.autograd.Function):
    """This rank's shard of a global parameter (adjoint: the owners' shard
    gradients summed over the ranks into the global shape)."""

    @staticmethod
    def forward(ctx, g, offset, shape, owner):
        ctx.offset, ctx.shape, ctx.owner, ctx.gshape = offset, shape, owner, tuple(g.shape)
        sl = tuple(slice(o, o + s) for o, s in zip(offset, shape))
        return g[sl].clone()

    @staticmethod
    def backward(ctx, d):
        full = np.zeros(ctx.gshape)
        if ctx.owner and d.numel():
            sl = tuple(slice(o, o + s) for o, s in zip(ctx.offset, ctx.shape))
            full[sl] = d.numpy()
        COMM.Allreduce(MPI.IN_PLACE, full, op=MPI.SUM)
        return torch.from_numpy(full), None, None, None


def _global_x(shape, seed):
    """Every rank's block drawn alike: the concatenated x of all ranks."""
    sizes = COMM.allgather(int(np.prod(shape)))
    g = torch.Generator().manual_seed(seed)
    flat = torch.randn(sum(sizes), generator=g, dtype=F64)
    return flat.requires_grad_(), sum(sizes[:COMM.rank])


def check_op(mod, seed=3, extra=None, one=False):
    """gradcheck of mod (x -> y, or (x, target) -> loss) on global vectors,
    its parameters included."""
    xshape = tuple(mod.x_shape)
    flat, start = _global_x(xshape, seed)
    names = [n for n, _ in mod.named_parameters(recurse=False)]
    globals_, shards = [], []
    g = torch.Generator().manual_seed(seed + 1)
    for i, name in enumerate(names):
        gshape, off, owner = mod.layer.param_shard(i)
        p = getattr(mod, name)
        glob = torch.randn(gshape, generator=g, dtype=F64).requires_grad_()
        globals_.append(glob)
        shards.append((p, off, tuple(p.shape), owner))

    def fn(x, *gparams):
        values = [_Shard.apply(gp, off, shp, owner)
                  for (_, off, shp, owner), gp in zip(shards, gparams)]
        xl = _Take.apply(x, start, xshape)
        y = _ShardedCall.apply(mod, extra, xl, len(shards), *[s[0] for s in shards], *values)
        # one: a distributed loss is one value that every rank holds: rank
        # 0's copy stands for it, and every rank's backward starts from the
        # same dloss
        return _One.apply(y) if one else _Gather.apply(y)

    # at one rank the whole Jacobian; at several, gradcheck's fast mode
    # (directional derivatives along random vectors, drawn alike on every
    # rank from one seed), which costs a few collective calls instead of two
    # per input entry
    torch.manual_seed(seed)
    assert torch.autograd.gradcheck(fn, (flat, *globals_), eps=1e-6, atol=1e-8, rtol=1e-6,
                                    fast_mode=COMM.size > 1)


class _ShardedCall(torch.autograd.Function):
    """Runs the module (its parameters set to the given shard values) and
    passes the module's parameter gradients back to those values."""

    @staticmethod
    def forward(ctx, mod, extra, x, n, *rest):
        params, values = rest[:n], rest[n:]
        with torch.no_grad():
            for p, v in zip(params, values):
                p.copy_(v)
        ctx.mod, ctx.extra, ctx.params, ctx.n = mod, extra, params, n
        ctx.values = [v.detach().clone() for v in values]
        ctx.save_for_backward(x)
        with torch.no_grad():
            y = mod(x) if extra is None else mod(x, extra).reshape(1)
        return y

    @staticmethod
    def backward(ctx, dy):
        # a ladle layer's forward serves one backward, and gradcheck runs
        # several per forward: each backward records the forward afresh
        (x,) = ctx.saved_tensors
        with torch.no_grad():
            for p, v in zip(ctx.params, ctx.values):
                p.copy_(v)
        with torch.enable_grad():
            xi = x.detach().requires_grad_()
            y = ctx.mod(xi) if ctx.extra is None else ctx.mod(xi, ctx.extra).reshape(1)
            wrt = [xi] + list(ctx.params)
            got = torch.autograd.grad(y, wrt, dy.contiguous(), allow_unused=True)
        dx, *grads = [g if g is not None else torch.zeros_like(w) for g, w in zip(got, wrt)]
        return (None, None, dx, None) + (None,) * ctx.n + tuple(grads)


# ---- the primitives ------------------------------------------------------------------

def test_broadcast():
    p_x = ladle.Partition(COMM, [1], ranks=[0])
    p_y = ladle.Partition(COMM, [COMM.size])
    check_op(lt.Broadcast(p_x, p_y, (3, 2), dtype=F64))


def test_sum_reduce():
    p_x = ladle.Partition(COMM, [COMM.size])
    p_y = ladle.Partition(COMM, [1], ranks=[COMM.size - 1])
    check_op(lt.SumReduce(p_x, p_y, (2, 3), dtype=F64))


def test_all_sum_reduce():
    p = ladle.Partition(COMM, [COMM.size])
    check_op(lt.AllSumReduce(p, [0], (3, 2), dtype=F64))


def test_repartition():
    shape = (2 * COMM.size + 1, 5)
    lx = ladle.Layout(ladle.Partition(COMM, [COMM.size, 1]), shape)
    ly = ladle.Layout(ladle.Partition(COMM, [1, COMM.size]), shape)
    check_op(lt.Repartition(lx, ly, dtype=F64))


def test_halo_exchange():
    layout = ladle.Layout(ladle.Partition(COMM, [1, 1, COMM.size]), (1, 2, 3 * COMM.size))
    check_op(lt.HaloExchange(layout, (1, 1, 3), padding=(0, 0, 1), dtype=F64))


def test_primitive_functions():
    """The one-call forms match the modules."""
    p = ladle.Partition(COMM, [COMM.size])
    x = torch.full((2, 2), float(COMM.rank + 1), dtype=F64, requires_grad=True)
    y = lt.all_sum_reduce(x, p, [0], (2, 2))
    total = COMM.size * (COMM.size + 1) / 2
    assert torch.allclose(y, torch.full((2, 2), total, dtype=F64))
    y.sum().backward()
    assert torch.allclose(x.grad, torch.full((2, 2), float(COMM.size), dtype=F64))


# ---- sequential layers ---------------------------------------------------------------

def test_linear_sequential():
    check_op(lt.Linear((3, 4), 5, dtype=F64, seed=1))


def test_conv_sequential():
    check_op(lt.Conv2d((2, 2, 5, 4), 3, 3, padding=1, dtype=F64, seed=2))


def test_maxpool_sequential():
    check_op(lt.MaxPool2d((2, 2, 4, 4), 2, dtype=F64))


def test_batchnorm_sequential():
    check_op(lt.BatchNorm((4, 2, 3, 3), dtype=F64))


def test_cross_entropy_sequential():
    labels = torch.tensor([0, 2, 1], dtype=torch.int64)
    check_op(lt.CrossEntropyLoss((3, 4), dtype=F64), extra=labels)



def test_layers_extra_sequential():
    check_op(lt.GroupNorm((2, 4, 3, 2), 2, dtype=F64))
    check_op(lt.LayerNorm((3, 4), dtype=F64))
    check_op(lt.ConvTranspose2d((1, 2, 3, 2), 2, 3, stride=2, padding=1, dtype=F64, seed=3))
    check_op(lt.AdaptiveAvgPool2d((1, 2, 5, 4), (3, 3), dtype=F64))
    check_op(lt.AdaptiveMaxPool2d((1, 2, 5, 4), (2, 3), dtype=F64))

# ---- distributed layers --------------------------------------------------------------

def test_dist_linear_column_parallel():
    n = COMM.size
    p_x = ladle.Partition(COMM, [1, 1], ranks=[0])
    p_w = ladle.Partition(COMM, [n, 1])
    p_y = ladle.Partition(COMM, [1, n])
    check_op(lt.DistLinear(p_x, p_w, p_y, 3, 4, 2 * n + 1, dtype=F64, seed=5))


def test_dist_linear_row_parallel():
    n = COMM.size
    p_x = ladle.Partition(COMM, [1, n])
    p_w = ladle.Partition(COMM, [1, n])
    p_y = ladle.Partition(COMM, [1, 1], ranks=[0])
    check_op(lt.DistLinear(p_x, p_w, p_y, 2, n + 2, 3, dtype=F64, seed=6))


def test_dist_conv():
    p = ladle.Partition(COMM, [1, 1, COMM.size, 1])
    check_op(lt.DistConv2d(p, (2, 2, 3 * COMM.size, 4), 3, 3, padding=1, dtype=F64, seed=7))


def test_dist_conv_batch_split():
    p = ladle.Partition(COMM, [COMM.size, 1, 1, 1])
    check_op(lt.DistConv2d(p, (COMM.size, 1, 4, 4), 2, 3, dtype=F64, seed=8))


def test_dist_pool():
    p = ladle.Partition(COMM, [1, 1, COMM.size, 1])
    check_op(lt.DistPool2d(p, (2, 2, 4 * COMM.size, 4), 2, dtype=F64))


def test_dist_batchnorm():
    p = ladle.Partition(COMM, [COMM.size, 1, 1, 1])
    check_op(lt.DistBatchNorm(p, (2 * COMM.size, 2, 3, 3), dtype=F64))


def test_dist_layers_extra():
    p = ladle.Partition(COMM, [1, 1, COMM.size, 1])
    n = 2 * COMM.size
    check_op(lt.DistGroupNorm(p, (2, 2, n, 2), 1, dtype=F64))
    check_op(lt.DistConvTranspose2d(p, (1, 2, n, 2), 2, 3, stride=2, padding=1, dtype=F64,
                                    seed=9))
    check_op(lt.DistAdaptivePool2d(p, (1, 2, n + 1, 3), (n - 1, 2), "max", dtype=F64))


def test_all_gather_reduce_scatter():
    p = ladle.Partition(COMM, [COMM.size])
    check_op(lt.AllGather(p, (2 * COMM.size + 1, 2), dtype=F64))
    check_op(lt.ReduceScatter(p, (2, COMM.size + 1), dim=1, dtype=F64))

def test_dist_flatten():
    p_x = ladle.Partition(COMM, [1, 1, COMM.size, 1])
    p_y = ladle.Partition(COMM, [1, COMM.size])
    check_op(lt.DistFlatten(p_x, (2, 3, 2 * COMM.size, 2), p_y, dtype=F64))


def test_dist_cross_entropy():
    n = COMM.size
    p = ladle.Partition(COMM, [n, 1])
    mod = lt.DistLoss(p, (2 * n, 3), dtype=F64)
    off, shp = mod.layer.x_layout.box()
    labels = torch.tensor([(off[0] + i) % 3 for i in range(shp[0])], dtype=torch.int64)
    check_op(mod, extra=labels, one=True)


def test_second_backward_is_refused():
    lin = lt.Linear((2, 3), 2, dtype=F64)
    y = lin(torch.ones(2, 3, dtype=F64, requires_grad=True)).sum()
    y.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="one backward"):
        y.backward()


# ---- torch owns the parameters -------------------------------------------------------

def test_parameters_are_torch_tensors_stepped_by_torch_optim():
    """An optimizer step on the nn.Parameters is what ladle computes with next."""
    n = COMM.size
    p = ladle.Partition(COMM, [1, 1, n, 1])
    conv = lt.DistConv2d(p, (2, 1, 2 * n, 3), 2, 3, padding=1, dtype=F64, seed=9)
    x = torch.randn(conv.x_shape, dtype=F64, generator=torch.Generator().manual_seed(COMM.rank))
    opt = torch.optim.SGD(conv.parameters(), lr=0.1)
    y0 = conv(x)
    y0.sum().backward()
    w_before = conv.weight.detach().clone()
    grad = conv.weight.grad.clone()
    opt.step()
    assert torch.allclose(conv.weight, w_before - 0.1 * grad)
    # every rank holds the same (replicated, summed) weight gradient
    allg = COMM.allgather(grad.numpy())
    assert all(np.array_equal(allg[0], g) for g in allg)
    # the next forward uses the stepped weights: compare with torch's conv on
    # the gathered input
    with torch.no_grad():
        y1 = conv(x)
    lay = conv.layer.x_layout
    glob = np.zeros(lay.global_shape)
    for (o, s, b) in COMM.allgather((lay.box()[0], lay.box()[1], x.numpy())):
        glob[tuple(slice(a, a + m) for a, m in zip(o, s))] = b
    ref = torch.nn.functional.conv2d(torch.from_numpy(glob), conv.weight.detach(),
                                     conv.bias.detach(), padding=1)
    ylay = conv.layer.y_layout
    assert torch.allclose(y1, ref[ylay.slices()], atol=1e-12)
    # gradients accumulate over backwards, as torch's do
    conv.zero_grad(set_to_none=True)
    conv(x).sum().backward()
    g1 = conv.weight.grad.clone()
    conv(x).sum().backward()
    assert torch.allclose(conv.weight.grad, 2 * g1)


def test_bound_zero_copy():
    """The parameter torch holds is the memory ladle reads (bind or view)."""
    lin = lt.Linear((2, 3), 2, dtype=F64, seed=1)
    with torch.no_grad():
        lin.weight.fill_(0.5)
        lin.bias.zero_()
    y = lin(torch.ones(2, 3, dtype=F64))
    assert torch.allclose(y, torch.full((2, 2), 1.5, dtype=F64))


def test_errors_are_ladle_errors():
    lin = lt.Linear((2, 3), 2, dtype=F64)
    with pytest.raises(ladle.LadleError):
        lin(torch.ones(2, 4, dtype=F64))
    with pytest.raises(ladle.LadleError):
        lin(torch.ones(2, 3, dtype=torch.float32))
