/*
 * ladle/models.h - ready-made networks.
 *
 * LeNet-5 for 1-channel square images (Fashion-MNIST: 28 x 28, 10 classes),
 * with ReLU and max pooling:
 *
 *   conv 1->6 k5 p2, [bn], maxpool 2, relu
 *   conv 6->16 k5,   [bn], maxpool 2, relu
 *   flatten, linear 16*5*5->120, relu, linear 120->84, relu, linear 84->10
 *   cross entropy (mean)
 *
 * Each ReLU comes after its max pooling: the two commute (the max of ReLUs
 * is the ReLU of the max, and the gradient reaches the same input or is
 * zero), so the network computes and trains as the textbook order (conv,
 * relu, pool) does, with a quarter of the ReLU's work (test_dist_train
 * checks the two against each other).
 *
 * laid out over a communicator's ranks as:
 *
 *   data_ways D       the batch split D ways (every part of the network)
 *   spatial Ph x Pw   each batch block's images split into Ph x Pw tiles in
 *                     the convolution part (halo exchanges)
 *   fc_ways F         the first linear layer's outputs and the second's
 *                     inputs split F ways (a column- then a row-parallel
 *                     layer, chained without a repartition)
 *
 * The convolution part uses D x Ph x Pw ranks (0, 1, ... in row-major order
 * of (batch block, tile row, tile column)); the linear part D x F of them,
 * F <= Ph x Pw, those of batch block b starting at b's first tile. Ranks
 * beyond D x Ph x Pw take no part (zero-volume blocks). Batch norm's
 * statistics follow bn_sync over the ranks sharing the channels.
 */
#ifndef LADLE_MODELS_H
#define LADLE_MODELS_H

#include "distributed.h"
#include "graph.h"
#include "network.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ladle_lenet_desc {
    size_t size; /* sizeof(ladle_lenet_desc), set by ladle_lenet_desc_init (checked by the calls that take it) */
    int64_t batch;       /* global batch */
    int64_t image;       /* side of the square input images (28) */
    int64_t classes;     /* 10 */
    int batchnorm;       /* nonzero: batch norm after each convolution */
    ladle_bn_sync bn_sync;
    int bn_group;        /* the group size of LADLE_BN_SYNC_GROUP */
    int data_ways;       /* D */
    int spatial[2];      /* Ph, Pw */
    int fc_ways;         /* F */
    int sequential;      /* nonzero: plain sequential layers on the whole batch
                            (every rank the same network; the reference) */
    ladle_dtype dtype;
    ladle_device device; /* where the layers live (LADLE_CPU) */
    uint64_t seed;       /* the weights are the same for every layout */
} ladle_lenet_desc;

/* Batch 64, 28 x 28 images, 10 classes, no batch norm, one rank, f32, on
 * the CPU, seed 1. Local. */
LADLE_API void ladle_lenet_desc_init(ladle_lenet_desc *d);

/* The network over comm. Collective over comm. The input block of this
 * rank is ladle_op_x_layout(ladle_network_layer(net, 0))'s box of the
 * global N x 1 x image x image batch; the labels block the rows of
 * ladle_op_x_layout(ladle_network_loss_op(net))'s box. Returns
 * LADLE_ERR_NULL, LADLE_ERR_ARG (a layout that does not fit comm or the
 * images), the codes of the layers' constructors. */
LADLE_API ladle_status ladle_lenet_create(const ladle_lenet_desc *d, ladle_comm comm,
                                          ladle_network **net);

/* LeNet-5's sequential layers (the layout fields are ignored) for batches of
 * d->batch, in order, into layers[0 .. *n-1] (cap entries of room; 16 are
 * enough), and its loss: the caller owns them. A pipeline cuts this list
 * into stages. Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG, the
 * codes of the layers' constructors. */
LADLE_API ladle_status ladle_lenet_layers(const ladle_lenet_desc *d, int cap, ladle_op *layers[],
                                          int *n, ladle_op **loss);

/*
 * ResNets (He et al., 2016) as graphs (ladle/graph.h), made with the
 * builder (ladle/builder.h, whose layouts they take):
 *
 *   stem     conv 3x3 (stride 1) in_channels -> width, bn, relu (no max pool)
 *   stage s  blocks[s] residual blocks of width << s planes, the first at
 *            stride 2 for s > 0 (its shortcut a 1x1 conv at stride 2 + bn
 *            where the shape changes), nodes "stage<s+1>.block<b+1>...."
 *   head     global average pooling, linear -> classes ("fc"), cross
 *            entropy (mean)
 *
 * Basic blocks (two 3x3 convs) or bottlenecks (1x1, 3x3, 1x1 to 4 planes).
 * The kinds fill stages, blocks, width and bottleneck:
 *
 *   LADLE_RESNET20         CIFAR-style: 3 stages of 3 basic blocks, width 16
 *                          (16/32/64 channels), linear 64 -> classes
 *   LADLE_RESNET18         4 stages of 2 basic blocks, width 64 (64..512)
 *   LADLE_RESNET8          3 stages of 1 basic block, width 4 (tests)
 *   LADLE_RESNET_BOTTLENECK_TINY  3 stages of 1 bottleneck, width 2
 *                          (outputs 8/16/32; tests)
 *
 * and every field may be changed after _init.
 */
typedef enum ladle_resnet_kind {
    LADLE_RESNET20 = 0,
    LADLE_RESNET18 = 1,
    LADLE_RESNET8 = 2,
    LADLE_RESNET_BOTTLENECK_TINY = 3
} ladle_resnet_kind;

#define LADLE_RESNET_MAX_STAGES 4

typedef struct ladle_resnet_desc {
    size_t size; /* sizeof(ladle_resnet_desc), set by ladle_resnet_desc_init (checked) */
    int stages;     /* 1 to LADLE_RESNET_MAX_STAGES */
    int blocks[LADLE_RESNET_MAX_STAGES];
    int64_t width;  /* the stem's and the first stage's channels */
    int bottleneck; /* nonzero: bottleneck blocks */
    int64_t batch;  /* global batch (64) */
    int64_t image;  /* side of the square images (28) */
    int64_t in_channels; /* 1 */
    int64_t classes;     /* 10 */
    int data_ways;       /* D */
    int spatial[2];      /* Ph, Pw */
    int channel_ways;    /* C (not with D > 1) */
    ladle_bn_sync bn_sync;
    int bn_group;
    int sequential; /* nonzero: the sequential reference on every rank */
    ladle_dtype dtype;
    ladle_device device;
    uint64_t seed; /* the weights are the same for every layout */
} ladle_resnet_desc;

/* The kind's shape, batch 64, 28 x 28 x 1 images, 10 classes, one rank
 * (layout 1 x 1x1 x 1), global batch-norm statistics, f32, the CPU, seed 1.
 * Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (an unknown kind). */
LADLE_API ladle_status ladle_resnet_desc_init(ladle_resnet_desc *d, ladle_resnet_kind kind);

/* The ResNet of d over comm, finalized, in training mode. The images (value
 * 0) are N x in_channels x image x image, a rank's block its box of
 * ladle_graph_value_layout(g, 0); the logits are the graph's output, made
 * by its last layer, the classifier (ladle_graph_layer(g,
 * ladle_graph_num_layers(g) - 1)), and a rank's labels (i64) are the rows
 * of its box of that layer's ladle_op_y_layout (the whole batch when
 * sequential). Collective over comm. Returns
 * LADLE_ERR_NULL, LADLE_ERR_ARG (a size or number out of range: stages,
 * blocks, width, classes; a layout that does not fit comm; a batch smaller
 * than the data ways; channels fewer than the channel ways; images too small
 * for the strides and tiles), the codes of ladle_builder_create and of the
 * layers' constructors. Every rank returns the same status. */
LADLE_API ladle_status ladle_resnet_create(const ladle_resnet_desc *d, ladle_comm comm,
                                           ladle_graph **g);

/*
 * A GPT-style decoder-only transformer as a graph (ladle/graph.h), on one
 * rank or data parallel over D (see ladle_gpt_create):
 *
 *   ids (N x T, LADLE_I64, graph value 0)
 *   "wte"  token embedding V -> E,  "wpe" learned positions (T of them)
 *   block b = 1 .. L, pre-norm with residuals:
 *     "h<b>.ln1" layer norm, "h<b>.attn" causal self-attention (H heads of
 *     E / H), "h<b>.res1" = its input + the attention's output;
 *     "h<b>.ln2", "h<b>.fc" linear E -> mlp E, "h<b>.gelu" (tanh form, as
 *     GPT-2), "h<b>.proj" linear mlp E -> E, "h<b>.res2" = res1 + proj
 *     (with dropout p after the attention and after proj when p > 0)
 *   "ln_f" layer norm, "head" linear E -> V without bias, "rows" the
 *   N T x V logits (the graph's output), "loss" cross entropy, mean over
 *   the targets that are not -1 (ignore_index -1: an evaluation batch's
 *   padding)
 *
 * Targets are i64, N T (row n T + t: the token after position t of sample
 * n). The layers that draw (weights, or a dropout's masks) take seeds
 * seed, seed + 1, ... in the order above: embeddings normal(0, 1) as
 * nn.Embedding, linears and the attention's projections as nn.Linear;
 * layer norms start at ones and zeros.
 */
typedef struct ladle_gpt_desc {
    size_t size;     /* sizeof(ladle_gpt_desc), set by ladle_gpt_desc_init (checked) */
    int64_t vocab;   /* V, 1 .. 2^24 */
    int64_t context; /* T, the sequence length and the positions learned */
    int64_t batch;   /* N */
    int layers;      /* L, 1 .. 256 */
    int64_t width;   /* E */
    int64_t heads;   /* H, dividing E */
    int64_t mlp;     /* the MLP's hidden width is mlp E (4) */
    double dropout;  /* p in [0, 1) (0) */
    ladle_dtype dtype;
    ladle_device device;
    uint64_t seed;
    int data_ways;   /* D: the batch split D ways over the ranks (1) */
    int tensor_ways; /* S: heads, MLP features and the sequence split S ways (1) */
    int attn_f32_tiles; /* the attention layers' f32_tiles (ladle_attention_desc): an f32
                           model's tile products in f32 GEMMs, about twice as fast (0) */
    int recompute;      /* a ladle_gpt_recompute: which activations the backward
                           recomputes instead of keeping (LADLE_GPT_RECOMPUTE_NONE) */
} ladle_gpt_desc;

/* What a GPT recomputes (ladle_recompute_create), for ladle_gpt_desc:
 * NONE keeps every activation; BLOCK wraps each residual half of a block
 * (the attention's and the MLP's), so a microbatch keeps only the stream
 * between them and the backward runs each block's forward again;
 * SELECTIVE wraps only the cheap layers of each block (the layer norms and
 * the GELU), keeping the GEMMs' outputs (attention's probabilities are
 * never kept: its backward recomputes them in any mode). Losses and
 * gradients are the same bits in every mode (dropout masks included), and
 * a graph shares one scratch among its wrappers. Not yet with
 * tensor_ways > 1. In a mode other than NONE the graph's blocks are nodes
 * "hK.attn" and "hK.mlp" (the chain's residual blocks), so checkpoints
 * name the parameters otherwise. */
typedef enum ladle_gpt_recompute {
    LADLE_GPT_RECOMPUTE_NONE = 0,
    LADLE_GPT_RECOMPUTE_BLOCK = 1,
    LADLE_GPT_RECOMPUTE_SELECTIVE = 2
} ladle_gpt_recompute;

/* V 256, T 128, N 32, 4 layers of width 128 with 4 heads, mlp 4, no
 * dropout, f32, the CPU, seed 1, D 1, S 1, attention tiles in double, no
 * recomputation.
 * Local. Accepts NULL. */
LADLE_API void ladle_gpt_desc_init(ladle_gpt_desc *d);

/* The GPT of d, finalized, in training mode, over comm, whose size must be
 * D S (d->data_ways times
 * d->tensor_ways; D dividing the batch N, S the context T). Rank r = b S +
 * i of comm holds windows b N/D .. (b + 1) N/D - 1 of the global batch and
 * their positions i T/S .. (i + 1) T/S - 1: its ids input is N/D x T/S, and
 * its targets (the rows of its block of the logits, value "rows") are
 * those windows' targets at those positions, N/D T/S of them, window by
 * window. The residual stream is split the same way (sequence
 * parallelism). Layers with parameters that act on a rank's own block (the
 * embeddings, the layer norms, the head) are replicated over the D S ranks
 * (ladle_dist_replicate_create); with S > 1 the attention and the MLP are
 * tensor parallel over the S ranks of a batch block
 * (ladle_dist_tp_attention_create, ladle_dist_tp_linear_create: heads and
 * hidden features split S ways, the sequence gathered for them and the
 * partial outputs reduce-scattered back). The weights are
 * ladle_gpt_create's with the same seed, the gradients summed over their
 * copies in the graph's buckets, and the loss the cross entropy over the
 * rows split D S ways (ladle_dist_vocab_loss_create): the mean over the
 * global batch, known on every rank. Its steps equal one rank's on the
 * whole batch (test_gpt). On one rank (comm MPI_COMM_SELF's, D = S = 1)
 * the graph has no distributed layer. Collective over comm. Returns
 * LADLE_ERR_NULL, LADLE_ERR_ARG (a bad size field; a number out of range,
 * naming it: vocab, context, batch, layers, width, heads not dividing
 * width, mlp, dropout; sizes whose products overflow; comm's size is not
 * D S; D not dividing
 * N, S not dividing T, S above H or the MLP's width), LADLE_ERR_DEVICE
 * (the distributed loss runs on the CPU only for now; a backend without
 * attention kernels), LADLE_ERR_MPI, and the codes of the layers'
 * constructors and of ladle_graph_finalize. */
LADLE_API ladle_status ladle_gpt_create(const ladle_gpt_desc *d, ladle_comm comm,
                                        ladle_graph **g);

/*
 * The same GPT as a chain of layers, for pipelines (ladle/pipeline.h),
 * which cut chains into stages: with d->batch the microbatch N (and D = S =
 * 1; a pipeline replicates stages instead), the chain is
 *
 *   0 "wte" (ids N x T, LADLE_I64), 1 "wpe", ["drop" when p > 0],
 *   per block two residual blocks (ladle_residual_create) over sequentials:
 *     x + drop1(attn(ln1(x))),   x + drop2(proj(gelu(fc(ln2(x))))),
 *   "ln_f", "head", "rows" (the N T x V logits)
 *
 * ladle_gpt_num_layers(d) of them (2 + [p > 0] + 2 L + 3). The weights are
 * ladle_gpt_create's for the same d and seed, layer for layer, and so are
 * the steps (test_gpt_pipe). ladle_gpt_layers makes layers first ..
 * first + count - 1 into layers[0 .. count-1], in training mode, drawing
 * the seeds those layers draw in the whole chain, so each pipeline worker
 * makes only its stages. ladle_gpt_loss_create makes the loss that follows
 * "rows": cross entropy, mean, ignore_index -1, targets i64 N T. Over a
 * communicator of one rank (MPI_COMM_SELF's) they are local. The others
 * return ladle_gpt_create's codes, and LADLE_ERR_ARG for D or S other than 1
 * and for a range outside the chain; on failure nothing is left made.
 * ladle_gpt_num_layers returns the chain's length, or -1 for a bad d. Local.
 */
LADLE_API int ladle_gpt_num_layers(const ladle_gpt_desc *d);

/*
 * The chain with tensor and sequence parallelism inside a stage: the same
 * layers over the S ranks of comm (d->tensor_ways = S, the size of comm;
 * d->data_ways 1, d->batch the microbatch), as ladle_gpt_create lays
 * them out for D = 1. Rank i of comm holds sequence block i (positions
 * i T/S ..) of every window: "wte" takes its N x T/S ids, the stream
 * between the layers is its N x T/S x E block, the residual blocks' bodies
 * are chains of distributed layers (the layer norms and dropouts copies on
 * the ranks' blocks, ladle_dist_replicate_create_on; the attention and
 * the MLP's linears tensor parallel over the S ranks), and "rows" gives
 * its N T/S logits rows. Every layer has the layouts of its blocks
 * (ladle_op_x_layout), so a pipeline whose workers are S-rank partitions
 * (ladle_pipeline_create_workers) cuts the chain anywhere and moves each
 * rank's block to the same rank of the next stage's worker, and a worker
 * of one rank (S = 1) may feed one of S ranks. The weights are
 * ladle_gpt_create's for the same seed, each rank holding its boxes.
 * ladle_gpt_loss_create makes the loss after "rows": cross entropy over
 * the rows split S ways (ladle_dist_loss_create), the mean over all of
 * them on every rank. Collective over comm; with S = 1 they make the
 * one-rank chain above. Return the codes of ladle_gpt_create,
 * LADLE_ERR_ARG (tensor_ways is not comm's size, data_ways is not 1) on
 * every rank of comm, LADLE_ERR_MPI.
 *
 * The rows of a tensor-parallel stage are ordered by sequence block: the
 * rows of a microbatch are block 0's (window by window), then block 1's.
 * ladle_gpt_chain_targets writes targets (n x T i64 windows, n a multiple
 * of d->batch, on the CPU) in that order into rows (n T i64): microbatch by
 * microbatch, the order a pipeline's loss reads them in. With S = 1 it is
 * the plain flattening. Local. Returns LADLE_ERR_NULL, LADLE_ERR_DTYPE,
 * LADLE_ERR_DEVICE, LADLE_ERR_SHAPE, LADLE_ERR_ARG (one buffer for both).
 */
LADLE_API ladle_status ladle_gpt_layers(const ladle_gpt_desc *d, ladle_comm comm, int first,
                                        int count, ladle_op *layers[]);
LADLE_API ladle_status ladle_gpt_loss_create(const ladle_gpt_desc *d, ladle_comm comm,
                                             ladle_op **loss);
LADLE_API ladle_status ladle_gpt_chain_targets(const ladle_gpt_desc *d,
                                               const ladle_tensor *targets,
                                               ladle_tensor *rows);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_MODELS_H */
