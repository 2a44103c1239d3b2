/*
 * Device-side helpers shared by the CUDA backend's kernel families (the
 * .cu files of this folder; src/backends/cuda/rt.h has the dialect's
 * rules).
 */
#ifndef LADLE_BACKEND_CUDA_KERNEL_H
#define LADLE_BACKEND_CUDA_KERNEL_H

#include "src/backends/cuda/cuda.h"

/* A grid-stride loop: i takes every value in [0, n) once across the grid. */
#define LADLE_GRID_STRIDE(i, n)                                                            \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (int64_t)(n);     \
         i += (int64_t)blockDim.x * gridDim.x)

/* The sum of v over the threads of a block, in a fixed order (a tree in
 * shared memory), given to every thread. blockDim.x must be a power of two
 * (at most 1024) and shm must hold blockDim.x values; every thread of the
 * block must call it (it waits at barriers: launch with LADLE_LAUNCH_SYNC),
 * and shm may be used again when it returns. */
template <class T> __device__ __forceinline__ T ladle_block_sum(T v, T *shm)
{
    unsigned t = threadIdx.x;
    shm[t] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            shm[t] = shm[t] + shm[t + s];
        __syncthreads();
    }
    T r = shm[0];
    __syncthreads();
    return r;
}

/* A block per contiguous row of len values (norm.cu, vocab.cu): the
 * threads of a block, a power of two covering the row, 32 to
 * LADLE_CUDA_THREADS, and the blocks, one a row up to a cap (the kernels
 * stride over the rest). */
static inline int ladle__cuda_row_threads(int64_t len)
{
    int t = 32;
    while (t < LADLE_CUDA_THREADS && t < len)
        t *= 2;
    return t;
}

static inline unsigned ladle__cuda_row_blocks(const ladle_backend *be, int64_t rows)
{
    int64_t cap = (int64_t)ladle__cuda(be)->max_blocks * 4;
    return (unsigned)(rows < 1 ? 1 : rows < cap ? rows : cap);
}

#endif /* LADLE_BACKEND_CUDA_KERNEL_H */
