/* optim: placeholder until the kernels land. */
#include "src/backends/cuda/cuda.h"

ladle_status ladle__cuda_optim_step(const ladle_backend *be, ladle_dtype dtype,                   const ladle_optimizer_desc *d, int64_t t, int64_t n,                   void *p, const void *g, void *s0, void *s1)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "optim_step", "not yet on cuda");
}
