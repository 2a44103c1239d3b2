/*
 * The CUDA backend: its table, its instance, and the calls of ladle/device.h
 * that the registry hands to it (choosing the GPU, the options).
 *
 * The process has one instance, as it has one CUDA context on its GPU: one
 * stream that every CUDA tensor's work is queued on, in call order, one
 * cuBLAS handle on that stream, and the scratch of the synchronous slots.
 * It is opened at the first use of the device (a tensor or an op there),
 * under a lock, and lives as long as the process, like the context; this
 * and the choices made before it opens are the backend's only process-wide
 * state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/backends/cuda/cuda.h"

#if defined(OPEN_MPI) && OPEN_MPI && defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

static const ladle_backend_table cuda_table = {
    .version = LADLE_BACKEND_VERSION,
    .name = "cuda",
    /* memory */
    .alloc = ladle__cuda_alloc,
    .free = ladle__cuda_free,
    .host_alloc = ladle__cuda_host_alloc,
    .host_free = ladle__cuda_host_free,
    .to_device = ladle__cuda_to_device,
    .to_host = ladle__cuda_to_host,
    /* order */
    .synchronize = ladle__cuda_synchronize,
    .event_create = ladle__cuda_event_create,
    .event_destroy = ladle__cuda_event_destroy,
    .event_record = ladle__cuda_event_record,
    .event_wait = ladle__cuda_event_wait,
    .event_sync = ladle__cuda_event_sync,
    /* copies and boxes */
    .copy = ladle__cuda_copy,
    .copy_box = ladle__cuda_copy_box,
    .pack = ladle__cuda_pack,
    .unpack = ladle__cuda_unpack,
    /* vectors */
    .add = ladle__cuda_add,
    .axpy = ladle__cuda_axpy,
    .dot2 = ladle__cuda_dot2,
    .scal = ladle__cuda_scal,
    .abs_max = ladle__cuda_abs_max,
    .fill = ladle__cuda_fill,
    /* random fills */
    .fill_random = ladle__cuda_fill_random,
    .fill_init = ladle__cuda_fill_init,
    /* dense linear algebra */
    .gemm = ladle__cuda_gemm,
    /* activations and softmax */
    .act_forward = ladle__cuda_act_forward,
    .act_backward = ladle__cuda_act_backward,
    .softmax_forward = ladle__cuda_softmax_forward,
    .softmax_backward = ladle__cuda_softmax_backward,
    /* losses */
    .loss_forward = ladle__cuda_loss_forward,
    .loss_backward = ladle__cuda_loss_backward,
    .find_outside = ladle__cuda_find_outside,
    .find_non_finite = ladle__cuda_find_non_finite,
    /* dropout */
    .dropout = ladle__cuda_dropout,
    /* batch norm */
    .bn_moment = ladle__cuda_bn_moment,
    .bn_dsums = ladle__cuda_bn_dsums,
    .bn_affine = ladle__cuda_bn_affine,
    /* pooling */
    .pool_plan = ladle__cuda_pool_plan,
    .pool_setup = ladle__cuda_pool_setup,
    .pool_forward = ladle__cuda_pool_forward,
    .pool_backward = ladle__cuda_pool_backward,
    /* convolution: im2col, the wide path, bias */
    .conv_im2col = ladle__cuda_conv_im2col,
    .conv_col2im = ladle__cuda_conv_col2im,
    .conv_wide_im2col = ladle__cuda_conv_wide_im2col,
    .conv_wide_grid = ladle__cuda_conv_wide_grid,
    .bias_add = ladle__cuda_bias_add,
    .bias_grad = ladle__cuda_bias_grad,
    /* optimizer updates */
    .optim_step = ladle__cuda_optim_step,
    /* revision 2 */
    .event_query = ladle__cuda_event_query,
    .check_pointer = ladle__cuda_check_pointer,
    .health = ladle__cuda_health,
    /* revision 3 */
    .interp_forward = ladle__cuda_interp_forward,
    .interp_backward = ladle__cuda_interp_backward,
    /* revision 4 */
    .loss_weight_sum = ladle__cuda_loss_weight_sum,
    .adaptive_pool_forward = ladle__cuda_adaptive_pool_forward,
    .adaptive_pool_backward = ladle__cuda_adaptive_pool_backward,
    .norm_forward = ladle__cuda_norm_forward,
    .norm_backward = ladle__cuda_norm_backward,
    .norm_weight_grad = ladle__cuda_norm_weight_grad,
    .embed_forward = ladle__cuda_embed_forward,
    .embed_backward = ladle__cuda_embed_backward,
    /* revision 5 */
    .attn_forward = ladle__cuda_attn_forward,
    .attn_backward = ladle__cuda_attn_backward,
    /* revision 9 */
    .lse_rows = ladle__cuda_lse_rows,
    .exp_rows = ladle__cuda_exp_rows,
    /* revision 10 */
    .adaptive_max_forward = ladle__cuda_adaptive_max_forward,
    .adaptive_max_backward = ladle__cuda_adaptive_max_backward,
    /* revision 11 */
    .convert = ladle__cuda_convert,
    /* revision 12 */
    .gemm_half = ladle__cuda_gemm_half,
    .gemm_half_ws = ladle__cuda_gemm_half_ws,
};

static ladle_cuda_state cuda_state = {
    .device = -1,
    .scratch_lock = PTHREAD_MUTEX_INITIALIZER,
};

static ladle_backend cuda_instance = {
    .fn = &cuda_table,
    .device = LADLE_CUDA,
    .host_access = 0,
    .mpi_access = 0,
    .queue = NULL,
    .state = &cuda_state,
    .async = 1,
};

/* What the process chose before the device opened, and whether it has. */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static int opened = 0;
static int chosen = -1;     /* ladle_device_select's index, or -1 */
static int tf32_choice = -1, mpi_choice = -1; /* ladle_device_set's, or -1 */

ladle_status ladle__cuda_fail(cudaError_t e, const char *slot, const char *what)
{
    return ladle__raise(e == cudaErrorMemoryAllocation ? LADLE_ERR_ALLOC : LADLE_ERR_DEVICE,
                        slot, "cuda:%d: %s failed: %s (%s)", cuda_state.device, what,
                        cudaGetErrorString(e), cudaGetErrorName(e));
}

ladle_status ladle__cuda_blas_fail(cublasStatus_t e, const char *slot, const char *what)
{
    return ladle__raise(e == CUBLAS_STATUS_ALLOC_FAILED ? LADLE_ERR_ALLOC : LADLE_ERR_DEVICE,
                        slot, "cuda:%d: %s failed: %s (%s)", cuda_state.device, what,
                        cublasGetStatusString(e), cublasGetStatusName(e));
}

ladle_status ladle__cuda_launched(const char *slot)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? LADLE_OK : ladle__cuda_fail(e, slot, "a kernel");
}

/* A whole non-negative integer from the environment, or -1 (unset); -2
 * when it is set to anything else. */
static long env_index(const char *name)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0')
        return -1;
    char *end = NULL;
    long x = strtol(v, &end, 10);
    return end != v && *end == '\0' && x >= 0 && x < 1L << 30 ? x : -2;
}

/* The GPU this process takes (ladle/device.h says the order). */
static ladle_status choose(const char *func, int count, int *index)
{
    static const char *const local_rank[] = {"MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK",
                                             "SLURM_LOCALID", "PMI_LOCAL_RANK"};
    if (chosen >= 0) {
        if (chosen >= count)
            return ladle__raise(LADLE_ERR_DEVICE, func,
                                "cuda: ladle_device_select chose GPU %d, but there %s %d",
                                chosen, count == 1 ? "is" : "are", count);
        *index = chosen;
        return LADLE_OK;
    }
    long v = env_index("LADLE_CUDA_DEVICE");
    if (v == -2 || v >= count)
        return ladle__raise(LADLE_ERR_DEVICE, func,
                            "cuda: LADLE_CUDA_DEVICE=%s names no GPU (0 to %d)",
                            getenv("LADLE_CUDA_DEVICE"), count - 1);
    if (v >= 0) {
        *index = (int)v;
        return LADLE_OK;
    }
    for (size_t i = 0; i < sizeof local_rank / sizeof local_rank[0]; i++) {
        v = env_index(local_rank[i]);
        if (v >= 0) {
            *index = (int)(v % count);
            return LADLE_OK;
        }
    }
    int rank = 0;
    if (ladle__mpi_usable())
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    *index = rank % count;
    return LADLE_OK;
}

/* Whether the MPI library reads and writes CUDA memory itself. */
static int mpi_device_aware(void)
{
    if (!ladle__mpi_usable())
        return 0;
#if defined(MPIX_GPU_SUPPORT_CUDA)
    int ok = 0;
    return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &ok) == MPI_SUCCESS && ok;
#elif defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return MPIX_Query_cuda_support();
#else
    return 0;
#endif
}

/* The option's setting: the call's, else the environment's, else dflt. */
static int setting(int choice, const char *env, const char *yes, const char *no, int dflt)
{
    const char *v = getenv(env);
    if (choice >= 0)
        return choice;
    if (v != NULL && strcmp(v, yes) == 0)
        return 1;
    if (v != NULL && strcmp(v, no) == 0)
        return 0;
    return dflt;
}

static void close_partial(ladle_cuda_state *cs)
{
    if (cs->host_scratch != NULL)
        cudaFreeHost(cs->host_scratch);
    if (cs->scratch != NULL)
        cudaFree(cs->scratch);
    if (cs->blas != NULL)
        cublasDestroy(cs->blas);
    if (cs->stream != NULL)
        cudaStreamDestroy(cs->stream);
    cs->host_scratch = cs->scratch = NULL;
    cs->blas = NULL;
    cs->stream = NULL;
    cs->device = -1;
}

#define OPEN_TRY(expr)                                                                     \
    do {                                                                                   \
        cudaError_t e_ = (expr);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            st = ladle__raise(e_ == cudaErrorMemoryAllocation ? LADLE_ERR_ALLOC            \
                                                              : LADLE_ERR_DEVICE,          \
                              func, "cuda:%d: %s failed: %s (%s)", cs->device, #expr,      \
                              cudaGetErrorString(e_), cudaGetErrorName(e_));               \
            goto fail;                                                                     \
        }                                                                                  \
    } while (0)

#define OPEN_BLAS(expr)                                                                    \
    do {                                                                                   \
        cublasStatus_t b_ = (expr);                                                        \
        if (b_ != CUBLAS_STATUS_SUCCESS) {                                                 \
            st = ladle__raise(LADLE_ERR_DEVICE, func, "cuda:%d: %s failed: %s (%s)",       \
                              cs->device, #expr, cublasGetStatusString(b_),                \
                              cublasGetStatusName(b_));                                    \
            goto fail;                                                                     \
        }                                                                                  \
    } while (0)

/* Open the instance: the GPU, its stream, cuBLAS, the scratch. Called
 * with open_lock held. */
static ladle_status open_instance(const char *func)
{
    ladle_cuda_state *cs = &cuda_state;
    ladle_status st = LADLE_OK;
    int count = 0, index = 0;
    cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        st = ladle__raise(LADLE_ERR_DEVICE, func, "cuda: no GPU to use: %s (%s)",
                          e != cudaSuccess ? cudaGetErrorString(e) : "the driver sees none",
                          cudaGetErrorName(e));
        cudaGetLastError(); /* the runtime need not remember it */
        return st;
    }
    LADLE_CALL(choose(func, count, &index));
    cs->device = index;
    OPEN_TRY(cudaSetDevice(index));
    OPEN_TRY(cudaGetDeviceProperties(&prop, index));
    snprintf(cs->name, sizeof cs->name, "%s", prop.name);
    cs->sm_count = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
    cs->major = prop.major;
    cs->minor = prop.minor;
    cs->memory_bytes = prop.totalGlobalMem;
    /* 8 blocks of 256 threads fill a multiprocessor's 2048 thread slots */
    cs->max_blocks = cs->sm_count * 8;
    OPEN_TRY(cudaStreamCreateWithFlags(&cs->stream, cudaStreamNonBlocking));
    OPEN_BLAS(cublasCreate(&cs->blas));
    OPEN_BLAS(cublasSetStream(cs->blas, cs->stream));
    cs->tf32 = setting(tf32_choice, "LADLE_CUDA_TF32", "1", "0", 0);
    OPEN_BLAS(cublasSetMathMode(cs->blas, cs->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                   : CUBLAS_DEFAULT_MATH));
    cs->scratch_bytes = LADLE_CUDA_SCRATCH_BYTES;
    OPEN_TRY(cudaMalloc(&cs->scratch, cs->scratch_bytes));
    OPEN_TRY(cudaHostAlloc(&cs->host_scratch, cs->scratch_bytes, cudaHostAllocPortable));
    memset(cs->host_scratch, 0, cs->scratch_bytes);
    cuda_instance.queue = cs->stream;
    cuda_instance.mpi_access =
        setting(mpi_choice, "LADLE_CUDA_MPI", "direct", "staged", mpi_device_aware());
    opened = 1;
fail:
    if (st != LADLE_OK)
        close_partial(cs);
    return st;
}

ladle_status ladle__cuda_open(const char *func, const ladle_backend **out)
{
    pthread_mutex_lock(&open_lock);
    ladle_status st = opened ? LADLE_OK : open_instance(func);
    pthread_mutex_unlock(&open_lock);
    *out = st == LADLE_OK ? &cuda_instance : NULL;
    return st;
}

const ladle_backend *ladle__cuda_opened(void)
{
    pthread_mutex_lock(&open_lock);
    const ladle_backend *be = opened ? &cuda_instance : NULL;
    pthread_mutex_unlock(&open_lock);
    return be;
}

ladle_status ladle__cuda_count(int *count)
{
    cudaError_t e = cudaGetDeviceCount(count);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
        cudaGetLastError();
        *count = 0;
        return LADLE_OK;
    }
    if (e != cudaSuccess)
        *count = 0;
    return e == cudaSuccess ? LADLE_OK : ladle__cuda_fail(e, "ladle_device_count",
                                                          "cudaGetDeviceCount");
}

ladle_status ladle__cuda_select(int index)
{
    const char *func = "ladle_device_select";
    ladle_status st = LADLE_OK;
    int count = 0;
    if (index < -1)
        return ladle__raise(LADLE_ERR_ARG, func, "GPU %d (an index from 0, or -1)", index);
    if (index >= 0) {
        LADLE_CALL(ladle__cuda_count(&count));
        LADLE_CHECK(count > 0, LADLE_ERR_DEVICE, "cuda: no GPU to use");
        LADLE_CHECK(index < count, LADLE_ERR_ARG, "GPU %d, but there %s %d", index,
                    count == 1 ? "is" : "are", count);
    }
    pthread_mutex_lock(&open_lock);
    if (!opened)
        chosen = index;
    else if (index != -1 && index != cuda_state.device)
        st = ladle__raise(LADLE_ERR_STATE, func,
                          "cuda:%d is in use already: choose the GPU before the first CUDA "
                          "tensor or op",
                          cuda_state.device);
    pthread_mutex_unlock(&open_lock);
fail:
    return st;
}

ladle_status ladle__cuda_index(int *index)
{
    const ladle_backend *be;
    ladle_status st = ladle__cuda_open("ladle_device_index", &be);
    *index = st == LADLE_OK ? cuda_state.device : -1;
    return st;
}

ladle_status ladle__cuda_describe(char *buf, size_t cap)
{
    const ladle_backend *be;
    ladle_status st = ladle__cuda_open("ladle_device_describe", &be);
    if (st != LADLE_OK)
        return st;
    snprintf(buf, cap, "cuda:%d %s (sm_%d%d, %d SMs, %.1f GiB), messages %s, TF32 %s",
             cuda_state.device, cuda_state.name, cuda_state.major, cuda_state.minor,
             cuda_state.sm_count, (double)cuda_state.memory_bytes / (1 << 30),
             be->mpi_access ? "handed to MPI in device memory"
                            : "staged through pinned host memory",
             cuda_state.tf32 ? "on" : "off");
    return LADLE_OK;
}

ladle_status ladle__cuda_set(int option, int value)
{
    ladle_status st = LADLE_OK;
    pthread_mutex_lock(&open_lock);
    if (option == LADLE_DEVICE_TF32) {
        tf32_choice = value;
        if (opened) {
            cublasStatus_t b = cublasSetMathMode(cuda_state.blas, value ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                        : CUBLAS_DEFAULT_MATH);
            if (b != CUBLAS_STATUS_SUCCESS)
                st = ladle__cuda_blas_fail(b, "ladle_device_set", "cublasSetMathMode");
            else
                cuda_state.tf32 = value;
        }
    } else if (value == 1 && !mpi_device_aware()) {
        st = ladle__raise(LADLE_ERR_UNSUPPORTED, "ladle_device_set",
                          "this MPI does not say it reads CUDA memory: messages stay staged "
                          "(LADLE_CUDA_MPI=direct forces it, at the MPI's risk)");
    } else {
        mpi_choice = value;
        if (opened)
            cuda_instance.mpi_access = value;
    }
    pthread_mutex_unlock(&open_lock);
    return st;
}

ladle_status ladle__cuda_get(int option, int *value)
{
    if (option == LADLE_DEVICE_TF32) {
        pthread_mutex_lock(&open_lock);
        *value = opened ? cuda_state.tf32 : setting(tf32_choice, "LADLE_CUDA_TF32", "1", "0", 0);
        pthread_mutex_unlock(&open_lock);
        return LADLE_OK;
    }
    const ladle_backend *be;
    ladle_status st = ladle__cuda_open("ladle_device_get", &be);
    *value = st == LADLE_OK ? be->mpi_access : 0;
    return st;
}
