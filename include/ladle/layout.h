/*
 * ladle/layout.h - how a tensor is laid out over a partition.
 *
 * A layout gives every rank of a partition a box (offset and shape) of an
 * ndim-dimensional global index space:
 *
 *  - decomposed layouts split a global shape: tensor dimension d is split
 *    along partition dimension d (ndim equals the partition's ndim). The
 *    balanced split gives block i of n elements over P blocks
 *    n/P + (i < n%P) elements (the remainder on the lowest indices, as
 *    DistDL); a split table gives any rectilinear, unbalanced split.
 *  - block layouts give every member the same whole block (offset 0); they
 *    describe the operands of broadcast, sum-reduce and all-sum-reduce,
 *    which move whole blocks, and ndim is free.
 *
 * Ranks outside the partition hold a zero-volume box. Layouts are plain data:
 * creating and querying them is local (not collective) and every rank computes
 * the same answers. A layout keeps its partition alive.
 */
#ifndef LADLE_LAYOUT_H
#define LADLE_LAYOUT_H

#include "core.h"
#include "partition.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ladle_layout ladle_layout;

/* Pass as a rank argument to mean "the calling rank". */
#define LADLE_SELF (-1)

/* The balanced decomposition of global_shape over p (ndim must equal the
 * partition's ndim; extents may be 0 or smaller than the grid, giving
 * zero-volume blocks). Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG,
 * LADLE_ERR_SHAPE, LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_layout_create_balanced(const ladle_partition *p, int ndim,
                                                    const int64_t global_shape[],
                                                    ladle_layout **l);

/* A rectilinear decomposition from split tables: sizes[d] has
 * partition_shape[d] non-negative entries summing to global_shape[d]; block
 * i along d starts at sizes[d][0] + ... + sizes[d][i-1]. Sizes that pass
 * the extent are refused as they are met, so no sum overflows. Local.
 * Returns the codes of ladle_layout_create_balanced. */
LADLE_API ladle_status ladle_layout_create_split(const ladle_partition *p, int ndim,
                                                 const int64_t global_shape[],
                                                 const int64_t *const sizes[],
                                                 ladle_layout **l);

/* Every member of p holds a whole block of block_shape (ndim dimensions, any
 * ndim from 0 to LADLE_MAX_NDIM). Local. Returns the codes above. */
LADLE_API ladle_status ladle_layout_create_block(const ladle_partition *p, int ndim,
                                                 const int64_t block_shape[],
                                                 ladle_layout **l);

/* Release the handle and set *l to NULL. Accepts NULL. Local; when it frees
 * the layout and so releases the last reference to its partition, collective
 * as ladle_partition_destroy. */
LADLE_API ladle_status ladle_layout_destroy(ladle_layout **l);

/* The partition (borrowed, alive while l is), ndim, and the global shape (for
 * a block layout, the block shape). Local. */
LADLE_API const ladle_partition *ladle_layout_partition(const ladle_layout *l);
LADLE_API int ladle_layout_ndim(const ladle_layout *l);
LADLE_API const int64_t *ladle_layout_global_shape(const ladle_layout *l);
/* 1 for a block layout, else 0. Local. */
LADLE_API int ladle_layout_is_block(const ladle_layout *l);
/* 1 if the boxes of the members tile the global index space exactly (every
 * index held by exactly one member), else 0. Block layouts over more than
 * one rank, and the padded layouts of halo exchange, do not. Local. */
LADLE_API int ladle_layout_is_decomposition(const ladle_layout *l);

/* The box of partition rank `rank` (LADLE_SELF for the calling rank): its
 * offset in the global index space and its shape (ndim entries each; either
 * pointer may be NULL). A rank outside the partition (or LADLE_SELF on an
 * inactive rank) gets offset 0 and shape 0 in every dimension. Local.
 * Returns LADLE_ERR_NULL, LADLE_ERR_ARG for a bad rank. */
LADLE_API ladle_status ladle_layout_box(const ladle_layout *l, int rank, int64_t offset[],
                                        int64_t shape[]);

/* Number of elements in rank's box. Local. */
LADLE_API int64_t ladle_layout_local_volume(const ladle_layout *l, int rank);

/* The intersection of the box of rank ra in a with the box of rank rb in b
 * (global coordinates; offset and shape may be NULL) and its volume (0 when
 * they do not meet). a and b must have the same ndim. Local.
 * Returns LADLE_ERR_NULL, LADLE_ERR_ARG. */
LADLE_API ladle_status ladle_layout_overlap(const ladle_layout *a, int ra,
                                            const ladle_layout *b, int rb, int64_t offset[],
                                            int64_t shape[], int64_t *volume);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_LAYOUT_H */
