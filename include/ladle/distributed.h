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

/*
 * Linear y = x W^T + b with x [batch, in] decomposed over p_x (1 x Pin),
 * y [batch, out] over p_y (1 x Pout) and W [out, in] over p_w (Pout x Pin),
 * all balanced:
 *
 *   forward   x block j is broadcast down column j of p_w; worker (i, j)
 *             computes x_j W_ij^T (+ b_i on column 0); row i is sum-reduced
 *             onto rank i of p_y
 *   backward  dy_i broadcast along row i; dx_j = sum over i of dy_i W_ij,
 *             sum-reduced onto rank j of p_x
 *   weight    dW_ij += dy_i^T x_j, db_i += column sums of dy_i (column 0)
 *
 * W's blocks and b's are unique (no replicas). Pin = 1 or Pout = 1 gives
 * the column- and row-parallel layers; a second layer whose p_x is this
 * one's p_y follows without a repartition. Needs in >= Pin and out >= Pout.
 * Returns LADLE_ERR_NULL, LADLE_ERR_ARG, LADLE_ERR_SHAPE, LADLE_ERR_DTYPE,
 * LADLE_ERR_PARTITION (shapes that do not fit together), LADLE_ERR_MPI,
 * LADLE_ERR_ALLOC, LADLE_ERR_REMOTE.
 */
LADLE_API ladle_status ladle_dist_linear_create(const ladle_partition *p_x,
                                                const ladle_partition *p_w,
                                                const ladle_partition *p_y, int64_t batch,
                                                int64_t in_features, int64_t out_features,
                                                int bias, ladle_dtype dtype, uint64_t seed,
                                                unsigned flags, ladle_op **op);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_DISTRIBUTED_H */
