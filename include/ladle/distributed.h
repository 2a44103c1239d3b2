/*
 * ladle/distributed.h - distributed layers.
 *
 * A distributed layer is a layer (ladle/layers.h: forward, backward,
 * backward_weight, contexts) whose x and y are this rank's shards of global
 * tensors decomposed over partitions. Inside, it is a composition of the
 * primitives with a sequential layer on each rank's block, so its backward
 * is the composition of their adjoints. Each one equals its sequential twin
 * applied to the gathered global tensors (test_dist_*).
 *
 * Creation is collective over the union of the layer's partitions; ranks
 * outside them may call it too and get a layer whose calls take zero-volume
 * tensors. Every rank checks the same global facts and the ranks agree on
 * the outcome, so a bad configuration fails on every rank with the same
 * status. The layer calls are collective over the same ranks; with
 * LADLE_CHECKED in flags (or LADLE_CHECKED=1 in the environment) they also
 * agree on their argument checks, so a bad tensor on one rank fails every
 * rank instead of leaving the others waiting. dx == NULL in backward must be
 * the same choice on every rank.
 *
 * Every create takes the dtype and then the device, like the sequential
 * layers; the device must be the same on every rank (it is part of what the
 * ranks agree on), and the layer's primitives, local layers and buffers all
 * live on it.
 *
 * Shapes are fixed at creation, the batch included (no smaller batches).
 * Weights are initialised from the global shape with the seed, so a
 * distributed layer starts from exactly the weights of its sequential twin
 * created with the same seed (ladle_layer_init re-draws them the same way).
 * Every rank reports the same parameters with the same global shapes
 * (ladle_op_param_shard); ranks without a shard hold zero-volume tensors.
 */
#ifndef LADLE_DISTRIBUTED_H
#define LADLE_DISTRIBUTED_H

#include "core.h"
#include "layers.h"
#include "layout.h"
#include "op.h"
#include "partition.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The three partitions of a layer whose input, weights and output are each
 * decomposed (ladle_dist_linear_create, ladle_dist_conv_grid_create): x
 * over p_x, the weights over p_w, y over p_y. A value: fill it in place,
 * (ladle_dist_partitions){.x = px, .w = pw, .y = py}. */
typedef struct ladle_dist_partitions {
    const ladle_partition *x;
    const ladle_partition *w;
    const ladle_partition *y;
} ladle_dist_partitions;

/*
 * Linear y = x W^T + b (the options of ladle_linear_desc) with x of
 * global shape x_shape = {batch, in} (in = d->in_features) decomposed over
 * p->x (D x Pin), y [batch, out] over p->y (D x Pout) and W [out, in] over
 * p->w (Pout x Pin, or Pout x D x Pin when the batch is split D ways), all
 * balanced (p_x, p_w and p_y below are p->x, p->w and p->y):
 *
 *   forward   x block (b, j) is broadcast to the workers (., b, j); worker
 *             (i, b, j) computes x_bj W_ij^T (+ b_i on column 0); the
 *             partial rows are sum-reduced onto rank (b, i) of p_y
 *   backward  dy_bi broadcast along the workers (i, b, .); dx_bj = sum over
 *             i of dy_bi W_ij, sum-reduced onto rank (b, j) of p_x
 *   weight    dW_ij += dy_bi^T x_bj, db_i += column sums of dy_bi
 *
 * With D = 1 the blocks of W and b are unique; with D > 1 every block has a
 * copy per batch block (data parallelism) and ladle_layer_sync_gradients
 * sums their gradients. Pin = 1 or Pout = 1 gives the column- and
 * row-parallel layers; a second layer whose p_x is this one's p_y follows
 * without a repartition. Needs in >= Pin, out >= Pout and batch >= D;
 * d->flags may hold LADLE_CHECKED. Collective over p_x, p_w and p_y (the
 * union).
 * Returns LADLE_ERR_NULL, LADLE_ERR_ARG, LADLE_ERR_SHAPE, LADLE_ERR_DTYPE,
 * LADLE_ERR_PARTITION (shapes that do not fit together), LADLE_ERR_MPI,
 * LADLE_ERR_ALLOC, LADLE_ERR_REMOTE.
 */
LADLE_API ladle_status ladle_dist_linear_create(const ladle_linear_desc *d,
                                                const ladle_dist_partitions *p,
                                                const int64_t x_shape[2], ladle_dtype dtype,
                                                ladle_device device, uint64_t seed,
                                                ladle_op **op);

/*
 * Convolution 1-3d (the options of ladle_conv_desc) with x of global shape
 * x_shape (N x C x S...) decomposed over p_x (ndim 2 + nd) in balance along
 * the batch and the spatial dimensions (p_x's channel extent must be 1):
 * each rank exchanges halos with its neighbours and convolves the box its
 * block of the output needs (a sequential convolution without padding). y
 * is decomposed in balance over p_x too. The weights are replicated on
 * every rank of p_x (partition rank 0 owns them); each rank's
 * backward_weight adds its own contribution and ladle_layer_sync_gradients
 * sums them over p_x. d->flags may hold LADLE_CHECKED and
 * LADLE_OVERLAP_HALO.
 *
 * The padding (d's padding, padding_mode and same, as in
 * ladle_conv_create) applies at the global edges only: inside, the halo
 * brings the neighbours' cells. Reflect and replicate are filled by the
 * ranks at the edges from their own padded tensor after the halo exchange
 * (each edge block of a split dimension must hold the cells they read:
 * max(lo, hi) + 1 for reflect, 1 for replicate); circular wraps around the
 * global domain on every partition: the halo exchange is periodic on every
 * spatial dimension (ladle_halo_exchange_create), so the wrapped halos it
 * brings from the owners are the padding (up to the extent wide). With
 * uneven padding ('same' with an even kernel) the halo is planned for a
 * centred window and each rank convolves the box its output reads. The
 * backward adds the padding cells' gradients into the cells they were read
 * from before the halo's adjoint. Collective over p_x. Returns the codes of
 * ladle_dist_linear_create and ladle_conv_create, LADLE_ERR_UNSUPPORTED as
 * above (the same on every rank).
 */
LADLE_API ladle_status ladle_dist_conv_create(const ladle_conv_desc *d,
                                              const ladle_partition *p_x,
                                              const int64_t x_shape[], ladle_dtype dtype,
                                              ladle_device device, uint64_t seed,
                                              ladle_op **op);

/*
 * Transposed convolution 1-3d (the options of ladle_conv_transpose_desc)
 * with a spatially partitioned input: the adjoint of the spatially
 * partitioned convolution C = ladle_dist_conv_create from C_out to C_in
 * channels over y's global extents, as a layer. y (global shape N x C_out
 * x O..., the sequential layer's) is decomposed in balance over p_x, as
 * C's input; x (global x_shape) as C's output (ladle_op_x_layout). The
 * forward runs C's adjoint: the local transposed convolution of each
 * rank's block (the sequential layer's kernels: the input gradient of a
 * convolution without padding), then the halo exchange's adjoint adds the
 * cells written into the halo to their owners' blocks; the backward runs C
 * (the halo exchange, then the local convolution). The weight and the bias
 * are replicated on every rank of p_x (partition rank 0 owns them);
 * backward_weight adds this rank's contribution and
 * ladle_layer_sync_gradients sums them over p_x. d->flags may hold
 * LADLE_CHECKED and LADLE_OVERLAP_HALO (C's). Collective over p_x. Returns
 * the codes of ladle_conv_transpose_create and ladle_dist_conv_create
 * (LADLE_ERR_PARTITION: p_x of the wrong rank, or splitting channels), and
 * LADLE_ERR_UNSUPPORTED for an output padding of at least the stride, the
 * same on every rank.
 */
LADLE_API ladle_status ladle_dist_conv_transpose_create(const ladle_conv_transpose_desc *d,
                                                        const ladle_partition *p_x,
                                                        const int64_t x_shape[],
                                                        ladle_dtype dtype, ladle_device device,
                                                        uint64_t seed, ladle_op **op);

/*
 * A flag of ladle_dist_conv_create and ladle_dist_pool_create: overlap
 * the halo exchange with the interior. Each rank starts the exchange,
 * computes the outputs whose windows read only its own block (and the
 * global padding), then finishes the exchange and computes the boundary
 * around them; the backward computes the boundary's input gradient first,
 * sends the halos' share back while it computes the interior's, and adds
 * the two in a fixed order. The result is the layer's without the flag up
 * to rounding (the local work is cut into boxes), the same from run to run.
 * It costs copies of the output and its gradient and a local layer per box
 * (memory for their buffers), so it pays only where the wait on the
 * exchange is dearer than those: messages between nodes, or a neighbour
 * that lags. Within one node, where the exchange is a copy made by the
 * same cores, it does not (1.03-1.66x the plain layer's time on 2 cores,
 * docs/benchmarks.md). On every rank where it cannot run (no spatial split,
 * a padding mode other than zeros, no interior) the layer runs without it.
 */
#define LADLE_OVERLAP_HALO 0x8u

/*
 * Convolution over a weight grid: the channel-partitioned (S = 1) and the
 * general (channels and space at once) layer. x (global x_shape) is split
 * in balance over p_x = 1 x Pci x S, y over p_y = 1 x Pco x S and the weight
 * over p_w = Pco x Pci x S, where S is the spatial grid (the same in all
 * three). Each rank of p_x exchanges halos over S and broadcasts the box
 * its tile's output needs to (., j, s) of p_w; worker (i, j, s) convolves
 * it with weight block (out block i, in block j); the partial outputs of
 * (i, ., s) are sum-reduced onto (0, i, s) of p_y. The weight blocks (and
 * the bias blocks, on j = 0) have one copy per tile, their gradients summed
 * by ladle_layer_sync_gradients. Grouped convolutions must keep their
 * channels whole (LADLE_ERR_UNSUPPORTED). Every padding mode (an edge
 * block must hold the cells reflect or replicate read, else
 * LADLE_ERR_UNSUPPORTED); 'same' is refused. Collective over p_x, p_w and p_y
 * (the union): p holds p_x, p_w and p_y, the same on every rank. Returns
 * the codes of ladle_dist_linear_create.
 */
LADLE_API ladle_status ladle_dist_conv_grid_create(const ladle_conv_desc *d,
                                                   const ladle_dist_partitions *p,
                                                   const int64_t x_shape[],
                                                   ladle_dtype dtype, ladle_device device,
                                                   uint64_t seed, ladle_op **op);

/*
 * Pooling (ladle_pool_desc) partitioned like ladle_dist_conv_create, with
 * every option of the sequential layer: max pooling's padding is -inf;
 * average pooling with count_include_pad 0 or ceil mode rescales each
 * output to its window's divisor, which depends only on the window's global
 * position and the global extent, so each rank plans its factors at
 * creation. d->flags may hold LADLE_CHECKED and LADLE_OVERLAP_HALO.
 * Collective over p_x. Returns the codes of ladle_dist_conv_create.
 */
LADLE_API ladle_status ladle_dist_pool_create(const ladle_pool_desc *d,
                                              const ladle_partition *p_x,
                                              const int64_t x_shape[], ladle_dtype dtype,
                                              ladle_device device, ladle_op **op);

/*
 * Adaptive average pooling (ladle_adaptive_avg_pool_create) with x of
 * global shape x_shape (p_x's ndim, 3 to 5) and y both split in balance over p_x
 * (the same ndim; any dimension may be split). Each rank gathers the input
 * box its output tile reads (from its first output's window to its last's,
 * which may reach into the neighbours' blocks) and pools it at global
 * coordinates; the backward spreads dy over the box and adds it back into
 * the owners. Linear: ladle_adjoint_test applies. Devices without adaptive
 * pooling kernels (CUDA) refuse it with LADLE_ERR_DEVICE. Collective over
 * p_x. Returns the codes of ladle_dist_linear_create and
 * ladle_adaptive_avg_pool_create.
 */
LADLE_API ladle_status ladle_dist_adaptive_avg_pool_create(
    const ladle_partition *p_x, const int64_t x_shape[], const int64_t out_size[],
    ladle_dtype dtype, ladle_device device, unsigned flags, ladle_op **op);

/*
 * Adaptive max pooling (ladle_adaptive_max_pool_create) partitioned as
 * ladle_dist_adaptive_avg_pool_create: each rank gathers the input box its
 * output tile reads and takes each window's maximum there at global
 * coordinates (the same winners as the sequential layer on the gathered
 * tensor: ties and NaN alike); the forward saves the winners in the ctx,
 * the backward routes dy to them in the box and adds the box back into
 * the owners. Not linear. flags may hold LADLE_CHECKED. Collective over
 * p_x. Returns the codes of ladle_dist_adaptive_avg_pool_create.
 */
LADLE_API ladle_status ladle_dist_adaptive_max_pool_create(
    const ladle_partition *p_x, const int64_t x_shape[], const int64_t out_size[],
    ladle_dtype dtype, ladle_device device, unsigned flags, ladle_op **op);

/*
 * Batch normalisation (the options of ladle_batchnorm_desc) with x of
 * global shape x_shape (2 to 5 dimensions, as many as p_x's) decomposed in
 * balance over p_x (any dimension may be split, the channels too).
 * Statistics are per channel over the group that d->sync names: in
 * training, one all-sum-reduce exchanges each rank's (count, mean, sum of
 * squared deviations) and every member merges them with Chan's formula in
 * the same order (bitwise equal results, correct for unequal counts); the
 * backward reduces (sum dy, sum dy x-hat) once. With LADLE_BN_SYNC_GLOBAL
 * the outputs, gradients and running statistics equal the sequential
 * layer's on the whole batch. Groups are the peers in partition rank order,
 * cut into consecutive runs of d->group_size (which must divide the number
 * of peers; read for LADLE_BN_SYNC_GROUP only). gamma and beta are
 * replicated on the peers (ladle_layer_sync_gradients sums their
 * gradients); each rank keeps running statistics for its channels
 * (identical across a group), which ladle_batchnorm_running_stats returns.
 * d->flags: LADLE_CHECKED. Collective over p_x. Returns the codes of
 * ladle_dist_linear_create.
 */
LADLE_API ladle_status ladle_dist_batchnorm_create(const ladle_batchnorm_desc *d,
                                                   const ladle_partition *p_x,
                                                   const int64_t x_shape[],
                                                   ladle_dtype dtype, ladle_device device,
                                                   ladle_op **op);

/*
 * Group normalisation (the options of ladle_groupnorm_desc) with x of
 * global shape x_shape (2 to 5 dimensions, as many as p_x's) decomposed in
 * balance over p_x. The batch and the spatial dimensions may be split
 * freely; the channels only where every channel block holds whole groups
 * (each block's extent a multiple of c / groups), else the call refuses
 * with LADLE_ERR_PARTITION. A group's values are spread over the ranks
 * that share its batch and channel blocks (its peers): each pass sums per
 * group on every rank, one all-sum-reduce gathers the ranks' sums in their
 * slots (rank k of the peers writes slot k, the others are zero, so the
 * reduction is exact) and every peer adds the slots in slot order, so all
 * get bitwise the same statistics whatever the order of the messages, and
 * the outputs and gradients equal the sequential layer's on the gathered
 * tensors to rounding. Three such reductions per step (the mean and the
 * variance in forward, the two backward sums together). gamma and beta
 * are replicated on the ranks that share a channel block
 * (ladle_layer_sync_gradients sums their gradients). d->flags:
 * LADLE_CHECKED. Collective over p_x. Returns the codes of
 * ladle_dist_linear_create.
 */
LADLE_API ladle_status ladle_dist_groupnorm_create(const ladle_groupnorm_desc *d,
                                                   const ladle_partition *p_x,
                                                   const int64_t x_shape[],
                                                   ladle_dtype dtype, ladle_device device,
                                                   ladle_op **op);

/*
 * A loss (the options of ladle_loss_desc: every kind and reduction, class
 * weights, ignore_index) over an input of global shape input_shape (as
 * many dimensions as p_x's) decomposed in balance over p_x (a
 * classification loss needs p_x's class extent, dimension 1, to be 1). Use
 * it with ladle_loss_forward and ladle_loss_backward on this rank's blocks
 * of the input and target (the target decomposed like the input, without
 * dimension 1 for labels). Mean and sum give the loss of the whole batch on
 * every rank of p_x, the mean dividing by the global count (so the
 * gradients are exact whatever the blocks); none gives the rank's own
 * per-element losses. A mean that divides by the labels' weight divides by
 * its sum over the whole batch: the one all-sum-reduce of the forward
 * carries each block's label weight beside its loss, so the value and the
 * gradients equal the sequential loss's on the gathered batch whatever the
 * blocks (a block whose samples are all ignored included). Every rank of
 * p_x must pass the same descriptor and weights. A rank rejecting its
 * input (NaN, a label out of range) fails every rank (LADLE_ERR_REMOTE
 * elsewhere). d->flags: LADLE_CHECKED. Collective over p_x. Returns the
 * codes of ladle_dist_linear_create and ladle_loss_create.
 */
LADLE_API ladle_status ladle_dist_loss_create(const ladle_loss_desc *d,
                                              const ladle_partition *p_x,
                                              const int64_t input_shape[],
                                              ladle_dtype dtype, ladle_device device,
                                              ladle_op **op);

/*
 * Flatten x [N, ...] (global x_shape, p_x's ndim >= 2, decomposed in balance over
 * p_x of the same ndim) into y [N, F] decomposed in balance over p_y (D x
 * Pf): a repartition gathers each of y's batch blocks whole onto column 0
 * of p_y, where the block is already y's, and a second one splits the
 * features over the columns when Pf > 1. Linear and a permutation (the
 * dot-product test holds exactly). Collective over p_x and p_y (the union).
 * Returns the codes of ladle_dist_linear_create.
 */
LADLE_API ladle_status ladle_dist_flatten_create(const ladle_partition *p_x,
                                                 const int64_t x_shape[],
                                                 const ladle_partition *p_y,
                                                 ladle_dtype dtype, ladle_device device,
                                                 unsigned flags, ladle_op **op);

/*
 * Global average pooling: x [N, C, S...] (global x_shape, 1 to 3 spatial
 * dimensions) decomposed in balance over p_x (the same ndim: batch,
 * channels and space may all be split, every block non-empty) gives
 * y[n, c] = (1 / V) sum over every spatial index s of x[n, c, s], V the
 * global spatial volume, decomposed in balance over p_y (D x Pc, the extents
 * of p_x's first two dimensions; any ranks of the same parent, typically
 * those of p_x's first spatial tile). Each rank of p_x sums its block and
 * divides by V; a sum-reduce adds the parts of all spatial tiles onto the
 * rank of p_y with the same batch and channel blocks. The backward is the
 * adjoint: a broadcast of dy to every spatial tile, each value spread over
 * the block divided by V. Linear (the dot-product test holds). Collective
 * over p_x and p_y. Returns the codes of ladle_dist_linear_create.
 */
LADLE_API ladle_status ladle_dist_global_avg_pool_create(
    const ladle_partition *p_x, const int64_t x_shape[], const ladle_partition *p_y,
    ladle_dtype dtype, ladle_device device, unsigned flags, ladle_op **op);

/*
 * Interpolation (the options of ladle_interp_desc) with x of global shape
 * x_shape (2 + d->nd dimensions) and y both split in balance over p_x (the
 * same ndim; any dimension may be split). Each rank's output tile reads,
 * along each spatial dimension, the input from the first tap of its first
 * output index to the last tap of its last, a window that may reach into
 * other ranks' blocks: a box exchange gathers the windows (overlapping
 * ones), each rank interpolates its window into its tile at global
 * coordinates, and the backward scatters dy into the window and adds every
 * window back into the owners of its cells. Equals ladle_interp_create on
 * the gathered tensors; linear (the dot-product test holds).
 * d->flags may hold LADLE_CHECKED. Collective over p_x. Returns the codes
 * of ladle_dist_linear_create and LADLE_ERR_DEVICE for a device without
 * interpolation kernels (CUDA).
 */
LADLE_API ladle_status ladle_dist_interp_create(const ladle_interp_desc *d,
                                                const ladle_partition *p_x,
                                                const int64_t x_shape[], ladle_dtype dtype,
                                                ladle_device device, ladle_op **op);

/*
 * Vocabulary-parallel cross entropy: logits x of global shape x_shape =
 * {rows, classes} (M x C; flatten N x T x C to N T x C first) split in balance over
 * p_x (D x P): the rows over D row blocks, the classes over P vocabulary
 * slices. Each rank passes its block of x to ladle_loss_forward with the i64
 * labels of its block's rows (the same labels on the P ranks of a row
 * block). d must be cross entropy (ladle_loss_desc_init); its reduction,
 * label smoothing, class weights (C of them, every rank alike) and
 * ignore_index all apply, and the value and gradients equal
 * ladle_loss_create's on the gathered logits:
 *
 *   forward   each rank's log-sum-exp of its slice of each row, the target
 *             logit (on the rank that holds the label's class) and the
 *             slice's weighted logit sum go to every rank of the row block
 *             in one all-sum-reduce (rank r fills slot r, the others add 0:
 *             the max and the sum of the softmax are taken from the
 *             gathered values alike everywhere); loss_m = (1 - e) w_t (L_m -
 *             x_mt) + e / C (sum_c w_c) L_m - e / C sum_c w_c x_mc with L_m
 *             the row's log-sum-exp; a second all-sum-reduce over the row
 *             blocks adds the rows' losses and label weights
 *   backward  dx_mc = g_m (exp(x_mc - L_m) s_m - q_mc) on each rank's own
 *             slice, q the smoothed weighted one-hot and s_m its sum, g_m
 *             the row's dloss over the mean's divisor: no message
 *
 * Mean and sum give the loss of the whole batch on every rank of p_x (mean
 * divides by M, or by the labels' total weight with class weights or
 * ignore_index); none gives each rank its block's row losses (alike on the
 * P ranks of a row block). The ctx keeps each row's L; the backward is
 * local. A separate constructor rather than ladle_dist_loss_create,
 * whose layer needs every class of a sample on one rank and takes every
 * loss kind: here only cross entropy has a split form, and the forward's
 * messages differ.
 *
 * The forward is collective over p_x and every rank reaches the same
 * verdict: a rank rejecting its tensors (NULL, dtype, shape, a label
 * outside 0..C-1 that is not ignore_index) returns its status and the
 * other ranks the same status when all failing ranks failed alike
 * (LADLE_ERR_REMOTE otherwise); ranks of a row block holding different
 * labels (each rank compares its label with the P ranks' mean) give
 * LADLE_ERR_ARG everywhere; a non-finite loss LADLE_ERR_NUMERIC
 * everywhere. Every rank needs at least one row and one class (P <= C, D
 * <= M). The row statistics are host loops: the layer runs on the CPU only
 * (LADLE_ERR_DEVICE for other devices). Collective over p_x at creation.
 * d->flags: LADLE_CHECKED. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (descriptor,
 * flags, labels), LADLE_ERR_UNSUPPORTED (a kind other than cross entropy), LADLE_ERR_SHAPE,
 * LADLE_ERR_DTYPE, LADLE_ERR_DEVICE, LADLE_ERR_PARTITION (p_x not 2-D),
 * LADLE_ERR_NUMERIC, LADLE_ERR_MPI, LADLE_ERR_ALLOC, LADLE_ERR_REMOTE.
 */
LADLE_API ladle_status ladle_dist_vocab_loss_create(const ladle_loss_desc *d,
                                                    const ladle_partition *p_x,
                                                    const int64_t x_shape[2],
                                                    ladle_dtype dtype, ladle_device device,
                                                    ladle_op **op);

/*
 * Vocabulary-parallel token embedding (ladle_embedding_desc, shared with
 * ladle_embedding_create): the weight w (d->num_embeddings x
 * d->embedding_dim, V x E) split by rows in balance over p->w (a 1-D
 * partition of P ranks: rank r holds rows [o_r, o_r + V_r)), the ids (i64,
 * N x T: a batch of sequences) whole on every rank of p->w, y (N x T x E)
 * on the one rank of p->y (a 1-D partition of extent 1, inside p->w or
 * not). p->x must be NULL (the ids are not split).
 *
 *   forward   each rank looks up the ids in its rows (zero rows for the
 *             others); a sum-reduce p->w -> p->y adds the partial outputs,
 *             so y = w[ids] (each id has exactly one owner)
 *   weight    dy broadcast p->y -> p->w (the sum-reduce's adjoint); each
 *             rank scatter-adds the rows of its ids into its own rows of dw
 *             (gradients accumulate)
 *
 * The lookup is linear in w, and its adjoint is the weight pass: the
 * dot-product test <y, dy> = <w, dw> holds summed over the ranks. A layer
 * that needs y on every rank of p->w follows with ladle_broadcast_create(&bd,
 * p->y, p->w, ...), whose adjoint sums the ranks' gradients back. The
 * weight starts as the rows of ladle_embedding_create's with the same d
 * and seed (normal(0, 1)); every rank reports the parameter with its
 * global shape (ladle_op_param_shard). No gradient for the ids
 * (ladle_layer_backward takes dx NULL). The ids are checked at every
 * forward and the ranks agree before the sum-reduce (one small
 * all-reduce): an id outside 0..V-1 gives LADLE_ERR_ARG on every rank.
 * Every rank of p->w needs at least one row (P <= V). On every device: off
 * the CPU each forward and backward copies the ids to the host (a
 * synchronisation) and runs the backend's embedding slots over the rows
 * the rank owns (LADLE_ERR_DEVICE for a backend without them). d->flags:
 * LADLE_CHECKED. Collective over p->w and p->y. Returns LADLE_ERR_NULL (d,
 * p, p->w, p->y, ids_shape or op), LADLE_ERR_ARG (a bad descriptor size, V
 * or E below 1, a flag bit other than LADLE_CHECKED, ranks passing
 * different arguments), LADLE_ERR_SHAPE (a non-positive extent, P > V),
 * LADLE_ERR_DTYPE, LADLE_ERR_DEVICE, LADLE_ERR_PARTITION (p->x not NULL,
 * p->w not 1-D, p->y not one rank), LADLE_ERR_MPI, LADLE_ERR_ALLOC,
 * LADLE_ERR_REMOTE.
 */
LADLE_API ladle_status ladle_dist_vocab_embedding_create(const ladle_embedding_desc *d,
                                                         const ladle_dist_partitions *p,
                                                         const int64_t ids_shape[2],
                                                         ladle_dtype dtype,
                                                         ladle_device device, uint64_t seed,
                                                         ladle_op **op);

/*
 * Data parallelism for any sequential layer with parameters: *layer (a
 * ladle layer made on this rank, for this rank's block of the batch) runs
 * as it is on each member of p, and its parameters become copies of one
 * set of weights:
 *
 *   forward   y_r = L(w_r; x_r) with w_r = w on every rank r (the weights
 *             broadcast from partition rank 0)
 *   weight    dw_r += the rank's own contribution; the broadcast's adjoint,
 *             the sum of the copies' gradients, is ladle_layer_sync_gradients
 *             (a network or graph runs it in its gradient buckets, during
 *             the backward pass)
 *
 * The broadcast runs once at creation: every copy starts as rank 0's, so
 * ranks may draw the layer with any seed. The blocks may differ between
 * ranks (an uneven batch split); the parameters' shapes, the layer's kind
 * and dtype may not (LADLE_ERR_ARG on every rank). Parameters, names and
 * buffers are the layer's; partition rank 0 writes them to checkpoints.
 * Layer-specific calls (ladle_attention_memory, ladle_dropout_set_step...)
 * take the layer, not the wrapper: make those calls before wrapping.
 *
 * The wrapper owns *layer from a successful return (*layer becomes NULL);
 * on failure the caller keeps it (its parameters may have been
 * overwritten). Refused with LADLE_ERR_ARG: a layer without parameters, a
 * distributed layer, a loss, a custom layer, flags other than
 * LADLE_CHECKED. Collective over p, called by p's members only
 * (LADLE_ERR_PARTITION elsewhere). Returns LADLE_ERR_NULL, LADLE_ERR_ARG,
 * LADLE_ERR_PARTITION, LADLE_ERR_MPI, LADLE_ERR_ALLOC, LADLE_ERR_REMOTE.
 */
LADLE_API ladle_status ladle_dist_replicate_create(const ladle_partition *p, ladle_op **layer,
                                                   unsigned flags, ladle_op **op);
/*
 * The same copies, told which block of a distributed tensor each rank
 * holds: x is this rank's box of the layout x, y its box of the layout y
 * (their shapes must be the layer's x and y shapes on every rank), and the
 * copies are summed over x's partition, on whose ranks y must lie too.
 * The layer then has those layouts (ladle_op_x_layout), so it can start or
 * end a chain of distributed layers: a pipeline stage on several ranks
 * (ladle_pipeline_create_workers) or a residual block over a distributed
 * body. The layer norms and dropouts between a transformer's
 * tensor-parallel layers are such copies: every rank applies them to its
 * own sequence block. Layers without parameters are accepted here (they
 * need the layouts, not the sums). Collective over x's partition, called
 * by its members only. Returns the codes of ladle_dist_replicate_create,
 * LADLE_ERR_SHAPE (a box that is not the layer's shape, named with the
 * rank's box) and LADLE_ERR_PARTITION (y on other ranks than x).
 */
LADLE_API ladle_status ladle_dist_replicate_create_on(const ladle_layout *x,
                                                      const ladle_layout *y,
                                                      ladle_op **layer, unsigned flags,
                                                      ladle_op **op);

/*
 * Tensor parallelism with sequence parallelism, Megatron's layout on
 * ladle's primitives. The residual stream x (N x T x E, x_shape) is split
 * in balance over p = D x S x 1: batch blocks by sequence blocks, so the
 * layer norms, dropouts and residual adds between these layers run on
 * every rank's own block (their weights replicated, ladle_dist_replicate_
 * create). The S ranks (b, 0 .. S-1) of batch block b share the heavy
 * layers' weights, S ways:
 *
 *   attention  y = G* (sum over i of A_i) G x: G gathers batch block b's
 *              whole sequence onto its S ranks (an all-gather, a window
 *              gather), rank i runs heads i (a balanced share of H, whole
 *              heads) and its block of the output projection, and G* (the
 *              reduce-scatter) sums the partial outputs onto the sequence
 *              blocks; the output bias is added once, by i = 0
 *   column     y = L_i G x: rank i computes output features i (of F) for
 *              the whole sequence; y (N x T x F) is split by batch block
 *              and features, not by sequence
 *   row        y = G* (sum over i of L_i x_i): x is a column layer's y,
 *              rank i holds input features i, and the partial outputs are
 *              reduce-scattered onto the sequence blocks (the bias added
 *              once); a column layer, an activation on its block, then a
 *              row layer is the MLP, with no message in between
 *
 * The backward of each is its chain read backwards (dx = G* A_i* G dy...);
 * the weight pass reuses the gathered dy.
 *
 * Memory: a context keeps only what falls with S (the attention's heads,
 * the local layer's saved state; x itself is the caller's, borrowed as
 * every layer borrows it). The whole-sequence tensors G x, G dy and the
 * partial outputs live in the layer's workspace, which is scratch: a graph
 * gives all its tensor-parallel layers (and attentions) one workspace, so
 * that they are held once per model, not once per layer. Whatever the
 * workspace no longer holds, because another layer wrote it or the caller
 * gave it (ladle_op_set_workspace), the weight pass gathers again: G x from
 * the forward's x, G dy from dy (Megatron-LM's trade of one all-gather for
 * the memory). Calls of a layer and of the layers sharing its workspace
 * must not overlap, and each rank must make the same calls. Parameters are those of the
 * sequential layer (ladle_attention_create with d; ladle_linear_create
 * E -> F for column, F -> E for row), with the same global shapes, names,
 * and initial values for the same seed: rank i holds its box (attention:
 * qkv_weight (3, its heads' rows, E), qkv_bias (3, its rows), out_weight
 * (E, its columns), out_bias whole on i = 0; column: the weight's rows
 * and the bias's block; row: the weight's columns, the bias on i = 0).
 * With D > 1 every box has one copy per batch block, summed by
 * ladle_layer_sync_gradients (or a graph's buckets); batch block 0's
 * copies go to checkpoints. For a column layer features is F (its
 * output), for a row layer F is its input; x_shape is the stream's N x T x
 * E in both. Needs N >= D, T >= S and H >= S (attention) or F >= S. S = 1
 * gives plain data parallelism over D, D = S = 1 the sequential layer.
 * Collective over p. Returns LADLE_ERR_NULL, LADLE_ERR_ARG,
 * LADLE_ERR_SHAPE, LADLE_ERR_DTYPE, LADLE_ERR_DEVICE (the attention on a
 * backend without its kernels), LADLE_ERR_PARTITION (p not D x S x 1),
 * LADLE_ERR_MPI, LADLE_ERR_ALLOC, LADLE_ERR_REMOTE.
 */
LADLE_API ladle_status ladle_dist_tp_attention_create(
    const ladle_attention_desc *d, const ladle_partition *p, const int64_t x_shape[3],
    ladle_dtype dtype, ladle_device device, uint64_t seed, ladle_op **op);
/* A flag of ladle_dist_tp_linear_create (in ladle_linear_desc's flags):
 * the row-parallel layer. */
#define LADLE_TP_ROW 0x10u

/* Without LADLE_TP_ROW in d->flags: a column-parallel linear E -> features
 * (d->in_features = E, d->out_features = features); with it, row-parallel,
 * features -> E (d->in_features = features, d->out_features = E); see
 * above. d->flags may also hold LADLE_CHECKED. Collective over p. */
LADLE_API ladle_status ladle_dist_tp_linear_create(const ladle_linear_desc *d,
                                                   const ladle_partition *p,
                                                   const int64_t x_shape[3],
                                                   ladle_dtype dtype, ladle_device device,
                                                   uint64_t seed, ladle_op **op);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_DISTRIBUTED_H */
