/*
 * The token embedding and the learned positional embedding.
 *
 * Token: y[i, :] = w[id_i, :] over the n ids of a call, the backend's
 * embed_* slots; the backward of the weight is the lookup's adjoint, a
 * scatter-add dw[id_i, :] += dy[i, :] (in order of i, so a repeated id adds
 * every one of its rows, deterministically). The ids are checked at every
 * forward (find_outside, one scan) before anything is read through them;
 * the backward uses the forward's ids, which the caller keeps unchanged.
 *
 * Positional: y[n] = x[n] + p[0 .. T-1] per sample, a copy and a bias add
 * over N rows of T E values, so every backend runs it; its adjoint in p is
 * the bias gradient, dp[0 .. T-1] += sum over n of dy[n].
 */
#include <stdio.h>
#include <string.h>

#include "layers/sequential/layer_impl.h"

typedef struct embedding {
    int64_t vocab, dim;
    int64_t ids_per_sample; /* ids of one sample: the product of ids_shape[1 ..] */
} embedding;

/* w = normal(0, 1) from (seed, stream 0), as nn.Embedding draws it: the
 * fill_init slot, keyed by each element's index, so every device and
 * layout gets the same values. */
static ladle_status init_normal(const ladle_op *op, ladle_tensor *w, uint64_t seed)
{
    ladle_init_desc d = {.ndim = w->ndim, .gaussian = 1, .scale = 1.0, .seed = seed};
    for (int k = 0; k < w->ndim; k++) {
        d.shape[k] = d.global[k] = w->shape[k];
        d.strides[k] = w->strides[k];
    }
    return op->be->fn->fill_init(op->be, w->dtype, &d, w->data);
}

/* The index of flat element i of a tensor of shape, as "[a, b, ...]". */
static const char *fmt_index(char *buf, size_t cap, int ndim, const int64_t *shape,
                             int64_t i)
{
    int64_t at[LADLE_MAX_NDIM];
    for (int d = ndim - 1; d >= 0; d--) {
        at[d] = i % shape[d];
        i /= shape[d];
    }
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < ndim && used < cap; d++) {
        int k = snprintf(buf + used, cap - used, "%s%lld%s", d ? ", " : "[",
                         (long long)at[d], d == ndim - 1 ? "]" : "");
        used += k > 0 ? (size_t)k : 0;
    }
    return buf;
}

static ladle_status emb_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    const embedding *v = op->impl;
    int64_t count = n * v->ids_per_sample, bad = -1, id = 0;
    char where[160];
    (void)ctx;
    if (count == 0)
        return LADLE_OK;
    LADLE_CALL(op->be->fn->find_outside(op->be, count, x->data, 0, v->vocab - 1, &bad));
    if (bad >= 0) {
        LADLE_CALL(ladle__tensor_get_i64(x, bad, &id));
        return ladle__raise(
            LADLE_ERR_ARG, "ladle_layer_forward",
            "token id %lld at x%s is outside 0 .. %lld (num_embeddings %lld)",
            (long long)id, fmt_index(where, sizeof where, x->ndim, x->shape, bad),
            (long long)(v->vocab - 1), (long long)v->vocab);
    }
    LADLE_CALL(op->be->fn->embed_forward(op->be, op->dtype, count, v->dim, x->data,
                                         op->params[0]->data, y->data));
fail:
    return st;
}

static ladle_status emb_backward_weight(ladle_op *op, ladle_ctx *ctx,
                                        const ladle_tensor *dy, int64_t n)
{
    const embedding *v = op->impl;
    int64_t count = n * v->ids_per_sample;
    if (count == 0)
        return LADLE_OK;
    return op->be->fn->embed_backward(op->be, op->dtype, count, v->dim, ctx->x->data,
                                      dy->data, op->grads[0]->data);
}

static const ladle_op_vtable embedding_vt = {
    .kind = LADLE_OP_EMBEDDING,
    .name = "embedding",
    .destroy = ladle__layer_free_impl,
    .layer_forward = emb_forward,
    .layer_backward = ladle__layer_ids_backward,
    .layer_backward_weight = emb_backward_weight,
};

void ladle_embedding_desc_init(ladle_embedding_desc *d, int64_t num_embeddings,
                               int64_t embedding_dim)
{
    if (!LADLE_DESC_START(d))
        return;
    d->num_embeddings = num_embeddings;
    d->embedding_dim = embedding_dim;
}

ladle_status ladle_embedding_create(const ladle_embedding_desc *d, int ndim,
                                    const int64_t ids_shape[], ladle_dtype dtype,
                                    ladle_device device, uint64_t seed, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    embedding *v = NULL;
    int64_t y_shape[LADLE_MAX_NDIM], numel;
    LADLE__CHECK_DESC(d);
    LADLE_NOT_NULL(ids_shape);
    LADLE_NOT_NULL(out);
    int64_t num_embeddings = d->num_embeddings, embedding_dim = d->embedding_dim;
    /* the vocabulary-parallel layer's flags; on one rank they change nothing */
    LADLE_CHECK((d->flags & ~(unsigned)LADLE_CHECKED) == 0, LADLE_ERR_ARG,
                "unknown flags 0x%x", d->flags);
    LADLE_CHECK(ndim >= 1 && ndim < LADLE_MAX_NDIM, LADLE_ERR_SHAPE,
                "the ids have %d dimensions: 1 .. %d (y adds one)", ndim,
                LADLE_MAX_NDIM - 1);
    LADLE_CALL(ladle__layer_check_args(__func__, dtype, ndim, ids_shape, 1));
    LADLE_CHECK(num_embeddings >= 1 && embedding_dim >= 1, LADLE_ERR_ARG,
                "num_embeddings %lld and embedding_dim %lld must be at least 1",
                (long long)num_embeddings, (long long)embedding_dim);
    memcpy(y_shape, ids_shape, sizeof(int64_t) * (size_t)ndim);
    y_shape[ndim] = embedding_dim;
    LADLE_CALL(ladle__check_shape(__func__, ndim + 1, y_shape, &numel));
    LADLE_CALL(ladle__check_shape(__func__, 2, (int64_t[]){num_embeddings, embedding_dim},
                                  &numel));
    v = ladle__calloc(1, sizeof *v);
    LADLE_CHECK(v != NULL, LADLE_ERR_ALLOC, "out of memory");
    v->vocab = num_embeddings;
    v->dim = embedding_dim;
    v->ids_per_sample = 1;
    for (int d = 1; d < ndim; d++)
        v->ids_per_sample *= ids_shape[d];
    LADLE_CALL(ladle__layer_new(&embedding_vt, dtype, device, ndim, ids_shape, ndim + 1,
                                y_shape, 1, &op, __func__));
    op->impl = v;
    v = NULL;
    op->x_ids = 1;
    LADLE_CHECK(op->be->fn->embed_forward != NULL && op->be->fn->embed_backward != NULL,
                LADLE_ERR_DEVICE, "the %s backend has no embedding kernels",
                op->be->fn->name);
    ladle_tensor *w = NULL;
    LADLE_CALL(ladle__layer_add_param(op, "weight", 2,
                                      (int64_t[]){num_embeddings, embedding_dim}, &w));
    LADLE_CALL(init_normal(op, w, seed));
    *out = op;
    return LADLE_OK;
fail:
    ladle__free(v);
    ladle_op_destroy(&op);
    return st;
}

/* ---- the positional embedding ---- */

typedef struct pos_embedding {
    int64_t per_sample;         /* T E */
    int64_t t, max_len, offset; /* x's positions are offset .. offset + T - 1 */
} pos_embedding;

/* The first weight row this layer adds: row offset. */
static void *rows_at(const ladle_op *op, const ladle_tensor *w)
{
    const pos_embedding *v = op->impl;
    return (char *)w->data +
           (size_t)(v->offset * (v->per_sample / v->t)) * ladle_dtype_size(op->dtype);
}

static ladle_status pos_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    const pos_embedding *v = op->impl;
    (void)ctx;
    if (n == 0)
        return LADLE_OK;
    if (x->data != y->data)
        LADLE_CALL(
            op->be->fn->copy(op->be, op->dtype, n * v->per_sample, x->data, y->data));
    /* p's rows offset .. offset + T-1 are T E consecutive values */
    LADLE_CALL(op->be->fn->bias_add(op->be, op->dtype, n, v->per_sample, 1,
                                    rows_at(op, op->params[0]), y->data));
fail:
    return st;
}

static ladle_status pos_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                 ladle_tensor *dx, int64_t n)
{
    const pos_embedding *v = op->impl;
    (void)ctx;
    if (dx == NULL || n == 0 || dx->data == dy->data)
        return LADLE_OK;
    return op->be->fn->copy(op->be, op->dtype, n * v->per_sample, dy->data, dx->data);
}

static ladle_status pos_backward_weight(ladle_op *op, ladle_ctx *ctx,
                                        const ladle_tensor *dy, int64_t n)
{
    const pos_embedding *v = op->impl;
    (void)ctx;
    if (n == 0)
        return LADLE_OK;
    return op->be->fn->bias_grad(op->be, op->dtype, n, v->per_sample, 1, dy->data,
                                 rows_at(op, op->grads[0]));
}

static const ladle_op_vtable pos_embedding_vt = {
    .kind = LADLE_OP_POS_EMBEDDING,
    .name = "pos-embedding",
    .destroy = ladle__layer_free_impl,
    .layer_forward = pos_forward,
    .layer_backward = pos_backward,
    .layer_backward_weight = pos_backward_weight,
};

ladle_status ladle_pos_embedding_create(int ndim, const int64_t x_shape[], int64_t max_len,
                                        ladle_dtype dtype, ladle_device device,
                                        uint64_t seed, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    pos_embedding *v = NULL;
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    LADLE_CHECK(ndim == 3, LADLE_ERR_SHAPE,
                "x has %d dimensions; the positional embedding takes N x T x E", ndim);
    LADLE_CALL(ladle__layer_check_args(__func__, dtype, ndim, x_shape, 3));
    LADLE_CHECK(max_len >= 1, LADLE_ERR_ARG, "max_len %lld must be at least 1",
                (long long)max_len);
    LADLE_CHECK(x_shape[1] <= max_len, LADLE_ERR_SHAPE,
                "x has %lld positions, more than max_len %lld", (long long)x_shape[1],
                (long long)max_len);
    int64_t numel;
    LADLE_CALL(ladle__check_shape(__func__, 2, (int64_t[]){max_len, x_shape[2]}, &numel));
    v = ladle__calloc(1, sizeof *v);
    LADLE_CHECK(v != NULL, LADLE_ERR_ALLOC, "out of memory");
    v->per_sample = x_shape[1] * x_shape[2];
    v->t = x_shape[1];
    v->max_len = max_len;
    LADLE_CALL(ladle__layer_new(&pos_embedding_vt, dtype, device, 3, x_shape, 3, x_shape, 1,
                                &op, __func__));
    op->impl = v;
    v = NULL;
    op->in_place = 1;
    ladle_tensor *p = NULL;
    LADLE_CALL(
        ladle__layer_add_param(op, "weight", 2, (int64_t[]){max_len, x_shape[2]}, &p));
    LADLE_CALL(init_normal(op, p, seed));
    *out = op;
    return LADLE_OK;
fail:
    ladle__free(v);
    ladle_op_destroy(&op);
    return st;
}

ladle_status ladle_pos_embedding_set_offset(ladle_op *op, int64_t offset)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(op);
    LADLE_CHECK(op->vt == &pos_embedding_vt, LADLE_ERR_ARG,
                "the %s op is not a positional embedding", op->vt->name);
    pos_embedding *v = op->impl;
    LADLE_CHECK(offset >= 0 && offset <= v->max_len - v->t, LADLE_ERR_ARG,
                "offset %lld: positions offset .. offset + %lld must lie in 0 .. %lld",
                (long long)offset, (long long)(v->t - 1), (long long)(v->max_len - 1));
    v->offset = offset;
fail:
    return st;
}
