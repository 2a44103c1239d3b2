/*
 * What the primitives offer the layers above them beyond the public API:
 * all-sum-reduce over a layout's blocks or over groups of ranks, and the
 * gather of overlapping windows. Never installed.
 */
#ifndef LADLE_PRIMITIVES_IMPL_H
#define LADLE_PRIMITIVES_IMPL_H

#include "src/comm/exchange.h"
#include "src/op/op_impl.h"

/* The call's arguments that every member must pass alike besides its
 * layouts (dtype, device, flags), folded into h. */
uint64_t ladle__prim_hash(uint64_t h, ladle_dtype dtype, ladle_device device,
                          unsigned flags);

/* The end of every primitive's creation. st is the status of the union's
 * communicator (ladle__op_comm): when it is LADLE_OK, ladle__op_finish
 * agrees on local over *comm and moves *op to *out. Then whatever the
 * creation still holds is freed: the communicator, the op on failure and
 * to_comm. Collective over the members. */
ladle_status ladle__prim_finish(ladle_status st, ladle_op **op, MPI_Comm *comm,
                                int **to_comm, ladle_status local, uint64_t h,
                                ladle_op **out, const char *func);

/* What a box exchange demands of its two layouts beyond one parent
 * communicator (raised for func). Local, on global facts. */
typedef ladle_status (*ladle__layouts_check)(const ladle_layout *x, const ladle_layout *y,
                                             const char *func);

/* Repartition's box exchange, for it and the window gather: forward copies
 * each piece of x's boxes into y's, the adjoint sends y's pieces back and
 * lands them by adj (LADLE_BOX_ADD where y's boxes may overlap; the vtable's
 * adjoint then zeroes dx first). Checks the partitions, dtype and flags,
 * then the layouts by check; x and y are not NULL. Collective over both
 * partitions. */
ladle_status ladle__box_exchange_create(const ladle_op_vtable *vt, const ladle_layout *x,
                                        const ladle_layout *y, ladle_box_mode adj,
                                        ladle__layouts_check check, ladle_dtype dtype,
                                        ladle_device device, unsigned flags, ladle_op **out,
                                        const char *func);

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
