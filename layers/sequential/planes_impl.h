/*
 * The layers that map planes to planes through a pair of the backend's
 * kernels on a geometry of boxes (adaptive average and max pooling,
 * interpolation):
 * which kernels, what a tile of the output reads, and the layer op itself,
 * shared by the sequential layers and their distributed twins (which run
 * the same kernels on a gathered window). Never installed.
 */
#ifndef LADLE_PLANES_IMPL_H
#define LADLE_PLANES_IMPL_H

#include "src/core/backend.h"
#include "src/op/op_impl.h"

typedef enum ladle__planes_kind {
    LADLE__PLANES_ADAPTIVE,
    LADLE__PLANES_INTERP,
    LADLE__PLANES_ADAPTIVE_MAX /* the adaptive geometry; saves its winners */
} ladle__planes_kind;

/* A kind and its geometry (global extents; the input box and the output
 * box a call works on). */
typedef struct ladle__planes {
    ladle__planes_kind kind;
    union {
        ladle_adaptive_geom adaptive;
        ladle_interp_geom interp;
    } g;
} ladle__planes;

/* The kind's forward kernel on `planes` planes (x's box into y's) and its
 * backward (dy into dx's box), on op's backend. saved is the max's winners
 * (an int64 per element of y, device memory; the forward writes them unless
 * saved is NULL, the backward reads them); the linear kinds ignore it. */
ladle_status ladle__planes_forward(const ladle_op *op, const ladle__planes *p,
                                   int64_t planes, const void *x, void *y, void *saved);
ladle_status ladle__planes_backward(const ladle_op *op, const ladle__planes *p,
                                    int64_t planes, const void *dy, void *dx,
                                    const void *saved);

/* Whether the kind is linear in x (all but the max). */
static inline int ladle__planes_linear(ladle__planes_kind kind)
{
    return kind != LADLE__PLANES_ADAPTIVE_MAX;
}

/* LADLE_ERR_DEVICE, raised for func, unless op's backend has the kind's
 * kernels. Local. */
ladle_status ladle__planes_check_backend(const ladle_op *op, ladle__planes_kind kind,
                                         const char *func);

/* The geometry's boxes: x_off, x_n, y_off, y_n (per axis of 3). */
void ladle__planes_boxes(ladle__planes *p, int64_t *box[4]);

/* Along axis a (of 3), the first and the last input that the outputs
 * lo..hi read (windows and taps never go back as the output grows). */
void ladle__planes_span(const ladle__planes *p, int a, int64_t lo, int64_t hi,
                        int64_t *x_lo, int64_t *x_hi);

/* The sequential layer of p (copied) on x of shape xs (ndim extents) with
 * y of shape ys: linear with no ctx needed, or (the max) a ctx of an int64
 * winner per element of y. Local. */
ladle_status ladle__planes_layer(const ladle__planes *p, ladle_dtype dtype,
                                 ladle_device device, int ndim, const int64_t *xs,
                                 const int64_t *ys, ladle_op **out, const char *func);

#endif /* LADLE_PLANES_IMPL_H */
