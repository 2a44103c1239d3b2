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

#ifdef __cplusplus
extern "C" {
#endif

#define LADLE_BACKEND_VERSION 9

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
typedef struct ladle_loss_plan {
    ladle_loss_kind kind;
    ladle_reduction reduction;
    double smoothing;        /* cross entropy's label smoothing e, in [0, 1] */
    int64_t classes, inner;  /* classification: C and the product of S...; else 1, 1 */
    int64_t numel;           /* elements of x */
    double divisor;          /* what the mean or sum divides by (1 for sum) */
    /* classification only (revision 4): C class weights w in host memory,
     * or NULL for all 1; labels equal to ignore_index, when ignore is
     * nonzero, count for nothing. Set only on devices with loss_weight_sum. */
    const double *weight;
    int64_t ignore_index;
    int ignore;
} ladle_loss_plan;

/* convolution: the geometry of one group of its column slots (see the
 * table). 1-D and 2-D convolutions have leading unit extents (in, out, k,
 * s, d 1; p 0). */
typedef struct ladle_conv_geom {
    int64_t cg, cog;                /* input and output channels of the group */
    int64_t in[3], out[3];          /* spatial extents (D, H, W) of an image and its output */
    int64_t k[3], s[3], p[3], d[3]; /* kernel, stride, zero padding, dilation */
} ladle_conv_geom;

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

/* Interpolation of planes (see ladle_interp_create). Per spatial
 * dimension a (lower dimensions of 1-d and 2-d data have extents 1), in[a]
 * and out[a] are the global extents the source coordinates come from; a
 * call works on the input box of x_n[a] indices from x_off[a] and writes
 * the output box of y_n[a] indices from y_off[a] (the whole extents with
 * offsets 0 for the sequential layer, a tile and the window it reads for
 * the distributed one). ratio[a] is (in - 1) / (out - 1) (0 when out is 1)
 * with align_corners, else in / out. */
typedef struct ladle_interp_geom {
    int linear;
    int align_corners;
    int64_t in[3], out[3];
    double ratio[3];
    int64_t x_off[3], x_n[3], y_off[3], y_n[3];
} ladle_interp_geom;

/* Adaptive average pooling of planes (see ladle_adaptive_avg_pool_create).
 * Per spatial dimension a (lower dimensions of 1-d and 2-d data have
 * extents 1), global output o of out[a] averages the global inputs of
 * in[a] in ladle__adaptive_window's [b, e). A call works on the input box
 * of x_n[a] indices from x_off[a] and writes the output box of y_n[a]
 * indices from y_off[a] (the whole extents with offsets 0 for the
 * sequential layer, a tile and the window it reads for the distributed
 * one). */
typedef struct ladle_adaptive_geom {
    int64_t in[3], out[3];
    int64_t x_off[3], x_n[3], y_off[3], y_n[3];
} ladle_adaptive_geom;

/* The window of output o of out over in inputs: [floor(o in / out),
 * ceil((o + 1) in / out)), never empty; exact for extents up to 2^31. */
static inline void ladle__adaptive_window(int64_t in, int64_t out, int64_t o, int64_t *b,
                                          int64_t *e)
{
    *b = o * in / out;
    *e = ((o + 1) * in + out - 1) / out;
}

/* The taps of global output index o along dimension a (global input
 * indices i[0] <= i[1]) and their weights: nearest reads i = floor(o in /
 * out) (i[1] = i[0], w = 1, 0); linear reads the source coordinate x = o
 * ratio (align_corners) or max((o + 1/2) ratio - 1/2, 0), i[0] = floor(x),
 * i[1] = min(i[0] + 1, in - 1), weights 1 - (x - i[0]) and x - i[0]. The
 * one definition the kernels and the distributed layer's windows share. */
static inline void ladle__interp_taps(const ladle_interp_geom *g, int a, int64_t o,
                                      int64_t i[2], double w[2])
{
    int64_t in = g->in[a];
    if (!g->linear) {
        int64_t k = o * in / g->out[a]; /* exact: o, in <= 2^31 */
        i[0] = i[1] = k < in ? k : in - 1;
        w[0] = 1.0;
        w[1] = 0.0;
        return;
    }
    double x = g->align_corners ? (double)o * g->ratio[a] : ((double)o + 0.5) * g->ratio[a] - 0.5;
    if (x < 0)
        x = 0;
    int64_t i0 = (int64_t)x;
    if (i0 > in - 1)
        i0 = in - 1;
    double l = x - (double)i0;
    i[0] = i0;
    i[1] = i0 < in - 1 ? i0 + 1 : i0;
    w[0] = 1.0 - l;
    w[1] = l;
}

/* Causal or full multi-head attention over a batch of sequences (the attn
 * slots, revision 5). Per sample n and head h, with T = seq and d =
 * head_dim: qkv is batch x seq x 3 heads d row-major, row (n, t) holding the
 * queries of every head (head h's d values from h d), then the keys (from
 * heads d), then the values (from 2 heads d); o and its gradient are batch
 * x seq x heads d (head h from h d); lse is batch x heads x seq doubles.
 *   S = scale Q K^T (entries with key t' > query t dropped when causal),
 *   P = the row softmax of S, O = P V, lse[t] = log sum over t' exp S[t, t'].
 * block is the tile: the kernels see block queries against block keys at a
 * time and never hold a T x T matrix. */
typedef struct ladle_attn_geom {
    int64_t batch, heads, seq, head_dim, block;
    double scale;
    int causal;
    int f32_tiles; /* f32 only: the tiles' products in f32 (see attn_forward) */
} ladle_attn_geom;

/* The doubles of device scratch the attn slots take (the ws argument): 7 T d
 * for one head's queries, keys, values, output gradient and their three
 * gradients widened to double, T for the row terms of the backward, and two
 * block x block tiles, a block x d accumulator and two block rows of
 * statistics. Linear in T: what makes the layer's memory O(T), not O(T^2). */
static inline int64_t ladle__attn_ws_count(const ladle_attn_geom *g)
{
    return 7 * g->seq * g->head_dim + g->seq + 2 * g->block * g->block +
           g->block * g->head_dim + 2 * g->block;
}

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
    /* MPI may be handed this device's pointers: host memory, or a device
     * that a device-aware MPI reads and writes itself; otherwise messages
     * are staged through planned host buffers (src/comm/schedule.c) */
    int mpi_access;
    void *queue; /* the device's stream or queue (NULL on the CPU) */
    void *state; /* the backend's own: library handles, the device index */
    /* slots return before their work is done (a GPU's stream): the host
     * waits through synchronize or events before it, or MPI, reads what
     * they write, or writes what they still read */
    int async;
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
     *   q = (1 - e) onehot(label) + e / C; NLL -x_label. With class weights
     *   w (l->weight): q_c = (1 - e) w_label [c == label] + e w_c / C and
     *   NLL -w_label x_label; an ignored label's term is 0.
     * Classification x is [N][C][inner] and target holds N * inner i64
     * labels already checked to lie in 0..C-1; regression target has x's
     * dtype and shape. */
    ladle_status (*loss_forward)(const ladle_backend *be, ladle_dtype dtype,
                                 const ladle_loss_plan *l, const void *x, const void *target,
                                 void *out);
    /* dx = dloss * d(loss)/dx: dloss holds one value per term (reduction
     * none) or one value, then divided by l->divisor. The gradients:
     * 2 (x - t), sign(x - t), sigmoid(x) - t, softmax(x)_c - q_c,
     * -[c == label]; with class weights softmax(x)_c sum_k q_k - q_c and
     * -w_label [c == label]; 0 for an ignored label. */
    ladle_status (*loss_backward)(const ladle_backend *be, ladle_dtype dtype,
                                  const ladle_loss_plan *l, const void *x, const void *target,
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
    /* x, dy, u, w and out are n x c x inner tensors of dtype, contiguous
     * (channel ch of sample sm is the row of inner values at
     * (sm c + ch) inner). The per-channel arrays (mean, s, s1, s2, a, b, k:
     * c doubles each) are device memory too: the layers keep statistics,
     * coefficients and what a forward saves in host doubles, and move them
     * across with to_device and to_host around these slots (a few times c
     * doubles per call), so MPI reduces host buffers or tensors only and a
     * GPU needs no scratch of its own. Sums over a channel run over all n
     * inner of its values and overwrite their outputs; the CPU sums in 16
     * lanes of dtype flushed into double every 256 values (in double from
     * the start when inner == 1), and another backend must sum at least as
     * accurately: double across blocks. */
    /* s[ch] = sum x over channel ch (mean NULL), or sum (x - mean[ch])^2
     * with mean[ch] rounded to dtype (kept in double when inner == 1). */
    ladle_status (*bn_moment)(const ladle_backend *be, ladle_dtype dtype, int64_t n, int64_t c,
                              int64_t inner, const void *x, const double *mean, double *s);
    /* s1[ch] = sum dy, s2[ch] = sum dy (x - mean[ch]) over channel ch,
     * mean rounded as in bn_moment. */
    ladle_status (*bn_dsums)(const ladle_backend *be, ladle_dtype dtype, int64_t n, int64_t c,
                             int64_t inner, const void *x, const void *dy, const double *mean,
                             double *s1, double *s2);
    /* out = a[ch] u + b[ch] w + k[ch] elementwise in channel ch; w and b
     * may be NULL (the term drops). With inner > 1 it is computed in dtype
     * with a, b, k rounded to dtype, with inner == 1 in double and rounded
     * once. out may be u or w (each element is read before it is written),
     * but may not overlap them otherwise. */
    ladle_status (*bn_affine)(const ladle_backend *be, ladle_dtype dtype, int64_t n, int64_t c,
                              int64_t inner, const void *u, const void *w, void *out,
                              const double *a, const double *b, const double *k);

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
    /* The column slots work on one group of nb images; ladle_conv_geom (above
     * the table) gives the group's geometry. An image's group is cg
     * contiguous channels of pin = in[0] in[1] in[2] elements (D, H, W
     * row-major); image b's starts at x + b x_stride. The column matrix has
     * K = cg k[0] k[1] k[2] rows of leading dimension ld, row
     * r = ((c k[0] + i) k[1] + j) k[2] + l for channel c and tap (i, j, l);
     * image b owns its P = out[0] out[1] out[2] columns from b P, column
     * (od out[1] + oh) out[2] + ow for output (od, oh, ow), and nb P <= ld.
     * Tap (i, j, l) of output o reads input o s - p + (i, j, l) d per
     * dimension, zero where that falls outside the image.
     *
     * im2col: col[r, b P + o] = x_b[c, o s - p + t d] (0 outside); every
     * element of the nb P columns is written.
     * col2im: dx_b[c, o s - p + t d] += col[r, b P + o] over all rows and
     * columns whose input is inside: the adjoint of im2col, adding into dx
     * (zero it first for dx = col2im(col)). Taps adding to one element add
     * in the order of r for each output, outputs in order.
     * planes: NULL, or (only when in[0] == 1, k[0] == 1 and s[2] == 1)
     * scratch of 2 hp wp elements, hp = in[1] + 2 p[1], wp = in[2] + 2 p[2],
     * zeroed when allocated and given to no other slot: the CPU then builds
     * the columns from zero-bordered planes (whose borders it keeps zero); a
     * backend may ignore it. x, col, dx and planes must not overlap. */
    ladle_status (*conv_im2col)(const ladle_backend *be, ladle_dtype dtype,
                                const ladle_conv_geom *geom, int64_t nb, const void *x,
                                int64_t x_stride, void *col, int64_t ld, void *planes);
    ladle_status (*conv_col2im)(const ladle_backend *be, ladle_dtype dtype,
                                const ladle_conv_geom *geom, int64_t nb, const void *col,
                                int64_t ld, void *dx, int64_t dx_stride, void *planes);
    /* The wide-row columns, for in[0] == 1, k[0] == 1, s[1] == s[2] == 1:
     * with hp, wp as above and Q = (out[1] - 1) wp + out[2], output (oh, ow)
     * is grid column oh wp + ow (the columns with ow >= out[2] are spare),
     * and tap (c, i, j) is one run of image b's zero-padded plane xp_b[c]
     * (hp x wp, x in its middle at (p[1], p[2])):
     *     col[(c k[1] + i) k[2] + j, b Q + q] = xp_b[c, i d[1] wp + j d[2] + q],
     * q < Q, nb Q <= ld. xpad: NULL when p[1] = p[2] = 0 (x is its own
     * padded plane), else scratch of cg hp wp elements zeroed when
     * allocated, whose borders stay zero (only the middle is written). */
    ladle_status (*conv_wide_im2col)(const ladle_backend *be, ladle_dtype dtype,
                                     const ladle_conv_geom *geom, int64_t nb, const void *x,
                                     int64_t x_stride, void *xpad, void *col, int64_t ld);
    /* Between the wide grid (cog rows of leading dimension ld, image b's Q
     * columns from b Q) and nb images of a tensor t (image b at
     * t + b t_stride, output channel c at + c P): for c < cog, oh < out[1],
     * ow < out[2],
     *     to_tensor:  t_b[c, oh out[2] + ow] = grid[c, b Q + oh wp + ow]
     *     otherwise:  grid[c, b Q + oh wp + ow] = t_b[c, oh out[2] + ow]
     * and nothing else is written (the spare grid columns keep what they
     * hold: zeros, for a spread gradient). */
    ladle_status (*conv_wide_grid)(const ladle_backend *be, ladle_dtype dtype,
                                   const ladle_conv_geom *geom, int to_tensor, int64_t nb,
                                   void *grid, int64_t ld, void *t, int64_t t_stride);
    /* A bias over channels, for convolutions (inner = positions per
     * channel) and linear layers (inner = 1): y is rows x channels x inner,
     * row-major, and y[r, c, p] += b[c]. */
    ladle_status (*bias_add)(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                             int64_t channels, int64_t inner, const void *b, void *y);
    /* Its gradient, accumulating: db[c] += sum over r, p of dy[r, c, p]. For
     * each (r, c) in order of r, the sum over p is taken in double, rounded
     * to dtype and added to db[c] (for inner = 1 that is db[c] += dy[r, c]
     * row after row). db must not overlap dy. */
    ladle_status (*bias_grad)(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                              int64_t channels, int64_t inner, const void *dy, void *db);

    /* --- optimizer updates --- */
    /* (CPU: src/backends/cpu/optim.c) */
    /* Step t (1, 2, ...) of d's optimizer on n parameters p with gradients g,
     * arithmetic in double, every stored value rounded to dtype:
     *   SGD: g' = g + wd p; with momentum (s0 != NULL) v = g' at t = 1, else
     *     v = mu v + (1 - dampening) g', and g' = g' + mu v (Nesterov) or v;
     *     p -= lr g'.
     *   Adam, AdamW: m = b1 m + (1 - b1) g', v = b2 v + (1 - b2) g'^2 with
     *     g' = g + wd p (Adam) or p -= lr wd p first (AdamW);
     *     p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
     * s0 (momentum or m) and s1 (v) are the state, zero before step 1. */
    ladle_status (*optim_step)(const ladle_backend *be, ladle_dtype dtype,
                               const ladle_optimizer_desc *d, int64_t t, int64_t n, void *p,
                               const void *g, void *s0, void *s1);

    /* --- revision 2 --- */
    /* Whether the queue has passed the event, into *done (host memory),
     * without waiting (optional: absent means it has). */
    ladle_status (*event_query)(const ladle_backend *be, void *event, int *done);
    /* Whether [ptr, ptr + bytes) is memory this device's kernels can use
     * (optional: absent means any pointer is): LADLE_ERR_DEVICE, saying
     * whose memory it is, for caller memory wrapped as a tensor of a
     * device it is not on. */
    ladle_status (*check_pointer)(const ladle_backend *be, const void *ptr, size_t bytes);
    /* A failure the device has already reported (a kernel that faulted,
     * which on a GPU fails all later work), as a status, without waiting:
     * checked calls agree on it before they communicate, so a dead device
     * fails every rank instead of leaving the others waiting (optional:
     * absent means none). */
    ladle_status (*health)(const ladle_backend *be);

    /* --- revision 3 --- */
    /* (CPU: src/backends/cpu/interp.c) */
    /* Interpolation of `planes` planes (ladle_interp_geom): y[o] = the sum
     * over o's taps (ladle__interp_taps: nearest one, linear 2 per
     * dimension) of the product of their weights times x at the tap, in
     * double, for the output box; the backward overwrites dx with the
     * adjoint, dx[i] = sum over the outputs o reading tap i of its weight
     * dy[o]. Every tap of the output box lies in the input box. x, dx hold
     * planes x the input box's elements, y, dy planes x the output box's,
     * contiguous, not overlapping. Optional: absent, the layers refuse the
     * device. */
    ladle_status (*interp_forward)(const ladle_backend *be, ladle_dtype dtype,
                                   const ladle_interp_geom *g, int64_t planes, const void *x,
                                   void *y);
    ladle_status (*interp_backward)(const ladle_backend *be, ladle_dtype dtype,
                                    const ladle_interp_geom *g, int64_t planes, const void *dy,
                                    void *dx);

    /* --- revision 4 --- */
    /* (CPU: src/backends/cpu/loss.c) */
    /* A classification loss's label scan (synchronous, answers in host
     * memory): *sum = the sum over the n labels that are not ignored (see
     * ladle_loss_plan) of l->weight[label] (1 each without weights), and
     * *first = the index of the first label that is neither ignored nor in
     * 0..l->classes-1 (then *sum is not defined), -1 when there is none.
     * Optional: absent, the losses refuse class weights and ignore_index on
     * the device. */
    ladle_status (*loss_weight_sum)(const ladle_backend *be, const ladle_loss_plan *l, int64_t n,
                                    const int64_t *labels, double *sum, int64_t *first);
    /* (CPU: src/backends/cpu/adaptive.c) */
    /* Adaptive average pooling of `planes` planes (ladle_adaptive_geom): y[o]
     * = the sum of x over o's window (in double) / the window's size, for
     * the output box; the backward overwrites dx with the adjoint, dx[i] =
     * the sum over the outputs o of the box whose window holds i of dy[o] /
     * o's size. Every window of the output box lies in the input box. x, dx
     * hold planes x the input box's elements, y, dy planes x the output
     * box's, contiguous, not overlapping. Optional: absent, the layers
     * refuse the device. */
    ladle_status (*adaptive_pool_forward)(const ladle_backend *be, ladle_dtype dtype,
                                          const ladle_adaptive_geom *g, int64_t planes,
                                          const void *x, void *y);
    ladle_status (*adaptive_pool_backward)(const ladle_backend *be, ladle_dtype dtype,
                                           const ladle_adaptive_geom *g, int64_t planes,
                                           const void *dy, void *dx);
    /* (CPU: src/backends/cpu/norm.c) */
    /* Layer norm (rms 0) and RMS norm (rms 1) of `rows` contiguous rows of
     * len values each (x, y, dy, dx rows x len; w, b, dw, db len; mean,
     * invstd, rows doubles of device memory). Per row, with L = len:
     *   layer norm  mean = sum x / L, var = sum (x - mean)^2 / L,
     *               invstd = 1 / sqrt(var + eps), xhat = (x - mean) invstd
     *   RMS norm    invstd = 1 / sqrt(sum x^2 / L + eps), xhat = x invstd
     * Forward: y = xhat w + b (w, b may be NULL: the factor or the term
     * drops); writes invstd, and mean for layer norm (RMS norm leaves mean
     * alone; it may be NULL). Sums and elementwise steps in double (the
     * variance from deviations about a shift near the mean: on the CPU the
     * mean itself for f64, the first 32 values' mean for f32), each result
     * rounded to dtype once; another backend must be at least as accurate. */
    ladle_status (*norm_forward)(const ladle_backend *be, ladle_dtype dtype, int rms,
                                 int64_t rows, int64_t len, double eps, const void *x,
                                 const void *w, const void *b, void *y, double *mean,
                                 double *invstd);
    /* dx = invstd (g - sum g / L - xhat sum(g xhat) / L) with g = dy w (w
     * NULL: g = dy); RMS norm drops the sum g / L term. mean and invstd are
     * the forward's over the same x. */
    ladle_status (*norm_backward)(const ladle_backend *be, ladle_dtype dtype, int rms,
                                  int64_t rows, int64_t len, const void *x, const void *w,
                                  const void *dy, const double *mean, const double *invstd,
                                  void *dx);
    /* Accumulating: dw[j] += sum over rows of dy xhat, db[j] += sum over
     * rows of dy (either may be NULL), each summed in double in ws (2 len
     * doubles of device memory, scratch) and added once, rounded. */
    ladle_status (*norm_weight_grad)(const ladle_backend *be, ladle_dtype dtype, int rms,
                                     int64_t rows, int64_t len, const void *x, const void *dy,
                                     const double *mean, const double *invstd, void *dw,
                                     void *db, double *ws);
    /* The token embedding (CPU: norm.c too): y[i, :] = w[ids[i], :] and its
     * adjoint dw[ids[i], :] += dy[i, :] for i = 0 .. n-1 in order (a
     * repeated id adds every row), rows of dim values; ids are n i64 values
     * already checked to lie in w's rows. */
    ladle_status (*embed_forward)(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                  int64_t dim, const int64_t *ids, const void *w, void *y);
    ladle_status (*embed_backward)(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                   int64_t dim, const int64_t *ids, const void *dy, void *dw);
    /* The five revision 4 slots are optional: absent, the layers refuse the
     * device (LADLE_ERR_DEVICE at creation). */

    /* --- revision 5 --- */
    /* (CPU: src/backends/cpu/attention.c) */
    /* Attention (ladle_attn_geom) for g->batch samples: writes o and lse.
     * The softmax is taken online, tile by tile (a running row maximum and
     * sum rescale the partial output), so no T x T matrix exists; dot
     * products, statistics and the output are accumulated in double and
     * rounded to dtype once (with g->f32_tiles, an f32 call's tile products
     * and the output's accumulator in f32, the statistics and the final
     * scaling in double). ws: ladle__attn_ws_count(g) doubles of scratch.
     * qkv, o, lse and ws must not overlap. */
    ladle_status (*attn_forward)(const ladle_backend *be, ladle_dtype dtype,
                                 const ladle_attn_geom *g, const void *qkv, void *o,
                                 double *lse, double *ws);
    /* Its backward, overwriting dqkv (laid out as qkv) with the gradients
     * of the queries, keys and values for the output gradient dout (laid
     * out as o), given the forward's o and lse over the same qkv. P is
     * recomputed tile by tile from qkv and lse: with D[t] = sum dout[t] o[t],
     *   dV = P^T dO,  dS = P (dO V^T - D),  dQ = scale dS K,  dK = scale dS^T Q,
     * in double (with g->f32_tiles, an f32 call's products and gradient
     * sums in f32, D and lse in double). ws as for the forward; nothing
     * overlaps. */
    ladle_status (*attn_backward)(const ladle_backend *be, ladle_dtype dtype,
                                  const ladle_attn_geom *g, const void *qkv, const void *o,
                                  const double *lse, const void *dout, void *dqkv,
                                  double *ws);
    /* The two revision 5 slots are optional: absent, the attention layer
     * refuses the device (LADLE_ERR_DEVICE at creation). */

    /* --- revision 6 (its calls' variant: revision 7) --- */
    /* (CPU: src/backends/cpu/conv_direct.c) */
    /* The direct convolution of one group of nb images, with no column
     * matrix. conv_direct_plan says which passes the backend runs this way
     * for the geometry and dtype (*forward, *weight, and since revision 8
     * *backward, for conv_direct_backward below: 0, or the variant of
     * its kernels it runs, > 0, which the layer hands back to each call;
     * the layer takes its column or wide path where 0) and their scratch:
     * *scratch elements of dtype (zeroed when allocated, given to no other
     * slot; the passes keep what must stay zero zero) and *sums doubles for
     * the weight gradient. It answers 0 and 0 where the slots would not be
     * the faster way, and for any geometry but in[0] == 1, k[0] == 1,
     * s[1] == s[2] == 1.
     * Image b's group is x + b x_stride (cg planes of in[1] x in[2]); w is
     * cog rows of K = cg k[1] k[2] weights, row co's tap (c, i, j) at
     * co K + (c k[1] + i) k[2] + j; y and dy hold image b's cog output
     * planes from b y_stride (b dy_stride), P = out[1] out[2] elements
     * apart. With x_b read as 0 outside its planes (padding p[1], p[2]):
     *   forward: y_b[co, oh, ow] = b[co] + the sum over (c, i, j) of
     *     w[co, (c, i, j)] x_b[c, oh - p[1] + i d[1], ow - p[2] + j d[2]]
     *     (b may be NULL: no term);
     *   weight: dw[co, (c, i, j)] += the sum over b, oh, ow of
     *     dy_b[co, oh, ow] x_b[c, ...], each image's part summed in dtype
     *     (the CPU: per vector lane), the images' parts in double, rounded
     *     to dtype once; ws holds the planned sums.
     * Nothing overlaps. Optional (all three): absent, the convolution takes
     * its column and wide paths. */
    ladle_status (*conv_direct_plan)(const ladle_backend *be, ladle_dtype dtype,
                                     const ladle_conv_geom *geom, int *forward, int *weight,
                                     int *backward, int64_t *scratch, int64_t *sums);
    ladle_status (*conv_direct_forward)(const ladle_backend *be, ladle_dtype dtype,
                                        const ladle_conv_geom *geom, int64_t nb,
                                        const void *x, int64_t x_stride, const void *w,
                                        const void *b, void *scratch, void *y,
                                        int64_t y_stride, int variant);
    ladle_status (*conv_direct_weight)(const ladle_backend *be, ladle_dtype dtype,
                                       const ladle_conv_geom *geom, int64_t nb,
                                       const void *x, int64_t x_stride, const void *dy,
                                       int64_t dy_stride, void *scratch, double *ws,
                                       void *dw, int variant);
    /* --- revision 8 --- */
    /* The input gradient of the same (CPU: src/backends/cpu/conv_channels.inc),
     * where conv_direct_plan's *backward is a variant (> 0): with dy_b read
     * as 0 outside its planes,
     *   dx_b[c, ih, iw] = the sum over (co, i, j) of w[co, (c, i, j)]
     *     dy_b[co, ih + p[1] - i d[1], iw + p[2] - j d[2]]
     * for every element of image b's cg planes at dx + b dx_stride (written,
     * not added to). Optional: absent (and where the plan answers 0), the
     * layer takes im2col's GEMM and col2im. */
    ladle_status (*conv_direct_backward)(const ladle_backend *be, ladle_dtype dtype,
                                         const ladle_conv_geom *geom, int64_t nb,
                                         const void *dy, int64_t dy_stride, const void *w,
                                         void *scratch, void *dx, int64_t dx_stride,
                                         int variant);

    /* --- revision 9 --- */
    /* (CPU: src/backends/cpu/loss.c) */
    /* Row statistics of a cross entropy whose classes are spread over ranks
     * (the vocabulary-parallel loss), over `rows` contiguous rows of len
     * values of x; lse, shift and scale are rows doubles of device memory.
     * lse_rows: lse[r] = log sum_c e^{x_rc}, in double and shifted by the
     * row's maximum; NaN where the row holds a NaN or +inf, -inf where all
     * its values are -inf (or len is 0). exp_rows: y_rc = scale[r]
     * e^{x_rc - shift[r]}, rounded to dtype once; for x - shift <= 0 (larger
     * arguments are clamped to 88 in f32 and 709 in f64) within a few ulps
     * of f32 or one of f64, and 0 where the exponential is below e^-87 (f32)
     * or e^-708.39 (f64); y may be x. Optional: absent, the
     * vocabulary-parallel loss refuses the device. */
    ladle_status (*lse_rows)(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                             int64_t len, const void *x, double *lse);
    ladle_status (*exp_rows)(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                             int64_t len, const void *x, const double *shift,
                             const double *scale, void *y);
};

/* The default instance of a device's backend, or NULL if ladle was built
 * without it or (a GPU) it has not been opened yet; it never raises, so a
 * cleanup path may ask. ladle__backend_get opens a device. */
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
ladle_status ladle__be_event_query(const ladle_backend *be, void *event, int *done);
ladle_status ladle__be_check_pointer(const ladle_backend *be, const void *ptr, size_t bytes);
ladle_status ladle__be_health(const ladle_backend *be);

/* sum of x[i] * y[i], accumulated as dot2 does */
ladle_status ladle__be_dot(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                           const void *x, const void *y, double *out);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_BACKEND_H */
