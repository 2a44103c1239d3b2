/*
 * Conversions between f32, f64, bf16 and f16 on the GPU (the convert slot),
 * with src/core/half.h's rounding: the same bits as the CPU's.
 */
#include "src/backends/cuda/kernel.h"
#include "src/core/half.h"

namespace
{

/* the common pairs without a detour through double */
__global__ void f32_to_bf16(int64_t n, const float *x, uint16_t *y)
{
    LADLE_GRID_STRIDE(i, n)
    y[i] = ladle__f32_to_bf16(x[i]);
}

__global__ void bf16_to_f32(int64_t n, const uint16_t *x, float *y)
{
    LADLE_GRID_STRIDE(i, n)
    y[i] = ladle__bf16_to_f32(x[i]);
}

__global__ void any_pair(int64_t n, ladle_dtype xt, const void *x, ladle_dtype yt, void *y)
{
    LADLE_GRID_STRIDE(i, n)
    ladle__store_real(yt, y, i, ladle__load_real(xt, x, i));
}

} // namespace

ladle_status ladle__cuda_convert(const ladle_backend *be, ladle_dtype xt, int64_t n,
                                 const void *x, ladle_dtype yt, void *y)
{
    if (n <= 0)
        return LADLE_OK;
    if (xt == yt)
        return ladle__cuda_copy(be, xt, n, x, y);
    unsigned blocks = ladle__cuda_blocks(be, n, LADLE_CUDA_THREADS);
    cudaStream_t st = ladle__cuda_stream(be);
    if (xt == LADLE_F32 && yt == LADLE_BF16)
        LADLE_LAUNCH(f32_to_bf16, blocks, LADLE_CUDA_THREADS, 0, st, n, (const float *)x,
                     (uint16_t *)y);
    else if (xt == LADLE_BF16 && yt == LADLE_F32)
        LADLE_LAUNCH(bf16_to_f32, blocks, LADLE_CUDA_THREADS, 0, st, n, (const uint16_t *)x,
                     (float *)y);
    else
        LADLE_LAUNCH(any_pair, blocks, LADLE_CUDA_THREADS, 0, st, n, xt, x, yt, y);
    LADLE_CUDA_LAUNCHED("convert");
    return LADLE_OK;
}
