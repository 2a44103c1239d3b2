/*
 * SumReduce P_x -> P_y: the broadcast pair read backwards. The owners of
 * the pairing are the destination ranks (P_y); the plan that sums receivers
 * onto owners runs forward and the plan that broadcasts owners to receivers
 * runs as the adjoint. See broadcast.c.
 */
#include "primitives/pair.h"

ladle_status ladle_sum_reduce_create(const ladle_broadcast_desc *d,
                                     const ladle_partition *p_x, const ladle_partition *p_y,
                                     ladle_dtype dtype, ladle_device device, ladle_op **op)
{
    return ladle__pair_create(d, p_x, p_y, dtype, device, 1, op, __func__);
}
