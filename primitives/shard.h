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

#endif /* LADLE_PRIMITIVES_SHARD_H */
