/*
 * All-gather and reduce-scatter are one pair of plans read in two
 * directions: gather every member's shard into the whole tensor, and sum
 * the members' whole tensors back onto their shards. All-gather runs the
 * first forward and the second as its adjoint; ReduceScatter the other way
 * round (primitives/all_gather.c).
 */
#ifndef LADLE_PRIMITIVES_SHARD_H
#define LADLE_PRIMITIVES_SHARD_H

#include "src/op/op_impl.h"

ladle_status ladle__shard_create(const ladle_all_gather_desc *d, const ladle_partition *p,
                                 ladle_dtype dtype, ladle_device device, int reduce,
                                 ladle_op **out, const char *func);

/* The same pair among the members of p that share a group id
 * (group_id[partition rank]; counts[r] elements on rank r, the same within
 * a group): a 1-d vector padded to g equal slices of ceil(count / g), so
 * member k's shard is elements [k slice, (k + 1) slice). reduce nonzero:
 * the reduce-scatter (x the padded whole, y the slice, summed member 0's
 * copy first); 0: the all-gather (x the slice, y the padded whole).
 * Collective over p. */
ladle_status ladle__shard_groups_create(const ladle_partition *p, const int *group_id,
                                        const int64_t *counts, ladle_dtype dtype,
                                        ladle_device device, int reduce, ladle_op **out);

#endif /* LADLE_PRIMITIVES_SHARD_H */
