/*
 * The losses' private calls, for the distributed loss and the pipeline
 * executor. Never installed.
 */
#ifndef LADLE_LOSS_IMPL_H
#define LADLE_LOSS_IMPL_H

#include "src/op/op_impl.h"

/* A loss whose mean divides by `count` instead of its own input's count
 * (a distributed loss: the global count). */
ladle_status ladle__loss_set_divisor(ladle_op *op, double count);
/* A distributed loss's sequential loss on this rank's block (NULL outside
 * its partition). */
ladle_status ladle__dist_loss_local(const ladle_op *op, ladle_op **local);
/* The target a sequential loss takes for its full input: dtype and shape,
 * and its reduction (LADLE_REDUCE_*). */
ladle_status ladle__loss_target(const ladle_op *op, ladle_dtype *dtype, int *ndim,
                                int64_t shape[], int *reduction);

#endif /* LADLE_LOSS_IMPL_H */
