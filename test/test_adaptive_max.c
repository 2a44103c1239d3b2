/*
 * Adaptive max pooling 1-3d, sequential and distributed, against
 * PyTorch's AdaptiveMaxPoolNd written out here: output o of a dimension of
 * input extent L and output extent O takes the largest input of
 * [floor(o L / O), ceil((o + 1) L / O)), the first of equal values in
 * row-major order (a NaN over any number, the first NaN), and the backward
 * routes dy to that winner. The reference below computes windows in
 * floating point and scans them itself; it shares no code with the layer.
 * Random values, values full of ties, NaN and infinities, O below, equal to
 * and above L, finite differences, two contexts in flight, the distributed
 * layer against the sequential one on the gathered tensors at 1 to 6
 * ranks, and refusals on every rank.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "src/core/backend.h"

typedef struct am_case {
    int ndim;
    int64_t x[5], out[3];
} am_case;

/* 1-3d, odd extents, O < L with overlapping windows, O = L, O > L, O = 1. */
static const am_case cases[] = {
    {3, {2, 3, 7}, {5}},
    {3, {1, 2, 5}, {5}},
    {3, {2, 1, 4}, {9}},
    {3, {1, 1, 13}, {1}},
    {4, {2, 2, 7, 5}, {3, 4}},
    {4, {2, 1, 3, 4}, {5, 6}},
    {4, {1, 2, 9, 6}, {9, 4}},
    {4, {1, 1, 6, 6}, {1, 1}},
    {5, {1, 2, 5, 4, 7}, {2, 3, 4}},
    {5, {2, 1, 3, 3, 3}, {4, 3, 2}},
};
#define NCASES (sizeof cases / sizeof cases[0])

/* The window of output o in floating point (exact for these extents). */
static void am_window(int64_t in, int64_t out, int64_t o, int64_t *b, int64_t *e)
{
    *b = (int64_t)floor((double)o * (double)in / (double)out);
    *e = (int64_t)ceil((double)(o + 1) * (double)in / (double)out);
}

/* Extents of a case as three (leading ones 1). */
static void am_three(int ndim, const int64_t *xs, const int64_t *os, int64_t in[3],
                     int64_t out[3])
{
    for (int a = 0; a < 3; a++)
        in[a] = out[a] = 1;
    for (int a = 0; a < ndim - 2; a++) {
        in[3 - (ndim - 2) + a] = xs[2 + a];
        out[3 - (ndim - 2) + a] = os[a];
    }
}

/* y and each output's winner (flat index into x) for x of `planes` planes:
 * a scan in row-major order, keeping the first of equal values and the
 * first NaN. */
static void am_reference(const double *x, int ndim, const int64_t *xs, const int64_t *os,
                         int64_t planes, double *y, int64_t *win)
{
    int64_t in[3], out[3], k = 0;
    am_three(ndim, xs, os, in, out);
    int64_t pin = in[0] * in[1] * in[2];
    for (int64_t p = 0; p < planes; p++)
        for (int64_t a = 0; a < out[0]; a++)
            for (int64_t b = 0; b < out[1]; b++)
                for (int64_t c = 0; c < out[2]; c++, k++) {
                    int64_t a0, a1, b0, b1, c0, c1, w = -1;
                    am_window(in[0], out[0], a, &a0, &a1);
                    am_window(in[1], out[1], b, &b0, &b1);
                    am_window(in[2], out[2], c, &c0, &c1);
                    for (int64_t i = a0; i < a1; i++)
                        for (int64_t j = b0; j < b1; j++)
                            for (int64_t l = c0; l < c1; l++) {
                                int64_t at = p * pin + (i * in[1] + j) * in[2] + l;
                                if (w < 0 || (isnan(x[at]) && !isnan(x[w])) ||
                                    (!isnan(x[w]) && x[at] > x[w]))
                                    w = at;
                            }
                    y[k] = x[w];
                    win[k] = w;
                }
}

/* Values that tie often: -1, 0 or 1 from the random ones. */
static double am_ties(double v) { return v < -1.0 / 3 ? -1 : v < 1.0 / 3 ? 0 : 1; }

/* A value map of x: 0 random, 1 ties, 2 ties with NaN and +-inf. */
static void am_map(double *x, int64_t n, int kind)
{
    for (int64_t i = 0; i < n && kind > 0; i++) {
        double v = am_ties(x[i]);
        if (kind == 2 && i % 7 == 3)
            v = i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -INFINITY;
        x[i] = v;
    }
}

/* x and dy random from seed, x's values then mapped by kind (am_map). */
static void am_fill(ladle_tensor *x, ladle_tensor *dy, int kind, uint64_t seed)
{
    LT_OK(ladle_tensor_fill_random(x, 1, seed));
    LT_OK(ladle_tensor_fill_random(dy, 1, seed + 1));
    double *v = lt_values(x);
    am_map(v, ladle_tensor_numel(x), kind);
    lt_store(x, v);
    free(v);
}

/* Same values, NaN equal to NaN. */
static int am_same(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* One case at batch n in dtype, values of kind (am_map): y, dx and a
 * forward without ctx against the reference. The worst errors in *ey, *ed. */
static void am_pass(ladle_op *op, const am_case *c, int64_t n, ladle_dtype dt, int kind,
                    uint64_t seed, double *ey, double *ed)
{
    int nd = c->ndim;
    int64_t xs[5], ys[5];
    for (int i = 0; i < nd; i++) {
        xs[i] = i == 0 ? n : c->x[i];
        ys[i] = i == 0 ? n : i == 1 ? c->x[1] : c->out[i - 2];
    }
    ladle_tensor *x = lt_tensor(dt, nd, xs), *y = lt_tensor(dt, nd, ys);
    ladle_tensor *dy = lt_tensor(dt, nd, ys), *dx = lt_tensor(dt, nd, xs);
    ladle_tensor *y2 = lt_tensor(dt, nd, ys);
    am_fill(x, dy, kind, seed);
    double *xv = lt_values(x); /* as rounded to dt */
    ladle_ctx *ctx = lt_forward_backward(op, x, y, dy, dx);
    ladle_ctx_destroy(&ctx);
    LT_OK(ladle_op_forward(op, x, y2));
    int64_t ny = ladle_tensor_numel(y), nx = ladle_tensor_numel(x);
    double *want = calloc((size_t)ny, sizeof *want), *dxw = calloc((size_t)nx, sizeof *dxw);
    int64_t *win = calloc((size_t)ny, sizeof *win);
    am_reference(xv, nd, c->x, c->out, n * c->x[1], want, win);
    double *yv = lt_values(y), *y2v = lt_values(y2), *dyv = lt_values(dy),
           *dxv = lt_values(dx);
    for (int64_t i = 0; i < ny; i++) {
        dxw[win[i]] += dyv[i];
        *ey = fmax(*ey, am_same(yv[i], want[i]) && am_same(y2v[i], want[i]) ? 0 : 1);
    }
    for (int64_t i = 0; i < nx; i++)
        *ed = fmax(*ed, fabs(dxv[i] - dxw[i]) / (1 + fabs(dxw[i])));
    free(want), free(dxw), free(win), free(xv), free(yv), free(y2v), free(dyv), free(dxv);
    LT_DESTROY(&x, &y, &dy, &dx, &y2);
}

START_TEST(against_definition)
{
    for (size_t k = 0; k < NCASES; k++)
        for (int t = 0; t < 2; t++)
            for (int kind = 0; kind < 3; kind++) {
                ladle_dtype dt = t ? LADLE_F32 : LADLE_F64;
                ladle_op *op = NULL;
                LT_OK(ladle_adaptive_max_pool_create(cases[k].ndim, cases[k].x,
                                                     cases[k].out, dt, lt_device(), &op));
                LT_ASSERT(ladle_op_kind_of(op) == LADLE_OP_ADAPTIVE_MAX_POOL,
                          "case %zu: kind", k);
                /* the full batch and a smaller one */
                for (int64_t n = cases[k].x[0]; n >= 1; n -= cases[k].x[0] > 1 ? 1 : 2) {
                    double ey = 0, ed = 0;
                    am_pass(op, &cases[k], n, dt, kind, 100 * k + 10 * kind + (uint64_t)n,
                            &ey, &ed);
                    LT_ASSERT(ey == 0 && ed < (t ? 1e-6 : 1e-15),
                              "case %zu (%s, values %d, batch %lld): y %s, dx %.1e", k,
                              t ? "f32" : "f64", kind, (long long)n, ey ? "differs" : "ok",
                              ed);
                }
                ladle_op_destroy(&op);
            }
}
END_TEST

/* Central differences of the random (tie-free) cases in f64. */
START_TEST(finite_differences)
{
    for (size_t k = 0; k < NCASES; k++) {
        ladle_op *op = NULL;
        ladle_gradient_result r;
        LT_OK(ladle_adaptive_max_pool_create(cases[k].ndim, cases[k].x, cases[k].out,
                                             LADLE_F64, lt_device(), &op));
        LT_OK(ladle_gradient_test(op, 40 + k, 200, &r));
        LT_ASSERT(r.input_error < 1e-6, "case %zu: gradient error %.1e", k, r.input_error);
        ladle_op_destroy(&op);
    }
}
END_TEST

/* x of n values at shape xs, forward and backward with dy, the values
 * of y and dx back (the caller frees). */
static void am_run(int ndim, const int64_t *xs, const int64_t *os, const double *x,
                   const double *dy, double **y, double **dx)
{
    int64_t ys[5];
    for (int i = 0; i < ndim; i++)
        ys[i] = i < 2 ? xs[i] : os[i - 2];
    ladle_op *op = NULL;
    LT_OK(ladle_adaptive_max_pool_create(ndim, xs, os, LADLE_F64, lt_device(), &op));
    ladle_tensor *xt = lt_tensor(LADLE_F64, ndim, xs), *yt = lt_tensor(LADLE_F64, ndim, ys);
    ladle_tensor *dyt = lt_tensor(LADLE_F64, ndim, ys),
                 *dxt = lt_tensor(LADLE_F64, ndim, xs);
    lt_store(xt, x);
    lt_store(dyt, dy);
    ladle_ctx *ctx = lt_forward_backward(op, xt, yt, dyt, dxt);
    *y = lt_values(yt);
    *dx = lt_values(dxt);
    ladle_ctx_destroy(&ctx);
    ladle_op_destroy(&op);
    LT_DESTROY(&xt, &yt, &dyt, &dxt);
}

/* Worked out by hand. */
START_TEST(by_hand)
{
    double *y, *dx;
    /* 5 to 3 reads [0, 2), [1, 4), [3, 5): the 3 at 1 wins two windows
     * over the 3 at 2, the 3 at 4 the last */
    int64_t x5[3] = {1, 1, 5}, o3[1] = {3}, o2[1] = {2}, o5[1] = {5};
    am_run(3, x5, o3, (double[]){1, 3, 3, 2, 3}, (double[]){1, 10, 100}, &y, &dx);
    LT_ASSERT(y[0] == 3 && y[1] == 3 && y[2] == 3 && dx[0] == 0 && dx[1] == 11 &&
                  dx[2] == 0 && dx[3] == 0 && dx[4] == 100,
              "ties 5 to 3: y %g %g %g, dx %g %g %g %g %g", y[0], y[1], y[2], dx[0], dx[1],
              dx[2], dx[3], dx[4]);
    free(y), free(dx);
    /* 5 to 2 reads [0, 3), [2, 5): the first NaN of each wins, over 5 */
    am_run(3, x5, o2, (double[]){1, NAN, 5, NAN, 2}, (double[]){1, 10}, &y, &dx);
    LT_ASSERT(isnan(y[0]) && isnan(y[1]) && dx[1] == 1 && dx[3] == 10 &&
                  dx[0] + dx[2] + dx[4] == 0,
              "NaN 5 to 2: y %g %g, dx %g %g %g %g %g", y[0], y[1], dx[0], dx[1], dx[2],
              dx[3], dx[4]);
    free(y), free(dx);
    /* O = L is the identity; -inf windows keep their first */
    am_run(3, x5, o5, (double[]){-INFINITY, 2, -1, INFINITY, 0}, (double[]){1, 2, 3, 4, 5},
           &y, &dx);
    int ok = 1;
    for (int i = 0; i < 5; i++)
        ok &= dx[i] == i + 1;
    LT_ASSERT(ok && y[0] == -INFINITY && y[3] == INFINITY && y[2] == -1, "5 to 5");
    free(y), free(dx);
    /* 2-d, one output over 2 x 3: the 4 at (0, 2) comes before the 4 at
     * (1, 0) in row-major order */
    int64_t x23[4] = {1, 1, 2, 3}, o11[2] = {1, 1};
    am_run(4, x23, o11, (double[]){1, 2, 4, 4, 0, 3}, (double[]){7}, &y, &dx);
    LT_ASSERT(y[0] == 4 && dx[2] == 7 && dx[3] == 0, "2-d tie: y %g, dx[2] %g dx[3] %g",
              y[0], dx[2], dx[3]);
    free(y), free(dx);
    /* 2 to 3 reads [0, 1), [0, 2), [1, 2): the 6 wins twice */
    int64_t x2[3] = {1, 1, 2};
    am_run(3, x2, o3, (double[]){2, 6}, (double[]){1, 10, 100}, &y, &dx);
    LT_ASSERT(y[0] == 2 && y[1] == 6 && y[2] == 6 && dx[0] == 1 && dx[1] == 110,
              "2 to 3: y %g %g %g, dx %g %g", y[0], y[1], y[2], dx[0], dx[1]);
    free(y), free(dx);
}
END_TEST

/* Two contexts in flight: a ctx's backward routes by its own forward's
 * winners. */
START_TEST(two_contexts)
{
    int64_t xs[4] = {2, 2, 7, 5}, ys[4] = {2, 2, 3, 2}, os[2] = {3, 2};
    ladle_op *op = NULL;
    LT_OK(ladle_adaptive_max_pool_create(4, xs, os, LADLE_F64, lt_device(), &op));
    ladle_tensor *x1 = lt_tensor(LADLE_F64, 4, xs), *x2 = lt_tensor(LADLE_F64, 4, xs);
    ladle_tensor *y = lt_tensor(LADLE_F64, 4, ys), *dy = lt_tensor(LADLE_F64, 4, ys);
    ladle_tensor *dxa = lt_tensor(LADLE_F64, 4, xs), *dxb = lt_tensor(LADLE_F64, 4, xs);
    LT_OK(ladle_tensor_fill_random(x1, 1, 5));
    LT_OK(ladle_tensor_fill_random(x2, 1, 6));
    LT_OK(ladle_tensor_fill_random(dy, 1, 7));
    ladle_ctx *c1 = lt_forward_backward(op, x1, y, dy, dxa), *c2 = NULL;
    LT_OK(ladle_ctx_create(op, &c2));
    LT_OK(ladle_layer_forward(op, c1, x1, y));
    LT_OK(ladle_layer_forward(op, c2, x2, y));
    LT_OK(ladle_layer_backward(op, c1, dy, dxb));
    LT_ASSERT(lt_same_values(dxa, dxb), "c1's backward follows c2's forward");
    /* not linear: no adjoint; no backward before a forward */
    ladle_ctx *c3 = NULL;
    LT_OK(ladle_ctx_create(op, &c3));
    LT_FAILS_SAYING(ladle_op_adjoint(op, dy, dxb), LADLE_ERR_UNSUPPORTED, "not linear");
    LT_FAILS(ladle_layer_backward(op, c3, dy, dxb), LADLE_ERR_STATE);
    ladle_ctx_destroy(&c1), ladle_ctx_destroy(&c2), ladle_ctx_destroy(&c3);
    LT_DESTROY(&x1, &x2, &y, &dy, &dxa, &dxb);
    ladle_op_destroy(&op);
}
END_TEST

START_TEST(refusals)
{
    int64_t xs[3] = {1, 1, 5}, three[1] = {3}, zero[1] = {0}, x6[6] = {1, 1, 2, 2, 2, 2};
    int64_t big[3] = {1, 1, ((int64_t)1 << 31) + 1}, huge[1] = {((int64_t)1 << 31) + 1};
    ladle_device dev = lt_device();
    ladle_op *op = NULL;
    LT_FAILS_SAYING(ladle_adaptive_max_pool_create(3, NULL, three, LADLE_F64, dev, &op),
                    LADLE_ERR_NULL, "x_shape");
    LT_FAILS_SAYING(ladle_adaptive_max_pool_create(3, xs, NULL, LADLE_F64, dev, &op),
                    LADLE_ERR_NULL, "out_size");
    LT_FAILS(ladle_adaptive_max_pool_create(3, xs, three, LADLE_F64, dev, NULL),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_adaptive_max_pool_create(3, xs, zero, LADLE_F64, dev, &op),
             LADLE_ERR_SHAPE);
    LT_FAILS_SAYING(ladle_adaptive_max_pool_create(2, xs, three, LADLE_F64, dev, &op),
                    LADLE_ERR_SHAPE, "2 dimensions");
    LT_FAILS(ladle_adaptive_max_pool_create(6, x6, three, LADLE_F64, dev, &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_adaptive_max_pool_create(3, big, three, LADLE_F64, dev, &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_adaptive_max_pool_create(3, xs, huge, LADLE_F64, dev, &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_adaptive_max_pool_create(3, xs, three, LADLE_I64, dev, &op),
             LADLE_ERR_DTYPE);
    LT_ASSERT(op == NULL, "a failed create set the op");
}
END_TEST

/* The CPU's slots through the table on tiles: a tile of the outputs over
 * the box its windows read (offsets as the distributed layer sets them)
 * gives the whole plane's values and winners (moved by the box's offset),
 * with and without saving them. */
START_TEST(slot_tiles)
{
    const ladle_backend *be = ladle__backend(LADLE_CPU);
    for (int k = 0; k < 60; k++) {
        ladle_adaptive_geom whole, tile;
        memset(&whole, 0, sizeof whole);
        uint64_t r = 0x9e3779b97f4a7c15ULL * (uint64_t)(k + 1);
        int64_t nx = 1, ny = 1, ty = 1;
        for (int a = 0; a < 3; a++, r >>= 9) {
            whole.in[a] = whole.x_n[a] = 1 + (int64_t)(r % 9);
            whole.out[a] = whole.y_n[a] = 1 + (int64_t)((r >> 4) % 11);
            nx *= whole.in[a], ny *= whole.out[a];
        }
        tile = whole;
        for (int a = 0; a < 3; a++, r >>= 7) {
            int64_t lo = (int64_t)(r % (uint64_t)whole.out[a]), b, e, b2, e2;
            int64_t hi = lo + (int64_t)((r >> 3) % (uint64_t)(whole.out[a] - lo));
            am_window(whole.in[a], whole.out[a], lo, &b, &e);
            am_window(whole.in[a], whole.out[a], hi, &b2, &e2);
            tile.y_off[a] = lo, tile.y_n[a] = hi - lo + 1;
            tile.x_off[a] = b, tile.x_n[a] = e2 - b;
            ty *= tile.y_n[a];
        }
        double *x = malloc(sizeof(double) * (size_t)nx),
               *y = malloc(sizeof(double) * (size_t)ny);
        double *xb = malloc(sizeof(double) * (size_t)nx),
               *yb = malloc(sizeof(double) * (size_t)ty);
        double *y0 = malloc(sizeof(double) * (size_t)ty);
        int64_t *w = malloc(sizeof(int64_t) * (size_t)ny),
                *wb = malloc(sizeof(int64_t) * (size_t)ty);
        for (int64_t i = 0; i < nx; i++)
            x[i] = am_ties(sin(1.7 * (double)(i + k)));
        LT_OK(be->fn->adaptive_max_forward(be, LADLE_F64, &whole, 1, x, y, w));
        int64_t m = 0, ok = 1;
        for (int64_t z = 0; z < tile.x_n[0]; z++)
            for (int64_t yy = 0; yy < tile.x_n[1]; yy++)
                for (int64_t xx = 0; xx < tile.x_n[2]; xx++)
                    xb[m++] = x[((tile.x_off[0] + z) * whole.in[1] + tile.x_off[1] + yy) *
                                    whole.in[2] +
                                tile.x_off[2] + xx];
        LT_OK(be->fn->adaptive_max_forward(be, LADLE_F64, &tile, 1, xb, yb, wb));
        LT_OK(be->fn->adaptive_max_forward(be, LADLE_F64, &tile, 1, xb, y0, NULL));
        m = 0;
        for (int64_t z = 0; z < tile.y_n[0]; z++)
            for (int64_t yy = 0; yy < tile.y_n[1]; yy++)
                for (int64_t xx = 0; xx < tile.y_n[2]; xx++, m++) {
                    int64_t o = ((tile.y_off[0] + z) * whole.out[1] + tile.y_off[1] + yy) *
                                    whole.out[2] +
                                tile.y_off[2] + xx;
                    int64_t b = wb[m],
                            c[3] = {b / (tile.x_n[1] * tile.x_n[2]),
                                    b / tile.x_n[2] % tile.x_n[1], b % tile.x_n[2]};
                    int64_t g =
                        ((tile.x_off[0] + c[0]) * whole.in[1] + tile.x_off[1] + c[1]) *
                            whole.in[2] +
                        tile.x_off[2] + c[2];
                    ok &= yb[m] == y[o] && y0[m] == y[o] && g == w[o];
                }
        LT_ASSERT(ok, "geometry %d: the tile's winners are the whole's", k);
        free(x), free(y), free(xb), free(yb), free(y0), free(w), free(wb);
    }
}
END_TEST

/* ---- the distributed layer ---- */

typedef struct am_dcase {
    int ndim, grid[5];
    int64_t xs[5], out[3];
} am_dcase;

/* The distributed layer against the sequential one on x of values of
 * kind (am_map) gathered: this rank's boxes of y and dx must match (dx to
 * tol: the gradient of a window shared by tiles is added back in another
 * order). Collective over the world. */
static void am_dist_ties(ladle_op *dist, ladle_op *seq, const am_dcase *c, int kind,
                         uint64_t seed, double tol, const char *what)
{
    int nd = c->ndim;
    int64_t ys[5], xo[5], xn[5], yo[5], yn[5];
    for (int i = 0; i < nd; i++)
        ys[i] = i < 2 ? c->xs[i] : c->out[i - 2];
    ladle_tensor *X = lt_tensor(LADLE_F64, nd, c->xs), *Y = lt_tensor(LADLE_F64, nd, ys);
    ladle_tensor *dY = lt_tensor(LADLE_F64, nd, ys), *dX = lt_tensor(LADLE_F64, nd, c->xs);
    am_fill(X, dY, kind, seed);
    ladle_ctx *cs = lt_forward_backward(seq, X, Y, dY, dX);
    LT_OK(ladle_layout_box(ladle_op_x_layout(dist), LADLE_SELF, xo, xn));
    LT_OK(ladle_layout_box(ladle_op_y_layout(dist), LADLE_SELF, yo, yn));
    ladle_tensor *x = lt_tensor(LADLE_F64, nd, xn), *y = lt_tensor(LADLE_F64, nd, yn);
    ladle_tensor *dy = lt_tensor(LADLE_F64, nd, yn), *dx = lt_tensor(LADLE_F64, nd, xn);
    lt_box_extract(X, xo, x);
    lt_box_extract(dY, yo, dy);
    ladle_ctx *cd = lt_forward_backward(dist, x, y, dy, dx);
    double *yv = lt_values(y), *yw = lt_values(dy);
    lt_box_extract(Y, yo, dy); /* the sequential y's box, reusing dy */
    free(yw);
    yw = lt_values(dy);
    int same = 1;
    for (int64_t i = 0; i < ladle_tensor_numel(y); i++)
        same &= am_same(yv[i], yw[i]);
    double ed = lt_box_error(dX, xo, dx);
    LT_ASSERT(same && ed <= tol, "%s, values %d: y %s, dx %.1e", what, kind,
              same ? "same" : "differs", ed);
    free(yv), free(yw);
    ladle_ctx_destroy(&cs), ladle_ctx_destroy(&cd);
    LT_DESTROY(&X, &Y, &dY, &dX, &x, &y, &dy, &dx);
}

START_TEST(distributed)
{
    static const am_dcase dcases[] = {
        {3, {1, 1, 2}, {2, 2, 11}, {4}},
        {3, {2, 1, 3}, {3, 2, 7}, {9}}, /* O > L */
        {3, {1, 1, 4}, {1, 1, 9}, {9}}, /* O = L */
        {4, {1, 1, 2, 1}, {2, 2, 9, 5}, {4, 3}},
        {4, {1, 1, 2, 2}, {1, 2, 7, 10}, {3, 6}},
        {4, {1, 2, 1, 2}, {2, 3, 6, 5}, {6, 2}},
        {4, {1, 1, 3, 2}, {1, 1, 10, 7}, {5, 5}},
        {4, {1, 1, 4, 1}, {1, 2, 9, 4}, {2, 2}},  /* tiles without output */
        {4, {1, 1, 1, 5}, {1, 1, 3, 11}, {2, 1}}, /* one window over all tiles */
        {5, {1, 1, 2, 1, 2}, {1, 2, 5, 4, 7}, {3, 2, 4}},
        {5, {1, 1, 1, 3, 2}, {1, 1, 3, 7, 5}, {2, 9, 5}},
    };
    for (size_t k = 0; k < sizeof dcases / sizeof dcases[0]; k++) {
        const am_dcase *c = &dcases[k];
        int n = 1;
        for (int i = 0; i < c->ndim; i++)
            n *= c->grid[i];
        if (n > lt_size)
            continue;
        ladle_partition *p = lt_partition(c->ndim, c->grid, 0);
        for (int t = 0; t < 2; t++) {
            ladle_dtype dt = t ? LADLE_F32 : LADLE_F64;
            ladle_op *dist = NULL, *seq = NULL;
            LT_OK(ladle_dist_adaptive_max_pool_create(p, c->xs, c->out, dt, lt_device(), 0,
                                                      &dist));
            LT_OK(ladle_adaptive_max_pool_create(c->ndim, c->xs, c->out, dt, lt_device(),
                                                 &seq));
            LT_ASSERT(ladle_op_kind_of(dist) == LADLE_OP_DIST_ADAPTIVE_MAX_POOL, "kind");
            char what[64];
            snprintf(what, sizeof what, "dist case %zu (%s)", k, t ? "f32" : "f64");
            lt_equivalent(dist, seq, 70 + (uint64_t)k, t ? 1e-6 : 1e-14, what);
            for (int kind = 1; kind < 3 && !t; kind++)
                am_dist_ties(dist, seq, c, kind, 90 + (uint64_t)k, 1e-14, what);
            ladle_op_destroy(&dist), ladle_op_destroy(&seq);
        }
        ladle_partition_destroy(&p);
    }
}
END_TEST

START_TEST(dist_refusals)
{
    int g2[2] = {1, 1}, g4[4] = {1, 1, 1, 1};
    int64_t xs[4] = {1, 1, 4, 4}, out[2] = {2, 2}, zero[2] = {2, 0};
    ladle_device dev = lt_device();
    ladle_partition *p = lt_partition(2, g2, 0);
    ladle_op *op = NULL;
    LT_FAILS_SAYING(ladle_dist_adaptive_max_pool_create(p, xs, out, LADLE_F64, dev, 0, &op),
                    LADLE_ERR_SHAPE, "x has 2 dimensions");
    ladle_partition_destroy(&p);
    p = lt_partition(4, g4, 0);
    LT_FAILS(ladle_dist_adaptive_max_pool_create(p, xs, zero, LADLE_F64, dev, 0, &op),
             LADLE_ERR_SHAPE);
    LT_FAILS_SAYING(
        ladle_dist_adaptive_max_pool_create(NULL, xs, out, LADLE_F64, dev, 0, &op),
        LADLE_ERR_NULL, "p_x");
    LT_FAILS_SAYING(
        ladle_dist_adaptive_max_pool_create(p, xs, NULL, LADLE_F64, dev, 0, &op),
        LADLE_ERR_NULL, "out_size");
    LT_FAILS(ladle_dist_adaptive_max_pool_create(p, xs, out, LADLE_I64, dev, 0, &op),
             LADLE_ERR_DTYPE);
    LT_FAILS_SAYING(
        ladle_dist_adaptive_max_pool_create(p, xs, out, LADLE_F64, dev, 0x40, &op),
        LADLE_ERR_ARG, "0x40");
    LT_ASSERT(op == NULL, "the handle stays untouched");
    ladle_partition_destroy(&p);
}
END_TEST

LT_SUITE("adaptive_max", "adaptive_max", 0, against_definition, finite_differences, by_hand,
         two_contexts, refusals, slot_tiles, distributed, dist_refusals)
