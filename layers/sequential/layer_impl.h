/*
 * What the sequential layers' creates share: the first check of a
 * descriptor argument, the checks of a layer over a window of 1 to 3
 * spatial dimensions, and the destroy of an impl that is one block.
 */
#ifndef LADLE_LAYER_IMPL_H
#define LADLE_LAYER_IMPL_H

#include "src/op/op_impl.h"

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
