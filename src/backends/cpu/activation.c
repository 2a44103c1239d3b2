/*
 * The CPU's elementwise activations. Each is a pair of plain loops without
 * branches, so they vectorise. In f32 the transcendental functions are the
 * vectorisable approximations of fastmath.h (errors below 2e-7, the f32
 * precision); f64 uses the C library's exact ones.
 */
#include <math.h>

#include "src/backends/cpu/cpu.h"
#include "src/backends/cpu/fastmath.h"
#include "src/backends/cpu/simd.h"
#include "src/core/half.h"

#define INV_SQRT2PI 0.39894228040143267794
#define SQRT_2_OVER_PI 0.79788456080286535588 /* GELU's tanh form: tanh(c (x + a x^3)) */
#define GELU_A 0.044715

/* ---- f32 ---- */

LADLE_KERNEL static void fwd_f32(ladle_activation kind, double slope, int64_t n, const float *x,
                                 float *y)
{
    const float s = (float)slope;
    switch (kind) {
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
    case LADLE_GELU_TANH: /* 0.5 (1 + tanh(w)) = sigmoid(2 w): no cancellation in the tail */
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            float sg = ladle_sigmoidf((float)(2 * SQRT_2_OVER_PI) * (v + (float)GELU_A * v * v * v));
            /* fastmath's sigmoid bottoms out at 6e-39, not 0: flush it, so that
             * x = -inf gives NaN as in f64, on the GPU and in PyTorch */
            y[i] = v * (sg < 1e-37f ? 0.0f : sg);
        }
        break;
    }
}

LADLE_KERNEL static void bwd_f32(ladle_activation kind, double slope, int64_t n, const float *x,
                                 const float *y, const float *dy, float *dx)
{
    const float s = (float)slope;
    switch (kind) {
    /* loads outside the selects keep the loops branch-free */
    case LADLE_RELU:
        for (int64_t i = 0; i < n; i++) {
            float g = dy[i];
            dx[i] = y[i] > 0.0f ? g : 0.0f;
        }
        break;
    case LADLE_LEAKY_RELU: /* with a slope >= 0, y > 0 exactly when x > 0 (x may be y) */
        if (s < 0.0f)
            for (int64_t i = 0; i < n; i++) {
                float g = dy[i];
                dx[i] = x[i] > 0.0f ? g : s * g;
            }
        else
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
            float av = fabsf(v);
            float cdf = av > 1e-20f ? u / v : 0.5f;
            float pdf = ladle_gaussf(av, (float)INV_SQRT2PI);
            dx[i] = dy[i] * (cdf + v * pdf);
        }
        break;
    case LADLE_GELU_TANH:
        /* with s = sigmoid(2 w) = 0.5 (1 + tanh(w)), w = c (x + a x^3):
         * f' = s + 2 x s (1 - s) c (1 + 3 a x^2). As for GELU, s = y / x
         * from the saved output (1/2 near 0), exact to an ulp while y is a
         * normal number; where the forward flushed y to 0, s = 0 and so is
         * f'. No exponential: the loop was bound by instructions on AVX2. */
        for (int64_t i = 0; i < n; i++) {
            float v = x[i], u = y[i], c = (float)SQRT_2_OVER_PI, a = (float)GELU_A;
            float sg = fabsf(v) > 1e-20f ? u / v : 0.5f;
            dx[i] = dy[i] * (sg + 2.0f * v * sg * (1.0f - sg) * c * (1.0f + 3.0f * a * v * v));
        }
        break;
    }
}

/* ---- f64 ---- */

/* 1 / (1 + e^-w) from e^-|w|, which never overflows; fastmath.h's double
 * exponential (within an ulp of the C library's, and vectorised), so below
 * w = -708.39 the result is 0 rather than a subnormal number. */
static inline double sigmoid_f64(double w)
{
    double e = ladle_exp_f64(w >= 0 ? -w : w);
    return w >= 0 ? 1 / (1 + e) : e / (1 + e);
}

LADLE_KERNEL static void fwd_f64(ladle_activation kind, double slope, int64_t n, const double *x,
                                 double *y)
{
    switch (kind) {
    case LADLE_RELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] > 0 ? x[i] : 0;
        break;
    case LADLE_LEAKY_RELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] > 0 ? x[i] : slope * x[i];
        break;
    case LADLE_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            y[i] = sigmoid_f64(x[i]);
        break;
    case LADLE_TANH:
        for (int64_t i = 0; i < n; i++)
            y[i] = ladle_tanh_f64(x[i]);
        break;
    case LADLE_GELU:
        for (int64_t i = 0; i < n; i++) {
            double g;
            y[i] = x[i] * ladle_normal_cdf_f64(x[i], &g);
        }
        break;
    case LADLE_GELU_TANH: /* v sigmoid(2 w), as in f32 */
        for (int64_t i = 0; i < n; i++) {
            double v = x[i];
            y[i] = v * sigmoid_f64(2 * SQRT_2_OVER_PI * (v + GELU_A * v * v * v));
        }
        break;
    }
}

LADLE_KERNEL static void bwd_f64(ladle_activation kind, double slope, int64_t n, const double *x,
                                 const double *y, const double *dy, double *dx)
{
    switch (kind) {
    case LADLE_RELU:
        for (int64_t i = 0; i < n; i++) {
            double g = dy[i];
            dx[i] = y[i] > 0 ? g : 0;
        }
        break;
    case LADLE_LEAKY_RELU:
        if (slope < 0)
            for (int64_t i = 0; i < n; i++) {
                double g = dy[i];
                dx[i] = x[i] > 0 ? g : slope * g;
            }
        else
            for (int64_t i = 0; i < n; i++) {
                double g = dy[i];
                dx[i] = y[i] > 0 ? g : slope * g;
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
            double v = x[i], g, cdf = ladle_normal_cdf_f64(v, &g);
            dx[i] = dy[i] * (cdf + v * g * INV_SQRT2PI);
        }
        break;
    case LADLE_GELU_TANH:
        for (int64_t i = 0; i < n; i++) {
            double v = x[i], sg = sigmoid_f64(2 * SQRT_2_OVER_PI * (v + GELU_A * v * v * v));
            dx[i] = dy[i] * (sg + 2 * v * sg * (1 - sg) * SQRT_2_OVER_PI *
                                      (1 + 3 * GELU_A * v * v));
        }
        break;
    }
}

/* ---- bf16: blocks widened to f32 on the stack, the f32 kernels, each
 * result rounded once. The GELUs' backward recomputes y in f32 from x
 * rather than reading the rounded y, whose 2^-8 would pass into Phi. ---- */

enum { BLOCK16 = 256 };

static void widen16(int64_t n, const void *x, int64_t i, float *w)
{
    for (int64_t j = 0; j < n; j++)
        w[j] = ladle__bf16_to_f32(((const uint16_t *)x)[i + j]);
}

static void round16(int64_t n, const float *w, void *y, int64_t i)
{
    for (int64_t j = 0; j < n; j++)
        ((uint16_t *)y)[i + j] = ladle__f32_to_bf16(w[j]);
}

static void fwd_bf16(ladle_activation kind, double slope, int64_t n, const void *x, void *y)
{
    float w[BLOCK16];
    for (int64_t i = 0; i < n; i += BLOCK16) {
        int64_t b = n - i < BLOCK16 ? n - i : BLOCK16;
        widen16(b, x, i, w);
        fwd_f32(kind, slope, b, w, w);
        round16(b, w, y, i);
    }
}

static void bwd_bf16(ladle_activation kind, double slope, int64_t n, const void *x,
                     const void *y, const void *dy, void *dx)
{
    float wx[BLOCK16], wy[BLOCK16], wd[BLOCK16];
    int gelu = kind == LADLE_GELU || kind == LADLE_GELU_TANH;
    int reads_x = gelu || (kind == LADLE_LEAKY_RELU && slope < 0);
    for (int64_t i = 0; i < n; i += BLOCK16) {
        int64_t b = n - i < BLOCK16 ? n - i : BLOCK16;
        if (reads_x)
            widen16(b, x, i, wx);
        if (gelu)
            fwd_f32(kind, slope, b, wx, wy);
        else
            widen16(b, y, i, wy);
        widen16(b, dy, i, wd);
        bwd_f32(kind, slope, b, reads_x ? wx : wy, wy, wd, wd);
        round16(b, wd, dx, i);
    }
}

ladle_status ladle__cpu_act_forward(const ladle_backend *be, ladle_dtype dtype,
                                   ladle_activation kind, double slope, int64_t n,
                                   const void *x, void *y)
{
    (void)be;
    if (dtype == LADLE_BF16) {
        fwd_bf16(kind, slope, n, x, y);
        return LADLE_OK;
    }
    LADLE_CPU_TYPED(dtype == LADLE_F32, fwd, (kind, slope, n, x, y));
    return LADLE_OK;
}

ladle_status ladle__cpu_act_backward(const ladle_backend *be, ladle_dtype dtype,
                                    ladle_activation kind, double slope, int64_t n,
                                    const void *x, const void *y, const void *dy, void *dx)
{
    (void)be;
    if (dtype == LADLE_BF16) {
        bwd_bf16(kind, slope, n, x, y, dy, dx);
        return LADLE_OK;
    }
    LADLE_CPU_TYPED(dtype == LADLE_F32, bwd, (kind, slope, n, x, y, dy, dx));
    return LADLE_OK;
}
