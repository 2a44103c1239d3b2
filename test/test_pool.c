/* Pooling against the definition computed here, finite differences, the
 * adjoint of average pooling, and bad input. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "layers/sequential/pool_impl.h"
#include "src/backends/cpu/pool_impl.h"

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
    LT_OK(ladle_pool_create(&d, xs, dt, lt_device(), &op));
    return op;
}

/* y and dx (for dy) by the definition. */
static void reference(const pgeom *G, const ladle_tensor *xt, const ladle_tensor *dyt,
                      double *y, double *dx)
{
    double *x = lt_values(xt), *dy = lt_values(dyt);
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
                double v = x[idx];
                sum += v;
                /* the first valid tap, then a larger one or the first NaN */
                if (arg < 0 || v > best || (isnan(v) && !isnan(best)))
                    best = v, arg = idx;
            }
            double g = dy[pl * pout + q];
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
    free(x), free(dy);
}

/* Equal, or both NaN, or within tol. */
static int close_to(double got, double want, double tol)
{
    return got == want || (isnan(got) && isnan(want)) || fabs(got - want) < tol;
}

/* x: uniform (RANDOM), the integers 0 to 2 (TIES: most windows hold their
 * maximum twice or more), or those with a NaN, -inf or +inf in about one
 * input in 16 (SPECIAL). */
enum { RANDOM, TIES, SPECIAL };
static void fill_x(ladle_tensor *x, int data, uint64_t seed)
{
    LT_OK(ladle_tensor_fill_random(x, 2, seed));
    static const double special[3] = {NAN, -INFINITY, INFINITY};
    if (data == RANDOM)
        return;
    double *xv = lt_values(x);
    for (int64_t i = 0; i < ladle_tensor_numel(x); i++) {
        double v = floor(xv[i] + 2); /* fill_random is uniform in [-2, 2) */
        v = v < 0 ? 0 : v > 2 ? 2 : v;
        if (data == SPECIAL && pick(0, 15) == 0)
            v = special[pick(0, 2)];
        xv[i] = v;
    }
    lt_store(x, xv);
    free(xv);
}

/* Forward and backward of one geometry against the reference, with and
 * without a ctx; finite differences (GRAD) and the dot-product test for
 * average pooling. */
static void check_geometry(const pgeom *G, ladle_dtype dt, int data, uint64_t seed, int grad)
{
    ladle_pool_kind kind = G->kind;
    double tol = dt == LADLE_F32 ? 1e-5 : 1e-14;
    ladle_op *op = make(G, dt);
    /* the direct max kernels narrow their codes by conversion where the
     * x86-64-v4 copies run, by a byte shuffle elsewhere: half the seeds take
     * the shuffle here too (bit 2: the low two pick the kind and dtype); the
     * flag is in the CPU's plan at the start of the op's workspace, device
     * memory: written through the op's backend (the CPU's plan: on the
     * cpu and guarded devices; a GPU's workspace is its own) */
    if (seed >> 2 & 1 && lt_device() != LADLE_CUDA) {
        const int zero = 0;
        char *ws = ((pool *)op->impl)->ws;
        LT_OK(op->be->fn->to_device(op->be, sizeof zero, &zero, ws + offsetof(cpu_pool, narrow)));
    }
    int nd;
    int64_t ys[5];
    ladle_op_y_shape(op, &nd, ys);
    int shape_ok = 1;
    for (int i = 0; i < G->nd; i++)
        shape_ok &= ys[2 + i] == G->out[3 - G->nd + i];
    LT_ASSERT(shape_ok, "output shape (ceil %d)", G->ceil_mode);
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    ladle_tensor *dy = lt_op_tensor(op, 1), *dx = lt_op_tensor(op, 0);
    fill_x(x, data, seed);
    LT_OK(ladle_tensor_fill_random(dy, 3, seed));
    ladle_ctx *ctx = lt_forward_backward(op, x, y, dy, dx);
    double *yr = malloc(sizeof(double) * (size_t)ladle_tensor_numel(y));
    double *dxr = malloc(sizeof(double) * (size_t)ladle_tensor_numel(x));
    reference(G, x, dy, yr, dxr);
    int oky = 1, okx = 1;
    double *yv = lt_values(y), *dxv = lt_values(dx);
    for (int64_t i = 0; i < ladle_tensor_numel(y); i++)
        oky &= close_to(yv[i], yr[i], tol);
    for (int64_t i = 0; i < ladle_tensor_numel(x); i++)
        okx &= close_to(dxv[i], dxr[i], tol);
    LT_ASSERT(oky && okx,
              "%s pool %s data %d, %lldx%lldx%lldx%lldx%lld k %lldx%lldx%lld s %lldx%lldx%lld "
              "p %lldx%lldx%lld d %lldx%lldx%lld ceil %d pad-count %d: y %s, dx %s",
              kind == LADLE_POOL_MAX ? "max" : "avg", ladle_dtype_name(dt), data,
              (long long)G->n, (long long)G->c, (long long)G->in[0], (long long)G->in[1],
              (long long)G->in[2], (long long)G->k[0], (long long)G->k[1], (long long)G->k[2],
              (long long)G->s[0], (long long)G->s[1], (long long)G->s[2], (long long)G->p[0],
              (long long)G->p[1], (long long)G->p[2], (long long)G->d[0], (long long)G->d[1],
              (long long)G->d[2], G->ceil_mode, G->include_pad, oky ? "ok" : "WRONG",
              okx ? "ok" : "WRONG");
    /* without a ctx (inference) the values are the same */
    ladle_tensor *y2 = lt_op_tensor(op, 1);
    LT_OK(ladle_layer_forward(op, NULL, x, y2));
    int same = 1;
    double *y2v = lt_values(y2);
    for (int64_t i = 0; i < ladle_tensor_numel(y); i++)
        same &= close_to(y2v[i], yv[i], 0);
    free(y2v), free(yv), free(dxv);
    LT_ASSERT(same, "forward without a ctx differs");
    ladle_tensor_destroy(&y2);
    if (grad) {
        ladle_gradient_result r;
        LT_OK(ladle_gradient_test(op, 4, 100, &r));
        LT_ASSERT(r.input_error < 1e-6, "pool gradient %.1e", r.input_error);
    }
    if (kind == LADLE_POOL_AVG && dt == LADLE_F64)
        lt_adjoint_ok(op, 6, "average pooling");
    free(yr);
    free(dxr);
    ladle_ctx_destroy(&ctx);
    LT_DESTROY(&x, &y, &dx, &dy);
    ladle_op_destroy(&op);
}

/* The pool of d over x of shape xs in dtype, and a ctx of it. */
static ladle_op *with_ctx(const ladle_pool_desc *d, const int64_t *xs, ladle_dtype dtype,
                          ladle_ctx **ctx)
{
    ladle_op *op = NULL;
    LT_OK(ladle_pool_create(d, xs, dtype, lt_device(), &op));
    LT_OK(ladle_ctx_create(op, ctx));
    return op;
}

START_TEST(against_definition)
{
    for (int trial = 0; trial < 200; trial++) {
        ladle_pool_kind kind = trial % 2 ? LADLE_POOL_AVG : LADLE_POOL_MAX;
        ladle_dtype dt = trial / 2 % 2 ? LADLE_F32 : LADLE_F64;
        pgeom G = random_pool(trial < 160 ? 1 + trial % 3 : 2, kind);
        /* the last 40: 2x2 windows with stride 2 (the direct kernels when the
         * extents are even or the mode floors; the general ones otherwise) */
        for (int a = 1; trial >= 160 && a < 3; a++) {
            G.k[a] = G.s[a] = 2;
            G.p[a] = 0;
            G.d[a] = 1;
            G.out[a] = out_len(G.in[a], 2, 2, 0, 1, G.ceil_mode);
        }
        check_geometry(&G, dt, RANDOM, (uint64_t)trial, trial < 24 && dt == LADLE_F64);
    }
}
END_TEST

/* 2-d 3x3 windows with stride 1 or 2 and padding 0 or 1 along each
 * dimension (the direct kernels), extents from 1 (one valid tap) to rows of
 * 40 (vector blocks and both edges) and planes of 48 rows (several bands). */
static pgeom random_k3(ladle_pool_kind kind)
{
    pgeom G;
    for (;;) {
        G.nd = 2;
        G.kind = kind;
        G.ceil_mode = (int)pick(0, 1);
        G.include_pad = (int)pick(0, 1);
        G.n = pick(1, 2);
        G.c = pick(1, 3);
        G.in[0] = G.k[0] = G.s[0] = G.d[0] = G.out[0] = 1;
        G.p[0] = 0;
        int ok = 1;
        for (int a = 1; a < 3; a++) {
            int64_t kind = pick(0, 5); /* short, long rows; few, many rows (bands) */
            G.in[a] = kind < 2 ? pick(1, 4) : a == 2 ? pick(5, 40) : kind == 5 ? pick(10, 48) : pick(5, 9);
            G.k[a] = 3;
            G.s[a] = pick(1, 2);
            G.p[a] = pick(0, 1);
            G.d[a] = 1;
            ok &= G.in[a] + 2 * G.p[a] >= 3;
            G.out[a] = ok ? out_len(G.in[a], 3, G.s[a], G.p[a], 1, G.ceil_mode) : 0;
        }
        if (ok)
            return G;
    }
}

/* The 3x3 direct kernels against the definition: random values, then
 * values full of ties (the first maximum in window order takes the
 * gradient), then ties with NaN and infinities (a NaN wins and stays). */
START_TEST(k3_against_definition)
{
    for (int trial = 0; trial < 240; trial++) {
        ladle_pool_kind kind = trial % 2 ? LADLE_POOL_AVG : LADLE_POOL_MAX;
        ladle_dtype dt = trial / 2 % 2 ? LADLE_F32 : LADLE_F64;
        int data = trial / 4 % 3;
        if (kind == LADLE_POOL_AVG && data == SPECIAL)
            data = TIES; /* a NaN only spreads through a sum */
        pgeom G = random_k3(kind);
        check_geometry(&G, dt, data, 1000 + (uint64_t)trial,
                       trial < 48 && data == RANDOM && dt == LADLE_F64);
    }
}
END_TEST

START_TEST(global_average)
{
    int64_t xs[4] = {2, 3, 4, 5};
    ladle_op *op = NULL;
    LT_OK(ladle_global_avg_pool_create(4, xs, LADLE_F64, lt_device(), &op));
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
    LT_FAILS(ladle_pool_create(&d, xs, LADLE_F32, lt_device(), &op), LADLE_ERR_ARG);
    ladle_pool_desc_init(&d, LADLE_POOL_AVG, 2, 2);
    d.dilation[0] = 2;
    LT_FAILS(ladle_pool_create(&d, xs, LADLE_F32, lt_device(), &op), LADLE_ERR_ARG);
    ladle_pool_desc_init(&d, LADLE_POOL_MAX, 2, 5);
    LT_FAILS(ladle_pool_create(&d, xs, LADLE_F32, lt_device(), &op), LADLE_ERR_SHAPE);
    ladle_pool_desc_init(&d, (ladle_pool_kind)3, 2, 2);
    LT_FAILS(ladle_pool_create(&d, xs, LADLE_F32, lt_device(), &op), LADLE_ERR_ARG);
    ladle_pool_desc_init(&d, LADLE_POOL_MAX, 2, 2);
    LT_OK(ladle_pool_create(&d, xs, LADLE_F32, lt_device(), &op));
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
            ladle_ctx *ctx = NULL;
            ladle_op *op = with_ctx(&d, xs, dtype, &ctx);
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

/* The 2 x 2, stride 2 max kernels on rows narrower than a vector block (1
 * to 9 outputs: LeNet's second pooling has 5), whose blocks run on into the
 * next rows and planes and whose last rows go one output at a time: every
 * extent of 2 to 19 columns (odd ones leave a column), 2 to 7 rows, 1 to 6
 * planes, random values, ties and NaN, against the definition (y and dx,
 * with and without a ctx). */
START_TEST(max2_narrow_rows)
{
    for (int trial = 0; trial < 72; trial++) {
        pgeom G;
        G.nd = 2;
        G.kind = LADLE_POOL_MAX;
        G.ceil_mode = 0;
        G.include_pad = 1;
        G.n = 1 + trial % 2;
        G.c = 1 + trial / 2 % 3;
        G.in[0] = G.k[0] = G.s[0] = G.d[0] = G.out[0] = 1;
        G.p[0] = 0;
        G.in[1] = 2 + (trial / 18 * 5 + trial) % 6;
        G.in[2] = 2 + trial % 18;
        for (int a = 1; a < 3; a++) {
            G.k[a] = G.s[a] = 2;
            G.p[a] = 0;
            G.d[a] = 1;
            G.out[a] = out_len(G.in[a], 2, 2, 0, 1, 0);
        }
        ladle_dtype dt = trial / 6 % 2 ? LADLE_F32 : LADLE_F64;
        check_geometry(&G, dt, trial % 3, 1000 + (uint64_t)trial, 0);
    }
}
END_TEST

/* The 3x3 kernels on ties and NaN, by hand. A plane is three rows whose
 * even columns hold E[r] and odd columns O[r], so a window row reads
 * (E O E) when the window starts at an even column, (O E O) at an odd one,
 * and (- E O) when it starts at column -1. Winners, as (row, tap) with tap
 * 0 to 2 from the window's first column, worked out from the rule: the
 * first maximum in row-major window order, a NaN wins and stays.
 *   0  all 0                         (0,0) (0,0) (0,1)  y 0
 *   1  E0 = 5, O1 = 5                (0,0) (0,1) (0,1)  y 5
 *   2  O0 = 5, E1 = 5                (0,1) (0,0) (0,2)  y 5: row 0 before row 1's earlier column
 *   3  O0 = 9, E1 = NaN              (1,0) (1,1) (1,1)  y NaN: after a larger value
 *   4  E0 = O0 = NaN                 (0,0) (0,0) (0,1)  y NaN: the first of many
 *   5  all -inf                      (0,0) (0,0) (0,1)  y -inf
 *   6  E0 = 7, O1 = 100, E2 = NaN    (2,0) (2,1) (2,1)  y NaN
 * No winner is a third tap, so a window cut short on the right (its third
 * tap past the end) has the same one. */
START_TEST(max3_ties_nan)
{
    static const double E[7][3] = {{0, 0, 0}, {5, 0, 0}, {0, 5, 0}, {0, NAN, 0},
                                   {NAN, 0, 0}, {-INFINITY, -INFINITY, -INFINITY},
                                   {7, 0, NAN}};
    static const double O[7][3] = {{0, 0, 0}, {0, 5, 0}, {5, 0, 0}, {9, 0, 0},
                                   {NAN, 0, 0}, {-INFINITY, -INFINITY, -INFINITY},
                                   {0, 100, 0}};
    static const double want[7] = {0, 5, 5, NAN, NAN, -INFINITY, NAN};
    static const int win[7][3][2] = {{{0, 0}, {0, 0}, {0, 1}}, {{0, 0}, {0, 1}, {0, 1}},
                                     {{0, 1}, {0, 0}, {0, 2}}, {{1, 0}, {1, 1}, {1, 1}},
                                     {{0, 0}, {0, 0}, {0, 1}}, {{0, 0}, {0, 0}, {0, 1}},
                                     {{2, 0}, {2, 1}, {2, 1}}};
    /* stride, padding, width, ceil mode: rows of 11 or 12 outputs (the vector
     * blocks and their edges) and of 3 (one by one) */
    static const int cfg[10][4] = {{2, 0, 23, 0}, {2, 0, 24, 1}, {2, 1, 22, 0}, {2, 1, 21, 0},
                                   {1, 0, 14, 0}, {1, 1, 12, 0}, {2, 1, 5, 0},  {1, 1, 3, 0},
                                   {2, 0, 7, 0},  {1, 0, 5, 0}};
    for (int dt = 0; dt < 2; dt++)
        for (int k = 0; k < 10; k++) {
            ladle_dtype dtype = dt ? LADLE_F64 : LADLE_F32;
            int64_t s = cfg[k][0], p = cfg[k][1], W = cfg[k][2];
            int64_t W2 = out_len(W, 3, s, p, 1, cfg[k][3]);
            int64_t xs[4] = {1, 7, 3, W}, ys[4] = {1, 7, 1, W2};
            ladle_pool_desc d;
            ladle_pool_desc_init(&d, LADLE_POOL_MAX, 2, 3);
            d.stride[0] = 1;
            d.stride[1] = s;
            d.padding[1] = p;
            d.ceil_mode = cfg[k][3];
            ladle_ctx *ctx = NULL;
            ladle_op *op = with_ctx(&d, xs, dtype, &ctx);
            ladle_tensor *x = lt_tensor(dtype, 4, xs), *dx = lt_tensor(dtype, 4, xs);
            ladle_tensor *y = lt_tensor(dtype, 4, ys), *dy = lt_tensor(dtype, 4, ys);
            double *dxw = calloc((size_t)(7 * 3 * W), sizeof(double));
            int ok = 1;
            for (int c = 0; c < 7; c++) {
                for (int64_t i = 0; i < 3 * W; i++)
                    lt_set(x, c * 3 * W + i, i % W % 2 ? O[c][i / W] : E[c][i / W]);
                for (int64_t o = 0; o < W2; o++) {
                    int64_t b = o * s - p, kind = b < 0 ? 2 : b % 2;
                    const int *w = win[c][kind];
                    ok &= b + 1 < W; /* the test's own premise: two taps or more */
                    lt_set(dy, c * W2 + o, (double)(100 * c + o + 1));
                    dxw[c * 3 * W + w[0] * W + b + w[1]] += (double)(100 * c + o + 1);
                }
            }
            LT_OK(ladle_layer_forward(op, ctx, x, y));
            LT_OK(ladle_layer_backward(op, ctx, dy, dx));
            for (int c = 0; c < 7; c++)
                for (int64_t o = 0; o < W2; o++)
                    ok &= close_to(lt_get(y, c * W2 + o), want[c], 0);
            for (int64_t i = 0; i < 7 * 3 * W; i++)
                ok &= lt_get(dx, i) == dxw[i];
            LT_ASSERT(ok, "%s, stride %lld padding %lld width %lld ceil %d: ties or NaN placed "
                      "wrongly", ladle_dtype_name(dtype), (long long)s, (long long)p,
                      (long long)W, cfg[k][3]);
            free(dxw);
            ladle_tensor_destroy(&x), ladle_tensor_destroy(&dx);
            ladle_tensor_destroy(&y), ladle_tensor_destroy(&dy);
            ladle_ctx_destroy(&ctx);
            ladle_op_destroy(&op);
        }
}
END_TEST

/* ---- adaptive average pooling ---- */

/* The window of output o: [floor(o L / O), ceil((o + 1) L / O)), here in
 * floating point (exact for these small extents), apart from the layer's
 * integer arithmetic. */
static void ad_window(int64_t in, int64_t out, int64_t o, int64_t *b, int64_t *e)
{
    *b = (int64_t)floor((double)o * (double)in / (double)out);
    *e = (int64_t)ceil((double)(o + 1) * (double)in / (double)out);
}

/* y of x (batch n, shape xs, outputs os, 1 to 3 spatial dims as 3) by
 * loops over each window. */
static void ad_reference(const ladle_tensor *xt, int ndim, const int64_t *xs,
                         const int64_t *os, int64_t n, double *y)
{
    double *x = lt_values(xt);
    int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
    for (int a = 0; a < ndim - 2; a++) {
        in[3 - (ndim - 2) + a] = xs[2 + a];
        out[3 - (ndim - 2) + a] = os[a];
    }
    int64_t pin = in[0] * in[1] * in[2], pout = out[0] * out[1] * out[2], k = 0;
    for (int64_t p = 0; p < n * xs[1]; p++)
        for (int64_t a = 0; a < out[0]; a++)
            for (int64_t b = 0; b < out[1]; b++)
                for (int64_t c = 0; c < out[2]; c++, k++) {
                    int64_t a0, a1, b0, b1, c0, c1;
                    ad_window(in[0], out[0], a, &a0, &a1);
                    ad_window(in[1], out[1], b, &b0, &b1);
                    ad_window(in[2], out[2], c, &c0, &c1);
                    double sum = 0;
                    for (int64_t i = a0; i < a1; i++)
                        for (int64_t j = b0; j < b1; j++)
                            for (int64_t l = c0; l < c1; l++)
                                sum += x[p * pin + (i * in[1] + j) * in[2] + l];
                    y[k] = sum / (double)((a1 - a0) * (b1 - b0) * (c1 - c0));
                }
    (void)pout;
    free(x);
}

START_TEST(adaptive_average)
{
    static const struct {
        int ndim;
        int64_t x[5], out[3];
    } cases[] = {
        {3, {2, 3, 7}, {5}},         {3, {1, 2, 5}, {3}},          {3, {2, 1, 4}, {9}},
        {4, {2, 2, 7, 5}, {3, 4}},   {4, {2, 1, 3, 4}, {5, 6}},    {4, {2, 2, 8, 6}, {4, 3}},
        {4, {1, 1, 6, 6}, {1, 1}},   {5, {1, 2, 5, 4, 6}, {2, 3, 4}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int t = 0; t < 2; t++) {
            ladle_dtype dt = t ? LADLE_F32 : LADLE_F64;
            int nd = cases[k].ndim;
            ladle_op *op = NULL;
            LT_OK(ladle_adaptive_avg_pool_create(nd, cases[k].x, cases[k].out, dt, lt_device(),
                                                 &op));
            LT_ASSERT(ladle_op_kind_of(op) == LADLE_OP_ADAPTIVE_POOL, "case %zu: kind", k);
            /* the full batch and a smaller one */
            for (int64_t n = cases[k].x[0]; n >= 1; n -= cases[k].x[0] > 1 ? 1 : 2) {
                int64_t xs[5], ys[5];
                for (int i = 0; i < nd; i++) {
                    xs[i] = i == 0 ? n : cases[k].x[i];
                    ys[i] = i == 0 ? n : i == 1 ? cases[k].x[1] : cases[k].out[i - 2];
                }
                ladle_tensor *x = lt_tensor(dt, nd, xs), *y = lt_tensor(dt, nd, ys);
                ladle_tensor *dy = lt_tensor(dt, nd, ys), *dx = lt_tensor(dt, nd, xs);
                ladle_tensor *yp = lt_tensor(dt, nd, ys);
                LT_OK(ladle_tensor_fill_random(x, 3, 10 + k));
                LT_OK(ladle_tensor_fill_random(dy, 3, 20 + k));
                ladle_ctx *ctx = lt_forward_backward(op, x, y, dy, dx);
                ladle_ctx_destroy(&ctx);
                int64_t ny = ladle_tensor_numel(y);
                double *want = calloc((size_t)ny, sizeof *want), worst = 0, worst_d = 0;
                ad_reference(x, nd, cases[k].x, cases[k].out, n, want);
                double *yv = lt_values(y), *dyv = lt_values(dy), *dxv = lt_values(dx);
                for (int64_t i = 0; i < ny; i++)
                    worst = fmax(worst, fabs(yv[i] - want[i]) / (1 + fabs(want[i])));
                free(want);
                /* finite differences of sum dy y (exact for a linear map, up to rounding) */
                double h = t ? 1e-2 : 1e-6;
                for (int64_t i = 0; i < ladle_tensor_numel(x); i++) {
                    double v = lt_get(x, i), lp = 0, lm = 0, *ypv;
                    lt_set(x, i, v + h);
                    LT_OK(ladle_op_forward(op, x, yp));
                    ypv = lt_values(yp);
                    for (int64_t j = 0; j < ny; j++)
                        lp += dyv[j] * ypv[j];
                    free(ypv);
                    lt_set(x, i, v - h);
                    LT_OK(ladle_op_forward(op, x, yp));
                    ypv = lt_values(yp);
                    for (int64_t j = 0; j < ny; j++)
                        lm += dyv[j] * ypv[j];
                    free(ypv);
                    lt_set(x, i, v);
                    double fd = (lp - lm) / (2 * h);
                    worst_d = fmax(worst_d, fabs(fd - dxv[i]) / (1 + fabs(fd)));
                }
                free(yv), free(dyv), free(dxv);
                double tol = t ? 1e-6 : 1e-15, tol_d = t ? 1e-3 : 1e-8;
                LT_ASSERT(worst < tol && worst_d < tol_d,
                          "adaptive case %zu (%s, batch %lld): values %.1e, gradient %.1e", k,
                          t ? "f32" : "f64", (long long)n, worst, worst_d);
                ladle_tensor_destroy(&x), ladle_tensor_destroy(&y), ladle_tensor_destroy(&yp);
                ladle_tensor_destroy(&dy), ladle_tensor_destroy(&dx);
            }
            if (dt == LADLE_F64)
                lt_adjoint_ok(op, 30 + k, "adaptive average pooling");
            ladle_op_destroy(&op);
        }
}
END_TEST

/* Worked out by hand: 5 inputs 0..4 to 3 outputs read [0, 2), [1, 4),
 * [3, 5): 0.5, 2, 3.5; and 2 inputs to 3 outputs read [0, 1), [0, 2),
 * [1, 2). Bad sizes. */
START_TEST(adaptive_by_hand)
{
    int64_t xs[3] = {1, 1, 5}, three[1] = {3}, ys[3] = {1, 1, 3}, x2[3] = {1, 1, 2};
    ladle_op *op = NULL;
    LT_OK(ladle_adaptive_avg_pool_create(3, xs, three, LADLE_F64, lt_device(), &op));
    ladle_tensor *x = lt_tensor(LADLE_F64, 3, xs), *y = lt_tensor(LADLE_F64, 3, ys);
    for (int i = 0; i < 5; i++)
        lt_set(x, i, i);
    LT_OK(ladle_op_forward(op, x, y));
    LT_ASSERT(lt_get(y, 0) == 0.5 && lt_get(y, 1) == 2.0 && lt_get(y, 2) == 3.5,
              "5 to 3: %g %g %g", lt_get(y, 0), lt_get(y, 1), lt_get(y, 2));
    ladle_op_destroy(&op);
    ladle_tensor_destroy(&x);
    LT_OK(ladle_adaptive_avg_pool_create(3, x2, three, LADLE_F64, lt_device(), &op));
    x = lt_tensor(LADLE_F64, 3, x2);
    lt_set(x, 0, 2), lt_set(x, 1, 6);
    LT_OK(ladle_op_forward(op, x, y));
    LT_ASSERT(lt_get(y, 0) == 2 && lt_get(y, 1) == 4 && lt_get(y, 2) == 6, "2 to 3: %g %g %g",
              lt_get(y, 0), lt_get(y, 1), lt_get(y, 2));
    ladle_op_destroy(&op);
    int64_t zero[1] = {0}, x6[6] = {1, 1, 2, 2, 2, 2};
    LT_FAILS(ladle_adaptive_avg_pool_create(3, xs, zero, LADLE_F64, lt_device(), &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_adaptive_avg_pool_create(2, xs, three, LADLE_F64, lt_device(), &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_adaptive_avg_pool_create(6, x6, three, LADLE_F64, lt_device(), &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_adaptive_avg_pool_create(3, xs, NULL, LADLE_F64, lt_device(), &op),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_adaptive_avg_pool_create(3, xs, three, LADLE_I64, lt_device(), &op),
             LADLE_ERR_DTYPE);
    LT_ASSERT(op == NULL, "a failed create set the op");
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&y);
}
END_TEST

LT_SUITE("pool", "pool", LT_CHECK_TIMEOUT, against_definition, k3_against_definition,
         global_average, bad_input, max2_ties_nan, max2_narrow_rows, max3_ties_nan,
         adaptive_average, adaptive_by_hand)
