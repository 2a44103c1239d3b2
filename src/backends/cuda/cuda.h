/*
 * The CUDA backend's private declarations: the instance's state, error
 * helpers, launch geometry, and its slots, one .cu file per kernel family
 * as in src/backends/cpu/. Included only by the .cu files of this folder,
 * which build with nvcc (make CUDA=1) or with g++ over the emulator (make
 * CUDA=emu): src/backends/cuda/rt.h says which rules keep a file valid for
 * both.
 *
 * Every slot queues its work on the instance's stream and returns without
 * waiting, except those the contract calls synchronous (dot2, abs_max,
 * find_outside, find_non_finite), which wait for their one small answer.
 * A kernel's fault surfaces at the next launch or synchronisation as
 * LADLE_ERR_DEVICE with CUDA's text.
 */
#ifndef LADLE_BACKEND_CUDA_H
#define LADLE_BACKEND_CUDA_H

#include <pthread.h>

#include "src/backends/cuda/rt.h"
#include "src/core/backend.h"

/* What the instance holds besides the table (be->state). */
typedef struct ladle_cuda_state {
    int device;          /* the GPU's index */
    cudaStream_t stream; /* the instance's queue, also be->queue */
    cublasHandle_t blas; /* on that stream */
    int tf32;            /* f32 GEMMs may use TF32 tensor cores */
    int sm_count;
    int major, minor;    /* compute capability */
    size_t memory_bytes; /* the GPU's memory */
    int max_blocks;      /* the most blocks a grid-stride kernel launches */
    /* Scratch of the synchronous slots (partial sums, a found index): device
     * memory and its pinned host mirror, made when the instance opens, used
     * under the lock (the instance is shared by every object of the
     * process). */
    pthread_mutex_t scratch_lock;
    void *scratch, *host_scratch;
    size_t scratch_bytes;
    char name[256];
} ladle_cuda_state;

/* Threads of a block in the element-wise kernels. */
#define LADLE_CUDA_THREADS 256
/* Blocks of the synchronous reductions: their partials fit the scratch. */
#define LADLE_CUDA_REDUCE_BLOCKS 1024
#define LADLE_CUDA_SCRATCH_BYTES (LADLE_CUDA_REDUCE_BLOCKS * 4 * sizeof(double))

static inline ladle_cuda_state *ladle__cuda(const ladle_backend *be)
{
    return (ladle_cuda_state *)be->state;
}

static inline cudaStream_t ladle__cuda_stream(const ladle_backend *be)
{
    return (cudaStream_t)be->queue;
}

/* Blocks for a grid-stride loop over n items with `threads` a block. */
static inline unsigned ladle__cuda_blocks(const ladle_backend *be, int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    int64_t cap = ladle__cuda(be)->max_blocks;
    return (unsigned)(b < 1 ? 1 : b > cap ? cap : b);
}

#ifdef __cplusplus
extern "C" {
#endif

/* A CUDA or cuBLAS failure as a ladle status for `slot`: LADLE_ERR_ALLOC for
 * memory, LADLE_ERR_DEVICE otherwise, with CUDA's name and text. */
ladle_status ladle__cuda_fail(cudaError_t e, const char *slot, const char *what);
ladle_status ladle__cuda_blas_fail(cublasStatus_t e, const char *slot, const char *what);
/* After a launch: its own error (a bad configuration) or an earlier
 * kernel's fault. */
ladle_status ladle__cuda_launched(const char *slot);

/* The kernels, ladle__cuda_<slot>, declared for every entry of the slot
 * list (src/core/backend_slots.h); the backend defines those its table fills
 * (cuda.cu), one .cu file per family. */
#define LADLE_SLOT(name, params, args, devptrs) ladle_status ladle__cuda_##name params;
#include "src/core/backend_slots.h"
#undef LADLE_SLOT

#ifdef __cplusplus
}
#endif

/* After a launch in a slot: return its status unless it is LADLE_OK. */
#define LADLE_CUDA_LAUNCHED(slot)                                                          \
    do {                                                                                   \
        ladle_status launched_ = ladle__cuda_launched(slot);                               \
        if (launched_ != LADLE_OK)                                                         \
            return launched_;                                                              \
    } while (0)

/* A runtime call in a slot: return its failure as a status. */
#define LADLE_CUDA_TRY(slot, expr)                                                         \
    do {                                                                                   \
        cudaError_t try_ = (expr);                                                         \
        if (try_ != cudaSuccess)                                                           \
            return ladle__cuda_fail(try_, slot, #expr);                                    \
    } while (0)

#endif /* LADLE_BACKEND_CUDA_H */
