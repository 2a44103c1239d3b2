/*
 * ReduceScatter along one axis of a partition: the all-gather pair read
 * backwards. The plan that sums every member's copy onto its shards runs
 * forward and the plan that gathers the shards runs as the adjoint. See
 * all_gather.c.
 */
#include "primitives/shard.h"

ladle_status ladle_reduce_scatter_create(const ladle_all_gather_desc *d,
                                         const ladle_partition *p, ladle_dtype dtype,
                                         ladle_device device, ladle_op **op)
{
    return ladle__shard_create(d, p, dtype, device, 1, op, __func__);
}
