/*
 * Interpolation on the CPU (see interp_forward in src/core/backend.h).
 * Each output index of a dimension reads one tap (nearest) or two (linear,
 * as PyTorch does, even where a weight is 0); an output of a plane is the
 * sum over the combinations of its dimensions' taps. The forward gathers in
 * double; the backward zeroes dx and scatters in output order, so both are
 * deterministic.
 */
#include <string.h>

#include "src/backends/cpu/cpu.h"

static inline double load(ladle_dtype dtype, const void *p, int64_t k)
{
    return dtype == LADLE_F32 ? (double)((const float *)p)[k] : ((const double *)p)[k];
}

static inline void add_at(ladle_dtype dtype, void *p, int64_t k, double v)
{
    if (dtype == LADLE_F32)
        ((float *)p)[k] += (float)v;
    else
        ((double *)p)[k] += v;
}

static inline void store(ladle_dtype dtype, void *p, int64_t k, double v)
{
    if (dtype == LADLE_F32)
        ((float *)p)[k] = (float)v;
    else
        ((double *)p)[k] = v;
}

/* The taps of the output box's index o along a, local to the input box. */
typedef struct taps {
    int64_t i[2];
    double w[2];
} taps;

static void local_taps(const ladle_interp_geom *g, int a, int64_t o, taps *t)
{
    ladle__interp_taps(g, a, g->y_off[a] + o, t->i, t->w);
    t->i[0] -= g->x_off[a];
    t->i[1] -= g->x_off[a];
}

/* One plane, either way: forward gathers x (from element bx on) into y
 * (from by on); the adjoint scatters dy (from by) into dx (from bx, already
 * zero). */
static inline void plane(const void *geom, ladle_dtype dtype, int adjoint, const void *src,
                         void *dst, int64_t bx, int64_t by)
{
    const ladle_interp_geom *g = geom;
    int64_t n1 = g->x_n[1], n2 = g->x_n[2], o = by;
    int nt = g->linear ? 2 : 1;
    for (int64_t oz = 0; oz < g->y_n[0]; oz++) {
        taps tz;
        local_taps(g, 0, oz, &tz);
        for (int64_t oy = 0; oy < g->y_n[1]; oy++) {
            taps ty;
            local_taps(g, 1, oy, &ty);
            for (int64_t ox = 0; ox < g->y_n[2]; ox++, o++) {
                taps tx;
                local_taps(g, 2, ox, &tx);
                double acc = 0, dyv = adjoint ? load(dtype, src, o) : 0;
                for (int a = 0; a < nt; a++)
                    for (int b = 0; b < nt; b++)
                        for (int c = 0; c < nt; c++) {
                            double w = tz.w[a] * ty.w[b] * tx.w[c];
                            int64_t k = bx + (tz.i[a] * n1 + ty.i[b]) * n2 + tx.i[c];
                            if (adjoint)
                                add_at(dtype, dst, k, w * dyv);
                            else
                                acc += w * load(dtype, src, k);
                        }
                if (!adjoint)
                    store(dtype, dst, o, acc);
            }
        }
    }
}

ladle_status ladle__cpu_interp_forward(const ladle_backend *be, ladle_dtype dtype,
                                       const ladle_interp_geom *g, int64_t planes,
                                       const void *x, void *y)
{
    ladle__cpu_each_plane(plane, g, g->x_n, g->y_n, dtype, 0, planes, x, y);
    return LADLE_OK;
}

ladle_status ladle__cpu_interp_backward(const ladle_backend *be, ladle_dtype dtype,
                                        const ladle_interp_geom *g, int64_t planes,
                                        const void *dy, void *dx)
{
    ladle__cpu_each_plane(plane, g, g->x_n, g->y_n, dtype, 1, planes, dy, dx);
    return LADLE_OK;
}
