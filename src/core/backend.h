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

/* Pooling's geometry (its slots are under "pooling" in the table). A plane
 * is one (sample, channel) of x or y: in[0] x in[1] x in[2] elements of x,
 * out[0] x out[1] x out[2] of y, row-major (a 1-d or 2-d pooling has unit
 * leading extents, kernel and stride 1, padding 0). Output o's window along
 * dimension a has taps t = 0 .. k[a]-1 at input index o s[a] - p[a] + t d[a];
 * taps outside [0, in[a]) are no part of it. */
typedef struct ladle_pool_geom {
    ladle_pool_kind kind;  /* LADLE_POOL_MAX or LADLE_POOL_AVG */
    int count_include_pad; /* average: the divisor counts the padding */
    int global;            /* average over the whole plane: k = in, out = 1 */
    int64_t in[3], out[3];
    int64_t k[3], s[3], p[3], d[3]; /* kernel, stride, padding, dilation (>= 1) */
} ladle_pool_geom;

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

    /* --- dense linear algebra --- */
    /* C = alpha op(A) op(B) + beta C, row-major, op = transpose if trans_* */
    ladle_status (*gemm)(const ladle_backend *be, ladle_dtype dtype, int trans_a, int trans_b,
                         int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                         int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                         int64_t ldc);

    /* --- activations and softmax --- */
    /* (CPU: src/backends/cpu/activation.c, softmax.c) */

    /* --- losses --- */
    /* (CPU: src/backends/cpu/loss.c) */

    /* --- dropout --- */
    /* (CPU: src/backends/cpu/dropout.c) */

    /* --- batch norm --- */
    /* (CPU: src/backends/cpu/batchnorm.c) */

    /* --- pooling --- */
    /* (CPU: src/backends/cpu/pool.c, pool_direct.c) */
    /* Max and average pooling of `planes` planes (ladle_pool_geom): x and
     * dx hold planes x in-plane elements, y and dy planes x out-plane, each
     * contiguous, plane after plane; no two of them overlap.
     *
     * Max: y[o] is the largest valid tap of o's window; of equal values the
     * first in row-major tap order wins, and a NaN wins over any number
     * (the first NaN stays); a window without valid taps gives -inf and no
     * winner. The backward overwrites dx with zeros plus, at each winner,
     * the dy of the outputs it won.
     * Average: y[o] is the sum of the valid taps times r0 r1 r2, where r[a]
     * is 1 / (e - b) with b = o s[a] - p[a] and e = min(b + k[a], in[a] +
     * p[a]) when count_include_pad, else 1 / (min(e, in[a]) - max(b, 0))
     * (0 when that is empty); the backward overwrites dx with its adjoint,
     * dx[i] = sum over the windows o holding tap i of dy[o] r0 r1 r2.
     * Global: y = the plane's sum (in double) / its size; dx = dy / size.
     *
     * What the backend precomputes for a geometry and dtype (tables, the
     * kernels' scratch) lives in a workspace the caller allocates once:
     * pool_plan says its size in bytes (ws_bytes) and the bytes per plane of
     * the winners a max forward saves for its backward (saved_bytes; 0 for
     * average); pool_setup fills it (at plan time, not in a forward). The
     * forward and backward use the workspace as scratch: calls sharing one
     * must not overlap in time. The saved winners are the backend's own
     * format, planes x saved_bytes of device memory: the forward writes them
     * unless saved is NULL, the max backward reads those of the forward over
     * the same planes (average ignores saved). g is the geometry given to
     * pool_setup. */
    ladle_status (*pool_plan)(const ladle_backend *be, ladle_dtype dtype,
                              const ladle_pool_geom *g, size_t *ws_bytes, size_t *saved_bytes);
    ladle_status (*pool_setup)(const ladle_backend *be, ladle_dtype dtype,
                               const ladle_pool_geom *g, void *ws);
    ladle_status (*pool_forward)(const ladle_backend *be, ladle_dtype dtype,
                                 const ladle_pool_geom *g, int64_t planes, const void *x,
                                 void *y, void *saved, void *ws);
    ladle_status (*pool_backward)(const ladle_backend *be, ladle_dtype dtype,
                                  const ladle_pool_geom *g, int64_t planes, const void *dy,
                                  void *dx, const void *saved, void *ws);

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
