/*
 * What the primitives offer the layers above them beyond the public API:
 * all-sum-reduce over a layout's blocks or over groups of ranks, and the
 * gather of overlapping windows. Never installed.
 */
#ifndef LADLE_PRIMITIVES_IMPL_H
#define LADLE_PRIMITIVES_IMPL_H

#include "src/op/op_impl.h"

/* All-sum-reduce over axes of l's partition where each rank's block is its
 * box in l (blocks may differ between groups, not within one). */
ladle_status ladle__all_sum_reduce_layout(const ladle_layout *l, int naxes, const int axes[],
                                          ladle_dtype dtype, ladle_device device, unsigned flags,
                                          ladle_op **out);

/* All-sum-reduce among the members of p that share a group id
 * (group_id[partition rank]); partition rank r holds a vector of counts[r]
 * elements, the same within a group. */
ladle_status ladle__all_sum_reduce_groups(const ladle_partition *p, const int *group_id,
                                          const int64_t *counts, ladle_dtype dtype,
                                          ladle_device device, unsigned flags, ladle_op **out);

/* The windows of a decomposed tensor: x is decomposed by lx (a
 * decomposition), y by lw over the same global shape, whose boxes may
 * overlap and leave indices out (each rank's window, the input its share of
 * a layer's output reads).
 *
 *   F  : each window cell takes the value of its owner in lx
 *   F* : dx = the sum over the windows holding each index of their cells
 *        (dx overwritten: zeroed, then every piece added in a fixed order)
 *
 * A repartition's box exchange with a receiving side that may repeat
 * indices. Collective over both partitions. Returns the codes of
 * ladle_repartition_create. */
ladle_status ladle__window_gather_create(const ladle_layout *lx, const ladle_layout *lw,
                                         ladle_dtype dtype, ladle_device device, unsigned flags,
                                         ladle_op **out);

#endif /* LADLE_PRIMITIVES_IMPL_H */
