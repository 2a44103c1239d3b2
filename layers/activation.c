/*
 * Elementwise activations. Where the derivative can be written with y alone
 * (ReLU, LeakyReLU, sigmoid, tanh) the backward reads y, so the forward may
 * overwrite x in place; GELU needs x (and its backward reads y too, for
 * Phi(x) = y / x).
 *
 * Each activation is a pair of plain loops without branches, so they
 * vectorise. In f32 the transcendental functions are the vectorisable
 * approximations of fastmath.h (errors below 2e-7, the f32 precision); f64
 * uses the C library's exact ones.
 */
#include <math.h>

#include "src/backends/cpu/fastmath.h"
#include "src/op/op_impl.h"
#include "src/backends/cpu/simd.h"

typedef struct activation {
    ladle_activation kind;
    double slope;
} activation;

#define INV_SQRT2 0.70710678118654752440
#define INV_SQRT2PI 0.39894228040143267794

/* ---- f32 ---- */

LADLE_KERNEL static void fwd_f32(const activation *a, int64_t n, const float *x, float *y)
{
    const float s = (float)a->slope;
    switch (a->kind) {
    case LADLE_RELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case LADLE_LEAKY_RELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] > 0.0f ? x[i] : s * x[i];
        break;
    case LADLE_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            y[i] = ladle_sigmoidf(x[i]);
        break;
    case LADLE_TANH:
        for (int64_t i = 0; i < n; i++)
            y[i] = ladle_tanhf(x[i]);
        break;
    case LADLE_GELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] * ladle_normal_cdff(x[i]);
        break;
    }
}

LADLE_KERNEL static void bwd_f32(const activation *a, int64_t n, const float *x, const float *y,
                    const float *dy, float *dx)
{
    const float s = (float)a->slope;
    switch (a->kind) {
    /* loads outside the selects keep the loops branch-free */
    case LADLE_RELU:
        for (int64_t i = 0; i < n; i++) {
            float g = dy[i];
            dx[i] = y[i] > 0.0f ? g : 0.0f;
        }
        break;
    case LADLE_LEAKY_RELU: /* the slope is >= 0, so y > 0 exactly when x > 0 */
        for (int64_t i = 0; i < n; i++) {
            float g = dy[i];
            dx[i] = y[i] > 0.0f ? g : s * g;
        }
        break;
    case LADLE_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            dx[i] = dy[i] * y[i] * (1.0f - y[i]);
        break;
    case LADLE_TANH:
        for (int64_t i = 0; i < n; i++)
            dx[i] = dy[i] * (1.0f - y[i] * y[i]);
        break;
    case LADLE_GELU:
        /* Phi(x) = y / x, exact to an ulp while y is a normal number (and
         * where it is not, Phi + x pdf is below 1e-37): the backward then
         * needs only the density's exponential. Near 0, Phi = 1/2. */
        for (int64_t i = 0; i < n; i++) {
            float v = x[i], u = y[i];
            float av = v < 0 ? -v : v;
            float cdf = av > 1e-20f ? u / v : 0.5f;
            float pdf = ladle_exp_negf(-0.5f * v * v) * (float)INV_SQRT2PI;
            dx[i] = dy[i] * (cdf + v * pdf);
        }
        break;
    }
}

/* ---- f64 ---- */

LADLE_KERNEL static void fwd_f64(const activation *a, int64_t n, const double *x, double *y)
{
    switch (a->kind) {
    case LADLE_RELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] > 0 ? x[i] : 0;
        break;
    case LADLE_LEAKY_RELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] > 0 ? x[i] : a->slope * x[i];
        break;
    case LADLE_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] >= 0 ? 1 / (1 + exp(-x[i])) : exp(x[i]) / (1 + exp(x[i]));
        break;
    case LADLE_TANH:
        for (int64_t i = 0; i < n; i++)
            y[i] = tanh(x[i]);
        break;
    case LADLE_GELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = 0.5 * x[i] * erfc(-x[i] * INV_SQRT2);
        break;
    }
}

LADLE_KERNEL static void bwd_f64(const activation *a, int64_t n, const double *x, const double *y,
                    const double *dy, double *dx)
{
    switch (a->kind) {
    case LADLE_RELU:
        for (int64_t i = 0; i < n; i++) {
            double g = dy[i];
            dx[i] = y[i] > 0 ? g : 0;
        }
        break;
    case LADLE_LEAKY_RELU:
        for (int64_t i = 0; i < n; i++) {
            double g = dy[i];
            dx[i] = y[i] > 0 ? g : a->slope * g;
        }
        break;
    case LADLE_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            dx[i] = dy[i] * y[i] * (1 - y[i]);
        break;
    case LADLE_TANH:
        for (int64_t i = 0; i < n; i++)
            dx[i] = dy[i] * (1 - y[i] * y[i]);
        break;
    case LADLE_GELU:
        for (int64_t i = 0; i < n; i++) {
            double v = x[i];
            double cdf = 0.5 * erfc(-v * INV_SQRT2);
            dx[i] = dy[i] * (cdf + v * exp(-0.5 * v * v) * INV_SQRT2PI);
        }
        break;
    }
}

static ladle_status act_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                ladle_tensor *y, int64_t n)
{
    (void)ctx, (void)n;
    if (op->dtype == LADLE_F32)
        fwd_f32(op->impl, y->numel, x->data, y->data);
    else
        fwd_f64(op->impl, y->numel, x->data, y->data);
    return LADLE_OK;
}

static ladle_status act_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                 ladle_tensor *dx, int64_t n)
{
    (void)n;
    if (dx == NULL)
        return LADLE_OK;
    if (op->dtype == LADLE_F32)
        bwd_f32(op->impl, dx->numel, ctx->x->data, ctx->y->data, dy->data, dx->data);
    else
        bwd_f64(op->impl, dx->numel, ctx->x->data, ctx->y->data, dy->data, dx->data);
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
    LADLE_CALL(ladle__layer_new(&activation_vt, dtype, ndim, shape, ndim, shape, 1, &op));
    op->impl = a;
    a = NULL;
    op->in_place = kind != LADLE_GELU;
    *out = op;
    return LADLE_OK;
fail:
    ladle__free(a);
    ladle_op_destroy(&op);
    return st;
}
