/*
 * The CUDA backend's pooling slots against the CPU's (test/cuda_pair.h):
 * max and average pooling (both divisors) over 1-d, 2-d and 3-d planes,
 * strides below, at and above the kernel, padding (up to windows wholly in
 * it), dilation, ties and NaN, windows of more than 255 taps, the common
 * LeNet and ResNet shapes over enough planes to wrap the grid, and global
 * average pooling over planes of 1 to thousands of elements.
 *
 * Each backend runs its own forward and then its own backward from the
 * winners that forward saved (the two save them in different formats), so
 * only y and dx are compared. Max pooling is exact on both: y is one of
 * x's values, and dy is drawn from multiples of 1/4 in [-2, 2], so every
 * dx, a sum of at most a window's count of them, is exact in any order:
 * dx must be bitwise the CPU's, and a winner placed anywhere but the first
 * in tap order shows. The average's tolerances are at the cases.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_pair.h"

/* x: uniform in [-1, 1) (RANDOM), the integers 0 to 2 (TIES: most windows
 * hold their maximum more than once), or those with a NaN, -inf or +inf in
 * about one input in 12 (SPECIAL). */
enum { RANDOM, TIES, SPECIAL };

static double uniform(uint64_t seed, uint64_t stream, int64_t i)
{
    return ladle__rng_uniform(seed, stream, (uint64_t)i);
}

static void *make_x(ladle_dtype dt, int64_t n, int data, uint64_t seed)
{
    static const double special[3] = {NAN, -INFINITY, INFINITY};
    void *x = cp_host(dt, n);
    for (int64_t i = 0; i < n; i++) {
        double u = uniform(seed, 1, i), v = data == RANDOM ? u : floor(1.5 * (u + 1));
        if (data == SPECIAL && uniform(seed, 2, i) < -5.0 / 6)
            v = special[(int)floor(1.5 * (uniform(seed, 3, i) + 1))];
        cp_set(dt, x, i, v);
    }
    return x;
}

/* dy: multiples of 1/4 in [-2, 2] for max (exact sums), uniform for average */
static void *make_dy(ladle_dtype dt, int64_t n, int exact, uint64_t seed)
{
    void *dy = cp_host(dt, n);
    for (int64_t i = 0; i < n; i++) {
        double u = uniform(seed, 4, i);
        cp_set(dt, dy, i, exact ? floor(8.5 * u) / 4 : u);
    }
    return dy;
}

/* Host memory of n elements that are all NaN: what the GPU must overwrite. */
static void *nans(ladle_dtype dt, int64_t n)
{
    void *p = cp_host(dt, n);
    for (int64_t i = 0; i < n; i++)
        cp_set(dt, p, i, NAN);
    return p;
}

/* The output extent as the layers size it (floor or ceil mode, a last
 * window starting in the right padding dropped). */
static int64_t out_len(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d, int ceil_mode)
{
    int64_t span = n + 2 * p - d * (k - 1) - 1;
    int64_t m = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (m - 1) * s >= n + p)
        m--;
    return m;
}

/* A geometry of nd dimensions (the last nd of the three), the extents of
 * each used dimension given in order; out from in, k, s, p, d. */
static ladle_pool_geom geom(ladle_pool_kind kind, int include_pad, int nd,
                            const int64_t *in, const int64_t *k, const int64_t *s,
                            const int64_t *p, const int64_t *d, int ceil_mode)
{
    ladle_pool_geom g;
    memset(&g, 0, sizeof g);
    g.kind = kind;
    g.count_include_pad = include_pad;
    for (int a = 0; a < 3; a++) {
        int u = a - (3 - nd);
        g.in[a] = u < 0 ? 1 : in[u];
        g.k[a] = u < 0 ? 1 : k[u];
        g.s[a] = u < 0 ? 1 : s[u];
        g.p[a] = u < 0 ? 0 : p[u];
        g.d[a] = u < 0 ? 1 : d[u];
        g.out[a] = out_len(g.in[a], g.k[a], g.s[a], g.p[a], g.d[a], ceil_mode);
    }
    return g;
}

static ladle_pool_geom global_geom(int64_t d0, int64_t d1, int64_t d2)
{
    ladle_pool_geom g;
    memset(&g, 0, sizeof g);
    g.kind = LADLE_POOL_AVG;
    g.count_include_pad = 1;
    g.global = 1;
    const int64_t e[3] = {d0, d1, d2};
    for (int a = 0; a < 3; a++) {
        g.in[a] = g.k[a] = g.s[a] = e[a];
        g.d[a] = g.out[a] = 1;
    }
    return g;
}

static void describe(const ladle_pool_geom *g, int64_t planes, int data, char *buf,
                     size_t cap)
{
    snprintf(
        buf, cap,
        "%s%s pad-count %d, %lld planes of %lldx%lldx%lld, k %lldx%lldx%lld "
        "s %lldx%lldx%lld p %lldx%lldx%lld d %lldx%lldx%lld, out %lldx%lldx%lld, data %d",
        g->global ? "global " : "", g->kind == LADLE_POOL_MAX ? "max" : "avg",
        g->count_include_pad, (long long)planes, (long long)g->in[0], (long long)g->in[1],
        (long long)g->in[2], (long long)g->k[0], (long long)g->k[1], (long long)g->k[2],
        (long long)g->s[0], (long long)g->s[1], (long long)g->s[2], (long long)g->p[0],
        (long long)g->p[1], (long long)g->p[2], (long long)g->d[0], (long long)g->d[1],
        (long long)g->d[2], (long long)g->out[0], (long long)g->out[1],
        (long long)g->out[2], data);
}

/* The tolerances of y and dx (max: exact, see the header); f64 to 1e-12
 * as everywhere (cuda_pair.h), f32 from u = 2^-24:
 *
 * Average: y = r * (a sum of at most K = k0 k1 k2 taps, |x| < 1), each
 * backend summing in f32 in its own order, so each within (K - 1) u
 * sum|x| of the exact sum, and a few u more for the factors' rounding and
 * products; r sum|x| <= 1 (r is at most the reciprocal of the valid
 * count). The two differ by at most 2 (K + 3) u. dx[i]: a sum of at most
 * K terms dy r with |dy| < 1, within 2 (K + 3) u B of each other, B the
 * largest sum of the factors r of the windows holding an input (the CPU's
 * backward of a dy of ones: near 1 inside a plane, up to K at its edges).
 *
 * Global average: the GPU sums in double and rounds once; the CPU sums 16
 * lanes of f32 of at most 16 values each between flushes into double, so
 * within 16 u of the mean of |x| <= 1: 20 u covers both. dx = dy / size is
 * computed alike on both: exact. */
static void tolerances(const ladle_pool_geom *g, ladle_dtype dt, double B, double *ty,
                       double *tdx)
{
    const double u = ldexp(1.0, -24), K = (double)(g->k[0] * g->k[1] * g->k[2]);
    int f32 = dt == LADLE_F32;
    if (g->global) {
        *ty = f32 ? 20 * u : 1e-12;
        *tdx = 0;
    } else if (g->kind == LADLE_POOL_MAX) {
        *ty = *tdx = 0;
    } else {
        *ty = f32 ? 2 * (K + 3) * u : 1e-12;
        *tdx = f32 ? 2 * (K + 3) * u * B : 1e-12;
    }
}

/* B of tolerances(): the largest element of the CPU's average backward of
 * a dy of ones (1 for the other kinds). */
static double factor_sums(const ladle_pool_geom *g, ladle_dtype dt, int64_t planes,
                          void *cw)
{
    int64_t pin = g->in[0] * g->in[1] * g->in[2], pout = g->out[0] * g->out[1] * g->out[2];
    if (g->global || g->kind == LADLE_POOL_MAX || planes == 0)
        return 1;
    void *ones = cp_host(dt, pout), *b = cp_host(dt, pin);
    for (int64_t i = 0; i < pout; i++)
        cp_set(dt, ones, i, 1);
    CP_CPU(pool_backward, dt, g, 1, ones, b, NULL, cw);
    double most = 1;
    for (int64_t i = 0; i < pin; i++) {
        double v = dt == LADLE_F32 ? ((float *)b)[i] : ((double *)b)[i];
        most = v > most ? v : most;
    }
    free(b), free(ones);
    return most;
}

/* One case on both backends: each plans, sets up, runs its forward with
 * winners saved and its backward from them; y and dx must agree, y again
 * from a forward that saves nothing. The GPU's outputs and winners start
 * as garbage: every element must be written. */
static void check_pool(const ladle_pool_geom *g, ladle_dtype dt, int64_t planes, int data,
                       uint64_t seed)
{
    int64_t pin = g->in[0] * g->in[1] * g->in[2], pout = g->out[0] * g->out[1] * g->out[2];
    int64_t nx = planes * pin, ny = planes * pout;
    char what[400];
    describe(g, planes, data, what, sizeof what);
    void *x = make_x(dt, nx, data, seed);
    void *dy = make_dy(dt, ny, g->kind == LADLE_POOL_MAX && !g->global, seed);

    size_t cws = 0, csaved = 0, gws = 0, gsaved = 0;
    void *cw = NULL, *gw = NULL;
    CP_CPU(pool_plan, dt, g, &cws, &csaved);
    CP_CPU(alloc, cws, &cw);
    CP_CPU(pool_setup, dt, g, cw);
    void *cwin = calloc(csaved * (size_t)planes + 1, 1);
    void *cy = cp_host(dt, ny), *cdx = cp_host(dt, nx);
    CP_CPU(pool_forward, dt, g, planes, x, cy, cwin, cw);
    CP_CPU(pool_backward, dt, g, planes, dy, cdx, cwin, cw);

    CP_GPU(pool_plan, dt, g, &gws, &gsaved);
    CP_GPU(alloc, gws, &gw);
    CP_GPU(pool_setup, dt, g, gw);
    void *hy = nans(dt, ny), *hdx = nans(dt, nx);
    void *xd = cp_upload(dt, nx, x), *dyd = cp_upload(dt, ny, dy);
    void *yd = cp_upload(dt, ny, hy), *dxd = cp_upload(dt, nx, hdx);
    size_t wbytes = gsaved * (size_t)planes;
    unsigned char *junk = malloc(wbytes + 1);
    memset(junk, 0x5a, wbytes + 1);
    void *wd = cp_upload(LADLE_F32, 1 + (int64_t)wbytes / 4, NULL);
    CP_GPU(to_device, wbytes, junk, wd);
    CP_GPU(pool_forward, dt, g, planes, xd, yd, wbytes ? wd : NULL, gw);
    CP_GPU(pool_backward, dt, g, planes, dyd, dxd, wbytes ? wd : NULL, gw);

    double ty, tdx;
    tolerances(g, dt, factor_sums(g, dt, planes, cw), &ty, &tdx);
    CP_CLOSE(dt, ny, yd, cy, ty, what);
    CP_CLOSE(dt, nx, dxd, cdx, tdx, what);
    void *y2 = cp_upload(dt, ny, hy);
    CP_GPU(pool_forward, dt, g, planes, xd, y2, NULL, gw);
    CP_CLOSE(dt, ny, y2, cy, ty, "the same without winners saved");

    cp_free(y2), cp_free(wd), cp_free(dxd), cp_free(yd), cp_free(dyd), cp_free(xd);
    CP_GPU(free, gw);
    CP_CPU(free, cw);
    free(junk), free(hdx), free(hy), free(cdx), free(cy), free(cwin), free(dy), free(x);
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static int64_t pick(int64_t lo, int64_t hi)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (int64_t)(rng % (uint64_t)(hi - lo + 1));
}

/* A random geometry of nd dimensions: strides below, at and above the
 * kernel, padding up to half the kernel (the layers' limit) or, wide, up
 * to a kernel and more (windows wholly in the padding), dilation up to 3
 * for max. */
static ladle_pool_geom random_geom(ladle_pool_kind kind, int nd, int wide)
{
    for (;;) {
        int64_t in[3], k[3], s[3], p[3], d[3];
        int ok = 1;
        for (int a = 0; a < nd; a++) {
            in[a] = a == nd - 1 ? pick(1, 19) : pick(1, nd == 3 ? 6 : 9);
            k[a] = pick(1, 4);
            s[a] = pick(1, k[a] + 2);
            p[a] = pick(0, wide ? k[a] + 1 : k[a] / 2);
            d[a] = kind == LADLE_POOL_MAX ? pick(1, 3) : 1;
            ok &= in[a] + 2 * p[a] >= d[a] * (k[a] - 1) + 1;
        }
        if (ok)
            return geom(kind, (int)pick(0, 1), nd, in, k, s, p, d, (int)pick(0, 1));
    }
}

START_TEST(random_max)
{
    for (int trial = 0; trial < 180; trial++) {
        ladle_dtype dt = trial % 2 ? LADLE_F32 : LADLE_F64;
        ladle_pool_geom g = random_geom(LADLE_POOL_MAX, 1 + trial / 2 % 3, trial % 5 == 4);
        check_pool(&g, dt, pick(1, 5), trial / 6 % 3, 100 + (uint64_t)trial);
    }
}
END_TEST

START_TEST(random_average)
{
    for (int trial = 0; trial < 180; trial++) {
        ladle_dtype dt = trial % 2 ? LADLE_F32 : LADLE_F64;
        ladle_pool_geom g = random_geom(LADLE_POOL_AVG, 1 + trial / 2 % 3, trial % 5 == 4);
        check_pool(&g, dt, pick(1, 5), trial / 6 % 3, 500 + (uint64_t)trial);
    }
}
END_TEST

/* Windows wholly in the padding, at both ends of a row and of a column:
 * -inf and no winner (their dy goes nowhere), or 0 for average. */
START_TEST(windows_in_padding)
{
    const int64_t in[2] = {3, 4}, k[2] = {2, 2}, s[2] = {1, 3}, p[2] = {2, 3},
                  d[2] = {1, 1};
    const int64_t in1[1] = {2}, k1[1] = {2}, s1[1] = {1}, p1[1] = {1}, d1[1] = {3};
    for (int dt = 0; dt < 2; dt++)
        for (int kind = 0; kind < 2; kind++)
            for (int cip = 0; cip < 2; cip++) {
                ladle_dtype t = dt ? LADLE_F64 : LADLE_F32;
                ladle_pool_kind pk = kind ? LADLE_POOL_AVG : LADLE_POOL_MAX;
                ladle_pool_geom g = geom(pk, cip, 2, in, k, s, p, d, cip);
                check_pool(&g, t, 3, SPECIAL, 7);
                check_pool(&g, t, 2, TIES, 8);
                if (kind)
                    continue; /* average pooling has no dilation */
                /* taps -1 and 2 of a row of 2: the first window holds none */
                g = geom(pk, cip, 1, in1, k1, s1, p1, d1, 0);
                check_pool(&g, t, 4, RANDOM, 9);
            }
}
END_TEST

/* Windows of 7 x 7 x 7 = 343 taps: the GPU's winners in four bytes. */
START_TEST(many_taps)
{
    const int64_t in[3] = {8, 9, 8}, k[3] = {7, 7, 7}, s[3] = {1, 2, 1}, p[3] = {3, 0, 2};
    const int64_t d[3] = {1, 1, 1};
    for (int dt = 0; dt < 2; dt++)
        for (int data = 0; data < 3; data++) {
            ladle_dtype t = dt ? LADLE_F64 : LADLE_F32;
            ladle_pool_geom g = geom(LADLE_POOL_MAX, 0, 3, in, k, s, p, d, 1);
            check_pool(&g, t, 2, data, 20 + (uint64_t)data);
            g.kind = LADLE_POOL_AVG;
            check_pool(&g, t, 2, data, 30 + (uint64_t)data);
        }
}
END_TEST

/* A stride of 2^31 along one dimension (one output there): the kernels
 * whose indices would not all fit int32, over small data. */
START_TEST(wide_indices)
{
    for (int trial = 0; trial < 24; trial++) {
        ladle_dtype dt = trial % 2 ? LADLE_F32 : LADLE_F64;
        ladle_pool_kind kind = trial / 2 % 2 ? LADLE_POOL_AVG : LADLE_POOL_MAX;
        ladle_pool_geom g = random_geom(kind, 2 + trial / 4 % 2, 0);
        int a = 3 - (int)pick(1, 2);
        g.s[a] = (int64_t)1 << 31;
        g.out[a] = 1;
        check_pool(&g, dt, pick(1, 40), trial / 8, 700 + (uint64_t)trial);
    }
}
END_TEST

/* LeNet's 2 x 2 windows with stride 2 and ResNet's 3 x 3 with stride 2 and
 * padding 1 (even and odd planes), over more outputs than the emulated
 * grid has threads (4 SMs x 8 blocks x 256). */
START_TEST(common_shapes)
{
    const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
    const int64_t k2[2] = {2, 2}, k3[2] = {3, 3}, s2[2] = {2, 2};
    const int64_t lenet[2] = {12, 12}, even[2] = {16, 16}, odd[2] = {15, 13};
    for (int dt = 0; dt < 2; dt++)
        for (int kind = 0; kind < 2; kind++)
            for (int data = 0; data < 3; data++) {
                ladle_dtype t = dt ? LADLE_F64 : LADLE_F32;
                ladle_pool_kind pk = kind ? LADLE_POOL_AVG : LADLE_POOL_MAX;
                uint64_t seed = 40 + (uint64_t)(4 * dt + 2 * kind) * 3 + (uint64_t)data;
                ladle_pool_geom g = geom(pk, 1, 2, lenet, k2, s2, zero, one, 0);
                check_pool(&g, t, 300, data, seed); /* 10800 outputs */
                g = geom(pk, data != 1, 2, even, k3, s2, one, one, 0);
                check_pool(&g, t, 150, data, seed); /* 9600 */
                g = geom(pk, data == 1, 2, odd, k3, s2, one, one, data == 2);
                check_pool(&g, t, 160, data, seed); /* 8960 */
            }
}
END_TEST

/* Global average: planes of one element (many: groups of one thread),
 * ResNet's 7 x 7 and 4 x 4 (groups of 32 and 16), 3-d, and planes larger
 * than a block. */
START_TEST(global_average)
{
    static const int64_t shapes[][4] = {
        {1, 1, 1, 9000}, {1, 7, 7, 600}, {1, 4, 4, 700}, {3, 5, 7, 40}, {1, 40, 41, 20},
        {1, 1, 3, 30},   {1, 1, 300, 9}, {2, 1, 1, 50},  {1, 1, 1, 0},
    };
    for (int dt = 0; dt < 2; dt++)
        for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
            ladle_pool_geom g = global_geom(shapes[c][0], shapes[c][1], shapes[c][2]);
            check_pool(&g, dt ? LADLE_F64 : LADLE_F32, shapes[c][3], (int)(c % 2), 60 + c);
        }
}
END_TEST

/* No planes: nothing to do, nothing touched. */
START_TEST(no_planes)
{
    const int64_t in[2] = {4, 4}, k[2] = {2, 2}, s[2] = {2, 2}, p[2] = {0, 0},
                  d[2] = {1, 1};
    for (int kind = 0; kind < 2; kind++) {
        ladle_pool_geom g =
            geom(kind ? LADLE_POOL_AVG : LADLE_POOL_MAX, 1, 2, in, k, s, p, d, 0);
        check_pool(&g, LADLE_F32, 0, RANDOM, 1);
    }
}
END_TEST

LT_SUITE("cuda_pool", "pool", 600, random_max, random_average, windows_in_padding,
         many_taps, wide_indices, common_shapes, global_average, no_planes)
