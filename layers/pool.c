/*
 * Max and average pooling over 1 to 3 spatial dimensions (lower ones are
 * 3-D with unit extents), and global average pooling.
 *
 * Max pooling skips taps outside the input (the frameworks' -inf padding)
 * and records, per output, the plane offset of the first maximum in window
 * order; the backward adds dy there. Average pooling divides by the window
 * clipped to the padded input (count_include_pad) or to the input itself;
 * it is linear, and its backward spreads dy / divisor over the same window.
 *
 * Both are separable, and the kernels work a plane in two steps:
 *   A. every input row pooled along the last dimension (sums, or maxima
 *      with their offsets), into a plane-sized workspace;
 *   B. every output row combined from its valid tap rows of A, in window
 *      order (max keeps the first row with the largest value, and A kept
 *      the first tap along the row: together the first in window order).
 * A's inner loops are vectorised across outputs with the taps unrolled for
 * the common kernel/stride pairs; outputs at the padded edges take their
 * valid taps one by one. The average backward runs B and A transposed.
 * Common 2-d windows (2x2 with stride 2; 3x3 with stride 1 or 2 and padding
 * 0 or 1) skip both steps: see pool_direct.c.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "layers/pool_impl.h"
#include "src/backends/cpu/simd.h"

static void pool_free(pool *v)
{
    if (v == NULL)
        return;
    ladle__free(v->base2);
    ladle__free(v->lo2);
    ladle__free(v->hi2);
    ladle__free(v->trows);
    ladle__free(v->ntrows);
    ladle__free(v->f01);
    ladle__free(v->f2d);
    ladle__free(v->f2f);
    ladle__free(v->av);
    ladle__free(v->aa);
    ladle__free(v->g);
    ladle__free(v->tmp);
    ladle__free(v->crows);
    ladle__free(v->ncrows);
    ladle__free(v->bhi);
    ladle__free(v->bc);
    ladle__free(v->rows3);
    ladle__free(v);
}

/* One dimension's window o: first index, valid taps, and the reciprocal of
 * the divisor's factor (the frameworks' bounds for average pooling). */
static void window(const pool *v, int a, int64_t o, int64_t *base, int64_t *lo, int64_t *hi,
                   double *f)
{
    int64_t b = o * v->s[a] - v->p[a], l = 0, h = v->k[a];
    while (l < h && b + l * v->d[a] < 0)
        l++;
    while (h > l && b + (h - 1) * v->d[a] >= v->in[a])
        h--;
    *base = b;
    *lo = l;
    *hi = h;
    int64_t end = b + v->k[a] < v->in[a] + v->p[a] ? b + v->k[a] : v->in[a] + v->p[a];
    int64_t cl = b < 0 ? 0 : b, ch = end > v->in[a] ? v->in[a] : end;
    if (v->count_include_pad)
        *f = 1.0 / (double)(end - b);
    else
        *f = ch > cl ? 1.0 / (double)(ch - cl) : 0.0;
}

/* The plan-time tables and workspace. */
static int tables(pool *v)
{
    int64_t n2 = v->out[2];
    v->rows_in = v->in[0] * v->in[1];
    v->rows_out = v->out[0] * v->out[1];
    v->kk = v->k[0] * v->k[1];
    v->base2 = ladle__calloc((size_t)n2, sizeof(int64_t));
    v->lo2 = ladle__calloc((size_t)n2, sizeof(int64_t));
    v->hi2 = ladle__calloc((size_t)n2, sizeof(int64_t));
    v->f2d = ladle__calloc((size_t)n2, sizeof(double));
    v->f2f = ladle__calloc((size_t)n2, sizeof(float));
    v->trows = ladle__calloc((size_t)(v->rows_out * v->kk), sizeof(int64_t));
    v->ntrows = ladle__calloc((size_t)v->rows_out, sizeof(int64_t));
    v->f01 = ladle__calloc((size_t)v->rows_out, sizeof(double));
    v->pw = v->k[2];
    v->astride = n2 + 2 * v->pw;
    v->av = ladle__calloc((size_t)(v->rows_in * v->astride), sizeof(double));
    v->aa = ladle__calloc((size_t)(v->rows_in * n2), sizeof(int32_t));
    v->g = ladle__calloc((size_t)n2, sizeof(double));
    v->tmp = ladle__calloc((size_t)n2, sizeof(int32_t));
    if (!v->base2 || !v->lo2 || !v->hi2 || !v->f2d || !v->f2f || !v->trows || !v->ntrows ||
        !v->f01 || !v->av || !v->aa || !v->g || !v->tmp)
        return 0;
    v->oa = n2;
    v->ob = 0;
    for (int64_t o = 0; o < n2; o++) {
        window(v, 2, o, &v->base2[o], &v->lo2[o], &v->hi2[o], &v->f2d[o]);
        v->f2f[o] = (float)v->f2d[o];
        if (v->lo2[o] == 0 && v->hi2[o] == v->k[2]) {
            v->oa = o < v->oa ? o : v->oa;
            v->ob = o + 1;
        }
    }
    if (v->ob <= v->oa)
        v->oa = v->ob = 0; /* no output has all its taps inside */
    for (int64_t o0 = 0; o0 < v->out[0]; o0++)
        for (int64_t o1 = 0; o1 < v->out[1]; o1++) {
            int64_t r = o0 * v->out[1] + o1, b0, l0, h0, b1, l1, h1, nr = 0;
            double f0, f1;
            window(v, 0, o0, &b0, &l0, &h0, &f0);
            window(v, 1, o1, &b1, &l1, &h1, &f1);
            for (int64_t t0 = l0; t0 < h0; t0++)
                for (int64_t t1 = l1; t1 < h1; t1++)
                    v->trows[r * v->kk + nr++] =
                        (b0 + t0 * v->d[0]) * v->in[1] + b1 + t1 * v->d[1];
            v->ntrows[r] = nr;
            v->f01[r] = f0 * f1;
        }
    return v->direct != POOL_K3 || ladle__pool_direct_tables(v);
}

/* dst = p[0], p[s], ..., p[(BLK-1) s]. Stride 2 reads two vectors and keeps
 * the even lanes when p[2 BLK - 1] is still inside the tensor (< end). */
#if defined(__GNUC__) && !defined(__clang__)
#define EVENS(V, M, dst, p)                                                              \
    do {                                                                                 \
        V a_, b_;                                                                        \
        memcpy(&a_, (p), sizeof a_);                                                     \
        memcpy(&b_, (p) + BLK, sizeof b_);                                               \
        (dst) = __builtin_shuffle(a_, b_, (M){0, 2, 4, 6, 8, 10, 12, 14});               \
    } while (0)
#else
#define EVENS(V, M, dst, p) VGATHER(dst, p, 2)
#endif
#define VGATHER(dst, p, s)                                                               \
    do {                                                                                 \
        for (int l_ = 0; l_ < BLK; l_++)                                                 \
            (dst)[l_] = (p)[l_ * (s)];                                                   \
    } while (0)
#define VLOAD(V, M, dst, p, s, end)                                                      \
    do {                                                                                 \
        if ((s) == 1)                                                                    \
            memcpy(&(dst), (p), sizeof(dst));                                            \
        else if ((s) == 2 && (p) + 2 * BLK <= (end))                                     \
            EVENS(V, M, dst, p);                                                         \
        else                                                                             \
            VGATHER(dst, p, s);                                                          \
    } while (0)

/* The common (kernel, stride, dilation) triples along the last dimension
 * get their own copies of a row loop, with the taps unrolled. */
#define ROW_CASES(v, CALL)                                                               \
    do {                                                                                 \
        int64_t k_ = (v)->k[2], s_ = (v)->s[2], d_ = (v)->d[2];                          \
        if (k_ == 2 && s_ == 2 && d_ == 1)                                               \
            CALL(2, 2, 1);                                                               \
        else if (k_ == 3 && s_ == 2 && d_ == 1)                                          \
            CALL(3, 2, 1);                                                               \
        else if (k_ == 3 && s_ == 1 && d_ == 1)                                          \
            CALL(3, 1, 1);                                                               \
        else if (k_ == 2 && s_ == 1 && d_ == 1)                                          \
            CALL(2, 1, 1);                                                               \
        else                                                                             \
            CALL(k_, s_, d_);                                                            \
    } while (0)

#define DEFINE_POOL(T, S, V, M)                                                              \
    /* A over the interior outputs [oa, ob) of one row (plane offset off), in  \
     * blocks of BLK outputs, the last one overlapping its neighbour */                  \
    LADLE_INLINE void sum_inner_##S(const T *xr, const T *end, T *sr, int64_t oa,         \
                                    int64_t ob, int64_t p, const int64_t K,              \
                                    const int64_t ST, const int64_t D)                   \
    {                                                                                    \
        if (ob - oa < BLK) {                                                             \
            for (int64_t o = oa; o < ob; o++) {                                          \
                T acc = 0;                                                               \
                for (int64_t t = 0; t < K; t++)                                          \
                    acc += xr[o * ST - p + t * D];                                       \
                sr[o] = acc;                                                             \
            }                                                                            \
            return;                                                                      \
        }                                                                                \
        for (int64_t o = oa; o < ob; o += BLK) {                                         \
            o = o + BLK <= ob ? o : ob - BLK;                                            \
            V acc = {0}, val = {0};                                                      \
            for (int64_t t = 0; t < K; t++) {                                            \
                VLOAD(V, M, val, xr + o * ST - p + t * D, ST, end);                      \
                acc += val;                                                              \
            }                                                                            \
            memcpy(sr + o, &acc, sizeof acc);                                            \
        }                                                                                \
    }                                                                                    \
    LADLE_INLINE void max_inner_##S(const T *xr, const T *end, T *sr, int32_t *ar,        \
                                    int32_t off, int64_t oa, int64_t ob, int64_t p,      \
                                    const int64_t K, const int64_t ST, const int64_t D)  \
    {                                                                                    \
        if (ob - oa < BLK) {                                                             \
            for (int64_t o = oa; o < ob; o++) {                                          \
                int32_t i = (int32_t)(o * ST - p), at = i;                               \
                T best = xr[i];                                                          \
                for (int64_t t = 1; t < K; t++) {                                        \
                    int32_t it = i + (int32_t)(t * D);                                   \
                    int take = wins_##S(xr[it], best);                                   \
                    best = take ? xr[it] : best;                                         \
                    at = take ? it : at;                                                 \
                }                                                                        \
                sr[o] = best;                                                            \
                ar[o] = at + off;                                                        \
            }                                                                            \
            return;                                                                      \
        }                                                                                \
        const M lane = (M){0, 1, 2, 3, 4, 5, 6, 7} * (int32_t)ST + off;                  \
        for (int64_t o = oa; o < ob; o += BLK) {                                         \
            o = o + BLK <= ob ? o : ob - BLK;                                            \
            int64_t i = o * ST - p;                                                      \
            V best = {0}, val = {0};                                                     \
            VLOAD(V, M, best, xr + i, ST, end);                                          \
            M arg = lane + (int32_t)i;                                                   \
            for (int64_t t = 1; t < K; t++) {                                            \
                VLOAD(V, M, val, xr + i + t * D, ST, end);                               \
                M take = (val > best) | ((val != val) & (best == best));                 \
                best = (V)(((M)val & take) | ((M)best & ~take));                         \
                arg = ((lane + (int32_t)(i + t * D)) & take) | (arg & ~take);            \
            }                                                                            \
            memcpy(sr + o, &best, sizeof best);                                          \
            for (int l = 0; l < BLK; l++)                                                \
                ar[o + l] = (int32_t)arg[l];                                             \
        }                                                                                \
    }                                                                                    \
    /* A for a whole plane */                                                            \
    LADLE_INLINE void row_pass_##S(const pool *v, const T *xp, const T *end, T *av,      \
                                   int64_t as, int32_t *aa)                              \
    {                                                                                    \
        int64_t n = v->in[2], n2 = v->out[2], p = v->p[2];                               \
        int max = v->kind == LADLE_POOL_MAX;                                             \
        for (int64_t row = 0; row < v->rows_in; row++) {                                 \
            const T *xr = xp + row * n;                                                  \
            T *sr = av + row * as;                                                       \
            int32_t *ar = aa + row * n2, off = (int32_t)(row * n);                       \
            /* the edges: outputs [0, oa) and [ob, n2) */                               \
            for (int64_t o = 0, e = v->oa; o < n2; o = o < e ? o + 1 : n2) {             \
                if (o == e) {                                                            \
                    o = v->ob > e ? v->ob : e;                                           \
                    e = n2;                                                              \
                    if (o >= n2)                                                         \
                        break;                                                           \
                }                                                                        \
                if (max) {                                                               \
                    T best = (T)-INFINITY;                                               \
                    int32_t at = -1;                                                     \
                    for (int64_t t = v->lo2[o]; t < v->hi2[o]; t++) {                    \
                        int32_t i = (int32_t)(v->base2[o] + t * v->d[2]);                \
                        int take = (at < 0) | wins_##S(xr[i], best);                     \
                        best = take ? xr[i] : best;                                      \
                        at = take ? i + off : at;                                        \
                    }                                                                    \
                    sr[o] = best;                                                        \
                    ar[o] = at;                                                          \
                } else {                                                                 \
                    T acc = 0;                                                           \
                    for (int64_t t = v->lo2[o]; t < v->hi2[o]; t++)                      \
                        acc += xr[v->base2[o] + t];                                      \
                    sr[o] = acc;                                                         \
                }                                                                        \
            }                                                                            \
            if (max) {                                                                   \
                ROW_CASES(v, MAX_CALL_##S);                                              \
            } else {                                                                     \
                ROW_CASES(v, SUM_CALL_##S);                                              \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
    /* B: output row r from its tap rows of A */                                         \
    LADLE_KERNEL static void max_fwd_##S(const pool *v, int64_t planes, const T *x, T *y, \
                                         int32_t *arg, int32_t *tmp, T *av, int32_t *aa) \
    {                                                                                    \
        int64_t n2 = v->out[2];                                                          \
        for (int64_t pl = 0; pl < planes; pl++) {                                        \
            row_pass_##S(v, x + pl * v->pin, x + planes * v->pin, av, n2, aa);                                    \
            for (int64_t r = 0, q = pl * v->pout; r < v->rows_out; r++, q += n2) {       \
                const int64_t *tr = v->trows + r * v->kk;                                \
                int64_t nr = v->ntrows[r];                                               \
                T *restrict yr = y + q;                                                  \
                int32_t *restrict at = arg ? arg + q : tmp;                              \
                if (nr == 0) {                                                           \
                    for (int64_t o = 0; o < n2; o++) {                                   \
                        yr[o] = (T)-INFINITY;                                            \
                        at[o] = -1;                                                      \
                    }                                                                    \
                    continue;                                                            \
                }                                                                        \
                const T *a0 = av + tr[0] * n2;                                           \
                const int32_t *i0 = aa + tr[0] * n2;                                     \
                if (nr == 1) {                                                           \
                    memcpy(yr, a0, sizeof(T) * (size_t)n2);                              \
                    memcpy(at, i0, sizeof(int32_t) * (size_t)n2);                        \
                    continue;                                                            \
                }                                                                        \
                const T *a1 = av + tr[1] * n2;                                           \
                const int32_t *i1 = aa + tr[1] * n2;                                     \
                for (int64_t o = 0; o < n2; o++) {                                       \
                    int take = wins_##S(a1[o], a0[o]) & (i1[o] >= 0);                    \
                    int keep = i0[o] >= 0;                                               \
                    take |= !keep;                                                       \
                    yr[o] = take ? a1[o] : a0[o];                                        \
                    at[o] = take ? i1[o] : i0[o];                                        \
                }                                                                        \
                for (int64_t j = 2; j < nr; j++) {                                       \
                    const T *aj = av + tr[j] * n2;                                       \
                    const int32_t *ij = aa + tr[j] * n2;                                 \
                    for (int64_t o = 0; o < n2; o++) {                                   \
                        int take = (wins_##S(aj[o], yr[o]) & (ij[o] >= 0)) | (at[o] < 0); \
                        yr[o] = take ? aj[o] : yr[o];                                    \
                        at[o] = take ? ij[o] : at[o];                                    \
                    }                                                                    \
                }                                                                        \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
    LADLE_KERNEL static void avg_fwd_##S(const pool *v, int64_t planes, const T *x, T *y, \
                                         T *av, int32_t *aa, const T *f2)                \
    {                                                                                    \
        int64_t n2 = v->out[2], as = v->astride;                                         \
        for (int64_t pl = 0; pl < planes; pl++) {                                        \
            row_pass_##S(v, x + pl * v->pin, x + planes * v->pin, av + v->pw, as, aa);                                    \
            for (int64_t r = 0, q = pl * v->pout; r < v->rows_out; r++, q += n2) {       \
                const int64_t *tr = v->trows + r * v->kk;                                \
                int64_t nr = v->ntrows[r];                                               \
                T *restrict yr = y + q, f = (T)v->f01[r];                                \
                if (nr == 0) {                                                           \
                    memset(yr, 0, sizeof(T) * (size_t)n2);                               \
                    continue;                                                            \
                }                                                                        \
                const T *a0 = av + v->pw + tr[0] * as;                                   \
                const T *a1 = nr > 1 ? av + v->pw + tr[1] * as : a0;                     \
                const T *a2 = nr > 2 ? av + v->pw + tr[2] * as : a0;                     \
                if (nr == 1)                                                             \
                    for (int64_t o = 0; o < n2; o++)                                     \
                        yr[o] = a0[o] * (f * f2[o]);                                     \
                else if (nr == 2)                                                        \
                    for (int64_t o = 0; o < n2; o++)                                     \
                        yr[o] = (a0[o] + a1[o]) * (f * f2[o]);                           \
                else {                                                                   \
                    for (int64_t o = 0; o < n2; o++)                                     \
                        yr[o] = a0[o] + a1[o] + a2[o];                                   \
                    for (int64_t j = 3; j < nr; j++) {                                   \
                        const T *aj = av + v->pw + tr[j] * as;                           \
                        for (int64_t o = 0; o < n2; o++)                                 \
                            yr[o] += aj[o];                                              \
                    }                                                                    \
                    for (int64_t o = 0; o < n2; o++)                                     \
                        yr[o] *= f * f2[o];                                              \
                }                                                                        \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
    /* dx[i] = sum_t a[i + p - t] for stride 1: av's zero margins stand in     \
     * for the outputs outside the row */                                                \
    LADLE_INLINE void gather1_##S(T *restrict xr, const T *restrict a, int64_t n,        \
                                  int64_t p, const int64_t K)                            \
    {                                                                                    \
        for (int64_t i = 0; i < n; i++) {                                                \
            T acc = 0;                                                                   \
            for (int64_t t = 0; t < K; t++)                                              \
                acc += a[i + p - t];                                                     \
            xr[i] = acc;                                                                 \
        }                                                                                \
    }                                                                                    \
    /* the adjoint of average pooling: B^T into av, then A^T into dx */                 \
    LADLE_KERNEL static void avg_bwd_##S(const pool *v, int64_t planes, const T *dy,      \
                                         T *dx, T *av, T *g, const T *f2)                \
    {                                                                                    \
        int64_t n = v->in[2], n2 = v->out[2], p = v->p[2], as = v->astride;              \
        int64_t K = v->k[2], ST = v->s[2], D = v->d[2];                                  \
        for (int64_t pl = 0; pl < planes; pl++) {                                        \
            memset(av, 0, sizeof(T) * (size_t)(v->rows_in * as));                        \
            for (int64_t r = 0, q = pl * v->pout; r < v->rows_out; r++, q += n2) {       \
                const int64_t *tr = v->trows + r * v->kk;                                \
                T f = (T)v->f01[r];                                                      \
                for (int64_t o = 0; o < n2; o++)                                         \
                    g[o] = dy[q + o] * (f * f2[o]);                                      \
                for (int64_t j = 0; j < v->ntrows[r]; j++) {                             \
                    T *restrict aj = av + v->pw + tr[j] * as;                            \
                    for (int64_t o = 0; o < n2; o++)                                     \
                        aj[o] += g[o];                                                   \
                }                                                                        \
            }                                                                            \
            T *dxp = dx + pl * v->pin;                                                   \
            for (int64_t row = 0; row < v->rows_in; row++) {                             \
                T *restrict xr = dxp + row * n;                                          \
                const T *restrict sr = av + v->pw + row * as;                            \
                if (ST == 1 && D == 1) {                                                 \
                    if (K == 2)                                                          \
                        gather1_##S(xr, sr, n, p, 2);                                    \
                    else if (K == 3)                                                     \
                        gather1_##S(xr, sr, n, p, 3);                                    \
                    else                                                                 \
                        gather1_##S(xr, sr, n, p, K);                                    \
                    continue;                                                            \
                }                                                                        \
                memset(xr, 0, sizeof(T) * (size_t)n);                                    \
                for (int64_t o = 0, e = v->oa; o < n2; o = o < e ? o + 1 : n2) {         \
                    if (o == e) {                                                        \
                        o = v->ob > e ? v->ob : e;                                       \
                        e = n2;                                                          \
                        if (o >= n2)                                                     \
                            break;                                                       \
                    }                                                                    \
                    for (int64_t t = v->lo2[o]; t < v->hi2[o]; t++)                      \
                        xr[v->base2[o] + t * D] += sr[o];                                \
                }                                                                        \
                if (K == 2 && ST == 2 && D == 1) /* windows apart: stores */             \
                    for (int64_t o = v->oa; o < v->ob; o++) {                            \
                        xr[2 * o - p] = sr[o];                                           \
                        xr[2 * o - p + 1] = sr[o];                                       \
                    }                                                                    \
                else                                                                     \
                    for (int64_t t = 0; t < K; t++)                                      \
                        for (int64_t o = v->oa; o < v->ob; o++)                          \
                            xr[o * ST - p + t * D] += sr[o];                             \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
    LADLE_KERNEL static void max_bwd_##S(const pool *v, int64_t planes, const T *dy,      \
                                         T *dx, const int32_t *arg)                      \
    {                                                                                    \
        for (int64_t pl = 0; pl < planes; pl++) {                                        \
            const T *dyp = dy + pl * v->pout;                                            \
            const int32_t *ap = arg + pl * v->pout;                                      \
            T *dxp = dx + pl * v->pin;                                                   \
            memset(dxp, 0, sizeof(T) * (size_t)v->pin);                                  \
            for (int64_t q = 0; q < v->pout; q++)                                        \
                if (ap[q] >= 0)                                                          \
                    dxp[ap[q]] += dyp[q];                                                \
        }                                                                                \
    }                                                                                    \
    LADLE_KERNEL static void global_fwd_##S(const pool *v, int64_t planes, const T *x,    \
                                            T *y)                                        \
    {                                                                                    \
        for (int64_t pl = 0; pl < planes; pl++) {                                        \
            const T *xp = x + pl * v->pin;                                               \
            double sum = 0;                                                              \
            for (int64_t i = 0; i < v->pin;) {                                           \
                int64_t e = i + 256 < v->pin ? i + 256 : v->pin;                         \
                T acc[16] = {0};                                                         \
                for (; i + 16 <= e; i += 16)                                             \
                    for (int j = 0; j < 16; j++)                                         \
                        acc[j] += xp[i + j];                                             \
                for (; i < e; i++)                                                       \
                    acc[0] += xp[i];                                                     \
                for (int j = 0; j < 16; j++)                                             \
                    sum += acc[j];                                                       \
            }                                                                            \
            y[pl] = (T)(sum / (double)v->pin);                                           \
        }                                                                                \
    }                                                                                    \
    LADLE_KERNEL static void global_bwd_##S(const pool *v, int64_t planes, const T *dy,   \
                                            T *dx)                                       \
    {                                                                                    \
        for (int64_t pl = 0; pl < planes; pl++) {                                        \
            T g = (T)(dy[pl] / (double)v->pin);                                          \
            T *dxp = dx + pl * v->pin;                                                   \
            for (int64_t i = 0; i < v->pin; i++)                                         \
                dxp[i] = g;                                                              \
        }                                                                                \
    }

#define SUM_CALL_f32(K, ST, D) sum_inner_f32(xr, end, sr, v->oa, v->ob, p, K, ST, D)
#define SUM_CALL_f64(K, ST, D) sum_inner_f64(xr, end, sr, v->oa, v->ob, p, K, ST, D)
#define MAX_CALL_f32(K, ST, D) max_inner_f32(xr, end, sr, ar, off, v->oa, v->ob, p, K, ST, D)
#define MAX_CALL_f64(K, ST, D) max_inner_f64(xr, end, sr, ar, off, v->oa, v->ob, p, K, ST, D)

DEFINE_POOL(float, f32, vf32, mf32)
DEFINE_POOL(double, f64, vf64, mf64)


static ladle_status pool_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                 ladle_tensor *y, int64_t n)
{
    pool *v = op->impl;
    int32_t *arg = ctx ? ctx->buf : NULL;
    int64_t planes = n * v->channels;
    int f32 = op->dtype == LADLE_F32;
    if (v->global && f32)
        global_fwd_f32(v, planes, x->data, y->data);
    else if (v->global)
        global_fwd_f64(v, planes, x->data, y->data);
    else if (v->direct)
        ladle__pool_direct_forward(v, f32, planes, x->data, y->data, (uint8_t *)arg);
    else if (v->kind == LADLE_POOL_MAX && f32)
        max_fwd_f32(v, planes, x->data, y->data, arg, v->tmp, v->av, v->aa);
    else if (v->kind == LADLE_POOL_MAX)
        max_fwd_f64(v, planes, x->data, y->data, arg, v->tmp, v->av, v->aa);
    else if (f32)
        avg_fwd_f32(v, planes, x->data, y->data, v->av, v->aa, v->f2f);
    else
        avg_fwd_f64(v, planes, x->data, y->data, v->av, v->aa, v->f2d);
    return LADLE_OK;
}

static ladle_status pool_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                  ladle_tensor *dx, int64_t n)
{
    pool *v = op->impl;
    if (dx == NULL)
        return LADLE_OK;
    const int32_t *arg = ctx ? ctx->buf : NULL;
    int64_t planes = n * v->channels;
    int f32 = op->dtype == LADLE_F32;
    if (v->global && f32)
        global_bwd_f32(v, planes, dy->data, dx->data);
    else if (v->global)
        global_bwd_f64(v, planes, dy->data, dx->data);
    else if (v->direct)
        ladle__pool_direct_backward(v, f32, planes, dy->data, dx->data,
                                    (const uint8_t *)arg);
    else if (v->kind == LADLE_POOL_MAX && f32)
        max_bwd_f32(v, planes, dy->data, dx->data, arg);
    else if (v->kind == LADLE_POOL_MAX)
        max_bwd_f64(v, planes, dy->data, dx->data, arg);
    else if (f32)
        avg_bwd_f32(v, planes, dy->data, dx->data, v->av, v->g, v->f2f);
    else
        avg_bwd_f64(v, planes, dy->data, dx->data, v->av, v->g, v->f2d);
    return LADLE_OK;
}

static void pool_destroy(ladle_op *op) { pool_free(op->impl); }

static const ladle_op_vtable pool_vt = {
    .name = "pool",
    .destroy = pool_destroy,
    .layer_forward = pool_forward,
    .layer_backward = pool_backward,
};

void ladle_pool_desc_init(ladle_pool_desc *d, ladle_pool_kind kind, int nd, int64_t kernel)
{
    if (d == NULL)
        return;
    memset(d, 0, sizeof *d);
    d->kind = kind;
    d->nd = nd;
    for (int i = 0; i < 3; i++) {
        d->kernel[i] = kernel;
        d->dilation[i] = 1;
    }
    d->count_include_pad = 1;
}

static ladle_status plan(const ladle_pool_desc *d, const int64_t *xs, pool *v)
{
    const char *f = "ladle_pool_create";
    char what[40];
    if (d->kind != LADLE_POOL_MAX && d->kind != LADLE_POOL_AVG)
        return ladle__raise(LADLE_ERR_ARG, f, "unknown pooling kind %d", (int)d->kind);
    v->kind = d->kind;
    v->count_include_pad = d->count_include_pad;
    v->channels = xs[1];
    v->planes = xs[0] * xs[1];
    v->pin = v->pout = 1;
    for (int a = 0; a < 3; a++) {
        int s = a - (3 - d->nd);
        v->in[a] = s < 0 ? 1 : xs[2 + s];
        v->k[a] = s < 0 ? 1 : d->kernel[s];
        v->s[a] = s < 0 ? 1 : d->stride[s] ? d->stride[s] : d->kernel[s];
        v->p[a] = s < 0 ? 0 : d->padding[s];
        v->d[a] = s < 0 ? 1 : d->dilation[s];
        snprintf(what, sizeof what, "spatial dimension %d", s < 0 ? 0 : s);
        ladle_status st = ladle__window_length(f, what, v->in[a], v->k[a], v->s[a], v->p[a],
                                               v->d[a], d->ceil_mode, &v->out[a]);
        if (st != LADLE_OK)
            return st;
        if (d->kind == LADLE_POOL_AVG && v->d[a] != 1)
            return ladle__raise(LADLE_ERR_ARG, f, "average pooling has no dilation");
        if (2 * v->p[a] > v->k[a])
            return ladle__raise(LADLE_ERR_ARG, f, "padding %lld is more than half the kernel "
                                "%lld", (long long)v->p[a], (long long)v->k[a]);
        if (v->out[a] < 1)
            return ladle__raise(LADLE_ERR_SHAPE, f, "the window (%lld) is larger than the "
                                "padded input (%lld)",
                                (long long)(v->d[a] * (v->k[a] - 1) + 1),
                                (long long)(v->in[a] + 2 * v->p[a]));
        /* with 2p <= k an output extent is at most the input's plus one:
         * the products stay as small as x's */
        v->pin *= v->in[a];
        v->pout *= v->out[a];
    }
    if (v->pin > INT32_MAX)
        return ladle__raise(LADLE_ERR_SHAPE, f, "planes above 2^31 elements");
    v->direct = ladle__pool_direct_case(v);
    v->narrow = LADLE_RUNS_V4();
    return LADLE_OK;
}

static ladle_status finish(pool *v, ladle_dtype dtype, int ndim, const int64_t *xs, int y_ndim,
                           const int64_t *ys, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    LADLE_CHECK(tables(v), LADLE_ERR_ALLOC, "out of memory");
    LADLE_CALL(ladle__layer_new(&pool_vt, dtype, ndim, xs, y_ndim, ys, 1, &op));
    op->impl = v;
    op->linear = v->kind == LADLE_POOL_AVG;
    if (v->kind == LADLE_POOL_MAX) /* the winners: offsets, or the direct kernels' codes */
        op->ctx_bytes = (v->direct ? 1 : sizeof(int32_t)) * (size_t)(v->planes * v->pout);
    *out = op;
    return LADLE_OK;
fail:
    pool_free(v);
    return st;
}

ladle_status ladle_pool_create(const ladle_pool_desc *d, const int64_t x_shape[],
                               ladle_dtype dtype, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    pool *v = NULL;
    int64_t ys[5];
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(out);
    LADLE_CHECK(d->nd >= 1 && d->nd <= 3, LADLE_ERR_ARG, "%d spatial dimensions (1 to 3)",
                d->nd);
    LADLE_CALL(ladle__layer_check_args(__func__, dtype, 2 + d->nd, x_shape, 3));
    v = ladle__calloc(1, sizeof *v);
    LADLE_CHECK(v != NULL, LADLE_ERR_ALLOC, "out of memory");
    LADLE_CALL(plan(d, x_shape, v));
    ys[0] = x_shape[0];
    ys[1] = x_shape[1];
    for (int i = 0; i < d->nd; i++)
        ys[2 + i] = v->out[3 - d->nd + i];
    int64_t numel;
    LADLE_CALL(ladle__check_shape(__func__, 2 + d->nd, ys, &numel));
    st = finish(v, dtype, 2 + d->nd, x_shape, 2 + d->nd, ys, out);
    v = NULL;
fail:
    pool_free(v);
    return st;
}

ladle_status ladle_global_avg_pool_create(int ndim, const int64_t x_shape[], ladle_dtype dtype,
                                          ladle_op **out)
{
    ladle_status st = LADLE_OK;
    pool *v = NULL;
    LADLE_NOT_NULL(out);
    LADLE_CALL(ladle__layer_check_args(__func__, dtype, ndim, x_shape, 3));
    LADLE_CHECK(ndim <= 5, LADLE_ERR_SHAPE, "1 to 3 spatial dimensions, not %d", ndim - 2);
    v = ladle__calloc(1, sizeof *v);
    LADLE_CHECK(v != NULL, LADLE_ERR_ALLOC, "out of memory");
    /* one window covering the whole plane */
    v->kind = LADLE_POOL_AVG;
    v->count_include_pad = 1;
    v->channels = x_shape[1];
    v->planes = x_shape[0] * x_shape[1];
    v->global = 1;
    v->pin = v->pout = 1;
    for (int a = 0; a < 3; a++) {
        int s = a - (3 - (ndim - 2));
        v->in[a] = v->k[a] = v->s[a] = s < 0 ? 1 : x_shape[2 + s];
        v->d[a] = 1;
        v->out[a] = 1;
        v->pin *= v->in[a];
    }
    LADLE_CHECK(v->pin >= 1, LADLE_ERR_SHAPE, "empty spatial planes");
    st = finish(v, dtype, ndim, x_shape, 2, x_shape, out);
    v = NULL;
fail:
    pool_free(v);
    return st;
}
