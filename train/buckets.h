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

#include "src/op/op_impl.h"

typedef struct ladle__buckets ladle__buckets;

/* Plan the buckets of layers[0..n-1] (borrowed; they must outlive the
 * buckets), walking the parameters in backward order and closing a bucket
 * when the groups change or cap bytes would be passed. Collective over the
 * ranks of the layers (the reductions are planned here). */
ladle_status ladle__buckets_create(int n, ladle_op *const layers[], size_t cap,
                                   ladle_dtype dtype, ladle_device device, ladle__buckets **out);
void ladle__buckets_destroy(ladle__buckets **b);
int ladle__buckets_count(const ladle__buckets *b);

/* After layer i's backward and backward_weight (i falling from n-1 to 0):
 * advance the sums in flight and start those whose last gradient layer i
 * gave. Collective over each started bucket's group. */
ladle_status ladle__buckets_after(ladle__buckets *b, int i);
/* Finish every sum in flight and copy the sums back into the gradients;
 * *wait gets the seconds spent waiting. */
ladle_status ladle__buckets_finish(ladle__buckets *b, double *wait);

#endif /* LADLE_BUCKETS_H */
