/*
 * Max and average pooling on the CPU: the plan that pool_setup lays into
 * the workspace, the generic separable kernels, and the slots (the direct
 * kernels of the common 2-d windows are in pool_direct.c).
 *
 * Both kinds are separable, and the generic kernels work a plane in two
 * steps:
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
 *
 * Built with -ffp-contract=fast like the layers it came from (Makefile), so
 * its sums and products round as they always have.
 */
#include <math.h>
#include <string.h>

#include "src/backends/cpu/pool_impl.h"

/* One dimension's window o: first index, valid taps, and the reciprocal of
 * the divisor's factor (the frameworks' bounds for average pooling). */
static void window(const cpu_pool *v, int a, int64_t o, int64_t *base, int64_t *lo,
                   int64_t *hi, double *f)
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

/* The plan's scalars from the geometry. */
static void geometry(cpu_pool *v, const ladle_pool_geom *g)
{
    memset(v, 0, sizeof *v);
    v->kind = g->kind;
    v->count_include_pad = g->count_include_pad;
    v->global = g->global;
    v->pin = v->pout = 1;
    for (int a = 0; a < 3; a++) {
        v->in[a] = g->in[a];
        v->out[a] = g->out[a];
        v->k[a] = g->k[a];
        v->s[a] = g->s[a];
        v->p[a] = g->p[a];
        v->d[a] = g->d[a];
        v->pin *= v->in[a];
        v->pout *= v->out[a];
    }
    v->rows_in = v->in[0] * v->in[1];
    v->rows_out = v->out[0] * v->out[1];
    v->kk = v->k[0] * v->k[1];
    v->pw = v->k[2];
    v->astride = v->out[2] + 2 * v->pw;
    v->direct = v->global ? POOL_GENERIC : ladle__cpu_pool_direct_case(v);
    v->narrow = LADLE_RUNS_V4();
}

/* Point the plan's tables and scratch into the workspace at base (the
 * plan first, then each part 64-byte aligned), or with base NULL only count
 * the bytes; either way the workspace's size. */
static size_t layout(cpu_pool *v, char *base)
{
    size_t at = 0, n2 = (size_t)v->out[2], ro = (size_t)v->rows_out;
    size_t H = (size_t)v->in[1], H2 = (size_t)v->out[1];
#define PART(field, count, type)                                                         \
    do {                                                                                 \
        if (base != NULL)                                                                \
            v->field = (void *)(base + at);                                              \
        at += ((size_t)(count) * sizeof(type) + 63) / 64 * 64;                           \
    } while (0)
    at += (sizeof *v + 63) / 64 * 64;
    PART(base2, n2, int64_t);
    PART(lo2, n2, int64_t);
    PART(hi2, n2, int64_t);
    PART(f2d, n2, double);
    PART(f2f, n2, float);
    PART(trows, ro * (size_t)v->kk, int64_t);
    PART(ntrows, ro, int64_t);
    PART(f01, ro, double);
    PART(av, (size_t)v->rows_in * (size_t)v->astride, double);
    PART(aa, (size_t)v->rows_in * n2, int32_t);
    PART(g, n2, double);
    PART(tmp, n2, int32_t);
    if (v->direct == POOL_K3) {
        /* max: a plane of offsets, for a forward that saves no codes;
         * average: the backward's plane of dy times the column factors,
         * rows zero-padded */
        PART(crows, 3 * H, int64_t);
        PART(ncrows, H, int64_t);
        PART(bhi, H, int64_t);
        PART(bc, 3 * H, double);
        if (v->kind == LADLE_POOL_MAX)
            PART(rows3, v->pout, int32_t);
        else
            PART(rows3, H2 * (n2 + 4), double);
    }
#undef PART
    return at;
}

/* The tables of the plan, its parts in place. */
static void tables(cpu_pool *v)
{
    int64_t n2 = v->out[2];
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
    if (v->direct == POOL_K3)
        ladle__cpu_pool_direct_tables(v);
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


#define SUM_CALL_f32(K, ST, D) sum_inner_f32(xr, end, sr, v->oa, v->ob, p, K, ST, D)
#define SUM_CALL_f64(K, ST, D) sum_inner_f64(xr, end, sr, v->oa, v->ob, p, K, ST, D)
#define MAX_CALL_f32(K, ST, D) max_inner_f32(xr, end, sr, ar, off, v->oa, v->ob, p, K, ST, D)
#define MAX_CALL_f64(K, ST, D) max_inner_f64(xr, end, sr, ar, off, v->oa, v->ob, p, K, ST, D)

#define T float
#define S f32
#define V vf32
#define M mf32
#include "src/backends/cpu/pool_generic.inc"
#undef T
#undef S
#undef V
#undef M
#define T double
#define S f64
#define V vf64
#define M mf64
#include "src/backends/cpu/pool_generic.inc"
#undef T
#undef S
#undef V
#undef M

ladle_status ladle__cpu_pool_plan(const ladle_backend *be, ladle_dtype dtype,
                                  const ladle_pool_geom *g, size_t *ws_bytes,
                                  size_t *saved_bytes)
{
    cpu_pool v;
    geometry(&v, g);
    *ws_bytes = layout(&v, NULL);
    /* the winners: plane offsets, or the direct kernels' one-byte codes */
    *saved_bytes = g->kind == LADLE_POOL_MAX
                       ? (v.direct ? 1 : sizeof(int32_t)) * (size_t)v.pout
                       : 0;
    return LADLE_OK;
}

ladle_status ladle__cpu_pool_setup(const ladle_backend *be, ladle_dtype dtype,
                                   const ladle_pool_geom *g, void *ws)
{
    cpu_pool *v = ws;
    geometry(v, g);
    size_t bytes = layout(v, ws);
    /* zero all but the plan: the scratch's margins must be, and the pages
     * are touched here rather than in the first forward */
    memset((char *)ws + sizeof *v, 0, bytes - sizeof *v);
    tables(v);
    return LADLE_OK;
}

ladle_status ladle__cpu_pool_forward(const ladle_backend *be, ladle_dtype dtype,
                                     const ladle_pool_geom *g, int64_t planes, const void *x,
                                     void *y, void *saved, void *ws)
{
    const cpu_pool *v = ws;
    int32_t *arg = saved;
    int f32 = dtype == LADLE_F32;
    if (v->global && f32)
        global_fwd_f32(v, planes, x, y);
    else if (v->global)
        global_fwd_f64(v, planes, x, y);
    else if (v->direct)
        ladle__cpu_pool_direct_forward(v, f32, planes, x, y, (uint8_t *)arg);
    else if (v->kind == LADLE_POOL_MAX && f32)
        max_fwd_f32(v, planes, x, y, arg, v->tmp, v->av, v->aa);
    else if (v->kind == LADLE_POOL_MAX)
        max_fwd_f64(v, planes, x, y, arg, v->tmp, v->av, v->aa);
    else if (f32)
        avg_fwd_f32(v, planes, x, y, v->av, v->aa, v->f2f);
    else
        avg_fwd_f64(v, planes, x, y, v->av, v->aa, v->f2d);
    return LADLE_OK;
}

ladle_status ladle__cpu_pool_backward(const ladle_backend *be, ladle_dtype dtype,
                                      const ladle_pool_geom *g, int64_t planes,
                                      const void *dy, void *dx, const void *saved, void *ws)
{
    const cpu_pool *v = ws;
    const int32_t *arg = saved;
    int f32 = dtype == LADLE_F32;
    if (v->global && f32)
        global_bwd_f32(v, planes, dy, dx);
    else if (v->global)
        global_bwd_f64(v, planes, dy, dx);
    else if (v->direct)
        ladle__cpu_pool_direct_backward(v, f32, planes, dy, dx, (const uint8_t *)arg);
    else if (v->kind == LADLE_POOL_MAX && f32)
        max_bwd_f32(v, planes, dy, dx, arg);
    else if (v->kind == LADLE_POOL_MAX)
        max_bwd_f64(v, planes, dy, dx, arg);
    else if (f32)
        avg_bwd_f32(v, planes, dy, dx, v->av, v->g, v->f2f);
    else
        avg_bwd_f64(v, planes, dy, dx, v->av, v->g, v->f2d);
    return LADLE_OK;
}
