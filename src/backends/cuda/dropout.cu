/* dropout: placeholder until the kernels land. */
#include "src/backends/cuda/cuda.h"

ladle_status ladle__cuda_dropout(const ladle_backend *be, ladle_dtype dtype, int64_t n,                 double p, uint64_t seed, uint64_t step, int64_t offset,                 const void *in, void *out)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "dropout", "not yet on cuda");
}
