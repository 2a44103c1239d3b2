/*
 * Vectorisable single-precision exp, sigmoid, tanh and the normal
 * distribution function. Plain arithmetic and bit moves, no branches and no
 * library calls, so loops over them vectorise; errors stay within a few
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

#include <stdint.h>

static inline float ladle_expf(float x)
{
    x = x > 88.0f ? 88.0f : x;
    x = x < -87.0f ? -87.0f : x;
    /* k = round(x / ln2): adding 1.5 * 2^23 pushes the fraction out */
    float k = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - k * 0.693359375f;     /* ln2, high part (exact product) */
    r = r - k * -2.12194440e-4f;        /* and the rest */
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f +
              r * (4.1666668e-2f + r * (8.3333338e-3f + r * 1.3888889e-3f)))));
    union {
        int32_t i;
        float f;
    } scale = {((int32_t)k + 127) << 23};
    return p * scale.f;
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

/* e^x for x <= 0 (GELU's Gaussian): one clamp instead of two, a degree-5
 * minimax polynomial (relative error 7.5e-8) instead of Taylor's degree 6,
 * and 2^k straight from the rounding's bits: the float k + 1.5 * 2^23 holds
 * k in its low mantissa bits, which the shift by 23 moves into the
 * exponent field while the rest of the word shifts out. */
static inline float ladle_exp_negf(float x)
{
    x = x > -87.0f ? x : -87.0f;
    float kf = x * 1.44269504088896341f + 12582912.0f;
    float k = kf - 12582912.0f;
    float r = x - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    float p = 1.000000072f + r * (0.9999996920f + r * (0.4999889485f + r * (0.1666757480f +
              r * (4.191538172e-2f + r * 8.297650078e-3f))));
    union {
        float f;
        uint32_t i;
    } kb = {kf};
    union {
        uint32_t i;
        float f;
    } scale = {(kb.i << 23) + (127u << 23)};
    return p * scale.f;
}

/*
 * The lower tail of the standard normal distribution, Phi(-|x|) =
 * erfc(z) / 2 with z = |x| / sqrt 2, given e = exp(-x^2 / 2), which the
 * caller shares with the density. erfc(z) = e erfcx(z), and the scaled
 * erfcx is smooth and bounded: with t = 1 / (1 + z / 2) it is t h(t), h a
 * degree-8 polynomial fitted here to a relative error of 4.4e-8 over
 * z in [0, 12] (beyond, e underflows). Relative accuracy holds in the far
 * tail, where 1 - Phi(|x|) would cancel.
 */
static inline float ladle_normal_tailf(float x, float e)
{
    float ax = x < 0 ? -x : x;
    float t = 1.0f / (1.0f + ax * 0.353553391f);
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
    float tail = ladle_normal_tailf(x, ladle_exp_negf(-0.5f * x * x));
    return x >= 0 ? 1.0f - tail : tail;
}

#endif /* LADLE_FASTMATH_H */
