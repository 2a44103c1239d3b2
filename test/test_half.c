/* The 2-byte formats bf16 and f16: conversions against references built
 * here from the formats' definitions (values by ldexp, the nearest by a
 * search over them) and, for f16, against the compiler's _Float16; then
 * ladle_tensor_convert on the suite's device for every pair of dtypes, the
 * tensor calls on bf16 and f16 tensors, the box ADD, and the refusals of
 * the calls that do not take them yet (the optimizer's master weights are
 * test_optim's). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "src/core/backend.h"
#include "src/core/half.h"

/* A format by its field widths: bf16 8/7, f16 5/10. */
typedef struct fmt {
    const char *name;
    int ebits, mbits;
    ladle_dtype dtype;
} fmt;

static const fmt BF16 = {"bf16", 8, 7, LADLE_BF16}, F16 = {"f16", 5, 10, LADLE_F16};

/* The value of bits h by the definition of a binary format. */
static double value_of(const fmt *f, uint16_t h)
{
    int bias = (1 << (f->ebits - 1)) - 1, emax = (1 << f->ebits) - 1;
    int s = h >> (f->ebits + f->mbits), e = (h >> f->mbits) & emax;
    double m = h & ((1 << f->mbits) - 1), v;
    if (e == emax)
        v = m == 0 ? INFINITY : NAN;
    else if (e == 0)
        v = ldexp(m, 1 - bias - f->mbits);
    else
        v = ldexp(m + ldexp(1, f->mbits), e - bias - f->mbits);
    return s ? -v : v;
}

static int is_nan_bits(const fmt *f, uint16_t h)
{
    uint16_t inf = (uint16_t)(((1 << f->ebits) - 1) << f->mbits);
    return (h & 0x7fff) > inf;
}

/* The bits of d rounded to nearest, ties to even, by a search over the
 * positive patterns (the values grow with them): the largest value <= |d|
 * and the next, compared through 2|d| against their sum, exact in double
 * for neighbours of 8 or 11 significant bits. */
static uint16_t nearest(const fmt *f, double d)
{
    uint16_t sign = (uint16_t)(signbit(d) ? 1u << (f->ebits + f->mbits) : 0);
    uint16_t inf = (uint16_t)(((1 << f->ebits) - 1) << f->mbits);
    double a = fabs(d);
    if (d != d)
        return 0;         /* the caller checks NaN apart */
    int lo = 0, hi = inf; /* value_of(lo) <= a, search the largest such */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (value_of(f, (uint16_t)mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    if (value_of(f, (uint16_t)hi) <= a) /* a is inf */
        return sign | inf;
    double vl = value_of(f, (uint16_t)lo);
    /* past the largest finite value, the next "value" is 2^(emax+1) */
    double vh = hi == inf ? ldexp(1, (1 << (f->ebits - 1))) : value_of(f, (uint16_t)hi);
    double twice = 2 * a, sum = vl + vh;
    int pick = twice < sum ? lo : twice > sum ? hi : (lo % 2 == 0 ? lo : hi);
    return sign | (uint16_t)pick;
}

static uint16_t from_f32(const fmt *f, float x)
{
    return f->dtype == LADLE_BF16 ? ladle__f32_to_bf16(x) : ladle__f32_to_f16(x);
}

static uint16_t from_f64(const fmt *f, double x)
{
    return f->dtype == LADLE_BF16 ? ladle__f64_to_bf16(x) : ladle__f64_to_f16(x);
}

static double to_f64(const fmt *f, uint16_t h)
{
    return f->dtype == LADLE_BF16 ? ladle__bf16_to_f32(h) : ladle__f16_to_f32(h);
}

/* got against the reference for d: equal bits, or both NaN of d's sign */
static int agrees(const fmt *f, double d, uint16_t got)
{
    if (d != d)
        return is_nan_bits(f, got) && (!!(got & 0x8000) == !!signbit(d));
    return got == nearest(f, d);
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* a double of random significand and an exponent in [lo, hi] */
static double random_double(int lo, int hi)
{
    double m = 1 + (double)(next() >> 11) * 0x1p-53;
    double v = ldexp(m, lo + (int)(next() % (uint64_t)(hi - lo + 1)));
    return next() & 1 ? -v : v;
}

START_TEST(widening_is_the_definition)
{
    int bad = 0;
    for (int h = 0; h < 65536; h++) {
        for (int k = 0; k < 2; k++) {
            const fmt *f = k ? &F16 : &BF16;
            double want = value_of(f, (uint16_t)h), got = to_f64(f, (uint16_t)h);
            if (want != want ? !(got != got)
                             : !(got == want && signbit(got) == signbit(want)))
                bad++;
        }
        /* the compiler's own f16 */
        uint16_t bits = (uint16_t)h;
        _Float16 g;
        memcpy(&g, &bits, sizeof g);
        double want = (double)g, got = ladle__f16_to_f32(bits);
        if (want == want && !(want == got && signbit(want) == signbit(got)))
            bad++;
    }
    LT_ASSERT(bad == 0, "%d of 2 x 65536 widenings differ from the definition", bad);
}
END_TEST

/* Every rounding boundary of both formats: each pair of neighbours, their
 * midpoint (a tie), and the doubles and floats just beside it, both signs. */
START_TEST(narrowing_at_every_boundary)
{
    int bad = 0, cases = 0;
    for (int k = 0; k < 2; k++) {
        const fmt *f = k ? &F16 : &BF16;
        int inf = ((1 << f->ebits) - 1) << f->mbits;
        for (int h = 0; h < inf; h++) {
            double lo = value_of(f, (uint16_t)h);
            double hi = h + 1 == inf ? ldexp(1, 1 << (f->ebits - 1))
                                     : value_of(f, (uint16_t)(h + 1));
            double mid = (lo + hi) / 2;
            double ds[] = {lo,
                           mid,
                           nextafter(mid, 0),
                           nextafter(mid, INFINITY),
                           nextafter(lo, INFINITY),
                           nextafter(hi, 0)};
            for (int i = 0; i < 6; i++)
                for (int s = 0; s < 2; s++) {
                    double d = s ? -ds[i] : ds[i];
                    cases++;
                    bad += !agrees(f, d, from_f64(f, d));
                    float x = (float)d;
                    if ((double)x == d || fabs(d) > FLT_MAX)
                        bad += !agrees(f, x, from_f32(f, x));
                    /* the floats beside d */
                    float xs[] = {nextafterf(x, 0), nextafterf(x, INFINITY)};
                    for (int j = 0; j < 2; j++)
                        bad += !agrees(f, xs[j], from_f32(f, xs[j]));
                }
        }
    }
    LT_ASSERT(bad == 0, "%d wrong roundings in %d boundary cases", bad, cases);
}
END_TEST

START_TEST(narrowing_random_and_special_values)
{
    static const double special[] = {
        0.0,         -0.0,     INFINITY,    -INFINITY,    NAN,      -NAN,     FLT_MAX,
        -FLT_MAX,    DBL_MAX,  1e-300,      -1e-300,      FLT_MIN,  0x1p-149, 0x1p-150,
        0x1p-133,    0x1p-134, 0x1.01p-134, 65504,        65519.99, 65520,    0x1.fep127,
        0x1.ff8p127, 0x1p-24,  0x1p-25,     0x1.0001p-25, 3.0e38,   1.0 / 3};
    int bad = 0, gcc_bad = 0;
    for (int k = 0; k < 2; k++) {
        const fmt *f = k ? &F16 : &BF16;
        for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
            bad += !agrees(f, special[i], from_f64(f, special[i]));
            bad += !agrees(f, (float)special[i], from_f32(f, (float)special[i]));
        }
        for (int i = 0; i < 100000; i++) {
            double d = k ? random_double(-28, 17) : random_double(-140, 129);
            float x = (float)d;
            bad += !agrees(f, d, from_f64(f, d)) + !agrees(f, x, from_f32(f, x));
            if (k) { /* the compiler's correctly rounded conversions */
                _Float16 gd = (_Float16)d, gx = (_Float16)x;
                uint16_t bd, bx;
                memcpy(&bd, &gd, 2), memcpy(&bx, &gx, 2);
                gcc_bad += bd != ladle__f64_to_f16(d) || bx != ladle__f32_to_f16(x);
            }
        }
    }
    LT_ASSERT(bad == 0 && gcc_bad == 0, "%d against the search, %d against _Float16", bad,
              gcc_bad);
}
END_TEST

static const ladle_dtype dtypes[] = {LADLE_F32, LADLE_F64, LADLE_BF16, LADLE_F16};

/* element i of host buffer p of dtype t, widened */
static double host_get(ladle_dtype t, const void *p, int64_t i)
{
    switch (t) {
    case LADLE_F32:
        return ((const float *)p)[i];
    case LADLE_BF16:
        return value_of(&BF16, ((const uint16_t *)p)[i]);
    case LADLE_F16:
        return value_of(&F16, ((const uint16_t *)p)[i]);
    default:
        return ((const double *)p)[i];
    }
}

/* the bits of d in dtype t, by the references */
static void host_put(ladle_dtype t, void *p, int64_t i, double d)
{
    switch (t) {
    case LADLE_F32:
        ((float *)p)[i] = (float)d;
        return;
    case LADLE_BF16:
        ((uint16_t *)p)[i] = d != d ? (uint16_t)0x7fc0 : nearest(&BF16, d);
        return;
    case LADLE_F16:
        ((uint16_t *)p)[i] = d != d ? (uint16_t)0x7e00 : nearest(&F16, d);
        return;
    default:
        ((double *)p)[i] = d;
    }
}

static int same_value(double a, double b)
{
    return (a != a && b != b) || (a == b && signbit(a) == signbit(b));
}

START_TEST(convert_every_pair_on_the_device)
{
    enum { N = 4099 };
    int bad = 0;
    char *src = malloc(N * 8), *dst = malloc(N * 8);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
            ladle_dtype xt = dtypes[a], yt = dtypes[b];
            for (int64_t i = 0; i < N; i++) {
                double d = i % 97 == 0
                               ? (i % 2 ? NAN : -INFINITY)
                               : random_double(i % 3 ? -20 : -150, i % 5 ? 15 : 140);
                host_put(xt, src, i, d);
            }
            ladle_tensor *x = lt_tensor(xt, 1, (int64_t[]){N});
            ladle_tensor *y = lt_tensor(yt, 1, (int64_t[]){N});
            LT_OK(ladle_tensor_write(x, src));
            LT_OK(ladle_tensor_convert(y, x));
            LT_OK(ladle_tensor_read(y, dst));
            for (int64_t i = 0; i < N; i++) {
                double want = host_get(xt, src, i);
                char one[8];
                host_put(yt, one, 0, want);
                bad += !same_value(host_get(yt, dst, i), host_get(yt, one, 0));
            }
            LT_DESTROY(&x, &y);
        }
    free(src), free(dst);
    LT_ASSERT(bad == 0, "%d elements converted wrong over the 16 pairs", bad);
}
END_TEST

START_TEST(tensor_calls_on_half_tensors)
{
    for (int k = 0; k < 2; k++) {
        const fmt *f = k ? &F16 : &BF16;
        ladle_tensor *t = lt_tensor(f->dtype, 2, (int64_t[]){3, 5});
        LT_ASSERT(ladle_dtype_size(f->dtype) == 2 &&
                      !strcmp(ladle_dtype_name(f->dtype), f->name),
                  "size and name of %s", f->name);
        LT_OK(ladle_tensor_fill(t, 1.0 / 3));
        double v = 0;
        LT_OK(ladle_tensor_get(t, 14, &v));
        LT_ASSERT(v == value_of(f, nearest(f, 1.0 / 3)), "%s fill 1/3 gave %.17g", f->name,
                  v);
        LT_OK(ladle_tensor_set(t, 7, -1e9)); /* past f16's range; bf16 rounds */
        LT_OK(ladle_tensor_get(t, 7, &v));
        LT_ASSERT(v == value_of(f, nearest(f, -1e9)), "%s set -1e9 gave %g", f->name, v);
        uint16_t bits[15], back[15];
        for (int i = 0; i < 15; i++)
            bits[i] = nearest(f, random_double(-10, 10));
        LT_OK(ladle_tensor_write(t, bits));
        ladle_tensor *c = lt_tensor(f->dtype, 2, (int64_t[]){3, 5});
        LT_OK(ladle_tensor_copy(c, t));
        LT_OK(ladle_tensor_read(c, back));
        LT_ASSERT(!memcmp(bits, back, sizeof bits), "%s write, copy, read", f->name);
        /* a strided copy on the host: the odd columns of a 3 x 10 block */
        uint16_t wide[30] = {0};
        ladle_tensor *w = NULL, *h = NULL;
        LT_OK(ladle_tensor_wrap(f->dtype, LADLE_CPU, 2, (int64_t[]){3, 5},
                                (int64_t[]){10, 2}, wide + 1, &w));
        LT_OK(ladle_tensor_create(f->dtype, LADLE_CPU, 2, (int64_t[]){3, 5}, &h));
        LT_OK(ladle_tensor_write(h, bits));
        LT_OK(ladle_tensor_copy(w, h));
        int ok = 1;
        for (int i = 0; i < 30; i++)
            ok &= wide[i] == (i % 2 ? bits[(i / 10) * 5 + (i % 10) / 2] : 0);
        LT_ASSERT(ok, "%s strided copy", f->name);
        LT_OK(ladle_tensor_fill(w, -2.5)); /* strided fill */
        for (int i = 0; i < 30; i++)
            ok &= wide[i] == (i % 2 ? nearest(f, -2.5) : 0);
        LT_ASSERT(ok, "%s strided fill", f->name);
        LT_DESTROY(&t, &c, &w, &h);
    }
}
END_TEST

/* dst += src over a box of the device's backend: each sum rounded once */
START_TEST(box_add_rounds_once)
{
    const ladle_backend *be = ladle__backend(lt_device());
    LT_ASSERT(be != NULL, "a backend for the device");
    enum { N = 1000 };
    for (int k = 0; k < 2; k++) {
        const fmt *f = k ? &F16 : &BF16;
        uint16_t a[N], b[N], got[N];
        for (int i = 0; i < N; i++) {
            a[i] = nearest(f, random_double(k ? -14 : -120, k ? 14 : 120));
            b[i] = nearest(f, i % 4 ? -value_of(f, a[i]) * 1.001 : random_double(-14, 14));
        }
        ladle_tensor *x = lt_tensor(f->dtype, 1, (int64_t[]){N});
        ladle_tensor *y = lt_tensor(f->dtype, 1, (int64_t[]){N});
        LT_OK(ladle_tensor_write(x, a));
        LT_OK(ladle_tensor_write(y, b));
        int64_t ext = N, one = 1;
        LT_OK(be->fn->copy_box(be, f->dtype, LADLE_BOX_ADD, 1, &ext, ladle_tensor_data(x),
                               &one, ladle_tensor_data(y), &one));
        LT_OK(be->fn->synchronize(be));
        LT_OK(ladle_tensor_read(y, got));
        int bad = 0;
        for (int i = 0; i < N; i++)
            bad += got[i] != nearest(f, value_of(f, a[i]) + value_of(f, b[i]));
        LT_ASSERT(bad == 0, "%s: %d sums rounded wrong", f->name, bad);
        LT_DESTROY(&x, &y);
    }
}
END_TEST

START_TEST(refusals)
{
    ladle_tensor *h = lt_tensor(LADLE_BF16, 1, (int64_t[]){6});
    ladle_tensor *g = lt_tensor(LADLE_BF16, 1, (int64_t[]){6});
    ladle_tensor *f5 = lt_tensor(LADLE_F32, 1, (int64_t[]){5});
    ladle_tensor *i6 = lt_tensor(LADLE_I64, 1, (int64_t[]){6});
    double v;
    LT_FAILS_SAYING(ladle_tensor_dot(h, g, &v), LADLE_ERR_DTYPE, "bf16");
    LT_FAILS_SAYING(ladle_tensor_fill_random(h, 1, 0), LADLE_ERR_DTYPE, "bf16");
    LT_FAILS_SAYING(ladle_tensor_convert(h, i6), LADLE_ERR_DTYPE, "i64");
    LT_FAILS(ladle_tensor_convert(h, f5), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_tensor_convert(NULL, f5), LADLE_ERR_NULL);
    /* a view of the same bytes as another dtype overlaps */
    if (lt_device() == LADLE_CPU) {
        ladle_tensor *alias = NULL;
        LT_OK(ladle_tensor_wrap(LADLE_F16, LADLE_CPU, 1, (int64_t[]){6}, NULL,
                                ladle_tensor_data(h), &alias));
        LT_FAILS_SAYING(ladle_tensor_convert(alias, h), LADLE_ERR_ARG, "overlap");
        LT_DESTROY(&alias);
    }
    /* what does not take the 2-byte formats yet says so at creation */
    ladle_op *op = NULL;
    ladle_linear_desc ld;
    ladle_linear_desc_init(&ld, 4, 3);
    for (int k = 0; k < 2; k++) {
        ladle_dtype t = k ? LADLE_F16 : LADLE_BF16;
        if (t == LADLE_F16) { /* bf16 linear and activations: test_bf16 */
            LT_FAILS_SAYING(
                ladle_linear_create(&ld, 2, (int64_t[]){2, 4}, t, lt_device(), 1, &op),
                LADLE_ERR_DTYPE, "not f32 or f64");
            LT_FAILS(
                ladle_activation_create(LADLE_RELU, 0, 1, (int64_t[]){4}, t, lt_device(), &op),
                LADLE_ERR_DTYPE);
        }
        ladle_partition *p = lt_partition(1, (int[]){lt_size}, 0);
        ladle_broadcast_desc bd;
        ladle_broadcast_desc_init(&bd, 1, (int64_t[]){4});
        LT_FAILS_SAYING(ladle_broadcast_create(&bd, p, p, t, lt_device(), &op),
                        LADLE_ERR_DTYPE, "not f32 or f64");
        ladle_partition_destroy(&p);
    }
    LT_ASSERT(op == NULL, "no op made");
    LT_DESTROY(&h, &g, &f5, &i6);
}
END_TEST

LT_SUITE("half", "half", LT_CHECK_TIMEOUT, widening_is_the_definition,
         narrowing_at_every_boundary, narrowing_random_and_special_values,
         convert_every_pair_on_the_device, tensor_calls_on_half_tensors,
         box_add_rounds_once, refusals)
