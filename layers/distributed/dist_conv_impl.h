/*
 * Private to the spatially partitioned convolution and pooling: the plan
 * (dist_conv.c) and the overlap of the halo exchange with the interior
 * (dist_conv_overlap.c).
 */
#ifndef LADLE_DIST_CONV_IMPL_H
#define LADLE_DIST_CONV_IMPL_H

#include "layers/distributed/dist.h"
#include "layers/sequential/conv_impl.h" /* the padding options */

/* What the two layers share: nd, kernel, stride, padding, dilation; and a
 * convolution's padding options: the mode, the padding per side (lo, hi)
 * and whether they differ ('same' with an even kernel), in which case p is
 * the larger side and the halo is planned for a centred window of 2p + 1
 * (whose output blocks are x's) and the needed box narrowed to lo and hi. */
typedef struct spec {
    int nd;
    int64_t k[3], s[3], p[3], d[3];
    int ceil_mode;
    int avg, count_pad; /* average pooling, and whether its divisor counts the padding */
    ladle_padding_mode mode;
    int uneven;
    int64_t lo[3], hi[3];
    int overlap; /* LADLE_OVERLAP_HALO */
} spec;

/* What makes the layer a convolution or a pooling: make_local builds the
 * local layer on box shape xs: with whole 0, without padding on the needed
 * box (padding cells hold pad_value); with whole 1, the sequential layer of
 * the arguments, padding and options included, on x's block. */
typedef struct kind kind;
typedef ladle_status (*make_local_fn)(const kind *k, const int64_t *xs, int whole,
                                      ladle_dtype dt, ladle_device device, uint64_t seed,
                                      ladle_op **op);

struct kind {
    int is_pool;
    double pad_value;
    const void *desc; /* ladle_conv_desc or ladle_pool_desc */
    make_local_fn make_local;
};

/* The overlap (LADLE_OVERLAP_HALO) cuts the output block into boxes: the
 * interior, whose windows read only cells this rank has before the
 * exchange (its bulk and the global padding), in up to LADLE__DC_CHUNKS
 * runs of at least 2 samples with a poke at the exchange's progress after
 * each, and up to two slabs per split dimension around it (a shell). */
#define LADLE__DC_CHUNKS 4
#define LADLE__DC_MAX_PARTS (LADLE__DC_CHUNKS + 6)

/* One box of the output block and the layer that makes it: op is a local
 * layer on the input box (in the padded tensor) its windows read, sharing
 * the weights of the layer's local layer. x, dx: op's input (for calls
 * without a ctx) and input gradient; y, dy: its output and output gradient,
 * either buffers of its own copied to and from the box, or (samples: the
 * box holds whole samples of the output block, which are contiguous) views
 * pointed at the box inside the caller's y and dy at each call. */
typedef struct dc_part {
    ladle_op *op;
    int samples;
    int64_t in_off[5], in_shape[5];
    int64_t out_off[5], out_shape[5];
    ladle_tensor *x, *y, *dy, *dx;
} dc_part;

typedef struct dconv {
    /* local: the layer on the needed box, or NULL; param/grad: a
     * convolution's weights on ranks without a local layer (zero volume
     * outside p_x); sync: the weights' gradient sums over the partition */
    ladle__dist_base base;
    int is_pool;
    int ndim;              /* 2 + spatial dimensions */
    ladle_halo_geometry g; /* this rank's boxes */
    int has_output;        /* this rank's output block is not empty */
    int same;              /* the needed box is the whole padded tensor: the
                              local layer reads and writes it in place */
    int direct;            /* no spatial split: the local layer is the
                              sequential one (with its padding) on x's block */
    ladle_op *halo;
    ladle_tensor *padded;    /* forward: bulk + halo + padding cells */
    ladle_tensor *gpadded;   /* backward: the same for gradients */
    ladle_tensor *xn;        /* the needed box for calls without a ctx */
    ladle_tensor *dxn;       /* the local layer's input gradient */
    int64_t wshape[5];       /* the weight's (global) shape */
    ladle_padding_mode mode; /* a convolution's padding mode (pad_impl.h) */
    ladle__pad_dim pd[5];    /* the padded tensor's dimensions for it */
    /* average pooling with divisors other than the kernel's volume: R's
     * factor per output position (f64, the output block's spatial
     * elements), zeros of that length (bn_affine's shift), and dy R */
    ladle_tensor *rescale, *rezero, *dyr;
    /* the overlap: nparts boxes, the interior's ninterior runs of samples
     * first (nparts 0: not overlapped) */
    int nparts, ninterior;
    dc_part part[LADLE__DC_MAX_PARTS];
} dconv;

/* A ctx: the base's (the local layer's ctx and the needed box) without the
 * overlap; with it, each part's ctx and saved input box. */
typedef struct dc_ctx {
    ladle__dist_ctx base;
    ladle_ctx *pc[LADLE__DC_MAX_PARTS];
    ladle_tensor *px[LADLE__DC_MAX_PARTS];
} dc_ctx;

/* t = R u for a batch of n (u may be t). */
static inline ladle_status ladle__dc_rescale(const ladle_op *op, const dconv *v, int64_t n,
                                             const ladle_tensor *u, ladle_tensor *t)
{
    int64_t positions = ladle_tensor_numel(v->rescale);
    return op->be->fn->bn_affine(op->be, op->dtype, n * v->g.output_shape[1], positions, 1,
                                 u->data, NULL, t->data, v->rescale->data, NULL,
                                 v->rezero->data);
}

/* Plan the overlap for this rank where it can run (a spatial split, the
 * global padding's cells of one value written at creation: zeros, or -inf
 * for max pooling; an interior with at least one output): the boxes,
 * their layers (weights bound to the local layer's) and buffers. Where it
 * cannot, v->nparts stays 0 and the layer runs without it. Local. */
ladle_status ladle__dc_overlap_plan(dconv *v, const kind *k, const spec *sp,
                                    const int64_t *global_x, ladle_dtype dt,
                                    ladle_device dev);
void ladle__dc_overlap_free(dconv *v);
/* The parts' layers follow the local layer's parameter i to its memory. */
ladle_status ladle__dc_overlap_rebind(dconv *v, int i);
ladle_status ladle__dc_overlap_ctx_init(const dconv *v, dc_ctx *c, ladle_dtype dt,
                                        ladle_device dev);
void ladle__dc_overlap_ctx_fini(dc_ctx *c);

/* The layer's calls with the overlap (c may be NULL: no ctx). */
ladle_status ladle__dc_overlap_forward(const ladle_op *op, dconv *v, dc_ctx *c,
                                       const ladle_tensor *x, ladle_tensor *y);
ladle_status ladle__dc_overlap_backward(const ladle_op *op, dconv *v, dc_ctx *c,
                                        const ladle_tensor *dy, ladle_tensor *dx);
ladle_status ladle__dc_overlap_weight(const ladle_op *op, dconv *v, dc_ctx *c,
                                      const ladle_tensor *dy);

/* How many boxes op (a spatially partitioned convolution or pooling)
 * computes on this rank with the overlap, 0 without it, and how many of them
 * are the interior's (for the tests). */
int ladle__dist_conv_parts(const ladle_op *op);
int ladle__dist_conv_interior_parts(const ladle_op *op);

/* Whether op runs the sequential layer on this rank's block, with no
 * exchange or padded copies (no spatial split, or one that moves nothing):
 * for the tests. */
int ladle__dist_conv_direct(const ladle_op *op);

#endif /* LADLE_DIST_CONV_IMPL_H */
