/*
 * Multi-head self-attention: the two projections are the backend's GEMMs
 * (rows = the call's N T positions), the attention core between them the
 * backend's attn slots, which tile the T x T scores and never keep them.
 *
 * Each ctx saves lse (N H T doubles), qkv (N T 3 H d) and O (N T H d) of
 * its forward. The op's workspace, sized for the created N, holds the
 * attention backward's dO and dqkv (a forward without a ctx puts its qkv
 * and O there instead), N H T doubles for that forward's lse, and the
 * kernels' scratch. backward leaves dqkv in the workspace, labelled with
 * the ctx's forward in the workspace's record (op->ws_tags), and
 * backward_weight uses it when the record says nothing has written the
 * workspace since; otherwise (zero-bubble schedules call the two apart,
 * and a graph shares the workspace among its layers) it recomputes dqkv
 * from the saved state. Storing dqkv in the ctx instead would add 3 H d N T
 * elements to its 4 H d N T.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "layers/sequential/layer_impl.h"

typedef struct attention {
    ladle_attn_geom g; /* batch is set per call */
    int64_t embed, hd; /* E and H d */
    int qkv_bias, out_bias;
    /* parameter indices, -1 when absent */
    int i_wqkv, i_bqkv, i_wo, i_bo;
    size_t saved; /* bytes of a ctx's saved state, where the scratch starts in ws */
    const void *dqkv_dy; /* the dy whose dqkv the workspace may hold */
} attention;

static size_t esize(const ladle_op *op) { return ladle_dtype_size(op->dtype); }

/* The ctx's saved state: lse, then qkv, then O, for the created batch. */
static double *saved_lse(const ladle_ctx *ctx) { return ctx->buf; }

static void *saved_qkv(const ladle_op *op, const ladle_ctx *ctx)
{
    const attention *a = op->impl;
    int64_t n = op->x_shape[0], t = a->g.seq;
    return (char *)ctx->buf + sizeof(double) * (size_t)(n * a->g.heads * t);
}

static void *saved_o(const ladle_op *op, const ladle_ctx *ctx)
{
    const attention *a = op->impl;
    int64_t n = op->x_shape[0], t = a->g.seq;
    return (char *)saved_qkv(op, ctx) + esize(op) * (size_t)(n * t * 3 * a->hd);
}

/* The workspace: lse, dqkv, dO (the sizes of a ctx's lse, qkv and O), then
 * the kernels' scratch; found from op->ws on each call, since
 * ladle_op_set_workspace may move it. */
static double *ws_lse(const ladle_op *op) { return op->ws; }

static void *ws_dqkv(const ladle_op *op)
{
    const attention *a = op->impl;
    return (char *)op->ws +
           sizeof(double) * (size_t)(op->x_shape[0] * a->g.heads * a->g.seq);
}

static void *ws_dout(const ladle_op *op)
{
    const attention *a = op->impl;
    return (char *)ws_dqkv(op) +
           esize(op) * (size_t)(op->x_shape[0] * a->g.seq * 3 * a->hd);
}

static double *ws_kernel(const ladle_op *op)
{
    const attention *a = op->impl;
    return (double *)((char *)op->ws + a->saved);
}

static ladle_attn_geom geom(const attention *a, int64_t n)
{
    ladle_attn_geom g = a->g;
    g.batch = n;
    return g;
}

static ladle_status attn_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                 ladle_tensor *y, int64_t n)
{
    attention *a = op->impl;
    const ladle_backend *be = op->be;
    ladle_status st = LADLE_OK;
    int64_t m = n * a->g.seq;
    if (m == 0)
        return LADLE_OK;
    ladle__ws_claim(op); /* the kernel's scratch, or this call's qkv and O */
    ladle__ws_label(op, 0, 0);
    void *qkv = ctx ? saved_qkv(op, ctx) : ws_dqkv(op);
    void *o = ctx ? saved_o(op, ctx) : ws_dout(op);
    double *lse = ctx ? saved_lse(ctx) : ws_lse(op);
    ladle_attn_geom g = geom(a, n);
    LADLE_CALL(be->fn->gemm(be, op->dtype, 0, 1, m, 3 * a->hd, a->embed, 1.0, x->data,
                            a->embed, op->params[a->i_wqkv]->data, a->embed, 0.0, qkv,
                            3 * a->hd));
    if (a->i_bqkv >= 0)
        LADLE_CALL(be->fn->bias_add(be, op->dtype, m, 3 * a->hd, 1,
                                    op->params[a->i_bqkv]->data, qkv));
    LADLE_CALL(be->fn->attn_forward(be, op->dtype, &g, qkv, o, lse, ws_kernel(op)));
    LADLE_CALL(be->fn->gemm(be, op->dtype, 0, 1, m, a->embed, a->hd, 1.0, o, a->hd,
                            op->params[a->i_wo]->data, a->hd, 0.0, y->data, a->embed));
    if (a->i_bo >= 0)
        LADLE_CALL(be->fn->bias_add(be, op->dtype, m, a->embed, 1,
                                    op->params[a->i_bo]->data, y->data));
fail:
    return st;
}

/* dO = dy W_out, then the attention backward into the workspace's dqkv. */
static ladle_status core_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                  int64_t n)
{
    attention *a = op->impl;
    const ladle_backend *be = op->be;
    ladle_status st = LADLE_OK;
    ladle_attn_geom g = geom(a, n);
    LADLE_CALL(be->fn->gemm(be, op->dtype, 0, 0, n * a->g.seq, a->hd, a->embed, 1.0,
                            dy->data, a->embed, op->params[a->i_wo]->data, a->hd, 0.0,
                            ws_dout(op), a->hd));
    LADLE_CALL(be->fn->attn_backward(be, op->dtype, &g, saved_qkv(op, ctx),
                                     saved_o(op, ctx), saved_lse(ctx), ws_dout(op),
                                     ws_dqkv(op), ws_kernel(op)));
fail:
    return st;
}

static ladle_status attn_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                  ladle_tensor *dx, int64_t n)
{
    attention *a = op->impl;
    ladle_status st = LADLE_OK;
    int64_t m = n * a->g.seq;
    if (dx == NULL || m == 0)
        return LADLE_OK;
    ladle__ws_claim(op);
    ladle__ws_label(op, 0, 0);
    LADLE_CALL(core_backward(op, ctx, dy, n));
    /* dqkv of this ctx's forward: the weight pass may use it while no
     * other call has written the workspace */
    ladle__ws_label(op, 0, ctx->gen);
    a->dqkv_dy = dy->data;
    LADLE_CALL(op->be->fn->gemm(op->be, op->dtype, 0, 0, m, a->embed, 3 * a->hd, 1.0,
                                ws_dqkv(op), 3 * a->hd, op->params[a->i_wqkv]->data,
                                a->embed, 0.0, dx->data, a->embed));
fail:
    return st;
}

static ladle_status attn_backward_weight(ladle_op *op, ladle_ctx *ctx,
                                         const ladle_tensor *dy, int64_t n)
{
    attention *a = op->impl;
    const ladle_backend *be = op->be;
    ladle_status st = LADLE_OK;
    int64_t m = n * a->g.seq;
    if (m == 0)
        return LADLE_OK;
    LADLE_CALL(be->fn->gemm(be, op->dtype, 1, 0, a->embed, a->hd, m, 1.0, dy->data,
                            a->embed, saved_o(op, ctx), a->hd, 1.0,
                            op->grads[a->i_wo]->data, a->hd));
    if (a->i_bo >= 0)
        LADLE_CALL(be->fn->bias_grad(be, op->dtype, m, a->embed, 1, dy->data,
                                     op->grads[a->i_bo]->data));
    ladle__ws_claim(op);
    if (!ladle__ws_holds(op, 0, ctx->gen) || a->dqkv_dy != dy->data) {
        ladle__ws_label(op, 0, 0);
        LADLE_CALL(core_backward(op, ctx, dy, n));
        ladle__ws_label(op, 0, ctx->gen);
        a->dqkv_dy = dy->data;
    }
    LADLE_CALL(be->fn->gemm(be, op->dtype, 1, 0, 3 * a->hd, a->embed, m, 1.0, ws_dqkv(op),
                            3 * a->hd, ctx->x->data, a->embed, 1.0,
                            op->grads[a->i_wqkv]->data, a->embed));
    if (a->i_bqkv >= 0)
        LADLE_CALL(be->fn->bias_grad(be, op->dtype, m, 3 * a->hd, 1, ws_dqkv(op),
                                     op->grads[a->i_bqkv]->data));
fail:
    return st;
}

static const ladle_op_vtable attention_vt = {
    .kind = LADLE_OP_ATTENTION,
    .name = "attention",
    .destroy = ladle__layer_free_impl,
    .layer_forward = attn_forward,
    .layer_backward = attn_backward,
    .layer_backward_weight = attn_backward_weight,
};

void ladle_attention_desc_init(ladle_attention_desc *d, int64_t embed_dim,
                               int64_t num_heads)
{
    if (!LADLE_DESC_START(d))
        return;
    d->embed_dim = embed_dim;
    d->num_heads = num_heads;
    d->head_dim = num_heads >= 1 && embed_dim % num_heads == 0 ? embed_dim / num_heads : 0;
    d->causal = 1;
    d->qkv_bias = 1;
    d->out_bias = 1;
}

/* a b c, or -1 past LADLE_MAX_BYTES / 8 elements (so that byte counts of
 * either dtype, and sums of a few of them, stay far inside size_t) */
static int64_t product(int64_t a, int64_t b, int64_t c)
{
    int64_t r;
    if (!ladle__mul_ok(a, b, &r) || !ladle__mul_ok(r, c, &r) || r > LADLE_MAX_BYTES / 8)
        return -1;
    return r;
}

/* The sizes: saved and workspace bytes, with every product checked. */
static ladle_status plan(const ladle_attention_desc *d, const int64_t *xs, size_t es,
                         attention *a, size_t *saved, size_t *ws, const char *func)
{
    int64_t n = xs[0], t = xs[1], e = xs[2], h = d->num_heads,
            hd3 = product(3, h, d->head_dim);
    int64_t rows = product(n, t, 1), wq = hd3 < 0 ? -1 : product(hd3, e, 1);
    int64_t qkv = rows < 0 || hd3 < 0 ? -1 : product(rows, hd3, 1);
    int64_t lse = product(n, h, t);
    if (hd3 < 0 || wq < 0 || qkv < 0 || lse < 0 || rows > INT32_MAX || hd3 > INT32_MAX ||
        e > INT32_MAX)
        return ladle__raise(
            LADLE_ERR_SHAPE, func,
            "N %lld x T %lld positions, %lld heads of %lld and embed_dim %lld: "
            "the sizes overflow or exceed the BLAS's int sizes",
            (long long)n, (long long)t, (long long)h, (long long)d->head_dim, (long long)e);
    a->embed = e;
    a->hd = h * d->head_dim;
    a->g.heads = h;
    a->g.seq = t;
    a->g.head_dim = d->head_dim;
    a->g.block = d->block == 0 ? 64 : d->block;
    if (a->g.block > t)
        a->g.block = t;
    a->g.scale = d->scale == 0 ? 1.0 / sqrt((double)d->head_dim) : d->scale;
    a->g.causal = d->causal != 0;
    a->g.f32_tiles = d->f32_tiles != 0;
    int64_t kws = ladle__attn_ws_count(&a->g);
    if (product(kws, 1, 1) < 0)
        return ladle__raise(LADLE_ERR_SHAPE, func, "T %lld x head_dim %lld is too large",
                            (long long)t, (long long)d->head_dim);
    int64_t o = qkv / 3;
    /* each term below 2^57 bytes: the sums fit */
    *saved = sizeof(double) * (size_t)lse + es * (size_t)(qkv + o);
    *ws = *saved + sizeof(double) * (size_t)kws;
    return LADLE_OK;
}

static ladle_status check_desc(const ladle_attention_desc *d, int ndim, const int64_t *xs,
                               ladle_dtype dtype, const char *func)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(ladle__layer_check_args(func, dtype, ndim, xs, 3));
    if (d->flags & ~(unsigned)LADLE_CHECKED)
        return ladle__raise(LADLE_ERR_ARG, func, "unknown flags 0x%x", d->flags);
    if (d->embed_dim < 1 || d->num_heads < 1 || d->head_dim < 1)
        return ladle__raise(
            LADLE_ERR_ARG, func,
            "embed_dim %lld, num_heads %lld and head_dim %lld must be at least "
            "1 (head_dim defaults to embed_dim / num_heads only when that "
            "divides: set it)",
            (long long)d->embed_dim, (long long)d->num_heads, (long long)d->head_dim);
    if (!(d->scale >= 0 && isfinite(d->scale)))
        return ladle__raise(LADLE_ERR_ARG, func,
                            "scale %g must be finite and >= 0 (0: the "
                            "default 1/sqrt(head_dim))",
                            d->scale);
    if (d->block < 0 || d->block > 4096)
        return ladle__raise(LADLE_ERR_ARG, func, "block %lld is outside 0 .. 4096",
                            (long long)d->block);
    if (ndim != 3)
        return ladle__raise(LADLE_ERR_SHAPE, func,
                            "x must be N x T x E (3 dimensions), not %d", ndim);
    if (xs[0] < 1 || xs[1] < 1 || xs[2] != d->embed_dim)
        return ladle__raise(
            LADLE_ERR_SHAPE, func,
            "x is %lld x %lld x %lld: N and T must be at least 1 and E equal "
            "embed_dim %lld",
            (long long)xs[0], (long long)xs[1], (long long)xs[2], (long long)d->embed_dim);
fail:
    return st;
}

/* The parameters, drawn as nn.Linear's: uniform in +-1/sqrt(fan_in). */
static ladle_status add_params(ladle_op *op, attention *a, uint64_t seed)
{
    ladle_status st = LADLE_OK;
    ladle_tensor *t = NULL;
    a->i_bqkv = a->i_bo = -1;
    a->i_wqkv = op->nparams;
    /* 3 x Hd x E (q, k, v): head group g's rows are one box, (3, its Hd, E),
     * as tensor parallelism splits them (ladle_dist_tp_attention_create) */
    LADLE_CALL(ladle__layer_add_param(op, "qkv_weight", 3, (int64_t[]){3, a->hd, a->embed}, &t));
    LADLE_CALL(ladle__init_tensor(t, LADLE_INIT_DEFAULT, (double)a->embed, 0, seed, 0));
    if (a->qkv_bias) {
        a->i_bqkv = op->nparams;
        LADLE_CALL(ladle__layer_add_param(op, "qkv_bias", 2, (int64_t[]){3, a->hd}, &t));
        LADLE_CALL(ladle__init_tensor(t, LADLE_INIT_DEFAULT, (double)a->embed, 0, seed, 1));
    }
    a->i_wo = op->nparams;
    LADLE_CALL(
        ladle__layer_add_param(op, "out_weight", 2, (int64_t[]){a->embed, a->hd}, &t));
    LADLE_CALL(ladle__init_tensor(t, LADLE_INIT_DEFAULT, (double)a->hd, 0, seed, 2));
    if (a->out_bias) {
        a->i_bo = op->nparams;
        LADLE_CALL(ladle__layer_add_param(op, "out_bias", 1, &a->embed, &t));
        LADLE_CALL(ladle__init_tensor(t, LADLE_INIT_DEFAULT, (double)a->hd, 0, seed, 3));
    }
fail:
    return st;
}

ladle_status ladle_attention_create(const ladle_attention_desc *d, int ndim,
                                    const int64_t x_shape[], ladle_dtype dtype,
                                    ladle_device device, uint64_t seed, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    attention *a = NULL;
    size_t saved = 0, ws = 0;
    LADLE__CHECK_DESC(d);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    LADLE_CALL(check_desc(d, ndim, x_shape, dtype, __func__));
    a = ladle__calloc(1, sizeof *a);
    LADLE_CHECK(a != NULL, LADLE_ERR_ALLOC, "out of memory");
    LADLE_CALL(plan(d, x_shape, ladle_dtype_size(dtype), a, &saved, &ws, __func__));
    a->qkv_bias = d->qkv_bias != 0;
    a->out_bias = d->out_bias != 0;
    /* the layer first: it refuses a device ladle has no backend for */
    LADLE_CALL(ladle__layer_new(&attention_vt, dtype, device, 3, x_shape, 3, x_shape, 1,
                                &op, __func__));
    op->impl = a;
    a->saved = saved;
    LADLE_CHECK(op->be->fn->attn_forward != NULL && op->be->fn->attn_backward != NULL,
                LADLE_ERR_DEVICE, "the %s backend has no attention kernels",
                op->be->fn->name);
    LADLE_CALL(ladle__alloc_as(op->be, LADLE_MEM_WORKSPACE, ws, &op->ws));
    op->ws_bytes = ws;
    op->ws_scratch = 1; /* every call fills what it reads of ws */
    op->ws_tags = &op->ws_own_tags;
    op->ctx_bytes = saved;
    LADLE_CALL(add_params(op, a, seed));
    op->linear = 0;
    *out = op;
    return LADLE_OK;
fail:
    if (op == NULL)
        ladle__free(a);
    ladle_op_destroy(&op);
    return st;
}

ladle_status ladle_attention_memory(const ladle_op *op, size_t *saved, size_t *workspace,
                                    size_t *probs)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(op);
    LADLE_CHECK(op->vt == &attention_vt, LADLE_ERR_ARG,
                "the %s op is not an attention layer", op->vt->name);
    const attention *a = op->impl;
    if (saved)
        *saved = op->ctx_bytes;
    if (workspace)
        *workspace = op->ws_bytes;
    if (probs) {
        int64_t t = a->g.seq, p;
        int ok = ladle__mul_ok(op->x_shape[0], a->g.heads, &p) && ladle__mul_ok(p, t, &p) &&
                 ladle__mul_ok(p, t, &p) && ladle__mul_ok(p, (int64_t)esize(op), &p);
        *probs = ok && (uint64_t)p <= SIZE_MAX ? (size_t)p : SIZE_MAX;
    }
fail:
    return st;
}
