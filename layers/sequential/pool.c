/*
 * Max and average pooling over 1 to 3 spatial dimensions (lower ones are
 * 3-D with unit extents), and global average pooling.
 *
 * Max pooling skips taps outside the input (the frameworks' -inf padding)
 * and records, per output, the first maximum in window order; the backward
 * adds dy there. Average pooling divides by the window clipped to the
 * padded input (count_include_pad) or to the input itself; it is linear,
 * and its backward spreads dy / divisor over the same window.
 *
 * The layer checks the window and sizes the output; the kernels are the
 * backend's pool slots (src/core/backend.h), which keep their tables and
 * scratch in a workspace the layer allocates at creation.
 */
#include <stdio.h>
#include <string.h>

#include "layers/sequential/layer_impl.h"
#include "layers/sequential/pool_impl.h"

static const ladle__part pool_parts[] = {LADLE__PART_DEVICE(pool, ws), LADLE__PARTS_END};

static ladle_status pool_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                 ladle_tensor *y, int64_t n)
{
    pool *v = op->impl;
    return op->be->fn->pool_forward(op->be, op->dtype, &v->g, n * v->channels, x->data,
                                    y->data, ctx ? ctx->buf : NULL, v->ws);
}

static ladle_status pool_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                  ladle_tensor *dx, int64_t n)
{
    pool *v = op->impl;
    if (dx == NULL)
        return LADLE_OK;
    return op->be->fn->pool_backward(op->be, op->dtype, &v->g, n * v->channels, dy->data,
                                     dx->data, ctx ? ctx->buf : NULL, v->ws);
}

static void pool_destroy(ladle_op *op) { ladle__parts_free(op->impl, pool_parts, op->be); }

static const ladle_op_vtable pool_vt = {
    .kind = LADLE_OP_POOL,
    .name = "pool",
    .destroy = pool_destroy,
    .layer_forward = pool_forward,
    .layer_backward = pool_backward,
};

void ladle_pool_desc_init(ladle_pool_desc *d, ladle_pool_kind kind, int nd, int64_t kernel)
{
    if (!LADLE_DESC_START(d))
        return;
    d->kind = kind;
    d->nd = nd;
    for (int i = 0; i < 3; i++) {
        d->kernel[i] = kernel;
        d->dilation[i] = 1;
    }
    d->count_include_pad = 1;
}

static ladle_status plan(const ladle_pool_desc *d, const int64_t *xs, pool *v)
{
    const char *f = "ladle_pool_create";
    char what[40];
    if (d->kind != LADLE_POOL_MAX && d->kind != LADLE_POOL_AVG)
        return ladle__raise(LADLE_ERR_ARG, f, "unknown pooling kind %d", (int)d->kind);
    v->g.kind = d->kind;
    v->g.count_include_pad = d->count_include_pad;
    v->channels = xs[1];
    v->planes = xs[0] * xs[1];
    v->pin = 1;
    for (int a = 0; a < 3; a++) {
        int s = a - (3 - d->nd);
        v->g.in[a] = s < 0 ? 1 : xs[2 + s];
        v->g.k[a] = s < 0 ? 1 : d->kernel[s];
        v->g.s[a] = s < 0 ? 1 : d->stride[s] ? d->stride[s] : d->kernel[s];
        v->g.p[a] = s < 0 ? 0 : d->padding[s];
        v->g.d[a] = s < 0 ? 1 : d->dilation[s];
        snprintf(what, sizeof what, "spatial dimension %d", s < 0 ? 0 : s);
        ladle_status st = ladle__window_length(f, what, v->g.in[a], v->g.k[a], v->g.s[a],
                                               v->g.p[a], v->g.d[a], d->ceil_mode,
                                               &v->g.out[a]);
        if (st != LADLE_OK)
            return st;
        if (d->kind == LADLE_POOL_AVG && v->g.d[a] != 1)
            return ladle__raise(LADLE_ERR_ARG, f, "average pooling has no dilation");
        if (2 * v->g.p[a] > v->g.k[a])
            return ladle__raise(LADLE_ERR_ARG, f, "padding %lld is more than half the kernel "
                                "%lld", (long long)v->g.p[a], (long long)v->g.k[a]);
        if (v->g.out[a] < 1)
            return ladle__raise(LADLE_ERR_SHAPE, f, "the window (%lld) is larger than the "
                                "padded input (%lld)",
                                (long long)(v->g.d[a] * (v->g.k[a] - 1) + 1),
                                (long long)(v->g.in[a] + 2 * v->g.p[a]));
        /* with 2p <= k an output extent is at most the input's plus one:
         * the products stay as small as x's */
        v->pin *= v->g.in[a];
    }
    if (v->pin > INT32_MAX)
        return ladle__raise(LADLE_ERR_SHAPE, f, "planes above 2^31 elements");
    return LADLE_OK;
}

/* The op around a planned v (taken, freed on failure), with the backend's
 * workspace set up. */
static ladle_status finish(pool *v, ladle_dtype dtype, ladle_device device, int ndim,
                           const int64_t *xs, int y_ndim, const int64_t *ys, ladle_op **out,
                           const char *func)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    size_t ws_bytes = 0;
    LADLE_CALL(ladle__layer_new(&pool_vt, dtype, device, ndim, xs, y_ndim, ys, 1, &op, func));
    op->impl = v;
    op->linear = v->g.kind == LADLE_POOL_AVG;
    const ladle_backend *be = op->be;
    LADLE_CALL(be->fn->pool_plan(be, dtype, &v->g, &ws_bytes, &v->saved_bytes));
    LADLE_CALL(ladle__op_block(op, LADLE_MEM_WORKSPACE, ws_bytes, &v->ws));
    LADLE_CALL(be->fn->pool_setup(be, dtype, &v->g, v->ws));
    op->ctx_bytes = v->saved_bytes * (size_t)v->planes; /* the max winners */
    *out = op;
    return LADLE_OK;
fail:
    if (op != NULL)
        ladle_op_destroy(&op); /* v with it */
    else
        ladle__free(v);
    return st;
}

ladle_status ladle_pool_create(const ladle_pool_desc *d, const int64_t x_shape[], ladle_dtype dtype,
                               ladle_device device, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    pool *v = NULL;
    int64_t ys[5];
    LADLE__CHECK_DESC(d);
    LADLE_NOT_NULL(out);
    LADLE_CALL(ladle__window_layer_check(d->nd, d->flags, dtype, x_shape, __func__));
    v = ladle__calloc(1, sizeof *v);
    LADLE_CHECK(v != NULL, LADLE_ERR_ALLOC, "out of memory");
    LADLE_CALL(plan(d, x_shape, v));
    ys[0] = x_shape[0];
    ys[1] = x_shape[1];
    for (int i = 0; i < d->nd; i++)
        ys[2 + i] = v->g.out[3 - d->nd + i];
    int64_t numel;
    LADLE_CALL(ladle__check_shape(__func__, 2 + d->nd, ys, &numel));
    st = finish(v, dtype, device, 2 + d->nd, x_shape, 2 + d->nd, ys, out, __func__);
    v = NULL;
fail:
    ladle__free(v); /* no workspace yet */
    return st;
}

ladle_status ladle_global_avg_pool_create(int ndim, const int64_t x_shape[], ladle_dtype dtype,
                                          ladle_device device, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    pool *v = NULL;
    LADLE_NOT_NULL(out);
    LADLE_CALL(ladle__layer_check_args(__func__, dtype, ndim, x_shape, 3));
    LADLE_CHECK(ndim <= 5, LADLE_ERR_SHAPE, "1 to 3 spatial dimensions, not %d", ndim - 2);
    v = ladle__calloc(1, sizeof *v);
    LADLE_CHECK(v != NULL, LADLE_ERR_ALLOC, "out of memory");
    /* one window covering the whole plane */
    v->g.kind = LADLE_POOL_AVG;
    v->g.count_include_pad = 1;
    v->channels = x_shape[1];
    v->planes = x_shape[0] * x_shape[1];
    v->g.global = 1;
    v->pin = 1;
    for (int a = 0; a < 3; a++) {
        int s = a - (3 - (ndim - 2));
        v->g.in[a] = v->g.k[a] = v->g.s[a] = s < 0 ? 1 : x_shape[2 + s];
        v->g.d[a] = 1;
        v->g.out[a] = 1;
        v->pin *= v->g.in[a];
    }
    LADLE_CHECK(v->pin >= 1, LADLE_ERR_SHAPE, "empty spatial planes");
    st = finish(v, dtype, device, ndim, x_shape, 2, x_shape, out, __func__);
    v = NULL;
fail:
    ladle__free(v); /* no workspace yet */
    return st;
}
