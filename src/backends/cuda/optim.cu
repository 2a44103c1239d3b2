/*
 * Optimizer updates on the GPU (the CPU's are in src/backends/cpu/optim.c):
 * one thread per parameter in a grid-stride loop, the descriptor passed to
 * the kernel by value.
 *
 * The arithmetic is the CPU's, in double, operation for operation: every
 * product that feeds a sum is written with __dmul_rn / __dadd_rn, so nvcc
 * fuses none of them (the CPU's optim.c is compiled without fused
 * multiply-adds), and Adam's bias corrections 1 - beta^t are computed on
 * the host with the CPU's pow. Division and sqrt are correctly rounded on
 * both, so a step gives the CPU's parameters and state bit for bit.
 */
#include <math.h>

#include "src/backends/cuda/kernel.h"

template <class T>
__global__ void sgd_kernel(ladle_optimizer_desc d, int first, int64_t n, T *p, const T *g,
                           T *v)
{
    LADLE_GRID_STRIDE(i, n)
    {
        double pi = (double)p[i];
        double gi = __dadd_rn((double)g[i], __dmul_rn(d.weight_decay, pi));
        if (v != NULL) {
            double vi = first ? gi
                              : __dadd_rn(__dmul_rn(d.momentum, (double)v[i]),
                                          __dmul_rn(1 - d.dampening, gi));
            v[i] = (T)vi;
            gi = d.nesterov ? __dadd_rn(gi, __dmul_rn(d.momentum, vi)) : vi;
        }
        p[i] = (T)__dsub_rn(pi, __dmul_rn(d.lr, gi));
    }
}

/* Adam and AdamW; c1 = 1 - beta1^t and c2 = 1 - beta2^t. */
template <class T>
__global__ void adam_kernel(ladle_optimizer_desc d, double c1, double c2, int64_t n, T *p,
                            const T *g, T *m, T *v)
{
    int decoupled = d.kind == LADLE_OPT_ADAMW;
    LADLE_GRID_STRIDE(i, n)
    {
        double pi = (double)p[i], gi = (double)g[i];
        if (decoupled)
            pi = __dsub_rn(pi, __dmul_rn(__dmul_rn(d.lr, d.weight_decay), pi));
        else
            gi = __dadd_rn(gi, __dmul_rn(d.weight_decay, pi));
        double mi = __dadd_rn(__dmul_rn(d.beta1, (double)m[i]), __dmul_rn(1 - d.beta1, gi));
        double vi = __dadd_rn(__dmul_rn(d.beta2, (double)v[i]),
                              __dmul_rn(__dmul_rn(1 - d.beta2, gi), gi));
        m[i] = (T)mi;
        v[i] = (T)vi;
        p[i] = (T)(pi - __dmul_rn(d.lr, mi / c1) / (sqrt(vi / c2) + d.eps));
    }
}

template <class T>
static ladle_status step(const ladle_backend *be, const ladle_optimizer_desc *d, int64_t t,
                         int64_t n, T *p, const T *g, T *s0, T *s1)
{
    if (n == 0)
        return LADLE_OK;
    unsigned grid = ladle__cuda_blocks(be, n, LADLE_CUDA_THREADS);
    cudaStream_t st = ladle__cuda_stream(be);
    if (d->kind == LADLE_OPT_SGD) {
        LADLE_LAUNCH(sgd_kernel<T>, grid, LADLE_CUDA_THREADS, 0, st, *d, (int)(t == 1), n,
                     p, g, s0);
    } else {
        double c1 = 1 - pow(d->beta1, (double)t), c2 = 1 - pow(d->beta2, (double)t);
        LADLE_LAUNCH(adam_kernel<T>, grid, LADLE_CUDA_THREADS, 0, st, *d, c1, c2, n, p, g,
                     s0, s1);
    }
    LADLE_CUDA_LAUNCHED("optim_step");
    return LADLE_OK;
}

ladle_status ladle__cuda_optim_step(const ladle_backend *be, ladle_dtype dtype,
                                    const ladle_optimizer_desc *d, int64_t t, int64_t n,
                                    void *p, const void *g, void *s0, void *s1)
{
    if (dtype == LADLE_F32)
        return step(be, d, t, n, (float *)p, (const float *)g, (float *)s0, (float *)s1);
    return step(be, d, t, n, (double *)p, (const double *)g, (double *)s0, (double *)s1);
}
