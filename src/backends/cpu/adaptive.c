/*
 * Adaptive average pooling on the CPU (see adaptive_pool_forward in
 * src/core/backend.h). Windows may overlap (and, with more outputs than
 * inputs, repeat): the forward averages each in double; the backward zeroes
 * dx and scatters in output order, so both are deterministic.
 */
#include <string.h>

#include "src/backends/cpu/cpu.h"

static inline double load(ladle_dtype dtype, const void *p, int64_t k)
{
    return dtype == LADLE_F32 ? (double)((const float *)p)[k] : ((const double *)p)[k];
}

/* The window of the output box's index o along a, local to the input box. */
static void local_window(const ladle_adaptive_geom *g, int a, int64_t o, int64_t *b, int64_t *e)
{
    ladle__adaptive_window(g->in[a], g->out[a], g->y_off[a] + o, b, e);
    *b -= g->x_off[a];
    *e -= g->x_off[a];
}

/* One plane either way: forward averages x (from element bx) into y (from
 * by); the adjoint spreads dy (from by) over dx (from bx, already zero). */
static void plane(const void *geom, ladle_dtype dtype, int adjoint, const void *src, void *dst,
                  int64_t bx, int64_t by)
{
    const ladle_adaptive_geom *g = geom;
    int64_t n1 = g->x_n[1], n2 = g->x_n[2], o = by;
    for (int64_t oz = 0; oz < g->y_n[0]; oz++) {
        int64_t z0, z1;
        local_window(g, 0, oz, &z0, &z1);
        for (int64_t oy = 0; oy < g->y_n[1]; oy++) {
            int64_t y0, y1;
            local_window(g, 1, oy, &y0, &y1);
            for (int64_t ox = 0; ox < g->y_n[2]; ox++, o++) {
                int64_t x0, x1;
                local_window(g, 2, ox, &x0, &x1);
                double size = (double)((z1 - z0) * (y1 - y0) * (x1 - x0)), acc = 0;
                double share = adjoint ? load(dtype, src, o) / size : 0;
                for (int64_t z = z0; z < z1; z++)
                    for (int64_t y = y0; y < y1; y++)
                        for (int64_t x = x0; x < x1; x++) {
                            int64_t k = bx + (z * n1 + y) * n2 + x;
                            if (!adjoint)
                                acc += load(dtype, src, k);
                            else if (dtype == LADLE_F32)
                                ((float *)dst)[k] += (float)share;
                            else
                                ((double *)dst)[k] += share;
                        }
                if (adjoint)
                    continue;
                if (dtype == LADLE_F32)
                    ((float *)dst)[o] = (float)(acc / size);
                else
                    ((double *)dst)[o] = acc / size;
            }
        }
    }
}

ladle_status ladle__cpu_adaptive_pool_forward(const ladle_backend *be, ladle_dtype dtype,
                                              const ladle_adaptive_geom *g, int64_t planes,
                                              const void *x, void *y)
{
    ladle__cpu_each_plane(plane, g, g->x_n, g->y_n, dtype, 0, planes, x, y);
    return LADLE_OK;
}

ladle_status ladle__cpu_adaptive_pool_backward(const ladle_backend *be, ladle_dtype dtype,
                                               const ladle_adaptive_geom *g, int64_t planes,
                                               const void *dy, void *dx)
{
    ladle__cpu_each_plane(plane, g, g->x_n, g->y_n, dtype, 1, planes, dy, dx);
    return LADLE_OK;
}
