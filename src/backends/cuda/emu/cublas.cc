/*
 * The emulated cuBLAS (see emu.h): column-major GEMM queued on the handle's
 * stream and computed by the host's BLAS, with cuBLAS's argument checks.
 * Under CUBLAS_TF32_TENSOR_OP_MATH single-precision inputs are rounded to
 * TF32 (10 mantissa bits) first, as tensor cores read them, so the option's
 * effect on accuracy shows here too.
 *
 * cublasGemmEx is emulated for bf16 A and B into a bf16 or f32 C with f32
 * compute, as a reference: the operands widened to f32 (exactly), one
 * sgemm (f32 products and sums), and a bf16 C rounded once at the end with
 * src/core/half.h's rounding to nearest even.
 */
#include "src/backends/cuda/emu/emu.h"

#include <cblas.h>

#include "src/core/half.h"

#include <vector>

struct ladle_emu_blas {
    cudaStream_t stream = nullptr;
    cublasMath_t mode = CUBLAS_DEFAULT_MATH;
};

cublasStatus_t cublasCreate(cublasHandle_t *handle)
{
    int n = 0;
    if (handle == nullptr)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    *handle = new ladle_emu_blas;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle)
{
    if (handle == nullptr)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream)
{
    if (handle == nullptr)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    if (handle == nullptr)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode != CUBLAS_DEFAULT_MATH && mode != CUBLAS_TENSOR_OP_MATH &&
        mode != CUBLAS_PEDANTIC_MATH && mode != CUBLAS_TF32_TENSOR_OP_MATH)
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode)
{
    if (handle == nullptr)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode == nullptr)
        return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle->mode;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    }
    return "unknown error";
}

namespace {

/* Elements spanned by a column-major rows x cols matrix with leading
 * dimension ld. */
size_t span(int rows, int cols, int ld)
{
    return rows == 0 || cols == 0 ? 0 : (size_t)ld * (size_t)(cols - 1) + (size_t)rows;
}

float tf32(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if ((u & 0x7f800000u) != 0x7f800000u) /* finite: round to nearest, 10 bits kept */
        u = (u + 0x1000u) & ~0x1fffu;
    memcpy(&v, &u, sizeof v);
    return v;
}

template <class T>
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                    int k, const T *alpha, const T *a, int lda, const T *b, int ldb,
                    const T *beta, T *c, int ldc)
{
    if (h == nullptr)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
    int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    if (m < 0 || n < 0 || k < 0 || (ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) ||
        (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T) || lda < (ar > 1 ? ar : 1) ||
        ldb < (br > 1 ? br : 1) || ldc < (m > 1 ? m : 1) || alpha == nullptr ||
        beta == nullptr)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    T al = *alpha, be = *beta; /* host pointer mode: read at the call */
    bool round = sizeof(T) == 4 && h->mode == CUBLAS_TF32_TENSOR_OP_MATH;
    cudaError_t e = ladle_emu::enqueue(h->stream, [=]() {
        size_t sa = span(ar, ac, lda), sb = span(br, bc, ldb), sc = span(m, n, ldc);
        if ((k > 0 && (!ladle_emu::is_device(a, sa * sizeof(T)) ||
                       !ladle_emu::is_device(b, sb * sizeof(T)))) ||
            !ladle_emu::is_device(c, sc * sizeof(T))) {
            ladle_emu::fault("cuBLAS GEMM: an operand is not device memory");
            return;
        }
        CBLAS_TRANSPOSE cta = ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
        CBLAS_TRANSPOSE ctb = tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
        if constexpr (sizeof(T) == 4) {
            std::vector<float> ra, rb;
            const float *pa = a, *pb = b;
            if (round) {
                ra.assign(a, a + sa);
                rb.assign(b, b + sb);
                for (float &v : ra)
                    v = tf32(v);
                for (float &v : rb)
                    v = tf32(v);
                pa = ra.data();
                pb = rb.data();
            }
            cblas_sgemm(CblasColMajor, cta, ctb, m, n, k, al, pa, lda, pb, ldb, be, c, ldc);
        } else {
            cblas_dgemm(CblasColMajor, cta, ctb, m, n, k, al, a, lda, b, ldb, be, c, ldc);
        }
    });
    return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

} // namespace

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                           int m, int n, int k, const float *alpha, const float *a, int lda,
                           const float *b, int ldb, const float *beta, float *c, int ldc)
{
    return gemm(handle, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                           int m, int n, int k, const double *alpha, const double *a, int lda,
                           const double *b, int ldb, const double *beta, double *c, int ldc)
{
    return gemm(handle, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                            int m, int n, int k, const void *alpha, const void *a,
                            cudaDataType at, int lda, const void *b, cudaDataType bt, int ldb,
                            const void *beta, void *c, cudaDataType ct, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    if (h == nullptr)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (at != CUDA_R_16BF || bt != CUDA_R_16BF || (ct != CUDA_R_16BF && ct != CUDA_R_32F) ||
        compute != CUBLAS_COMPUTE_32F || algo != CUBLAS_GEMM_DEFAULT)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
    int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    if (m < 0 || n < 0 || k < 0 || (ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) ||
        (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T) || lda < (ar > 1 ? ar : 1) ||
        ldb < (br > 1 ? br : 1) || ldc < (m > 1 ? m : 1) || alpha == nullptr ||
        beta == nullptr)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    float al = *(const float *)alpha, be = *(const float *)beta; /* host pointer mode */
    bool c16 = ct == CUDA_R_16BF;
    cudaError_t e = ladle_emu::enqueue(h->stream, [=]() {
        size_t sa = span(ar, ac, lda), sb = span(br, bc, ldb), sc = span(m, n, ldc);
        if ((k > 0 && (!ladle_emu::is_device(a, sa * 2) || !ladle_emu::is_device(b, sb * 2))) ||
            !ladle_emu::is_device(c, sc * (c16 ? 2 : 4))) {
            ladle_emu::fault("cuBLAS GemmEx: an operand is not device memory");
            return;
        }
        std::vector<float> wa(sa), wb(sb), wc;
        for (size_t i = 0; i < sa; i++)
            wa[i] = ladle__bf16_to_f32(((const uint16_t *)a)[i]);
        for (size_t i = 0; i < sb; i++)
            wb[i] = ladle__bf16_to_f32(((const uint16_t *)b)[i]);
        float *pc = (float *)c;
        if (c16) { /* beta 0 reads nothing: C may hold NaN bits */
            wc.assign(sc, 0.0f);
            if (be != 0.0f)
                for (size_t i = 0; i < sc; i++)
                    wc[i] = ladle__bf16_to_f32(((const uint16_t *)c)[i]);
            pc = wc.data();
        }
        CBLAS_TRANSPOSE cta = ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
        CBLAS_TRANSPOSE ctb = tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
        cblas_sgemm(CblasColMajor, cta, ctb, m, n, k, al, wa.data(), lda, wb.data(), ldb, be,
                    pc, ldc);
        if (c16) /* only the m x n elements: the padding between columns is kept */
            for (int j = 0; j < n; j++)
                for (int i = 0; i < m; i++)
                    ((uint16_t *)c)[(size_t)j * ldc + i] =
                        ladle__f32_to_bf16(wc[(size_t)j * ldc + i]);
    });
    return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
