/*
 * Interpolation's planning (layers/sequential/interp.c), shared with the distributed
 * layer (layers/distributed/dist_interp.c). Never installed.
 */
#ifndef LADLE_INTERP_IMPL_H
#define LADLE_INTERP_IMPL_H

#include "src/core/backend.h"

/* Check d and x's global shape (2 + d->nd extents) for func, as every rank
 * does alike, and fill the global geometry (whole boxes, offsets 0) and y's
 * shape. Local. */
ladle_status ladle__interp_plan(const ladle_interp_desc *d, const int64_t *x_shape,
                                ladle_dtype dtype, ladle_interp_geom *g, int64_t *y_shape,
                                const char *func);

#endif /* LADLE_INTERP_IMPL_H */
