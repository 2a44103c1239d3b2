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
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    return ladle__pair_create(p_x, p_y, d->ndim, d->shape, dtype, device, d->flags, 1, op,
                              __func__);
fail:
    return st;
}
