/* Random fills on the CPU from the counter-based generator of core. */
#include "src/backends/cpu/cpu.h"

ladle_status ladle__cpu_fill_random(const ladle_backend *be, ladle_dtype dtype, int ndim,
                                    const int64_t *shape, const int64_t *strides,
                                    uint64_t seed, uint64_t stream, void *x)
{
    int64_t idx[LADLE_MAX_NDIM] = {0}, numel = 1;
    for (int d = 0; d < ndim; d++)
        numel *= shape[d];
    for (int64_t i = 0; i < numel; i++) {
        int64_t off = 0;
        for (int d = 0; d < ndim; d++)
            off += idx[d] * strides[d];
        double v = ladle__random_uniform(seed, stream, (uint64_t)i);
        if (dtype == LADLE_F32)
            ((float *)x)[off] = (float)v;
        else
            ((double *)x)[off] = v;
        for (int d = ndim - 1; d >= 0 && ++idx[d] == shape[d]; d--)
            idx[d] = 0;
    }
    return LADLE_OK;
}
