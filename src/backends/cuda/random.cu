/* random: placeholder until the kernels land. */
#include "src/backends/cuda/cuda.h"

ladle_status ladle__cuda_fill_random(const ladle_backend *be, ladle_dtype dtype, int ndim,                   const int64_t *shape, const int64_t *strides,                   uint64_t seed, uint64_t stream, void *x)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "fill_random", "not yet on cuda");
}

ladle_status ladle__cuda_fill_init(const ladle_backend *be, ladle_dtype dtype,                  const ladle_init_desc *d, void *x)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "fill_init", "not yet on cuda");
}
