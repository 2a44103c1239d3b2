/*
 * Dropout with a counter-based mask: element i of a call is kept when the
 * hash of (seed, step, offset + i) maps to a uniform u >= p, and kept
 * elements are scaled by 1 / (1 - p). Nothing is stored: the backward
 * recomputes the mask from the step its ctx recorded. A forward with a ctx
 * in training mode advances the op's step.
 */
#include "layers/sequential/layer_impl.h"

typedef struct dropout {
    double p;
    uint64_t seed;
    int64_t offset; /* this shard's first global element (0 when sequential) */
} dropout;

static ladle_status apply(const ladle_op *op, uint64_t step, int training,
                          const ladle_tensor *in, ladle_tensor *out)
{
    const dropout *d = op->impl;
    if (!training || d->p == 0)
        return op->be->fn->copy(op->be, op->dtype, out->numel, in->data, out->data);
    return op->be->fn->dropout(op->be, op->dtype, out->numel, d->p, d->seed, step, d->offset,
                               in->data, out->data);
}

static ladle_status dropout_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                    ladle_tensor *y, int64_t n)
{
    (void)n;
    ladle_status st = apply(op, op->step, op->training, x, y);
    if (st == LADLE_OK && ctx != NULL && op->training)
        op->step++;
    return st;
}

static ladle_status dropout_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                     ladle_tensor *dx, int64_t n)
{
    (void)n;
    return dx != NULL ? apply(op, ctx->step, ctx->training, dy, dx) : LADLE_OK;
}

static const ladle_op_vtable dropout_vt = {
    .kind = LADLE_OP_DROPOUT,
    .name = "dropout",
    .destroy = ladle__layer_free_impl,
    .layer_forward = dropout_forward,
    .layer_backward = dropout_backward,
};

ladle_status ladle_dropout_create(int ndim, const int64_t shape[], double p, ladle_dtype dtype,
                                  ladle_device device, uint64_t seed, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    dropout *d = NULL;
    LADLE_NOT_NULL(out);
    LADLE_CALL(ladle__layer_check_args(__func__, dtype, ndim, shape, 1));
    LADLE_CHECK(p >= 0 && p <= 1, LADLE_ERR_ARG, "the probability %g is outside [0, 1]", p);
    d = ladle__calloc(1, sizeof *d);
    LADLE_CHECK(d != NULL, LADLE_ERR_ALLOC, "out of memory");
    d->p = p;
    d->seed = seed;
    st = ladle__layer_same_shape(&dropout_vt, d, dtype, device, ndim, shape, out, __func__);
    if (st == LADLE_OK)
        (*out)->in_place = 1;
    return st;
fail:
    ladle__free(d);
    return st;
}

ladle_status ladle_dropout_set_step(ladle_op *op, uint64_t step)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(op);
    LADLE_CHECK(op->vt == &dropout_vt, LADLE_ERR_ARG, "the %s op is not a dropout",
                op->vt->name);
    op->step = step;
fail:
    return st;
}
