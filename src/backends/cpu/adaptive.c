/*
 * Adaptive average and max pooling on the CPU (see adaptive_pool_forward
 * and adaptive_max_forward in src/core/backend_slots.h). Windows may
 * overlap (and, with more outputs than inputs, repeat): the average forward
 * sums each in double, the max forward scans each in row-major order; both
 * backwards zero dx and scatter in output order, so all are deterministic.
 */
#include <math.h>
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

/* Output o's window (z, y, x) of the output box's element (oz, oy, ox),
 * local to the input box: [lo[a], hi[a]) along each axis. */
static void window3(const ladle_adaptive_geom *g, const int64_t o[3], int64_t lo[3],
                    int64_t hi[3])
{
    for (int a = 0; a < 3; a++)
        local_window(g, a, o[a], &lo[a], &hi[a]);
}

/* The winner of one window of the plane at x (element bx): its index in
 * the plane; *best its value. A larger value wins, and the first NaN. */
static int64_t window_max(const ladle_adaptive_geom *g, ladle_dtype dtype, const void *x,
                          int64_t bx, const int64_t lo[3], const int64_t hi[3],
                          double *best)
{
    int64_t n1 = g->x_n[1], n2 = g->x_n[2], win = (lo[0] * n1 + lo[1]) * n2 + lo[2];
    double m = load(dtype, x, bx + win);
    for (int64_t z = lo[0]; z < hi[0]; z++)
        for (int64_t y = lo[1]; y < hi[1]; y++)
            for (int64_t i = lo[2]; i < hi[2]; i++) {
                int64_t k = (z * n1 + y) * n2 + i;
                double v = load(dtype, x, bx + k);
                if (v > m || (isnan(v) && !isnan(m))) {
                    m = v;
                    win = k;
                }
            }
    *best = m;
    return win;
}

ladle_status ladle__cpu_adaptive_max_forward(const ladle_backend *be, ladle_dtype dtype,
                                             const ladle_adaptive_geom *g, int64_t planes,
                                             const void *x, void *y, int64_t *idx)
{
    int64_t in = g->x_n[0] * g->x_n[1] * g->x_n[2], k = 0;
    for (int64_t p = 0; p < planes; p++) {
        int64_t o[3], lo[3], hi[3];
        for (o[0] = 0; o[0] < g->y_n[0]; o[0]++)
            for (o[1] = 0; o[1] < g->y_n[1]; o[1]++)
                for (o[2] = 0; o[2] < g->y_n[2]; o[2]++, k++) {
                    double m;
                    window3(g, o, lo, hi);
                    int64_t win = window_max(g, dtype, x, p * in, lo, hi, &m);
                    if (dtype == LADLE_F32)
                        ((float *)y)[k] = (float)m;
                    else
                        ((double *)y)[k] = m;
                    if (idx != NULL)
                        idx[k] = win;
                }
    }
    return LADLE_OK;
}

ladle_status ladle__cpu_adaptive_max_backward(const ladle_backend *be, ladle_dtype dtype,
                                              const ladle_adaptive_geom *g, int64_t planes,
                                              const void *dy, const int64_t *idx, void *dx)
{
    int64_t in = g->x_n[0] * g->x_n[1] * g->x_n[2];
    int64_t out = g->y_n[0] * g->y_n[1] * g->y_n[2];
    if (planes * in > 0)
        memset(dx, 0, (size_t)(planes * in) * ladle_dtype_size(dtype));
    for (int64_t p = 0; p < planes; p++)
        for (int64_t o = p * out; o < (p + 1) * out; o++) {
            int64_t k = p * in + idx[o];
            if (dtype == LADLE_F32)
                ((float *)dx)[k] += ((const float *)dy)[o];
            else
                ((double *)dx)[k] += ((const double *)dy)[o];
        }
    return LADLE_OK;
}
