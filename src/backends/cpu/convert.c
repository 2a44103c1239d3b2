/*
 * The 2-byte formats on the CPU: convert between f32, f64, bf16 and f16,
 * and the pieces of fill and the box copies that bf16 and f16 need. The
 * rounding is src/core/half.h's, so every backend gives the same bits.
 */
#include "src/backends/cpu/cpu.h"
#include "src/backends/cpu/simd.h"
#include "src/core/half.h"

/* The common cases, loops the compiler vectorises. */
LADLE_KERNEL static void f32_to_bf16(int64_t n, const float *x, uint16_t *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = ladle__f32_to_bf16(x[i]);
}

LADLE_KERNEL static void bf16_to_f32(int64_t n, const uint16_t *x, float *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = ladle__bf16_to_f32(x[i]);
}

/* f16 by the F16C instructions where the CPU has them (every x86-64-v3
 * machine): 8 at a time, rounded to nearest even as half.h's scalar code,
 * NaNs quieted alike, subnormals kept (test_half checks the bits through
 * this path); the scalar code for the rest and elsewhere */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LADLE_F16C __attribute__((target("avx,f16c")))

LADLE_F16C static void f32_to_f16_f16c(int64_t n, const float *x, uint16_t *y)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(y + i), h);
    }
    for (; i < n; i++)
        y[i] = ladle__f32_to_f16(x[i]);
}

LADLE_F16C static void f16_to_f32_f16c(int64_t n, const uint16_t *x, float *y)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++)
        y[i] = ladle__f16_to_f32(x[i]);
}

static int has_f16c(void) { return __builtin_cpu_supports("f16c") != 0; }
#else
static void f32_to_f16_f16c(int64_t n, const float *x, uint16_t *y) {}
static void f16_to_f32_f16c(int64_t n, const uint16_t *x, float *y) {}
static int has_f16c(void) { return 0; }
#endif

static void f32_to_f16(int64_t n, const float *x, uint16_t *y)
{
    if (has_f16c()) {
        f32_to_f16_f16c(n, x, y);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        y[i] = ladle__f32_to_f16(x[i]);
}

static void f16_to_f32(int64_t n, const uint16_t *x, float *y)
{
    if (has_f16c()) {
        f16_to_f32_f16c(n, x, y);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        y[i] = ladle__f16_to_f32(x[i]);
}

ladle_status ladle__cpu_convert(const ladle_backend *be, ladle_dtype xt, int64_t n,
                                const void *x, ladle_dtype yt, void *y)
{
    if (n <= 0)
        return LADLE_OK;
    if (xt == yt)
        return ladle__cpu_copy(be, xt, n, x, y);
    if (xt == LADLE_F32 && yt == LADLE_BF16) {
        f32_to_bf16(n, x, y);
    } else if (xt == LADLE_BF16 && yt == LADLE_F32) {
        bf16_to_f32(n, x, y);
    } else if (xt == LADLE_F32 && yt == LADLE_F16) {
        f32_to_f16(n, x, y);
    } else if (xt == LADLE_F16 && yt == LADLE_F32) {
        f16_to_f32(n, x, y);
    } else {
        /* through double: exact for every source, and store rounds once */
        for (int64_t i = 0; i < n; i++)
            ladle__store_real(yt, y, i, ladle__load_real(xt, x, i));
    }
    return LADLE_OK;
}

void ladle__cpu_fill_half(ladle_dtype dtype, int64_t n, double value, void *x)
{
    uint16_t bits =
        dtype == LADLE_BF16 ? ladle__f64_to_bf16(value) : ladle__f64_to_f16(value);
    for (int64_t i = 0; i < n; i++)
        ((uint16_t *)x)[i] = bits;
}

void ladle__cpu_row_half(ladle_box_mode mode, ladle_dtype dtype, int64_t n,
                         const uint16_t *s, int64_t ss, uint16_t *d, int64_t ds)
{
    if (mode == LADLE_BOX_ZERO) {
        for (int64_t i = 0; i < n; i++)
            d[i * ds] = 0;
    } else if (mode == LADLE_BOX_COPY) {
        for (int64_t i = 0; i < n; i++)
            d[i * ds] = s[i * ss];
    } else {
        /* the sum in double is exact, unless one addend lies so far below
         * the other that it is under half the larger's last bit either
         * way: then both the sum and its rounding are the larger addend,
         * so the result is the sum rounded once */
        for (int64_t i = 0; i < n; i++) {
            double sum =
                ladle__load_real(dtype, d, i * ds) + ladle__load_real(dtype, s, i * ss);
            ladle__store_real(dtype, d, i * ds, sum);
        }
    }
}
