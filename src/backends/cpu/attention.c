/*
 * Multi-head attention on the CPU, one (sample, head) at a time, tiled so
 * that no T x T matrix exists (the layer saves qkv, o and lse, never P).
 *
 * The head's queries, keys and values (and in the backward the output
 * gradient) are widened to double first, T d values each, so every dot
 * product and every softmax statistic is summed in double whatever the
 * dtype, and a tile's products are double GEMMs: block x block x d for the
 * scores, block x d x block for the output. Widening costs O(T d) per head
 * against the tiles' O(T^2 d), and keeps an f32 head within one rounding of
 * its f64 twin. With g->f32_tiles an f32 head is copied out as it is and
 * its tiles' products are f32 GEMMs at twice the rate, the softmax
 * statistics still in double (attention_head.inc is both).
 *
 * The forward walks the key tiles of a query tile keeping, per row, the
 * running maximum m and sum l of exp(S - m): a new tile with a larger
 * maximum rescales l and the partial output by exp(m_old - m_new). Causal
 * attention skips the key tiles wholly after a query tile and masks inside
 * the diagonal one; every query sees key 0, so l > 0 after the first tile.
 * The backward recomputes each tile's P = exp(S - lse) from the saved
 * log-sum-exp, which is exact (no second online pass).
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "src/backends/cpu/cpu.h"
#include "src/backends/cpu/fastmath.h"
#include "src/backends/cpu/simd.h"

/* rows x cols of src (leading dimension ld, dtype) into dst (contiguous). */
LADLE_KERNEL static void widen(ladle_dtype dtype, const void *src, int64_t ld, int64_t rows,
                               int64_t cols, double *dst)
{
    for (int64_t r = 0; r < rows; r++) {
        if (dtype == LADLE_F32) {
            const float *s = (const float *)src + r * ld;
            for (int64_t c = 0; c < cols; c++)
                dst[r * cols + c] = s[c];
        } else {
            memcpy(dst + r * cols, (const double *)src + r * ld,
                   sizeof(double) * (size_t)cols);
        }
    }
}

/* The reverse: contiguous doubles times f into rows of dst, rounded once. */
LADLE_KERNEL static void narrow(ladle_dtype dtype, const double *src, int64_t rows,
                                int64_t cols, double f, void *dst, int64_t ld)
{
    for (int64_t r = 0; r < rows; r++) {
        if (dtype == LADLE_F32) {
            float *d = (float *)dst + r * ld;
            for (int64_t c = 0; c < cols; c++)
                d[c] = (float)(src[r * cols + c] * f);
        } else {
            double *d = (double *)dst + r * ld;
            for (int64_t c = 0; c < cols; c++)
                d[c] = src[r * cols + c] * f;
        }
    }
}

/* C (m x n, ldc) = alpha A B^T (tb) or A B + beta C, all doubles, row-major. */
static void dgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha,
                  const double *a, int64_t lda, const double *b, int64_t ldb, double beta,
                  double *c, int64_t ldc)
{
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha, a, (int)lda,
                b, (int)ldb, beta, c, (int)ldc);
}

/* The keys row r of a query tile from i0 sees in the key tile from j0 of
 * bj keys: all of them, or (causal) those up to the query's own index. */
static int64_t visible(const ladle_attn_geom *g, int64_t i0, int64_t r, int64_t j0,
                       int64_t bj)
{
    if (!g->causal)
        return bj;
    int64_t lim = i0 + r - j0 + 1;
    return lim < 0 ? 0 : lim > bj ? bj : lim;
}

/* A forward tile's row: s[c] = e^{s[c] - mx} for c < lim, 0 up to bj;
 * returns their sum, in AL lanes (the exponentials are vectorised,
 * fastmath.h's; a running sum would keep the loop scalar). */
#define AL 8
LADLE_KERNEL static double exp_row(double *s, int64_t bj, int64_t lim, double mx)
{
    double a[AL] = {0}, sum = 0;
    int64_t c = 0;
    for (; c + AL <= bj; c += AL)
        for (int l = 0; l < AL; l++) {
            double e = c + l < lim ? ladle_exp_f64(s[c + l] - mx) : 0.0;
            s[c + l] = e;
            a[l] += e;
        }
    for (; c < bj; c++) {
        s[c] = c < lim ? ladle_exp_f64(s[c] - mx) : 0.0;
        sum += s[c];
    }
    for (int l = 0; l < AL; l++)
        sum += a[l];
    return sum;
}

/* A backward tile's row: p[c] = e^{p[c] - lse} (0 from lim on) and
 * dp[c] = p[c] (dp[c] - delta). */
LADLE_KERNEL static void exp_row_back(double *p, double *dp, int64_t bj, int64_t lim,
                                      double lse, double delta)
{
    for (int64_t c = 0; c < bj; c++) {
        p[c] = c < lim ? ladle_exp_f64(p[c] - lse) : 0.0;
        dp[c] = p[c] * (dp[c] - delta);
    }
}

/* The f32 tiles (g->f32_tiles): the head's columns copied out as f32, the
 * tiles' products f32 GEMMs, the row statistics (maximum, sum, lse, D) and
 * the output's final scaling in double. */
static void sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha,
                  const float *a, int64_t lda, const float *b, int64_t ldb, double beta,
                  float *c, int64_t ldc)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, (float)alpha, a,
                (int)lda, b, (int)ldb, (float)beta, c, (int)ldc);
}

/* widen and narrow for f32 tiles of f32 data: rows copied out and back
 * (narrow's factor applied in double, the product rounded once). */
static void widen_f32(ladle_dtype dtype, const void *src, int64_t ld, int64_t rows,
                      int64_t cols, float *dst)
{
    (void)dtype;
    for (int64_t r = 0; r < rows; r++)
        memcpy(dst + r * cols, (const float *)src + r * ld, sizeof(float) * (size_t)cols);
}

LADLE_KERNEL static void narrow_f32(ladle_dtype dtype, const float *src, int64_t rows,
                                    int64_t cols, double f, void *dst, int64_t ld)
{
    (void)dtype;
    for (int64_t r = 0; r < rows; r++) {
        float *d = (float *)dst + r * ld;
        for (int64_t c = 0; c < cols; c++)
            d[c] = (float)(src[r * cols + c] * f);
    }
}

/* exp_row for an f32 tile: s[c] = e^{s[c] - mx} (0 from lim on), their sum
 * in double lanes. */
LADLE_KERNEL static double exp_row_f32(float *s, int64_t bj, int64_t lim, float mx)
{
    double a[2 * AL] = {0}, sum = 0;
    int64_t c = 0;
    for (; c + 2 * AL <= bj; c += 2 * AL)
        for (int l = 0; l < 2 * AL; l++) {
            float e = c + l < lim ? ladle_exp_diff_f32(s[c + l], mx) : 0.0f;
            s[c + l] = e;
            a[l] += e;
        }
    for (; c < bj; c++) {
        s[c] = c < lim ? ladle_exp_diff_f32(s[c], mx) : 0.0f;
        sum += s[c];
    }
    for (int l = 0; l < 2 * AL; l++)
        sum += a[l];
    return sum;
}

/* exp_row_back for f32 tiles: p[c] = e^{p[c] - lse}, dp[c] = p[c] (dp[c] - delta). */
LADLE_KERNEL static void exp_row_back_f32(float *p, float *dp, int64_t bj, int64_t lim,
                                          double lse, double delta)
{
    for (int64_t c = 0; c < bj; c++) {
        float e = c < lim ? ladle_exp_shift_f32(p[c], lse) : 0.0f;
        p[c] = e;
        dp[c] = (float)((double)e * ((double)dp[c] - delta));
    }
}

#define TT double
#define GEMM dgemm
#define WIDEN widen
#define NARROW narrow
#define EXP_ROW exp_row
#define EXP_ROW_BACK exp_row_back
#define HEAD_FWD head_forward
#define HEAD_BWD head_backward
#define ATTN_FWD attn_forward_double
#define ATTN_BWD attn_backward_double
#include "src/backends/cpu/attention_head.inc"
#define TT float
#define GEMM sgemm
#define WIDEN widen_f32
#define NARROW narrow_f32
#define EXP_ROW exp_row_f32
#define EXP_ROW_BACK exp_row_back_f32
#define HEAD_FWD head_forward_f32
#define HEAD_BWD head_backward_f32
#define ATTN_FWD attn_forward_f32
#define ATTN_BWD attn_backward_f32
#include "src/backends/cpu/attention_head.inc"

ladle_status ladle__cpu_attn_forward(const ladle_backend *be, ladle_dtype dtype,
                                     const ladle_attn_geom *g, const void *qkv, void *o,
                                     double *lse, double *ws)
{
    (void)be;
    if (dtype == LADLE_F32 && g->f32_tiles)
        attn_forward_f32(g, dtype, qkv, o, lse, ws);
    else
        attn_forward_double(g, dtype, qkv, o, lse, ws);
    return LADLE_OK;
}

ladle_status ladle__cpu_attn_backward(const ladle_backend *be, ladle_dtype dtype,
                                      const ladle_attn_geom *g, const void *qkv,
                                      const void *o, const double *lse, const void *dout,
                                      void *dqkv, double *ws)
{
    (void)be;
    if (dtype == LADLE_F32 && g->f32_tiles)
        attn_backward_f32(g, dtype, qkv, o, lse, dout, dqkv, ws);
    else
        attn_backward_double(g, dtype, qkv, o, lse, dout, dqkv, ws);
    return LADLE_OK;
}
