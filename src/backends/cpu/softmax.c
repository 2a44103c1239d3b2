/*
 * Softmax and log-softmax on the CPU (the loops are in softmax_rows.inc).
 */
#include <math.h>

#include "src/backends/cpu/cpu.h"
#include "src/backends/cpu/fastmath.h"
#include "src/backends/cpu/simd.h"

#define T float
#define FWD softmax_fwd_f32
#define BWD softmax_bwd_f32
#include "src/backends/cpu/softmax_rows.inc"
#undef T
#undef FWD
#undef BWD
#define T double
#define FWD softmax_fwd_f64
#define BWD softmax_bwd_f64
#include "src/backends/cpu/softmax_rows.inc"
#undef T
#undef FWD
#undef BWD

/*
 * f32 rows that are contiguous (the softmax along the last dimension, as in
 * a transformer): vectorised. The maximum and the sums are kept in SL lanes
 * (a fixed inner loop the compiler turns into vectors, where a running
 * reduction would stay scalar without reassociation), the sums in double;
 * the exponentials are fastmath.h's (a few ulps), each computed once and
 * kept in y, which the normalisation then scales. Below e^-87 an
 * exponential is 0 (a -inf entry, a mask, gives exactly 0, as in f64). The
 * general loops above took 15 ns an element with two calls of the C
 * library's exp in double. 32 lanes, not 8: with one vector of sums each
 * step waited on the last one's add (forward + backward 1.40 -> 1.08 ns an
 * element at AVX-512, docs/benchmarks.md).
 */
#define SL 32

LADLE_INLINE float exp_or_zero(float d) { return d < -87.0f ? 0.0f : ladle_expf(d); }

/* e^(x - mx), 0 below e^-87, in f32 at full vector width. Rounded to f32,
 * an argument 30 below the maximum would carry 2e-6 of relative error into
 * the result; so the difference is kept as d + lo, lo its rounding error
 * (Knuth's two-sum: six additions, no products for -ffp-contract to fuse),
 * and lo joins the exactly reduced r = d - k ln2 (|r| <= ln2 / 2) before
 * the polynomial. 2^k from the rounding's bits (fastmath.h's way). */
LADLE_INLINE float exp_diff(float x, float mx)
{
    float d = x - mx, bv = d - x, av = d - bv;
    float lo = (x - av) + (-mx - bv);
    float kf = d * 1.44269504088896341f + 12582912.0f;
    float k = kf - 12582912.0f;
    float r = d - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    r = r + lo;
    float p = ladle_exp_poly(r);
    union {
        float f;
        uint32_t i;
    } kb = {kf}, scale;
    scale.i = (kb.i << 23) + (127u << 23);
    return d < -87.0f ? 0.0f : p * scale.f;
}

LADLE_KERNEL static void rows_fwd_f32(int log_, int64_t outer, int64_t len, const float *x,
                                      float *y)
{
    for (int64_t o = 0; o < outer; o++) {
        const float *xr = x + o * len;
        float *yr = y + o * len;
        float m[SL];
        for (int l = 0; l < SL; l++)
            m[l] = -INFINITY;
        int64_t k = 0;
        for (; k + SL <= len; k += SL)
            for (int l = 0; l < SL; l++)
                m[l] = xr[k + l] > m[l] ? xr[k + l] : m[l]; /* NaN ignored, as fmax */
        float mx = -INFINITY;
        for (int l = 0; l < SL; l++)
            mx = m[l] > mx ? m[l] : mx;
        for (; k < len; k++)
            mx = xr[k] > mx ? xr[k] : mx;
        double s[SL] = {0};
        for (k = 0; k + SL <= len; k += SL)
            for (int l = 0; l < SL; l++) {
                float e = exp_diff(xr[k + l], mx);
                if (!log_)
                    yr[k + l] = e;
                s[l] += (double)e;
            }
        double sum = 0;
        for (int l = 0; l < SL; l++)
            sum += s[l];
        for (; k < len; k++) {
            float e = exp_diff(xr[k], mx);
            if (!log_)
                yr[k] = e;
            sum += (double)e;
        }
        if (log_) {
            double lse = mx + log(sum);
            for (k = 0; k < len; k++)
                yr[k] = (float)((double)xr[k] - lse);
        } else {
            double inv = 1.0 / sum;
            for (k = 0; k < len; k++)
                yr[k] = (float)((double)yr[k] * inv);
        }
    }
}

LADLE_KERNEL static void rows_bwd_f32(int log_, int64_t outer, int64_t len, const float *y,
                                      const float *dy, float *dx)
{
    for (int64_t o = 0; o < outer; o++) {
        const float *yr = y + o * len, *gr = dy + o * len;
        float *dr = dx + o * len;
        double s[SL] = {0}, acc = 0;
        int64_t k = 0;
        for (; k + SL <= len; k += SL)
            for (int l = 0; l < SL; l++)
                s[l] += log_ ? (double)gr[k + l] : (double)gr[k + l] * yr[k + l];
        for (int l = 0; l < SL; l++)
            acc += s[l];
        for (; k < len; k++)
            acc += log_ ? (double)gr[k] : (double)gr[k] * yr[k];
        if (log_) /* y = log p <= 0: p = e^y */
            for (k = 0; k < len; k++)
                dr[k] = (float)((double)gr[k] - (double)exp_or_zero(yr[k]) * acc);
        else
            for (k = 0; k < len; k++)
                dr[k] = (float)((double)yr[k] * ((double)gr[k] - acc));
    }
}

/* The same for f64 rows: fastmath.h's double exponential (within an ulp of
 * the C library's), once an element, instead of the general loops' two
 * library calls (15 ns an element; with these, docs/benchmarks.md). x - mx
 * is rounded as the general loops round it. */
LADLE_KERNEL static void rows_fwd_f64(int log_, int64_t outer, int64_t len, const double *x,
                                      double *y)
{
    for (int64_t o = 0; o < outer; o++) {
        const double *xr = x + o * len;
        double *yr = y + o * len;
        double m[SL];
        for (int l = 0; l < SL; l++)
            m[l] = -INFINITY;
        int64_t k = 0;
        for (; k + SL <= len; k += SL)
            for (int l = 0; l < SL; l++)
                m[l] = xr[k + l] > m[l] ? xr[k + l] : m[l]; /* NaN ignored, as fmax */
        double mx = -INFINITY;
        for (int l = 0; l < SL; l++)
            mx = m[l] > mx ? m[l] : mx;
        for (; k < len; k++)
            mx = xr[k] > mx ? xr[k] : mx;
        double s[SL] = {0};
        for (k = 0; k + SL <= len; k += SL)
            for (int l = 0; l < SL; l++) {
                double e = ladle_exp_f64(xr[k + l] - mx);
                if (!log_)
                    yr[k + l] = e;
                s[l] += e;
            }
        double sum = 0;
        for (int l = 0; l < SL; l++)
            sum += s[l];
        for (; k < len; k++) {
            double e = ladle_exp_f64(xr[k] - mx);
            if (!log_)
                yr[k] = e;
            sum += e;
        }
        if (log_) {
            double lse = mx + log(sum);
            for (k = 0; k < len; k++)
                yr[k] = xr[k] - lse;
        } else {
            double inv = 1.0 / sum;
            for (k = 0; k < len; k++)
                yr[k] *= inv;
        }
    }
}

LADLE_KERNEL static void rows_bwd_f64(int log_, int64_t outer, int64_t len, const double *y,
                                      const double *dy, double *dx)
{
    for (int64_t o = 0; o < outer; o++) {
        const double *yr = y + o * len, *gr = dy + o * len;
        double *dr = dx + o * len;
        double s[SL] = {0}, acc = 0;
        int64_t k = 0;
        for (; k + SL <= len; k += SL)
            for (int l = 0; l < SL; l++)
                s[l] += log_ ? gr[k + l] : gr[k + l] * yr[k + l];
        for (int l = 0; l < SL; l++)
            acc += s[l];
        for (; k < len; k++)
            acc += log_ ? gr[k] : gr[k] * yr[k];
        if (log_) /* y = log p <= 0: p = e^y */
            for (k = 0; k < len; k++)
                dr[k] = gr[k] - ladle_exp_f64(yr[k]) * acc;
        else
            for (k = 0; k < len; k++)
                dr[k] = yr[k] * (gr[k] - acc);
    }
}

ladle_status ladle__cpu_softmax_forward(const ladle_backend *be, ladle_dtype dtype, int log,
                                       int64_t outer, int64_t len, int64_t inner,
                                       const void *x, void *y)
{
    (void)be;
    if (dtype == LADLE_F32 && inner == 1)
        rows_fwd_f32(log, outer, len, x, y);
    else if (inner == 1)
        rows_fwd_f64(log, outer, len, x, y);
    else if (dtype == LADLE_F32)
        softmax_fwd_f32(log, outer, len, inner, x, y);
    else
        softmax_fwd_f64(log, outer, len, inner, x, y);
    return LADLE_OK;
}

ladle_status ladle__cpu_softmax_backward(const ladle_backend *be, ladle_dtype dtype, int log,
                                        int64_t outer, int64_t len, int64_t inner,
                                        const void *y, const void *dy, void *dx)
{
    (void)be;
    if (dtype == LADLE_F32 && inner == 1)
        rows_bwd_f32(log, outer, len, y, dy, dx);
    else if (inner == 1)
        rows_bwd_f64(log, outer, len, y, dy, dx);
    else if (dtype == LADLE_F32)
        softmax_bwd_f32(log, outer, len, inner, y, dy, dx);
    else
        softmax_bwd_f64(log, outer, len, inner, y, dy, dx);
    return LADLE_OK;
}
