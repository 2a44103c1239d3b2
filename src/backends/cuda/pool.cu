/* pool: placeholder until the kernels land. */
#include "src/backends/cuda/cuda.h"

ladle_status ladle__cuda_pool_plan(const ladle_backend *be, ladle_dtype dtype,                  const ladle_pool_geom *g, size_t *ws_bytes,                  size_t *saved_bytes)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "pool_plan", "not yet on cuda");
}

ladle_status ladle__cuda_pool_setup(const ladle_backend *be, ladle_dtype dtype,                   const ladle_pool_geom *g, void *ws)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "pool_setup", "not yet on cuda");
}

ladle_status ladle__cuda_pool_forward(const ladle_backend *be, ladle_dtype dtype,                    const ladle_pool_geom *g, int64_t planes, const void *x,                    void *y, void *saved, void *ws)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "pool_forward", "not yet on cuda");
}

ladle_status ladle__cuda_pool_backward(const ladle_backend *be, ladle_dtype dtype,                    const ladle_pool_geom *g, int64_t planes,                    const void *dy, void *dx, const void *saved,                    void *ws)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "pool_backward", "not yet on cuda");
}
