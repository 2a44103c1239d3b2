/* bench/gpu_raw.h's baselines: the CUDA runtime and cuBLAS, directly. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "bench/gpu_raw.h"

struct gpu_raw {
    cudaStream_t stream;
    cublasHandle_t blas;
    char why[256];
};

static int cuda_fail(gpu_raw *r, const char *call, cudaError_t e)
{
    if (r)
        snprintf(r->why, sizeof r->why, "%s: %s", call, cudaGetErrorString(e));
    return -1;
}

static int blas_fail(gpu_raw *r, const char *call, cublasStatus_t e)
{
    snprintf(r->why, sizeof r->why, "%s: cuBLAS status %d", call, (int)e);
    return -1;
}

#define RAW_TRY(call)                                                                      \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess)                                                             \
            return cuda_fail(r, #call, e_);                                                \
    } while (0)

int gpu_raw_open(int tf32, gpu_raw **out)
{
    gpu_raw *r = (gpu_raw *)calloc(1, sizeof *r);
    *out = r;
    if (r == NULL)
        return -1;
    RAW_TRY(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking));
    cublasStatus_t b = cublasCreate(&r->blas);
    if (b != CUBLAS_STATUS_SUCCESS)
        return blas_fail(r, "cublasCreate", b);
    b = cublasSetStream(r->blas, r->stream);
    if (b == CUBLAS_STATUS_SUCCESS)
        b = cublasSetMathMode(r->blas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    return b == CUBLAS_STATUS_SUCCESS ? 0 : blas_fail(r, "cublasSetMathMode", b);
}

void gpu_raw_close(gpu_raw **r)
{
    if (*r == NULL)
        return;
    if ((*r)->blas)
        cublasDestroy((*r)->blas);
    if ((*r)->stream)
        cudaStreamDestroy((*r)->stream);
    free(*r);
    *r = NULL;
}

const char *gpu_raw_error(const gpu_raw *r)
{
    return r ? r->why : "no memory for the raw baselines";
}

int gpu_raw_alloc(gpu_raw *r, size_t bytes, const void *host, void **dev)
{
    *dev = NULL;
    RAW_TRY(cudaMalloc(dev, bytes ? bytes : 1));
    if (host)
        RAW_TRY(cudaMemcpy(*dev, host, bytes, cudaMemcpyHostToDevice));
    return 0;
}

void gpu_raw_free(gpu_raw *r, void *dev)
{
    if (dev)
        cudaFree(dev);
}

int gpu_raw_host_alloc(gpu_raw *r, size_t bytes, void **host)
{
    *host = NULL;
    RAW_TRY(cudaMallocHost(host, bytes ? bytes : 1));
    return 0;
}

void gpu_raw_host_free(gpu_raw *r, void *host)
{
    if (host)
        cudaFreeHost(host);
}

int gpu_raw_sgemm(gpu_raw *r, int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a,
                  int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    /* row-major c = op(a) op(b) is column-major c^T = op(b)^T op(a)^T */
    const float one = 1.0f;
    const int64_t dims[6] = {m, n, k, lda, ldb, ldc};
    for (int i = 0; i < 6; i++)
        if (dims[i] < 0 || dims[i] > INT_MAX) {
            snprintf(r->why, sizeof r->why, "cublasSgemm: extent %lld outside 0..INT_MAX",
                     (long long)dims[i]);
            return -1;
        }
    cublasStatus_t e = cublasSgemm(r->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)k, &one,
                                   b, (int)ldb, a, (int)lda, &beta, c, (int)ldc);
    return e == CUBLAS_STATUS_SUCCESS ? 0 : blas_fail(r, "cublasSgemm", e);
}

int gpu_raw_copy(gpu_raw *r, void *dst, const void *src, size_t bytes)
{
    RAW_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, r->stream));
    return 0;
}

int gpu_raw_stage(gpu_raw *r, void *host, void *dev, size_t bytes)
{
    RAW_TRY(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, r->stream));
    RAW_TRY(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, r->stream));
    return 0;
}

int gpu_raw_sync(gpu_raw *r)
{
    RAW_TRY(cudaStreamSynchronize(r->stream));
    return 0;
}
