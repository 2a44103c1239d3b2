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

#define LADLE_CPU_KERNELS "src/backends/cpu/bn_rows.inc"
#include "src/backends/cpu/each_dtype.h"

ladle_status ladle__cpu_bn_moment(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                  int64_t c, int64_t inner, const void *x, const double *mean,
                                  double *s)
{
    if (inner == 1)
        LADLE_CPU_TYPED(dtype == LADLE_F32, moment_cols, (x, n, c, mean, s));
    else
        LADLE_CPU_TYPED(dtype == LADLE_F32, moment, (x, n, c, inner, mean, s));
    return LADLE_OK;
}

ladle_status ladle__cpu_bn_dsums(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                 int64_t c, int64_t inner, const void *x, const void *dy,
                                 const double *mean, double *s1, double *s2)
{
    if (inner == 1)
        LADLE_CPU_TYPED(dtype == LADLE_F32, dsums_cols, (x, dy, n, c, mean, s1, s2));
    else
        LADLE_CPU_TYPED(dtype == LADLE_F32, dsums, (x, dy, n, c, inner, mean, s1, s2));
    return LADLE_OK;
}

ladle_status ladle__cpu_bn_affine(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                  int64_t c, int64_t inner, const void *u, const void *w,
                                  void *out, const double *a, const double *b,
                                  const double *k)
{
    if (inner == 1)
        LADLE_CPU_TYPED(dtype == LADLE_F32, affine_cols, (u, w, out, n, c, a, b, k));
    else
        LADLE_CPU_TYPED(dtype == LADLE_F32, affine, (u, w, out, n, c, inner, a, b, k));
    return LADLE_OK;
}
