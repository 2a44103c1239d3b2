/*
 * ladle/primitives.h - the parallel data-movement primitives.
 *
 * Each primitive is a linear operator (a ladle_op) with a hand-written
 * adjoint; docs/primitives.md derives each adjoint. Creation is collective
 * over the ranks the op touches: ranks outside its partitions may call it
 * too (SPMD style) and get an op whose calls only check that they were given
 * zero-volume tensors. Creation checks every global fact (partition shapes,
 * legality, shapes, dtype) identically on every rank before the first
 * message, then agrees on the verdict, so a bad call fails on all ranks
 * alike with the same status.
 *
 * Every create takes the dtype and then the device the op's tensors live
 * on (the same on every rank); its forward and adjoint take tensors of that
 * device only. A device ladle was built without gives LADLE_ERR_DEVICE on
 * every rank.
 *
 * Flags combine with |.
 */
#ifndef LADLE_PRIMITIVES_H
#define LADLE_PRIMITIVES_H

#include "core.h"
#include "layout.h"
#include "op.h"
#include "partition.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reverse the source partition's shape before matching (broadcast,
 * sum-reduce). */
#define LADLE_TRANSPOSE_SRC 0x1u
/* Reverse the destination partition's shape before matching. */
#define LADLE_TRANSPOSE_DEST 0x2u
/* Agree on the argument checks of every forward/adjoint call with one small
 * all-reduce, so a bad tensor on one rank fails every rank instead of
 * leaving them waiting. Also switched on by LADLE_CHECKED=1 in the
 * environment at creation. */
#define LADLE_CHECKED 0x4u

/* What a broadcast or a sum-reduce moves: a block of ndim dimensions of
 * extents shape[] (borrowed for the create), and the flags
 * (LADLE_TRANSPOSE_SRC, LADLE_TRANSPOSE_DEST, LADLE_CHECKED). A sum-reduce
 * is a broadcast's adjoint and takes the same descriptor. */
typedef struct ladle_broadcast_desc {
    size_t
        size; /* sizeof(ladle_broadcast_desc), set by ladle_broadcast_desc_init (checked) */
    int ndim;
    const int64_t *shape;
    unsigned flags; /* 0 */
} ladle_broadcast_desc;

/* Set d's size, ndim and shape, and flags 0. Accepts NULL. Local. */
LADLE_API void ladle_broadcast_desc_init(ladle_broadcast_desc *d, int ndim,
                                         const int64_t shape[]);

/*
 * Broadcast P_x -> P_y of a block of d->shape held by every member of P_x.
 *
 * Partition shapes are matched as in DistDL: the source shape (reversed if
 * LADLE_TRANSPOSE_SRC) is left-padded with ones to the destination's ndim;
 * the destination shape is reversed if LADLE_TRANSPOSE_DEST. In every
 * dimension the extents must be equal or the source's must be 1, else the
 * pair is illegal (LADLE_ERR_PARTITION). Destination rank with (effective)
 * coordinates c receives the block of the source rank with coordinates
 * c' where c'_d = c_d if the extents match and 0 where the source extent is 1.
 *
 *   F  : y_j = x_{src(j)}                  for every member j of P_y
 *   F* : dx_i = sum over {j : src(j) = i} of dy_j   (a sum-reduce)
 *
 * x has d->shape on members of P_x (zero volume elsewhere), y has d->shape
 * on members of P_y. A rank in both that is its own source copies locally.
 * Collective over P_x and P_y. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (also
 * for a d not set up by ladle_broadcast_desc_init),
 * LADLE_ERR_SHAPE, LADLE_ERR_DTYPE, LADLE_ERR_PARTITION, LADLE_ERR_MPI,
 * LADLE_ERR_DEVICE, LADLE_ERR_ALLOC, LADLE_ERR_REMOTE. */
LADLE_API ladle_status ladle_broadcast_create(const ladle_broadcast_desc *d,
                                              const ladle_partition *p_x,
                                              const ladle_partition *p_y, ladle_dtype dtype,
                                              ladle_device device, ladle_op **op);

/*
 * SumReduce P_x -> P_y: the mirror of broadcast. The destination shape
 * (reversed if LADLE_TRANSPOSE_DEST) is left-padded with ones to the
 * source's ndim; in every dimension the extents must be equal or the
 * destination's must be 1. Source rank i sends to dest(i), the rank whose
 * coordinates are i's where the extents match and 0 where the destination
 * extent is 1.
 *
 *   F  : y_j = sum over {i : dest(i) = j} of x_i
 *   F* : dx_i = dy_{dest(i)}                 (a broadcast)
 *
 * Sums are taken in a fixed order that does not depend on timing.
 * Collective over P_x and P_y. Returns the codes of ladle_broadcast_create. */
LADLE_API ladle_status ladle_sum_reduce_create(const ladle_broadcast_desc *d,
                                               const ladle_partition *p_x,
                                               const ladle_partition *p_y,
                                               ladle_dtype dtype, ladle_device device,
                                               ladle_op **op);

/* What an all-sum-reduce sums: over the partition axes axes[0 .. naxes-1]
 * (borrowed), a block of ndim dimensions of extents shape[] (borrowed),
 * with flags (LADLE_CHECKED). */
typedef struct ladle_all_sum_reduce_desc {
    size_t size; /* sizeof(ladle_all_sum_reduce_desc), set by its _init (checked) */
    int naxes;
    const int *axes;
    int ndim;
    const int64_t *shape;
    unsigned flags; /* 0 */
} ladle_all_sum_reduce_desc;

/* Set d's size, axes and shape, and flags 0. Accepts NULL. Local. */
LADLE_API void ladle_all_sum_reduce_desc_init(ladle_all_sum_reduce_desc *d, int naxes,
                                              const int axes[], int ndim,
                                              const int64_t shape[]);

/*
 * AllSumReduce over the partition axes d->axes[0 .. d->naxes-1] of p (naxes
 * 0: the identity). The groups are the members of p that share their coordinates
 * on every other axis.
 *
 *   F = F* : y_i = sum over the group of i of x_j
 *
 * Every member holds a block of d->shape; x and y may be the same tensor (in
 * place). Every member of a group gets bitwise the same result. Collective
 * over p. Returns the codes of ladle_broadcast_create. */
LADLE_API ladle_status ladle_all_sum_reduce_create(const ladle_all_sum_reduce_desc *d,
                                                   const ladle_partition *p,
                                                   ladle_dtype dtype, ladle_device device,
                                                   ladle_op **op);

/* What an all-gather or a reduce-scatter moves. The groups are the members
 * of the partition that share their coordinates on every axis but `axis`
 * (the whole partition when it is 1-d); member k of a group (coordinate k
 * along the axis) holds shard k of a tensor of ndim dimensions and global
 * extents shape[] (borrowed for the create), cut along tensor dimension
 * `dim`: shard k has counts[k] of its shape[dim] indices, starting at
 * counts[0] + ... + counts[k-1], and the whole extent in every other
 * dimension. counts (borrowed; NULL: balanced, the first shape[dim] mod g
 * shards one longer) has one non-negative entry per member, summing to
 * shape[dim]; shards may be empty. Zeroed fields mean axis 0, dim 0,
 * balanced shards, flags 0 (LADLE_CHECKED may be set). A reduce-scatter is
 * an all-gather's adjoint and takes the same descriptor. */
typedef struct ladle_all_gather_desc {
    size_t size; /* sizeof(ladle_all_gather_desc), set by ladle_all_gather_desc_init (checked) */
    int axis;
    int ndim;
    const int64_t *shape;
    int dim;
    const int64_t *counts; /* NULL: balanced */
    unsigned flags;        /* 0 */
} ladle_all_gather_desc;

/* Set d's size, axis, ndim, shape and dim; counts NULL, flags 0. Accepts
 * NULL. Local. */
LADLE_API void ladle_all_gather_desc_init(ladle_all_gather_desc *d, int axis, int ndim,
                                          const int64_t shape[], int dim);

/*
 * AllGather along partition axis d->axis: every member of a group ends with
 * the concatenation of the group's shards along tensor dimension d->dim.
 * With S_k the selection of shard k's indices from the whole tensor,
 *
 *   F  : y_i = sum over k of S_k^T x_k        (every member i of the group)
 *   F* : dx_k = S_k (sum over i of dy_i)      (a reduce-scatter)
 *
 * x has shard k's shape on member k (zero volume outside the partition),
 * y the whole d->shape on every member. The adjoint's sums run in one fixed
 * order, member 0's copy first: the same bits on every run, whatever the
 * MPI or the timing. Collective over the partition. Returns LADLE_ERR_NULL,
 * LADLE_ERR_ARG (a d not set up by its _init, an axis outside the
 * partition, a dim outside 0..ndim-1, counts of the wrong sum or a negative
 * count), LADLE_ERR_SHAPE, LADLE_ERR_DTYPE, LADLE_ERR_MPI, LADLE_ERR_DEVICE,
 * LADLE_ERR_ALLOC, LADLE_ERR_UNSUPPORTED (a message above INT_MAX
 * elements), LADLE_ERR_REMOTE. */
LADLE_API ladle_status ladle_all_gather_create(const ladle_all_gather_desc *d,
                                               const ladle_partition *p, ladle_dtype dtype,
                                               ladle_device device, ladle_op **op);

/*
 * ReduceScatter along partition axis d->axis, the mirror of all-gather:
 * every member holds the whole d->shape and member k keeps shard k of the
 * group's sum.
 *
 *   F  : y_k = S_k (sum over i of x_i)        (member 0's copy first)
 *   F* : dx_i = sum over k of S_k^T dy_k      (an all-gather)
 *
 * Collective over the partition. Returns the codes of
 * ladle_all_gather_create. */
LADLE_API ladle_status ladle_reduce_scatter_create(const ladle_all_gather_desc *d,
                                                   const ladle_partition *p,
                                                   ladle_dtype dtype, ladle_device device,
                                                   ladle_op **op);

/*
 * Repartition (transpose) between two decomposed layouts of the same global
 * shape: any partitions of the same ndim over the same parent (the same
 * ranks, others, disjoint ones, one rank for a scatter or a gather) and any
 * rectilinear splits (unbalanced ones too).
 *
 *   F  : every element moves from its owner under x to its owner under y
 *   F* : the reverse repartition (a permutation: F* = F^-1)
 *
 * Collective over both partitions. Returns the codes of
 * ladle_broadcast_create; LADLE_ERR_SHAPE when the global shapes differ,
 * LADLE_ERR_ARG when a layout is not a decomposition. */
LADLE_API ladle_status ladle_repartition_create(const ladle_layout *x, const ladle_layout *y,
                                                ladle_dtype dtype, ladle_device device,
                                                unsigned flags, ladle_op **op);

/*
 * The window of a kernel (convolution or pooling) per tensor dimension:
 * kernel size, stride, padding (added on both sides) and dilation, and
 * ceil_mode (nonzero: output lengths round up, as pooling's ceil_mode).
 * Dimensions that are not spatial (batch, channels) take 1/1/0/1.
 */
typedef struct ladle_window {
    size_t size; /* sizeof(ladle_window), set by ladle_window_init (checked by the calls that take it) */
    int ndim;
    int64_t kernel[LADLE_MAX_NDIM];
    int64_t stride[LADLE_MAX_NDIM];
    int64_t padding[LADLE_MAX_NDIM];
    int64_t dilation[LADLE_MAX_NDIM];
    int ceil_mode;
    /* Bit d set: dimension d is periodic for ladle_halo_exchange_create:
     * its halo cells beyond a global edge wrap around to the other end, as
     * circular padding. A field of the window rather than a flag of the
     * call, since it is a property of each dimension's padding like
     * `padding` itself; it fills what was the struct's tail padding, so
     * the struct's size and the offsets of its other fields are those of
     * 0.2.0. */
    unsigned periodic;
} ladle_window;

/* Set w to the identity window of ndim dimensions (1/1/0/1, no ceil mode,
 * no periodic dimension). Local. */
LADLE_API void ladle_window_init(ladle_window *w, int ndim);

/*
 * HaloExchange for a tensor decomposed by x (any rectilinear split, 1 to
 * LADLE_MAX_NDIM dimensions, any of them partitioned), for a windowed kernel
 * w whose output is split in balance over the same partition (dimensions
 * with the identity window keep x's split).
 *
 * Each rank works on a *padded* local tensor: its own block (the bulk) plus
 * the halo it needs to compute its share of the output, per rank and per
 * side (unbalanced, zero-width and one-sided halos, ranks that need nothing,
 * halos wider than a neighbour's block, corners). Halo cells outside the
 * global index space are the kernel's padding: the op never touches them, so
 * the caller fills them once (zeros for convolution, -inf for max pooling).
 *
 * Except along the periodic dimensions (w->periodic, bit d for dimension d):
 * there the index space wraps around, as circular padding does, and a halo
 * cell at global index g beyond an edge of extent S is the cell g + S (left
 * of 0: x[-i] = x[S - i]) or g - S (right: x[S - 1 + i] = x[i - 1]), taken
 * from whichever rank owns it (itself included: an unsplit dimension wraps
 * within the rank). A cell beyond the edges of a periodic and of a
 * non-periodic dimension (a corner) stays padding. A periodic halo may be as
 * wide as the global extent (halos wider than the blocks of several ranks
 * reach each of them), not wider.
 *
 *   F  : each halo cell takes the value of the bulk cell of its owner
 *        (through the wrap-around on periodic dimensions); the bulk is
 *        unchanged
 *   F* : each halo cell is added into its owner's bulk and set to zero
 *        (sums in a fixed order, independent of message arrival)
 *
 * Both x and y of the op are the padded tensors (see
 * ladle_halo_exchange_geometry); forward and adjoint work in place when x
 * and y are the same tensor. Collective over the partition of x. Returns the
 * codes of ladle_broadcast_create; LADLE_ERR_ARG (on every rank, naming the
 * dimension and the value) for a kernel, stride or dilation below 1, a
 * negative padding, a padded input, dilated kernel or stride above 2^57,
 * an output or padded shard of more than 2^57 elements, a periodic bit of a
 * dimension the window does not have, and a periodic halo wider than its
 * dimension's global extent; LADLE_ERR_SHAPE for a dilated kernel larger
 * than the padded input; LADLE_ERR_UNSUPPORTED when the wrap-around of many
 * periodic dimensions needs more MPI tags than the MPI offers (3^n
 * exchanges for n periodic dimensions with halos beyond their edges). */
LADLE_API ladle_status ladle_halo_exchange_create(const ladle_layout *x, const ladle_window *w,
                                                  ladle_dtype dtype, ladle_device device,
                                                  unsigned flags, ladle_op **op);

/* The begin/end split of the in-place exchange on padded tensor t, so work
 * on the interior can overlap the messages: begin posts every receive and
 * send, end waits and writes the halos. Between them the caller may read the
 * bulk but must not write the bulk or the halo. One exchange per op may be in
 * flight. Collective over the partition. Returns the codes of
 * ladle_op_forward and LADLE_ERR_STATE (begin twice, end without begin). */
LADLE_API ladle_status ladle_halo_exchange_begin(ladle_op *op, ladle_tensor *t);
LADLE_API ladle_status ladle_halo_exchange_end(ladle_op *op, ladle_tensor *t);
/* The same split for the adjoint (halos added into owners, then zeroed):
 * between begin and end the caller must not touch t. Collective over the
 * partition, as the forward's begin and end. */
LADLE_API ladle_status ladle_halo_exchange_adjoint_begin(ladle_op *op, ladle_tensor *t);
LADLE_API ladle_status ladle_halo_exchange_adjoint_end(ladle_op *op, ladle_tensor *t);
/* Between a begin and its end (forward or adjoint): move on what can move
 * without waiting. MPI moves a message only inside MPI calls on many
 * transports (TCP, and the rendezvous of larger messages on RDMA
 * networks), so work that overlaps an exchange calls this every so often
 * for the messages to travel meanwhile. *done (unless done is NULL) becomes
 * 1 when end would not wait. Local; each rank calls it as often as it
 * likes. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (not a halo exchange),
 * LADLE_ERR_STATE (no exchange in flight) and LADLE_ERR_MPI. */
LADLE_API ladle_status ladle_halo_exchange_progress(ladle_op *op, int *done);

/* This rank's geometry for a halo exchange op. All boxes are per dimension;
 * offsets inside the padded tensor unless said otherwise. */
typedef struct ladle_halo_geometry {
    int ndim;
    int64_t padded_shape[LADLE_MAX_NDIM];  /* the local tensor of the op */
    int64_t padded_offset[LADLE_MAX_NDIM]; /* its global offset (may be < 0) */
    int64_t bulk_offset[LADLE_MAX_NDIM];   /* own block inside padded */
    int64_t bulk_shape[LADLE_MAX_NDIM];
    int64_t halo_left[LADLE_MAX_NDIM]; /* padded minus bulk, per side */
    int64_t halo_right[LADLE_MAX_NDIM];
    int64_t needed_offset[LADLE_MAX_NDIM]; /* the box a kernel with padding 0 */
    int64_t needed_shape[LADLE_MAX_NDIM];  /* reads to make its output block */
    int64_t output_shape[LADLE_MAX_NDIM];  /* this rank's output block */
    int64_t output_offset[LADLE_MAX_NDIM]; /* its global offset */
    int64_t global_output_shape[LADLE_MAX_NDIM];
} ladle_halo_geometry;

/* Fill g for the calling rank (zeros everywhere on ranks outside the
 * partition). Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG when op
 * is not a halo exchange. */
LADLE_API ladle_status ladle_halo_exchange_geometry(const ladle_op *op,
                                                    ladle_halo_geometry *g);

/* The wrap-around of periodic dimensions on the calling rank (a call of its
 * own, since ladle_halo_geometry has no size field to grow by): *periodic
 * the window's periodic bits, and per dimension how many halo cells left
 * of the global index space (wrap_left) and right of it (wrap_right) the op
 * fills by wrapping around; 0 on other dimensions, whose cells beyond the
 * edges are padding, and on ranks outside the partition. Any output may be
 * NULL; the arrays hold LADLE_MAX_NDIM values. Local. Returns
 * LADLE_ERR_NULL (no op) and LADLE_ERR_ARG when op is not a halo
 * exchange. */
LADLE_API ladle_status ladle_halo_exchange_wrap(const ladle_op *op, unsigned *periodic,
                                                int64_t wrap_left[], int64_t wrap_right[]);

/* The decomposition of the unpadded tensor (the x the op was made from) and of
 * the output; borrowed, valid while op lives. NULL if op is not a halo
 * exchange. Local. */
LADLE_API const ladle_layout *ladle_halo_exchange_bulk_layout(const ladle_op *op);
LADLE_API const ladle_layout *ladle_halo_exchange_output_layout(const ladle_op *op);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_PRIMITIVES_H */
