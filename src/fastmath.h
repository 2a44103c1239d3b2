/*
 * Vectorisable single-precision exp, sigmoid, tanh and erf. Plain
 * arithmetic and bit moves, no branches and no library calls, so loops over
 * them vectorise; errors stay within a few units in the last place of f32.
 *
 *  - exp: x = k ln2 + r with |r| <= ln2/2 (ln2 split in two parts for an
 *    exact reduction), e^r by a degree-6 Taylor polynomial, 2^k put into
 *    the exponent bits; inputs are clamped to the finite range.
 *  - erf: erfc from its Chebyshev-fitted form t exp(-x^2 + P(t)),
 *    t = 1 / (1 + |x|/2), fractional error below 1.2e-7; erf = 1 - erfc
 *    with the sign restored.
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

/* erfc(|x|), the core of erf and of the normal distribution function. */
static inline float ladle_erfc_absf(float x)
{
    float z = x < 0 ? -x : x;
    float t = 1.0f / (1.0f + 0.5f * z);
    float p = -z * z - 1.26551223f +
              t * (1.00002368f +
                   t * (0.37409196f +
                        t * (0.09678418f +
                             t * (-0.18628806f +
                                  t * (0.27886807f +
                                       t * (-1.13520398f +
                                            t * (1.48851587f +
                                                 t * (-0.82215223f + t * 0.17087277f))))))));
    return t * ladle_expf(p);
}

static inline float ladle_erff(float x)
{
    float r = 1.0f - ladle_erfc_absf(x);
    return x < 0 ? -r : r;
}

/* The standard normal distribution function Phi(x), accurate in both tails
 * (the lower tail straight from erfc, without cancellation). */
static inline float ladle_normal_cdff(float x)
{
    float e = 0.5f * ladle_erfc_absf(x * 0.70710678f);
    return x >= 0 ? 1.0f - e : e;
}

#endif /* LADLE_FASTMATH_H */
