/*
 * Random fills on the GPU (the CPU's are src/backends/cpu/random.c), from
 * the counter-based generator of src/core/random.h, whose functions are
 * host and device code alike: element e of the box gets the value of its
 * counter, so the values do not depend on the device, the grid or the
 * order the threads run in.
 *
 * Both slots are one walk over the strided box (src/backends/cuda/walk.h)
 * with two offsets per element: the counter, a linear function of the
 * element's index (the row-major index in the box for fill_random; in the
 * whole tensor, offset added, for fill_init), and the element's place in x.
 *
 * The uniform values are the CPU's bit for bit: integer mixing, then an
 * exact scaling. The normal ones go through the device's log, sqrt and cos,
 * which may differ from the host's in the last bits of a double (rarely
 * enough to change a float). The emulator runs the host's functions, and
 * there they agree bit for bit.
 */
#include "src/backends/cuda/walk.h"
#include "src/core/half.h"
#include "src/core/random.h"

namespace
{

/* One value into x's dtype: bf16 (its bits) rounded once from the double,
 * with half.h's rounding, as the CPU's store does. */
__device__ __forceinline__ void put(float *x, double v) { *x = (float)v; }
__device__ __forceinline__ void put(double *x, double v) { *x = v; }
__device__ __forceinline__ void put(uint16_t *x, double v) { *x = ladle__f64_to_bf16(v); }

/* x at offset b becomes scale r(seed, stream, base + a). */
template <class T>
__global__ void random_kernel(ladle_walk w, int64_t base, uint64_t seed, uint64_t stream,
                              int gaussian, double scale, T *x)
{
    ladle_walk_each(w, [&](int64_t a, int64_t b) {
        uint64_t counter = (uint64_t)(base + a);
        double v = gaussian ? scale * ladle__rng_normal(seed, stream, counter)
                            : scale * ladle__rng_uniform(seed, stream, counter);
        put(x + b, v);
    });
}

/* Fill the box ext (strides in x) with counters base + sum idx cstr. */
ladle_status fill(const ladle_backend *be, const char *slot, ladle_dtype dtype, int ndim,
                  const int64_t *ext, const int64_t *cstr, const int64_t *strides,
                  int64_t base, uint64_t seed, uint64_t stream, int gaussian, double scale,
                  void *x)
{
    int64_t e[LADLE_MAX_NDIM], ca[LADLE_MAX_NDIM], xb[LADLE_MAX_NDIM];
    int nd = ladle__walk_shape(ndim, ext, cstr, strides, e, ca, xb);
    if (nd == 0)
        return LADLE_OK;
    int64_t vol = 1;
    for (int k = 0; k < nd; k++)
        vol *= e[k];
    unsigned blocks = ladle__cuda_blocks(be, vol, LADLE_CUDA_THREADS);
    ladle_walk w = ladle__walk_make(nd, e, ca, xb, (int64_t)blocks * LADLE_CUDA_THREADS);
    cudaStream_t st = ladle__cuda_stream(be);
    if (dtype == LADLE_BF16)
        LADLE_LAUNCH(random_kernel<uint16_t>, blocks, LADLE_CUDA_THREADS, 0, st, w, base,
                     seed, stream, gaussian, scale, (uint16_t *)x);
    else if (dtype == LADLE_F32)
        LADLE_LAUNCH(random_kernel<float>, blocks, LADLE_CUDA_THREADS, 0, st, w, base, seed,
                     stream, gaussian, scale, (float *)x);
    else
        LADLE_LAUNCH(random_kernel<double>, blocks, LADLE_CUDA_THREADS, 0, st, w, base,
                     seed, stream, gaussian, scale, (double *)x);
    LADLE_CUDA_LAUNCHED(slot);
    return LADLE_OK;
}

/* Row-major strides of extents ext. */
void row_major(int ndim, const int64_t *ext, int64_t *str)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        str[d] = s;
        s *= ext[d];
    }
}

} // namespace

ladle_status ladle__cuda_fill_random(const ladle_backend *be, ladle_dtype dtype, int ndim,
                                     const int64_t *shape, const int64_t *strides,
                                     uint64_t seed, uint64_t stream, void *x)
{
    /* the counter is the element's row-major index in the box; scale 1
     * leaves the uniform value as it is */
    int64_t cstr[LADLE_MAX_NDIM];
    row_major(ndim, shape, cstr);
    return fill(be, "fill_random", dtype, ndim, shape, cstr, strides, 0, seed, stream, 0,
                1.0, x);
}

ladle_status ladle__cuda_fill_init(const ladle_backend *be, ladle_dtype dtype,
                                   const ladle_init_desc *d, void *x)
{
    /* the counter is the row-major index of offset + idx in the whole
     * tensor: the offset's index plus idx along the whole tensor's strides */
    int64_t gstr[LADLE_MAX_NDIM], base = 0;
    row_major(d->ndim, d->global, gstr);
    for (int k = 0; k < d->ndim; k++)
        base += d->offset[k] * gstr[k];
    return fill(be, "fill_init", dtype, d->ndim, d->shape, gstr, d->strides, base, d->seed,
                d->stream, d->gaussian, d->scale, x);
}
