/*
 * Gradient buckets: the replicated parameters of a list of layers, merged
 * into buckets that share their reduction groups, whose all-sum-reduces
 * start while a backward pass is still running. Shared by the chain network
 * (train/network.c) and the graph network (train/graph.c): both
 * hand over their layers in forward order and call ladle__buckets_after
 * after each layer's backward, in reverse order. Never installed.
 */
#ifndef LADLE_BUCKETS_H
#define LADLE_BUCKETS_H

#include "ladle/optim.h"
#include "src/op/op_impl.h"

typedef struct ladle__buckets ladle__buckets;

/* Plan the buckets of layers[0..n-1] (borrowed; they must outlive the
 * buckets), walking the parameters in backward order and closing a bucket
 * when the groups change or cap bytes would be passed. Collective over the
 * ranks of the layers (the reductions are planned here). */
ladle_status ladle__buckets_create(int n, ladle_op *const layers[], size_t cap,
                                   ladle_dtype dtype, ladle_device device, ladle__buckets **out);
/* The same with a sharding stage (ladle_network_desc's zero_stage): 1 and
 * 2 keep this rank's slice of each bucket's parameters, taken from the
 * layers here, for the optimizer to step (ladle__buckets_add_shards). */
ladle_status ladle__buckets_create_stage(int n, ladle_op *const layers[], size_t cap,
                                         ladle_dtype dtype, ladle_device device, int stage,
                                         ladle__buckets **out);
void ladle__buckets_destroy(ladle__buckets **b);
int ladle__buckets_count(const ladle__buckets *b);

/* After layer i's backward and backward_weight (i falling from n-1 to 0):
 * advance the sums in flight and start those whose last gradient layer i
 * gave. Collective over each started bucket's group. */
ladle_status ladle__buckets_after(ladle__buckets *b, int i);
/* Finish every sum in flight and copy the sums back into the gradients;
 * *wait gets the seconds spent waiting. */
ladle_status ladle__buckets_finish(ladle__buckets *b, double *wait);

/* Every bucket is reduce-scattered into this rank's slice of the sum;
 * stages 0 and 1 then all-gather the slices back into the gradients,
 * stage 2 keeps only the slice. */

/* Stages 1 and 2: all-gather the parameter slices into the layers'
 * parameters. Collective over every bucket's group. */
ladle_status ladle__buckets_gather_params(ladle__buckets *b);
/* Stages 1 and 2: take the parameter slices from the layers again. Local. */
ladle_status ladle__buckets_take_params(ladle__buckets *b);
/* Whether parameter param of layer `layer` is in a bucket. */
int ladle__buckets_holds(const ladle__buckets *b, int layer, int param);
/* Add every bucket's (parameter slice, gradient slice) to opt. */
ladle_status ladle__buckets_add_shards(const ladle__buckets *b, ladle_optimizer *opt);
/* Add the sum of squares of this rank's gradient slices to *sum; scale
 * the slices by alpha. Local. */
ladle_status ladle__buckets_sumsq(const ladle__buckets *b, double *sum);
ladle_status ladle__buckets_scale(ladle__buckets *b, double alpha);
/* Add the bytes of the parameter slices, the gradient slices and the
 * buffers and workspaces the reductions use. Local. */
void ladle__buckets_bytes(const ladle__buckets *b, size_t *params, size_t *grads,
                          size_t *comm);

#endif /* LADLE_BUCKETS_H */
