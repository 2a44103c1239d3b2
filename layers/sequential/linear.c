/*
 * Linear: y = x W^T + b over any leading dimensions, three GEMMs:
 *   forward          y[M,N]   = x[M,K] W[N,K]^T (+ b)
 *   backward         dx[M,K]  = dy[M,N] W[N,K]
 *   backward_weight  dW[N,K] += dy[M,N]^T x[M,K];  db += column sums of dy
 * where M is the number of rows (the leading dimensions of this call).
 *
 * In bf16 (x, y, dx, W and b bf16; dW and db f32) the GEMMs are the
 * backend's gemm_half, f32 accumulation: the forward first writes b into
 * every row of y and adds the product to it (beta 1), so x W^T + b is
 * rounded once; db is dy^T times a column of ones, summed in f32.
 */
#include "layers/sequential/layer_impl.h"
#include <string.h>

typedef struct linear {
    int64_t in, out;
    int64_t rows_per_sample; /* product of the dimensions between batch and features */
    /* bf16 only: gemm_half's workspace (the largest of the three GEMMs) and
     * a column of bf16 ones, as many as the rows of the largest batch */
    void *ws, *ones;
} linear;

static ladle_status gemm16(const ladle_op *op, ladle_dtype ct, int ta, int tb, int64_t m,
                           int64_t n, int64_t k, const void *a, int64_t lda, const void *b,
                           int64_t ldb, double beta, void *c, int64_t ldc)
{
    const linear *l = op->impl;
    return op->be->fn->gemm_half(op->be, LADLE_BF16, ct, ta, tb, m, n, k, 1.0, a, lda, b, ldb,
                                 beta, c, ldc, l->ws);
}

static ladle_status forward16(const ladle_op *op, int64_t m, const ladle_tensor *x,
                              ladle_tensor *y)
{
    const linear *l = op->impl;
    double beta = 0.0;
    if (op->nparams > 1) { /* b into every row: a box whose rows stride 0 through b */
        int64_t ext[2] = {m, l->out}, sstr[2] = {0, 1}, dstr[2] = {l->out, 1};
        ladle_status st = op->be->fn->copy_box(op->be, LADLE_BF16, LADLE_BOX_COPY, 2, ext,
                                               op->params[1]->data, sstr, y->data, dstr);
        if (st != LADLE_OK)
            return st;
        beta = 1.0;
    }
    return gemm16(op, LADLE_BF16, 0, 1, m, l->out, l->in, x->data, l->in, op->params[0]->data,
                  l->in, beta, y->data, l->out);
}

static int64_t rows(const ladle_op *op, int64_t n)
{
    const linear *l = op->impl;
    return op->batched ? n * l->rows_per_sample : l->rows_per_sample;
}

static int64_t l_rows(const ladle_op *op) { return ((const linear *)op->impl)->rows_per_sample; }

static ladle_status linear_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                   ladle_tensor *y, int64_t n)
{
    const linear *l = op->impl;
    int64_t m = rows(op, n);
    (void)ctx;
    if (m == 0)
        return LADLE_OK;
    if (op->dtype == LADLE_BF16)
        return forward16(op, m, x, y);
    ladle_status st = op->be->fn->gemm(op->be, op->dtype, 0, 1, m, l->out, l->in, 1.0, x->data,
                                       l->in, op->params[0]->data, l->in, 0.0, y->data, l->out);
    if (st == LADLE_OK && op->nparams > 1)
        st = op->be->fn->bias_add(op->be, op->dtype, m, l->out, 1, op->params[1]->data,
                                  y->data);
    return st;
}

static ladle_status linear_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                    ladle_tensor *dx, int64_t n)
{
    const linear *l = op->impl;
    int64_t m = rows(op, n);
    (void)ctx;
    if (dx == NULL || m == 0)
        return LADLE_OK;
    if (op->dtype == LADLE_BF16)
        return gemm16(op, LADLE_BF16, 0, 0, m, l->in, l->out, dy->data, l->out,
                      op->params[0]->data, l->in, 0.0, dx->data, l->in);
    return op->be->fn->gemm(op->be, op->dtype, 0, 0, m, l->in, l->out, 1.0, dy->data, l->out,
                            op->params[0]->data, l->in, 0.0, dx->data, l->in);
}

static ladle_status linear_backward_weight(ladle_op *op, ladle_ctx *ctx,
                                           const ladle_tensor *dy, int64_t n)
{
    const linear *l = op->impl;
    int64_t m = rows(op, n);
    if (m == 0)
        return LADLE_OK;
    ladle_status st = LADLE_OK;
    if (op->dtype == LADLE_BF16) {
        LADLE_CALL(gemm16(op, LADLE_F32, 1, 0, l->out, l->in, m, dy->data, l->out,
                          ctx->x->data, l->in, 1.0, op->grads[0]->data, l->in));
        if (op->nparams > 1)
            LADLE_CALL(gemm16(op, LADLE_F32, 1, 0, l->out, 1, m, dy->data, l->out, l->ones, 1,
                              1.0, op->grads[1]->data, 1));
        return LADLE_OK;
    }
    LADLE_CALL(op->be->fn->gemm(op->be, op->dtype, 1, 0, l->out, l->in, m, 1.0, dy->data, l->out,
                                ctx->x->data, l->in, 1.0, op->grads[0]->data, l->in));
    if (op->nparams > 1)
        LADLE_CALL(op->be->fn->bias_grad(op->be, op->dtype, m, l->out, 1, dy->data,
                                         op->grads[1]->data));
fail:
    return st;
}

static void linear_destroy(ladle_op *op)
{
    linear *l = op->impl;
    if (l && l->ws)
        op->be->fn->free(op->be, l->ws);
    if (l && l->ones)
        op->be->fn->free(op->be, l->ones);
    ladle__layer_free_impl(op);
}

/* bf16: the workspace of the largest of the three products, and the ones */
static ladle_status plan16(ladle_op *op, int64_t m)
{
    linear *l = op->impl;
    ladle_status st = LADLE_OK;
    const ladle_backend *be = op->be;
    size_t most = 0, bytes = 0;
    const int64_t shapes[4][5] = {{0, 1, m, l->out, l->in}, /* ta, tb, m, n, k */
                                  {0, 0, m, l->in, l->out},
                                  {1, 0, l->out, l->in, m},
                                  {1, 0, l->out, 1, m}};
    for (int i = 0; i < 4; i++) {
        ladle_dtype ct = i < 2 ? LADLE_BF16 : LADLE_F32;
        LADLE_CALL(be->fn->gemm_half_ws(be, LADLE_BF16, ct, (int)shapes[i][0],
                                        (int)shapes[i][1], shapes[i][2], shapes[i][3],
                                        shapes[i][4], &bytes));
        most = bytes > most ? bytes : most;
    }
    if (most > 0)
        LADLE_CALL(be->fn->alloc(be, most, &l->ws));
    if (op->nparams > 1 && m > 0) {
        LADLE_CALL(be->fn->alloc(be, (size_t)m * 2, &l->ones));
        LADLE_CALL(be->fn->fill(be, LADLE_BF16, m, 1.0, l->ones));
    }
fail:
    return st;
}

static const ladle_op_vtable linear_vt = {
    .kind = LADLE_OP_LINEAR,
    .name = "linear",
    .destroy = linear_destroy,
    .layer_forward = linear_forward,
    .layer_backward = linear_backward,
    .layer_backward_weight = linear_backward_weight,
};

void ladle_linear_desc_init(ladle_linear_desc *d, int64_t in_features, int64_t out_features)
{
    if (!LADLE_DESC_START(d))
        return;
    d->in_features = in_features;
    d->out_features = out_features;
    d->bias = 1;
}

ladle_status ladle_linear_create(const ladle_linear_desc *d, int ndim,
                                 const int64_t x_shape[], ladle_dtype dtype,
                                 ladle_device device, uint64_t seed, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    linear *l = NULL;
    int64_t y_shape[LADLE_MAX_NDIM];
    LADLE__CHECK_DESC(d);
    LADLE_NOT_NULL(out);
    LADLE_CHECK((d->flags & ~(unsigned)(LADLE_CHECKED | LADLE_TP_ROW)) == 0, LADLE_ERR_ARG,
                "unknown flags 0x%x", d->flags);
    int64_t out_features = d->out_features;
    int bias = d->bias;
    LADLE_CALL(ladle__layer_check_bf16(__func__, dtype, device, ndim, x_shape, 1));
    LADLE_CHECK(out_features >= 1 && d->in_features >= 1, LADLE_ERR_SHAPE,
                "in_features %lld and out_features %lld must be at least 1",
                (long long)d->in_features, (long long)out_features);
    LADLE_CHECK(x_shape[ndim - 1] == d->in_features, LADLE_ERR_SHAPE,
                "x's last extent %lld is not in_features %lld",
                (long long)x_shape[ndim - 1], (long long)d->in_features);
    LADLE_CHECK(out_features <= INT32_MAX && x_shape[ndim - 1] <= INT32_MAX, LADLE_ERR_SHAPE,
                "feature counts above 2^31 are not supported");
    for (int d = 0; d < ndim; d++)
        y_shape[d] = x_shape[d];
    y_shape[ndim - 1] = out_features;
    int64_t numel;
    LADLE_CALL(ladle__check_shape(__func__, ndim, y_shape, &numel)); /* y may be the larger */
    l = ladle__calloc(1, sizeof *l);
    LADLE_CHECK(l != NULL, LADLE_ERR_ALLOC, "out of memory");
    l->in = x_shape[ndim - 1];
    l->out = out_features;
    l->rows_per_sample = 1;
    for (int d = ndim > 1 ? 1 : 0; d < ndim - 1; d++)
        l->rows_per_sample *= x_shape[d];
    LADLE_CALL(ladle__layer_new(&linear_vt, dtype, device, ndim, x_shape, ndim, y_shape, ndim > 1,
                                &op, __func__));
    op->impl = l;
    l = NULL;
    op->weighted = 1;
    op->linear = !bias;
    op->fan_in = (double)x_shape[ndim - 1];
    op->fan_out = (double)out_features;
    LADLE_CALL(ladle__layer_add_param(op, "weight", 2, (int64_t[]){out_features, x_shape[ndim - 1]},
                                      NULL));
    if (bias)
        LADLE_CALL(ladle__layer_add_param(op, "bias", 1, &out_features, NULL));
    if (dtype == LADLE_BF16)
        LADLE_CALL(plan16(op, ndim > 1 ? x_shape[0] * l_rows(op) : l_rows(op)));
    LADLE_CALL(ladle_layer_init(op, LADLE_INIT_DEFAULT, seed));
    *out = op;
    return LADLE_OK;
fail:
    ladle__free(l);
    ladle_op_destroy(&op);
    return st;
}
