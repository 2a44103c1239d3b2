/*
 * The CUDA dialect of ladle's CUDA backend: the one header through which
 * its .cu files reach the CUDA runtime, cuBLAS and the kernel language, so
 * that the same sources build two ways:
 *
 *   nvcc (make CUDA=1)          the real runtime and cuBLAS, code for the GPU
 *   g++ -DLADLE_CUDA_EMU        the emulator of src/backends/cuda/emu/, which
 *       (make CUDA=emu)         runs the kernels on the host (make check)
 *
 * The rules that keep one source valid for both:
 *   - launch kernels with LADLE_LAUNCH (no __syncthreads() inside) or
 *     LADLE_LAUNCH_SYNC (threads meet at __syncthreads()), never <<< >>>;
 *     a kernel that is a template of several parameters is launched through
 *     a pointer to it (auto k = kern<float, 4>; LADLE_LAUNCH(k, ...));
 *   - dynamic shared memory through LADLE_DYN_SHARED(T, name), static
 *     shared arrays as __shared__ locals of the kernel;
 *   - no warp intrinsics (shuffles, votes, __syncwarp): reductions go
 *     through shared memory and __syncthreads();
 *   - no floating-point atomics (results must not depend on timing: each
 *     output is summed by one thread in a fixed order);
 *   - arithmetic that must not be contracted into a fused multiply-add is
 *     written with __dmul_rn / __dadd_rn / __fma_rn.
 */
#ifndef LADLE_CUDA_RT_H
#define LADLE_CUDA_RT_H

#ifdef LADLE_CUDA_EMU
#include "src/backends/cuda/emu/emu.h"
#define LADLE_LAUNCH(kernel, grid, block, shmem, stream, ...)                             \
    ((void)::ladle_emu::launch_kernel(false, (grid), (block), (shmem), (stream), kernel,     \
                                      __VA_ARGS__))
#define LADLE_LAUNCH_SYNC(kernel, grid, block, shmem, stream, ...)                        \
    ((void)::ladle_emu::launch_kernel(true, (grid), (block), (shmem), (stream), kernel,      \
                                      __VA_ARGS__))
#define LADLE_DYN_SHARED(T, name) T *name = (T *)::ladle_emu::dyn_shared()
#else
#include <cublas_v2.h>
#include <cuda_runtime.h>
#define LADLE_LAUNCH(kernel, grid, block, shmem, stream, ...)                             \
    kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)
#define LADLE_LAUNCH_SYNC LADLE_LAUNCH
#define LADLE_DYN_SHARED(T, name)                                                          \
    extern __shared__ __align__(16) unsigned char ladle_dyn_shared_[];                   \
    T *name = (T *)ladle_dyn_shared_
#endif

#endif /* LADLE_CUDA_RT_H */
