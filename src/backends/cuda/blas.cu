/* blas: placeholder until the kernels land. */
#include "src/backends/cuda/cuda.h"

ladle_status ladle__cuda_add(const ladle_backend *be, ladle_dtype dtype, int64_t n,               const void *a, const void *b, void *c)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "add", "not yet on cuda");
}

ladle_status ladle__cuda_axpy(const ladle_backend *be, ladle_dtype dtype, int64_t n,                double alpha, const void *x, void *y)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "axpy", "not yet on cuda");
}

ladle_status ladle__cuda_scal(const ladle_backend *be, ladle_dtype dtype, int64_t n,                double alpha, void *x)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "scal", "not yet on cuda");
}

ladle_status ladle__cuda_abs_max(const ladle_backend *be, ladle_dtype dtype, int64_t n,                 const void *x, double *out)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "abs_max", "not yet on cuda");
}

ladle_status ladle__cuda_fill(const ladle_backend *be, ladle_dtype dtype, int64_t n,                double value, void *x)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "fill", "not yet on cuda");
}

ladle_status ladle__cuda_dot2(const ladle_backend *be, ladle_dtype dtype, int64_t n,                const void *x, const void *y, double out[2])
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "dot2", "not yet on cuda");
}

ladle_status ladle__cuda_gemm(const ladle_backend *be, ladle_dtype dtype, int trans_a,                int trans_b, int64_t m, int64_t n, int64_t k, double alpha,                const void *a, int64_t lda, const void *b, int64_t ldb,                double beta, void *c, int64_t ldc)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "gemm", "not yet on cuda");
}
