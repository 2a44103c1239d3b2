/*
 * Vector kernels and GEMM on the GPU (the CPU's are src/backends/cpu/blas.c).
 *
 * add, axpy, scal, fill: grid-stride element-wise kernels on the stream.
 * axpy rounds its product before the sum (no fused multiply-add), as the
 * CPU does, so both backends give the same bits.
 *
 * abs_max and dot2 are synchronous: each block reduces its grid-stride
 * share in a fixed order (a tree in shared memory) into the instance's
 * scratch, and the host combines the blocks' partials in block order under
 * the scratch lock, so the result does not depend on timing. dot2 keeps
 * the CPU's accuracy (Ogita, Rump and Oishi's Dot2): every product and
 * every addition of a thread carries its rounding error into a second
 * word, and the threads' and blocks' (sum, error) pairs are combined by an
 * error-free TwoSum of the sums, the errors added, so the result is as
 * accurate as a sum in twice double precision, whatever the order.
 *
 * gemm: cuBLAS is column-major, ladle row-major. A row-major matrix is
 * its transpose in column-major terms, so C^T = op(B)^T op(A)^T is one
 * cuBLAS call with the operands swapped and no data moved. The handle's
 * math mode (src/backends/cuda/cuda.cu: TF32 off unless asked) decides
 * whether single precision may use TF32 tensor cores.
 *
 * gemm_half: the same swap through cublasGemmEx, bf16 A and B, a bf16 or
 * f32 C, f32 compute type: bf16 products are exact in f32, so TF32 never
 * enters, whatever the handle's math mode.
 */
#include <limits.h>

#include "src/backends/cuda/kernel.h"
#include "src/core/half.h"

namespace
{

/* Rounded products and sums that the compiler may not fuse. */
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }

template <class T> __global__ void add_kernel(int64_t n, const T *a, const T *b, T *c)
{
    LADLE_GRID_STRIDE(i, n)
    c[i] = a[i] + b[i];
}

template <class T> __global__ void axpy_kernel(int64_t n, T alpha, const T *x, T *y)
{
    LADLE_GRID_STRIDE(i, n)
    y[i] = add_rn(y[i], mul_rn(alpha, x[i]));
}

template <class T> __global__ void scal_kernel(int64_t n, T alpha, T *x)
{
    LADLE_GRID_STRIDE(i, n)
    x[i] = x[i] * alpha;
}

template <class T> __global__ void fill_kernel(int64_t n, T value, T *x)
{
    LADLE_GRID_STRIDE(i, n)
    x[i] = value;
}

/* The element-wise slots: one launch of kernel k on n elements. */
template <class K, class... A>
ladle_status elementwise(const ladle_backend *be, const char *slot, int64_t n, K k,
                         A... args)
{
    if (n <= 0)
        return LADLE_OK;
    LADLE_LAUNCH(k, ladle__cuda_blocks(be, n, LADLE_CUDA_THREADS), LADLE_CUDA_THREADS, 0,
                 ladle__cuda_stream(be), n, args...);
    LADLE_CUDA_LAUNCHED(slot);
    return LADLE_OK;
}

/* --- abs_max --- */

/* The largest |x[i]| skipping NaN (fmax returns its other argument). */
__device__ __forceinline__ float abs_max_step(float m, float v)
{
    return fmaxf(m, fabsf(v));
}
__device__ __forceinline__ double abs_max_step(double m, double v)
{
    return fmax(m, fabs(v));
}

template <class T> __global__ void abs_max_kernel(int64_t n, const T *x, double *part)
{
    __shared__ T shm[LADLE_CUDA_THREADS];
    T m = 0;
    LADLE_GRID_STRIDE(i, n)
    m = abs_max_step(m, x[i]);
    unsigned t = threadIdx.x;
    shm[t] = m;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            shm[t] = abs_max_step(shm[t], shm[t + s]);
        __syncthreads();
    }
    if (t == 0)
        part[blockIdx.x] = (double)shm[0];
}

/* --- dot2 --- */

/* One term of Dot2: s + c += x y, the product's error by a fused
 * multiply-add, the sum's by TwoSum. For f32 inputs the product of two
 * promoted floats is exact in double and its error is zero: skipped. */
template <class T>
__device__ __forceinline__ void dot2_step(T xv, T yv, double &s, double &c)
{
    double x = (double)xv, y = (double)yv;
    double p = __dmul_rn(x, y);
    double ep = sizeof(T) == sizeof(double) ? __fma_rn(x, y, -p) : 0.0;
    double t = __dadd_rn(s, p), z = __dsub_rn(t, s);
    double es = __dadd_rn(__dsub_rn(s, __dsub_rn(t, z)), __dsub_rn(p, z));
    s = t;
    c = __dadd_rn(c, __dadd_rn(ep, es));
}

/* (s, c) += (s2, c2) without losing the sums' rounding error. */
__host__ __device__ __forceinline__ void pair_add(double &s, double &c, double s2,
                                                  double c2)
{
    double t = s + s2, z = t - s;
    double e = (s - (t - z)) + (s2 - z);
    s = t;
    c = (c + c2) + e;
}

template <class T>
__global__ void dot2_kernel(int64_t n, const T *x, const T *y, double *part)
{
    __shared__ double shs[LADLE_CUDA_THREADS], shc[LADLE_CUDA_THREADS];
    double s = 0.0, c = 0.0;
    LADLE_GRID_STRIDE(i, n)
    dot2_step(x[i], y[i], s, c);
    unsigned t = threadIdx.x;
    shs[t] = s;
    shc[t] = c;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
        if (t < h) {
            double a = shs[t], b = shc[t];
            pair_add(a, b, shs[t + h], shc[t + h]);
            shs[t] = a;
            shc[t] = b;
        }
        __syncthreads();
    }
    if (t == 0) {
        part[2 * blockIdx.x] = shs[0];
        part[2 * blockIdx.x + 1] = shc[0];
    }
}

/* Blocks of a synchronous reduction over n: its partials fit the scratch. */
unsigned reduce_blocks(const ladle_backend *be, int64_t n)
{
    unsigned b = ladle__cuda_blocks(be, n, LADLE_CUDA_THREADS);
    return b < LADLE_CUDA_REDUCE_BLOCKS ? b : LADLE_CUDA_REDUCE_BLOCKS;
}

/* Run a reduction kernel writing `values` doubles into the scratch, and
 * bring them to the host scratch. The caller holds the scratch lock. */
template <class K, class... A>
ladle_status reduce_to_host(const ladle_backend *be, const char *slot, unsigned blocks,
                            size_t values, K k, A... args)
{
    ladle_cuda_state *cs = ladle__cuda(be);
    cudaStream_t st = ladle__cuda_stream(be);
    LADLE_LAUNCH_SYNC(k, blocks, LADLE_CUDA_THREADS, 0, st, args..., (double *)cs->scratch);
    LADLE_CUDA_LAUNCHED(slot);
    LADLE_CUDA_TRY(slot,
                   cudaMemcpyAsync(cs->host_scratch, cs->scratch, values * sizeof(double),
                                   cudaMemcpyDeviceToHost, st));
    LADLE_CUDA_TRY(slot, cudaStreamSynchronize(st));
    return LADLE_OK;
}

} // namespace

ladle_status ladle__cuda_add(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                             const void *a, const void *b, void *c)
{
    if (dtype == LADLE_F32)
        return elementwise(be, "add", n, add_kernel<float>, (const float *)a,
                           (const float *)b, (float *)c);
    return elementwise(be, "add", n, add_kernel<double>, (const double *)a,
                       (const double *)b, (double *)c);
}

ladle_status ladle__cuda_axpy(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                              double alpha, const void *x, void *y)
{
    if (dtype == LADLE_F32)
        return elementwise(be, "axpy", n, axpy_kernel<float>, (float)alpha,
                           (const float *)x, (float *)y);
    return elementwise(be, "axpy", n, axpy_kernel<double>, alpha, (const double *)x,
                       (double *)y);
}

ladle_status ladle__cuda_scal(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                              double alpha, void *x)
{
    if (dtype == LADLE_F32)
        return elementwise(be, "scal", n, scal_kernel<float>, (float)alpha, (float *)x);
    return elementwise(be, "scal", n, scal_kernel<double>, alpha, (double *)x);
}

ladle_status ladle__cuda_fill(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                              double value, void *x)
{
    if (dtype == LADLE_BF16 || dtype == LADLE_F16) /* the bits, rounded once here */
        return elementwise(be, "fill", n, fill_kernel<uint16_t>,
                           dtype == LADLE_BF16 ? ladle__f64_to_bf16(value)
                                               : ladle__f64_to_f16(value),
                           (uint16_t *)x);
    if (dtype == LADLE_F32)
        return elementwise(be, "fill", n, fill_kernel<float>, (float)value, (float *)x);
    return elementwise(be, "fill", n, fill_kernel<double>, value, (double *)x);
}

ladle_status ladle__cuda_abs_max(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                 const void *x, double *out)
{
    ladle_cuda_state *cs = ladle__cuda(be);
    *out = 0.0;
    if (n <= 0)
        return LADLE_OK;
    unsigned blocks = reduce_blocks(be, n);
    pthread_mutex_lock(&cs->scratch_lock);
    ladle_status st;
    if (dtype == LADLE_F32)
        st = reduce_to_host(be, "abs_max", blocks, blocks, abs_max_kernel<float>, n,
                            (const float *)x);
    else
        st = reduce_to_host(be, "abs_max", blocks, blocks, abs_max_kernel<double>, n,
                            (const double *)x);
    if (st == LADLE_OK) {
        const double *part = (const double *)cs->host_scratch;
        double m = 0.0;
        for (unsigned b = 0; b < blocks; b++)
            m = fmax(m, part[b]);
        *out = m;
    }
    pthread_mutex_unlock(&cs->scratch_lock);
    return st;
}

ladle_status ladle__cuda_dot2(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                              const void *x, const void *y, double out[2])
{
    ladle_cuda_state *cs = ladle__cuda(be);
    out[0] = out[1] = 0.0;
    if (n <= 0)
        return LADLE_OK;
    unsigned blocks = reduce_blocks(be, n);
    pthread_mutex_lock(&cs->scratch_lock);
    ladle_status st =
        dtype == LADLE_F32
            ? reduce_to_host(be, "dot2", blocks, 2 * (size_t)blocks, dot2_kernel<float>, n,
                             (const float *)x, (const float *)y)
            : reduce_to_host(be, "dot2", blocks, 2 * (size_t)blocks, dot2_kernel<double>, n,
                             (const double *)x, (const double *)y);
    if (st == LADLE_OK) {
        const double *part = (const double *)cs->host_scratch;
        double s = 0.0, c = 0.0;
        for (unsigned b = 0; b < blocks; b++)
            pair_add(s, c, part[2 * b], part[2 * b + 1]);
        /* the CPU's last step: the pair renormalised */
        out[0] = s + c;
        out[1] = c - (out[0] - s);
    }
    pthread_mutex_unlock(&cs->scratch_lock);
    return st;
}

/* --- gemm --- */

namespace
{

/* k = 0: C = beta C over m rows of n (beta 0 writes zeros, as BLAS does). */
template <class T>
__global__ void scale_c_kernel(int64_t m, int64_t n, T beta, T *c, int64_t ldc)
{
    LADLE_GRID_STRIDE(i, m * n)
    {
        T *p = c + (i / n) * ldc + i % n;
        *p = beta == T(0) ? T(0) : *p * beta;
    }
}

} // namespace

ladle_status ladle__cuda_gemm(const ladle_backend *be, ladle_dtype dtype, int trans_a,
                              int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                              const void *a, int64_t lda, const void *b, int64_t ldb,
                              double beta, void *c, int64_t ldc)
{
    /* cuBLAS counts in int: a larger matrix is refused, never wrapped */
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||
        ldc > INT_MAX)
        return ladle__raise(LADLE_ERR_ARG, "gemm",
                            "a %lld x %lld x %lld product is beyond cuBLAS's int sizes",
                            (long long)m, (long long)n, (long long)k);
    if (m <= 0 || n <= 0)
        return LADLE_OK;
    cudaStream_t st = ladle__cuda_stream(be);
    if (k <= 0) {
        /* no product: A and B are not read, whatever their leading dimensions */
        if (beta == 1.0)
            return LADLE_OK;
        unsigned blocks = ladle__cuda_blocks(be, m * n, LADLE_CUDA_THREADS);
        if (dtype == LADLE_F32)
            LADLE_LAUNCH(scale_c_kernel<float>, blocks, LADLE_CUDA_THREADS, 0, st, m, n,
                         (float)beta, (float *)c, ldc);
        else
            LADLE_LAUNCH(scale_c_kernel<double>, blocks, LADLE_CUDA_THREADS, 0, st, m, n,
                         beta, (double *)c, ldc);
        LADLE_CUDA_LAUNCHED("gemm");
        return LADLE_OK;
    }
    /* row-major C (m x n) is column-major C^T (n x m): C^T = op(B)^T op(A)^T */
    cublasHandle_t h = ladle__cuda(be)->blas;
    cublasOperation_t ob = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t oa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t e;
    if (dtype == LADLE_F32) {
        float al = (float)alpha, bt = (float)beta;
        e = cublasSgemm(h, ob, oa, (int)n, (int)m, (int)k, &al, (const float *)b, (int)ldb,
                        (const float *)a, (int)lda, &bt, (float *)c, (int)ldc);
        if (e != CUBLAS_STATUS_SUCCESS)
            return ladle__cuda_blas_fail(e, "gemm", "cublasSgemm");
    } else {
        e = cublasDgemm(h, ob, oa, (int)n, (int)m, (int)k, &alpha, (const double *)b,
                        (int)ldb, (const double *)a, (int)lda, &beta, (double *)c,
                        (int)ldc);
        if (e != CUBLAS_STATUS_SUCCESS)
            return ladle__cuda_blas_fail(e, "gemm", "cublasDgemm");
    }
    return LADLE_OK;
}

/* --- gemm_half --- */

namespace
{

/* k = 0 with a bf16 C: C = beta C in f32, rounded once (beta 0 writes
 * zeros and reads nothing) */
__global__ void scale_c16_kernel(int64_t m, int64_t n, float beta, uint16_t *c, int64_t ldc)
{
    LADLE_GRID_STRIDE(i, m * n)
    {
        uint16_t *p = c + (i / n) * ldc + i % n;
        *p = beta == 0.0f ? (uint16_t)0 : ladle__f32_to_bf16(ladle__bf16_to_f32(*p) * beta);
    }
}

} // namespace

ladle_status ladle__cuda_gemm_half(const ladle_backend *be, ladle_dtype ab, ladle_dtype ct,
                                   int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                                   double alpha, const void *a, int64_t lda, const void *b,
                                   int64_t ldb, double beta, void *c, int64_t ldc, void *ws)
{
    (void)ws;
    if (ab != LADLE_BF16 || (ct != LADLE_BF16 && ct != LADLE_F32))
        return ladle__raise(LADLE_ERR_DTYPE, "gemm_half",
                            "CUDA multiplies bf16 into bf16 or f32, not %s into %s",
                            ladle_dtype_name(ab), ladle_dtype_name(ct));
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||
        ldc > INT_MAX)
        return ladle__raise(LADLE_ERR_ARG, "gemm_half",
                            "a %lld x %lld x %lld product is beyond cuBLAS's int sizes",
                            (long long)m, (long long)n, (long long)k);
    if (m <= 0 || n <= 0)
        return LADLE_OK;
    cudaStream_t st = ladle__cuda_stream(be);
    if (k <= 0) {
        if (beta == 1.0)
            return LADLE_OK;
        unsigned blocks = ladle__cuda_blocks(be, m * n, LADLE_CUDA_THREADS);
        if (ct == LADLE_BF16)
            LADLE_LAUNCH(scale_c16_kernel, blocks, LADLE_CUDA_THREADS, 0, st, m, n,
                         (float)beta, (uint16_t *)c, ldc);
        else
            LADLE_LAUNCH(scale_c_kernel<float>, blocks, LADLE_CUDA_THREADS, 0, st, m, n,
                         (float)beta, (float *)c, ldc);
        LADLE_CUDA_LAUNCHED("gemm_half");
        return LADLE_OK;
    }
    /* as gemm: C^T = op(B)^T op(A)^T in cuBLAS's column-major terms. f32
     * compute type, scalars in f32; CUBLAS_COMPUTE_32F (not its FAST_TF32
     * twin) keeps the products exact and the sums in f32. */
    cublasHandle_t h = ladle__cuda(be)->blas;
    cublasOperation_t ob = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t oa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    float al = (float)alpha, bt = (float)beta;
    cublasStatus_t e =
        cublasGemmEx(h, ob, oa, (int)n, (int)m, (int)k, &al, b, CUDA_R_16BF, (int)ldb, a,
                     CUDA_R_16BF, (int)lda, &bt, c, ct == LADLE_BF16 ? CUDA_R_16BF : CUDA_R_32F,
                     (int)ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (e != CUBLAS_STATUS_SUCCESS)
        return ladle__cuda_blas_fail(e, "gemm_half", "cublasGemmEx");
    return LADLE_OK;
}

ladle_status ladle__cuda_gemm_half_ws(const ladle_backend *be, ladle_dtype ab, ladle_dtype ct,
                                      int trans_a, int trans_b, int64_t m, int64_t n,
                                      int64_t k, size_t *bytes)
{
    (void)be, (void)ab, (void)ct, (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k;
    *bytes = 0; /* cuBLAS keeps its own workspace */
    return LADLE_OK;
}
