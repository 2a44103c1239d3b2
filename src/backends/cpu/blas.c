/*
 * Vector kernels and GEMM on the CPU: add, axpy, fill, the compensated inner
 * product, and GEMM through OpenBLAS.
 */
#include <cblas.h>
#include <limits.h>
#include <math.h>

#include "src/backends/cpu/cpu.h"

#define LADLE_CPU_KERNELS "src/backends/cpu/vector_rows.inc"
#include "src/backends/cpu/each_dtype.h"

ladle_status ladle__cpu_add(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                            const void *a, const void *b, void *c)
{
    LADLE_CPU_TYPED(dtype == LADLE_F32, vec_add, (n, a, b, c));
    return LADLE_OK;
}

/* (alpha, value: rounded once to an f32 for f32 vectors) */
ladle_status ladle__cpu_axpy(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                             double alpha, const void *x, void *y)
{
    LADLE_CPU_TYPED(dtype == LADLE_F32, vec_axpy, (n, alpha, x, y));
    return LADLE_OK;
}

ladle_status ladle__cpu_fill(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                             double value, void *x)
{
    if (dtype == LADLE_BF16 || dtype == LADLE_F16) {
        ladle__cpu_fill_half(dtype, n, value, x);
        return LADLE_OK;
    }
    LADLE_CPU_TYPED(dtype == LADLE_F32, vec_fill, (n, value, x));
    return LADLE_OK;
}

ladle_status ladle__cpu_scal(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                             double alpha, void *x)
{
    LADLE_CPU_TYPED(dtype == LADLE_F32, vec_scal, (n, alpha, x));
    return LADLE_OK;
}

ladle_status ladle__cpu_abs_max(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                const void *x, double *out)
{
    double m = 0.0;
    if (dtype == LADLE_F32)
        for (int64_t i = 0; i < n; i++)
            m = fmax(m, fabs(((const float *)x)[i]));
    else
        for (int64_t i = 0; i < n; i++)
            m = fmax(m, fabs(((const double *)x)[i]));
    *out = m;
    return LADLE_OK;
}

/* Compensated inner product (Ogita, Rump and Oishi's Dot2): every product
 * and every addition carries its rounding error along, so the result is as
 * accurate as if computed in twice double precision. The adjoint test
 * compares two inner products that differ only by rounding; computed
 * naively, long random vectors whose products nearly cancel would hide
 * that difference under the summation error. */
static inline void dot2_step(double x, double y, double *s, double *c)
{
    double p = x * y, ep = fma(x, y, -p);
    double t = *s + p, z = t - *s, es = (*s - (t - z)) + (p - z);
    *s = t;
    *c += ep + es;
}

ladle_status ladle__cpu_dot2(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                             const void *x, const void *y, double out[2])
{
    double s = 0.0, c = 0.0;
    if (dtype == LADLE_F32) {
        const float *a = x, *b = y;
        for (int64_t i = 0; i < n; i++)
            dot2_step((double)a[i], (double)b[i], &s, &c);
    } else {
        const double *a = x, *b = y;
        for (int64_t i = 0; i < n; i++)
            dot2_step(a[i], b[i], &s, &c);
    }
    out[0] = s + c;
    out[1] = c - (out[0] - s);
    return LADLE_OK;
}

ladle_status ladle__cpu_gemm(const ladle_backend *be, ladle_dtype dtype, int trans_a,
                             int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                             const void *a, int64_t lda, const void *b, int64_t ldb,
                             double beta, void *c, int64_t ldc)
{
    /* CBLAS counts in int: a larger matrix is refused, never wrapped */
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||
        ldc > INT_MAX)
        return ladle__raise(LADLE_ERR_ARG, "gemm",
                            "a %lld x %lld x %lld product is beyond the BLAS's int sizes",
                            (long long)m, (long long)n, (long long)k);
    enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
    if (dtype == LADLE_F32)
        cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, (float)alpha, a,
                    (int)lda, b, (int)ldb, (float)beta, c, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, alpha, a, (int)lda, b,
                    (int)ldb, beta, c, (int)ldc);
    return LADLE_OK;
}
