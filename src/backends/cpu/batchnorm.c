/*
 * Batch norm on the CPU: the per-channel sums of the statistics and of the
 * backward, and the per-channel affine pass that both directions apply.
 * Tensors are n x c x inner, contiguous. Built with -ffp-contract=fast like
 * the layers these kernels came from, so their results stay bit for bit.
 */
#include <string.h>

#include "src/backends/cpu/cpu.h"
#include "src/backends/cpu/simd.h"

#define LANES 16
#define BLOCK 256

#define T float
#define MOMENT moment_f32
#define MOMENT_COLS moment_cols_f32
#define DSUMS dsums_f32
#define DSUMS_COLS dsums_cols_f32
#define AFFINE affine_f32
#define AFFINE_COLS affine_cols_f32
#include "src/backends/cpu/bn_rows.inc"
#undef T
#undef MOMENT
#undef MOMENT_COLS
#undef DSUMS
#undef DSUMS_COLS
#undef AFFINE
#undef AFFINE_COLS
#define T double
#define MOMENT moment_f64
#define MOMENT_COLS moment_cols_f64
#define DSUMS dsums_f64
#define DSUMS_COLS dsums_cols_f64
#define AFFINE affine_f64
#define AFFINE_COLS affine_cols_f64
#include "src/backends/cpu/bn_rows.inc"
#undef T
#undef MOMENT
#undef MOMENT_COLS
#undef DSUMS
#undef DSUMS_COLS
#undef AFFINE
#undef AFFINE_COLS

ladle_status ladle__cpu_bn_moment(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                  int64_t c, int64_t inner, const void *x, const double *mean,
                                  double *s)
{
    if (dtype == LADLE_F32 && inner == 1)
        moment_cols_f32(x, n, c, mean, s);
    else if (dtype == LADLE_F32)
        moment_f32(x, n, c, inner, mean, s);
    else if (inner == 1)
        moment_cols_f64(x, n, c, mean, s);
    else
        moment_f64(x, n, c, inner, mean, s);
    return LADLE_OK;
}

ladle_status ladle__cpu_bn_dsums(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                 int64_t c, int64_t inner, const void *x, const void *dy,
                                 const double *mean, double *s1, double *s2)
{
    if (dtype == LADLE_F32 && inner == 1)
        dsums_cols_f32(x, dy, n, c, mean, s1, s2);
    else if (dtype == LADLE_F32)
        dsums_f32(x, dy, n, c, inner, mean, s1, s2);
    else if (inner == 1)
        dsums_cols_f64(x, dy, n, c, mean, s1, s2);
    else
        dsums_f64(x, dy, n, c, inner, mean, s1, s2);
    return LADLE_OK;
}

ladle_status ladle__cpu_bn_affine(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                  int64_t c, int64_t inner, const void *u, const void *w,
                                  void *out, const double *a, const double *b,
                                  const double *k)
{
    if (dtype == LADLE_F32 && inner == 1)
        affine_cols_f32(u, w, out, n, c, a, b, k);
    else if (dtype == LADLE_F32)
        affine_f32(u, w, out, n, c, inner, a, b, k);
    else if (inner == 1)
        affine_cols_f64(u, w, out, n, c, a, b, k);
    else
        affine_f64(u, w, out, n, c, inner, a, b, k);
    return LADLE_OK;
}
