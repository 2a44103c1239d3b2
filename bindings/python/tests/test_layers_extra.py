"""The layers of layers_extra.py against torch's own layers in f64 on the
same weights and inputs (forward, input gradient, weight gradients), the
distributed ones against their sequential twins on the gathered tensors,
and bad arguments raising LadleError with the right name."""

import numpy as np
import pytest

import ladle
from conftest import gather_global

torch = pytest.importorskip("torch")
F = torch.nn.functional

TOL = dict(rtol=1e-12, atol=1e-12)


def randomize(layer, rng):
    """Random values in every parameter (ladle's memory), so that a twin
    built from them checks more than the default ones and zeros."""
    for i in range(layer.num_params):
        p = layer.param(i)
        p[...] = rng.uniform(-1, 1, p.shape)


def run_ladle(layer, x, dy):
    """(y, dx, [param grads]) of one forward and backward."""
    ctx = layer.ctx()
    y = layer.forward(x, ctx=ctx)
    dx = layer.backward(ctx, dy)
    layer.zero_grad()
    layer.backward_weight(ctx, dy)
    return y, dx, [layer.grad(i).copy() for i in range(layer.num_params)]


def run_torch(module, x, dy, params=()):
    """The same through a torch module (or a function of x) in f64."""
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    yt = module(xt)
    yt.backward(torch.from_numpy(dy))
    return yt.detach().numpy(), xt.grad.numpy(), [p.grad.numpy() for p in params]


def same(ladle_out, torch_out):
    y, dx, g = ladle_out
    ty, tdx, tg = torch_out
    np.testing.assert_allclose(y, ty, **TOL)
    np.testing.assert_allclose(dx, tdx, **TOL)
    assert len(g) == len(tg)
    for a, b in zip(g, tg):
        np.testing.assert_allclose(a, b, **TOL)


def set_params(module, layer):
    with torch.no_grad():
        for p, i in zip(module.parameters(), range(layer.num_params)):
            p.copy_(torch.from_numpy(layer.param(i).copy()))
    return list(module.parameters())


@pytest.mark.parametrize("groups,shape", [(2, (3, 4, 5, 3)), (3, (2, 6, 7)), (1, (2, 2, 3, 2, 2))])
def test_groupnorm_equals_torch(rng, groups, shape):
    layer = ladle.GroupNorm(shape, groups, eps=1e-4)
    assert layer.param_names() == ["weight", "bias"]
    randomize(layer, rng)
    twin = torch.nn.GroupNorm(groups, shape[1], eps=1e-4).double()
    params = set_params(twin, layer)
    x, dy = rng.uniform(-1, 1, shape), rng.uniform(-1, 1, shape)
    same(run_ladle(layer, x, dy), run_torch(twin, x, dy, params))


@pytest.mark.parametrize("opts", [dict(stride=2, padding=1, output_padding=1),
                                  dict(stride=1, padding=0, dilation=2, groups=2),
                                  dict(stride=3, padding=2, output_padding=2, bias=False)])
def test_conv_transpose2d_equals_torch(rng, opts):
    shape, cout, k = (2, 4, 5, 4), 6, 3
    layer = ladle.ConvTranspose(shape, cout, k, seed=4, **opts)
    randomize(layer, rng)
    twin = torch.nn.ConvTranspose2d(shape[1], cout, k, **opts).double()
    params = set_params(twin, layer)
    x = rng.uniform(-1, 1, shape)
    dy = rng.uniform(-1, 1, layer.y_shape)
    out = run_torch(twin, x, dy, params)
    assert tuple(out[0].shape) == layer.y_shape
    same(run_ladle(layer, x, dy), out)


def test_conv_transpose1d_3d_equal_torch(rng):
    for shape, mod in (((2, 3, 7), torch.nn.ConvTranspose1d),
                       ((1, 2, 3, 4, 3), torch.nn.ConvTranspose3d)):
        layer = ladle.ConvTranspose(shape, 4, 2, stride=2, padding=1)
        randomize(layer, rng)
        twin = mod(shape[1], 4, 2, stride=2, padding=1).double()
        params = set_params(twin, layer)
        x, dy = rng.uniform(-1, 1, shape), rng.uniform(-1, 1, layer.y_shape)
        same(run_ladle(layer, x, dy), run_torch(twin, x, dy, params))


@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize("shape,out", [((2, 3, 8, 6), (3, 4)), ((2, 2, 5, 7), (7, 3)),
                                        ((2, 3, 10), 4), ((1, 2, 4, 5, 3), (2, 3, 2))])
def test_adaptive_pool_equals_torch(rng, kind, shape, out):
    layer = ladle.AdaptivePool(shape, out, kind)
    nd = len(shape) - 2
    name = "Adaptive%sPool%dd" % ("Max" if kind == "max" else "Avg", nd)
    twin = getattr(torch.nn, name)(out)
    # distinct values: max pooling has no ties to break
    x = rng.permutation(np.prod(shape)).reshape(shape) / np.prod(shape)
    dy = rng.uniform(-1, 1, layer.y_shape)
    same(run_ladle(layer, x, dy), run_torch(twin, x, dy))


def test_layernorm_rmsnorm_equal_torch(rng):
    shape = (3, 4, 5)
    x, dy = rng.uniform(-1, 1, shape), rng.uniform(-1, 1, shape)
    layer = ladle.LayerNorm(shape, 2, eps=1e-5)
    randomize(layer, rng)
    twin = torch.nn.LayerNorm(shape[1:], eps=1e-5).double()
    params = set_params(twin, layer)
    same(run_ladle(layer, x, dy), run_torch(twin, x, dy, params))
    # RMS norm (torch 1.13 has no module): x / sqrt(mean(x^2) + eps) w
    rms = ladle.RMSNorm(shape, 1, eps=1e-6)
    randomize(rms, rng)
    w = torch.from_numpy(rms.param(0).copy()).requires_grad_(True)
    ref = lambda t: t * torch.rsqrt((t * t).mean(-1, keepdim=True) + 1e-6) * w
    same(run_ladle(rms, x, dy), run_torch(ref, x, dy, [w]))


def test_embedding_equals_torch(rng):
    ids = rng.integers(0, 7, (3, 4)).astype(np.int64)
    ids[0, :2] = 5  # a repeated id accumulates its gradients
    layer = ladle.Embedding(ids.shape, 7, 5, seed=3)
    twin = torch.nn.Embedding(7, 5).double()
    params = set_params(twin, layer)
    ctx = layer.ctx()
    y = layer.forward(ids, ctx=ctx)
    dy = rng.uniform(-1, 1, y.shape)
    assert layer.backward(ctx, dy, need_dx=False) is None
    layer.zero_grad()
    layer.backward_weight(ctx, dy)
    yt = twin(torch.from_numpy(ids))
    yt.backward(torch.from_numpy(dy))
    np.testing.assert_array_equal(y, yt.detach().numpy())
    np.testing.assert_allclose(layer.grad(0), params[0].grad.numpy(), **TOL)
    with pytest.raises(ladle.LadleError) as e:
        layer.forward(np.full(ids.shape, 7, np.int64))
    assert e.value.name == "LADLE_ERR_ARG"


@pytest.mark.parametrize("mode,opts", [("nearest", dict(scale=2)),
                                       ("linear", dict(out_size=(7, 5))),
                                       ("linear", dict(scale=3, align_corners=True))])
def test_interpolate_equals_torch(rng, mode, opts):
    shape = (2, 3, 4, 3)
    layer = ladle.Interpolate(shape, mode, **opts)
    kw = {"mode": "bilinear" if mode == "linear" else "nearest"}
    if "out_size" in opts:
        kw["size"] = opts["out_size"]
    else:
        kw["scale_factor"] = opts["scale"]
    if opts.get("align_corners"):
        kw["align_corners"] = True
    x, dy = rng.uniform(-1, 1, shape), rng.uniform(-1, 1, layer.y_shape)
    same(run_ladle(layer, x, dy), run_torch(lambda t: F.interpolate(t, **kw), x, dy))


def test_bad_arguments_raise_the_right_status():
    cases = [(lambda: ladle.GroupNorm((2, 6, 4), 4), "LADLE_ERR_ARG"),   # 4 does not divide 6
             (lambda: ladle.GroupNorm((2, 6, 4), 2, eps=0.0), "LADLE_ERR_ARG"),
             (lambda: ladle.ConvTranspose((2, 3, 5, 5), 4, 3, stride=2, output_padding=2),
              "LADLE_ERR_ARG"),                                            # not below stride
             (lambda: ladle.ConvTranspose((2, 3, 5, 5), 4, 3, groups=2), "LADLE_ERR_ARG"),
             (lambda: ladle.ConvTranspose((2, 3, 5, 5), 4, (3, 3, 3)), "LADLE_ERR_ARG"),
             (lambda: ladle.AdaptivePool((2, 3, 5, 5), (0, 2)), "LADLE_ERR_SHAPE"),
             (lambda: ladle.AdaptivePool((2, 3, 5, 5), 2, "min"), "LADLE_ERR_ARG"),
             (lambda: ladle.AdaptivePool((2, 3), 2), "LADLE_ERR_SHAPE"),
             (lambda: ladle.LayerNorm((2, 3), 3), "LADLE_ERR_ARG"),
             (lambda: ladle.Embedding((2, 3), 0, 4), "LADLE_ERR_ARG"),
             (lambda: ladle.Interpolate((2, 3, 4), "cubic"), "LADLE_ERR_ARG")]
    for make, name in cases:
        with pytest.raises(ladle.LadleError) as e:
            make()
        assert e.value.name == name, (e.value, name)


# ---- distributed layers against their sequential twins -------------------------------

def spatial_grid(comm, ndim, dims=(2,)):
    """A partition of ndim dimensions over every rank, split along dims
    (the first of them taking what the size does not spread over others)."""
    shape = [1] * ndim
    size = comm.size
    if len(dims) > 1 and size % 2 == 0:
        shape[dims[0]], shape[dims[1]] = size // 2, 2
    else:
        shape[dims[0]] = size
    return ladle.Partition(comm, shape)


def blocks(layout, *arrays):
    return [np.ascontiguousarray(a[layout.slices()]) for a in arrays]


def check_twins(comm, dist, twin, X, DY_shape, rng, lx=None, ly=None):
    """dist on this rank's blocks equals twin on the gathered tensors:
    forward, input gradient and (summed over the copies) weight gradients."""
    shards = []
    for i in range(twin.num_params):
        _, off, _ = dist.param_shard(i)
        shards.append(tuple(slice(o, o + n) for o, n in zip(off, dist.param(i).shape)))
        dist.param(i)[...] = twin.param(i)[shards[-1]]
    lx = lx or dist.x_layout
    ly = ly or dist.y_layout
    DY = rng.uniform(-1, 1, DY_shape)
    (x,), (dy,) = blocks(lx, X), blocks(ly, DY)
    y, dx, g = run_ladle(dist, x, dy)
    dist.sync_gradients()
    g = [dist.grad(i).copy() for i in range(dist.num_params)]
    Y, DX, G = run_ladle(twin, X, DY)
    np.testing.assert_allclose(gather_global(comm, ly, y), Y, **TOL)
    np.testing.assert_allclose(gather_global(comm, lx, dx), DX, **TOL)
    for a, b, sl in zip(g, G, shards):
        np.testing.assert_allclose(a, b[sl], **TOL)


@pytest.mark.parametrize("dims", [(2,), (0, 3), (1, 2)])
def test_dist_groupnorm_equals_twin(comm, rng, dims):
    shape = (4, 4, 6, 5)
    p_x = spatial_grid(comm, 4, dims)
    if dims[0] == 1 and p_x.shape[1] > 2:
        # 3 channel blocks of 4 channels cannot hold whole groups of 2
        with pytest.raises(ladle.LadleError) as e:
            ladle.DistGroupNorm(p_x, shape, 2)
        assert e.value.name == "LADLE_ERR_PARTITION"
        return
    dist = ladle.DistGroupNorm(p_x, shape, 2, checked=True)
    twin = ladle.GroupNorm(shape, 2)
    randomize(twin, rng)
    check_twins(comm, dist, twin, rng.uniform(-1, 1, shape), shape, rng,
                ladle.Layout(p_x, shape), ladle.Layout(p_x, shape))


@pytest.mark.parametrize("opts", [dict(stride=2, padding=1), dict(stride=1, padding=1),
                                  dict(stride=2, padding=0, output_padding=1)])
def test_dist_conv_transpose_equals_twin(comm, rng, opts):
    shape = (2, 3, 4 * comm.size, 3)
    p_x = spatial_grid(comm, 4)
    try:
        dist = ladle.DistConvTranspose(p_x, shape, 2, 3, seed=5, **opts)
    except ladle.LadleError as e:
        # an output padding of at least the stride is not distributed yet
        assert e.name == "LADLE_ERR_UNSUPPORTED" and opts.get("output_padding", 0) > 0
        return
    twin = ladle.ConvTranspose(shape, 2, 3, seed=5, **opts)
    randomize(twin, rng)
    assert dist.x_layout.global_shape == shape
    check_twins(comm, dist, twin, rng.uniform(-1, 1, shape), twin.y_shape, rng)


@pytest.mark.parametrize("kind", ["avg", "max"])
def test_dist_adaptive_pool_equals_twin(comm, rng, kind):
    shape, out = (2, 3, 9, 7), (4, 3)
    p_x = spatial_grid(comm, 4, (2, 3))
    dist = ladle.DistAdaptivePool(p_x, shape, out, kind, checked=True)
    twin = ladle.AdaptivePool(shape, out, kind)
    X = rng.permutation(np.prod(shape)).reshape(shape) / np.prod(shape)
    check_twins(comm, dist, twin, X, twin.y_shape, rng, ladle.Layout(p_x, shape),
                ladle.Layout(p_x, twin.y_shape))


def test_dist_interpolate_and_global_avg_pool_equal_twins(comm, rng):
    shape = (2, 2, 3 * comm.size, 4)
    p_x = spatial_grid(comm, 4)
    dist = ladle.DistInterpolate(p_x, shape, "linear", scale=2)
    twin = ladle.Interpolate(shape, "linear", scale=2)
    check_twins(comm, dist, twin, rng.uniform(-1, 1, shape), twin.y_shape, rng,
                ladle.Layout(p_x, shape), ladle.Layout(p_x, twin.y_shape))
    p_y = ladle.Partition(comm, [1, 1], ranks=[0])
    gap = ladle.DistGlobalAvgPool(p_x, shape, p_y)
    assert ladle.adjoint_test(gap) <= ladle.adjoint_tolerance(np.float64)
    X = rng.uniform(-1, 1, shape)
    y = gap.forward(blocks(ladle.Layout(p_x, shape), X)[0])
    if comm.rank == 0:
        np.testing.assert_allclose(y, X.mean(axis=(2, 3)), **TOL)


def test_dist_bad_arguments_fail_on_every_rank(comm):
    p_x = spatial_grid(comm, 4)
    for make, name in [(lambda: ladle.DistGroupNorm(p_x, (2, 6, 4 * comm.size, 3), 4),
                        "LADLE_ERR_ARG"),
                       (lambda: ladle.DistAdaptivePool(p_x, (2, 3, 8, 8, 1), 2),
                        "LADLE_ERR_PARTITION"),
                       (lambda: ladle.DistConvTranspose(p_x, (2, 3, 8, 8), 2, 3, groups=2),
                        "LADLE_ERR_ARG")]:
        with pytest.raises(ladle.LadleError) as e:
            make()
        assert set(comm.allgather(e.value.name)) == {name}, e.value


@pytest.mark.parametrize("causal", [True, False])
def test_attention_equals_torch(rng, causal):
    N, T, E, H = 2, 5, 6, 2
    layer = ladle.Attention((N, T, E), H, causal=causal, block=2, seed=1)
    names = layer.param_names()
    assert len(names) == 4, names
    randomize(layer, rng)
    w = {n: torch.from_numpy(layer.param(i).copy()).requires_grad_(True)
         for i, n in enumerate(names)}
    wq, bq, wo, bo = [w[n] for n in names]
    d = E // H

    def ref(x):
        qkv = x @ wq.reshape(3 * H * d, E).T + bq.reshape(-1)  # weight 3 x Hd x E
        q, k, v = (t.reshape(N, T, H, d).transpose(1, 2) for t in qkv.split(H * d, dim=-1))
        s = q @ k.transpose(-1, -2) / np.sqrt(d)
        if causal:
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        o = (s.softmax(-1) @ v).transpose(1, 2).reshape(N, T, H * d)
        return o @ wo.T + bo

    x, dy = rng.uniform(-1, 1, (N, T, E)), rng.uniform(-1, 1, (N, T, E))
    same(run_ladle(layer, x, dy), run_torch(ref, x, dy, [wq, bq, wo, bo]))
    saved, _, probs = layer.memory()
    assert saved > 0 and probs == N * H * T * T * 8
    with pytest.raises(ladle.LadleError) as e:
        ladle.Attention((N, T, E), 4)       # 4 heads do not divide 6
    assert e.value.name == "LADLE_ERR_ARG"


def test_descriptor_structs_match_the_c_sizes():
    """Each ctypes descriptor is as large as the C struct its _init sizes
    (a field missing or out of order would show here first)."""
    import ctypes
    from ladle import _capi, layers_extra
    lib = ladle.lib
    made = [layers_extra.groupnorm_desc(2, 4), layers_extra.conv_transpose_desc(2, 3, 4, 3),
            layers_extra.interp_desc(2)]
    for name, args in (("layernorm", (1,)), ("rmsnorm", (1,)), ("embedding", (5, 3)),
                       ("attention", (6, 2))):
        d = getattr(_capi, "ladle_%s_desc" % name)()
        getattr(lib, "ladle_%s_desc_init" % name)(ctypes.byref(d), *args)
        made.append(d)
    d = _capi.ladle_all_gather_desc()
    lib.ladle_all_gather_desc_init(ctypes.byref(d), 0, 1, _capi.i64_array([4]), 0)
    made.append(d)
    for d in made:
        assert d.size == ctypes.sizeof(d), type(d).__name__


def tp_grid(comm):
    """D x S x 1 over every rank: S = 2 where the size is even."""
    s = 2 if comm.size % 2 == 0 else comm.size
    return ladle.Partition(comm, [comm.size // s, s, 1])


@pytest.mark.parametrize("kind", ["attention", "column", "row"])
def test_dist_tensor_parallel_equals_twin(comm, rng, kind):
    p = tp_grid(comm)
    D, S = p.shape[0], p.shape[1]
    N, T, E, H = 2 * D, 3 * S, 4, 2 * S
    if kind == "attention":
        shape = (N, T, E)
        dist = ladle.DistTPAttention(p, shape, H, head_dim=2, seed=2, block=2)
        twin = ladle.Attention(shape, H, head_dim=2, seed=2, block=2)
    elif kind == "column":
        shape = (N, T, E)
        dist = ladle.DistTPLinear(p, shape, 2 * S + 1, seed=3)
        twin = ladle.Linear(shape, 2 * S + 1, seed=3)
    else:
        F = 2 * S + 1
        dist = ladle.DistTPLinear(p, (N, T, E), F, row=True, seed=4)
        twin = ladle.Linear((N, T, F), E, seed=4)
        shape = (N, T, F)
    randomize(twin, rng)
    check_twins(comm, dist, twin, rng.uniform(-1, 1, shape), twin.y_shape, rng)


def test_pos_embedding_adds_the_rows(rng):
    shape = (2, 3, 4)
    layer = ladle.PosEmbedding(shape, 6, seed=1)
    w = layer.param(0).copy()
    x, dy = rng.uniform(-1, 1, shape), rng.uniform(-1, 1, shape)
    layer.set_offset(2)
    y, dx, (g,) = run_ladle(layer, x, dy)
    np.testing.assert_allclose(y, x + w[2:5], **TOL)
    np.testing.assert_array_equal(dx, dy)
    ref = np.zeros_like(w)
    ref[2:5] = dy.sum(axis=0)
    np.testing.assert_allclose(g, ref, **TOL)
    with pytest.raises(ladle.LadleError) as e:
        layer.set_offset(4)                 # 4 + 3 > 6
    assert e.value.name == "LADLE_ERR_ARG"


def test_dist_vocab_embedding_equals_twin(comm, rng):
    V, E = 3 * comm.size + 1, 3
    p_w = ladle.Partition(comm, [comm.size])
    p_y = ladle.Partition(comm, [1], ranks=[comm.size - 1])
    ids = rng.integers(0, V, (2, 5)).astype(np.int64)
    dist = ladle.DistVocabEmbedding(p_w, p_y, ids.shape, V, E, seed=6)
    twin = ladle.Embedding(ids.shape, V, E, seed=6)
    shape, off, _ = dist.param_shard(0)
    rows = slice(off[0], off[0] + dist.param(0).shape[0])
    np.testing.assert_array_equal(dist.param(0), twin.param(0)[rows])   # same seed, same rows
    ctx, tctx = dist.ctx(), twin.ctx()
    y, Y = dist.forward(ids, ctx=ctx), twin.forward(ids, ctx=tctx)
    DY = rng.uniform(-1, 1, Y.shape)
    mine = comm.rank == comm.size - 1
    if mine:
        np.testing.assert_allclose(y, Y, **TOL)
    dist.zero_grad()
    twin.zero_grad()
    dist.backward_weight(ctx, DY if mine else np.zeros(dist.y_shape))
    twin.backward_weight(tctx, DY)
    np.testing.assert_allclose(dist.grad(0), twin.grad(0)[rows], **TOL)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_dist_vocab_loss_equals_twin(comm, rng, reduction):
    s = 2 if comm.size % 2 == 0 else comm.size
    p_x = ladle.Partition(comm, [comm.size // s, s])
    M, C = 3 * p_x.shape[0], 2 * s + 1
    X = rng.uniform(-2, 2, (M, C))
    labels = rng.integers(0, C, M).astype(np.int64)
    dist = ladle.DistVocabLoss(p_x, (M, C), reduction, label_smoothing=0.1)
    twin = ladle.LossLayer((M, C), "cross_entropy", reduction, label_smoothing=0.1)
    lx = ladle.Layout(p_x, (M, C))
    ctx, tctx = dist.ctx(), twin.ctx()
    value = dist.forward(np.ascontiguousarray(X[lx.slices()]), labels[lx.slices()[0]], ctx=ctx)
    assert abs(value - twin.forward(X, labels, ctx=tctx)) < 1e-12
    dx = dist.backward(ctx)
    np.testing.assert_allclose(gather_global(comm, lx, dx), twin.backward(tctx), **TOL)


def test_residual_add_concat(rng):
    x, dy = rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (3, 4))
    body = ladle.Linear(x.shape, 4, seed=2)
    W, b = body.param(0).copy(), body.param(1).copy()
    block = ladle.Residual(body)
    assert block.num_params == 2
    y, dx, (gW, gb) = run_ladle(block, x, dy)
    np.testing.assert_allclose(y, x + x @ W.T + b, **TOL)
    np.testing.assert_allclose(dx, dy + dy @ W, **TOL)
    np.testing.assert_allclose(gW, dy.T @ x, **TOL)
    np.testing.assert_allclose(gb, dy.sum(axis=0), **TOL)
    np.testing.assert_array_equal(ladle.add(x, dy), x + dy)
    parts = [rng.uniform(-1, 1, (2, c, 3)) for c in (1, 3, 2)]
    cat = ladle.concat(parts, dim=1)
    np.testing.assert_array_equal(cat, np.concatenate(parts, axis=1))
    back = ladle.concat_backward(cat, 1, [np.zeros_like(p) for p in parts])
    for a, p in zip(back, parts):
        np.testing.assert_array_equal(a, p)
    with pytest.raises(ladle.LadleError) as e:
        ladle.add(x, np.zeros((4, 3)))
    assert e.value.name == "LADLE_ERR_SHAPE"
    with pytest.raises(ladle.LadleError) as e:
        ladle.Residual(ladle.Linear(x.shape, 5))        # y's shape is not x's
    assert e.value.name == "LADLE_ERR_SHAPE"


@pytest.mark.parametrize("on", [False, True])
def test_dist_replicate_equals_the_whole_batch(comm, rng, on):
    N, fin, fout = 2 * comm.size + 1, 3, 2
    p = ladle.Partition(comm, [comm.size, 1])
    lx, ly = ladle.Layout(p, (N, fin)), ladle.Layout(p, (N, fout))
    # every rank draws its own weights: the copies start as rank 0's
    local = ladle.Linear(lx.local_shape, fout, seed=10 + comm.rank)
    dist = (ladle.DistReplicateOn(lx, ly, local) if on else
            ladle.DistReplicate(ladle.Partition(comm, [comm.size]), local))
    twin = ladle.Linear((N, fin), fout)
    for i in range(2):
        twin.param(i)[...] = comm.bcast(dist.param(i).copy(), root=0)
        np.testing.assert_array_equal(dist.param(i), twin.param(i))
    check_twins(comm, dist, twin, rng.uniform(-1, 1, (N, fin)), (N, fout), rng, lx, ly)


def test_dropout_set_step_replays_the_mask(rng):
    x = rng.uniform(1, 2, (4, 50))
    drop = ladle.Dropout(x.shape, 0.5, seed=3)
    drop.train()
    run = lambda: drop.forward(x, ctx=drop.ctx())   # a training forward (with a ctx)
    first, second = run(), run()
    assert not np.array_equal(first, second)        # the step advanced
    drop.set_step(0)
    np.testing.assert_array_equal(run(), first)
    np.testing.assert_array_equal(run(), second)
    kept = first != 0
    np.testing.assert_allclose(first[kept], 2 * x[kept], **TOL)
    with pytest.raises(ladle.LadleError) as e:               # not a dropout
        ladle.layers.DropoutLayer.set_step(ladle.Linear((2, 3), 2), 0)
    assert e.value.name == "LADLE_ERR_ARG"
