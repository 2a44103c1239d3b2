/*
 * Layer norm and RMS norm over the last k dimensions: each leading index is
 * a row of len values normalised on its own. The kernels are the backend's
 * norm_* slots; the layer plans the rows and keeps, in each ctx (device
 * memory allocated with it), the per-row mean and 1/std of its forward for
 * the backward:
 *   layer norm  dx = invstd (g - <g> - xhat <g xhat>),  g = dy w
 *   RMS norm    dx = invstd (g - xhat <g xhat>)
 *   dw += sum over rows dy xhat,  db += sum over rows dy
 * (<.> the mean over a row). The statistics are two passes summed in
 * double (src/backends/cpu/norm.c says why not batch norm's blocks).
 */
#include <math.h>
#include <string.h>

#include "layers/sequential/layer_impl.h"

typedef struct norm {
    int rms;
    double eps;
    int64_t len;             /* values per row: the product of the last k extents */
    int64_t rows_per_sample; /* rows of one sample (all rows when not batched) */
    /* device scratch, 2 max(len, rows) doubles: the sums of norm_weight_grad,
     * and the statistics of a forward without a ctx */
    double *ws;
} norm;

static int64_t rows(const ladle_op *op, int64_t n)
{
    const norm *v = op->impl;
    return op->batched ? n * v->rows_per_sample : v->rows_per_sample;
}

/* The ctx's saved state: mean[rows], invstd[rows] for the largest batch. */
static double *saved_mean(const ladle_op *op, const ladle_ctx *ctx) { return ctx->buf; }

static double *saved_invstd(const ladle_op *op, const ladle_ctx *ctx)
{
    return (double *)ctx->buf + rows(op, op->batched ? op->x_shape[0] : 0);
}

static const void *param_data(const ladle_op *op, int i)
{
    return i < op->nparams ? op->params[i]->data : NULL;
}

static ladle_status norm_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                 ladle_tensor *y, int64_t n)
{
    norm *v = op->impl;
    int64_t m = rows(op, n);
    if (m == 0)
        return LADLE_OK;
    /* without a ctx the statistics go to the op's scratch */
    double *mean = ctx ? saved_mean(op, ctx) : v->ws;
    double *invstd = ctx ? saved_invstd(op, ctx) : v->ws + m;
    return op->be->fn->norm_forward(op->be, op->dtype, v->rms, m, v->len, v->eps, x->data,
                                    param_data(op, 0), param_data(op, 1), y->data, mean,
                                    invstd);
}

static ladle_status norm_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                  ladle_tensor *dx, int64_t n)
{
    const norm *v = op->impl;
    int64_t m = rows(op, n);
    if (dx == NULL || m == 0)
        return LADLE_OK;
    return op->be->fn->norm_backward(op->be, op->dtype, v->rms, m, v->len, ctx->x->data,
                                     param_data(op, 0), dy->data, saved_mean(op, ctx),
                                     saved_invstd(op, ctx), dx->data);
}

static ladle_status norm_backward_weight(ladle_op *op, ladle_ctx *ctx,
                                         const ladle_tensor *dy, int64_t n)
{
    norm *v = op->impl;
    int64_t m = rows(op, n);
    if (m == 0)
        return LADLE_OK;
    return op->be->fn->norm_weight_grad(op->be, op->dtype, v->rms, m, v->len, ctx->x->data,
                                        dy->data, saved_mean(op, ctx),
                                        saved_invstd(op, ctx), op->grads[0]->data,
                                        op->nparams > 1 ? op->grads[1]->data : NULL, v->ws);
}

static const ladle__part norm_parts[] = {LADLE__PART_DEVICE(norm, ws), LADLE__PARTS_END};

static void norm_destroy(ladle_op *op) { ladle__parts_free(op->impl, norm_parts, op->be); }

static const ladle_op_vtable layernorm_vt = {
    .kind = LADLE_OP_LAYERNORM,
    .name = "layernorm",
    .destroy = norm_destroy,
    .layer_forward = norm_forward,
    .layer_backward = norm_backward,
    .layer_backward_weight = norm_backward_weight,
};

static const ladle_op_vtable rmsnorm_vt = {
    .kind = LADLE_OP_RMSNORM,
    .name = "rmsnorm",
    .destroy = norm_destroy,
    .layer_forward = norm_forward,
    .layer_backward = norm_backward,
    .layer_backward_weight = norm_backward_weight,
};

void ladle_layernorm_desc_init(ladle_layernorm_desc *d, int normalized_ndim)
{
    if (!LADLE_DESC_START(d))
        return;
    d->normalized_ndim = normalized_ndim;
    d->eps = 1e-5;
    d->elementwise_affine = 1;
    d->bias = 1;
}

void ladle_rmsnorm_desc_init(ladle_rmsnorm_desc *d, int normalized_ndim)
{
    if (!LADLE_DESC_START(d))
        return;
    d->normalized_ndim = normalized_ndim;
    d->eps = 1e-6;
    d->elementwise_affine = 1;
}

/* The checks of both creates, after their descriptor's size is checked:
 * the other pointers first, then the values. Local. */
static ladle_status check(int k, double eps, int ndim, const int64_t *x_shape,
                          ladle_dtype dtype, ladle_op **out, const char *func)
{
    if (x_shape == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "%s is NULL", "x_shape");
    if (out == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "%s is NULL", "out");
    ladle_status st = ladle__layer_check_args(func, dtype, ndim, x_shape, 1);
    if (st != LADLE_OK)
        return st;
    if (!(k >= 1 && k <= ndim))
        return ladle__raise(LADLE_ERR_ARG, func,
                            "normalized_ndim %d is outside 1 .. %d (the dimensions of x)",
                            k, ndim);
    if (!(eps > 0 && isfinite(eps)))
        return ladle__raise(LADLE_ERR_ARG, func, "eps %g must be finite and > 0", eps);
    return LADLE_OK;
}

/* The rows of x: a row's length (the last k extents, not empty) and the
 * rows per sample, in a new *out. Local. */
static ladle_status plan(int rms, int k, double eps, int ndim, const int64_t *x_shape,
                         norm **out, const char *func)
{
    norm *v = ladle__calloc(1, sizeof *v);
    if (v == NULL)
        return ladle__raise(LADLE_ERR_ALLOC, func, "out of memory");
    v->rms = rms;
    v->eps = eps;
    v->len = v->rows_per_sample = 1;
    for (int d = ndim - k; d < ndim; d++)
        v->len *= x_shape[d];
    if (v->len == 0) {
        ladle__free(v);
        return ladle__raise(
            LADLE_ERR_SHAPE, func,
            "the normalized shape (the last %d extents of x) has no elements", k);
    }
    for (int d = k < ndim ? 1 : 0; d < ndim - k; d++)
        v->rows_per_sample *= x_shape[d];
    *out = v;
    return LADLE_OK;
}

/* What both creates share: the checks, the plan, then the layer, its
 * workspace and its parameters. */
static ladle_status create(const ladle_op_vtable *vt, int rms, int k, double eps,
                           int affine, int bias, int ndim, const int64_t *x_shape,
                           ladle_dtype dtype, ladle_device device, ladle_op **out,
                           const char *func)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    norm *v = NULL;
    LADLE_CALL(check(k, eps, ndim, x_shape, dtype, out, func));
    LADLE_CALL(plan(rms, k, eps, ndim, x_shape, &v, func));
    int batched = k < ndim; /* k = ndim: one row, no batch to shrink */
    /* the layer first: it refuses a device ladle has no backend for */
    st = ladle__layer_new(vt, dtype, device, ndim, x_shape, ndim, x_shape, batched, &op,
                          func);
    if (st != LADLE_OK) {
        ladle__free(v);
        return st;
    }
    op->impl = v;
    if (op->be->fn->norm_forward == NULL || op->be->fn->norm_backward == NULL ||
        op->be->fn->norm_weight_grad == NULL) {
        st = ladle__raise(LADLE_ERR_DEVICE, func,
                          "the %s backend has no normalisation kernels", op->be->fn->name);
        goto fail;
    }
    void *ws = NULL;
    int64_t most = rows(op, batched ? x_shape[0] : 0);
    size_t ws_count = 2 * (size_t)(most > v->len ? most : v->len);
    LADLE_CALL(ladle__op_block(op, LADLE_MEM_WORKSPACE, sizeof(double) * ws_count, &ws));
    v->ws = ws;
    op->ctx_bytes = sizeof(double) * 2 * (size_t)most;
    if (affine) {
        ladle_tensor *w = NULL;
        LADLE_CALL(ladle__layer_add_param(op, "weight", k, x_shape + ndim - k, &w));
        LADLE_CALL(ladle_tensor_fill(w, 1.0));
        if (bias)
            LADLE_CALL(ladle__layer_add_param(op, "bias", k, x_shape + ndim - k, NULL));
    }
    op->linear = 0;
    *out = op;
    return LADLE_OK;
fail:
    ladle_op_destroy(&op);
    return st;
}

ladle_status ladle_layernorm_create(const ladle_layernorm_desc *d, int ndim,
                                    const int64_t x_shape[], ladle_dtype dtype,
                                    ladle_device device, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    LADLE__CHECK_DESC(d);
    return create(&layernorm_vt, 0, d->normalized_ndim, d->eps, d->elementwise_affine, d->bias,
                  ndim, x_shape, dtype, device, out, __func__);
fail:
    return st;
}

ladle_status ladle_rmsnorm_create(const ladle_rmsnorm_desc *d, int ndim,
                                  const int64_t x_shape[], ladle_dtype dtype,
                                  ladle_device device, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    LADLE__CHECK_DESC(d);
    return create(&rmsnorm_vt, 1, d->normalized_ndim, d->eps, d->elementwise_affine, 0, ndim,
                  x_shape, dtype, device, out, __func__);
fail:
    return st;
}
