/*
 * Softmax and log-softmax along one dimension, computed stably (the row
 * maximum is subtracted first). Both backward passes need only y:
 *   softmax      dx = y * (dy - sum(dy * y))
 *   log-softmax  dx = dy - exp(y) * sum(dy)
 * The layer plans the (outer, len, inner) view; the softmax slots compute.
 * Along the batch dimension (dim 0) the reduced extent is the call's batch:
 * a smaller batch normalises over the rows it has.
 */
#include "layers/sequential/layer_impl.h"

typedef struct softmax {
    int64_t len, inner; /* the reduced extent, and the stride between its elements */
    int log;
    int batch;          /* along dimension 0: len is the call's batch */
} softmax;

/* The (outer, len) view of a call on t. */
static void view_of(const ladle_op *op, const ladle_tensor *t, int64_t *outer, int64_t *len)
{
    const softmax *m = op->impl;
    *len = m->batch ? t->shape[0] : m->len;
    *outer = *len * m->inner > 0 ? t->numel / (*len * m->inner) : 0;
}

static ladle_status sm_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    (void)ctx, (void)n;
    const softmax *m = op->impl;
    int64_t outer, len;
    view_of(op, y, &outer, &len);
    return op->be->fn->softmax_forward(op->be, op->dtype, m->log, outer, len, m->inner, x->data,
                                       y->data);
}

static ladle_status sm_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    (void)n;
    if (dx == NULL)
        return LADLE_OK;
    const softmax *m = op->impl;
    int64_t outer, len;
    view_of(op, dx, &outer, &len);
    return op->be->fn->softmax_backward(op->be, op->dtype, m->log, outer, len, m->inner,
                                        ctx->y->data, dy->data, dx->data);
}

static const ladle_op_vtable softmax_vt = {
    .kind = LADLE_OP_SOFTMAX,
    .name = "softmax",
    .destroy = ladle__layer_free_impl,
    .layer_forward = sm_forward,
    .layer_backward = sm_backward,
};

ladle_status ladle_softmax_create(int ndim, const int64_t shape[], int dim,
                                  ladle_softmax_kind kind, ladle_dtype dtype, ladle_device device,
                                  ladle_op **out)
{
    ladle_status st = LADLE_OK;
    softmax *m = NULL;
    LADLE_NOT_NULL(out);
    LADLE_CALL(ladle__layer_check_args(__func__, dtype, ndim, shape, 1));
    LADLE_CHECK(kind == LADLE_SOFTMAX || kind == LADLE_LOG_SOFTMAX, LADLE_ERR_ARG,
                "unknown softmax kind %d (LADLE_SOFTMAX or LADLE_LOG_SOFTMAX)", (int)kind);
    if (dim < 0)
        dim += ndim;
    LADLE_CHECK(dim >= 0 && dim < ndim, LADLE_ERR_ARG, "dimension %d is outside 0..%d", dim,
                ndim - 1);
    m = ladle__calloc(1, sizeof *m);
    LADLE_CHECK(m != NULL, LADLE_ERR_ALLOC, "out of memory");
    m->len = shape[dim];
    m->inner = 1;
    for (int d = dim + 1; d < ndim; d++)
        m->inner *= shape[d];
    m->log = kind == LADLE_LOG_SOFTMAX;
    m->batch = dim == 0;
    return ladle__layer_same_shape(&softmax_vt, m, dtype, device, ndim, shape, out, __func__);
fail:
    ladle__free(m);
    return st;
}
