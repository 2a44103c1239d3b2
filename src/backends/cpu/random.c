/* Random fills on the CPU from the counter-based generator of core. */
#include "src/backends/cpu/cpu.h"
#include "src/core/half.h"

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

ladle_status ladle__cpu_fill_init(const ladle_backend *be, ladle_dtype dtype,
                                  const ladle_init_desc *d, void *x)
{
    (void)be;
    int64_t idx[LADLE_MAX_NDIM] = {0}, numel = 1;
    for (int k = 0; k < d->ndim; k++)
        numel *= d->shape[k];
    for (int64_t i = 0; i < numel; i++) {
        int64_t g = 0, off = 0;
        for (int k = 0; k < d->ndim; k++) {
            g = g * d->global[k] + d->offset[k] + idx[k];
            off += idx[k] * d->strides[k];
        }
        double v = d->gaussian ? d->scale * ladle__random_normal(d->seed, d->stream, (uint64_t)g)
                               : d->scale * ladle__random_uniform(d->seed, d->stream, (uint64_t)g);
        ladle__store_real(dtype, x, off, v); /* a bf16 parameter: rounded once */
        for (int k = d->ndim - 1; k >= 0 && ++idx[k] == d->shape[k]; k--)
            idx[k] = 0;
    }
    return LADLE_OK;
}
