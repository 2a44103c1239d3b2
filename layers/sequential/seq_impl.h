/*
 * What a graph needs of the sequential container beyond its vtable: the
 * activations a sequential keeps for its calls without a ctx (inference
 * forwards, adjoints), which a graph moves into one block for all its
 * outermost sequentials, since their calls never overlap.
 */
#ifndef LADLE_SEQ_IMPL_H
#define LADLE_SEQ_IMPL_H

#include "src/op/op_impl.h"

/* The bytes (each part 64-byte aligned) of the activations a sequential
 * op keeps for its calls without a ctx; 0 for an op that is not one. */
size_t ladle__seq_scratch_bytes(const ladle_op *op);

/* Those activations move into mem (bytes >= ladle__seq_scratch_bytes,
 * memory of op's device that outlives op); the old ones are freed. On
 * failure op keeps its own. Not while a call of op runs. */
ladle_status ladle__seq_scratch_move(ladle_op *op, void *mem, size_t bytes);

#endif /* LADLE_SEQ_IMPL_H */
