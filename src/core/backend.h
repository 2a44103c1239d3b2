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
 *
 * The slots themselves, each with its documentation, are written once, in
 * src/core/backend_slots.h; the table's members below, every backend's
 * kernel prototypes and the guarded device's wrappers are generated from
 * that list (its opening comment says how to add a slot).
 */
#ifndef LADLE_BACKEND_H
#define LADLE_BACKEND_H

#include "src/core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LADLE_BACKEND_VERSION 12

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
    /* the same C weights in device memory, on a device whose memory the
     * host cannot touch (the layer copies them there at creation), for
     * kernels that cannot read host memory (CUDA's); NULL elsewhere, and
     * NULL with weight. Backends that read weight ignore it. */
    const double *weight_dev;
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

/* The helpers below are also the CUDA backend's kernels' (nvcc compiles
 * them for the device too). */
#ifdef __CUDACC__
#define LADLE_HOST_DEVICE __host__ __device__
#else
#define LADLE_HOST_DEVICE
#endif

/* The window of output o of out over in inputs: [floor(o in / out),
 * ceil((o + 1) in / out)), never empty; exact for extents up to 2^31. */
LADLE_HOST_DEVICE static inline void ladle__adaptive_window(int64_t in, int64_t out,
                                                            int64_t o, int64_t *b, int64_t *e)
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
LADLE_HOST_DEVICE static inline void ladle__interp_taps(const ladle_interp_geom *g, int a,
                                                        int64_t o, int64_t i[2], double w[2])
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
    /* the slots, one member per entry of the list, each documented there */
#define LADLE_SLOT(name, params, args, devptrs) ladle_status(*name) params;
#include "src/core/backend_slots.h"
#undef LADLE_SLOT
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
/* be->fn->alloc, the block counted as kind (ladle_memory_track). */
ladle_status ladle__alloc_as(const ladle_backend *be, ladle_memory_kind kind, size_t bytes,
                             void **out);
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

/* The CUDA instance and device calls the registry (backend.c) makes, defined
 * in src/backends/cuda/cuda.cu where the build has the CUDA backend
 * (LADLE_WITH_CUDA). */
ladle_status ladle__cuda_open(const char *func, const ladle_backend **out);
const ladle_backend *ladle__cuda_opened(void);
ladle_status ladle__cuda_count(int *count);
ladle_status ladle__cuda_select(int index);
ladle_status ladle__cuda_index(int *index);
ladle_status ladle__cuda_describe(char *buf, size_t cap);
ladle_status ladle__cuda_set(int option, int value);
ladle_status ladle__cuda_get(int option, int *value);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_BACKEND_H */
