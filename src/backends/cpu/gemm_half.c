/*
 * bf16 GEMM with f32 accumulation on the CPU (the gemm_half slot). The
 * OpenBLAS we build against has no bf16 GEMM, so there are two paths of
 * our own:
 *
 *   dpbf16   where the CPU has AVX-512 BF16: op(A) and op(B) packed into
 *            pairs of consecutive k (the operand of vdpbf16ps), and a
 *            12 x 32 register tile summing the whole of k in f32, so C is
 *            written once, rounded once. vdpbf16ps treats subnormal bf16
 *            inputs as zero and flushes subnormal sums (the instruction's
 *            rules, not MXCSR's); elsewhere its products are exact and each
 *            sum is rounded to nearest even.
 *   convert  everywhere: B and a panel of rows of op(A) widened to f32 in
 *            the workspace and multiplied by sgemm, the panel of C in f32
 *            rounded once into a bf16 C (an f32 C is sgemm's own output).
 *
 * The slot picks dpbf16 where it runs; ladle__cpu_gemm_half_path lets the
 * tests run either on any call.
 */
#include <cblas.h>
#include <limits.h>

#include "src/backends/cpu/cpu.h"
#include "src/core/half.h"

#define MR 12 /* rows of the register tile */
#define NR 32 /* its columns: two vectors of 16 f32 */
#define MB 128 /* rows of op(A) the converting path widens at a time */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define HAVE_DPBF16 1
#include <immintrin.h>
#define LADLE_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#else
#define HAVE_DPBF16 0
#endif

int ladle__cpu_has_dpbf16(void)
{
#if HAVE_DPBF16
    return __builtin_cpu_supports("avx512bf16") != 0 && __builtin_cpu_supports("avx512bw") != 0;
#else
    return 0;
#endif
}

static int64_t up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

/* element (i, j) of op(X) for a row-major X of leading dimension ld */
static inline uint16_t at(const uint16_t *x, int64_t ld, int trans, int64_t i, int64_t j)
{
    return trans ? x[j * ld + i] : x[i * ld + j];
}

size_t ladle__cpu_gemm_half_bytes(int path, ladle_dtype ct, int64_t m, int64_t n, int64_t k)
{
    if (m <= 0 || n <= 0 || k <= 0)
        return 0;
    if (path == LADLE__GEMM_HALF_DPBF16) /* packed op(A) and op(B), bf16 pairs */
        return (size_t)(up(m, MR) + up(n, NR)) * (size_t)up(k, 2) * sizeof(uint16_t);
    int64_t mb = m < MB ? m : MB;
    return (size_t)(k * n + mb * k + (ct == LADLE_F32 ? 0 : mb * n)) * sizeof(float);
}

/* ---- convert ---- */

/* rows r0 .. r0 + rows - 1 of op(X) (cols wide), widened into w with
 * leading dimension cols (not transposed) or rows (transposed) */
static void widen(const uint16_t *x, int64_t ld, int trans, int64_t r0, int64_t rows,
                  int64_t cols, float *w)
{
    if (!trans)
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++)
                w[i * cols + j] = ladle__bf16_to_f32(x[(r0 + i) * ld + j]);
    else /* the panel of op(X) is X's columns r0 .. r0 + rows - 1 */
        for (int64_t j = 0; j < cols; j++)
            for (int64_t i = 0; i < rows; i++)
                w[j * rows + i] = ladle__bf16_to_f32(x[j * ld + r0 + i]);
}

static void gemm_convert(ladle_dtype ct, int ta, int tb, int64_t m, int64_t n, int64_t k,
                         double alpha, const uint16_t *a, int64_t lda, const uint16_t *b,
                         int64_t ldb, double beta, void *c, int64_t ldc, float *ws)
{
    int64_t mb = m < MB ? m : MB;
    float *wb = ws, *wa = wb + k * n, *wc = wa + mb * k;
    /* the whole op(B) as stored: k x n, or n x k when transposed */
    widen(b, ldb, 0, 0, tb ? n : k, tb ? k : n, wb);
    enum CBLAS_TRANSPOSE cta = ta ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE ctb = tb ? CblasTrans : CblasNoTrans;
    for (int64_t i0 = 0; i0 < m; i0 += mb) {
        int64_t rows = m - i0 < mb ? m - i0 : mb;
        widen(a, lda, ta, i0, rows, k, wa);
        int la = ta ? (int)rows : (int)k;
        if (ct == LADLE_F32) {
            cblas_sgemm(CblasRowMajor, cta, ctb, (int)rows, (int)n, (int)k, (float)alpha, wa, la,
                        wb, tb ? (int)k : (int)n, (float)beta, (float *)c + i0 * ldc, (int)ldc);
            continue;
        }
        uint16_t *cr = (uint16_t *)c + i0 * ldc;
        if (beta != 0.0)
            for (int64_t i = 0; i < rows; i++)
                for (int64_t j = 0; j < n; j++)
                    wc[i * n + j] = ladle__bf16_to_f32(cr[i * ldc + j]);
        cblas_sgemm(CblasRowMajor, cta, ctb, (int)rows, (int)n, (int)k, (float)alpha, wa, la, wb,
                    tb ? (int)k : (int)n, (float)beta, wc, (int)n);
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < n; j++)
                cr[i * ldc + j] = ladle__f32_to_bf16(wc[i * n + j]);
    }
}

/* ---- dpbf16 ---- */

/* op(A) as panels of MR rows: panel p holds, for each pair q of k, the MR
 * rows' (k = 2q, 2q + 1) pairs; rows and k past the ends are zeros */
static void pack_a(const uint16_t *a, int64_t lda, int ta, int64_t m, int64_t k, uint16_t *pa)
{
    int64_t kp = up(k, 2) / 2;
    for (int64_t p = 0; p < up(m, MR) / MR; p++, pa += kp * MR * 2)
        for (int64_t q = 0; q < kp; q++)
            for (int r = 0; r < MR; r++) {
                int64_t i = p * MR + r, j = 2 * q;
                uint16_t *d = pa + (q * MR + r) * 2;
                d[0] = i < m ? at(a, lda, ta, i, j) : 0;
                d[1] = i < m && j + 1 < k ? at(a, lda, ta, i, j + 1) : 0;
            }
}

/* op(B) as panels of NR columns: panel p holds, for each pair q of k, the
 * NR columns' (k = 2q, 2q + 1) pairs */
static void pack_b(const uint16_t *b, int64_t ldb, int tb, int64_t n, int64_t k, uint16_t *pb)
{
    int64_t kp = up(k, 2) / 2;
    for (int64_t p = 0; p < up(n, NR) / NR; p++, pb += kp * NR * 2)
        for (int64_t q = 0; q < kp; q++)
            for (int c = 0; c < NR; c++) {
                int64_t j = p * NR + c, i = 2 * q;
                uint16_t *d = pb + (q * NR + c) * 2;
                d[0] = j < n ? at(b, ldb, tb, i, j) : 0;
                d[1] = j < n && i + 1 < k ? at(b, ldb, tb, i + 1, j) : 0;
            }
}

#if HAVE_DPBF16
/* 16 f32 rounded to bf16 as half.h does (NaN quieted, subnormals kept):
 * vcvtneps2bf16 would flush subnormals, so the integer form instead */
LADLE_BF16_TARGET static inline __m256i round16(__m512 v)
{
    __m512i u = _mm512_castps_si512(v);
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), 16);
    __m512i q = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, r, q));
}

/* C's tile of rows x cols (<= MR x NR) = alpha acc + beta C */
LADLE_BF16_TARGET static void store_tile(ladle_dtype ct, const __m512 *acc, int rows, int cols,
                                         float alpha, float beta, void *c, int64_t ldc)
{
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < 2; h++) {
            int w = cols - 16 * h;
            if (w <= 0)
                break;
            __mmask16 mk = w >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << w) - 1u);
            __m512 v = _mm512_mul_ps(va, acc[2 * r + h]);
            if (ct == LADLE_F32) {
                float *p = (float *)c + r * ldc + 16 * h;
                if (beta != 0.0f)
                    v = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mk, p), v);
                _mm512_mask_storeu_ps(p, mk, v);
            } else {
                uint16_t *p = (uint16_t *)c + r * ldc + 16 * h;
                if (beta != 0.0f) {
                    __m512i old = _mm512_slli_epi32(
                        _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, p)), 16);
                    v = _mm512_fmadd_ps(vb, _mm512_castsi512_ps(old), v);
                }
                _mm256_mask_storeu_epi16(p, mk, round16(v));
            }
        }
}

/* one MR x NR tile over kp pairs of k */
LADLE_BF16_TARGET static void tile(int64_t kp, const uint16_t *pa, const uint16_t *pb,
                                   __m512 *acc)
{
    __m512 s[2 * MR];
#pragma GCC unroll 24
    for (int r = 0; r < 2 * MR; r++)
        s[r] = _mm512_setzero_ps();
    const uint32_t *a2 = (const uint32_t *)(const void *)pa;
    for (int64_t q = 0; q < kp; q++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(pb + q * NR * 2);
        __m512bh b1 = (__m512bh)_mm512_loadu_si512(pb + q * NR * 2 + 32);
#pragma GCC unroll 12
        for (int r = 0; r < MR; r++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)a2[q * MR + r]);
            s[2 * r] = _mm512_dpbf16_ps(s[2 * r], av, b0);
            s[2 * r + 1] = _mm512_dpbf16_ps(s[2 * r + 1], av, b1);
        }
    }
#pragma GCC unroll 24
    for (int r = 0; r < 2 * MR; r++)
        acc[r] = s[r];
}

LADLE_BF16_TARGET static void gemm_dpbf16(ladle_dtype ct, int ta, int tb, int64_t m, int64_t n,
                                          int64_t k, double alpha, const uint16_t *a,
                                          int64_t lda, const uint16_t *b, int64_t ldb,
                                          double beta, void *c, int64_t ldc, uint16_t *ws)
{
    int64_t kp = up(k, 2) / 2;
    uint16_t *pa = ws, *pb = ws + up(m, MR) * kp * 2;
    size_t es = ladle_dtype_size(ct);
    __m512 acc[2 * MR];
    pack_a(a, lda, ta, m, k, pa);
    pack_b(b, ldb, tb, n, k, pb);
    /* a panel of B stays in cache while every panel of A streams past it */
    for (int64_t j0 = 0; j0 < n; j0 += NR) {
        const uint16_t *bp = pb + j0 / NR * kp * NR * 2;
        int cols = n - j0 < NR ? (int)(n - j0) : NR;
        for (int64_t i0 = 0; i0 < m; i0 += MR) {
            int rows = m - i0 < MR ? (int)(m - i0) : MR;
            tile(kp, pa + i0 / MR * kp * MR * 2, bp, acc);
            store_tile(ct, acc, rows, cols, (float)alpha, (float)beta,
                       (char *)c + (size_t)(i0 * ldc + j0) * es, ldc);
        }
    }
}
#endif

/* k = 0: C = beta C (0 where beta is 0), in f32, rounded once */
static void scale_c(ladle_dtype ct, int64_t m, int64_t n, double beta, void *c, int64_t ldc)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            int64_t e = i * ldc + j;
            float v = beta == 0.0 ? 0.0f : (float)beta * (float)ladle__load_real(ct, c, e);
            ladle__store_real(ct, c, e, v);
        }
}

ladle_status ladle__cpu_gemm_half_path(int path, ladle_dtype ab, ladle_dtype ct, int trans_a,
                                       int trans_b, int64_t m, int64_t n, int64_t k,
                                       double alpha, const void *a, int64_t lda, const void *b,
                                       int64_t ldb, double beta, void *c, int64_t ldc, void *ws)
{
    if (ab != LADLE_BF16 || (ct != LADLE_BF16 && ct != LADLE_F32))
        return ladle__raise(LADLE_ERR_DTYPE, "gemm_half", "the CPU multiplies bf16 into bf16 "
                            "or f32, not %s into %s", ladle_dtype_name(ab),
                            ladle_dtype_name(ct));
    /* sgemm counts in int, and so do the widened panels' dimensions */
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||
        ldc > INT_MAX || (double)k * (double)n > (double)INT_MAX)
        return ladle__raise(LADLE_ERR_ARG, "gemm_half",
                            "a %lld x %lld x %lld product is beyond the BLAS's int sizes",
                            (long long)m, (long long)n, (long long)k);
    if (path == LADLE__GEMM_HALF_AUTO)
        path = ladle__cpu_has_dpbf16() ? LADLE__GEMM_HALF_DPBF16 : LADLE__GEMM_HALF_CONVERT;
    if (m <= 0 || n <= 0)
        return LADLE_OK;
    if (k <= 0) {
        scale_c(ct, m, n, beta, c, ldc);
        return LADLE_OK;
    }
    if (path == LADLE__GEMM_HALF_DPBF16) {
#if HAVE_DPBF16
        if (ladle__cpu_has_dpbf16()) {
            gemm_dpbf16(ct, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ws);
            return LADLE_OK;
        }
#endif
        return ladle__raise(LADLE_ERR_UNSUPPORTED, "gemm_half",
                            "this CPU has no AVX-512 BF16 instructions");
    }
    gemm_convert(ct, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ws);
    return LADLE_OK;
}

static int auto_path(void)
{
    return ladle__cpu_has_dpbf16() ? LADLE__GEMM_HALF_DPBF16 : LADLE__GEMM_HALF_CONVERT;
}

ladle_status ladle__cpu_gemm_half(const ladle_backend *be, ladle_dtype ab, ladle_dtype ct,
                                  int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                                  double alpha, const void *a, int64_t lda, const void *b,
                                  int64_t ldb, double beta, void *c, int64_t ldc, void *ws)
{
    (void)be;
    return ladle__cpu_gemm_half_path(auto_path(), ab, ct, trans_a, trans_b, m, n, k, alpha, a,
                                     lda, b, ldb, beta, c, ldc, ws);
}

ladle_status ladle__cpu_gemm_half_ws(const ladle_backend *be, ladle_dtype ab, ladle_dtype ct,
                                     int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                                     size_t *bytes)
{
    (void)be, (void)ab, (void)trans_a, (void)trans_b;
    *bytes = ladle__cpu_gemm_half_bytes(auto_path(), ct, m, n, k);
    return LADLE_OK;
}
