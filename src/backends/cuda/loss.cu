/* loss: placeholder until the kernels land. */
#include "src/backends/cuda/cuda.h"

ladle_status ladle__cuda_loss_forward(const ladle_backend *be, ladle_dtype dtype,                    const ladle_loss_desc *l, const void *x,                    const void *target, void *out)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "loss_forward", "not yet on cuda");
}

ladle_status ladle__cuda_loss_backward(const ladle_backend *be, ladle_dtype dtype,                    const ladle_loss_desc *l, const void *x,                    const void *target, const void *dloss, void *dx)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "loss_backward", "not yet on cuda");
}

ladle_status ladle__cuda_find_outside(const ladle_backend *be, int64_t n, const int64_t *v,                    int64_t lo, int64_t hi, int64_t *first)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "find_outside", "not yet on cuda");
}

ladle_status ladle__cuda_find_non_finite(const ladle_backend *be, ladle_dtype dtype,                     int64_t n, const void *x, int64_t *first)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "find_non_finite", "not yet on cuda");
}
