/*
 * The 16-bit floating formats as bits: bfloat16 (1 sign, 8 exponent, 7
 * fraction bits: f32's range, 8 significant bits) and IEEE binary16 (1, 5,
 * 10: 11 significant bits, largest finite 65504). One definition of the
 * conversions for every backend: plain C for the CPU and the tensor calls,
 * and the same functions on the GPU (a .cu file includes this after rt.h,
 * which makes LADLE__HALF_FN __host__ __device__ under nvcc).
 *
 * Narrowing rounds to nearest, ties to even, as IEEE 754 asks; values past
 * the largest finite one become inf, a NaN stays a NaN (quiet, with its
 * sign and the top of its payload), subnormals are kept. Widening is exact.
 * From f64 the value is first rounded to f32 *to odd* (truncated, with the
 * last bit set when anything was dropped): f32 keeps more than two bits
 * beyond either 16-bit format at every magnitude, so rounding that to
 * nearest again gives the correctly rounded result, with no double-rounding
 * error. Never installed.
 */
#ifndef LADLE_HALF_H
#define LADLE_HALF_H

#include <stdint.h>
#include <string.h>

#include "ladle/core.h"

#if defined(__CUDACC__)
#define LADLE__HALF_FN __host__ __device__ static inline
#else
#define LADLE__HALF_FN static inline
#endif

LADLE__HALF_FN uint32_t ladle__f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

LADLE__HALF_FN float ladle__bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

LADLE__HALF_FN float ladle__bf16_to_f32(uint16_t h) { return ladle__bits_f32((uint32_t)h << 16); }

LADLE__HALF_FN uint16_t ladle__f32_to_bf16(float f)
{
    uint32_t u = ladle__f32_bits(f);
    /* adding just under half a unit of the 16th bit, plus its lowest kept
     * bit, carries exactly when the dropped half is above a tie, or a tie
     * with an odd kept part; a carry out of the fraction steps the exponent,
     * up to inf. A NaN is quieted instead, its sign and payload's top kept
     * (both computed, one chosen: no branch, so loops vectorise) */
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet = (u >> 16) | 0x0040u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

LADLE__HALF_FN float ladle__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) { /* zero or subnormal: m units of 2^-24, exact in f32 */
        float v = (float)m * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    if (e == 31) /* inf or NaN, the payload kept */
        return ladle__bits_f32(sign | 0x7f800000u | (m << 13));
    return ladle__bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

/* q, the kept part of a magnitude, rounded up when the dropped rem of the
 * low `shift` bits is above half, or half with q odd */
LADLE__HALF_FN uint32_t ladle__round_even(uint32_t q, uint32_t rem, int shift)
{
    uint32_t half = 1u << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1u)));
}

LADLE__HALF_FN uint16_t ladle__f32_to_f16(float f)
{
    uint32_t u = ladle__f32_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* 65520 and above: a tie with the odd 65504 or past it */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* normal in f16: 2^-14 and above */
        uint32_t q = (a >> 13) - (112u << 10);
        return (uint16_t)(sign | ladle__round_even(q, a & 0x1fffu, 13));
    }
    if (a <= 0x33000000u) /* at most 2^-25, half the smallest subnormal: a tie with 0 */
        return (uint16_t)sign;
    /* subnormal: the significand with its hidden bit, in units of 2^-24 */
    uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    int shift = 126 - (int)(a >> 23);
    uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1u);
    return (uint16_t)(sign | ladle__round_even(q, rem, shift));
}

/* d rounded to f32 to odd (see the top of this file) */
LADLE__HALF_FN float ladle__f64_to_f32_odd(double d)
{
    float f = (float)d;
    if (d != d || (double)f == d)
        return f;
    uint32_t u = ladle__f32_bits(f);
    double af = (double)(f < 0 ? -f : f), ad = d < 0 ? -d : d;
    if (af > ad) /* rounded away from zero (or to inf): one unit back */
        u -= 1u;
    return ladle__bits_f32(u | 1u);
}

LADLE__HALF_FN uint16_t ladle__f64_to_bf16(double d)
{
    return ladle__f32_to_bf16(ladle__f64_to_f32_odd(d));
}
LADLE__HALF_FN uint16_t ladle__f64_to_f16(double d)
{
    return ladle__f32_to_f16(ladle__f64_to_f32_odd(d));
}

/* Element i of p, of dtype t (f32, f64, bf16 or f16), widened exactly to
 * double; and d stored at element i of p as dtype t, rounded once. What
 * every backend's convert does for the pairs it has no loop of its own for. */
LADLE__HALF_FN double ladle__load_real(ladle_dtype t, const void *p, int64_t i)
{
    if (t == LADLE_F32)
        return ((const float *)p)[i];
    if (t == LADLE_BF16)
        return ladle__bf16_to_f32(((const uint16_t *)p)[i]);
    if (t == LADLE_F16)
        return ladle__f16_to_f32(((const uint16_t *)p)[i]);
    return ((const double *)p)[i];
}

LADLE__HALF_FN void ladle__store_real(ladle_dtype t, void *p, int64_t i, double d)
{
    if (t == LADLE_F32)
        ((float *)p)[i] = (float)d;
    else if (t == LADLE_BF16)
        ((uint16_t *)p)[i] = ladle__f64_to_bf16(d);
    else if (t == LADLE_F16)
        ((uint16_t *)p)[i] = ladle__f64_to_f16(d);
    else
        ((double *)p)[i] = d;
}

#endif /* LADLE_HALF_H */
