/*
 * Direct kernels for the common 2-d windows, which skip the generic path's
 * two separable steps (see pool.c): the same results, fewer passes.
 */
#include <math.h>
#include <string.h>

#include "../src/pool_impl.h"
#include "../src/simd.h"

/*
 * The 2 x 2 window with stride 2 (LeNet's, most CNNs'): one pass over each
 * pair of input rows, the four taps of an output side by side, and a
 * backward that writes every input gradient exactly once (the winner's dy
 * or zero), so it needs no zeroing pass. Rows and columns left over by an
 * odd extent get zeros.
 */
#define DEFINE_K2(T, S, V, M)                                                            \
    /* one output: the first maximum of the window in row-major order */                \
    LADLE_INLINE void max2_one_##S(const T *r0, const T *r1, int64_t c, int32_t base,     \
                                   int32_t W, T *yc, int32_t *ac)                        \
    {                                                                                    \
        T a = r0[2 * c], b = r0[2 * c + 1], e = r1[2 * c], f = r1[2 * c + 1];            \
        int wb = wins_##S(b, a), wf = wins_##S(f, e);                                    \
        T m1 = wb ? b : a, m2 = wf ? f : e;                                              \
        int w2 = wins_##S(m2, m1);                                                       \
        *yc = w2 ? m2 : m1;                                                              \
        *ac = base + (int32_t)(2 * c) + (w2 ? W + wf : wb);                              \
    }                                                                                    \
    LADLE_KERNEL static void max2_fwd_##S(const pool *v, int64_t planes, const T *x, T *y, \
                                          int32_t *arg)                                  \
    {                                                                                    \
        int64_t W = v->in[2], H2 = v->out[1], W2 = v->out[2];                            \
        const M odd = {1, 3, 5, 7, 9, 11, 13, 15}, even = {0, 2, 4, 6, 8, 10, 12, 14};   \
        for (int64_t pl = 0; pl < planes; pl++)                                          \
            for (int64_t o = 0; o < H2; o++) {                                           \
                const T *r0 = x + pl * v->pin + 2 * o * W, *r1 = r0 + W;                 \
                T *yr = y + pl * v->pout + o * W2;                                       \
                int32_t *ar = arg ? arg + pl * v->pout + o * W2 : v->tmp;                \
                int32_t base = (int32_t)(2 * o * W);                                     \
                if (W2 < BLK) {                                                          \
                    for (int64_t c = 0; c < W2; c++)                                     \
                        max2_one_##S(r0, r1, c, base, (int32_t)W, yr + c, ar + c);       \
                    continue;                                                            \
                }                                                                        \
                /* blocks of BLK outputs, the last one overlapping its neighbour */      \
                for (int64_t c = 0; c < W2; c += BLK) {                                  \
                    c = c + BLK <= W2 ? c : W2 - BLK;                                    \
                    V p0, p1, q0, q1;                                                    \
                    memcpy(&p0, r0 + 2 * c, sizeof p0);                                  \
                    memcpy(&p1, r0 + 2 * c + BLK, sizeof p1);                            \
                    memcpy(&q0, r1 + 2 * c, sizeof q0);                                  \
                    memcpy(&q1, r1 + 2 * c + BLK, sizeof q1);                            \
                    V a = __builtin_shuffle(p0, p1, even), b = __builtin_shuffle(p0, p1, odd); \
                    V e = __builtin_shuffle(q0, q1, even), f = __builtin_shuffle(q0, q1, odd); \
                    M wb = (b > a) | ((b != b) & (a == a));                              \
                    M wf = (f > e) | ((f != f) & (e == e));                              \
                    V m1 = (V)(((M)b & wb) | ((M)a & ~wb));                              \
                    V m2 = (V)(((M)f & wf) | ((M)e & ~wf));                              \
                    M w2 = (m2 > m1) | ((m2 != m2) & (m1 == m1));                        \
                    V m = (V)(((M)m2 & w2) | ((M)m1 & ~w2));                             \
                    /* masks are -1 or 0: the tap offset within the window */            \
                    M rel = (((M){0} + (int32_t)W - wf) & w2) | (-wb & ~w2);                \
                    M at = even + (base + 2 * (int32_t)c) + rel;                         \
                    vi32 at32 = __builtin_convertvector(at, vi32);                       \
                    memcpy(yr + c, &m, sizeof m);                                        \
                    memcpy(ar + c, &at32, sizeof at32);                                  \
                }                                                                        \
            }                                                                            \
    }                                                                                    \
    LADLE_KERNEL static void max2_bwd_##S(const pool *v, int64_t planes, const T *dy,    \
                                          T *dx, const int32_t *arg)                     \
    {                                                                                    \
        int64_t W = v->in[2], H = v->in[1], H2 = v->out[1], W2 = v->out[2];              \
        for (int64_t pl = 0; pl < planes; pl++) {                                        \
            for (int64_t o = 0; o < H2; o++) {                                           \
                const T *restrict g = dy + pl * v->pout + o * W2;                        \
                const int32_t *restrict ar = arg + pl * v->pout + o * W2;                \
                T *restrict d0 = dx + pl * v->pin + 2 * o * W, *restrict d1 = d0 + W;    \
                int32_t base = (int32_t)(2 * o * W);                                     \
                for (int64_t c = 0; c < W2; c++) {                                       \
                    int32_t rel = ar[c] - base - (int32_t)(2 * c);                       \
                    T gc = g[c];                                                         \
                    d0[2 * c] = rel == 0 ? gc : (T)0;                                    \
                    d0[2 * c + 1] = rel == 1 ? gc : (T)0;                                \
                    d1[2 * c] = rel == (int32_t)W ? gc : (T)0;                           \
                    d1[2 * c + 1] = rel == (int32_t)W + 1 ? gc : (T)0;                   \
                }                                                                        \
                if (W & 1)                                                               \
                    d0[W - 1] = d1[W - 1] = 0;                                           \
            }                                                                            \
            if (H & 1)                                                                   \
                memset(dx + pl * v->pin + (H - 1) * W, 0, sizeof(T) * (size_t)W);        \
        }                                                                                \
    }                                                                                    \
    LADLE_KERNEL static void avg2_fwd_##S(const pool *v, int64_t planes, const T *x, T *y) \
    {                                                                                    \
        int64_t W = v->in[2], H2 = v->out[1], W2 = v->out[2];                            \
        for (int64_t pl = 0; pl < planes; pl++)                                          \
            for (int64_t o = 0; o < H2; o++) {                                           \
                const T *restrict r0 = x + pl * v->pin + 2 * o * W, *restrict r1 = r0 + W; \
                T *restrict yr = y + pl * v->pout + o * W2;                              \
                for (int64_t c = 0; c < W2; c++)                                         \
                    yr[c] = ((r0[2 * c] + r0[2 * c + 1]) + (r1[2 * c] + r1[2 * c + 1])) * \
                            (T)0.25;                                                     \
            }                                                                            \
    }                                                                                    \
    LADLE_KERNEL static void avg2_bwd_##S(const pool *v, int64_t planes, const T *dy, T *dx) \
    {                                                                                    \
        int64_t W = v->in[2], H = v->in[1], H2 = v->out[1], W2 = v->out[2];              \
        for (int64_t pl = 0; pl < planes; pl++) {                                        \
            for (int64_t o = 0; o < H2; o++) {                                           \
                const T *restrict g = dy + pl * v->pout + o * W2;                        \
                T *restrict d0 = dx + pl * v->pin + 2 * o * W, *restrict d1 = d0 + W;    \
                for (int64_t c = 0; c < W2; c++) {                                       \
                    T gc = g[c] * (T)0.25;                                               \
                    d0[2 * c] = d0[2 * c + 1] = d1[2 * c] = d1[2 * c + 1] = gc;          \
                }                                                                        \
                if (W & 1)                                                               \
                    d0[W - 1] = d1[W - 1] = 0;                                           \
            }                                                                            \
            if (H & 1)                                                                   \
                memset(dx + pl * v->pin + (H - 1) * W, 0, sizeof(T) * (size_t)W);        \
        }                                                                                \
    }

DEFINE_K2(float, f32, vf32, mf32)
DEFINE_K2(double, f64, vf64, mf64)

int ladle__pool_direct_case(const pool *v)
{
    if (v->in[0] != 1 || v->k[0] != 1 || v->s[0] != 1 || v->p[0] != 0)
        return POOL_GENERIC;
    int k2s2 = 1;
    for (int a = 1; a < 3; a++)
        k2s2 = k2s2 && v->k[a] == 2 && v->s[a] == 2 && v->p[a] == 0 && v->d[a] == 1 &&
               v->out[a] == v->in[a] / 2;
    return k2s2 ? POOL_K2S2 : POOL_GENERIC;
}

void ladle__pool_direct_forward(const pool *v, int f32, int64_t planes, const void *x, void *y,
                                int32_t *arg)
{
    int max = v->kind == LADLE_POOL_MAX;
    if (max && f32)
        max2_fwd_f32(v, planes, x, y, arg);
    else if (max)
        max2_fwd_f64(v, planes, x, y, arg);
    else if (f32)
        avg2_fwd_f32(v, planes, x, y);
    else
        avg2_fwd_f64(v, planes, x, y);
}

void ladle__pool_direct_backward(const pool *v, int f32, int64_t planes, const void *dy,
                                 void *dx, const int32_t *arg)
{
    int max = v->kind == LADLE_POOL_MAX;
    if (max && f32)
        max2_bwd_f32(v, planes, dy, dx, arg);
    else if (max)
        max2_bwd_f64(v, planes, dy, dx, arg);
    else if (f32)
        avg2_bwd_f32(v, planes, dy, dx);
    else
        avg2_bwd_f64(v, planes, dy, dx);
}
