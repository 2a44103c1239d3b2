/*
 * The backend contract: every kernel ladle runs on tensor data is a slot of
 * a table, and a device backend is a table filled for that device. Callers
 * hold a backend *instance* (the table, the device, and what the device
 * needs to queue work: a stream, library handles) and call
 *
 *     LADLE_CALL(be->fn->gemm(be, ...));
 *
 * Every slot takes the instance first and returns ladle_status, so a kernel
 * launch can fail with the device's reason and can be queued on the
 * instance's stream. Slots run in order on the instance's queue; the host
 * sees their results only after `synchronize` (the CPU backend runs each
 * slot to completion, so for it every result is there on return).
 *
 * Pointers given to a slot are device memory of the instance's device
 * unless the slot says host. Sizes are element counts unless named bytes;
 * strides are in elements. The table only grows (LADLE_BACKEND_VERSION
 * counts its revisions); slots marked optional may be NULL, and the
 * ladle__be_* helpers below give them their meaning then.
 *
 * A kernel family's slots take plain data: sizes, strides, scalars, and the
 * small descriptor structs defined here (never a layer's own struct), so a
 * device backend can launch them without knowing any layer. Planning stays
 * in the layer: a slot gets everything already checked and sized.
 */
#ifndef LADLE_BACKEND_H
#define LADLE_BACKEND_H

#include "src/core/internal.h"

#define LADLE_BACKEND_VERSION 1

/* What a box kernel does with each element pair. */
typedef enum ladle_box_mode {
    LADLE_BOX_COPY = 0, /* dst = src */
    LADLE_BOX_ADD = 1,  /* dst += src */
    LADLE_BOX_ZERO = 2  /* dst = 0 (src unused) */
} ladle_box_mode;

/* A random initialisation (the fill_init slot): a box of a tensor, the
 * box's place in the whole tensor, and the distribution. */
typedef struct ladle_init_desc {
    int ndim;
    int64_t shape[LADLE_MAX_NDIM];   /* the box's extents */
    int64_t strides[LADLE_MAX_NDIM]; /* its strides in x */
    int64_t global[LADLE_MAX_NDIM];  /* the whole tensor's extents */
    int64_t offset[LADLE_MAX_NDIM];  /* the box's first index in it */
    int gaussian;                    /* normal values, else uniform in [-1, 1) */
    double scale;                    /* the values' factor: sigma or the bound */
    uint64_t seed, stream;
} ladle_init_desc;

/* A loss as its kernels see it (the loss slots). */
typedef struct ladle_loss_desc {
    ladle_loss_kind kind;
    ladle_reduction reduction;
    double smoothing;        /* cross entropy's label smoothing e, in [0, 1] */
    int64_t classes, inner;  /* classification: C and the product of S...; else 1, 1 */
    int64_t numel;           /* elements of x */
    double divisor;          /* what the mean or sum divides by (1 for sum) */
} ladle_loss_desc;

typedef struct ladle_backend ladle_backend;
typedef struct ladle_backend_table ladle_backend_table;

/* One backend instance: a device and its queue. */
struct ladle_backend {
    const ladle_backend_table *fn;
    ladle_device device;
    /* host code and MPI may read and write this device's memory directly
     * (the CPU); otherwise data crosses to the host only through the copy
     * slots (a GPU, the guarded test device) */
    int host_access;
    void *queue; /* the device's stream or queue (NULL on the CPU) */
    void *state; /* the backend's own: library handles, the device index */
};

struct ladle_backend_table {
    int version; /* LADLE_BACKEND_VERSION of the table's author */
    const char *name;

    /* --- memory --- */
    /* Device memory that is zeroed (and so touched) before it is returned;
     * *out is NULL for 0 bytes. */
    ladle_status (*alloc)(const ladle_backend *be, size_t bytes, void **out);
    ladle_status (*free)(const ladle_backend *be, void *ptr); /* NULL is fine */
    /* Host memory the device copies to and from fastest (pinned), zeroed;
     * optional: NULL means plain host memory. */
    ladle_status (*host_alloc)(const ladle_backend *be, size_t bytes, void **out);
    ladle_status (*host_free)(const ladle_backend *be, void *ptr);
    /* bytes from host to device and back (queued; the host buffer must stay
     * until the copy is done: after synchronize or a recorded event) */
    ladle_status (*to_device)(const ladle_backend *be, size_t bytes, const void *host,
                              void *dst);
    ladle_status (*to_host)(const ladle_backend *be, size_t bytes, const void *src,
                            void *host);

    /* --- order --- */
    /* Wait until everything queued has finished. */
    ladle_status (*synchronize)(const ladle_backend *be);
    /* Events (optional: NULL on a backend whose slots finish on return):
     * record marks the queue's current point, wait makes the queue wait for
     * an event (of any instance of the same backend), sync makes the host
     * wait for it. */
    ladle_status (*event_create)(const ladle_backend *be, void **event);
    ladle_status (*event_destroy)(const ladle_backend *be, void *event);
    ladle_status (*event_record)(const ladle_backend *be, void *event);
    ladle_status (*event_wait)(const ladle_backend *be, void *event);
    ladle_status (*event_sync)(const ladle_backend *be, void *event);

    /* --- copies and boxes --- */
    /* Contiguous copy of n elements (memmove semantics). */
    ladle_status (*copy)(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                         const void *src, void *dst);
    /* A box of extents ext[0..ndim-1] read with strides sstr from src and
     * written with strides dstr into dst. */
    ladle_status (*copy_box)(const ladle_backend *be, ladle_dtype dtype, ladle_box_mode mode,
                             int ndim, const int64_t *ext, const void *src,
                             const int64_t *sstr, void *dst, const int64_t *dstr);
    /* Gather a strided box into contiguous dst, and scatter (or add)
     * contiguous src into a strided box. */
    ladle_status (*pack)(const ladle_backend *be, ladle_dtype dtype, int ndim,
                         const int64_t *ext, const void *src, const int64_t *sstr, void *dst);
    ladle_status (*unpack)(const ladle_backend *be, ladle_dtype dtype, ladle_box_mode mode,
                           int ndim, const int64_t *ext, const void *src, void *dst,
                           const int64_t *dstr);

    /* --- vectors --- */
    /* c = a + b, elementwise over n elements (c may alias a or b). */
    ladle_status (*add)(const ladle_backend *be, ladle_dtype dtype, int64_t n, const void *a,
                        const void *b, void *c);
    /* y += alpha * x */
    ladle_status (*axpy)(const ladle_backend *be, ladle_dtype dtype, int64_t n, double alpha,
                         const void *x, void *y);
    /* sum of x[i] * y[i] as an unevaluated pair (hi, lo) in host memory:
     * hi + lo carries about twice double precision (synchronous) */
    ladle_status (*dot2)(const ladle_backend *be, ladle_dtype dtype, int64_t n, const void *x,
                         const void *y, double out[2]);
    /* x[i] *= alpha (in dtype: an f32 x is multiplied by (float)alpha) */
    ladle_status (*scal)(const ladle_backend *be, ladle_dtype dtype, int64_t n, double alpha,
                         void *x);
    /* max |x[i]| into *out (host memory, synchronous); NaN elements are
     * skipped, as fmax does, and 0 for n = 0 */
    ladle_status (*abs_max)(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                            const void *x, double *out);
    /* x[i] = value */
    ladle_status (*fill)(const ladle_backend *be, ladle_dtype dtype, int64_t n, double value,
                         void *x);

    /* --- random fills --- */
    /* Element i (row-major over shape) of the strided box x becomes
     * ladle__random_uniform(seed, stream, i), uniform in [-1, 1): the same
     * values on every device and rank count. */
    ladle_status (*fill_random)(const ladle_backend *be, ladle_dtype dtype, int ndim,
                                const int64_t *shape, const int64_t *strides, uint64_t seed,
                                uint64_t stream, void *x);

    /* Element e of the box becomes d->scale * r(d->seed, d->stream, g) with g
     * the row-major index of (d->offset + e's index) in d->global and r
     * ladle__random_normal or ladle__random_uniform: every shard of a
     * tensor, on any device, gets the values the whole tensor would. */
    ladle_status (*fill_init)(const ladle_backend *be, ladle_dtype dtype,
                              const ladle_init_desc *d, void *x);

    /* --- dense linear algebra --- */
    /* C = alpha op(A) op(B) + beta C, row-major, op = transpose if trans_* */
    ladle_status (*gemm)(const ladle_backend *be, ladle_dtype dtype, int trans_a, int trans_b,
                         int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                         int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                         int64_t ldc);

    /* --- activations and softmax --- */
    /* (CPU: src/backends/cpu/activation.c, softmax.c) */
    /* y[i] = f(x[i]) over n elements, f the activation kind (slope is
     * LeakyReLU's, >= 0); y may alias x. */
    ladle_status (*act_forward)(const ladle_backend *be, ladle_dtype dtype,
                                ladle_activation kind, double slope, int64_t n, const void *x,
                                void *y);
    /* dx[i] = f'(x[i]) dy[i], given x and y = f(x): ReLU, LeakyReLU, sigmoid
     * and tanh read only y (x may then be y's storage, overwritten); GELU
     * reads both (Phi(x) = y / x where x is not tiny). dx may alias dy. */
    ladle_status (*act_backward)(const ladle_backend *be, ladle_dtype dtype,
                                 ladle_activation kind, double slope, int64_t n, const void *x,
                                 const void *y, const void *dy, void *dx);
    /* Softmax (log = 0) or log-softmax (log = 1) of x viewed as
     * [outer][len][inner], along len: y = exp(x - lse) or x - lse with lse
     * the row's log-sum-exp (computed stably, in double). y may alias x. */
    ladle_status (*softmax_forward)(const ladle_backend *be, ladle_dtype dtype, int log,
                                    int64_t outer, int64_t len, int64_t inner, const void *x,
                                    void *y);
    /* Its backward from y alone: dx = y (dy - sum(dy y)) for softmax,
     * dx = dy - exp(y) sum(dy) for log-softmax (sums along len, in double).
     * dx may alias dy. */
    ladle_status (*softmax_backward)(const ladle_backend *be, ladle_dtype dtype, int log,
                                     int64_t outer, int64_t len, int64_t inner, const void *y,
                                     const void *dy, void *dx);

    /* --- losses --- */
    /* (CPU: src/backends/cpu/loss.c) */
    /* The loss of x against target into out: every term (reduction none:
     * out has one value per element, or per sample for classification) or
     * out[0] = (sum of the terms) / l->divisor. Terms and sums in double:
     *   MSE (x - t)^2, L1 |x - t|, BCE with logits max(x, 0) - x t +
     *   log1p(exp(-|x|)); cross entropy -sum_c q_c (x_c - lse(x)) with
     *   q = (1 - e) onehot(label) + e / C; NLL -x_label.
     * Classification x is [N][C][inner] and target holds N * inner i64
     * labels already checked to lie in 0..C-1; regression target has x's
     * dtype and shape. */
    ladle_status (*loss_forward)(const ladle_backend *be, ladle_dtype dtype,
                                 const ladle_loss_desc *l, const void *x, const void *target,
                                 void *out);
    /* dx = dloss * d(loss)/dx: dloss holds one value per term (reduction
     * none) or one value, then divided by l->divisor. The gradients:
     * 2 (x - t), sign(x - t), sigmoid(x) - t, softmax(x)_c - q_c,
     * -[c == label]. */
    ladle_status (*loss_backward)(const ladle_backend *be, ladle_dtype dtype,
                                  const ladle_loss_desc *l, const void *x, const void *target,
                                  const void *dloss, void *dx);
    /* Scans whose answer goes to the host (synchronous): the index of the
     * first of n i64 values outside [lo, hi], and of the first of n values
     * that is not finite; -1 in *first (host memory) when there is none. */
    ladle_status (*find_outside)(const ladle_backend *be, int64_t n, const int64_t *v,
                                 int64_t lo, int64_t hi, int64_t *first);
    ladle_status (*find_non_finite)(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                    const void *x, int64_t *first);

    /* --- dropout --- */
    /* (CPU: src/backends/cpu/dropout.c) */
    /* out[i] = in[i] / (1 - p) where u >= p, else 0, with
     * u = (ladle__random_uniform(seed, step, offset + i) + 1) / 2: the mask
     * is a function of the global element index, the same on every device
     * and layout (scale 0 when p = 1). out may alias in. */
    ladle_status (*dropout)(const ladle_backend *be, ladle_dtype dtype, int64_t n, double p,
                            uint64_t seed, uint64_t step, int64_t offset, const void *in,
                            void *out);

    /* --- batch norm --- */
    /* (CPU: src/backends/cpu/batchnorm.c) */

    /* --- pooling --- */
    /* (CPU: src/backends/cpu/pool.c, pool_direct.c) */

    /* --- convolution: im2col, the wide path, bias --- */
    /* (CPU: src/backends/cpu/conv.c) */

    /* --- optimizer updates --- */
    /* (CPU: src/backends/cpu/optim.c) */
};

/* The default instance of a device's backend, or NULL if ladle was built
 * without it. */
const ladle_backend *ladle__backend(ladle_device device);

/* The same, raising LADLE_ERR_DEVICE (naming func) when there is none. */
ladle_status ladle__backend_get(ladle_device device, const char *func,
                                const ladle_backend **out);

/* The optional slots with their meaning when absent. */
ladle_status ladle__be_host_alloc(const ladle_backend *be, size_t bytes, void **out);
ladle_status ladle__be_host_free(const ladle_backend *be, void *ptr);
ladle_status ladle__be_event_create(const ladle_backend *be, void **event);
ladle_status ladle__be_event_destroy(const ladle_backend *be, void *event);
ladle_status ladle__be_event_record(const ladle_backend *be, void *event);
ladle_status ladle__be_event_wait(const ladle_backend *be, void *event);
ladle_status ladle__be_event_sync(const ladle_backend *be, void *event);

/* sum of x[i] * y[i], accumulated as dot2 does */
ladle_status ladle__be_dot(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                           const void *x, const void *y, double *out);

#endif /* LADLE_BACKEND_H */
