/*
 * Elementwise activations. Where the derivative can be written with y alone
 * (ReLU, LeakyReLU, sigmoid, tanh) the backward reads y, so the forward may
 * overwrite x in place; GELU needs x.
 */
#include <math.h>

#include "../src/op_impl.h"

typedef struct activation {
    ladle_activation kind;
    double slope;
    int uses_y;
} activation;

#define DEFINE_ACTIVATION(T, S)                                                          \
    static void act_fwd_##S(const activation *a, int64_t n, const T *x, T *y)             \
    {                                                                                    \
        const T s = (T)a->slope;                                                         \
        switch (a->kind) {                                                               \
        case LADLE_RELU:                                                                 \
            for (int64_t i = 0; i < n; i++)                                              \
                y[i] = x[i] > 0 ? x[i] : 0;                                              \
            break;                                                                       \
        case LADLE_LEAKY_RELU:                                                           \
            for (int64_t i = 0; i < n; i++)                                              \
                y[i] = x[i] > 0 ? x[i] : s * x[i];                                       \
            break;                                                                       \
        case LADLE_SIGMOID:                                                              \
            for (int64_t i = 0; i < n; i++)                                              \
                y[i] = x[i] >= 0 ? 1 / (1 + exp(-x[i])) : exp(x[i]) / (1 + exp(x[i]));   \
            break;                                                                       \
        case LADLE_TANH:                                                                 \
            for (int64_t i = 0; i < n; i++)                                              \
                y[i] = tanh(x[i]);                                                       \
            break;                                                                       \
        case LADLE_GELU:                                                                 \
            for (int64_t i = 0; i < n; i++)                                              \
                y[i] = (T)(0.5 * x[i] * (1.0 + erf(x[i] * M_SQRT1_2_)));                 \
            break;                                                                       \
        }                                                                                \
    }                                                                                    \
    static void act_bwd_##S(const activation *a, int64_t n, const T *x, const T *y,      \
                            const T *dy, T *dx)                                          \
    {                                                                                    \
        const T s = (T)a->slope;                                                         \
        switch (a->kind) {                                                               \
        case LADLE_RELU:                                                                 \
            for (int64_t i = 0; i < n; i++)                                              \
                dx[i] = y[i] > 0 ? dy[i] : 0;                                            \
            break;                                                                       \
        case LADLE_LEAKY_RELU: /* the slope is >= 0, so y > 0 exactly when x > 0 */  \
            for (int64_t i = 0; i < n; i++)                                              \
                dx[i] = y[i] > 0 ? dy[i] : s * dy[i];                                    \
            break;                                                                       \
        case LADLE_SIGMOID:                                                              \
            for (int64_t i = 0; i < n; i++)                                              \
                dx[i] = dy[i] * y[i] * (1 - y[i]);                                       \
            break;                                                                       \
        case LADLE_TANH:                                                                 \
            for (int64_t i = 0; i < n; i++)                                              \
                dx[i] = dy[i] * (1 - y[i] * y[i]);                                       \
            break;                                                                       \
        case LADLE_GELU:                                                                 \
            for (int64_t i = 0; i < n; i++) {                                            \
                double v = x[i];                                                         \
                double cdf = 0.5 * (1.0 + erf(v * M_SQRT1_2_));                          \
                double pdf = exp(-0.5 * v * v) * 0.3989422804014327;                     \
                dx[i] = (T)(dy[i] * (cdf + v * pdf));                                    \
            }                                                                            \
            break;                                                                       \
        }                                                                                \
    }

#define M_SQRT1_2_ 0.70710678118654752440
DEFINE_ACTIVATION(float, f32)
DEFINE_ACTIVATION(double, f64)

static ladle_status act_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                ladle_tensor *y, int64_t n)
{
    const activation *a = op->impl;
    (void)ctx;
    if (op->dtype == LADLE_F32)
        act_fwd_f32(a, y->numel, x->data, y->data);
    else
        act_fwd_f64(a, y->numel, x->data, y->data);
    (void)n;
    return LADLE_OK;
}

static ladle_status act_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                 ladle_tensor *dx, int64_t n)
{
    const activation *a = op->impl;
    (void)n;
    if (dx == NULL)
        return LADLE_OK;
    const void *x = ctx->x->data, *y = ctx->y->data;
    if (op->dtype == LADLE_F32)
        act_bwd_f32(a, dx->numel, x, y, dy->data, dx->data);
    else
        act_bwd_f64(a, dx->numel, x, y, dy->data, dx->data);
    return LADLE_OK;
}

static void act_destroy(ladle_op *op) { ladle__free(op->impl); }

static const ladle_op_vtable activation_vt = {
    .name = "activation",
    .destroy = act_destroy,
    .layer_forward = act_forward,
    .layer_backward = act_backward,
};

ladle_status ladle_activation_create(ladle_activation kind, double param, int ndim,
                                     const int64_t shape[], ladle_dtype dtype, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    activation *a = NULL;
    LADLE_NOT_NULL(out);
    LADLE_CALL(ladle__layer_check_args(__func__, dtype, ndim, shape, 1));
    LADLE_CHECK(kind >= LADLE_RELU && kind <= LADLE_GELU, LADLE_ERR_ARG,
                "unknown activation %d", (int)kind);
    a = ladle__calloc(1, sizeof *a);
    LADLE_CHECK(a != NULL, LADLE_ERR_ALLOC, "out of memory");
    a->kind = kind;
    a->slope = kind != LADLE_LEAKY_RELU ? 0.0 : param < 0 || param != param ? 0.01 : param;
    a->uses_y = kind != LADLE_GELU;
    LADLE_CALL(ladle__layer_new(&activation_vt, dtype, ndim, shape, ndim, shape, 1, &op));
    op->impl = a;
    a = NULL;
    op->in_place = ((activation *)op->impl)->uses_y;
    *out = op;
    return LADLE_OK;
fail:
    ladle__free(a);
    ladle_op_destroy(&op);
    return st;
}
