/*
 * Softmax and log-softmax on the GPU (the CPU's are in
 * src/backends/cpu/softmax.c): x is [outer][len][inner], reduced along
 * len, a line at a time, mapped as lines.h says (a block per contiguous
 * row, a thread per strided column, and the exceptions).
 *
 * As on the CPU the line's sums are in double, after its maximum is taken
 * out, so lse = max + log(sum) is stable. Each term is computed to its
 * dtype's accuracy: f64 with the double exponential, f32 in single
 * precision from the argument in double split in two floats (exp_f32
 * below: within the 2 ulp of expf of the exact term). The f32 path thus
 * does no double exponential, which would bound softmax by the H200's
 * double rate rather than its memory, and its lse is within 3e-7 of the
 * CPU's (an f32 result's ulp is 6e-8 to 1.2e-7 near 1). The backward's
 * sums are in double too, each output computed in double from them and
 * rounded once, as on the CPU.
 */
#include "src/backends/cuda/lines.h"

/* e^d rounded to f32, d in double: e^hi + e^hi lo with hi + lo = d (lo
 * below half an ulp of hi, so e^lo = 1 + lo in f32), and the argument's
 * rounding to float costs nothing. Arguments outside [-200, 200] give 0
 * or inf in f32 anyway; clamping them keeps hi finite (a NaN passes
 * through). */
__device__ __forceinline__ float exp_f32(double d)
{
    d = d < -200.0 ? -200.0 : d > 200.0 ? 200.0 : d;
    float hi = (float)d;
    float lo = (float)(d - (double)hi);
    float e = expf(hi);
    return __fmaf_rn(e, lo, e);
}

/* An output element from x and the line's lse. */
template <class T> __device__ __forceinline__ T fwd_out(int log_, T v, double lse);
template <> __device__ __forceinline__ float fwd_out<float>(int log_, float v, double lse)
{
    return log_ ? (float)((double)v - lse) : exp_f32((double)v - lse);
}
template <>
__device__ __forceinline__ double fwd_out<double>(int log_, double v, double lse)
{
    return log_ ? v - lse : exp(v - lse);
}

/* The maximum in dtype (exact), skipping NaN as fmax does. */
__device__ __forceinline__ float max_of(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double max_of(double a, double b) { return fmax(a, b); }

/* A term exp(v - mx) of the line's sum, to the dtype's accuracy. */
__device__ __forceinline__ double sum_term(float v, double mx)
{
    return (double)exp_f32((double)v - mx);
}
__device__ __forceinline__ double sum_term(double v, double mx) { return exp(v - mx); }

/* A backward element from y, dy and the line's sum acc (in double, rounded
 * once as on the CPU). exp(y) of a log-softmax is a probability: f32
 * computes it in single precision. */
template <class T> __device__ __forceinline__ T bwd_out(int log_, T u, T g, double acc)
{
    if (log_) {
        double e = sizeof(T) == 4 ? (double)expf((float)u) : exp((double)u);
        return (T)((double)g - e * acc);
    }
    return (T)((double)u * ((double)g - acc));
}

template <class T>
__global__ void fwd_thread_kernel(int log_, int64_t lines, int64_t len, int64_t inner,
                                  const T *x, T *y)
{
    LADLE_GRID_STRIDE(l, lines)
    {
        int64_t base = ladle_line_base(l, len, inner);
        T m = (T)-INFINITY;
        for (int64_t k = 0; k < len; k++)
            m = max_of(m, x[base + k * inner]);
        double mx = (double)m, sum = 0;
        for (int64_t k = 0; k < len; k++)
            sum += sum_term(x[base + k * inner], mx);
        double lse = mx + log(sum);
        for (int64_t k = 0; k < len; k++)
            y[base + k * inner] = fwd_out<T>(log_, x[base + k * inner], lse);
    }
}

template <class T>
__global__ void fwd_block_kernel(int log_, int64_t lines, int64_t len, int64_t inner,
                                 const T *x, T *y)
{
    LADLE_DYN_SHARED(double, shm);
    for (int64_t l = blockIdx.x; l < lines; l += gridDim.x) {
        const T *xl = x + ladle_line_base(l, len, inner);
        T *yl = y + ladle_line_base(l, len, inner);
        T m = (T)-INFINITY;
        for (int64_t k = threadIdx.x; k < len; k += blockDim.x)
            m = max_of(m, xl[k * inner]);
        double mx = ladle_block_max((double)m, shm), sum = 0;
        for (int64_t k = threadIdx.x; k < len; k += blockDim.x)
            sum += sum_term(xl[k * inner], mx);
        /* its last barrier also keeps y (maybe x) unwritten until every
         * thread has read its part of the line */
        double lse = mx + log(ladle_block_sum(sum, shm));
        for (int64_t k = threadIdx.x; k < len; k += blockDim.x)
            yl[k * inner] = fwd_out<T>(log_, xl[k * inner], lse);
    }
}

/* The line's sum of dy (log-softmax) or dy y (softmax), in double. */
template <class T>
__device__ __forceinline__ double bwd_term(int log_, const T *y, const T *dy, int64_t i)
{
    return log_ ? (double)dy[i] : (double)dy[i] * (double)y[i];
}

template <class T>
__global__ void bwd_thread_kernel(int log_, int64_t lines, int64_t len, int64_t inner,
                                  const T *y, const T *dy, T *dx)
{
    LADLE_GRID_STRIDE(l, lines)
    {
        int64_t base = ladle_line_base(l, len, inner);
        double acc = 0;
        for (int64_t k = 0; k < len; k++)
            acc += bwd_term(log_, y, dy, base + k * inner);
        for (int64_t k = 0; k < len; k++) {
            int64_t i = base + k * inner;
            dx[i] = bwd_out<T>(log_, y[i], dy[i], acc);
        }
    }
}

template <class T>
__global__ void bwd_block_kernel(int log_, int64_t lines, int64_t len, int64_t inner,
                                 const T *y, const T *dy, T *dx)
{
    LADLE_DYN_SHARED(double, shm);
    for (int64_t l = blockIdx.x; l < lines; l += gridDim.x) {
        int64_t base = ladle_line_base(l, len, inner);
        double acc = 0;
        for (int64_t k = threadIdx.x; k < len; k += blockDim.x)
            acc += bwd_term(log_, y, dy, base + k * inner);
        acc = ladle_block_sum(acc, shm); /* dx (maybe dy) is written after */
        for (int64_t k = threadIdx.x; k < len; k += blockDim.x) {
            int64_t i = base + k * inner;
            dx[i] = bwd_out<T>(log_, y[i], dy[i], acc);
        }
    }
}

template <class T>
static ladle_status forward(const ladle_backend *be, int log_, int64_t outer, int64_t len,
                            int64_t inner, const T *x, T *y)
{
    if (outer * inner == 0 || len == 0)
        return LADLE_OK;
    ladle_lines_plan pl = ladle_plan_lines(be, outer, len, inner);
    if (pl.threads == 0)
        LADLE_LAUNCH(fwd_thread_kernel<T>, pl.grid, LADLE_CUDA_THREADS, 0,
                     ladle__cuda_stream(be), log_, pl.lines, len, inner, x, y);
    else
        LADLE_LAUNCH_SYNC(fwd_block_kernel<T>, pl.grid, pl.threads,
                          pl.threads * sizeof(double), ladle__cuda_stream(be), log_,
                          pl.lines, len, inner, x, y);
    LADLE_CUDA_LAUNCHED("softmax_forward");
    return LADLE_OK;
}

template <class T>
static ladle_status backward(const ladle_backend *be, int log_, int64_t outer, int64_t len,
                             int64_t inner, const T *y, const T *dy, T *dx)
{
    if (outer * inner == 0 || len == 0)
        return LADLE_OK;
    ladle_lines_plan pl = ladle_plan_lines(be, outer, len, inner);
    if (pl.threads == 0)
        LADLE_LAUNCH(bwd_thread_kernel<T>, pl.grid, LADLE_CUDA_THREADS, 0,
                     ladle__cuda_stream(be), log_, pl.lines, len, inner, y, dy, dx);
    else
        LADLE_LAUNCH_SYNC(bwd_block_kernel<T>, pl.grid, pl.threads,
                          pl.threads * sizeof(double), ladle__cuda_stream(be), log_,
                          pl.lines, len, inner, y, dy, dx);
    LADLE_CUDA_LAUNCHED("softmax_backward");
    return LADLE_OK;
}

ladle_status ladle__cuda_softmax_forward(const ladle_backend *be, ladle_dtype dtype,
                                         int log, int64_t outer, int64_t len, int64_t inner,
                                         const void *x, void *y)
{
    if (dtype == LADLE_F32)
        return forward(be, log, outer, len, inner, (const float *)x, (float *)y);
    return forward(be, log, outer, len, inner, (const double *)x, (double *)y);
}

ladle_status ladle__cuda_softmax_backward(const ladle_backend *be, ladle_dtype dtype,
                                          int log, int64_t outer, int64_t len,
                                          int64_t inner, const void *y, const void *dy,
                                          void *dx)
{
    if (dtype == LADLE_F32)
        return backward(be, log, outer, len, inner, (const float *)y, (const float *)dy,
                        (float *)dx);
    return backward(be, log, outer, len, inner, (const double *)y, (const double *)dy,
                    (double *)dx);
}
