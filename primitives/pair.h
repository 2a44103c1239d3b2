/*
 * Broadcast and sum-reduce are one pair of plans read in two directions:
 * a broadcast from the owners (`small`) to `big`, and the reduction from
 * `big` back onto the owners. Broadcast runs the first forward and the
 * second as its adjoint; SumReduce the other way round.
 */
#ifndef LADLE_PRIMITIVES_PAIR_H
#define LADLE_PRIMITIVES_PAIR_H

#include "src/op/op_impl.h"

ladle_status ladle__pair_create(const ladle_broadcast_desc *d, const ladle_partition *p_x,
                                const ladle_partition *p_y, ladle_dtype dtype,
                                ladle_device device, int reduce, ladle_op **out,
                                const char *func);

/* The same over layouts: owner i's block is its box in the owners' layout
 * (x for broadcast, y for sum-reduce), and every partner's box in the other
 * layout must have that shape. Blocks may differ between owners. */
ladle_status ladle__pair_create_layouts(const ladle_layout *lx, const ladle_layout *ly,
                                        ladle_dtype dtype, ladle_device device, unsigned flags,
                                        int reduce, ladle_op **out, const char *func);

/* The same with the pairing given: source[j] is the owner (a rank of the
 * owners' partition: x's for broadcast, y's for sum-reduce) of rank j of the
 * other partition. For pairings DistDL's rules cannot express (a weight
 * grid whose axes are a permutation of y's). */
ladle_status ladle__pair_create_mapped(const ladle_layout *lx, const ladle_layout *ly,
                                       const int *source, ladle_dtype dtype, ladle_device device,
                                       int reduce, ladle_op **out, const char *func);

#endif /* LADLE_PRIMITIVES_PAIR_H */
