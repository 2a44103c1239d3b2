/*
 * The CUDA backend's copies, boxes, vectors, GEMM and random fills against
 * the CPU backend (test/cuda_pair.h): src/backends/cuda/box.cu, blas.cu,
 * random.cu. Run with LADLE_TEST_DEVICE=cuda where the backend is built.
 *
 * Sizes run from 0 and 1 through odd ones to more than 4 * 8 * 256
 * elements, which wraps the emulator's grid (4 SMs, 32 blocks of 256
 * threads) at least once. What must agree exactly does: copies and boxes
 * move bits, add, axpy, scal and fill round the same operations the same
 * way, abs_max is a maximum, and the uniform random values are integer
 * arithmetic and an exact scaling. dot2, GEMM and the normal values carry
 * tolerances derived where they are checked.
 */
#include <float.h>
#include <stdint.h>

#include "cuda_pair.h"

/* More elements than the emulated grid's 8192 threads, and odd; BIG wraps
 * an H200's grid too (132 SMs, 1056 blocks of 256 threads). */
#define WRAP 8229
#define BIG 300007

static const int64_t sizes[] = {0, 1, 7, 1001, WRAP, BIG};
#define N_SIZES ((int)(sizeof sizes / sizeof sizes[0]))
static const ladle_dtype dtypes[] = {LADLE_F32, LADLE_F64};

/* A small deterministic generator for the cases' shapes. */
static uint64_t draw(uint64_t *state, uint64_t bound)
{
    return ladle__rng_bits(0x5eed, 31, (*state)++) % bound;
}

/* Whether n elements of device memory equal the oracle's bits. */
static int same_bits(ladle_dtype dtype, int64_t n, const void *dev, const void *oracle)
{
    void *got = cp_download(dtype, n, dev);
    int same = n <= 0 || memcmp(got, oracle, (size_t)n * cp_size(dtype)) == 0;
    free(got);
    return same;
}

/* Whether the CUDA device is the emulator (it runs the host's libm). */
static int emulated(void)
{
    char line[512];
    LT_OK(ladle_device_describe(LADLE_CUDA, line, sizeof line));
    return strstr(line, "emulator") != NULL;
}

/* ---- vectors ---- */

/* add (also into one of its operands), axpy, scal and fill: the same bits */
static void vector_case(ladle_dtype dt, int64_t n)
{
    void *a = cp_random(dt, n, -2, 2, 1), *b = cp_random(dt, n, -2, 2, 2);
    void *ca = cp_clone(dt, n, a), *cb = cp_clone(dt, n, b), *cc = cp_host(dt, n);
    void *ga = cp_upload(dt, n, a), *gb = cp_upload(dt, n, b), *gc = cp_upload(dt, n, NULL);
    CP_CPU(add, dt, n, ca, cb, cc);
    CP_GPU(add, dt, n, ga, gb, gc);
    LT_ASSERT(same_bits(dt, n, gc, cc), "add, n %lld", (long long)n);
    CP_CPU(add, dt, n, ca, cb, ca); /* c aliasing a */
    CP_GPU(add, dt, n, ga, gb, ga);
    LT_ASSERT(same_bits(dt, n, ga, ca), "add in place, n %lld", (long long)n);
    CP_CPU(axpy, dt, n, -0.3, cb, ca); /* -0.3 is not a float: rounded first */
    CP_GPU(axpy, dt, n, -0.3, gb, ga);
    LT_ASSERT(same_bits(dt, n, ga, ca), "axpy, n %lld", (long long)n);
    CP_CPU(scal, dt, n, 1.7, ca);
    CP_GPU(scal, dt, n, 1.7, ga);
    LT_ASSERT(same_bits(dt, n, ga, ca), "scal, n %lld", (long long)n);
    CP_CPU(fill, dt, n, -0.1, cc);
    CP_GPU(fill, dt, n, -0.1, gc);
    LT_ASSERT(same_bits(dt, n, gc, cc), "fill, n %lld", (long long)n);
    cp_free(ga);
    cp_free(gb);
    cp_free(gc);
    free(a), free(b), free(ca), free(cb), free(cc);
}

START_TEST(vectors_match_the_cpu)
{
    for (int t = 0; t < 2; t++)
        for (int s = 0; s < N_SIZES; s++)
            vector_case(dtypes[t], sizes[s]);
}
END_TEST

/* abs_max of x on both backends, compared exactly. */
static void abs_max_case(ladle_dtype dt, int64_t n, const void *x, const char *what)
{
    double want = -1, got = -1;
    void *g = cp_upload(dt, n, x);
    CP_CPU(abs_max, dt, n, x, &want);
    CP_GPU(abs_max, dt, n, g, &got);
    LT_ASSERT(got == want, "abs_max %s (%s, n %lld): %.17g, the CPU %.17g", what,
              ladle_dtype_name(dt), (long long)n, got, want);
    cp_free(g);
}

START_TEST(abs_max_skips_nan)
{
    for (int t = 0; t < 2; t++) {
        ladle_dtype dt = dtypes[t];
        for (int s = 0; s < N_SIZES; s++) {
            int64_t n = sizes[s];
            void *x = cp_random(dt, n, -3, 3, 3);
            abs_max_case(dt, n, x, "random");
            for (int64_t i = 0; i < n; i += 5) /* NaN around the largest */
                cp_set(dt, x, i, NAN);
            if (n > 3)
                cp_set(dt, x, n / 2 + 1, -7.5);
            abs_max_case(dt, n, x, "with NaN");
            if (n > 1)
                cp_set(dt, x, n - 2, -INFINITY);
            abs_max_case(dt, n, x, "with -inf");
            for (int64_t i = 0; i < n; i++)
                cp_set(dt, x, i, NAN);
            abs_max_case(dt, n, x, "all NaN (0)");
            free(x);
        }
    }
}
END_TEST

/* ---- dot2 ---- */

/* dot2 on both backends; the naive sum of the double products in order
 * into *naive; sum |x y| into *mag. */
static void dot2_pair(ladle_dtype dt, int64_t n, const void *x, const void *y,
                      double cpu[2], double gpu[2], double *naive, double *mag)
{
    void *gx = cp_upload(dt, n, x), *gy = cp_upload(dt, n, y);
    CP_CPU(dot2, dt, n, x, y, cpu);
    CP_GPU(dot2, dt, n, gx, gy, gpu);
    *naive = *mag = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double p = cp_get(dt, x, i) * cp_get(dt, y, i);
        *naive += p;
        *mag += fabs(p);
    }
    cp_free(gx);
    cp_free(gy);
}

/* Dot2's bound: the result is the exact sum s to |res - s| <= eps |s| +
 * gamma_n^2 sum |x y| (eps = 2^-53, gamma_n ~ n eps), whatever the order
 * of the terms; two such results are twice that apart at most. */
static double dot2_bound(int64_t n, double s, double mag)
{
    double g = (double)(n + 2) * 0x1p-53;
    return 2.0 * (0x1p-53 * fabs(s) + g * g * mag) + DBL_MIN;
}

static void dot2_check(ladle_dtype dt, int64_t n, const void *x, const void *y,
                       const char *what, int naive_fails)
{
    double cpu[2], gpu[2], naive, mag;
    dot2_pair(dt, n, x, y, cpu, gpu, &naive, &mag);
    /* hi - hi is exact when they are close (Sterbenz) */
    double diff = fabs((gpu[0] - cpu[0]) + (gpu[1] - cpu[1]));
    double tol = dot2_bound(n, cpu[0], mag);
    LT_ASSERT(diff <= tol && diff <= 1e-15 * mag + DBL_MIN,
              "dot2 %s (%s, n %lld): (%.17g, %.3g) against the CPU's (%.17g, %.3g): "
              "%.3g apart, bound %.3g",
              what, ladle_dtype_name(dt), (long long)n, gpu[0], gpu[1], cpu[0], cpu[1],
              diff, tol);
    /* the case tells a compensated sum from a naive one */
    if (naive_fails)
        LT_ASSERT(fabs(naive - (cpu[0] + cpu[1])) > 1e-15 * mag,
                  "dot2 %s: the naive sum %.17g is as good (a weak case)", what, naive);
}

/* Products that nearly cancel: x0 y0 = 1.5 2^30 first and its negative
 * last; between them random terms, and terms of 1.5 2^-23, three quarters
 * of the last place of the running sum (which stays in [2^30, 2^31)),
 * each of which a naive sum rounds up by a quarter of that place: 2^-24
 * per term, far above 1e-15 of sum |x y| (3 2^30). All the values are
 * exact in f32 as well. */
static void cancelling(ladle_dtype dt, int64_t n, void *x, void *y)
{
    for (int64_t i = 1; i < n - 1; i++) {
        int small = i % 3 != 0;
        double u = ladle__rng_uniform(11, 5, (uint64_t)i);
        double v = ladle__rng_uniform(12, 5, (uint64_t)i);
        cp_set(dt, x, i, small ? 1.5 * 0x1p-12 : u);
        cp_set(dt, y, i, small ? 0x1p-11 : v);
    }
    cp_set(dt, x, 0, 1.5 * 0x1p15);
    cp_set(dt, y, 0, 0x1p15);
    cp_set(dt, x, n - 1, 1.5 * 0x1p15);
    cp_set(dt, y, n - 1, -0x1p15);
}

START_TEST(dot2_is_compensated)
{
    for (int t = 0; t < 2; t++) {
        ladle_dtype dt = dtypes[t];
        for (int s = 0; s < N_SIZES; s++) {
            int64_t n = sizes[s];
            void *x = cp_random(dt, n, -1, 1, 4), *y = cp_random(dt, n, -1, 1, 5);
            dot2_check(dt, n, x, y, "random", 0);
            if (n >= 1000) {
                cancelling(dt, n, x, y);
                dot2_check(dt, n, x, y, "cancelling", 1);
            }
            free(x);
            free(y);
        }
    }
    double out[2] = {1, 1};
    CP_GPU(dot2, LADLE_F64, 0, NULL, NULL, out);
    LT_ASSERT(out[0] == 0.0 && out[1] == 0.0, "dot2 of nothing: (%g, %g)", out[0], out[1]);
}
END_TEST

/* ---- copies ---- */

/* copy n elements from offset so to offset dof of one buffer of `len`. */
static void copy_case(ladle_dtype dt, int64_t len, int64_t n, int64_t so, int64_t dof)
{
    void *h = cp_random(dt, len, -1, 1, 6), *g = cp_upload(dt, len, h);
    size_t es = cp_size(dt);
    CP_CPU(copy, dt, n, (char *)h + so * es, (char *)h + dof * es);
    CP_GPU(copy, dt, n, (char *)g + so * es, (char *)g + dof * es);
    LT_ASSERT(same_bits(dt, len, g, h), "copy of %lld from %lld to %lld (%s)", (long long)n,
              (long long)so, (long long)dof, ladle_dtype_name(dt));
    cp_free(g);
    free(h);
}

START_TEST(copy_is_memmove)
{
    /* shifts from one element (one block, several rounds) through a
     * sixteenth of the length (split into runs) to all but one */
    const int64_t n = 9001, shifts[] = {1, 3, 257, 562, 563, 2000, 4500, 9000};
    for (int t = 0; t < 2; t++) {
        ladle_dtype dt = dtypes[t];
        copy_case(dt, 3 * n, n, 0, n + 5); /* disjoint */
        copy_case(dt, 3 * n, n, 2 * n, 3);
        copy_case(dt, 3 * n, n, 7, 7); /* onto itself */
        copy_case(dt, 3 * n, 0, 0, 1);
        copy_case(dt, 3, 1, 0, 1);
        for (size_t k = 0; k < sizeof shifts / sizeof shifts[0]; k++) {
            copy_case(dt, 2 * n + 20, n, 10, 10 + shifts[k]); /* up */
            copy_case(dt, 2 * n + 20, n, 10 + shifts[k], 10); /* down */
        }
        copy_case(dt, 2 * n, 5, 0, 2); /* short ones */
        copy_case(dt, 2 * n, 5, 2, 0);
    }
}
END_TEST

/* ---- boxes ---- */

/* A strided box inside a buffer: base offset and strides. */
typedef struct layout {
    int64_t str[4], base, len;
} layout;

/* How a box lies in its buffer. */
enum { ROW_MAJOR, PADDED, TRANSPOSED, INNER_2, REVERSED, BROADCAST, N_KINDS };

static layout make_layout(int nd, const int64_t *ext, int kind, uint64_t *state)
{
    layout l = {{0}, 0, 1};
    int order[4];
    for (int d = 0; d < nd; d++) /* innermost first */
        order[d] = kind == TRANSPOSED ? d : nd - 1 - d;
    int64_t s = kind == INNER_2 ? 2 : 1;
    for (int j = 0; j < nd; j++) {
        int d = order[j];
        l.str[d] = kind == BROADCAST ? 0 : s;
        s *= ext[d] + (kind == ROW_MAJOR ? 0 : (int64_t)draw(state, 3));
    }
    if (kind == REVERSED && nd > 0)
        l.str[0] = -l.str[0];
    /* the lowest and highest offsets the box reaches */
    int64_t lo = 0, hi = 0;
    for (int d = 0; d < nd; d++) {
        int64_t reach = (ext[d] - 1) * l.str[d];
        if (reach < 0)
            lo += reach;
        else
            hi += reach;
    }
    l.base = -lo + (int64_t)draw(state, 4);
    l.len = l.base + hi + 1 + (int64_t)draw(state, 4);
    return l;
}

typedef struct box_case {
    int nd;
    int64_t ext[4];
    layout src, dst;
} box_case;

/* Run one box slot on both backends over the whole buffers and compare
 * every element of the destination (those outside the box must stay). */
static void box_run(ladle_dtype dt, int slot, ladle_box_mode mode, const box_case *c,
                    const char *what)
{
    size_t es = cp_size(dt);
    void *hs = cp_random(dt, c->src.len, -1, 1, 7),
         *hd = cp_random(dt, c->dst.len, -1, 1, 8);
    void *gs = cp_upload(dt, c->src.len, hs), *gd = cp_upload(dt, c->dst.len, hd);
    const char *cs = (char *)hs + c->src.base * es, *gss = (char *)gs + c->src.base * es;
    char *cd = (char *)hd + c->dst.base * es, *gdd = (char *)gd + c->dst.base * es;
    int zero = mode == LADLE_BOX_ZERO;
    if (slot == 0) { /* copy_box; ZERO without a source */
        CP_CPU(copy_box, dt, mode, c->nd, c->ext, zero ? NULL : cs,
               zero ? NULL : c->src.str, cd, c->dst.str);
        CP_GPU(copy_box, dt, mode, c->nd, c->ext, zero ? NULL : gss,
               zero ? NULL : c->src.str, gdd, c->dst.str);
    } else if (slot == 1) {
        CP_CPU(pack, dt, c->nd, c->ext, cs, c->src.str, (char *)hd);
        CP_GPU(pack, dt, c->nd, c->ext, gss, c->src.str, (char *)gd);
    } else {
        CP_CPU(unpack, dt, mode, c->nd, c->ext, (char *)hs, cd, c->dst.str);
        CP_GPU(unpack, dt, mode, c->nd, c->ext, (char *)gs, gdd, c->dst.str);
    }
    static const char *slots[] = {"copy_box", "pack", "unpack"};
    LT_ASSERT(same_bits(dt, c->dst.len, gd, hd),
              "%s %s mode %d (%s), %d dims %lld %lld %lld %lld", slots[slot], what,
              (int)mode, ladle_dtype_name(dt), c->nd, (long long)c->ext[0],
              (long long)c->ext[1], (long long)c->ext[2], (long long)c->ext[3]);
    cp_free(gs);
    cp_free(gd);
    free(hs);
    free(hd);
}

/* The large boxes take a few pairs of layouts only: the emulator is slow. */
static int pair_kept(int64_t vol, int ks, int kd)
{
    int few = (ks == TRANSPOSED && kd == PADDED) || (ks == BROADCAST && kd == INNER_2) ||
              (ks == REVERSED && kd == REVERSED);
    return vol <= 1000 || few || (vol <= 10000 && ks == kd);
}

/* Every slot and mode on a box of extents ext, each side laid out in
 * every way (a broadcast only as a source). */
static void box_shapes(ladle_dtype dt, int nd, const int64_t *ext, uint64_t *state)
{
    static const char *kinds[] = {"row-major",      "padded",   "transposed",
                                  "inner stride 2", "reversed", "broadcast"};
    box_case c = {nd, {1, 1, 1, 1}, {{0}, 0, 0}, {{0}, 0, 0}};
    memcpy(c.ext, ext, (size_t)nd * sizeof *ext);
    int64_t vol = 1;
    for (int d = 0; d < nd; d++)
        vol *= ext[d];
    for (int ks = 0; ks < N_KINDS; ks++)
        for (int kd = 0; kd < N_KINDS - 1; kd++) {
            if (!pair_kept(vol, ks, kd))
                continue;
            c.src = make_layout(nd, ext, ks, state);
            c.dst = make_layout(nd, ext, kd, state);
            for (int m = 0; m < 3; m++)
                box_run(dt, 0, (ladle_box_mode)m, &c, kinds[ks]);
            layout packed = make_layout(nd, ext, ROW_MAJOR, state);
            packed.base = 0; /* pack writes, unpack reads, from the start */
            packed.len = vol;
            box_case p = c;
            p.dst = packed;
            box_run(dt, 1, LADLE_BOX_COPY, &p, kinds[ks]);
            p = c;
            p.src = packed;
            for (int m = 0; m < 3; m++)
                box_run(dt, 2, (ladle_box_mode)m, &p, kinds[kd]);
        }
}

START_TEST(boxes_match_the_cpu)
{
    /* large boxes: past the emulator's grid, and past an H200's */
    static const struct {
        int nd;
        int64_t ext[4];
    } big[] = {{3, {3, 5, 700}},
               {3, {40, 31, 7}},
               {4, {2, 3, 3, 460}},
               {1, {9000}},
               {3, {3, 433, 211}}};
    uint64_t state = 0;
    for (int t = 0; t < 2; t++) {
        ladle_dtype dt = dtypes[t];
        for (int nd = 1; nd <= 4; nd++)
            for (int r = 0; r < 3; r++) {
                int64_t ext[4];
                for (int d = 0; d < nd; d++) /* unit extents included */
                    ext[d] = 1 + (int64_t)draw(&state, 6);
                box_shapes(dt, nd, ext, &state);
            }
        for (int b = 0; b < 5; b++)
            box_shapes(dt, big[b].nd, big[b].ext, &state);
    }
}
END_TEST

START_TEST(boxes_of_nothing_and_of_one)
{
    for (int t = 0; t < 2; t++) {
        ladle_dtype dt = dtypes[t];
        /* ndim 0: one element */
        box_case c = {0, {1, 1, 1, 1}, {{0}, 1, 3}, {{0}, 2, 4}};
        for (int m = 0; m < 3; m++)
            box_run(dt, 0, (ladle_box_mode)m, &c, "ndim 0");
        box_run(dt, 1, LADLE_BOX_COPY, &c, "ndim 0");
        box_run(dt, 2, LADLE_BOX_ADD, &c, "ndim 0");
        /* a zero extent: nothing happens, whatever the other extents */
        box_case z = {3, {4, 0, 5, 1}, {{5, 1, 1}, 0, 30}, {{5, 1, 1}, 0, 30}};
        for (int m = 0; m < 3; m++)
            box_run(dt, 0, (ladle_box_mode)m, &z, "zero extent");
        box_run(dt, 2, LADLE_BOX_ADD, &z, "zero extent");
    }
}
END_TEST

/* ---- gemm ---- */

typedef struct gemm_case {
    int ta, tb;
    int64_t m, n, k, lda, ldb, ldc;
    double alpha, beta;
} gemm_case;

/* Per element of C: the size of what it sums, |alpha| sum |a||b| +
 * |beta c|, in double, to scale the f32 error bounds. */
static double *gemm_scale(ladle_dtype dt, const gemm_case *g, const void *a, const void *b,
                          const void *c)
{
    double *s = calloc((size_t)(g->m * g->n + 1), sizeof *s);
    for (int64_t i = 0; i < g->m; i++)
        for (int64_t j = 0; j < g->n; j++) {
            double sum = 0.0;
            for (int64_t l = 0; l < g->k; l++) {
                double av = cp_get(dt, a, g->ta ? l * g->lda + i : i * g->lda + l);
                double bv = cp_get(dt, b, g->tb ? j * g->ldb + l : l * g->ldb + j);
                sum += fabs(av * bv);
            }
            double cv = cp_get(dt, c, i * g->ldc + j);
            s[i * g->n + j] =
                fabs(g->alpha) * sum + (g->beta == 0.0 ? 0.0 : fabs(g->beta * cv));
        }
    return s;
}

/* The largest |gpu - cpu| / bound over C's elements (and any change of
 * C's padding counts as infinite), where bound = rel * scale + tiny. */
static double gemm_ratio(ladle_dtype dt, const gemm_case *g, const void *got,
                         const void *want, const double *scale, double rel)
{
    double worst = 0.0;
    for (int64_t i = 0; i < g->m; i++)
        for (int64_t j = 0; j < g->ldc; j++) {
            double x = cp_get(dt, got, i * g->ldc + j), y = cp_get(dt, want, i * g->ldc + j);
            if (j >= g->n) {
                if (memcmp(&x, &y, sizeof x) != 0)
                    return INFINITY;
                continue;
            }
            double r = fabs(x - y) / (rel * scale[i * g->n + j] + 1e-300);
            if (!(r <= worst))
                worst = r;
        }
    return worst;
}

/* Rows of A and B as stored (row-major), for buffer sizes. */
static int64_t rows_a(const gemm_case *g) { return g->ta ? g->k : g->m; }
static int64_t rows_b(const gemm_case *g) { return g->tb ? g->n : g->k; }

/* Run g on random data on both backends (NaN in C where nan_c); the
 * worst ratio of their difference to the bound rel * scale. */
static double gemm_run(ladle_dtype dt, const gemm_case *g, int nan_c, double rel)
{
    int64_t la = rows_a(g) * g->lda, lb = rows_b(g) * g->ldb, lc = g->m * g->ldc;
    void *a = cp_random(dt, la, -1, 1, 9), *b = cp_random(dt, lb, -1, 1, 10);
    void *c = cp_random(dt, lc, -1, 1, 11);
    if (nan_c) /* beta = 0: C is written, never read */
        for (int64_t i = 0; i < lc; i++)
            if (i % g->ldc < g->n)
                cp_set(dt, c, i, NAN);
    double *scale = gemm_scale(dt, g, a, b, c);
    void *ga = cp_upload(dt, la, a), *gb = cp_upload(dt, lb, b), *gc = cp_upload(dt, lc, c);
    CP_CPU(gemm, dt, g->ta, g->tb, g->m, g->n, g->k, g->alpha, a, g->lda, b, g->ldb,
           g->beta, c, g->ldc);
    CP_GPU(gemm, dt, g->ta, g->tb, g->m, g->n, g->k, g->alpha, ga, g->lda, gb, g->ldb,
           g->beta, gc, g->ldc);
    void *got = cp_download(dt, lc, gc);
    double r = gemm_ratio(dt, g, got, c, scale, rel);
    free(got);
    free(scale);
    cp_free(ga);
    cp_free(gb);
    cp_free(gc);
    free(a), free(b), free(c);
    return r;
}

/* The bound's factor: each backend's element is within (k + 2) u of the
 * size of what it sums (k products and sums, alpha's and beta's
 * products), u = 2^-24 in f32, so the two are twice that apart. f64 is
 * held to the same form with u = 2^-53. */
static double gemm_rel(ladle_dtype dt, int64_t k)
{
    return 2.0 * (double)(k + 2) * (dt == LADLE_F32 ? 0x1p-24 : 0x1p-53);
}

/* Size mnk with transposes tr (bit 0: A, bit 1: B), variant v of the
 * leading dimensions (v past the columns: sub-matrices) and of alpha and
 * beta (beta 0 with NaN in C, which must not be read). */
static gemm_case sized_case(const int64_t *mnk, int tr, int v)
{
    static const double ab[][2] = {{1, 0}, {-0.75, 1.25}, {2, 1}};
    int ta = tr & 1, tb = tr >> 1;
    int64_t lda = (ta ? mnk[0] : mnk[2]) + v, ldb = (tb ? mnk[2] : mnk[1]) + 2 * v;
    gemm_case g = {ta,  tb,  mnk[0],     mnk[1],   mnk[2],
                   lda, ldb, mnk[1] + v, ab[v][0], ab[v][1]};
    return g;
}

static void gemm_sized(ladle_dtype dt, const int64_t *mnk, int tr, int v)
{
    gemm_case g = sized_case(mnk, tr, v);
    double r = gemm_run(dt, &g, g.beta == 0.0, gemm_rel(dt, g.k));
    LT_ASSERT(r <= 1.0,
              "gemm %s%s %lld x %lld x %lld (%s), alpha %g beta %g: %.3g of the bound",
              g.ta ? "T" : "N", g.tb ? "T" : "N", (long long)g.m, (long long)g.n,
              (long long)g.k, ladle_dtype_name(dt), g.alpha, g.beta, r);
}

START_TEST(gemm_matches_the_cpu)
{
    static const int64_t mnk[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {64, 48, 40}};
    for (int t = 0; t < 2; t++)
        for (int s = 0; s < 4; s++)
            for (int tr = 0; tr < 4; tr++)
                for (int v = 0; v < 3; v++)
                    gemm_sized(dtypes[t], mnk[s], tr, v);
}
END_TEST

START_TEST(gemm_of_empty_sizes)
{
    for (int t = 0; t < 2; t++) {
        ladle_dtype dt = dtypes[t];
        /* k = 0: C = beta C (beta 0 clears NaN, beta 1 leaves C) */
        const double betas[] = {0.0, 1.0, -2.5};
        for (int v = 0; v < 3; v++) {
            gemm_case g = {0, 1, 5, 7, 0, 1, 1, 9, 1.5, betas[v]};
            double r = gemm_run(dt, &g, betas[v] == 0.0, gemm_rel(dt, 0));
            LT_ASSERT(r <= 1.0, "gemm k = 0, beta %g (%s): %.3g of the bound", betas[v],
                      ladle_dtype_name(dt), r);
        }
        /* m = 0, n = 0: nothing */
        gemm_case m0 = {0, 0, 0, 4, 3, 3, 4, 4, 1.0, 0.5};
        LT_ASSERT(gemm_run(dt, &m0, 0, gemm_rel(dt, 3)) <= 1.0, "gemm m = 0");
        gemm_case n0 = {1, 0, 4, 0, 3, 4, 1, 1, 1.0, 0.5};
        LT_ASSERT(gemm_run(dt, &n0, 0, gemm_rel(dt, 3)) <= 1.0, "gemm n = 0");
    }
    /* beyond cuBLAS's int: refused as the CPU refuses it */
    LT_FAILS(cp_gpu()->fn->gemm(cp_gpu(), LADLE_F32, 0, 0, (int64_t)INT32_MAX + 1, 1, 1,
                                1.0, NULL, 1, NULL, 1, 0.0, NULL, 1),
             LADLE_ERR_ARG);
    LT_FAILS(cp_gpu()->fn->gemm(cp_gpu(), LADLE_F64, 0, 0, 1, 1, 1, 1.0, NULL, 1, NULL,
                                (int64_t)INT32_MAX + 2, 0.0, NULL, 1),
             LADLE_ERR_ARG);
}
END_TEST

/* TF32 tensor cores read f32 inputs with 10 mantissa bits, rounded (as the
 * emulator does) or cut (hardware may drop the low bits): each input is off
 * by less than 2^-10 relative, a product by less than 2^-9 + 2^-20, so the
 * f32 bound grows by that much of the products' size. With TF32 off again
 * the f32 bound holds. */
START_TEST(gemm_tf32_is_an_option)
{
    gemm_case g = {0, 1, 64, 48, 40, 40, 40, 48, 1.0, 0.5};
    double f32 = gemm_rel(LADLE_F32, g.k), tf32 = f32 + 0x1p-9 + 0x1p-20;
    LT_OK(ladle_device_set(LADLE_CUDA, LADLE_DEVICE_TF32, 1));
    double r_tf32 = gemm_run(LADLE_F32, &g, 0, tf32);
    double r_as_f32 = gemm_run(LADLE_F32, &g, 0, f32);
    LT_OK(ladle_device_set(LADLE_CUDA, LADLE_DEVICE_TF32, 0));
    double r_off = gemm_run(LADLE_F32, &g, 0, f32);
    double r_f64 = gemm_run(LADLE_F64, &g, 0, gemm_rel(LADLE_F64, g.k));
    LT_ASSERT(r_tf32 <= 1.0, "TF32 on: %.3g of the TF32 bound", r_tf32);
    LT_ASSERT(r_off <= 1.0, "TF32 off: %.3g of the f32 bound", r_off);
    LT_ASSERT(r_f64 <= 1.0, "f64 with TF32 set and unset: %.3g of its bound", r_f64);
    /* the emulator rounds the inputs as tensor cores do: the option took */
    if (emulated())
        LT_ASSERT(r_as_f32 > 1.0, "TF32 on, yet within the f32 bound (%.3g)", r_as_f32);
}
END_TEST

/* ---- random fills ---- */

/* fill_init (d non-NULL) or fill_random over box ext laid out as l, both
 * backends, the whole buffer compared: bit for bit, or to tol. */
static void random_case(ladle_dtype dt, int nd, const int64_t *ext, const layout *l,
                        const ladle_init_desc *d, double tol, const char *what)
{
    size_t es = cp_size(dt);
    void *h = cp_random(dt, l->len, -9, 9, 12), *g = cp_upload(dt, l->len, h);
    char *hx = (char *)h + l->base * es, *gx = (char *)g + l->base * es;
    if (d != NULL) {
        CP_CPU(fill_init, dt, d, hx);
        CP_GPU(fill_init, dt, d, gx);
    } else {
        CP_CPU(fill_random, dt, nd, ext, l->str, 42, 7, hx);
        CP_GPU(fill_random, dt, nd, ext, l->str, 42, 7, gx);
    }
    if (tol == 0.0)
        LT_ASSERT(same_bits(dt, l->len, g, h), "%s (%s), %d dims: not the CPU's bits", what,
                  ladle_dtype_name(dt), nd);
    else
        CP_CLOSE(dt, l->len, g, h, tol, what);
    cp_free(g);
    free(h);
}

START_TEST(random_fills_match_the_cpu)
{
    uint64_t state = 100;
    static const int64_t boxes[][4] = {{9001},    {5, 1, 33},   {3, 4, 5, 6},
                                       {31, 300}, {1, 1, 1, 1}, {3, 433, 211}};
    static const int nds[] = {1, 3, 4, 2, 4, 3};
    /* normal values: the device's log and cos may differ from the host's in
     * a few units of the last place of a double (the emulator runs the
     * host's: exact), which rounds to the same float but rarely */
    double normal_tol[2] = {0x1p-23, 8 * 0x1p-53};
    int exact = emulated();
    for (int t = 0; t < 2; t++)
        for (int b = 0; b < 6; b++)
            for (int kind = ROW_MAJOR; kind <= REVERSED; kind++) {
                ladle_dtype dt = dtypes[t];
                int nd = nds[b];
                layout l = make_layout(nd, boxes[b], kind, &state);
                random_case(dt, nd, boxes[b], &l, NULL, 0.0, "fill_random");
                /* the box at an offset in a larger whole */
                ladle_init_desc d = {.ndim = nd, .scale = 0.7, .seed = 99, .stream = 3};
                for (int k = 0; k < nd; k++) {
                    d.shape[k] = boxes[b][k];
                    d.strides[k] = l.str[k];
                    d.offset[k] = (int64_t)draw(&state, 3);
                    d.global[k] = d.offset[k] + d.shape[k] + (int64_t)draw(&state, 3);
                }
                random_case(dt, nd, NULL, &l, &d, 0.0, "fill_init uniform");
                d.gaussian = 1;
                random_case(dt, nd, NULL, &l, &d, exact ? 0.0 : normal_tol[t],
                            "fill_init normal");
            }
    /* ndim 0: one value, counter 0 */
    layout one = {{0}, 1, 3};
    random_case(LADLE_F64, 0, NULL, &one, NULL, 0.0, "fill_random of a scalar");
}
END_TEST

LT_SUITE("cuda_blas", "blas", 600, vectors_match_the_cpu, abs_max_skips_nan,
         dot2_is_compensated, copy_is_memmove, boxes_match_the_cpu,
         boxes_of_nothing_and_of_one, gemm_matches_the_cpu, gemm_of_empty_sizes,
         gemm_tf32_is_an_option, random_fills_match_the_cpu)
