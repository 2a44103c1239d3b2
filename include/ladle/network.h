/*
 * ladle/network.h - a network: a chain of layers (sequential or
 * distributed, the repartitions between them included) ending in a loss,
 * with what training needs around it: the forward and backward passes over
 * the chain, and the gradients of replicated parameters summed over their
 * copies while the backward pass runs.
 *
 * Replicated parameters are the data-parallel copies of a batch-split
 * layer's weights, a spatially partitioned convolution's weights and batch
 * norm's gamma and beta. Their gradients are merged, in backward order,
 * into buckets of parameters that share their reduction groups (up to
 * bucket_bytes each); a bucket's all-sum-reduce starts as soon as its last
 * gradient is ready and advances between the layers that follow, so the
 * messages overlap the rest of the backward pass. The sums are ladle's
 * all-sum-reduce: the same on every copy, bit for bit, so replicas stay
 * identical under the same optimizer step.
 *
 * The calls that run the network (create, forward, loss, backward) are
 * collective over the ranks of the network's layers, all ranks of their
 * partitions (in SPMD style every rank runs the same calls); the others say
 * what they are.
 */
#ifndef LADLE_NETWORK_H
#define LADLE_NETWORK_H

#include "core.h"
#include "op.h"
#include "optim.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ladle_network ladle_network;

/* The default bucket size: 1 MiB. */
#define LADLE_BUCKET_BYTES ((size_t)1 << 20)

/* A network over n layers and a loss (ladle_loss_create or
 * ladle_dist_loss_create), which it owns from then on (on failure they stay
 * the caller's). Each layer's y must have the next layer's x shape on this
 * rank, and the loss's input the last layer's y; the layers and the loss
 * must share one dtype and one device, on which the network keeps its
 * activations, gradients and buffers (the batch and targets it is given
 * must live there too). bucket_bytes 0 means LADLE_BUCKET_BYTES.
 * Collective over the parent communicator of the layers' partitions (every
 * rank of it; they agree on the outcome), local for a network of sequential
 * layers.
 * Returns LADLE_ERR_NULL, LADLE_ERR_ARG, LADLE_ERR_SHAPE, LADLE_ERR_DTYPE
 * (naming both dtypes), LADLE_ERR_DEVICE (naming the two layers and their
 * devices), LADLE_ERR_ALLOC, LADLE_ERR_MPI, LADLE_ERR_REMOTE. */
LADLE_API ladle_status ladle_network_create(int n, ladle_op *const layers[], ladle_op *loss,
                                            size_t bucket_bytes, ladle_network **net);
/* Options of a network; zeroed (ladle_network_desc_init) means the
 * defaults.
 *
 * zero_stage shards data parallelism's replicas (ZeRO): every bucket of
 * replicated gradients is reduce-scattered over its replica group, so each
 * of the g replicas holds a 1/g slice of the bucket's sum (the bucket
 * padded to g equal slices, slice k on the group's member k).
 *   0: replicated. The slices are all-gathered back into every gradient
 *      (reduce-scatter + all-gather: one all-sum-reduce).
 *   1: the optimizer states are sharded. The gradients are all-gathered as
 *      in 0, but ladle_optimizer_add_network gives the optimizer this
 *      rank's slices of the bucketed parameters and gradients, so its
 *      states are 1/g the size; the stepped slices are all-gathered into
 *      the layers' parameters at the next forward (or
 *      ladle_network_gather_params).
 *   2: the gradients are sharded too: after a backward with sync, a
 *      bucketed parameter's layer gradient holds this rank's own, unsummed
 *      gradient, and only the slices the optimizer sees hold the sum.
 * Stages 0, 1 and 2 give the same parameters bit for bit after every
 * step (the same sums in the same order, and the optimizers' updates are
 * elementwise). Stages 1 and 2 need an f32 or f64 network. */
typedef struct ladle_network_desc {
    size_t size;         /* sizeof(ladle_network_desc), set by ladle_network_desc_init (checked) */
    size_t bucket_bytes; /* 0: LADLE_BUCKET_BYTES */
    int zero_stage;      /* 0, 1 or 2; 0: replicated */
} ladle_network_desc;

/* Zero d and set its size. Accepts NULL. Local. */
LADLE_API void ladle_network_desc_init(ladle_network_desc *d);
/* ladle_network_create with options (ladle_network_create is this with
 * only bucket_bytes set). Collective over the parent communicator of the
 * layers' partitions, as ladle_network_create (local for sequential
 * layers). Returns its codes, and LADLE_ERR_ARG (a d not set up by its
 * _init, a zero_stage outside 0..2), LADLE_ERR_UNSUPPORTED (stage 1 or 2
 * on a network that is not f32 or f64). */
LADLE_API ladle_status ladle_network_create_desc(const ladle_network_desc *d, int n,
                                                 ladle_op *const layers[], ladle_op *loss,
                                                 ladle_network **net);
/* The network's zero_stage. Local. */
LADLE_API int ladle_network_zero_stage(const ladle_network *net);

/* Destroy it with its layers and loss; *net becomes NULL. Accepts NULL.
 * Collective over the ranks of the network's layers when they are
 * distributed: their communicators and the gradient buckets' go with
 * MPI_Comm_free, which MPI counts as collective though it waits for no
 * other rank (as ladle_op_destroy). Local for a network of sequential
 * layers. */
LADLE_API ladle_status ladle_network_destroy(ladle_network **net);

/* The calls of a training step go in order: forward, loss, backward (then
 * the optimizer). A call out of that order is refused with LADLE_ERR_STATE
 * before it touches anything, on every rank alike: a loss needs a forward
 * that succeeded (a failed forward leaves none), a backward a loss that
 * succeeded after the last forward, and a backward consumes its loss (a
 * second backward needs a new forward and loss). */

/* Forward through every layer from x (this rank's block of the input). *y
 * (may be NULL) gets this rank's block of the output, borrowed until the
 * next forward. In training mode the layers save what backward needs.
 * Collective over the ranks of the network's layers (each layer's call over
 * its communicator).
 * Returns the layers' codes; after a failure the network holds no forward
 * (a loss is refused until the next successful one). */
LADLE_API ladle_status ladle_network_forward(ladle_network *net, const ladle_tensor *x,
                                             const ladle_tensor **y);
/* The loss of the last forward's output against target (this rank's block),
 * into *loss (may be NULL; the whole batch's for mean and sum).
 * Collective over the loss's partition for a distributed loss
 * (ladle_loss_forward), local for a sequential one. Returns
 * LADLE_ERR_NULL, LADLE_ERR_STATE (no successful forward), the codes of
 * ladle_loss_forward, among them LADLE_ERR_NUMERIC for a loss that is not
 * finite: *loss then still gets the value (inf or nan) so a tool can print
 * it, and the backward is refused. On any other failure *loss is left as it
 * was. */
LADLE_API ladle_status ladle_network_loss(ladle_network *net, const ladle_tensor *target,
                                          double *loss);
/* Backward from the loss of the last ladle_network_loss: every layer's
 * input and weight gradients, the weight gradients accumulating. With sync
 * != 0 the replicated gradients are then summed over their copies (started
 * bucket by bucket during the pass). To accumulate several microbatches,
 * pass sync = 0 for all but the last (each with its forward and loss).
 * Returns LADLE_ERR_NULL, LADLE_ERR_STATE (no successful loss since the last
 * forward, or its backward has run already), the layers' codes,
 * LADLE_ERR_MPI. sync nonzero: sum the replicated gradients now.
 * Collective over the ranks of the network's layers, as forward. */
LADLE_API ladle_status ladle_network_backward(ladle_network *net, int sync);
/* Zero every gradient. Local. Returns LADLE_ERR_NULL. */
LADLE_API ladle_status ladle_network_zero_grad(ladle_network *net);
/* training nonzero: training mode for every layer; 0: evaluation. Local;
 * every rank should set the same. Returns LADLE_ERR_NULL. */
LADLE_API ladle_status ladle_network_set_training(ladle_network *net, int training);
/* Seed the backward with scale instead of 1: every gradient comes out
 * scale times the loss's (dynamic loss scaling: pass
 * ladle_loss_scaler_scale before each backward; ladle/optim.h). The loss
 * value is not scaled. Local; every rank should set the same. Returns
 * LADLE_ERR_NULL, LADLE_ERR_ARG (not finite and > 0). */
LADLE_API ladle_status ladle_network_set_loss_scale(ladle_network *net, double scale);

/* The layers (borrowed), the loss, and the number of gradient buckets.
 * Local. */
LADLE_API int ladle_network_size(const ladle_network *net);
LADLE_API ladle_op *ladle_network_layer(const ladle_network *net, int i);
LADLE_API ladle_op *ladle_network_loss_op(const ladle_network *net);
LADLE_API int ladle_network_buckets(const ladle_network *net);

/* Add every layer's parameters to an optimizer (ladle_optimizer_add_op).
 * Local. Returns the codes of ladle_optimizer_add_op. */
LADLE_API ladle_status ladle_optimizer_add_network(ladle_optimizer *opt,
                                                   const ladle_network *net);

/* Add every layer's parameters to an optimizer, as above; in stages 1 and
 * 2 the bucketed ones as this rank's slices (one pair of 1-d tensors per
 * bucket, owned by the network). */

/* Stages 1 and 2: all-gather the optimizer's stepped slices into the
 * layers' parameters. The forward after a backward with sync does it by
 * itself; call it to read the parameters before that (to save a
 * checkpoint, say). Nothing for stage 0. Collective over the ranks of the
 * network's layers. Returns LADLE_ERR_NULL, LADLE_ERR_MPI. */
LADLE_API ladle_status ladle_network_gather_params(ladle_network *net);

/* Clip the gradients by their global norm: with N the 2-norm of every
 * parameter's summed gradient, each element counted once (a replicated
 * parameter's once, not once per copy; a sharded one's over its shards),
 * scale the gradients by max_norm / (N + 1e-6) when that is below 1, as
 * the frameworks do. Call it after a backward with sync, before the
 * optimizer's step. *norm (may be NULL) gets N, the same on every rank;
 * max_norm INFINITY measures only. Stage 2 scales the slices the optimizer
 * steps (and the unbucketed gradients). Collective over the ranks of the
 * network's layers; local for sequential layers. Returns LADLE_ERR_NULL,
 * LADLE_ERR_ARG (max_norm not positive, or NaN), LADLE_ERR_NUMERIC (N not
 * finite: nothing scaled, on every rank), LADLE_ERR_MPI. Allocates nothing. */
LADLE_API ladle_status ladle_network_clip_grad_norm(ladle_network *net, double max_norm,
                                                    double *norm);

/* This rank's bytes of parameters (the layers' and, stages 1 and 2, the
 * slices the optimizer steps), of gradients (the layers' and the summed
 * slices) and of the gradient buckets' buffers and workspaces. Pointers
 * may be NULL. Local. Returns LADLE_ERR_NULL. */
LADLE_API ladle_status ladle_network_bytes(const ladle_network *net, size_t *params,
                                           size_t *grads, size_t *buffers);

/* Seconds the last backward spent waiting for gradient sums after its last
 * layer (the part of the reduction the pass did not hide). Local. */
LADLE_API double ladle_network_sync_wait(const ladle_network *net);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_NETWORK_H */
