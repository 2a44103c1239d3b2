/*
 * The elementwise activations on the GPU (the CPU's are in
 * src/backends/cpu/activation.c): one thread per element in a grid-stride
 * loop, one kernel per dtype and kind, so each loop is a straight line of
 * loads, math and stores, coalesced across the grid.
 *
 * The formulas are the CPU's, term for term. Where the CPU's f32 loops use
 * the branch-free approximations of fastmath.h (errors up to 1.5e-7 of
 * 1 + |f|, measured against double math), the GPU calls CUDA's own
 * single-precision functions (expf, tanhf, erfcf: within a few units in
 * the last place), so the two differ by the sum of both errors; f64 uses
 * the double functions on both sides. bf16 is computed in f32 and each
 * result rounded once (half.h), so ReLU's bits match the CPU's.
 */
#include "src/backends/cuda/kernel.h"
#include "src/core/half.h"

#define INV_SQRT2 0.70710678118654752440
#define INV_SQRT2PI 0.39894228040143267794
#define SQRT_2_OVER_PI 0.79788456080286535588 /* GELU tanh: tanh(c (x + a x^3)) */
#define GELU_A 0.044715

/* The math of one dtype: float calls the f-suffixed functions, so no f32
 * path is computed in double. */
__device__ __forceinline__ float act_exp(float v) { return expf(v); }
__device__ __forceinline__ double act_exp(double v) { return exp(v); }
__device__ __forceinline__ float act_tanh(float v) { return tanhf(v); }
__device__ __forceinline__ double act_tanh(double v) { return tanh(v); }
__device__ __forceinline__ float act_erfc(float v) { return erfcf(v); }
__device__ __forceinline__ double act_erfc(double v) { return erfc(v); }
/* 1 / (1 + e^-v) from e^-|v|, which never overflows (the CPU's f64 form) */
template <class T> __device__ __forceinline__ T act_sigmoid(T v)
{
    T e = act_exp(v >= 0 ? -v : v);
    return v >= 0 ? (T)1 / ((T)1 + e) : e / ((T)1 + e);
}

template <class T, int K> __device__ __forceinline__ T act_one(T v, T slope)
{
    const T half = (T)0.5;
    switch (K) {
    case LADLE_RELU:
        return v > 0 ? v : (T)0;
    case LADLE_LEAKY_RELU:
        return v > 0 ? v : slope * v;
    case LADLE_SIGMOID:
        return act_sigmoid(v);
    case LADLE_TANH:
        return act_tanh(v);
    case LADLE_GELU_TANH: /* 0.5 v (1 + tanh(w)) = v sigmoid(2 w): exact in both tails */
        return v * act_sigmoid((T)(2 * SQRT_2_OVER_PI) * (v + (T)GELU_A * v * v * v));
    default: /* GELU, v Phi(v) with Phi from erfc: accurate in both tails */
        return half * v * act_erfc(-v * (T)INV_SQRT2);
    }
}

/* f'(x) dy from y = f(x) (and x for GELU only: the others may be given y's
 * storage as x; a leaky ReLU with a negative slope is given x). With a
 * slope >= 0, y > 0 exactly when x > 0. */
template <class T, int K> __device__ __forceinline__ T act_grad(T v, T u, T g, T slope)
{
    switch (K) {
    case LADLE_RELU:
        return u > 0 ? g : (T)0;
    case LADLE_LEAKY_RELU: /* a negative slope: y > 0 on both sides, x decides */
        return (slope < 0 ? v > 0 : u > 0) ? g : slope * g;
    case LADLE_SIGMOID:
        return g * u * ((T)1 - u);
    case LADLE_TANH:
        return g * ((T)1 - u * u);
    case LADLE_GELU_TANH: {
        const T c = (T)SQRT_2_OVER_PI, a = (T)GELU_A, one = 1;
        /* s = sigmoid(2 w) = 0.5 (1 + tanh(w)): f' = s + 2 v s (1 - s) c (1 + 3 a v^2) */
        T sg = act_sigmoid((T)2 * c * (v + a * v * v * v));
        return g * (sg + (T)2 * v * sg * (one - sg) * c * (one + (T)3 * a * v * v));
    }
    default: {
        /* Phi(v) = y / v, exact to an ulp while y is a normal number; 1/2
         * near 0. Only the density's exponential is left to compute. */
        T av = v < 0 ? -v : v;
        T cdf = av > (T)1e-20 ? u / v : (T)0.5;
        T pdf = act_exp((T)-0.5 * v * v) * (T)INV_SQRT2PI;
        return g * (cdf + v * pdf);
    }
    }
}

/* Storage S, math in C: f32 and f64 compute in their own type; bf16
 * (held as its bits) is widened to f32, exactly, and each result rounded
 * once with half.h's rounding, as the CPU does. */
template <class S> struct act_math {
    typedef S type;
    static __device__ __forceinline__ S load(S v) { return v; }
    static __device__ __forceinline__ S store(S v) { return v; }
};
template <> struct act_math<uint16_t> {
    typedef float type;
    static __device__ __forceinline__ float load(uint16_t h) { return ladle__bf16_to_f32(h); }
    static __device__ __forceinline__ uint16_t store(float v) { return ladle__f32_to_bf16(v); }
};

template <class S, int K>
__global__ void act_fwd_kernel(int64_t n, typename act_math<S>::type slope, const S *x, S *y)
{
    typedef act_math<S> M;
    LADLE_GRID_STRIDE(i, n)
    y[i] = M::store(act_one<typename M::type, K>(M::load(x[i]), slope));
}

template <class S, int K>
__global__ void act_bwd_kernel(int64_t n, typename act_math<S>::type slope, const S *x,
                               const S *y, const S *dy, S *dx)
{
    typedef act_math<S> M;
    typedef typename M::type T;
    LADLE_GRID_STRIDE(i, n)
    {
        /* x is read only where the kind needs it: it may be y's storage */
        T v = K == LADLE_GELU || K == LADLE_GELU_TANH || (K == LADLE_LEAKY_RELU && slope < 0)
                  ? M::load(x[i])
                  : (T)0;
        /* a rounded bf16 y would carry its 2^-8 into GELU's Phi = y / x:
         * y is recomputed in f32 from x there, as on the CPU */
        T u = sizeof(S) == 2 && K == LADLE_GELU ? act_one<T, K>(v, slope) : M::load(y[i]);
        dx[i] = M::store(act_grad<T, K>(v, u, M::load(dy[i]), slope));
    }
}

template <class S>
static ladle_status act_forward(const ladle_backend *be, ladle_activation kind,
                                double slope, int64_t n, const void *x, void *y)
{
    typedef typename act_math<S>::type T;
    /* indexed by kind */
    static void (*const kernels[])(int64_t, T, const S *, S *) = {
        act_fwd_kernel<S, LADLE_RELU>, act_fwd_kernel<S, LADLE_LEAKY_RELU>,
        act_fwd_kernel<S, LADLE_SIGMOID>, act_fwd_kernel<S, LADLE_TANH>,
        act_fwd_kernel<S, LADLE_GELU>, act_fwd_kernel<S, LADLE_GELU_TANH>};
    if ((unsigned)kind > (unsigned)LADLE_GELU_TANH)
        return ladle__raise(LADLE_ERR_ARG, "act_forward", "unknown activation %d",
                            (int)kind);
    if (n == 0)
        return LADLE_OK;
    LADLE_LAUNCH(kernels[kind], ladle__cuda_blocks(be, n, LADLE_CUDA_THREADS),
                 LADLE_CUDA_THREADS, 0, ladle__cuda_stream(be), n, (T)slope, (const S *)x,
                 (S *)y);
    LADLE_CUDA_LAUNCHED("act_forward");
    return LADLE_OK;
}

template <class S>
static ladle_status act_backward(const ladle_backend *be, ladle_activation kind,
                                 double slope, int64_t n, const void *x, const void *y,
                                 const void *dy, void *dx)
{
    typedef typename act_math<S>::type T;
    /* indexed by kind */
    static void (*const kernels[])(int64_t, T, const S *, const S *, const S *, S *) = {
        act_bwd_kernel<S, LADLE_RELU>, act_bwd_kernel<S, LADLE_LEAKY_RELU>,
        act_bwd_kernel<S, LADLE_SIGMOID>, act_bwd_kernel<S, LADLE_TANH>,
        act_bwd_kernel<S, LADLE_GELU>, act_bwd_kernel<S, LADLE_GELU_TANH>};
    if ((unsigned)kind > (unsigned)LADLE_GELU_TANH)
        return ladle__raise(LADLE_ERR_ARG, "act_backward", "unknown activation %d",
                            (int)kind);
    if (n == 0)
        return LADLE_OK;
    LADLE_LAUNCH(kernels[kind], ladle__cuda_blocks(be, n, LADLE_CUDA_THREADS),
                 LADLE_CUDA_THREADS, 0, ladle__cuda_stream(be), n, (T)slope, (const S *)x,
                 (const S *)y, (const S *)dy, (S *)dx);
    LADLE_CUDA_LAUNCHED("act_backward");
    return LADLE_OK;
}

ladle_status ladle__cuda_act_forward(const ladle_backend *be, ladle_dtype dtype,
                                     ladle_activation kind, double slope, int64_t n,
                                     const void *x, void *y)
{
    if (dtype == LADLE_BF16)
        return act_forward<uint16_t>(be, kind, slope, n, x, y);
    return dtype == LADLE_F32 ? act_forward<float>(be, kind, slope, n, x, y)
                              : act_forward<double>(be, kind, slope, n, x, y);
}

ladle_status ladle__cuda_act_backward(const ladle_backend *be, ladle_dtype dtype,
                                      ladle_activation kind, double slope, int64_t n,
                                      const void *x, const void *y, const void *dy,
                                      void *dx)
{
    if (dtype == LADLE_BF16)
        return act_backward<uint16_t>(be, kind, slope, n, x, y, dy, dx);
    return dtype == LADLE_F32 ? act_backward<float>(be, kind, slope, n, x, y, dy, dx)
                              : act_backward<double>(be, kind, slope, n, x, y, dy, dx);
}
