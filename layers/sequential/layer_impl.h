/*
 * What the sequential layers' creates share: the first check of a
 * descriptor argument, the checks of a layer over a window of 1 to 3
 * spatial dimensions, the destroy of an impl that is one block, and the
 * table through which an impl owns its parts (the distributed layers' too).
 */
#ifndef LADLE_LAYER_IMPL_H
#define LADLE_LAYER_IMPL_H

#include <stddef.h>

#include "src/op/op_impl.h"

/*
 * What an impl owns, named once: a table of its members, each by its
 * offset in the impl with the function that frees it (and nulls it; be is
 * the backend a device buffer came from), ended by LADLE__PARTS_END. A
 * layer's destroy and its create's failure path then free the same list.
 */
typedef struct ladle__part {
    void (*free)(void *member, const ladle_backend *be); /* NULL ends the table */
    size_t offset;
} ladle__part;

/* The free functions of a table's members: a ladle_op *, a ladle_tensor *,
 * a block of ladle__calloc and a buffer of be's alloc (kept when be is
 * NULL: a create that failed before the op existed has none). */
void ladle__part_op(void *member, const ladle_backend *be);
void ladle__part_tensor(void *member, const ladle_backend *be);
void ladle__part_host(void *member, const ladle_backend *be);
void ladle__part_device(void *member, const ladle_backend *be);

#define LADLE__PART(T, member, fn) {fn, offsetof(T, member)}
#define LADLE__PART_OP(T, member) LADLE__PART(T, member, ladle__part_op)
#define LADLE__PART_TENSOR(T, member) LADLE__PART(T, member, ladle__part_tensor)
#define LADLE__PART_HOST(T, member) LADLE__PART(T, member, ladle__part_host)
#define LADLE__PART_DEVICE(T, member) LADLE__PART(T, member, ladle__part_device)
#define LADLE__PARTS_END {NULL, 0}

/* Free the members of s that parts names (s itself stays; NULL: nothing). */
void ladle__parts_release(void *s, const ladle__part *parts, const ladle_backend *be);
/* ladle__parts_release, then the impl itself (one block of ladle__calloc). */
void ladle__parts_free(void *impl, const ladle__part *parts, const ladle_backend *be);

/* A create's descriptor argument: not NULL, and of a size this library
 * reads (raised for the calling function). */
#define LADLE__CHECK_DESC(d)                                                               \
    do {                                                                                   \
        LADLE_NOT_NULL(d);                                                                 \
        LADLE_CHECK_SIZE(d);                                                               \
    } while (0)

/* The checks of a layer over a window of nd spatial dimensions (conv and
 * pool): nd in 1 to 3, no flag but LADLE_CHECKED and LADLE_OVERLAP_HALO,
 * and x a real dtype's [N, C, S...] of 2 + nd dimensions. Raised for func.
 * Local. */
ladle_status ladle__window_layer_check(int nd, unsigned flags, ladle_dtype dtype,
                                       const int64_t *x_shape, const char *func);

/* The op of a layer whose y has x's shape (batched) on device, taking impl
 * (one block of ladle__calloc, freed here on failure): on success *out.
 * Raised for func. Local. */
ladle_status ladle__layer_same_shape(const ladle_op_vtable *vt, void *impl, ladle_dtype dtype,
                                     ladle_device device, int ndim, const int64_t *shape,
                                     ladle_op **out, const char *func);

/* The backward slot of a layer over ids (an embedding): nothing, there is
 * no gradient for ids (the generic checks refuse a dx). */
ladle_status ladle__layer_ids_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       ladle_tensor *dx, int64_t n);

/* The destroy slot of a layer whose impl is one block of ladle__calloc. */
void ladle__layer_free_impl(ladle_op *op);
/* The ctx_fini slot of a layer whose ctx impl is one block of
 * ladle__calloc (freed and nulled). */
void ladle__layer_ctx_free_impl(ladle_ctx *ctx);

#endif /* LADLE_LAYER_IMPL_H */
