/*
 * The CUDA emulator: the part of the CUDA runtime, of cuBLAS and of the
 * kernel language that ladle's CUDA backend uses, implemented on the host,
 * so that the backend's own sources (the .cu files of src/backends/cuda/) compile with
 * g++ and run where there is no GPU. `make CUDA=emu` builds ladle that way;
 * make check runs the suite on it. It is a test double, never shipped in a
 * real build, and like a driver it keeps process-wide state (its devices,
 * streams, allocations and sticky error), behind one lock.
 *
 * What it checks that a plain host build would not:
 *   - Streams run late. Work queued on a stream (kernels, copies, memsets,
 *     cuBLAS calls) runs only when the host waits for it (a stream, event
 *     or device synchronisation, a synchronous copy, a free) or when
 *     another stream waits on one of its events; so host code that reads a
 *     copy's result, or reuses its source, without waiting sees stale data,
 *     as it could on a GPU.
 *   - Kernels run their threads in order, one block after another; a
 *     kernel launched with LADLE_LAUNCH_SYNC runs each thread as a fiber
 *     that stops at every __syncthreads() until the block's other threads
 *     get there, so shared memory behaves as on a GPU and a missing barrier
 *     reads stale values. __syncthreads() in a kernel launched with plain
 *     LADLE_LAUNCH is a programming error and stops the program.
 *   - cudaMalloc'd memory starts as garbage (NaN bytes) and has guard zones
 *     before and after it, checked at every free and synchronisation; a
 *     write outside an allocation becomes cudaErrorIllegalAddress, sticky
 *     as on a GPU. Copies check that their device side is device memory.
 *   - Launch configurations are checked as CUDA does (at most 1024 threads
 *     a block, grid extents, 48 KiB of dynamic shared memory).
 *   - Faults on demand, from the environment: LADLE_EMU_DEVICES (how many
 *     GPUs, default 1; 0 means none), LADLE_EMU_MEMORY (bytes of device
 *     memory, default 8 GiB), LADLE_EMU_FAULT=N (the N-th kernel launch
 *     from when the variable is first seen set faults: a sticky
 *     cudaErrorLaunchFailure at the next synchronisation),
 *     LADLE_EMU_REVERSE=1 (threads of a block run last to first).
 *
 * What it cannot check: races between threads outside barriers, warp-level
 * behaviour (warp intrinsics are not provided, so a kernel using one does
 * not compile here), a host pointer handed to a kernel, and speed.
 */
#ifndef LADLE_CUDA_EMU_H
#define LADLE_CUDA_EMU_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

/* ---- the kernel language ---- */

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
/* one copy per kernel function: blocks run one after another */
#define __shared__ static

struct uint3 {
    unsigned x, y, z;
};

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace ladle_emu {
struct thread_ctx {
    uint3 tid, bid;
    dim3 bdim, gdim;
};
extern thread_local thread_ctx cur;
void syncthreads();
void *dyn_shared();
} // namespace ladle_emu

#define threadIdx (::ladle_emu::cur.tid)
#define blockIdx (::ladle_emu::cur.bid)
#define blockDim (::ladle_emu::cur.bdim)
#define gridDim (::ladle_emu::cur.gdim)
constexpr int warpSize = 32;
#define __syncthreads() ::ladle_emu::syncthreads()
#define __threadfence() ((void)0)

/* Rounded arithmetic that is never contracted into a fused multiply-add. */
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
static inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
static inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
template <class T> static inline T __ldg(const T *p) { return *p; }

/* Atomics: threads never run at the same time here. */
template <class T> static inline T atomicAdd(T *p, T v)
{
    T old = *p;
    *p = old + v;
    return old;
}
template <class T> static inline T atomicMax(T *p, T v)
{
    T old = *p;
    *p = old < v ? v : old;
    return old;
}
template <class T> static inline T atomicMin(T *p, T v)
{
    T old = *p;
    *p = v < old ? v : old;
    return old;
}
template <class T> static inline T atomicExch(T *p, T v)
{
    T old = *p;
    *p = v;
    return old;
}
template <class T> static inline T atomicCAS(T *p, T cmp, T v)
{
    T old = *p;
    if (old == cmp)
        *p = v;
    return old;
}

/* ---- the runtime ---- */

enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchFailure = 719
};
typedef enum cudaError cudaError_t;

typedef struct ladle_emu_stream *cudaStream_t;
typedef struct ladle_emu_event *cudaEvent_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};

enum cudaMemoryType {
    cudaMemoryTypeUnregistered = 0,
    cudaMemoryTypeHost = 1,
    cudaMemoryTypeDevice = 2,
    cudaMemoryTypeManaged = 3
};

struct cudaPointerAttributes {
    enum cudaMemoryType type;
    int device;
    void *devicePointer;
    void *hostPointer;
};

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int multiProcessorCount;
    int major, minor;
    int l2CacheSize;
    int pciBusID;
};

enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device);
cudaError_t cudaDriverGetVersion(int *version);
cudaError_t cudaRuntimeGetVersion(int *version);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaMalloc(void **ptr, size_t bytes);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMallocHost(void **ptr, size_t bytes);
cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned flags);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *attr, const void *ptr);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream);
cudaError_t cudaMemset(void *ptr, int value, size_t bytes);
cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags);
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorString(cudaError_t error);
const char *cudaGetErrorName(cudaError_t error);

namespace ladle_emu {
/* Queue a launch of body for every thread of grid x block on stream. */
cudaError_t launch(bool barriers, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                   std::function<void()> body);

/* Convert the arguments to the kernel's parameter types now, as a launch
 * does, and queue the calls. */
/* For the emulated cuBLAS: queue any host work on a stream, and ask whether
 * [p, p + bytes) lies inside one device allocation. */
cudaError_t enqueue(cudaStream_t stream, std::function<void()> work);
bool is_device(const void *p, size_t bytes);
/* Queued work that met a bad address kills the context, as on a GPU. */
void fault(const char *what);

template <class... P, class... A>
cudaError_t launch_kernel(bool barriers, dim3 grid, dim3 block, size_t shmem,
                          cudaStream_t stream, void (*kernel)(P...), A &&...args)
{
    std::tuple<typename std::decay<P>::type...> held(std::forward<A>(args)...);
    return launch(barriers, grid, block, shmem, stream,
                  [kernel, held]() { std::apply(kernel, held); });
}
} // namespace ladle_emu

/* ---- cuBLAS ---- */

typedef struct ladle_emu_blas *cublasHandle_t;

enum cublasStatus_t {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15
};

/* The element types and compute types cublasGemmEx is given here (the
 * values are CUDA's); the emulator multiplies bf16 into bf16 or f32 with
 * f32 compute only, and says NOT_SUPPORTED to the rest. */
typedef enum cudaDataType_t {
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
    CUDA_R_16F = 2,
    CUDA_R_16BF = 14
} cudaDataType;

typedef enum {
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77
} cublasComputeType_t;

typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;

enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };

enum cublasMath_t {
    CUBLAS_DEFAULT_MATH = 0,
    CUBLAS_TENSOR_OP_MATH = 1,
    CUBLAS_PEDANTIC_MATH = 2,
    CUBLAS_TF32_TENSOR_OP_MATH = 3
};

cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode);
const char *cublasGetStatusString(cublasStatus_t status);
const char *cublasGetStatusName(cublasStatus_t status);
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                           int m, int n, int k, const float *alpha, const float *a, int lda,
                           const float *b, int ldb, const float *beta, float *c, int ldc);
cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                           int m, int n, int k, const double *alpha, const double *a, int lda,
                           const double *b, int ldb, const double *beta, double *c, int ldc);
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                            int m, int n, int k, const void *alpha, const void *a,
                            cudaDataType at, int lda, const void *b, cudaDataType bt, int ldb,
                            const void *beta, void *c, cudaDataType ct, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo);

#endif /* LADLE_CUDA_EMU_H */
