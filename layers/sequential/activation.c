/*
 * Elementwise activations (the act_forward and act_backward slots). Where
 * the derivative can be written with y alone (ReLU, LeakyReLU, sigmoid,
 * tanh) the backward reads y, so the forward may overwrite x in place; the
 * GELUs need x (and the CPU's backward reads y too, for Phi(x) = y / x or
 * its tanh form's), and so does a leaky ReLU with a negative slope, whose y
 * is positive on both sides.
 */
#include <float.h>

#include "layers/sequential/layer_impl.h"

typedef struct activation {
    ladle_activation kind;
    double slope;
} activation;

static ladle_status act_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                ladle_tensor *y, int64_t n)
{
    (void)ctx, (void)n;
    const activation *a = op->impl;
    return op->be->fn->act_forward(op->be, op->dtype, a->kind, a->slope, y->numel, x->data,
                                   y->data);
}

static ladle_status act_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                 ladle_tensor *dx, int64_t n)
{
    (void)n;
    if (dx == NULL)
        return LADLE_OK;
    const activation *a = op->impl;
    return op->be->fn->act_backward(op->be, op->dtype, a->kind, a->slope, dx->numel,
                                    ctx->x->data, ctx->y->data, dy->data, dx->data);
}

static const ladle_op_vtable activation_vt = {
    .kind = LADLE_OP_ACTIVATION,
    .name = "activation",
    .destroy = ladle__layer_free_impl,
    .layer_forward = act_forward,
    .layer_backward = act_backward,
};

ladle_status ladle_activation_create(ladle_activation kind, double param, int ndim,
                                     const int64_t shape[], ladle_dtype dtype, ladle_device device,
                                     ladle_op **out)
{
    ladle_status st = LADLE_OK;
    activation *a = NULL;
    LADLE_NOT_NULL(out);
    LADLE_CALL(ladle__layer_check_bf16(__func__, dtype, device, ndim, shape, 1));
    LADLE_CHECK(kind >= LADLE_RELU && kind <= LADLE_GELU_TANH, LADLE_ERR_ARG,
                "unknown activation %d", (int)kind);
    a = ladle__calloc(1, sizeof *a);
    LADLE_CHECK(a != NULL, LADLE_ERR_ALLOC, "out of memory");
    LADLE_CHECK(kind != LADLE_LEAKY_RELU || param != param || (param >= -DBL_MAX && param <= DBL_MAX),
                LADLE_ERR_ARG, "the leaky ReLU's slope is %g: a finite number, or NAN for the "
                "default 0.01", param);
    a->kind = kind;
    a->slope = kind != LADLE_LEAKY_RELU ? 0.0 : param != param ? 0.01 : param;
    /* a negative slope makes y > 0 for x < 0 too: the backward needs x */
    int in_place = kind != LADLE_GELU && kind != LADLE_GELU_TANH &&
                   !(kind == LADLE_LEAKY_RELU && a->slope < 0);
    st = ladle__layer_same_shape(&activation_vt, a, dtype, device, ndim, shape, out, __func__);
    if (st == LADLE_OK)
        (*out)->in_place = in_place;
    return st;
fail:
    ladle__free(a);
    return st;
}
