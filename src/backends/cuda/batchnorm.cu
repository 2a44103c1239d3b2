/* batchnorm: placeholder until the kernels land. */
#include "src/backends/cuda/cuda.h"

ladle_status ladle__cuda_bn_moment(const ladle_backend *be, ladle_dtype dtype, int64_t n,                  int64_t c, int64_t inner, const void *x,                  const double *mean, double *s)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "bn_moment", "not yet on cuda");
}

ladle_status ladle__cuda_bn_dsums(const ladle_backend *be, ladle_dtype dtype, int64_t n,                  int64_t c, int64_t inner, const void *x, const void *dy,                  const double *mean, double *s1, double *s2)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "bn_dsums", "not yet on cuda");
}

ladle_status ladle__cuda_bn_affine(const ladle_backend *be, ladle_dtype dtype, int64_t n,                  int64_t c, int64_t inner, const void *u, const void *w,                  void *out, const double *a, const double *b,                  const double *k)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "bn_affine", "not yet on cuda");
}
