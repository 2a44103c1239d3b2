/*
 * Reductions along one dimension of an [outer][len][inner] tensor, shared
 * by softmax.cu and loss.cu (cross entropy's classes are such lines): line
 * l = (o, i) holds the len elements o len inner + i + k inner, and there
 * are outer * inner lines. Two mappings, both deterministic (a line is
 * reduced by one thread in order, or by one block in a fixed tree):
 *
 *   - a block per line, its threads striding along it and meeting in
 *     shared memory: contiguous rows (inner == 1) are read coalesced this
 *     way, and it is the only way to spread a few long lines over the GPU;
 *   - a thread per line, looping over len: with inner > 1 neighbouring
 *     threads hold neighbouring lines, so each step of the loop reads
 *     consecutive addresses; also for short contiguous rows, which would
 *     leave most of a block idle.
 */
#ifndef LADLE_BACKEND_CUDA_LINES_H
#define LADLE_BACKEND_CUDA_LINES_H

#include "src/backends/cuda/kernel.h"

/* Where line l starts. */
__device__ __forceinline__ int64_t ladle_line_base(int64_t l, int64_t len, int64_t inner)
{
    return (l / inner) * len * inner + l % inner;
}

/* fmax over the threads of a block, in a fixed tree as ladle_block_sum
 * (kernel.h), under the same rules (power-of-two blockDim.x, every thread
 * calls, launched with LADLE_LAUNCH_SYNC): a NaN is skipped, as fmax
 * skips it. */
__device__ __forceinline__ double ladle_block_max(double v, double *shm)
{
    unsigned t = threadIdx.x;
    shm[t] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            shm[t] = fmax(shm[t], shm[t + s]);
        __syncthreads();
    }
    double r = shm[0];
    __syncthreads();
    return r;
}

/* A launch over lines: a thread per line (threads 0: blocks of
 * LADLE_CUDA_THREADS) or a block of `threads` per line; `grid` blocks
 * (at least 1) stride over them. A block per line needs threads doubles
 * of dynamic shared memory for ladle_block_max and ladle_block_sum. */
typedef struct ladle_lines_plan {
    int64_t lines;
    int threads;
    unsigned grid;
} ladle_lines_plan;

static inline ladle_lines_plan ladle_plan_lines(const ladle_backend *be, int64_t outer,
                                                int64_t len, int64_t inner)
{
    ladle_lines_plan pl = {outer * inner, 0, 1};
    int64_t fill = (int64_t)ladle__cuda(be)->sm_count * LADLE_CUDA_THREADS;
    /* short rows go a thread each, and so do strided lines (coalesced
     * across inner) unless they are too few to give every SM a block's
     * worth of threads and long enough to share */
    int per_thread = inner == 1 ? len <= 32 : pl.lines >= fill || len < LADLE_CUDA_THREADS;
    if (per_thread) {
        pl.grid = ladle__cuda_blocks(be, pl.lines, LADLE_CUDA_THREADS);
        return pl;
    }
    /* as few threads as cover the line, 32 to 256; enough blocks to fill
     * the GPU at that size */
    pl.threads = 32;
    while (pl.threads < LADLE_CUDA_THREADS && pl.threads < len)
        pl.threads *= 2;
    int64_t cap = (int64_t)ladle__cuda(be)->max_blocks * (LADLE_CUDA_THREADS / pl.threads);
    int64_t grid = pl.lines < cap ? pl.lines : cap;
    pl.grid = (unsigned)(grid > 1 ? grid : 1);
    return pl;
}

#endif /* LADLE_BACKEND_CUDA_LINES_H */
