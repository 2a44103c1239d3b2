/*
 * The CUDA backend's batch-norm and convolution slots against the CPU's
 * (test/cuda_pair.h): bn_moment, bn_dsums, bn_affine, conv_im2col,
 * conv_col2im, conv_wide_im2col, conv_wide_grid, bias_add, bias_grad, in
 * f32 and f64, on sizes that give several blocks and wrap the grid-stride
 * loops (the emulator launches at most 32 blocks of 256 threads).
 *
 * Tolerances:
 *   - the column slots, the grid and bias_add only move elements or add
 *     one term, and col2im adds its taps in the CPU's order: exact.
 *   - the batch-norm sums: both backends' errors are bounded by (terms
 *     added in one accumulator) x (unit roundoff) x sum |term|. The CPU's
 *     f32 rows (inner > 1) add up to 31 terms in a float lane before
 *     flushing (16 a lane, up to 15 more of a row's tail in lane 0), and
 *     squares in float: 32 x 2^-24 x sum |term|. Sums in double (f64,
 *     inner == 1, and the GPU everywhere) stay far below 1e-12 x sum |term|
 *     for these sizes (a few hundred additions in one chain at most). A
 *     lost or doubled term (at least 1 / (n inner) of the bound) fails.
 *   - bn_affine: a few roundings of terms below 4 in magnitude, fused or
 *     not: 4 x 2^-23 in f32, 1e-12 in f64.
 *   - bias_grad: the row sums in double are added in different orders, so
 *     a float-rounded row sum may differ by one unit in the last place
 *     where it lies at a rounding boundary, and db's later roundings with
 *     it: at most (rows + 1) ulps of |db0| + sum |dy| (exact for inner 1).
 */
#include "cuda_pair.h"

static const ladle_dtype dtypes[2] = {LADLE_F32, LADLE_F64};

static double unit(ladle_dtype dt) { return dt == LADLE_F32 ? 0x1p-24 : 0x1p-53; }

/* n elements of dtype on the device against the oracle: |got - want| <=
 * factor * bound[i] everywhere (NaN only where the oracle has NaN). */
static void close_within(ladle_dtype dt, int64_t n, const void *dev, const void *want,
                         const double *bound, double factor, const char *what)
{
    void *got = cp_download(dt, n, dev);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++) {
        double g = cp_get(dt, got, i), w = cp_get(dt, want, i);
        if (isnan(g) || isnan(w) ? !(isnan(g) && isnan(w)) : !(fabs(g - w) <= factor * bound[i]))
            bad = i;
    }
    LT_ASSERT(bad < 0, "%s: element %lld is %.17g, the CPU's %.17g (bound %.3g)", what,
              (long long)bad, bad < 0 ? 0.0 : cp_get(dt, got, bad),
              bad < 0 ? 0.0 : cp_get(dt, want, bad), bad < 0 ? 0.0 : factor * bound[bad]);
    free(got);
}

/* ---- batch norm ---- */

typedef struct bn_case {
    int64_t n, c, inner;
} bn_case;

/* inner 1 and > 1; c from 1 to 300; channels long enough to be split
 * (9000 x 1, 3000 x 1, 5 x 5000, 2 x 20000); n = 0 */
static const bn_case bn_cases[] = {
    {1, 1, 1},    {300, 5, 1},   {64, 300, 1}, {9000, 2, 1}, {3000, 40, 1},  {4, 3, 37},
    {3, 200, 20}, {5, 2, 5000},  {2, 1, 20000}, {7, 3, 2},   {0, 4, 8},      {0, 3, 1},
};
#define N_BN ((int)(sizeof bn_cases / sizeof bn_cases[0]))

/* The channel's mean rounded as the slots round it. */
static double bn_mu(ladle_dtype dt, int64_t inner, double mean)
{
    return dt == LADLE_F32 && inner > 1 ? (double)(float)mean : mean;
}

/* Per channel: sum |x| (mean NULL) or sum (x - mu)^2, and with dy sum |dy|
 * into b1, sum |dy (x - mu)| into b2. */
static void bn_bounds(ladle_dtype dt, const bn_case *k, const void *x, const void *dy,
                      const double *mean, double *b1, double *b2)
{
    for (int64_t ch = 0; ch < k->c; ch++) {
        double mu = mean ? bn_mu(dt, k->inner, mean[ch]) : 0.0, s1 = 0, s2 = 0;
        for (int64_t sm = 0; sm < k->n; sm++)
            for (int64_t i = 0; i < k->inner; i++) {
                int64_t at = (sm * k->c + ch) * k->inner + i;
                double d = cp_get(dt, x, at) - mu;
                if (dy) {
                    s1 += fabs(cp_get(dt, dy, at));
                    s2 += fabs(cp_get(dt, dy, at) * d);
                } else {
                    s1 += mean ? d * d : fabs(d);
                }
            }
        b1[ch] = s1;
        if (b2)
            b2[ch] = s2;
    }
}

static double bn_factor(ladle_dtype dt, int64_t inner)
{
    return dt == LADLE_F32 && inner > 1 ? 32 * 0x1p-24 : 1e-12;
}

static void bn_moment_case(ladle_dtype dt, const bn_case *k, int with_mean, uint64_t seed)
{
    int64_t numel = k->n * k->c * k->inner;
    void *x = cp_random(dt, numel, -1.0, 1.0, seed);
    double *mean = cp_random(LADLE_F64, k->c, -0.3, 0.3, seed + 1);
    double *want = cp_random(LADLE_F64, k->c, 5.0, 6.0, seed + 2); /* overwritten */
    double *bound = cp_host(LADLE_F64, k->c);
    void *dx = cp_upload(dt, numel, x);
    double *dmean = cp_upload(LADLE_F64, k->c, mean), *ds = cp_upload(LADLE_F64, k->c, want);
    CP_CPU(bn_moment, dt, k->n, k->c, k->inner, x, with_mean ? mean : NULL, want);
    CP_GPU(bn_moment, dt, k->n, k->c, k->inner, dx, with_mean ? dmean : NULL, ds);
    bn_bounds(dt, k, x, NULL, with_mean ? mean : NULL, bound, NULL);
    char what[96];
    snprintf(what, sizeof what, "bn_moment %s n %lld c %lld inner %lld", with_mean ? "sq" : "sum",
             (long long)k->n, (long long)k->c, (long long)k->inner);
    close_within(LADLE_F64, k->c, ds, want, bound, bn_factor(dt, k->inner), what);
    cp_free(dx);
    cp_free(dmean);
    cp_free(ds);
    free(x);
    free(mean);
    free(want);
    free(bound);
}

static void bn_dsums_case(ladle_dtype dt, const bn_case *k, uint64_t seed)
{
    int64_t numel = k->n * k->c * k->inner;
    void *x = cp_random(dt, numel, -1.0, 1.0, seed);
    void *dy = cp_random(dt, numel, -1.0, 1.0, seed + 3);
    double *mean = cp_random(LADLE_F64, k->c, -0.3, 0.3, seed + 1);
    double *w1 = cp_random(LADLE_F64, k->c, 5.0, 6.0, seed + 2); /* overwritten */
    double *w2 = cp_clone(LADLE_F64, k->c, w1);
    double *b1 = cp_host(LADLE_F64, k->c), *b2 = cp_host(LADLE_F64, k->c);
    void *dx = cp_upload(dt, numel, x), *ddy = cp_upload(dt, numel, dy);
    double *dmean = cp_upload(LADLE_F64, k->c, mean);
    double *s1 = cp_upload(LADLE_F64, k->c, w1), *s2 = cp_upload(LADLE_F64, k->c, w1);
    CP_CPU(bn_dsums, dt, k->n, k->c, k->inner, x, dy, mean, w1, w2);
    CP_GPU(bn_dsums, dt, k->n, k->c, k->inner, dx, ddy, dmean, s1, s2);
    bn_bounds(dt, k, x, dy, mean, b1, b2);
    char what[96];
    snprintf(what, sizeof what, "bn_dsums n %lld c %lld inner %lld", (long long)k->n,
             (long long)k->c, (long long)k->inner);
    close_within(LADLE_F64, k->c, s1, w1, b1, bn_factor(dt, k->inner), what);
    close_within(LADLE_F64, k->c, s2, w2, b2, bn_factor(dt, k->inner), what);
    cp_free(dx);
    cp_free(ddy);
    cp_free(dmean);
    cp_free(s1);
    cp_free(s2);
    free(x);
    free(dy);
    free(mean);
    free(w1);
    free(w2);
    free(b1);
    free(b2);
}

START_TEST(bn_sums_match_the_cpu)
{
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < N_BN; i++) {
            bn_moment_case(dtypes[t], &bn_cases[i], 0, 100 + i);
            bn_moment_case(dtypes[t], &bn_cases[i], 1, 200 + i);
            bn_dsums_case(dtypes[t], &bn_cases[i], 300 + i);
        }
}
END_TEST

/* x = 1 everywhere, mean 1 + 2^-30: rounded to f32 (inner > 1) the mean is
 * 1 and every difference 0; kept in double (inner 1, or f64) each
 * difference is -2^-30, its square 2^-60: all exact. */
START_TEST(bn_mean_is_rounded_to_the_dtype_unless_inner_is_1)
{
    const int64_t n = 6, c = 3;
    for (int t = 0; t < 2; t++)
        for (int64_t inner = 1; inner <= 40; inner += 39) {
            ladle_dtype dt = dtypes[t];
            int64_t m = n * inner, numel = n * c * inner;
            void *x = cp_host(dt, numel);
            for (int64_t i = 0; i < numel; i++)
                cp_set(dt, x, i, 1.0);
            double mean[3] = {1 + 0x1p-30, 1 + 0x1p-30, 1 + 0x1p-30}, s[3], s1[3], s2[3];
            void *dx = cp_upload(dt, numel, x);
            double *dmean = cp_upload(LADLE_F64, c, mean), *ds = cp_upload(LADLE_F64, c, NULL),
                   *ds2 = cp_upload(LADLE_F64, c, NULL);
            int rounded = dt == LADLE_F32 && inner > 1;
            CP_GPU(bn_moment, dt, n, c, inner, dx, dmean, ds);
            CP_GPU(to_host, sizeof s, ds, s);
            CP_GPU(bn_dsums, dt, n, c, inner, dx, dx, dmean, ds, ds2);
            CP_GPU(to_host, sizeof s1, ds, s1);
            CP_GPU(to_host, sizeof s2, ds2, s2);
            LT_OK(cp_gpu()->fn->synchronize(cp_gpu()));
            for (int ch = 0; ch < 3; ch++) {
                LT_ASSERT(s[ch] == (rounded ? 0.0 : (double)m * 0x1p-60),
                          "%s inner %lld: sum of squares %.17g", ladle_dtype_name(dt),
                          (long long)inner, s[ch]);
                LT_ASSERT(s1[ch] == (double)m && s2[ch] == (rounded ? 0.0 : -(double)m * 0x1p-30),
                          "%s inner %lld: dsums %.17g %.17g", ladle_dtype_name(dt),
                          (long long)inner, s1[ch], s2[ch]);
            }
            cp_free(dx);
            cp_free(dmean);
            cp_free(ds);
            cp_free(ds2);
            free(x);
        }
}
END_TEST

/* which: 0 out separate, 1 w and b NULL, 2 out is u, 3 out is w */
static void bn_affine_case(ladle_dtype dt, const bn_case *k, int which, uint64_t seed)
{
    int64_t numel = k->n * k->c * k->inner;
    void *u = cp_random(dt, numel, -1.0, 1.0, seed), *w = cp_random(dt, numel, -1.0, 1.0, seed + 1);
    void *out = cp_random(dt, numel, -1.0, 1.0, seed + 2);
    double *a = cp_random(LADLE_F64, k->c, -1.0, 1.0, seed + 3);
    double *b = cp_random(LADLE_F64, k->c, -1.0, 1.0, seed + 4);
    double *kk = cp_random(LADLE_F64, k->c, -1.0, 1.0, seed + 5);
    void *du = cp_upload(dt, numel, u), *dw = cp_upload(dt, numel, w);
    void *dout = cp_upload(dt, numel, out);
    double *da = cp_upload(LADLE_F64, k->c, a), *db = cp_upload(LADLE_F64, k->c, b);
    double *dk = cp_upload(LADLE_F64, k->c, kk);
    void *ho = which == 2 ? u : which == 3 ? w : out;
    void *go = which == 2 ? du : which == 3 ? dw : dout;
    CP_CPU(bn_affine, dt, k->n, k->c, k->inner, u, which == 1 ? NULL : w, ho, a,
           which == 1 ? NULL : b, kk);
    CP_GPU(bn_affine, dt, k->n, k->c, k->inner, du, which == 1 ? NULL : dw, go, da,
           which == 1 ? NULL : db, dk);
    char what[96];
    snprintf(what, sizeof what, "bn_affine variant %d n %lld c %lld inner %lld", which,
             (long long)k->n, (long long)k->c, (long long)k->inner);
    CP_CLOSE(dt, numel, go, ho, dt == LADLE_F32 ? 4 * 0x1p-23 : 1e-12, what);
    /* what was not the output is as it was */
    CP_CLOSE(dt, numel, which == 2 ? dw : du, which == 2 ? w : u, 0.0, what);
    void *dirs[6] = {du, dw, dout, da, db, dk};
    for (int i = 0; i < 6; i++)
        cp_free(dirs[i]);
    free(u);
    free(w);
    free(out);
    free(a);
    free(b);
    free(kk);
}

START_TEST(bn_affine_matches_the_cpu)
{
    static const bn_case cases[] = {{400, 50, 1}, {3, 7, 600}, {2, 300, 3}, {1, 1, 1}, {0, 2, 2}};
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 5; i++)
            for (int which = 0; which < 4; which++)
                bn_affine_case(dtypes[t], &cases[i], which, 400 + 10 * i + which);
}
END_TEST

/* ---- the column slots ---- */

typedef struct geo_case {
    const char *name;
    int64_t cg, in[3], k[3], s[3], p[3], d[3], nb;
} geo_case;

/* 1-, 2- and 3-d, stride, padding, dilation; "long" wraps the grid-stride
 * loops (8200 columns, 16400 elements of dx) */
static const geo_case geo_cases[] = {
    {"1-d", 3, {1, 1, 37}, {1, 1, 5}, {1, 1, 2}, {0, 0, 3}, {1, 1, 2}, 3},
    {"2-d", 4, {1, 11, 9}, {1, 3, 4}, {1, 2, 1}, {0, 1, 2}, {1, 1, 2}, 3},
    {"3-d", 2, {5, 6, 7}, {2, 3, 2}, {2, 1, 3}, {1, 0, 1}, {2, 1, 1}, 2},
    {"2-d wide pad", 2, {1, 8, 8}, {1, 2, 2}, {1, 3, 3}, {0, 2, 2}, {1, 3, 3}, 2},
    {"2-d 1x1", 5, {1, 6, 5}, {1, 1, 1}, {1, 2, 1}, {0, 1, 0}, {1, 1, 1}, 4},
    {"long 1-d", 2, {1, 1, 4100}, {1, 1, 3}, {1, 1, 1}, {0, 0, 1}, {1, 1, 1}, 2},
};
#define N_GEO ((int)(sizeof geo_cases / sizeof geo_cases[0]))

static ladle_conv_geom geom_of(const geo_case *g, int64_t cog)
{
    ladle_conv_geom v;
    v.cg = g->cg;
    v.cog = cog;
    for (int a = 0; a < 3; a++) {
        v.in[a] = g->in[a];
        v.k[a] = g->k[a];
        v.s[a] = g->s[a];
        v.p[a] = g->p[a];
        v.d[a] = g->d[a];
        v.out[a] = (g->in[a] + 2 * g->p[a] - g->d[a] * (g->k[a] - 1) - 1) / g->s[a] + 1;
    }
    return v;
}

/* Random values with a NaN and infinities among them. */
static void *specials(ladle_dtype dt, int64_t n, uint64_t seed)
{
    void *p = cp_random(dt, n, -1.0, 1.0, seed);
    if (n > 10) {
        cp_set(dt, p, n / 3, NAN);
        cp_set(dt, p, n / 2, -INFINITY);
        cp_set(dt, p, n - 2, INFINITY);
    }
    return p;
}

/* The images of a group: group 1 (offset 2 pin) of images with cg + 2
 * channels. */
typedef struct images {
    int64_t pin, stride, offset, numel;
} images;

static images images_of(const ladle_conv_geom *v, int64_t nb)
{
    images m;
    m.pin = v->in[0] * v->in[1] * v->in[2];
    m.stride = (v->cg + 2) * m.pin;
    m.offset = 2 * m.pin;
    m.numel = nb * m.stride;
    return m;
}

static int plane_ok(const ladle_conv_geom *v)
{
    return v->in[0] == 1 && v->k[0] == 1 && v->s[2] == 1;
}

/* im2col (dir 0) or col2im (dir 1) of case g, with or without planes. */
static void columns_case(ladle_dtype dt, const geo_case *g, int dir, int planes, uint64_t seed)
{
    ladle_conv_geom v = geom_of(g, 1);
    images m = images_of(&v, g->nb);
    size_t es = cp_size(dt);
    int64_t P = v.out[0] * v.out[1] * v.out[2], K = v.cg * v.k[0] * v.k[1] * v.k[2];
    int64_t ld = g->nb * P + 5, hp = v.in[1] + 2 * v.p[1], wp = v.in[2] + 2 * v.p[2];
    void *img = specials(dt, m.numel, seed), *col = specials(dt, K * ld, seed + 1);
    void *dimg = cp_upload(dt, m.numel, img), *dcol = cp_upload(dt, K * ld, col);
    void *hplanes = planes ? cp_host(dt, 2 * hp * wp) : NULL;
    void *dplanes = planes ? cp_upload(dt, 2 * hp * wp, NULL) : NULL;
    char *hi = (char *)img + m.offset * es, *di = (char *)dimg + m.offset * es;
    if (dir == 0) {
        CP_CPU(conv_im2col, dt, &v, g->nb, hi, m.stride, col, ld, hplanes);
        CP_GPU(conv_im2col, dt, &v, g->nb, di, m.stride, dcol, ld, dplanes);
    } else {
        CP_CPU(conv_col2im, dt, &v, g->nb, col, ld, hi, m.stride, hplanes);
        CP_GPU(conv_col2im, dt, &v, g->nb, dcol, ld, di, m.stride, dplanes);
    }
    char what[96];
    snprintf(what, sizeof what, "%s %s%s", dir ? "col2im" : "im2col", g->name,
             planes ? " with planes" : "");
    CP_CLOSE(dt, K * ld, dcol, col, 0.0, what);
    CP_CLOSE(dt, m.numel, dimg, img, 0.0, what);
    cp_free(dimg);
    cp_free(dcol);
    if (planes)
        cp_free(dplanes);
    free(img);
    free(col);
    free(hplanes);
}

START_TEST(im2col_and_col2im_match_the_cpu)
{
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < N_GEO; i++)
            for (int dir = 0; dir < 2; dir++) {
                ladle_conv_geom v = geom_of(&geo_cases[i], 1);
                columns_case(dtypes[t], &geo_cases[i], dir, 0, 500 + 10 * i + dir);
                if (plane_ok(&v))
                    columns_case(dtypes[t], &geo_cases[i], dir, 1, 600 + 10 * i + dir);
            }
}
END_TEST

/* ---- the wide path ---- */

/* in[0] = k[0] = 1, s = 1; with and without padding; "large" wraps the
 * column loop (8634 columns) */
static const geo_case wide_cases[] = {
    {"padded", 3, {1, 10, 12}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 2}, 3},
    {"unpadded", 2, {1, 9, 11}, {1, 2, 3}, {1, 1, 1}, {0, 0, 0}, {1, 2, 1}, 2},
    {"asymmetric pad", 2, {1, 5, 7}, {1, 3, 2}, {1, 1, 1}, {0, 2, 0}, {1, 1, 3}, 2},
    {"large", 1, {1, 40, 70}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1}, 3},
};
#define N_WIDE ((int)(sizeof wide_cases / sizeof wide_cases[0]))

static int64_t wide_q(const ladle_conv_geom *v)
{
    return (v->out[1] - 1) * (v->in[2] + 2 * v->p[2]) + v->out[2];
}

static void wide_im2col_case(ladle_dtype dt, const geo_case *g, uint64_t seed)
{
    ladle_conv_geom v = geom_of(g, 1);
    images m = images_of(&v, g->nb);
    size_t es = cp_size(dt);
    int64_t K = v.cg * v.k[1] * v.k[2], ld = g->nb * wide_q(&v) + 3;
    int64_t pad = v.cg * (v.in[1] + 2 * v.p[1]) * (v.in[2] + 2 * v.p[2]);
    int padded = v.p[1] + v.p[2] > 0;
    void *img = specials(dt, m.numel, seed), *col = specials(dt, K * ld, seed + 1);
    void *dimg = cp_upload(dt, m.numel, img), *dcol = cp_upload(dt, K * ld, col);
    void *hpad = padded ? cp_host(dt, pad) : NULL, *dpad = padded ? cp_upload(dt, pad, NULL) : NULL;
    CP_CPU(conv_wide_im2col, dt, &v, g->nb, (char *)img + m.offset * es, m.stride, hpad, col, ld);
    CP_GPU(conv_wide_im2col, dt, &v, g->nb, (char *)dimg + m.offset * es, m.stride, dpad, dcol,
           ld);
    char what[96];
    snprintf(what, sizeof what, "wide im2col %s", g->name);
    CP_CLOSE(dt, K * ld, dcol, col, 0.0, what);
    cp_free(dimg);
    cp_free(dcol);
    if (padded)
        cp_free(dpad);
    free(img);
    free(col);
    free(hpad);
}

/* The grid of cog = 5 rows and the tensor's group 1 (of 6 channels). */
static void wide_grid_case(ladle_dtype dt, const geo_case *g, int to_tensor, uint64_t seed)
{
    const int64_t cog = 5;
    ladle_conv_geom v = geom_of(g, cog);
    size_t es = cp_size(dt);
    int64_t P = v.out[1] * v.out[2], ld = g->nb * wide_q(&v) + 3;
    int64_t ts = (cog + 1) * P, tn = g->nb * ts;
    void *grid = specials(dt, cog * ld, seed), *t = specials(dt, tn, seed + 1);
    void *dgrid = cp_upload(dt, cog * ld, grid), *dt_ = cp_upload(dt, tn, t);
    CP_CPU(conv_wide_grid, dt, &v, to_tensor, g->nb, grid, ld, (char *)t + P * es, ts);
    CP_GPU(conv_wide_grid, dt, &v, to_tensor, g->nb, dgrid, ld, (char *)dt_ + P * es, ts);
    char what[96];
    snprintf(what, sizeof what, "wide grid %s %s", to_tensor ? "to tensor" : "to grid",
             g->name);
    CP_CLOSE(dt, cog * ld, dgrid, grid, 0.0, what);
    CP_CLOSE(dt, tn, dt_, t, 0.0, what);
    cp_free(dgrid);
    cp_free(dt_);
    free(grid);
    free(t);
}

START_TEST(the_wide_path_matches_the_cpu)
{
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < N_WIDE; i++) {
            wide_im2col_case(dtypes[t], &wide_cases[i], 700 + i);
            wide_grid_case(dtypes[t], &wide_cases[i], 1, 710 + i);
            wide_grid_case(dtypes[t], &wide_cases[i], 0, 720 + i);
        }
}
END_TEST

/* ---- bias ---- */

typedef struct bias_case {
    int64_t rows, channels, inner;
} bias_case;

/* inner 1 (a linear layer's rows: tiles of 64 with a partial last one, 3
 * blocks of channels) and > 1: one row a block (300), several rows a block
 * with a partial last chunk (5, 3); sizes over 8192 */
static const bias_case bias_cases[] = {
    {700, 13, 1}, {150, 70, 1}, {7, 13, 150}, {3, 5, 300}, {40, 3, 3}, {300, 2, 5}, {1, 1, 1},
    {0, 3, 4},
};
#define N_BIAS ((int)(sizeof bias_cases / sizeof bias_cases[0]))

static void bias_case_run(ladle_dtype dt, const bias_case *k, uint64_t seed)
{
    int64_t n = k->rows * k->channels * k->inner, C = k->channels;
    void *y = cp_random(dt, n, -1.0, 1.0, seed), *b = cp_random(dt, C, -1.0, 1.0, seed + 1);
    void *db = cp_random(dt, C, -3.0, 3.0, seed + 2);
    double *bound = cp_host(LADLE_F64, C);
    for (int64_t c = 0; c < C; c++) {
        bound[c] = fabs(cp_get(dt, db, c));
        for (int64_t r = 0; r < k->rows; r++)
            for (int64_t p = 0; p < k->inner; p++)
                bound[c] += fabs(cp_get(dt, y, (r * C + c) * k->inner + p));
    }
    void *dy = cp_upload(dt, n, y), *dbias = cp_upload(dt, C, b), *ddb = cp_upload(dt, C, db);
    char what[96];
    snprintf(what, sizeof what, "bias rows %lld channels %lld inner %lld", (long long)k->rows,
             (long long)k->channels, (long long)k->inner);
    /* the gradient of y as it is, then y += b */
    CP_CPU(bias_grad, dt, k->rows, C, k->inner, y, db);
    CP_GPU(bias_grad, dt, k->rows, C, k->inner, dy, ddb);
    double ulps = k->inner == 1 ? 0.0 : (double)(k->rows + 1) * 2 * unit(dt);
    close_within(dt, C, ddb, db, bound, ulps, what);
    CP_CPU(bias_add, dt, k->rows, C, k->inner, b, y);
    CP_GPU(bias_add, dt, k->rows, C, k->inner, dbias, dy);
    CP_CLOSE(dt, n, dy, y, 0.0, what);
    cp_free(dy);
    cp_free(dbias);
    cp_free(ddb);
    free(y);
    free(b);
    free(db);
    free(bound);
}

START_TEST(bias_add_and_grad_match_the_cpu)
{
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < N_BIAS; i++)
            bias_case_run(dtypes[t], &bias_cases[i], 800 + i);
}
END_TEST

LT_SUITE("cuda_conv", "slots", 600, bn_sums_match_the_cpu,
         bn_mean_is_rounded_to_the_dtype_unless_inner_is_1, bn_affine_matches_the_cpu,
         im2col_and_col2im_match_the_cpu, the_wide_path_matches_the_cpu,
         bias_add_and_grad_match_the_cpu)
