/*
 * ladle/op.h - the operator interface.
 *
 * A ladle_op is a linear operator F between distributed tensors, with its
 * adjoint F*. Creating an op plans everything once (communication groups,
 * message sizes, buffers, which are allocated and touched then); forward
 * and adjoint only execute: they never allocate and never create
 * communicators. Each op talks on its own private communicator, so ops never
 * see each other's messages.
 *
 * Every rank that took part in creating the op calls forward and adjoint;
 * ranks that hold nothing of x or y pass zero-volume tensors (never NULL).
 * Outputs are overwritten. One op runs one call at a time (it owns its
 * buffers); create one op per concurrent use.
 */
#ifndef LADLE_OP_H
#define LADLE_OP_H

#include "core.h"
#include "layout.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ladle_op ladle_op;

/*
 * What an op is: one kind per constructor family of the library. The list is
 * append-only (a value, once released, keeps its number).
 * X(name, value, text)
 */
#define LADLE_OP_KIND_LIST(X)                                                              \
    X(LADLE_OP_NONE, 0, "none")                     /* NULL, or an op of no known kind */ \
    X(LADLE_OP_BROADCAST, 1, "broadcast")                                                  \
    X(LADLE_OP_SUM_REDUCE, 2, "sum-reduce")                                                \
    X(LADLE_OP_ALL_SUM_REDUCE, 3, "all-sum-reduce")                                        \
    X(LADLE_OP_REPARTITION, 4, "repartition")                                              \
    X(LADLE_OP_HALO_EXCHANGE, 5, "halo-exchange")                                          \
    X(LADLE_OP_LINEAR, 6, "linear")                                                        \
    X(LADLE_OP_CONV, 7, "conv")                                                            \
    X(LADLE_OP_POOL, 8, "pool")                     /* max, average and global average */ \
    X(LADLE_OP_BATCHNORM, 9, "batchnorm")                                                  \
    X(LADLE_OP_ACTIVATION, 10, "activation")                                               \
    X(LADLE_OP_SOFTMAX, 11, "softmax")              /* softmax and log-softmax */         \
    X(LADLE_OP_DROPOUT, 12, "dropout")                                                     \
    X(LADLE_OP_RESHAPE, 13, "reshape")              /* reshape and flatten */             \
    X(LADLE_OP_SEQUENTIAL, 14, "sequential")                                               \
    X(LADLE_OP_LOSS, 15, "loss")                    /* every kind of sequential loss */   \
    X(LADLE_OP_DIST_LINEAR, 16, "dist-linear")                                             \
    X(LADLE_OP_DIST_CONV, 17, "dist-conv")                                                 \
    X(LADLE_OP_DIST_CONV_GRID, 18, "dist-conv-grid")                                       \
    X(LADLE_OP_DIST_POOL, 19, "dist-pool")                                                 \
    X(LADLE_OP_DIST_BATCHNORM, 20, "dist-batchnorm")                                       \
    X(LADLE_OP_DIST_FLATTEN, 21, "dist-flatten")                                           \
    X(LADLE_OP_DIST_LOSS, 22, "dist-loss")          /* every kind of distributed loss */ \
    X(LADLE_OP_CUSTOM, 23, "custom")                /* the user's (ladle/custom.h) */    \
    X(LADLE_OP_DIST_GLOBAL_POOL, 24, "dist-global-pool")                                   \
    X(LADLE_OP_INTERPOLATE, 25, "interpolate")      /* nearest and linear upsampling */   \
    X(LADLE_OP_DIST_INTERPOLATE, 26, "dist-interpolate")                                   \
    X(LADLE_OP_ADAPTIVE_POOL, 27, "adaptive-pool")  /* adaptive average pooling */       \
    X(LADLE_OP_DIST_ADAPTIVE_POOL, 28, "dist-adaptive-pool")                               \
    X(LADLE_OP_LAYERNORM, 29, "layernorm")                                                 \
    X(LADLE_OP_RMSNORM, 30, "rmsnorm")                                                     \
    X(LADLE_OP_EMBEDDING, 31, "embedding")          /* token ids to vectors */            \
    X(LADLE_OP_POS_EMBEDDING, 32, "pos-embedding")  /* learned positions, added */       \
    X(LADLE_OP_ATTENTION, 33, "attention")          /* multi-head self-attention */      \
    X(LADLE_OP_DIST_VOCAB_LOSS, 34, "dist-vocab-loss") /* classes split */            \
    X(LADLE_OP_DIST_VOCAB_EMBEDDING, 35, "dist-vocab-embedding") /* rows split */  \
    X(LADLE_OP_DIST_REPLICATE, 36, "dist-replicate") /* data-parallel copies */      \
    X(LADLE_OP_DIST_TP, 37, "dist-tp") /* tensor and sequence parallel */            \
    X(LADLE_OP_RESIDUAL, 38, "residual") /* y = x + f(x) */                          \
    X(LADLE_OP_ALL_GATHER, 39, "all-gather") /* shards concatenated everywhere */      \
    X(LADLE_OP_REDUCE_SCATTER, 40, "reduce-scatter") /* sum, each keeps its shard */ \
    X(LADLE_OP_ADAPTIVE_MAX_POOL, 41, "adaptive-max-pool")                             \
    X(LADLE_OP_DIST_ADAPTIVE_MAX_POOL, 42, "dist-adaptive-max-pool")                   \
    X(LADLE_OP_GROUPNORM, 43, "groupnorm")                                             \
    X(LADLE_OP_DIST_GROUPNORM, 44, "dist-groupnorm")                                   \
    X(LADLE_OP_CONV_TRANSPOSE, 45, "conv-transpose") /* the convolution's adjoint */ \
    X(LADLE_OP_DIST_CONV_TRANSPOSE, 46, "dist-conv-transpose")                         \
    X(LADLE_OP_RECOMPUTE, 49, "recompute") /* activation recomputation */

typedef enum ladle_op_kind {
#define LADLE_OP_KIND_ENUM_(name, value, text) name = value,
    LADLE_OP_KIND_LIST(LADLE_OP_KIND_ENUM_)
#undef LADLE_OP_KIND_ENUM_
} ladle_op_kind;

/* y = F x. Collective over the op's communicator (all ranks of its
 * partitions). x must have this rank's domain
 * shape and y its range shape (ladle_op_x_shape, ladle_op_y_shape), both
 * contiguous, of the op's dtype, on the op's device. x and y must not overlap unless
 * the op says it works in place.
 * Returns LADLE_ERR_NULL, LADLE_ERR_SHAPE, LADLE_ERR_DTYPE, LADLE_ERR_DEVICE,
 * LADLE_ERR_ARG (non-contiguous or overlapping tensors), LADLE_ERR_MPI. A
 * check that fails on only some ranks leaves the others waiting for their
 * peers; create the op with LADLE_CHECKED (or set LADLE_CHECKED=1 in the
 * environment) to agree on the verdict first, at the cost of one small
 * all-reduce per call. */
LADLE_API ladle_status ladle_op_forward(ladle_op *op, const ladle_tensor *x,
                                        ladle_tensor *y);

/* dx = F* dy. Collective over the op's communicator; the same rules as forward with
 * the roles of domain and range exchanged. */
LADLE_API ladle_status ladle_op_adjoint(ladle_op *op, const ladle_tensor *dy,
                                        ladle_tensor *dx);

/* The accessors below are local (they never communicate). */

/* The domain (x) and range (y) layouts: borrowed, valid while op lives.
 * Local. */
LADLE_API const ladle_layout *ladle_op_x_layout(const ladle_op *op);
LADLE_API const ladle_layout *ladle_op_y_layout(const ladle_op *op);

/* This rank's local shapes of x and y (ndim entries; zero-volume on ranks
 * that hold nothing). Local. Returns LADLE_ERR_NULL. */
LADLE_API ladle_status ladle_op_x_shape(const ladle_op *op, int *ndim, int64_t shape[]);
LADLE_API ladle_status ladle_op_y_shape(const ladle_op *op, int *ndim, int64_t shape[]);

/* The op's element type. Local. */
LADLE_API ladle_dtype ladle_op_dtype(const ladle_op *op);
/* The device the op was created on (its tensors must live there); LADLE_CPU
 * for NULL. Local. */
LADLE_API ladle_device ladle_op_device(const ladle_op *op);
/* A name for messages: "broadcast", "sum-reduce", "distributed linear", ...
 * Compare kinds (ladle_op_kind_of), never names. Local. */
LADLE_API const char *ladle_op_name(const ladle_op *op);
/* The op's kind; LADLE_OP_NONE for NULL. Local. */
LADLE_API ladle_op_kind ladle_op_kind_of(const ladle_op *op);
/* The kind's short name ("linear", "dist-batchnorm"); "unknown" outside the
 * list, never NULL. Local. */
LADLE_API const char *ladle_op_kind_name(ladle_op_kind kind);
/* 1 if the calling rank takes part in any message of the op, else 0.
 * Local. */
LADLE_API int ladle_op_active(const ladle_op *op);
/* 1 if on this rank forward and adjoint move no data between ranks (the
 * identity shortcut: at most a local copy), else 0. Local. */
LADLE_API int ladle_op_is_local(const ladle_op *op);
/* Bytes of planned workspace this op holds on this rank. Local. */
LADLE_API size_t ladle_op_workspace_bytes(const ladle_op *op);

/* Free the op and set *op to NULL. Accepts NULL. Collective over the op's
 * communicator (all ranks of its partitions) for a distributed op, and over
 * its layers' for a container of distributed layers: their communicators go
 * with MPI_Comm_free, which MPI counts as collective though it waits for no
 * other rank (it only marks a communicator for release), and a partition
 * whose last reference the op held goes as in ladle_partition_destroy.
 * Local for a rank-local op (a sequential layer, a rank-local custom op, a
 * container of those). */
LADLE_API ladle_status ladle_op_destroy(ladle_op **op);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_OP_H */
