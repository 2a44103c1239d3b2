/*
 * ladle/graph.h - a network as a directed acyclic graph of layers.
 *
 * A graph holds values (tensors, named by integer ids) and nodes that make
 * them: graph inputs, layers (any ladle_op layer: sequential, distributed,
 * custom, sequentials), the structural nodes add (y = x_0 + ... + x_k-1),
 * concat (along one dimension) and split (its inverse), and losses at any
 * value (the total loss is sum_k w_k L_k). Ids are handed out in order,
 * from 0, one per value (a split makes one per part; losses make none), so
 * an input may name a value that a later call will define; finalize then
 * refuses a graph whose ids are never defined or whose edges form a cycle.
 *
 * ladle_graph_finalize validates, reconciles layouts (inserting a
 * repartition where a value's layout is not the one its consumer takes),
 * fixes one topological order (the same on every rank: among the nodes
 * whose inputs are ready, the one added first runs first), allocates every
 * buffer and plans the gradient buckets of the replicated parameters, which
 * overlap the backward pass as in ladle/network.h. Layers whose workspace
 * is scratch (the attention and the tensor-parallel layers, also as
 * copies) get one workspace among them, as large as the largest, instead
 * of one each. After it, forward and backward allocate nothing. The backward visits the nodes in the reverse
 * order; a value read by several consumers gets the sum of their
 * gradients (the adjoint of a copy is a sum; of a concat, the split).
 *
 * An input read by a layer that takes token ids (ladle_embedding_create,
 * or a sequential that starts with one) holds LADLE_I64 ids rather than
 * the graph's dtype: every reader must take it as ids, it has no layout
 * (each rank's own ids) and no gradient (finalize refuses anything else
 * with LADLE_ERR_DTYPE or LADLE_ERR_ARG, naming the nodes).
 *
 * Building is local (every rank builds the same graph); finalize, forward,
 * loss and backward are collective over the ranks of the graph's
 * partitions, as for ladle_network. docs/graphs.md has the math and an
 * example.
 */
#ifndef LADLE_GRAPH_H
#define LADLE_GRAPH_H

#include "core.h"
#include "layout.h"
#include "network.h"
#include "op.h"
#include "optim.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ladle_graph ladle_graph;

/* The longest node name kept (longer names are refused). */
#define LADLE_GRAPH_NAME_MAX 64

/* An empty graph whose values have dtype and live on device. bucket_bytes
 * 0 means LADLE_BUCKET_BYTES (ladle/network.h). Local. Returns
 * LADLE_ERR_NULL, LADLE_ERR_DTYPE (not f32 or f64), LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_graph_create(ladle_dtype dtype, ladle_device device,
                                          size_t bucket_bytes, ladle_graph **g);
/* Destroy it with every op it owns; *g becomes NULL. Accepts NULL.
 * Collective over the ranks of the graph's partitions when it holds
 * distributed layers (their communicators are freed, as in
 * ladle_op_destroy); local otherwise. */
LADLE_API ladle_status ladle_graph_destroy(ladle_graph **g);

/* The add calls below are local, refused with LADLE_ERR_STATE after
 * finalize, and set *id (or ids) to the new value's id only on success.
 * name (may be NULL: "node<id>") names the node in messages and in its
 * parameters' names ("<name>.<parameter>"); up to LADLE_GRAPH_NAME_MAX - 1
 * characters, unique in the graph (LADLE_ERR_ARG otherwise). */

/* A graph input. With layout (borrowed; retained), this rank's block of its
 * global shape; with layout NULL, a tensor of ndim and shape on this rank
 * (every rank holding its own). Local. Returns LADLE_ERR_NULL,
 * LADLE_ERR_ARG, LADLE_ERR_STATE, LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_graph_add_input(ladle_graph *g, const char *name,
                                             const ladle_layout *layout, int ndim,
                                             const int64_t shape[], int *id);
/* A layer on value x. The graph owns the op from a successful return (an op
 * may be added once). Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (not a layer,
 * added already), LADLE_ERR_DTYPE, LADLE_ERR_DEVICE, LADLE_ERR_STATE,
 * LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_graph_add_layer(ladle_graph *g, const char *name, ladle_op *op,
                                             int x, int *id);
/* y = xs[0] + ... + xs[n-1] (n >= 2; the same local shape and, where both
 * have one, the layout of xs[0], else a repartition is inserted). Local. */
LADLE_API ladle_status ladle_graph_add_add(ladle_graph *g, const char *name, int n,
                                           const int xs[], int *id);
/* The concatenation of xs[0..n-1] along dim (n >= 1). Laid-out inputs must
 * hold dimension dim whole on every rank (finalize says LADLE_ERR_PARTITION
 * otherwise). Local. */
LADLE_API ladle_status ladle_graph_add_concat(ladle_graph *g, const char *name, int n,
                                              const int xs[], int dim, int *id);
/* Split x along dim into n parts of sizes[0..n-1] (summing to x's extent;
 * as for concat, a laid-out x must hold dim whole): ids[k] gets part k's
 * id (consecutive ids). Local. */
LADLE_API ladle_status ladle_graph_add_split(ladle_graph *g, const char *name, int x, int dim,
                                             int n, const int64_t sizes[], int ids[]);
/* A loss (ladle_loss_create or ladle_dist_loss_create; owned as a layer) of
 * value x with weight w (finite). *k (may be NULL) gets the loss's index,
 * the order of the targets of ladle_graph_loss. Local. */
LADLE_API ladle_status ladle_graph_add_loss(ladle_graph *g, const char *name, ladle_op *loss,
                                            int x, double weight, int *k);
/* The values ladle_graph_forward returns, in order (a value may be an
 * output and also feed other nodes). Local. */
LADLE_API ladle_status ladle_graph_set_outputs(ladle_graph *g, int n, const int ids[]);

/* Check and plan (see the top). Collective over the ranks of the graph's
 * partitions (every rank of them, even those no layer needs). Every rank
 * returns the same status: LADLE_ERR_ARG (an id no node defines, a cycle,
 * a name taken twice, a split whose sizes do not add up), LADLE_ERR_SHAPE
 * (a producer's shape is not its consumer's, or two global shapes differ),
 * LADLE_ERR_PARTITION (layouts no repartition connects, naming both),
 * LADLE_ERR_STATE (finalized already), LADLE_ERR_ALLOC, LADLE_ERR_MPI,
 * LADLE_ERR_REMOTE. After a failure the graph can only be destroyed. */
LADLE_API ladle_status ladle_graph_finalize(ladle_graph *g);

/* The run calls keep the order of ladle_network's (forward, loss,
 * backward; LADLE_ERR_STATE otherwise, before anything is touched) and
 * need a finalized graph (LADLE_ERR_STATE). */

/* Forward from the n graph inputs (this rank's blocks, in the order they
 * were added; n must be their number). ys (may be NULL) gets the outputs,
 * borrowed until the next forward. Collective over the ranks of the graph's
 * partitions (each layer's call over its communicator). Returns
 * LADLE_ERR_NULL, LADLE_ERR_ARG, LADLE_ERR_STATE, the layers' codes. */
LADLE_API ladle_status ladle_graph_forward(ladle_graph *g, int n, const ladle_tensor *const xs[],
                                           const ladle_tensor *ys[]);
/* The losses of the last forward against targets[k] (loss k's, this rank's
 * block); *total (may be NULL) gets sum_k w_k L_k of the losses this rank
 * knows (a distributed loss is known on its partition's ranks; elsewhere
 * it counts 0). LADLE_ERR_NUMERIC for a total that is not finite (it is
 * still reported; the backward is refused). Collective over the partition
 * of each distributed loss (its ladle_loss_forward); local for sequential
 * losses. */
LADLE_API ladle_status ladle_graph_loss(ladle_graph *g, int n, const ladle_tensor *const targets[],
                                        double *total);
/* Backward from the total loss: every layer's input and weight gradients
 * (the weight gradients accumulating), the gradients of the graph inputs,
 * and with sync != 0 the replicated gradients summed over their copies
 * (bucket by bucket, during the pass), as ladle_network_backward.
 * Collective over the ranks of the graph's partitions, as forward. */
LADLE_API ladle_status ladle_graph_backward(ladle_graph *g, int sync);
/* Zero every gradient, set training (nonzero) or evaluation mode (every
 * rank should set the same). Local. Return LADLE_ERR_NULL. */
LADLE_API ladle_status ladle_graph_zero_grad(ladle_graph *g);
LADLE_API ladle_status ladle_graph_set_training(ladle_graph *g, int training);
/* Seed each loss's backward with its weight times scale (dynamic loss
 * scaling; see ladle_network_set_loss_scale). Before or after finalize.
 * Local; every rank should set the same. Returns LADLE_ERR_NULL,
 * LADLE_ERR_ARG (not finite and > 0). */
LADLE_API ladle_status ladle_graph_set_loss_scale(ladle_graph *g, double scale);

/* After a forward: value id's tensor on this rank (borrowed until the next
 * forward); after a backward: its gradient. Local. Returns LADLE_ERR_NULL,
 * LADLE_ERR_ARG (no such value; for the gradient, a value of token ids),
 * LADLE_ERR_STATE (not finalized). */
LADLE_API ladle_status ladle_graph_value(const ladle_graph *g, int id, const ladle_tensor **y);
LADLE_API ladle_status ladle_graph_value_grad(const ladle_graph *g, int id,
                                              const ladle_tensor **dy);
/* The layout of value id as the graph reconciled it (borrowed; NULL for a
 * value without one, or before finalize). Local. */
LADLE_API const ladle_layout *ladle_graph_value_layout(const ladle_graph *g, int id);

/* The layers in the graph's topological order (borrowed): checkpoints and
 * ladle_optimizer_add_graph use this order. Local; after finalize (0 and
 * NULL before). */
LADLE_API int ladle_graph_num_layers(const ladle_graph *g);
LADLE_API ladle_op *ladle_graph_layer(const ladle_graph *g, int i);
/* Parameters in the same order, with names "<node>.<parameter>" (borrowed,
 * valid while g lives). Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (i out
 * of range), LADLE_ERR_STATE. Any of the outputs may be NULL. */
LADLE_API int ladle_graph_num_params(const ladle_graph *g);
LADLE_API ladle_status ladle_graph_param(const ladle_graph *g, int i, const char **name,
                                         ladle_tensor **param, ladle_tensor **grad);
/* Repartitions finalize inserted, and gradient buckets. Local. */
LADLE_API int ladle_graph_num_repartitions(const ladle_graph *g);
LADLE_API int ladle_graph_buckets(const ladle_graph *g);

/* Add every layer's parameters, in the graph's order, to an optimizer.
 * Local. Returns LADLE_ERR_NULL, LADLE_ERR_STATE, the codes of
 * ladle_optimizer_add_op. */
LADLE_API ladle_status ladle_optimizer_add_graph(ladle_optimizer *opt, const ladle_graph *g);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_GRAPH_H */
