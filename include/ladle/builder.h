/*
 * ladle/builder.h - a few calls that make a convolutional network (a
 * ladle_graph) on one of ladle's layouts.
 *
 * A builder owns a graph under construction and the partitions of one
 * layout, fixed at creation:
 *
 *   sequential        plain sequential layers on the whole batch (every
 *                     rank the same network: the reference of the others)
 *   data D            the batch split D ways
 *   spatial Ph x Pw   each batch block's images cut into Ph x Pw tiles
 *                     (halo exchanges); mixes with D
 *   channel C         the channels split C ways: convolutions over a
 *                     C x C weight grid (ladle_dist_conv_grid_create, Pci =
 *                     Pco = C; a convolution reading the image, whose
 *                     channels stay whole, uses Pci = 1); mixes with Ph x Pw,
 *                     not with D
 *
 * The convolution part runs on D x Ph x Pw ranks (row-major (batch block,
 * tile row, tile column)) or C x Ph x Pw ranks ((channel block, tile)) with
 * weight workers on C x C x Ph x Pw ranks ((out block, in block, tile));
 * the head (global average pooling, classifier, loss) on the D ranks that
 * hold each batch block's first tile (rank 0 alone with channels). Ranks
 * beyond take no part (zero-volume blocks).
 *
 * The builder tracks each value's global shape. Values are the graph's ids
 * (ladle/graph.h). Names become node names, and parameter names are
 * "<node>.<parameter>" ("stage2.block1.conv1.weight"). Layer k (counting
 * the layers with weights in the order they are added) draws its weights
 * with seed + k, so the same calls on any layout, sequential included,
 * start from the same weights.
 *
 * Creation and ladle_builder_finish are collective over comm, and so are
 * the add calls that make layers on a distributed layout: the distributed
 * layers' constructors inside them are collective, so every rank of comm
 * must make the same calls in the same order. On the sequential reference
 * the add calls are local. A call that fails leaves the builder
 * able only to be destroyed (LADLE_ERR_STATE afterwards).
 */
#ifndef LADLE_BUILDER_H
#define LADLE_BUILDER_H

#include "distributed.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ladle_builder ladle_builder;

typedef struct ladle_builder_desc {
    size_t size; /* sizeof(ladle_builder_desc), set by ladle_builder_desc_init (checked) */
    int sequential;        /* nonzero: the sequential reference (the ways are ignored) */
    int data_ways;         /* D */
    int spatial[2];        /* Ph, Pw */
    int channel_ways;      /* C (D must then be 1) */
    ladle_bn_sync bn_sync; /* the batch norms' statistics over the peers */
    int bn_group;          /* the group size of LADLE_BN_SYNC_GROUP */
    ladle_dtype dtype;
    ladle_device device;
    uint64_t seed;
} ladle_builder_desc;

/* Layout 1 x 1x1 x 1 (distributed layers on one rank), global batch-norm
 * statistics, f32, the CPU, seed 1. Local. Accepts NULL. */
LADLE_API void ladle_builder_desc_init(ladle_builder_desc *d);

/* A builder over comm. Collective over comm. Returns LADLE_ERR_NULL,
 * LADLE_ERR_ARG (a size that is not this library's, ways below 1 or above
 * 4096, a layout needing more ranks than comm has, channel ways mixed with
 * data ways), LADLE_ERR_DTYPE, LADLE_ERR_MPI, LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_builder_create(const ladle_builder_desc *d, ladle_comm comm,
                                            ladle_builder **b);
/* Destroy the builder and, unless finish handed it over, its graph. *b
 * becomes NULL; accepts NULL. Collective over comm for a distributed
 * layout: the graph's layers and the partitions it releases free their
 * communicators (as ladle_graph_destroy and ladle_partition_destroy).
 * Local for the sequential reference. */
LADLE_API ladle_status ladle_builder_destroy(ladle_builder **b);

/* The calls below set *id (or *k) only on success and return
 * LADLE_ERR_NULL, LADLE_ERR_STATE (after finish or a failed call),
 * LADLE_ERR_ARG (a value id the builder did not make, a bad number, a name
 * too long or taken), LADLE_ERR_SHAPE (a value of the wrong rank or
 * shape), and the codes of the layers' constructors. */

/* The images: a graph input of global shape N x C x H x W (the batch is
 * split as the layout says; the channels stay whole). The input block of a
 * rank is its box of ladle_graph_value_layout(graph, id) (the whole tensor
 * when sequential). Local. */
LADLE_API ladle_status ladle_builder_input(ladle_builder *b, const char *name,
                                           const int64_t shape[4], int *id);
/* conv k x k (padding k / 2, stride, no bias) "<name>.conv" and batch
 * norm "<name>.bn" (follow with ladle_builder_relu for the ReLU).
 * Collective over comm on a distributed layout (it makes distributed
 * layers), local on the sequential reference. */
LADLE_API ladle_status ladle_builder_conv_bn(ladle_builder *b, const char *name, int x,
                                             int64_t out_channels, int kernel, int stride,
                                             int *id);
/* ReLU "<name>.relu" on x's blocks. Local; it sends nothing, but every
 * rank of comm must make it, in the same order as the other nodes. */
LADLE_API ladle_status ladle_builder_relu(ladle_builder *b, const char *name, int x,
                                          int *id);
/* The shortcut of a block taking x to out_channels at stride: x itself when
 * both keep x's shape, else conv 1x1 at stride "<name>.conv" and batch norm
 * "<name>.bn". Collective over comm, as ladle_builder_conv_bn. */
LADLE_API ladle_status ladle_builder_shortcut(ladle_builder *b, const char *name, int x,
                                              int64_t out_channels, int stride, int *id);
/* The basic residual block: relu(bn2(conv2 3x3(relu(bn1(conv1 3x3 stride
 * (x))))) + shortcut(x)) with planes channels; nodes "<name>.conv1",
 * ".bn1", ".relu1", ".conv2", ".bn2", ".shortcut.conv", ".shortcut.bn",
 * ".add", ".relu". Collective over comm, as ladle_builder_conv_bn. */
LADLE_API ladle_status ladle_builder_basic_block(ladle_builder *b, const char *name, int x,
                                                 int64_t planes, int stride, int *id);
/* The bottleneck block: conv1 1x1 to planes, conv2 3x3 at stride, conv3
 * 1x1 to 4 planes (each with batch norm, ReLU after the first two), plus
 * the shortcut, then ReLU. Nodes named as the basic block's, with ".conv3",
 * ".bn3". Collective over comm, as ladle_builder_conv_bn. */
LADLE_API ladle_status ladle_builder_bottleneck(ladle_builder *b, const char *name, int x,
                                                int64_t planes, int stride, int *id);
/* Global average pooling N x C x H x W -> N x C: each tile sums its block,
 * a sum-reduce adds the tiles onto the head (ladle_dist_global_avg_pool).
 * Collective over comm, as ladle_builder_conv_bn. */
LADLE_API ladle_status ladle_builder_global_avg_pool(ladle_builder *b, const char *name, int x,
                                                     int *id);
/* Linear N x F -> N x classes (with bias), after global average pooling.
 * Collective over comm, as ladle_builder_conv_bn. */
LADLE_API ladle_status ladle_builder_classifier(ladle_builder *b, const char *name, int x,
                                                int64_t classes, int *id);
/* Cross entropy (mean over the batch) of the logits x against i64 labels
 * (a rank's labels: the rows of its box of x's layout); *k (may be NULL)
 * gets the loss's index. Collective over comm, as ladle_builder_conv_bn. */
LADLE_API ladle_status ladle_builder_loss(ladle_builder *b, const char *name, int x, int *k);

/* Value id's global shape (ndim entries, up to LADLE_MAX_NDIM). Local.
 * Returns LADLE_ERR_NULL, LADLE_ERR_ARG. */
LADLE_API ladle_status ladle_builder_shape(const ladle_builder *b, int id, int *ndim,
                                           int64_t shape[]);
/* The graph being built (borrowed; NULL after finish), for nodes the
 * builder does not make. Local. */
LADLE_API ladle_graph *ladle_builder_graph(const ladle_builder *b);

/* Make output (a value id) the graph's output, finalize the graph (see
 * ladle_graph_finalize) and hand it to the caller in *g (the builder keeps
 * nothing of it). Collective over comm. Returns LADLE_ERR_NULL,
 * LADLE_ERR_STATE, LADLE_ERR_ARG, the codes of ladle_graph_finalize. */
LADLE_API ladle_status ladle_builder_finish(ladle_builder *b, int output, ladle_graph **g);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_BUILDER_H */
