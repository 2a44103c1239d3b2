/* activation: placeholder until the kernels land. */
#include "src/backends/cuda/cuda.h"

ladle_status ladle__cuda_act_forward(const ladle_backend *be, ladle_dtype dtype,                   ladle_activation kind, double slope, int64_t n,                   const void *x, void *y)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "act_forward", "not yet on cuda");
}

ladle_status ladle__cuda_act_backward(const ladle_backend *be, ladle_dtype dtype,                    ladle_activation kind, double slope, int64_t n,                    const void *x, const void *y, const void *dy, void *dx)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "act_backward", "not yet on cuda");
}

ladle_status ladle__cuda_softmax_forward(const ladle_backend *be, ladle_dtype dtype, int log,                     int64_t outer, int64_t len, int64_t inner,                     const void *x, void *y)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "softmax_forward", "not yet on cuda");
}

ladle_status ladle__cuda_softmax_backward(const ladle_backend *be, ladle_dtype dtype, int log,                      int64_t outer, int64_t len, int64_t inner,                      const void *y, const void *dy, void *dx)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "softmax_backward", "not yet on cuda");
}
