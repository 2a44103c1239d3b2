/*
 * The CUDA backend's plane-walker slots, adaptive average pooling and
 * interpolation (nearest and linear, align_corners or not), against the
 * CPU backend's (test/cuda_pair.h): 1-d, 2-d and 3-d planes, smaller and
 * larger outputs than inputs (windows that overlap and repeat), a few
 * planes and more elements than the grid (the emulator's grid is 32 blocks
 * of 256), and tiles: an output box inside the global output with the
 * input box its windows or taps read (what the distributed layers hand the
 * slots), found here from the shared definitions in src/core/backend.h.
 *
 * Tolerances. f64 agrees to 1e-12 (test/cuda_pair.h). In f32 the forwards
 * gather in double and round once on both sides: one ulp, 1.2e-7 of
 * 1 + |y|, PLANES_F32 with room. The CPU's backwards scatter in f32 (each
 * input's many contributions rounded as they add), the GPU's gather in
 * double and round once: so an f32 backward is compared with the CPU's f64
 * backward of the same values, rounded to f32, to the same one ulp.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_pair.h"

#define PLANES_F32 2.5e-7

typedef struct shape3 {
    int64_t in[3], out[3];
    int tile; /* an output box inside the output, not all of it */
} shape3;

/* The output box along a: all of it, or its middle half. */
static void out_box(const shape3 *s, int a, int64_t *off, int64_t *n)
{
    int64_t o = s->out[a];
    *off = s->tile && o >= 4 ? o / 4 : 0;
    *n = s->tile && o >= 4 ? o / 2 : o;
}

/* One case either way, given the geometry's boxes (n_x, n_y: the boxes'
 * volumes). fwd/bwd run the slot; the CPU's f64 run is the f32
 * backward's oracle. */
typedef ladle_status (*plane_slot)(const ladle_backend *, ladle_dtype, const void *,
                                   int64_t, const void *, void *);

static void planes_case(ladle_dtype dt, const void *g, plane_slot cpu_fwd,
                        plane_slot cpu_bwd, plane_slot gpu_fwd, plane_slot gpu_bwd,
                        int64_t planes, int64_t nx, int64_t ny, const char *what)
{
    int64_t ex = planes * nx, ey = planes * ny;
    void *x = cp_random(dt, ex, -1, 1, 71 + (uint64_t)ex),
         *dy = cp_random(dt, ey, -1, 1, 72);
    void *y = cp_host(dt, ey);
    LT_OK(cpu_fwd(cp_cpu(), dt, g, planes, x, y));
    /* the backward's oracle in f64 over the same values */
    double *dy64 = cp_host(LADLE_F64, ey), *dx64 = cp_host(LADLE_F64, ex);
    for (int64_t i = 0; i < ey; i++)
        dy64[i] = cp_get(dt, dy, i);
    LT_OK(cpu_bwd(cp_cpu(), LADLE_F64, g, planes, dy64, dx64));
    void *dx = cp_host(dt, ex);
    for (int64_t i = 0; i < ex; i++)
        cp_set(dt, dx, i, dx64[i]);

    void *d_x = cp_upload(dt, ex, x), *d_y = cp_upload(dt, ey, NULL);
    void *d_dy = cp_upload(dt, ey, dy), *d_dx = cp_upload(dt, ex, NULL);
    LT_OK(gpu_fwd(cp_gpu(), dt, g, planes, d_x, d_y));
    CP_CLOSE(dt, ey, d_y, y, cp_tol(dt, PLANES_F32), what);
    LT_OK(gpu_bwd(cp_gpu(), dt, g, planes, d_dy, d_dx));
    CP_CLOSE(dt, ex, d_dx, dx, cp_tol(dt, PLANES_F32), what);
    cp_free(d_x);
    cp_free(d_y);
    cp_free(d_dy);
    cp_free(d_dx);
    void *host[] = {x, dy, y, dy64, dx64, dx};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        free(host[i]);
}

/* The slots through the table, as plane_slot. */
#define SLOT_SHIM(name, geom, be_of)                                                       \
    static ladle_status name(const ladle_backend *be, ladle_dtype dt, const void *g,       \
                             int64_t planes, const void *src, void *dst)                   \
    {                                                                                      \
        return be->fn->be_of(be, dt, (const geom *)g, planes, src, dst);                   \
    }
SLOT_SHIM(adaptive_fwd, ladle_adaptive_geom, adaptive_pool_forward)
SLOT_SHIM(adaptive_bwd, ladle_adaptive_geom, adaptive_pool_backward)
SLOT_SHIM(interp_fwd, ladle_interp_geom, interp_forward)
SLOT_SHIM(interp_bwd, ladle_interp_geom, interp_backward)

static const shape3 shapes[] = {
    {{1, 1, 10}, {1, 1, 4}, 0}, {{1, 1, 5}, {1, 1, 13}, 0}, {{1, 1, 7}, {1, 1, 7}, 0},
    {{1, 9, 6}, {1, 4, 11}, 0}, {{1, 9, 6}, {1, 4, 11}, 1}, {{1, 13, 17}, {1, 8, 8}, 1},
    {{4, 5, 6}, {3, 7, 2}, 0},  {{5, 4, 7}, {9, 8, 3}, 1},  {{1, 1, 1}, {1, 3, 5}, 0},
};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])
static const int64_t plane_counts[] = {1, 3, 160};

START_TEST(adaptive_pool_against_cpu)
{
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < NSHAPES; s++)
            for (int p = 0; p < 3; p++) {
                const shape3 *sh = &shapes[s];
                ladle_adaptive_geom g;
                memset(&g, 0, sizeof g);
                int64_t nx = 1, ny = 1;
                for (int a = 0; a < 3; a++) {
                    g.in[a] = sh->in[a];
                    g.out[a] = sh->out[a];
                    out_box(sh, a, &g.y_off[a], &g.y_n[a]);
                    int64_t b0, e0, b1, e1; /* the box's first and last windows */
                    ladle__adaptive_window(g.in[a], g.out[a], g.y_off[a], &b0, &e0);
                    ladle__adaptive_window(g.in[a], g.out[a], g.y_off[a] + g.y_n[a] - 1,
                                           &b1, &e1);
                    g.x_off[a] = b0;
                    g.x_n[a] = e1 - b0;
                    nx *= g.x_n[a];
                    ny *= g.y_n[a];
                }
                char what[128];
                snprintf(
                    what, sizeof what, "adaptive %lldx%lldx%lld -> %lldx%lldx%lld%s p=%lld",
                    (long long)sh->in[0], (long long)sh->in[1], (long long)sh->in[2],
                    (long long)sh->out[0], (long long)sh->out[1], (long long)sh->out[2],
                    sh->tile ? " tile" : "", (long long)plane_counts[p]);
                planes_case(cp_dtype(d), &g, adaptive_fwd, adaptive_bwd, adaptive_fwd,
                            adaptive_bwd, plane_counts[p], nx, ny, what);
            }
}
END_TEST

/* The interpolation's geometry for a shape, mode and corners. */
static int64_t interp_geom(const shape3 *sh, int linear, int align, ladle_interp_geom *g,
                           int64_t *ny)
{
    memset(g, 0, sizeof *g);
    g->linear = linear;
    g->align_corners = align;
    int64_t nx = 1;
    *ny = 1;
    for (int a = 0; a < 3; a++) {
        g->in[a] = sh->in[a];
        g->out[a] = sh->out[a];
        g->ratio[a] =
            align ? (g->out[a] > 1 ? (double)(g->in[a] - 1) / (double)(g->out[a] - 1) : 0.0)
                  : (double)g->in[a] / (double)g->out[a];
        out_box(sh, a, &g->y_off[a], &g->y_n[a]);
    }
    for (int a = 0; a < 3; a++) { /* the input box: every tap of the output box */
        int64_t lo = g->in[a], hi = -1, t[2];
        double w[2];
        for (int64_t o = g->y_off[a]; o < g->y_off[a] + g->y_n[a]; o++) {
            ladle__interp_taps(g, a, o, t, w);
            lo = t[0] < lo ? t[0] : lo;
            hi = t[1] > hi ? t[1] : hi;
        }
        g->x_off[a] = lo;
        g->x_n[a] = hi - lo + 1;
        nx *= g->x_n[a];
        *ny *= g->y_n[a];
    }
    return nx;
}

START_TEST(interpolation_against_cpu)
{
    for (int d = 0; d < 2; d++)
        for (int mode = 0; mode < 3; mode++) /* nearest, linear, linear align_corners */
            for (int s = 0; s < NSHAPES; s++)
                for (int p = 0; p < 3; p++) {
                    const shape3 *sh = &shapes[s];
                    ladle_interp_geom g;
                    int64_t ny, nx = interp_geom(sh, mode > 0, mode == 2, &g, &ny);
                    char what[128];
                    snprintf(what, sizeof what,
                             "interp %s %lldx%lldx%lld -> %lldx%lldx%lld%s p=%lld",
                             mode == 0   ? "nearest"
                             : mode == 1 ? "linear"
                                         : "linear corners",
                             (long long)sh->in[0], (long long)sh->in[1],
                             (long long)sh->in[2], (long long)sh->out[0],
                             (long long)sh->out[1], (long long)sh->out[2],
                             sh->tile ? " tile" : "", (long long)plane_counts[p]);
                    planes_case(cp_dtype(d), &g, interp_fwd, interp_bwd, interp_fwd,
                                interp_bwd, plane_counts[p], nx, ny, what);
                }
}
END_TEST

LT_SUITE("cuda_planes", "cuda_planes", 0, adaptive_pool_against_cpu,
         interpolation_against_cpu)
