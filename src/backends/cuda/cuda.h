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

/* cuda.cu: the instance (also named by the registry, src/core/backend.c) */
ladle_status ladle__cuda_open(const char *func, const ladle_backend **out);
const ladle_backend *ladle__cuda_opened(void);
ladle_status ladle__cuda_count(int *count);
ladle_status ladle__cuda_select(int index);
ladle_status ladle__cuda_index(int *index);
ladle_status ladle__cuda_describe(char *buf, size_t cap);
ladle_status ladle__cuda_set(int option, int value);
ladle_status ladle__cuda_get(int option, int *value);

/* memory.cu */
ladle_status ladle__cuda_alloc(const ladle_backend *be, size_t bytes, void **out);
ladle_status ladle__cuda_free(const ladle_backend *be, void *ptr);
ladle_status ladle__cuda_host_alloc(const ladle_backend *be, size_t bytes, void **out);
ladle_status ladle__cuda_host_free(const ladle_backend *be, void *ptr);
ladle_status ladle__cuda_to_device(const ladle_backend *be, size_t bytes, const void *host,
                                   void *dst);
ladle_status ladle__cuda_to_host(const ladle_backend *be, size_t bytes, const void *src,
                                 void *host);
ladle_status ladle__cuda_synchronize(const ladle_backend *be);
ladle_status ladle__cuda_event_create(const ladle_backend *be, void **event);
ladle_status ladle__cuda_event_destroy(const ladle_backend *be, void *event);
ladle_status ladle__cuda_event_record(const ladle_backend *be, void *event);
ladle_status ladle__cuda_event_wait(const ladle_backend *be, void *event);
ladle_status ladle__cuda_event_sync(const ladle_backend *be, void *event);
ladle_status ladle__cuda_event_query(const ladle_backend *be, void *event, int *done);
ladle_status ladle__cuda_check_pointer(const ladle_backend *be, const void *ptr, size_t bytes);
ladle_status ladle__cuda_health(const ladle_backend *be);

/* box.cu */
ladle_status ladle__cuda_copy(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                              const void *src, void *dst);
ladle_status ladle__cuda_copy_box(const ladle_backend *be, ladle_dtype dtype,
                                  ladle_box_mode mode, int ndim, const int64_t *ext,
                                  const void *src, const int64_t *sstr, void *dst,
                                  const int64_t *dstr);
ladle_status ladle__cuda_pack(const ladle_backend *be, ladle_dtype dtype, int ndim,
                              const int64_t *ext, const void *src, const int64_t *sstr,
                              void *dst);
ladle_status ladle__cuda_unpack(const ladle_backend *be, ladle_dtype dtype,
                                ladle_box_mode mode, int ndim, const int64_t *ext,
                                const void *src, void *dst, const int64_t *dstr);

/* blas.cu: vectors and GEMM */
ladle_status ladle__cuda_add(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                             const void *a, const void *b, void *c);
ladle_status ladle__cuda_axpy(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                              double alpha, const void *x, void *y);
ladle_status ladle__cuda_scal(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                              double alpha, void *x);
ladle_status ladle__cuda_abs_max(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                 const void *x, double *out);
ladle_status ladle__cuda_fill(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                              double value, void *x);
ladle_status ladle__cuda_dot2(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                              const void *x, const void *y, double out[2]);
ladle_status ladle__cuda_gemm(const ladle_backend *be, ladle_dtype dtype, int trans_a,
                              int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                              const void *a, int64_t lda, const void *b, int64_t ldb,
                              double beta, void *c, int64_t ldc);

/* random.cu */
ladle_status ladle__cuda_fill_random(const ladle_backend *be, ladle_dtype dtype, int ndim,
                                     const int64_t *shape, const int64_t *strides,
                                     uint64_t seed, uint64_t stream, void *x);
ladle_status ladle__cuda_fill_init(const ladle_backend *be, ladle_dtype dtype,
                                   const ladle_init_desc *d, void *x);

/* activation.cu, softmax.cu */
ladle_status ladle__cuda_act_forward(const ladle_backend *be, ladle_dtype dtype,
                                     ladle_activation kind, double slope, int64_t n,
                                     const void *x, void *y);
ladle_status ladle__cuda_act_backward(const ladle_backend *be, ladle_dtype dtype,
                                      ladle_activation kind, double slope, int64_t n,
                                      const void *x, const void *y, const void *dy, void *dx);
ladle_status ladle__cuda_softmax_forward(const ladle_backend *be, ladle_dtype dtype, int log,
                                         int64_t outer, int64_t len, int64_t inner,
                                         const void *x, void *y);
ladle_status ladle__cuda_softmax_backward(const ladle_backend *be, ladle_dtype dtype, int log,
                                          int64_t outer, int64_t len, int64_t inner,
                                          const void *y, const void *dy, void *dx);

/* loss.cu */
ladle_status ladle__cuda_loss_forward(const ladle_backend *be, ladle_dtype dtype,
                                      const ladle_loss_plan *l, const void *x,
                                      const void *target, void *out);
ladle_status ladle__cuda_loss_backward(const ladle_backend *be, ladle_dtype dtype,
                                       const ladle_loss_plan *l, const void *x,
                                       const void *target, const void *dloss, void *dx);
ladle_status ladle__cuda_find_outside(const ladle_backend *be, int64_t n, const int64_t *v,
                                      int64_t lo, int64_t hi, int64_t *first);
ladle_status ladle__cuda_find_non_finite(const ladle_backend *be, ladle_dtype dtype,
                                         int64_t n, const void *x, int64_t *first);

/* dropout.cu */
ladle_status ladle__cuda_dropout(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                 double p, uint64_t seed, uint64_t step, int64_t offset,
                                 const void *in, void *out);

/* batchnorm.cu */
ladle_status ladle__cuda_bn_moment(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                   int64_t c, int64_t inner, const void *x,
                                   const double *mean, double *s);
ladle_status ladle__cuda_bn_dsums(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                  int64_t c, int64_t inner, const void *x, const void *dy,
                                  const double *mean, double *s1, double *s2);
ladle_status ladle__cuda_bn_affine(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                   int64_t c, int64_t inner, const void *u, const void *w,
                                   void *out, const double *a, const double *b,
                                   const double *k);

/* pool.cu */
ladle_status ladle__cuda_pool_plan(const ladle_backend *be, ladle_dtype dtype,
                                   const ladle_pool_geom *g, size_t *ws_bytes,
                                   size_t *saved_bytes);
ladle_status ladle__cuda_pool_setup(const ladle_backend *be, ladle_dtype dtype,
                                    const ladle_pool_geom *g, void *ws);
ladle_status ladle__cuda_pool_forward(const ladle_backend *be, ladle_dtype dtype,
                                      const ladle_pool_geom *g, int64_t planes, const void *x,
                                      void *y, void *saved, void *ws);
ladle_status ladle__cuda_pool_backward(const ladle_backend *be, ladle_dtype dtype,
                                       const ladle_pool_geom *g, int64_t planes,
                                       const void *dy, void *dx, const void *saved,
                                       void *ws);

/* conv.cu */
ladle_status ladle__cuda_conv_im2col(const ladle_backend *be, ladle_dtype dtype,
                                     const ladle_conv_geom *geom, int64_t nb, const void *x,
                                     int64_t x_stride, void *col, int64_t ld, void *planes);
ladle_status ladle__cuda_conv_col2im(const ladle_backend *be, ladle_dtype dtype,
                                     const ladle_conv_geom *geom, int64_t nb, const void *col,
                                     int64_t ld, void *dx, int64_t dx_stride, void *planes);
ladle_status ladle__cuda_conv_wide_im2col(const ladle_backend *be, ladle_dtype dtype,
                                          const ladle_conv_geom *geom, int64_t nb,
                                          const void *x, int64_t x_stride, void *xpad,
                                          void *col, int64_t ld);
ladle_status ladle__cuda_conv_wide_grid(const ladle_backend *be, ladle_dtype dtype,
                                        const ladle_conv_geom *geom, int to_tensor,
                                        int64_t nb, void *grid, int64_t ld, void *t,
                                        int64_t t_stride);
ladle_status ladle__cuda_bias_add(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                                  int64_t channels, int64_t inner, const void *b, void *y);
ladle_status ladle__cuda_bias_grad(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                                   int64_t channels, int64_t inner, const void *dy,
                                   void *db);

/* optim.cu */
ladle_status ladle__cuda_optim_step(const ladle_backend *be, ladle_dtype dtype,
                                    const ladle_optimizer_desc *d, int64_t t, int64_t n,
                                    void *p, const void *g, void *s0, void *s1);

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
