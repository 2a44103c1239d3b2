/*
 * Adaptive pooling's private plan, shared by the sequential and the
 * distributed layer. Never installed.
 */
#ifndef LADLE_ADAPTIVE_IMPL_H
#define LADLE_ADAPTIVE_IMPL_H

#include "src/core/backend.h"

/* The checks of ladle_adaptive_avg_pool_create (raised for f) and the
 * geometry over the whole extents; ys gets y's shape (ndim entries). */
ladle_status ladle__adaptive_plan(int ndim, const int64_t *xs, const int64_t *out_size,
                                  ladle_dtype dtype, ladle_adaptive_geom *g, int64_t *ys,
                                  const char *f);

#endif /* LADLE_ADAPTIVE_IMPL_H */
