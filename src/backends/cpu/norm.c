/*
 * Layer norm, RMS norm and the token embedding's lookup on the CPU (the
 * loops are in norm_rows.inc). Every sum runs in double from the first
 * element: a row is the features of one sample or token, a few thousand
 * values at most, so there is no need for batch norm's blocks of dtype
 * lanes. Layer norm's statistics sum the deviations d = x - c from a shift
 * c and their squares; the mean is c + sum d / L and the variance
 * (sum d^2 - (sum d)^2 / L) / L. For f64 rows c is the row's mean from a
 * first pass (batch norm's two passes, the second's sum d correcting the
 * first's rounding). For f32 rows c is the mean of the first NL values,
 * and the one pass from memory is the only one: each d is x - c rounded
 * once in double, and the subtraction in the variance magnifies the sums'
 * rounding by 1 + (c - mean)^2 / variance, which is at most 1 + L / NL (c
 * is a mean of NL of the row's values) and about 1 + 1 / NL on most rows:
 * the statistics keep 40-odd bits where the output has 24 (a one-pass sum
 * of x^2 without the shift loses the variance when the mean is 1e6 times
 * the spread: test_layernorm). The kernels may fuse multiply-adds (the
 * Makefile's CPU_FUSED).
 */
#include <math.h>
#include <string.h>

#include "src/backends/cpu/cpu.h"
#include "src/backends/cpu/simd.h"

/* the lanes of the rows' sums (norm_rows.inc): four vectors of doubles at
 * AVX-512, eight at AVX2, so that as many sums are in flight at once (one
 * vector of eight lanes left each pass waiting on its adds' latency) */
#define NL 32

#define LADLE_CPU_KERNELS "src/backends/cpu/norm_rows.inc"
#include "src/backends/cpu/each_dtype.h"

ladle_status ladle__cpu_norm_forward(const ladle_backend *be, ladle_dtype dtype, int rms,
                                     int64_t rows, int64_t len, double eps, const void *x,
                                     const void *w, const void *b, void *y, double *mean,
                                     double *invstd)
{
    (void)be;
    LADLE_CPU_TYPED(dtype == LADLE_F32, norm_fwd,
                    (rms, rows, len, eps, x, w, b, y, mean, invstd));
    return LADLE_OK;
}

ladle_status ladle__cpu_norm_backward(const ladle_backend *be, ladle_dtype dtype, int rms,
                                      int64_t rows, int64_t len, const void *x,
                                      const void *w, const void *dy, const double *mean,
                                      const double *invstd, void *dx)
{
    (void)be;
    LADLE_CPU_TYPED(dtype == LADLE_F32, norm_bwd,
                    (rms, rows, len, x, w, dy, mean, invstd, dx));
    return LADLE_OK;
}

ladle_status ladle__cpu_norm_weight_grad(const ladle_backend *be, ladle_dtype dtype,
                                         int rms, int64_t rows, int64_t len, const void *x,
                                         const void *dy, const double *mean,
                                         const double *invstd, void *dw, void *db,
                                         double *ws)
{
    (void)be;
    LADLE_CPU_TYPED(dtype == LADLE_F32, norm_wgrad,
                    (rms, rows, len, x, dy, mean, invstd, dw, db, ws));
    return LADLE_OK;
}

ladle_status ladle__cpu_embed_forward(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                      int64_t dim, const int64_t *ids, const void *w,
                                      void *y)
{
    (void)be;
    LADLE_CPU_TYPED(dtype == LADLE_F32, emb_fwd, (n, dim, ids, w, y));
    return LADLE_OK;
}

ladle_status ladle__cpu_embed_backward(const ladle_backend *be, ladle_dtype dtype,
                                       int64_t n, int64_t dim, const int64_t *ids,
                                       const void *dy, void *dw)
{
    (void)be;
    LADLE_CPU_TYPED(dtype == LADLE_F32, emb_bwd, (n, dim, ids, dy, dw));
    return LADLE_OK;
}
