/*
 * The losses' private calls, for the distributed loss and the pipeline
 * executor. Never installed.
 */
#ifndef LADLE_LOSS_IMPL_H
#define LADLE_LOSS_IMPL_H

#include "src/op/op_impl.h"

/* A loss whose mean divides by `count` instead of its own input's count
 * (a distributed loss: the global count). A mean that divides by the
 * labels' weight (class weights or ignore_index) becomes instead a block of
 * a distributed one: its forward divides by 1, and the distributed loss
 * gives the backward the global weight with ladle__loss_ctx_divisor. */
ladle_status ladle__loss_set_divisor(ladle_op *op, double count);
/* Whether op is a mean that divides by the labels' weight. */
int ladle__loss_label_divisor(const ladle_op *op);
/* ladle_loss_forward on a sequential loss, also giving the labels' weight
 * (1 without class weights and ignore_index). */
ladle_status ladle__loss_forward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *input,
                                        const ladle_tensor *target, ladle_tensor *out,
                                        double *wsum);
/* What the backward of ctx divides a mean by (ctx may be NULL). */
void ladle__loss_ctx_divisor(ladle_ctx *ctx, double divisor);
/* The checks of a ladle_loss_desc, raised for func. */
ladle_status ladle__loss_check_desc(const ladle_loss_desc *d, const char *func);
/* A distributed loss's sequential loss on this rank's block (NULL outside
 * its partition). */
ladle_status ladle__dist_loss_local(const ladle_op *op, ladle_op **local);
/* The target a sequential loss takes for its full input: dtype and shape,
 * and its reduction (LADLE_REDUCE_*). */
ladle_status ladle__loss_target(const ladle_op *op, ladle_dtype *dtype, int *ndim,
                                int64_t shape[], int *reduction);

#endif /* LADLE_LOSS_IMPL_H */
