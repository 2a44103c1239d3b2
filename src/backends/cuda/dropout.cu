/*
 * Dropout on the GPU (the CPU's is src/backends/cpu/dropout.c): one thread
 * per element in a grid-stride loop. The mask comes from the counter-based
 * generator of src/core/random.h, a function of (seed, step, offset + i)
 * whose uniform is exact in double, so every element's keep-or-drop
 * decision, and with it the output (one rounded product in dtype), is bit
 * for bit the CPU's: nothing is stored, and any device or layout gets the
 * same mask.
 */
#include "src/backends/cuda/kernel.h"
#include "src/core/random.h"

template <class T>
__global__ void dropout_kernel(int64_t n, double p, T scale, uint64_t seed, uint64_t step,
                               int64_t offset, const T *in, T *out)
{
    LADLE_GRID_STRIDE(i, n)
    {
        double u = 0.5 * (ladle__rng_uniform(seed, step, (uint64_t)(offset + i)) + 1.0);
        T v = in[i]; /* read before out[i], which may be the same element, is written */
        out[i] = u >= p ? v * scale : (T)0;
    }
}

template <class T>
static ladle_status dropout(const ladle_backend *be, int64_t n, double p, uint64_t seed,
                            uint64_t step, int64_t offset, const void *in, void *out)
{
    if (n == 0)
        return LADLE_OK;
    /* the CPU's scale, rounded to dtype; p = 1 drops everything */
    const T scale = p < 1 ? (T)(1.0 / (1.0 - p)) : (T)0;
    LADLE_LAUNCH(dropout_kernel<T>, ladle__cuda_blocks(be, n, LADLE_CUDA_THREADS),
                 LADLE_CUDA_THREADS, 0, ladle__cuda_stream(be), n, p, scale, seed, step,
                 offset, (const T *)in, (T *)out);
    LADLE_CUDA_LAUNCHED("dropout");
    return LADLE_OK;
}

ladle_status ladle__cuda_dropout(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                 double p, uint64_t seed, uint64_t step, int64_t offset,
                                 const void *in, void *out)
{
    if (dtype == LADLE_F32)
        return dropout<float>(be, n, p, seed, step, offset, in, out);
    return dropout<double>(be, n, p, seed, step, offset, in, out);
}
