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
 * its f64 twin.
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

/* One (sample, head) forward. q, k, v: T x d doubles; o: the head's
 * output columns (row stride ldo); lse: T doubles. */
static void head_forward(const ladle_attn_geom *g, ladle_dtype dtype, const double *q,
                         const double *k, const double *v, void *o, int64_t ldo,
                         double *lse, double *s, double *acc, double *m, double *l)
{
    int64_t T = g->seq, d = g->head_dim, B = g->block;
    for (int64_t i0 = 0; i0 < T; i0 += B) {
        int64_t bi = T - i0 < B ? T - i0 : B;
        int64_t jend = g->causal ? i0 + bi : T;
        for (int64_t r = 0; r < bi; r++)
            m[r] = -INFINITY, l[r] = 0;
        memset(acc, 0, sizeof(double) * (size_t)(bi * d));
        for (int64_t j0 = 0; j0 < jend; j0 += B) {
            int64_t bj = jend - j0 < B ? jend - j0 : B;
            dgemm(0, 1, bi, bj, d, g->scale, q + i0 * d, d, k + j0 * d, d, 0.0, s, B);
            for (int64_t r = 0; r < bi; r++) {
                double *sr = s + r * B;
                int64_t lim = visible(g, i0, r, j0, bj);
                double mx = m[r];
                for (int64_t c = 0; c < lim; c++)
                    mx = sr[c] > mx ? sr[c] : mx;
                double sum = exp_row(sr, bj, lim, mx);
                if (mx != m[r] && lim > 0) {
                    double corr = exp(m[r] - mx); /* 0 for the first tile */
                    l[r] *= corr;
                    for (int64_t e = 0; e < d; e++)
                        acc[r * d + e] *= corr;
                    m[r] = mx;
                }
                l[r] += sum;
            }
            dgemm(0, 0, bi, d, bj, 1.0, s, B, v + j0 * d, d, 1.0, acc, d);
        }
        for (int64_t r = 0; r < bi; r++) {
            narrow(dtype, acc + r * d, 1, d, 1.0 / l[r],
                   (char *)o + (size_t)((i0 + r) * ldo) * (dtype == LADLE_F32 ? 4 : 8),
                   ldo);
            lse[i0 + r] = m[r] + log(l[r]);
        }
    }
}

ladle_status ladle__cpu_attn_forward(const ladle_backend *be, ladle_dtype dtype,
                                     const ladle_attn_geom *g, const void *qkv, void *o,
                                     double *lse, double *ws)
{
    (void)be;
    int64_t T = g->seq, d = g->head_dim, H = g->heads, B = g->block;
    int64_t hd = H * d, es = dtype == LADLE_F32 ? 4 : 8;
    double *q = ws, *k = q + T * d, *v = k + T * d;
    double *s = v + T * d, *acc = s + B * B, *m = acc + B * d, *l = m + B;
    for (int64_t n = 0; n < g->batch; n++)
        for (int64_t h = 0; h < H; h++) {
            const char *base = (const char *)qkv + (size_t)(n * T * 3 * hd + h * d) * es;
            widen(dtype, base, 3 * hd, T, d, q);
            widen(dtype, base + (size_t)hd * es, 3 * hd, T, d, k);
            widen(dtype, base + (size_t)(2 * hd) * es, 3 * hd, T, d, v);
            void *oh = (char *)o + (size_t)(n * T * hd + h * d) * es;
            head_forward(g, dtype, q, k, v, oh, hd, lse + (n * H + h) * T, s, acc, m, l);
        }
    return LADLE_OK;
}

/* One (sample, head) backward into dq, dk, dv (T x d doubles, zeroed
 * here). delta[t] = sum dO[t] O[t] is given. */
static void head_backward(const ladle_attn_geom *g, const double *q, const double *k,
                          const double *v, const double *dout, const double *lse,
                          const double *delta, double *dq, double *dk, double *dv,
                          double *p, double *dp)
{
    int64_t T = g->seq, d = g->head_dim, B = g->block;
    memset(dq, 0, sizeof(double) * (size_t)(3 * T * d)); /* dq, dk, dv are adjacent */
    for (int64_t i0 = 0; i0 < T; i0 += B) {
        int64_t bi = T - i0 < B ? T - i0 : B;
        int64_t jend = g->causal ? i0 + bi : T;
        for (int64_t j0 = 0; j0 < jend; j0 += B) {
            int64_t bj = jend - j0 < B ? jend - j0 : B;
            dgemm(0, 1, bi, bj, d, g->scale, q + i0 * d, d, k + j0 * d, d, 0.0, p, B);
            dgemm(0, 1, bi, bj, d, 1.0, dout + i0 * d, d, v + j0 * d, d, 0.0, dp, B);
            for (int64_t r = 0; r < bi; r++) {
                int64_t lim = visible(g, i0, r, j0, bj);
                exp_row_back(p + r * B, dp + r * B, bj, lim, lse[i0 + r], delta[i0 + r]);
            }
            dgemm(1, 0, bj, d, bi, 1.0, p, B, dout + i0 * d, d, 1.0, dv + j0 * d, d);
            dgemm(0, 0, bi, d, bj, g->scale, dp, B, k + j0 * d, d, 1.0, dq + i0 * d, d);
            dgemm(1, 0, bj, d, bi, g->scale, dp, B, q + i0 * d, d, 1.0, dk + j0 * d, d);
        }
    }
}

ladle_status ladle__cpu_attn_backward(const ladle_backend *be, ladle_dtype dtype,
                                      const ladle_attn_geom *g, const void *qkv,
                                      const void *o, const double *lse, const void *dout,
                                      void *dqkv, double *ws)
{
    (void)be;
    int64_t T = g->seq, d = g->head_dim, H = g->heads, B = g->block;
    int64_t hd = H * d, es = dtype == LADLE_F32 ? 4 : 8;
    double *q = ws, *k = q + T * d, *v = k + T * d, *dov = v + T * d;
    double *dq = dov + T * d, *dk = dq + T * d, *dv = dk + T * d;
    double *delta = dv + T * d, *p = delta + T, *dp = p + B * B;
    for (int64_t n = 0; n < g->batch; n++)
        for (int64_t h = 0; h < H; h++) {
            const char *base = (const char *)qkv + (size_t)(n * T * 3 * hd + h * d) * es;
            size_t ooff = (size_t)(n * T * hd + h * d) * es;
            widen(dtype, base, 3 * hd, T, d, q);
            widen(dtype, base + (size_t)hd * es, 3 * hd, T, d, k);
            widen(dtype, base + (size_t)(2 * hd) * es, 3 * hd, T, d, v);
            widen(dtype, (const char *)dout + ooff, hd, T, d, dov);
            /* delta from the saved o, one row at a time through dq's room */
            for (int64_t t = 0; t < T; t++) {
                widen(dtype, (const char *)o + ooff + (size_t)(t * hd) * es, hd, 1, d, dq);
                double sum = 0;
                for (int64_t e = 0; e < d; e++)
                    sum += dq[e] * dov[t * d + e];
                delta[t] = sum;
            }
            head_backward(g, q, k, v, dov, lse + (n * H + h) * T, delta, dq, dk, dv, p, dp);
            char *out = (char *)dqkv + (size_t)(n * T * 3 * hd + h * d) * es;
            narrow(dtype, dq, T, d, 1.0, out, 3 * hd);
            narrow(dtype, dk, T, d, 1.0, out + (size_t)hd * es, 3 * hd);
            narrow(dtype, dv, T, d, 1.0, out + (size_t)(2 * hd) * es, 3 * hd);
        }
    return LADLE_OK;
}
