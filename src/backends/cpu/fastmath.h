/*
 * Vectorisable single-precision exp, sigmoid, tanh and the normal
 * distribution function, and a double exp and tanh. Plain arithmetic and bit moves, no
 * branches and no library calls, so loops over them vectorise; errors stay within a few
 * units in the last place of f32.
 *
 *  - exp: x = k ln2 + r with |r| <= ln2/2 (ln2 split in two parts for an
 *    exact reduction), e^r by a degree-6 Taylor polynomial, 2^k put into
 *    the exponent bits; inputs are clamped to the finite range.
 *  - the normal distribution function: e^{-x^2/2} times a polynomial
 *    fitted to the scaled complementary error function, one exponential
 *    for both the distribution and the density (see below).
 */
#ifndef LADLE_FASTMATH_H
#define LADLE_FASTMATH_H

#include <math.h>
#include <stdint.h>

/* e^r for |r| <= ln2 / 2: degree-6 Taylor */
static inline float ladle_exp_poly(float r)
{
    return 1.0f +
           r * (1.0f + r * (0.5f + r * (1.6666667e-1f +
                                        r * (4.1666668e-2f +
                                             r * (8.3333338e-3f + r * 1.3888889e-3f)))));
}

/* e^x in f32, x clamped to -87 .. 88. The same reduction as
 * ladle__exp_split_f32 below, which with lo = 0 gives the same bits for
 * every float; kept apart because the activations built on this one ran
 * slower on that one (GELU (tanh) forward + backward 1.84-1.90 -> 2.05-2.19
 * ms, 2026-12-05). */
static inline float ladle_expf(float x)
{
    x = x > 88.0f ? 88.0f : x;
    x = x < -87.0f ? -87.0f : x;
    /* k = round(x / ln2): adding 1.5 * 2^23 pushes the fraction out */
    float k = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - k * 0.693359375f;     /* ln2, high part (exact product) */
    r = r - k * -2.12194440e-4f;        /* and the rest */
    float p = ladle_exp_poly(r);
    union {
        int32_t i;
        float f;
    } scale = {((int32_t)k + 127) << 23};
    return p * scale.f;
}

/* e^(d + lo) in f32 for a difference d (<= 88) and its rounding error lo:
 * lo joins the exactly reduced r = d - k ln2 (|r| <= ln2 / 2) before the
 * polynomial, 2^k from the rounding's bits (as ladle_expf); 0 below e^-87,
 * NaN for NaN. */
static inline float ladle__exp_split_f32(float d, float lo)
{
    float kf = d * 1.44269504088896341f + 12582912.0f;
    float k = kf - 12582912.0f;
    float r = d - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    r = r + lo;
    float p = ladle_exp_poly(r);
    union {
        float f;
        uint32_t i;
    } kb = {kf}, scale;
    scale.i = (kb.i << 23) + (127u << 23);
    return d < -87.0f ? 0.0f : p * scale.f;
}

/* e^(x - mx), 0 below e^-87, in f32 at full vector width. Rounded to f32,
 * an argument 30 below the maximum would carry 2e-6 of relative error into
 * the result; so the difference is kept as d + lo, lo its rounding error
 * (Knuth's two-sum: six additions, no products for -ffp-contract to fuse).
 * Softmax and cross entropy take it for f32 rows. */
static inline float ladle_exp_diff_f32(float x, float mx)
{
    float d = x - mx, bv = d - x, av = d - bv;
    float lo = (x - av) + (-mx - bv);
    return ladle__exp_split_f32(d, lo);
}

/* e^(x - s) for an f32 x and a double s (a log-sum-exp): the difference in
 * double, clamped at 88, split into an f32 d and its rounding error. */
static inline float ladle_exp_shift_f32(float x, double s)
{
    double dd = (double)x - s;
    dd = dd > 88.0 ? 88.0 : dd;
    float d = (float)dd;
    return ladle__exp_split_f32(d, (float)(dd - (double)d));
}

/*
 * The double exponential's reduction, for ladle_exp_f64 and ladle_tanh_f64:
 * x = k ln2 + r with ln2 in two parts (k ln2's high part exact for
 * |k| < 2^20), |r| <= ln2/2 + a rounding. Returns e^r - 1 as r q(r), q the
 * Taylor series of (e^r - 1) / r to r^12 / 13! (the next term is below
 * 5e-18 of e^r) in Horner form, kept apart from the 1 so that a small x
 * keeps its relative accuracy; *scale = 2^k, put into the exponent bits
 * from the rounding constant's low bits (no float-to-integer conversion,
 * which AVX2 lacks for 64-bit lanes). x must lie in -708.39 .. 709, where
 * k + 1023 lies in 1 .. 2046.
 */
static inline double ladle__expm1_reduced(double x, double *scale)
{
    /* kf's low bits hold k = round(x / ln2): 1.5 * 2^52 pushes the fraction out */
    double kf = x * 1.4426950408889634 + 6755399441055744.0;
    double k = kf - 6755399441055744.0;
    double r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
    /* 1 / (n + 1)! for n = 0 .. 12 */
    static const double inv_fact1[13] = {1.0,
                                         1.0 / 2,
                                         1.0 / 6,
                                         1.0 / 24,
                                         1.0 / 120,
                                         1.0 / 720,
                                         1.0 / 5040,
                                         1.0 / 40320,
                                         1.0 / 362880,
                                         1.0 / 3628800,
                                         1.0 / 39916800,
                                         1.0 / 479001600,
                                         1.0 / 6227020800.0};
    double q = inv_fact1[12];
    for (int n = 11; n >= 0; n--)
        q = q * r + inv_fact1[n];
    union {
        double f;
        uint64_t i;
    } kb = {kf}, s;
    s.i = (kb.i + 1023u) << 52; /* the low 12 bits of kb are k's (mod 4096) */
    *scale = s.f;
    return r * q;
}

/*
 * e^x in double for x <= 709 (attention's scores less their maximum or
 * their log-sum-exp, never much above 0): 2^k (1 + (e^r - 1)). Within an
 * ulp of the C library's e^x where the result is normal (4 million points
 * over -708.3 .. 709, with and without FMA); below e^-708.39 (the smallest
 * normal double, 2.2e-308) it returns 0, and NaN gives NaN.
 */
static inline double ladle_exp_f64(double x)
{
    double scale, em = ladle__expm1_reduced(x < -708.39 ? -708.39
                                            : x > 709.0 ? 709.0
                                                        : x,
                                            &scale);
    return x < -708.39 ? 0.0 : (1.0 + em) * scale;
}

/* e^(x - mx) for a row's maximum mx (softmax and cross entropy's f64 rows):
 * x - mx rounded as the C library's loops round it. */
static inline double ladle_exp_diff_f64(double x, double mx)
{
    return ladle_exp_f64(x - mx);
}

/*
 * tanh in double: tanh |x| = -m / (2 + m) with m = e^{-2|x|} - 1, the sign
 * restored after, m = 2^k (e^r - 1) + (2^k - 1) from the reduction above:
 * for |x| below ln2/4 (k = 0) m is the series alone, so a small x keeps its
 * relative accuracy (tanh(1e-300) = 1e-300); for k <= -1 the two parts do
 * not cancel (2^k - 1 <= -1/2 against |2^k (e^r - 1)| <= 0.21). -2|x| is
 * clamped at -708 (m = -1 to the last bit long before), so +-inf give +-1,
 * -0 gives -0 and NaN gives NaN.
 */
static inline double ladle_tanh_f64(double x)
{
    double y = -2.0 * fabs(x), scale;
    double em = ladle__expm1_reduced(y < -708.0 ? -708.0 : y, &scale);
    double m = scale * em + (scale - 1.0);
    return copysign(-m / (2.0 + m), x);
}

/*
 * The standard normal distribution in double, for GELU: returns Phi(x) and
 * sets *gauss = e^{-x^2/2}. With a = |x| and z = a / sqrt 2, Phi(-a) =
 * erfc(z) / 2 = e^{-z^2} erfcx(z) / 2, erfcx(z) = e^{z^2} erfc(z) smooth and
 * bounded; as a polynomial of degree 26 in u = A / (1 + z / 2) + B (a least-
 * squares Chebyshev fit on z in [0, 27], where e^{-z^2} underflows past it:
 * scripts/fit-erfcx.py) it is within 8e-16 relative of erfcx for z < 6
 * (|x| < 8.5) and 4e-15 out to 27, evaluated in double (scripts/fit-erfcx.py
 * prints the coefficients highest first). Above 0, Phi(x) = 1 -
 * Phi(-a), Phi(-a) <= 1/2 (no cancellation); below, the tail keeps its
 * relative accuracy. The Gaussian splits a^2 = q + 2r, q = h^2 with h = a
 * cut to 26 bits of mantissa by a mask (so q is exact) and r = (a - h)(a + h)
 * / 2 small (below 2^-26 a^2), e^{-q/2} times a cubic for e^{-r}: the rounding
 * of a^2 alone would be a relative error of a^2 eps in it. No step of it
 * depends on how multiply-adds are fused (the CPU kernels are built with
 * -ffp-contract=fast; a Dekker split, tried first, lost its sign there). a is capped at 40
 * (the Gaussian is 0 from 38.6 on), so +-inf give Phi 1 or 0 and a Gaussian of 0; NaN gives
 * NaN.
 */
static inline double ladle_normal_cdf_f64(double x, double *gauss)
{
    /* c[k], the coefficient of u^k (c[27] = 0 pads to four chains of 7) */
    static const double c[28] = {0.28603213396598409,     0.42981117065018254,
                                 0.22371190492151705,     0.064297813766501094,
                                 0.000954895318227397,    -0.0050715806260409656,
                                 -0.00024225197833974973, 0.00059271192556366705,
                                 -3.2431024320306675e-05, -7.841704237820101e-05,
                                 2.1539917541733274e-05,  7.252818404864523e-06,
                                 -5.8450764675277672e-06, 6.2399055887950568e-07,
                                 8.7559699590826108e-07,  -4.6707902564058548e-07,
                                 1.96335608052913e-08,    8.8552773359267922e-08,
                                 -4.6740154909078206e-08, 4.2315928561705907e-09,
                                 9.3651263128389933e-09,  -6.6572833541368351e-09,
                                 6.3430369875657229e-10,  1.628562560959311e-09,
                                 -6.322755747807459e-10,  -1.5462214621056463e-10,
                                 9.3511531391070114e-11,  0.0};
    double a = fabs(x);
    a = a > 40.0 ? 40.0 : a;
    union {
        double f;
        uint64_t i;
    } hb = {a};
    hb.i &= ~(uint64_t)0x7ffffff; /* the low 27 bits of the mantissa */
    double h = hb.f, q = h * h, r = 0.5 * (a - h) * (a + h);
    double g = ladle_exp_f64(-0.5 * q) * (1.0 - r * (1.0 - r * (0.5 - r * (1.0 / 6))));
    double z = a * 0.70710678118654752440;
    z = z > 27.0 ? 27.0 : z;
    double u = (1.0 / (1.0 + z * 0.5)) * 2.1481481481481484 + -1.1481481481481481;
    /* p(u) as four interleaved Horner chains in u^4 (a chain of 26
     * dependent steps would bound the vector loops by its latency) */
    double u2 = u * u, u4 = u2 * u2;
    double p0 = c[24], p1 = c[25], p2 = c[26], p3 = c[27];
#pragma GCC unroll 8 /* whole, so that the callers' loops vectorise */
    for (int j = 5; j >= 0; j--) {
        p0 = p0 * u4 + c[4 * j];
        p1 = p1 * u4 + c[4 * j + 1];
        p2 = p2 * u4 + c[4 * j + 2];
        p3 = p3 * u4 + c[4 * j + 3];
    }
    double p = (p0 + u * p1) + u2 * (p2 + u * p3);
    double tail = 0.5 * g * p;
    *gauss = g;
    return x > 0 ? 1.0 - tail : tail;
}

static inline float ladle_sigmoidf(float x)
{
    return 1.0f / (1.0f + ladle_expf(-x));
}

static inline float ladle_tanhf(float x)
{
    /* 1 - 2 / (e^{2x} + 1), exact in the tails; near 0 the odd polynomial
     * keeps the relative error small */
    float big = 1.0f - 2.0f / (ladle_expf(2.0f * x) + 1.0f);
    float x2 = x * x;
    float small = x * (1.0f + x2 * (-3.3333334e-1f + x2 * (1.3333334e-1f +
                  x2 * (-5.3968254e-2f + x2 * 2.1869489e-2f))));
    return x2 < 0.0625f ? small : big;
}

/*
 * s e^{-a^2/2} for a = |x| (GELU's Gaussian; s a constant, which folds into
 * the coefficients), in base 2: u = -a^2 log2(e) / 2 = k + f with k an
 * integer and |f| <= 1/2, 2^f by a degree-5 polynomial (the minimax fit of
 * e^r on |r| <= ln2/2 with r = f ln2: relative error 1.5e-7 with its
 * coefficients rounded to f32), and 2^k added to the exponent field of the
 * result's bits. Rounding: k + 1.5 * 2^23 holds k in its low mantissa bits,
 * which the shift by 23 moves into the exponent field while the rest of the
 * word shifts out.
 *
 * a is clamped at 13.1, so k >= -124 and the result (>= 0.28 x 2^-124 for
 * s >= 0.28) stays a normal number, as the exponent add needs; the clamp is
 * an integer minimum of a's bits, which for a >= 0 order as the values do:
 * one instruction, where GCC makes a float clamp a compare and a blend. A
 * NaN a comes out finite: the callers carry NaN through their other factors.
 * Beyond 13.1 the Gaussian stays at e^{-85.8}, 5.5e-38, where x Phi(x) is
 * already below the normal floats.
 *
 * The rounding of u (two products) is a relative 2^-23, an absolute a^2
 * 2^-24 in the exponent: the relative error of the result grows as a^2 in
 * the tail, as it does for any f32 argument a (the function's own condition
 * number there).
 */
static inline float ladle_gaussf(float a, const float s)
{
    union {
        float f;
        int32_t i;
    } b = {a}, cap = {13.1f};
    b.i = b.i < cap.i ? b.i : cap.i;
    float u = b.f * -0.7213475204f * b.f;
    float kf = u + 12582912.0f;
    float f = u - (kf - 12582912.0f);
    float p = s * 1.000000119f +
              f * (s * 0.6931469440f +
                   f * (s * 0.2402212024f +
                        f * (s * 5.550713465e-2f +
                             f * (s * 9.675540961e-3f + f * (s * 1.327646431e-3f)))));
    union {
        float f;
        uint32_t i;
    } kb = {kf}, pb = {p};
    pb.i += kb.i << 23;
    return pb.f;
}

/*
 * The lower tail of the standard normal distribution, Phi(-a) = erfc(z) / 2
 * with a = |x| and z = a / sqrt 2, given e = exp(-a^2 / 2), which the caller
 * shares with the density. erfc(z) = e erfcx(z), and the scaled erfcx is
 * smooth and bounded: with t = 1 / (1 + z / 2) it is t h(t), h a degree-8
 * polynomial fitted here to a relative error of 4.4e-8 over z in [0, 12]
 * (beyond, e underflows). Relative accuracy holds in the far tail, where
 * 1 - Phi(a) would cancel.
 */
static inline float ladle_normal_tailf(float a, float e)
{
    float t = 1.0f / (1.0f + a * 0.353553391f);
    float h = 1.410422344e-1f +
              t * (1.412048239e-1f +
                   t * (1.214265815e-1f +
                        t * (1.018402351e-1f +
                             t * (-1.448854279e-2f +
                                  t * (1.407415815e-1f +
                                       t * (-2.450934635e-1f +
                                            t * (1.430088442e-1f + t * -2.968231640e-2f)))))));
    return t * h * e;
}

/* The standard normal distribution function Phi(x), accurate in both tails
 * (the lower tail straight from erfc, without cancellation). */
static inline float ladle_normal_cdff(float x)
{
    float a = fabsf(x);
    float tail = ladle_normal_tailf(a, ladle_gaussf(a, 1.0f));
    return x >= 0 ? 1.0f - tail : tail;
}

#endif /* LADLE_FASTMATH_H */
