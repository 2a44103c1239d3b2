/*
 * Linear: y = x W^T + b over any leading dimensions, three GEMMs:
 *   forward          y[M,N]   = x[M,K] W[N,K]^T (+ b)
 *   backward         dx[M,K]  = dy[M,N] W[N,K]
 *   backward_weight  dW[N,K] += dy[M,N]^T x[M,K];  db += column sums of dy
 * where M is the number of rows (the leading dimensions of this call).
 */
#include "layers/sequential/layer_impl.h"
#include <string.h>

typedef struct linear {
    int64_t in, out;
    int64_t rows_per_sample; /* product of the dimensions between batch and features */
} linear;

static int64_t rows(const ladle_op *op, int64_t n)
{
    const linear *l = op->impl;
    return op->batched ? n * l->rows_per_sample : l->rows_per_sample;
}

static ladle_status linear_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                   ladle_tensor *y, int64_t n)
{
    const linear *l = op->impl;
    int64_t m = rows(op, n);
    (void)ctx;
    if (m == 0)
        return LADLE_OK;
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
    LADLE_CALL(op->be->fn->gemm(op->be, op->dtype, 1, 0, l->out, l->in, m, 1.0, dy->data, l->out,
                                ctx->x->data, l->in, 1.0, op->grads[0]->data, l->in));
    if (op->nparams > 1)
        LADLE_CALL(op->be->fn->bias_grad(op->be, op->dtype, m, l->out, 1, dy->data,
                                         op->grads[1]->data));
fail:
    return st;
}

static const ladle_op_vtable linear_vt = {
    .kind = LADLE_OP_LINEAR,
    .name = "linear",
    .destroy = ladle__layer_free_impl,
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
    LADLE_CALL(ladle__layer_check_args(__func__, dtype, ndim, x_shape, 1));
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
    LADLE_CALL(ladle_layer_init(op, LADLE_INIT_DEFAULT, seed));
    *out = op;
    return LADLE_OK;
fail:
    ladle__free(l);
    ladle_op_destroy(&op);
    return st;
}
