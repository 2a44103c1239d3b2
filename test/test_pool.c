/* Pooling against the definition computed here, finite differences, the
 * adjoint of average pooling, and bad input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

typedef struct pgeom {
    int nd, ceil_mode, include_pad;
    ladle_pool_kind kind;
    int64_t n, c, in[3], k[3], s[3], p[3], d[3], out[3];
} pgeom;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static int64_t pick(int64_t lo, int64_t hi)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (int64_t)(rng % (uint64_t)(hi - lo + 1));
}

static int64_t out_len(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d, int ceil_mode)
{
    double v = (double)(n + 2 * p - d * (k - 1) - 1) / (double)s;
    int64_t m = (int64_t)(ceil_mode ? ceil(v) : floor(v)) + 1;
    if (ceil_mode && (m - 1) * s >= n + p)
        m--;
    return m;
}

static pgeom random_pool(int nd, ladle_pool_kind kind)
{
    pgeom G;
    for (;;) {
        G.nd = nd;
        G.kind = kind;
        G.ceil_mode = (int)pick(0, 1);
        G.include_pad = (int)pick(0, 1);
        G.n = pick(1, 2);
        G.c = pick(1, 3);
        int ok = 1;
        for (int a = 0; a < 3; a++) {
            int used = a >= 3 - nd;
            G.in[a] = !used ? 1 : a == 2 ? pick(2, 40) : pick(2, 9); /* long rows: blocks */
            G.k[a] = used ? pick(1, 4) : 1;
            G.s[a] = used ? pick(1, 3) : 1;
            G.p[a] = used ? pick(0, G.k[a] / 2) : 0;
            G.d[a] = used && kind == LADLE_POOL_MAX ? pick(1, 2) : 1;
            ok &= G.in[a] + 2 * G.p[a] >= G.d[a] * (G.k[a] - 1) + 1;
            G.out[a] = ok ? out_len(G.in[a], G.k[a], G.s[a], G.p[a], G.d[a], G.ceil_mode) : 0;
        }
        if (ok)
            return G;
    }
}

static ladle_op *make(const pgeom *G, ladle_dtype dt)
{
    ladle_pool_desc d;
    ladle_pool_desc_init(&d, G->kind, G->nd, 1);
    d.ceil_mode = G->ceil_mode;
    d.count_include_pad = G->include_pad;
    int64_t xs[5] = {G->n, G->c};
    for (int i = 0; i < G->nd; i++) {
        int a = 3 - G->nd + i;
        d.kernel[i] = G->k[a];
        d.stride[i] = G->s[a];
        d.padding[i] = G->p[a];
        d.dilation[i] = G->d[a];
        xs[2 + i] = G->in[a];
    }
    ladle_op *op = NULL;
    LT_OK(ladle_pool_create(&d, xs, dt, &op));
    return op;
}

/* y and dx (for dy) by the definition. */
static void reference(const pgeom *G, const ladle_tensor *x, const ladle_tensor *dy, double *y,
                      double *dx)
{
    int64_t pin = G->in[0] * G->in[1] * G->in[2], pout = G->out[0] * G->out[1] * G->out[2];
    for (int64_t i = 0; i < G->n * G->c * pin; i++)
        dx[i] = 0;
    for (int64_t pl = 0; pl < G->n * G->c; pl++)
        for (int64_t q = 0; q < pout; q++) {
            int64_t o[3] = {q / (G->out[1] * G->out[2]), q / G->out[2] % G->out[1],
                            q % G->out[2]};
            double best = -INFINITY, sum = 0, full = 1, inside = 1;
            int64_t arg = -1;
            for (int a = 0; a < 3; a++) {
                int64_t st = o[a] * G->s[a] - G->p[a];
                int64_t en = st + G->k[a] < G->in[a] + G->p[a] ? st + G->k[a] : G->in[a] + G->p[a];
                full *= (double)(en - st);
                int64_t lo = st < 0 ? 0 : st, hi = en > G->in[a] ? G->in[a] : en;
                inside *= (double)(hi - lo);
            }
            double div = G->include_pad ? full : inside;
            for (int64_t t = 0; t < G->k[0] * G->k[1] * G->k[2]; t++) {
                int64_t k[3] = {t / (G->k[1] * G->k[2]), t / G->k[2] % G->k[1], t % G->k[2]};
                int64_t i[3], okk = 1;
                for (int a = 0; a < 3; a++) {
                    i[a] = o[a] * G->s[a] - G->p[a] + k[a] * G->d[a];
                    okk &= i[a] >= 0 && i[a] < G->in[a];
                }
                if (!okk)
                    continue;
                int64_t idx = pl * pin + (i[0] * G->in[1] + i[1]) * G->in[2] + i[2];
                double v = lt_get(x, idx);
                sum += v;
                if (v > best)
                    best = v, arg = idx;
            }
            double g = lt_get(dy, pl * pout + q);
            if (G->kind == LADLE_POOL_MAX) {
                y[pl * pout + q] = best;
                if (arg >= 0)
                    dx[arg] += g;
            } else {
                y[pl * pout + q] = sum / div;
                for (int64_t t = 0; t < G->k[0] * G->k[1] * G->k[2]; t++) {
                    int64_t k[3] = {t / (G->k[1] * G->k[2]), t / G->k[2] % G->k[1],
                                    t % G->k[2]};
                    int64_t i[3], okk = 1;
                    for (int a = 0; a < 3; a++) {
                        i[a] = o[a] * G->s[a] - G->p[a] + k[a];
                        okk &= i[a] >= 0 && i[a] < G->in[a];
                    }
                    if (okk)
                        dx[pl * pin + (i[0] * G->in[1] + i[1]) * G->in[2] + i[2]] += g / div;
                }
            }
        }
}

START_TEST(against_definition)
{
    for (int trial = 0; trial < 200; trial++) {
        ladle_pool_kind kind = trial % 2 ? LADLE_POOL_AVG : LADLE_POOL_MAX;
        ladle_dtype dt = trial / 2 % 2 ? LADLE_F32 : LADLE_F64;
        double tol = dt == LADLE_F32 ? 1e-5 : 1e-14;
        pgeom G = random_pool(trial < 160 ? 1 + trial % 3 : 2, kind);
        /* the last 40: 2x2 windows with stride 2 (the direct kernels when the
         * extents are even or the mode floors; the general ones otherwise) */
        for (int a = 1; trial >= 160 && a < 3; a++) {
            G.k[a] = G.s[a] = 2;
            G.p[a] = 0;
            G.d[a] = 1;
            G.out[a] = out_len(G.in[a], 2, 2, 0, 1, G.ceil_mode);
        }
        ladle_op *op = make(&G, dt);
        int nd;
        int64_t ys[5];
        ladle_op_y_shape(op, &nd, ys);
        int shape_ok = 1;
        for (int i = 0; i < G.nd; i++)
            shape_ok &= ys[2 + i] == G.out[3 - G.nd + i];
        LT_ASSERT(shape_ok, "output shape (ceil %d)", G.ceil_mode);
        ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
        ladle_tensor *dy = lt_op_tensor(op, 1), *dx = lt_op_tensor(op, 0);
        LT_OK(ladle_tensor_fill_random(x, 2, (uint64_t)trial));
        LT_OK(ladle_tensor_fill_random(dy, 3, (uint64_t)trial));
        ladle_ctx *ctx = NULL;
        LT_OK(ladle_ctx_create(op, &ctx));
        LT_OK(ladle_layer_forward(op, ctx, x, y));
        LT_OK(ladle_layer_backward(op, ctx, dy, dx));
        double *yr = malloc(sizeof(double) * (size_t)ladle_tensor_numel(y));
        double *dxr = malloc(sizeof(double) * (size_t)ladle_tensor_numel(x));
        reference(&G, x, dy, yr, dxr);
        double ey = 0, ex = 0;
        for (int64_t i = 0; i < ladle_tensor_numel(y); i++)
            ey = fmax(ey, fabs(lt_get(y, i) - yr[i]));
        for (int64_t i = 0; i < ladle_tensor_numel(x); i++)
            ex = fmax(ex, fabs(lt_get(dx, i) - dxr[i]));
        LT_ASSERT(ey < tol && ex < tol, "%s pool %s nd %d ceil %d pad-count %d: y %.1e dx %.1e",
                  kind == LADLE_POOL_MAX ? "max" : "avg", ladle_dtype_name(dt), G.nd, G.ceil_mode,
                  G.include_pad, ey, ex);
        /* without a ctx (inference) the values are the same */
        ladle_tensor *y2 = lt_op_tensor(op, 1);
        LT_OK(ladle_layer_forward(op, NULL, x, y2));
        double e2 = 0;
        for (int64_t i = 0; i < ladle_tensor_numel(y); i++)
            e2 = fmax(e2, fabs(lt_get(y2, i) - lt_get(y, i)));
        LT_ASSERT(e2 == 0, "forward without a ctx differs by %.1e", e2);
        ladle_tensor_destroy(&y2);
        if (trial < 24 && dt == LADLE_F64) {
            ladle_gradient_result r;
            LT_OK(ladle_gradient_test(op, 4, 100, &r));
            LT_ASSERT(r.input_error < 1e-6, "pool gradient %.1e", r.input_error);
        }
        if (kind == LADLE_POOL_AVG && dt == LADLE_F64)
            lt_adjoint_ok(op, 6, "average pooling");
        free(yr);
        free(dxr);
        ladle_ctx_destroy(&ctx);
        ladle_tensor_destroy(&x);
        ladle_tensor_destroy(&y);
        ladle_tensor_destroy(&dx);
        ladle_tensor_destroy(&dy);
        ladle_op_destroy(&op);
    }
}
END_TEST

START_TEST(global_average)
{
    int64_t xs[4] = {2, 3, 4, 5};
    ladle_op *op = NULL;
    LT_OK(ladle_global_avg_pool_create(4, xs, LADLE_F64, &op));
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    LT_ASSERT(ladle_tensor_ndim(y) == 2 && ladle_tensor_shape(y)[1] == 3, "N x C");
    LT_OK(ladle_tensor_fill_random(x, 1, 0));
    LT_OK(ladle_op_forward(op, x, y));
    int ok = 1;
    for (int pl = 0; pl < 6; pl++) {
        double s = 0;
        for (int i = 0; i < 20; i++)
            s += lt_get(x, pl * 20 + i);
        ok &= fabs(lt_get(y, pl) - s / 20) < 1e-15;
    }
    LT_ASSERT(ok, "plane means");
    lt_adjoint_ok(op, 2, "global average pooling");
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&y);
    ladle_op_destroy(&op);
}
END_TEST

START_TEST(bad_input)
{
    ladle_pool_desc d;
    int64_t xs[4] = {1, 1, 4, 4};
    ladle_op *op = NULL;
    ladle_pool_desc_init(&d, LADLE_POOL_MAX, 2, 2);
    d.padding[0] = 2; /* more than half the kernel */
    LT_FAILS(ladle_pool_create(&d, xs, LADLE_F32, &op), LADLE_ERR_ARG);
    ladle_pool_desc_init(&d, LADLE_POOL_AVG, 2, 2);
    d.dilation[0] = 2;
    LT_FAILS(ladle_pool_create(&d, xs, LADLE_F32, &op), LADLE_ERR_ARG);
    ladle_pool_desc_init(&d, LADLE_POOL_MAX, 2, 5);
    LT_FAILS(ladle_pool_create(&d, xs, LADLE_F32, &op), LADLE_ERR_SHAPE);
    ladle_pool_desc_init(&d, (ladle_pool_kind)3, 2, 2);
    LT_FAILS(ladle_pool_create(&d, xs, LADLE_F32, &op), LADLE_ERR_ARG);
    ladle_pool_desc_init(&d, LADLE_POOL_MAX, 2, 2);
    LT_OK(ladle_pool_create(&d, xs, LADLE_F32, &op));
    ladle_tensor *y = lt_op_tensor(op, 1), *x = lt_op_tensor(op, 0);
    LT_FAILS(ladle_op_adjoint(op, y, x), LADLE_ERR_UNSUPPORTED); /* max is not linear */
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&y);
    ladle_op_destroy(&op);
}
END_TEST

/* The 2 x 2, stride 2 kernels on ties and NaN, by hand: the first maximum
 * in window order wins, and a NaN wins and stays. Three kinds of window,
 * repeated along rows of 11 and 3 outputs (the vector and scalar paths). */
START_TEST(max2_ties_nan)
{
    static const double win[3][4] = {{1, 1, 1, 1}, {0, 2, 2, 0}, {3, NAN, 5, 1}};
    static const int at[3] = {0, 1, 1}; /* the winner: row-major tap */
    for (int dt = 0; dt < 2; dt++)
        for (int wide = 0; wide < 2; wide++) {
            ladle_dtype dtype = dt ? LADLE_F64 : LADLE_F32;
            int64_t W2 = wide ? 11 : 3, xs[4] = {1, 1, 2, 2 * W2}, ys[4] = {1, 1, 1, W2};
            ladle_pool_desc d;
            ladle_pool_desc_init(&d, LADLE_POOL_MAX, 2, 2);
            ladle_op *op = NULL;
            ladle_ctx *ctx = NULL;
            LT_OK(ladle_pool_create(&d, xs, dtype, &op));
            LT_OK(ladle_ctx_create(op, &ctx));
            ladle_tensor *x = lt_tensor(dtype, 4, xs), *dx = lt_tensor(dtype, 4, xs);
            ladle_tensor *y = lt_tensor(dtype, 4, ys), *dy = lt_tensor(dtype, 4, ys);
            for (int64_t c = 0; c < W2; c++) {
                const double *w = win[c % 3];
                lt_set(x, 2 * c, w[0]), lt_set(x, 2 * c + 1, w[1]);
                lt_set(x, 2 * W2 + 2 * c, w[2]), lt_set(x, 2 * W2 + 2 * c + 1, w[3]);
                lt_set(dy, c, 10.0 * (double)(c + 1));
            }
            LT_OK(ladle_layer_forward(op, ctx, x, y));
            LT_OK(ladle_layer_backward(op, ctx, dy, dx));
            int ok = 1;
            for (int64_t c = 0; c < W2; c++) {
                int k = (int)(c % 3);
                double want = k == 0 ? 1 : k == 1 ? 2 : NAN, got = lt_get(y, c);
                ok &= k == 2 ? isnan(got) : got == want;
                for (int t = 0; t < 4; t++) {
                    int64_t i = (t / 2) * 2 * W2 + 2 * c + t % 2;
                    ok &= lt_get(dx, i) == (t == at[k] ? 10.0 * (double)(c + 1) : 0.0);
                }
            }
            LT_ASSERT(ok, "%s, %lld outputs: ties or NaN placed wrongly", ladle_dtype_name(dtype),
                      (long long)W2);
            ladle_tensor_destroy(&x), ladle_tensor_destroy(&dx);
            ladle_tensor_destroy(&y), ladle_tensor_destroy(&dy);
            ladle_ctx_destroy(&ctx);
            ladle_op_destroy(&op);
        }
}
END_TEST

Suite *pool_suite(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");
    tcase_add_test(tc, against_definition);
    tcase_add_test(tc, global_average);
    tcase_add_test(tc, bad_input);
    tcase_add_test(tc, max2_ties_nan);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv) { return lt_main(argc, argv, pool_suite); }
