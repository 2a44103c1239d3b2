/*
 * What the sequential layers' descriptors and creates share: the start of
 * every descriptor's _init, the first check of a descriptor argument, the
 * checks of a layer over a window of 1 to 3 spatial dimensions, and the
 * destroy of an impl that is one block.
 */
#ifndef LADLE_LAYER_IMPL_H
#define LADLE_LAYER_IMPL_H

#include <string.h>

#include "src/op/op_impl.h"

/* The start of every descriptor's _init: 0 for a NULL d (the init then does
 * nothing), else 1 with *d zeroed and its size stamped (size is the first
 * field of every descriptor, see LADLE_CHECK_SIZE). */
static inline int ladle__desc_start(void *d, size_t size)
{
    if (d == NULL)
        return 0;
    memset(d, 0, size);
    memcpy(d, &size, sizeof size);
    return 1;
}
#define LADLE__DESC_START(d) ladle__desc_start((d), sizeof *(d))

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

#endif /* LADLE_LAYER_IMPL_H */
