/*
 * Direct kernels for the common 2-d windows, which skip the generic path's
 * two separable steps (see pool.c): the same results, fewer passes.
 */
#include <math.h>
#include <string.h>

#include "layers/pool_impl.h"
#include "src/backends/cpu/simd.h"

/* Blocks are 8 floats or 4 doubles (see pool_impl.h); lane numbers: */
#define LANES8 {0, 1, 2, 3, 4, 5, 6, 7}
#define LANES4 {0, 1, 2, 3}
/* the low bytes of 4- and 8-byte lanes */
#define LOW4 {0, 4, 8, 12, 16, 20, 24, 28}
#define LOW8 {0, 8, 16, 24}

/* The hardware prefetchers stop at page boundaries, and a plane is often a
 * page or less. The forwards that read a plane out of order (and the 2x2
 * max) ask for the next plane's rows while they work on one, a row at a
 * time (asking for a whole plane at once, and asking in the kernels that
 * already stream in order, measured slower). */
static inline void prefetch(const void *p, size_t bytes)
{
    for (size_t k = 0; k < bytes; k += 64)
        __builtin_prefetch((const char *)p + k, 0, 3);
}

/* The rows of a band (see the 3x3 kernels) for rows of PER_ROW bytes: about
 * 2 KiB of them. Sliding down a whole plane of more than a page measured up
 * to twice as slow when the data comes from memory (f64), and shorter bands
 * slower in cache. */
#define BAND(per_row) ((per_row) >= 1024 ? 2 : 2048 / (per_row))

/*
 * The max kernels save each window's winner as a one-byte code of its place
 * in the window (2x2: 2 times the row plus the column; 3x3: 3 times), a
 * quarter of the traffic of a plane offset: NB of them are a vector of
 * bytes, widened to mask lanes to be compared.
 */
#define DEFINE_CODES(T, S, M, NB, BYTES)                                                 \
    typedef uint8_t vu8_##S __attribute__((vector_size(NB)));                            \
    typedef uint8_t vb_##S __attribute__((vector_size(sizeof(M))));                      \
    /* NB codes out of mask lanes. FAST (the plan's narrow: where the        \
     * x86-64-v4 copy runs) converts (one vpmovdb); elsewhere the lanes' low  \
     * bytes are shuffled together (two vpshufb and two more), as GCC 12      \
     * compiles the conversion into one extraction per lane in the AVX2     \
     * copy. The test is the same each call, and cheaper than the shuffle.   \
     */                                                                                  \
    LADLE_INLINE void narrow_##S(const M *w, uint8_t *a, int fast)                       \
    {                                                                                    \
        if (fast) {                                                                      \
            vu8_##S c = __builtin_convertvector(*w, vu8_##S);                            \
            memcpy(a, &c, NB);                                                           \
        } else {                                                                         \
            const vb_##S low = BYTES;                                                    \
            vb_##S b = __builtin_shuffle((vb_##S)*w, low);                               \
            memcpy(a, &b, NB);                                                           \
        }                                                                                \
    }                                                                                    \
    /* a loop: GCC 12 takes the vector conversion apart in cloned kernels,    \
     * and vectorises this */                                                            \
    LADLE_INLINE void widen_##S(const uint8_t *a, M *w)                                  \
    {                                                                                    \
        union {                                                                          \
            M v;                                                                         \
            T e[NB]; /* lanes as wide as T's */                                          \
        } u;                                                                             \
        for (int k = 0; k < NB; k++)                                                     \
            u.v[k] = a[k];                                                               \
        *w = u.v;                                                                        \
    }

DEFINE_CODES(float, f32, mf32, 8, LOW4)
DEFINE_CODES(double, f64, md4, 4, LOW8)

/*
 * The 2 x 2 window with stride 2 (LeNet's, most CNNs'): one pass over each
 * pair of input rows, the four taps of an output side by side, and a
 * backward that writes every input gradient exactly once (the winner's dy
 * or zero), so it needs no zeroing pass. Rows and columns left over by an
 * odd extent get zeros.
 */
#define DEFINE_K2(T, S, V, M, NB, LANES)                                                 \
    /* one output: the first maximum of the window in row-major order */                \
    LADLE_INLINE void max2_one_##S(const T *r0, const T *r1, int64_t c, T *yc,           \
                                   uint8_t *ac)                                          \
    {                                                                                    \
        T a = r0[2 * c], b = r0[2 * c + 1], e = r1[2 * c], f = r1[2 * c + 1];            \
        int wb = wins_##S(b, a), wf = wins_##S(f, e);                                    \
        T m1 = wb ? b : a, m2 = wf ? f : e;                                              \
        int w2 = wins_##S(m2, m1);                                                       \
        *yc = w2 ? m2 : m1;                                                              \
        *ac = (uint8_t)(w2 ? 2 + wf : wb);                                               \
    }                                                                                    \
    LADLE_KERNEL static void max2_fwd_##S(const pool *v, int64_t planes, const T *x, T *y, \
                                          uint8_t *arg)                                  \
    {                                                                                    \
        int64_t W = v->in[2], H2 = v->out[1], W2 = v->out[2];                            \
        const M lane = LANES, even = 2 * lane, odd = 2 * lane + 1;                       \
        const int fast = v->narrow;                                                      \
        for (int64_t pl = 0; pl < planes; pl++)                                          \
            for (int64_t o = 0; o < H2; o++) {                                           \
                const T *r0 = x + pl * v->pin + 2 * o * W, *r1 = r0 + W;                 \
                prefetch(r0 + v->pin, sizeof(T) * (size_t)(2 * W)); /* the next plane */ \
                T *yr = y + pl * v->pout + o * W2;                                       \
                uint8_t *ar = arg ? arg + pl * v->pout + o * W2 : (uint8_t *)v->tmp;     \
                if (W2 < NB) {                                                          \
                    for (int64_t c = 0; c < W2; c++)                                     \
                        max2_one_##S(r0, r1, c, yr + c, ar + c);                         \
                    continue;                                                            \
                }                                                                        \
                /* blocks of NB outputs, the last one overlapping its neighbour */      \
                for (int64_t c = 0; c < W2; c += NB) {                                  \
                    c = c + NB <= W2 ? c : W2 - NB;                                    \
                    V p0, p1, q0, q1;                                                    \
                    memcpy(&p0, r0 + 2 * c, sizeof p0);                                  \
                    memcpy(&p1, r0 + 2 * c + NB, sizeof p1);                            \
                    memcpy(&q0, r1 + 2 * c, sizeof q0);                                  \
                    memcpy(&q1, r1 + 2 * c + NB, sizeof q1);                            \
                    V a = __builtin_shuffle(p0, p1, even), b = __builtin_shuffle(p0, p1, odd); \
                    V e = __builtin_shuffle(q0, q1, even), f = __builtin_shuffle(q0, q1, odd); \
                    M wb = (b > a) | ((b != b) & (a == a));                              \
                    M wf = (f > e) | ((f != f) & (e == e));                              \
                    V m1 = (V)(((M)b & wb) | ((M)a & ~wb));                              \
                    V m2 = (V)(((M)f & wf) | ((M)e & ~wf));                              \
                    M w2 = (m2 > m1) | ((m2 != m2) & (m1 == m1));                        \
                    V m = (V)(((M)m2 & w2) | ((M)m1 & ~w2));                             \
                    /* masks are -1 or 0: 2 times the row plus the column */             \
                    M at = (((M){0} + 2 - wf) & w2) | (-wb & ~w2);                       \
                    memcpy(yr + c, &m, sizeof m);                                        \
                    narrow_##S(&at, ar + c, fast);                                       \
                }                                                                        \
            }                                                                            \
    }                                                                                    \
    LADLE_KERNEL static void max2_bwd_##S(const pool *v, int64_t planes, const T *dy,    \
                                          T *dx, const uint8_t *arg)                     \
    {                                                                                    \
        int64_t W = v->in[2], H = v->in[1], H2 = v->out[1], W2 = v->out[2];              \
        const M lane = LANES, ev = lane / 2 + (lane % 2) * NB, z = {0};                  \
        for (int64_t pl = 0; pl < planes; pl++) {                                        \
            for (int64_t o = 0; o < H2; o++) {                                           \
                const T *restrict g = dy + pl * v->pout + o * W2;                        \
                const uint8_t *restrict ar = arg + pl * v->pout + o * W2;                \
                T *restrict d0 = dx + pl * v->pin + 2 * o * W, *restrict d1 = d0 + W;    \
                for (int64_t c = 0; c < W2 && W2 < NB; c++) {                            \
                    T gc = g[c];                                                         \
                    d0[2 * c] = ar[c] == 0 ? gc : (T)0;                                  \
                    d0[2 * c + 1] = ar[c] == 1 ? gc : (T)0;                              \
                    d1[2 * c] = ar[c] == 2 ? gc : (T)0;                                  \
                    d1[2 * c + 1] = ar[c] == 3 ? gc : (T)0;                              \
                }                                                                        \
                /* blocks of NB outputs, the last one overlapping its neighbour */      \
                for (int64_t c = 0; c < W2 && W2 >= NB; c += NB) {                       \
                    c = c + NB <= W2 ? c : W2 - NB;                                      \
                    V gc, lo, hi;                                                        \
                    M k;                                                                 \
                    memcpy(&gc, g + c, sizeof gc);                                       \
                    widen_##S(ar + c, &k);                                               \
                    V a = (V)((M)gc & (k == z)), b = (V)((M)gc & (k == z + 1));          \
                    V e = (V)((M)gc & (k == z + 2)), f = (V)((M)gc & (k == z + 3));      \
                    lo = __builtin_shuffle(a, b, ev);                                    \
                    hi = __builtin_shuffle(a, b, ev + NB / 2);                           \
                    memcpy(d0 + 2 * c, &lo, sizeof lo);                                  \
                    memcpy(d0 + 2 * c + NB, &hi, sizeof hi);                             \
                    lo = __builtin_shuffle(e, f, ev);                                    \
                    hi = __builtin_shuffle(e, f, ev + NB / 2);                           \
                    memcpy(d1 + 2 * c, &lo, sizeof lo);                                  \
                    memcpy(d1 + 2 * c + NB, &hi, sizeof hi);                             \
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

DEFINE_K2(float, f32, vf32, mf32, 8, LANES8)
DEFINE_K2(double, f64, vd4, md4, 4, LANES4)

/*
 * The 3 x 3 window with stride 1 or 2 and padding 0 or 1 along each
 * dimension, in either ceil mode (ResNet's stem, Inception's pooling
 * branches). Outputs go in vector blocks along a row (the last block
 * overlapping its neighbour; rows shorter than a block one output at a
 * time), and a block slides down a band of about 2 KiB of rows (BAND):
 * each input row's result for the block is computed once and carried while
 * the window moves down its stride. Only the first and last blocks of a row
 * reach outside it, and know so at compile time: the columns outside are
 * shuffled in from the vector at that end (no load tests a column).
 *
 * Max: per input row the first maximum of the three taps, then the first
 * row holding the largest: the first maximum in row-major window order, as
 * a direct scan, NaN winning and staying. A window with fewer than three
 * valid rows repeats its last one, and a column outside the row repeats the
 * nearest inside: a repeat after the value it repeats never wins, and the
 * one before it (column -1) is recorded as column 0. Rows whose windows
 * are cut short at the top or bottom go row by row. Each winner is saved
 * as a one-byte code, 3 times its row in the window plus its column (a
 * quarter of the traffic of a plane offset). The backward, for column
 * stride 2, writes each input gradient once: the sum of the dy of the
 * windows holding it (at most two along a row) whose code names it, a
 * block of 2 NB input columns at a time; for column stride 1 (up to three
 * windows along a row) it zeroes a plane and adds each dy at its winner.
 * Measured on ResNet's stem (32 x 64 x 32 x 32, f32, medians of 5 runs):
 * the backward in cache 0.34 ms scattering, 0.23 ms gathering; out of
 * cache 0.37-0.44 ms with 4-byte offsets, 0.28-0.34 ms with codes.
 *
 * Average: the three taps of each input row summed (zeros outside the row
 * and the plane), three rows summed, times the divisor's two factors (rows
 * and columns). The backward first scales dy by the column factors into a
 * zero-padded plane, then per output row sums it over the outputs that
 * hold each input column, and per input row adds those of the (up to three)
 * output rows holding it times their row factors (the plan's bhi, bc).
 */

/* x where the mask k is set, y elsewhere (masks are all ones or zeros) */
#define BLEND(V, M, k, x, y) ((V)(((M)(x) & (k)) | ((M)(y) & ~(k))))
/* wins_f32 / wins_f64, lane by lane */
#define WINS(val, best) (~((val) <= (best)) & ((best) == (best)))

#define DEFINE_MAX3(T, S, V, M, NB, LANES)                                               \
    /* one output from its valid taps, in window order (off: the rows' plane  \
     * offsets, then their codes) */                                                     \
    LADLE_INLINE void max3_one_##S(const pool *v, const T *xp, const int32_t *off,       \
                                   int64_t o, T *yo, uint8_t *ao)                        \
    {                                                                                    \
        T best = (T)-INFINITY;                                                           \
        int at = -1;                                                                     \
        for (int j = 0; j < 3; j++)                                                      \
            for (int64_t t = v->lo2[o]; t < v->hi2[o]; t++) {                            \
                int32_t i = off[j] + (int32_t)(v->base2[o] + t);                         \
                int take = (at < 0) | wins_##S(xp[i], best);                             \
                best = take ? xp[i] : best;                                              \
                at = take ? off[3 + j] + (int)t : at;                                    \
            }                                                                            \
        *yo = best;                                                                      \
        *ao = (uint8_t)at;                                                               \
    }                                                                                    \
    /* the first maximum of one input row's three taps for the NB outputs    \
     * whose windows start at columns b, b + ST, ..., and its tap (0, 1, 2).  \
     * LEFT: column b = -1 is outside the row; RIGHT: the last OVER columns  \
     * are (1 or 2). A column outside repeats the nearest inside, shuffled   \
     * in from the vector at that end of the row. */                                     \
    LADLE_INLINE void max3_row_##S(const T *xr, int64_t b, int64_t W, const int64_t ST,  \
                                   const int LEFT, const int RIGHT, int64_t over,        \
                                   V *best, M *tap)                                      \
    {                                                                                    \
        const M lane = LANES, even = 2 * lane, odd = 2 * lane + 1;                       \
        const M in0 = lane + (lane > 0);                   /* lane 0 twice, shifted */   \
        const M in1 = lane + 1 + (lane == NB - 1);         /* shifted, the last twice */ \
        const M in2 = in1 + 1 + (lane >= NB - 2);          /* by two */                  \
        V a, c, d;                                                                       \
        if (ST == 1) {                                                                   \
            memcpy(&c, xr + b + 1, sizeof c);                                            \
            if (LEFT)                                                                    \
                a = __builtin_shuffle(c, in0);                                           \
            else                                                                         \
                memcpy(&a, xr + b, sizeof a);                                            \
            if (RIGHT) /* one column past the end */                                     \
                d = __builtin_shuffle(c, in1);                                           \
            else                                                                         \
                memcpy(&d, xr + b + 2, sizeof d);                                        \
        } else { /* up to the last window's third tap, no further */                     \
            V p0, p1, q0, q1;                                                            \
            memcpy(&q0, xr + b + 1, sizeof q0);                                          \
            if (LEFT)                                                                    \
                p0 = __builtin_shuffle(q0, in0);                                         \
            else                                                                         \
                memcpy(&p0, xr + b, sizeof p0);                                          \
            if (RIGHT && over == 2) {                                                    \
                memcpy(&q1, xr + W - NB, sizeof q1);                                     \
                p1 = __builtin_shuffle(q1, in1);                                         \
                q1 = __builtin_shuffle(q1, in2);                                         \
            } else if (RIGHT) {                                                          \
                memcpy(&p1, xr + b + NB, sizeof p1);                                     \
                q1 = __builtin_shuffle(p1, in1);                                         \
            } else {                                                                     \
                memcpy(&p1, xr + b + NB, sizeof p1);                                     \
                memcpy(&q1, xr + b + 1 + NB, sizeof q1);                                 \
            }                                                                            \
            a = __builtin_shuffle(p0, p1, even);                                         \
            c = __builtin_shuffle(p0, p1, odd);                                          \
            d = __builtin_shuffle(q0, q1, odd);                                          \
        }                                                                                \
        M tc = WINS(c, a);                                                               \
        V m = BLEND(V, M, tc, c, a);                                                     \
        M td = WINS(d, m);                                                               \
        *tap = (td & 2) | (~td & -tc);                                                   \
        if (LEFT) /* column 0 stood in for -1 before it: record 0 */                     \
            *tap -= (*tap == 0) & (lane == 0);                                           \
        *best = BLEND(V, M, td, d, m);                                                   \
    }                                                                                    \
    /* NB outputs from c on, from the window's rows at plane offsets off     \
     * (then their codes): the first maximum of each row, then the first row \
     * holding the largest */                                                            \
    LADLE_INLINE void max3_block_##S(const T *xp, const int32_t *off, int64_t W,         \
                                     int64_t c, int64_t p, const int64_t ST,             \
                                     const int LEFT, const int RIGHT, int64_t over,      \
                                     T *yc, uint8_t *ac, int fast)                       \
    {                                                                                    \
        int64_t b = c * ST - p; /* the first window's first column */                    \
        M k0, k1, k2;                                                                    \
        V m0, m1, m2;                                                                    \
        max3_row_##S(xp + off[0], b, W, ST, LEFT, RIGHT, over, &m0, &k0);                \
        max3_row_##S(xp + off[1], b, W, ST, LEFT, RIGHT, over, &m1, &k1);                \
        max3_row_##S(xp + off[2], b, W, ST, LEFT, RIGHT, over, &m2, &k2);                \
        M t1 = WINS(m1, m0);                                                             \
        V m = BLEND(V, M, t1, m1, m0);                                                   \
        M at = BLEND(M, M, t1, k1 + off[4], k0 + off[3]);                                \
        M t2 = WINS(m2, m);                                                              \
        m = BLEND(V, M, t2, m2, m);                                                      \
        at = BLEND(M, M, t2, k2 + off[5], at);                                           \
        memcpy(yc, &m, sizeof m);                                                        \
        narrow_##S(&at, ac, fast);                                                       \
    }                                                                                    \
    /* a row of W2 >= NB outputs in blocks, the last one overlapping its     \
     * neighbour; only the first may start outside the row, only the last    \
     * end outside it */                                                                 \
    LADLE_INLINE void max3_blocks_##S(const T *xp, const int32_t *off, int64_t W,        \
                                      int64_t W2, int64_t p, const int64_t ST, T *yr,    \
                                      uint8_t *ar, int fast)                             \
    {                                                                                    \
        int64_t last = W2 - NB, over = (W2 - 1) * ST - p + 3 - W;                        \
        if (last == 0 && p && over > 0)                                                  \
            max3_block_##S(xp, off, W, 0, p, ST, 1, 1, over, yr, ar,                     \
                           fast);                                                        \
        else if (last == 0 && over > 0)                                                  \
            max3_block_##S(xp, off, W, 0, p, ST, 0, 1, over, yr, ar,                     \
                           fast);                                                        \
        else if (p)                                                                      \
            max3_block_##S(xp, off, W, 0, p, ST, 1, 0, 0, yr, ar,                        \
                           fast);                                                        \
        else                                                                             \
            max3_block_##S(xp, off, W, 0, p, ST, 0, 0, 0, yr, ar,                        \
                           fast);                                                        \
        if (last == 0)                                                                   \
            return;                                                                      \
        for (int64_t c = NB; c < last; c += NB)                                          \
            max3_block_##S(xp, off, W, c, p, ST, 0, 0, 0, yr + c, ar + c,                \
                           fast);                                                        \
        if (over > 0)                                                                    \
            max3_block_##S(xp, off, W, last, p, ST, 0, 1, over, yr + last, ar + last,    \
                           fast);                                                        \
        else                                                                             \
            max3_block_##S(xp, off, W, last, p, ST, 0, 0, 0, yr + last, ar + last,       \
                           fast);                                                        \
    }                                                                                    \
    /* NB outputs from column c on down the output rows [ra, rb), whose      \
     * windows' three rows are all inside (from row ra S1 - P1 on): the      \
     * window slides down S1 rows at a time, each input row's first maxima   \
     * (and their taps) computed once */                                                 \
    LADLE_INLINE void max3_column_##S(const T *xp, int64_t W, int64_t W2, int64_t c,     \
                                      int64_t p, const int64_t ST, const int LEFT,       \
                                      const int RIGHT, int64_t over, int64_t ra,         \
                                      int64_t rb, const int64_t S1, int64_t P1,          \
                                      int64_t pin, T *yp, uint8_t *ap, int fast)         \
    {                                                                                    \
        int64_t b = c * ST - p, i = ra * S1 - P1; /* the first column and row */         \
        M k0, k1, k2;                                                                    \
        V m0, m1, m2;                                                                    \
        max3_row_##S(xp + i * W, b, W, ST, LEFT, RIGHT, over, &m0, &k0);                 \
        max3_row_##S(xp + (i + 1) * W, b, W, ST, LEFT, RIGHT, over, &m1, &k1);           \
        max3_row_##S(xp + (i + 2) * W, b, W, ST, LEFT, RIGHT, over, &m2, &k2);           \
        for (int64_t r = ra;;) {                                                         \
            M t1 = WINS(m1, m0);                                                         \
            V m = BLEND(V, M, t1, m1, m0);                                               \
            M at = BLEND(M, M, t1, k1 + 3, k0);                                          \
            M t2 = WINS(m2, m);                                                          \
            m = BLEND(V, M, t2, m2, m);                                                  \
            at = BLEND(M, M, t2, k2 + 6, at);                                            \
            memcpy(yp + r * W2 + c, &m, sizeof m);                                       \
            narrow_##S(&at, ap + r * W2 + c, fast);                                      \
            if (++r == rb)                                                               \
                break;                                                                   \
            i += S1;                                                                     \
            if (c == 0) /* the next plane's rows, while these are in hand */             \
                prefetch(xp + pin + (i + 3 - S1) * W, sizeof(T) * (size_t)(S1 * W));     \
            if (S1 == 1) {                                                               \
                m0 = m1, k0 = k1, m1 = m2, k1 = k2;                                      \
            } else {                                                                     \
                m0 = m2, k0 = k2;                                                        \
                max3_row_##S(xp + (i + 1) * W, b, W, ST, LEFT, RIGHT, over, &m1, &k1);   \
            }                                                                            \
            max3_row_##S(xp + (i + 2) * W, b, W, ST, LEFT, RIGHT, over, &m2, &k2);       \
        }                                                                                \
    }                                                                                    \
    /* the interior rows [ra, rb) of a plane, block by block of columns as   \
     * max3_blocks */                                                                    \
    LADLE_INLINE void max3_band_##S(const pool *v, const T *xp, int64_t ra, int64_t rb,  \
                                    const int64_t ST, const int64_t S1, T *yp,           \
                                    uint8_t *ap)                                         \
    {                                                                                    \
        int64_t W = v->in[2], W2 = v->out[2], p = v->p[2], P1 = v->p[1], pin = v->pin;   \
        int64_t last = W2 - NB, over = (W2 - 1) * ST - p + 3 - W;                        \
        int fast = v->narrow;                                                            \
        if (last == 0 && p && over > 0)                                                  \
            max3_column_##S(xp, W, W2, 0, p, ST, 1, 1, over, ra, rb, S1, P1, pin, yp,    \
                            ap, fast);                                                   \
        else if (last == 0 && over > 0)                                                  \
            max3_column_##S(xp, W, W2, 0, p, ST, 0, 1, over, ra, rb, S1, P1, pin, yp,    \
                            ap, fast);                                                   \
        else if (p)                                                                      \
            max3_column_##S(xp, W, W2, 0, p, ST, 1, 0, 0, ra, rb, S1, P1, pin, yp, ap,   \
                            fast);                                                       \
        else                                                                             \
            max3_column_##S(xp, W, W2, 0, p, ST, 0, 0, 0, ra, rb, S1, P1, pin, yp, ap,   \
                            fast);                                                       \
        if (last == 0)                                                                   \
            return;                                                                      \
        for (int64_t c = NB; c < last; c += NB)                                          \
            max3_column_##S(xp, W, W2, c, p, ST, 0, 0, 0, ra, rb, S1, P1, pin, yp, ap,   \
                            fast);                                                       \
        if (over > 0)                                                                    \
            max3_column_##S(xp, W, W2, last, p, ST, 0, 1, over, ra, rb, S1, P1, pin, yp, \
                            ap, fast);                                           \
        else                                                                             \
            max3_column_##S(xp, W, W2, last, p, ST, 0, 0, 0, ra, rb, S1, P1, pin, yp,    \
                            ap, fast);                                                   \
    }                                                                                    \
    LADLE_INLINE void max3_columns_##S(const pool *v, const T *xp, int64_t ra, int64_t rb, \
                                       const int64_t ST, const int64_t S1, T *yp,        \
                                       uint8_t *ap)                                      \
    {                                                                                    \
        int64_t band = BAND(S1 * v->in[2] * (int64_t)sizeof(T));                         \
        for (int64_t r = ra; r < rb; r += band)                                          \
            max3_band_##S(v, xp, r, r + band < rb ? r + band : rb, ST, S1, yp, ap);      \
    }                                                                                    \
    LADLE_KERNEL static void max3_fwd_##S(const pool *v, int64_t planes, const T *x, T *y, \
                                          uint8_t *arg)                                  \
    {                                                                                    \
        int64_t W = v->in[2], W2 = v->out[2], p = v->p[2], ra = v->rows_out, rb = 0;     \
        for (int64_t r = 0; r < v->rows_out; r++)                                        \
            if (v->ntrows[r] == 3) {                                                     \
                ra = r < ra ? r : ra;                                                    \
                rb = r + 1;                                                              \
            }                                                                            \
        if (W2 < NB || rb <= ra)                                                         \
            ra = rb = v->rows_out;                                                       \
        for (int64_t pl = 0; pl < planes; pl++) {                                        \
            const T *xp = x + pl * v->pin;                                               \
            T *yp = y + pl * v->pout;                                                    \
            /* the winners' codes, or a scratch plane */                                 \
            uint8_t *ap = arg ? arg + pl * v->pout : (uint8_t *)v->rows3;                \
            /* the rows at the top and bottom edges one by one, then the others */       \
            for (int64_t r = ra ? 0 : rb; r < v->rows_out; r = r + 1 == ra ? rb : r + 1) { \
                const int64_t *rows = v->trows + r * v->kk;                              \
                int64_t nr = v->ntrows[r];                                               \
                /* the rows' plane offsets, the last valid row repeated, then their   \
                 * codes (3 times the row within the window) */                         \
                int32_t off[6], top = (int32_t)(r * v->s[1] - v->p[1]);                  \
                for (int j = 0; j < 3; j++) {                                            \
                    int64_t row = rows[j < nr ? j : nr - 1];                             \
                    off[j] = (int32_t)(row * W);                                         \
                    off[3 + j] = 3 * ((int32_t)row - top);                               \
                }                                                                        \
                T *yr = yp + r * W2;                                                     \
                uint8_t *ar = ap + r * W2;                                               \
                if (W2 < NB)                                                             \
                    for (int64_t o = 0; o < W2; o++)                                     \
                        max3_one_##S(v, xp, off, o, yr + o, ar + o);                     \
                else if (v->s[2] == 1)                                                   \
                    max3_blocks_##S(xp, off, W, W2, p, 1, yr, ar, v->narrow);            \
                else                                                                     \
                    max3_blocks_##S(xp, off, W, W2, p, 2, yr, ar, v->narrow);            \
            }                                                                            \
            if (rb > ra && v->s[2] == 1 && v->s[1] == 1)                                 \
                max3_columns_##S(v, xp, ra, rb, 1, 1, yp, ap);                           \
            else if (rb > ra && v->s[2] == 1)                                            \
                max3_columns_##S(v, xp, ra, rb, 1, 2, yp, ap);                           \
            else if (rb > ra && v->s[1] == 1)                                            \
                max3_columns_##S(v, xp, ra, rb, 2, 1, yp, ap);                           \
            else if (rb > ra)                                                            \
                max3_columns_##S(v, xp, ra, rb, 2, 2, yp, ap);                           \
        }                                                                                \
    }                                                                                    \
    /* n >= 0 zeros from p on, in vector stores: libc's memset starts slowly    \
     * for a plane of a few KiB */                                                       \
    LADLE_INLINE void max3_zero_##S(T *p, int64_t n)                                     \
    {                                                                                    \
        const V z = {0};                                                                 \
        int64_t k = 0;                                                                   \
        for (; k + 4 * NB <= n; k += 4 * NB) {                                           \
            memcpy(p + k, &z, sizeof z);                                                 \
            memcpy(p + k + NB, &z, sizeof z);                                            \
            memcpy(p + k + 2 * NB, &z, sizeof z);                                        \
            memcpy(p + k + 3 * NB, &z, sizeof z);                                        \
        }                                                                                \
        for (; k < n; k++)                                                               \
            p[k] = 0;                                                                    \
    }                                                                                    \
    /* the code a window (output row r, column c) records when input (i, j)   \
     * wins it, or 100 (no code) when the window does not hold the input */             \
    LADLE_INLINE int max3_code_##S(const pool *v, int64_t r, int64_t c, int64_t i,       \
                                   int64_t j)                                            \
    {                                                                                    \
        int64_t t = i - (r * v->s[1] - v->p[1]), u = j - (c * v->s[2] - v->p[2]);        \
        return t >= 0 && t < 3 && u >= 0 && u < 3 ? (int)(3 * t + u) : 100;              \
    }                                                                                    \
    /* column stride 2: the gradient of input (i, j), the dy of each window  \
     * holding it whose winner it is, windows in order (rows, then columns) */          \
    LADLE_INLINE T max3_gather_one_##S(const pool *v, const T *g, const uint8_t *ap,     \
                                       int64_t i, int64_t j)                             \
    {                                                                                    \
        /* the outputs c with 2 c - p <= j <= 2 c - p + 2 */                             \
        int64_t W2 = v->out[2], lo = (j + v->p[2] - 1) / 2, hi = (j + v->p[2]) / 2;      \
        T acc = 0;                                                                       \
        hi = hi < W2 ? hi : W2 - 1;                                                      \
        for (int64_t k = 0; k < v->ncrows[i]; k++) {                                     \
            const int64_t r = v->crows[3 * i + k];                                       \
            for (int64_t c = lo; c <= hi; c++)                                           \
                if (ap[r * W2 + c] == max3_code_##S(v, r, c, i, j))                      \
                    acc += g[r * W2 + c];                                                \
        }                                                                                \
        return acc;                                                                      \
    }                                                                                    \
    /* one output row's dy and codes for the NB outputs from c on (g0, w0)    \
     * and from c + 1 on (g1, w1; RIGHT: c + NB is past the end of the row,  \
     * and has code -1) */                                                               \
    LADLE_INLINE void max3_gload_##S(const T *g, const uint8_t *ap, int64_t q,           \
                                     const int RIGHT, V *g0, V *g1, M *w0, M *w1)        \
    {                                                                                    \
        const M lane = LANES, none = (M){0} - 1;                                         \
        memcpy(g0, g + q, sizeof *g0);                                                   \
        widen_##S(ap + q, w0);                                                      \
        if (RIGHT) {                                                                     \
            *g1 = __builtin_shuffle(*g0, lane + 1);                                      \
            *w1 = __builtin_shuffle(*w0, none, lane + 1);                                \
        } else {                                                                         \
            memcpy(g1, g + q + 1, sizeof *g1);                                           \
            widen_##S(ap + q + 1, w1);                                              \
        }                                                                                \
    }                                                                                    \
    /* the sums of max3_gather_one for 2 NB input columns of one input row   \
     * from js = 2 c - p + 1 on, from a held output row's (g0, g1, w0, w1)    \
     * whose windows hold it as their row t (3 t: its codes' row part; 100   \
     * for a row that does not hold it): column js + 2 k is the middle tap   \
     * of output c + k only, the next one the last tap of c + k and the      \
     * first of c + k + 1 */                                                             \
    LADLE_INLINE void max3_gsum_##S(const V *g0, const V *g1, const M *w0, const M *w1,  \
                                    int t3, V *e, V *o)                                  \
    {                                                                                    \
        const M z = {0};                                                                 \
        *e = (V)((M)*g0 & (*w0 == z + (t3 + 1)));                                        \
        *o = (V)((M)*g0 & (*w0 == z + (t3 + 2))) + (V)((M)*g1 & (*w1 == z + t3));        \
    }                                                                                    \
    /* the even (e) and odd (o) columns of a block interleaved into dx */               \
    LADLE_INLINE void max3_gstore_##S(const V *e, const V *o, T *d)                      \
    {                                                                                    \
        const M lane = LANES, ev = lane / 2 + (lane % 2) * NB;                           \
        V lo = __builtin_shuffle(*e, *o, ev), hi = __builtin_shuffle(*e, *o, ev + NB / 2); \
        memcpy(d, &lo, sizeof lo);                                                       \
        memcpy(d + NB, &hi, sizeof hi);                                                  \
    }                                                                                    \
    /* 2 NB input columns from js = 2 c - p + 1 on, down the input rows      \
     * [i0, i1). The latest output rows (two for row stride 2, three for 1)  \
     * are held, each loaded once, and each input row takes the sums of     \
     * those that hold it (rows not loaded yet have no winner at all) */                 \
    LADLE_INLINE void max3_gcolumn_##S(const pool *v, const T *g, const uint8_t *ap,     \
                                       int64_t c, const int RIGHT, const int64_t S1,     \
                                       int64_t i0, int64_t i1, T *dxp)                   \
    {                                                                                    \
        /* locals: the stores below may alias the plan as far as C knows */              \
        const int64_t W = v->in[2], W2 = v->out[2], js = 2 * c - v->p[2] + 1;            \
        const int64_t *bhi = v->bhi, held = S1 == 2 ? 2 : 3, P1 = v->p[1];               \
        int64_t next = bhi[i0] - held + 1; /* the next output row to load */             \
        V ga0 = {0}, ga1 = {0}, gb0 = {0}, gb1 = {0}, gc0 = {0}, gc1 = {0};              \
        M none = (M){0} - 1, wa0 = none, wa1 = none, wb0 = none, wb1 = none;             \
        M wc0 = none, wc1 = none;                                                        \
        next = next > 0 ? next : 0;                                                      \
        for (int64_t i = i0; i < i1; i++) {                                              \
            for (; next <= bhi[i]; next++) { /* a out */                                 \
                ga0 = gb0, ga1 = gb1, wa0 = wb0, wa1 = wb1;                              \
                if (S1 == 1) {                                                           \
                    gb0 = gc0, gb1 = gc1, wb0 = wc0, wb1 = wc1;                          \
                    max3_gload_##S(g, ap, next * W2 + c, RIGHT, &gc0, &gc1, &wc0, &wc1); \
                } else {                                                                 \
                    max3_gload_##S(g, ap, next * W2 + c, RIGHT, &gb0, &gb1, &wb0, &wb1); \
                }                                                                        \
            }                                                                            \
            /* the rows held, newest last, and where each holds input row i */           \
            int64_t t[3];                                                                \
            for (int k = 0; k < 3; k++) {                                                \
                int64_t u = i - ((next - held + k) * S1 - P1);                           \
                t[k] = u >= 0 && u < 3 ? 3 * u : 100;                                    \
            }                                                                            \
            V e, o, e1, o1;                                                              \
            max3_gsum_##S(&ga0, &ga1, &wa0, &wa1, (int)t[0], &e, &o);                    \
            max3_gsum_##S(&gb0, &gb1, &wb0, &wb1, (int)t[1], &e1, &o1);                  \
            e += e1, o += o1;                                                            \
            if (S1 == 1) {                                                               \
                max3_gsum_##S(&gc0, &gc1, &wc0, &wc1, (int)t[2], &e1, &o1);              \
                e += e1, o += o1;                                                        \
            }                                                                            \
            max3_gstore_##S(&e, &o, dxp + i * W + js);                                   \
        }                                                                                \
    }                                                                                    \
    /* row stride 2 as well: the two input rows of each output row r in      \
     * [ra, rb), 2 r - P1 + 1 (its middle row, held by r alone) and the next \
     * (its last row and the first of r + 1, which must exist), in the       \
     * blocks of max3_gcolumn, each output row loaded once */                            \
    LADLE_INLINE void max3_gpairs_##S(const pool *v, const T *g, const uint8_t *ap,      \
                                      int64_t c, const int RIGHT, int64_t ra,            \
                                      int64_t rb, T *dxp)                                \
    {                                                                                    \
        const int64_t W = v->in[2], W2 = v->out[2], js = 2 * c - v->p[2] + 1;            \
        T *d = dxp + (2 * ra - v->p[1] + 1) * W + js;                                    \
        V ga0, ga1, gb0, gb1, e, o, e1, o1;                                              \
        M wa0, wa1, wb0, wb1;                                                            \
        max3_gload_##S(g, ap, ra * W2 + c, RIGHT, &ga0, &ga1, &wa0, &wa1);               \
        for (int64_t r = ra; r < rb; r++, d += 2 * W) {                                  \
            max3_gsum_##S(&ga0, &ga1, &wa0, &wa1, 3, &e, &o);                            \
            max3_gstore_##S(&e, &o, d);                                                  \
            max3_gload_##S(g, ap, (r + 1) * W2 + c, RIGHT, &gb0, &gb1, &wb0, &wb1);      \
            max3_gsum_##S(&ga0, &ga1, &wa0, &wa1, 6, &e, &o);                            \
            max3_gsum_##S(&gb0, &gb1, &wb0, &wb1, 0, &e1, &o1);                          \
            e += e1, o += o1;                                                            \
            max3_gstore_##S(&e, &o, d + W);                                              \
            ga0 = gb0, ga1 = gb1, wa0 = wb0, wa1 = wb1;                                  \
        }                                                                                \
    }                                                                                    \
    /* the input rows [i0, i1) by max3_gcolumn, in bands, block by block up  \
     * to the one at cmax */                                                             \
    LADLE_INLINE void max3_gbands_##S(const pool *v, const T *g, const uint8_t *ap,      \
                                      int64_t cmax, int64_t i0, int64_t i1, T *dxp)      \
    {                                                                                    \
        int64_t W2 = v->out[2], band = BAND(v->in[2] * (int64_t)sizeof(T));              \
        for (int64_t a = i0; a < i1; a += band)                                          \
            for (int64_t c = 0, b = a + band < i1 ? a + band : i1;; c += NB) {           \
                c = c < cmax ? c : cmax;                                                 \
                int right = c + NB == W2;                                                \
                if (right && v->s[1] == 2)                                               \
                    max3_gcolumn_##S(v, g, ap, c, 1, 2, a, b, dxp);                      \
                else if (v->s[1] == 2)                                                   \
                    max3_gcolumn_##S(v, g, ap, c, 0, 2, a, b, dxp);                      \
                else if (right)                                                          \
                    max3_gcolumn_##S(v, g, ap, c, 1, 1, a, b, dxp);                      \
                else                                                                     \
                    max3_gcolumn_##S(v, g, ap, c, 0, 1, a, b, dxp);                      \
                if (c == cmax)                                                           \
                    break;                                                               \
            }                                                                            \
    }                                                                                    \
    /* column stride 2: each input gradient written once, gathered from the  \
     * (at most six) windows holding it. Blocks of 2 NB columns where they   \
     * fit (the last one overlapping its neighbour): with row stride 2 by    \
     * max3_gpairs where an output row and the next hold the pair, and the   \
     * rows above and below (and row stride 1) by max3_gbands; the columns   \
     * left over one by one. */                                                          \
    LADLE_KERNEL static void max3_gather_bwd_##S(const pool *v, int64_t planes,          \
                                                 const T *dy, T *dx, const uint8_t *arg) \
    {                                                                                    \
        int64_t W = v->in[2], H = v->in[1], W2 = v->out[2], p = v->p[2], P1 = v->p[1];   \
        int64_t room = W - 1 + p - 2 * NB;                                               \
        /* the last block: its last column 2 c - p + 2 NB inside the row */              \
        int64_t cmax = room < 0 || W2 < NB ? -1 : room / 2 < W2 - NB ? room / 2 : W2 - NB; \
        int64_t done = cmax < 0 ? 0 : 2 * cmax - p + 2 * NB + 1; /* columns below it */ \
        /* max3_gpairs' output rows [0, rb): the pair of r, input rows         \
         * 2 r - P1 + 1 and + 2, inside the plane, and r + 1 an output row */            \
        int64_t rb = H - 3 + P1 >= 0 ? (H - 3 + P1) / 2 + 1 : 0;                         \
        rb = v->s[1] == 2 && cmax >= 0 ? rb : 0;                                         \
        rb = rb < v->out[1] - 1 ? rb : v->out[1] - 1;                                    \
        rb = rb > 0 ? rb : 0;                                                            \
        int64_t ia = rb ? 1 - P1 : 0, ib = rb ? 2 * rb - P1 + 1 : 0; /* its rows */      \
        for (int64_t pl = 0; pl < planes; pl++) {                                        \
            const T *g = dy + pl * v->pout;                                              \
            const uint8_t *ap = arg + pl * v->pout;                                      \
            T *dxp = dx + pl * v->pin;                                                   \
            for (int64_t c = 0; rb > 0; c += NB) {                                       \
                c = c < cmax ? c : cmax;                                                 \
                if (c + NB == W2)                                                        \
                    max3_gpairs_##S(v, g, ap, c, 1, 0, rb, dxp);                         \
                else                                                                     \
                    max3_gpairs_##S(v, g, ap, c, 0, 0, rb, dxp);                         \
                if (c == cmax)                                                           \
                    break;                                                               \
            }                                                                            \
            if (cmax >= 0) {                                                             \
                max3_gbands_##S(v, g, ap, cmax, 0, ia, dxp);                             \
                max3_gbands_##S(v, g, ap, cmax, ib, H, dxp);                             \
            }                                                                            \
            for (int64_t i = 0; i < H && (done < W || p == 0); i++) {                    \
                if (cmax >= 0 && p == 0)                                                 \
                    dxp[i * W] = max3_gather_one_##S(v, g, ap, i, 0);                    \
                for (int64_t j = done; j < W; j++)                                       \
                    dxp[i * W + j] = max3_gather_one_##S(v, g, ap, i, j);                \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
    /* column stride 1: zero the plane, add each dy at its winner's offset   \
     * (the window's first tap's, plus the code's row times W and column) */            \
    LADLE_KERNEL static void max3_bwd_##S(const pool *v, int64_t planes, const T *dy,    \
                                          T *dx, const uint8_t *arg)                     \
    {                                                                                    \
        int64_t W = v->in[2], W2 = v->out[2], H2 = v->out[1];                            \
        int32_t tap[9];                                                                  \
        for (int k = 0; k < 9; k++)                                                      \
            tap[k] = (int32_t)(k / 3 * W + k % 3);                                       \
        for (int64_t pl = 0; pl < planes; pl++) {                                        \
            const T *restrict g = dy + pl * v->pout;                                     \
            const uint8_t *restrict ap = arg + pl * v->pout;                             \
            T *restrict dxp = dx + pl * v->pin;                                          \
            max3_zero_##S(dxp, v->pin);                                                  \
            for (int64_t r = 0; r < H2; r++) {                                           \
                int64_t first = (r * v->s[1] - v->p[1]) * W - v->p[2];                   \
                for (int64_t c = 0; c < W2; c++)                                         \
                    dxp[first + c + tap[ap[r * W2 + c]]] += g[r * W2 + c];               \
            }                                                                            \
        }                                                                                \
    }

#define DEFINE_AVG3(T, S, V, M, NB, LANES)                                               \
    /* the sum of one input row's three taps for the NB outputs whose        \
     * windows start at columns b, b + ST, ...; outside the row (LEFT: column \
     * -1, RIGHT: the last OVER) zeros are shuffled in */                                \
    LADLE_INLINE void avg3_row_##S(const T *xr, int64_t b, int64_t W, const int64_t ST,  \
                                   const int LEFT, const int RIGHT, int64_t over, V *h)  \
    {                                                                                    \
        const M lane = LANES, even = 2 * lane, odd = 2 * lane + 1;                       \
        const V z = {0}; /* shuffle lanes past NB pick zeros, lane -1 wraps to one */    \
        V a, c, d;                                                                       \
        if (ST == 1) {                                                                   \
            memcpy(&c, xr + b + 1, sizeof c);                                            \
            if (LEFT)                                                                    \
                a = __builtin_shuffle(c, z, lane - 1);                                   \
            else                                                                         \
                memcpy(&a, xr + b, sizeof a);                                            \
            if (RIGHT)                                                                   \
                d = __builtin_shuffle(c, z, lane + 1);                                   \
            else                                                                         \
                memcpy(&d, xr + b + 2, sizeof d);                                        \
        } else {                                                                         \
            V p0, p1, q0, q1;                                                            \
            memcpy(&q0, xr + b + 1, sizeof q0);                                          \
            if (LEFT)                                                                    \
                p0 = __builtin_shuffle(q0, z, lane - 1);                                 \
            else                                                                         \
                memcpy(&p0, xr + b, sizeof p0);                                          \
            if (RIGHT && over == 2) {                                                    \
                memcpy(&q1, xr + W - NB, sizeof q1);                                     \
                p1 = __builtin_shuffle(q1, z, lane + 1);                                 \
                q1 = __builtin_shuffle(q1, z, lane + 2);                                 \
            } else if (RIGHT) {                                                          \
                memcpy(&p1, xr + b + NB, sizeof p1);                                     \
                q1 = __builtin_shuffle(p1, z, lane + 1);                                 \
            } else {                                                                     \
                memcpy(&p1, xr + b + NB, sizeof p1);                                     \
                memcpy(&q1, xr + b + 1 + NB, sizeof q1);                                 \
            }                                                                            \
            a = __builtin_shuffle(p0, p1, even);                                         \
            c = __builtin_shuffle(p0, p1, odd);                                          \
            d = __builtin_shuffle(q0, q1, odd);                                          \
        }                                                                                \
        *h = a + c + d;                                                                  \
    }                                                                                    \
    /* the row sums of input row i, zero for a row outside the plane */                  \
    LADLE_INLINE void avg3_rowat_##S(const T *xp, int64_t i, int64_t H, int64_t b,       \
                                     int64_t W, const int64_t ST, const int LEFT,        \
                                     const int RIGHT, int64_t over, V *h)                \
    {                                                                                    \
        if (i >= 0 && i < H)                                                             \
            avg3_row_##S(xp + i * W, b, W, ST, LEFT, RIGHT, over, h);                    \
        else                                                                             \
            *h = (V){0};                                                                 \
    }                                                                                    \
    /* NB outputs from column c on, down the output rows [ra, rb): the       \
     * window's three row sums slide down S1 rows at a time, each computed   \
     * once */                                                                           \
    LADLE_INLINE void avg3_column_##S(const pool *v, const T *xp, int64_t c,             \
                                      const int64_t ST, const int64_t S1, const int LEFT, \
                                      const int RIGHT, int64_t over, int64_t ra,         \
                                      int64_t rb, const T *f2, T *yp)                    \
    {                                                                                    \
        /* locals: the stores below may alias the plan as far as C knows */              \
        const int64_t W = v->in[2], H = v->in[1], W2 = v->out[2];                        \
        const double *f01 = v->f01;                                                      \
        int64_t b = c * ST - v->p[2], i = ra * S1 - v->p[1]; /* first column and row */  \
        V f, h0, h1, h2;                                                                 \
        memcpy(&f, f2 + c, sizeof f);                                                    \
        avg3_rowat_##S(xp, i, H, b, W, ST, LEFT, RIGHT, over, &h0);                      \
        avg3_rowat_##S(xp, i + 1, H, b, W, ST, LEFT, RIGHT, over, &h1);                  \
        avg3_rowat_##S(xp, i + 2, H, b, W, ST, LEFT, RIGHT, over, &h2);                  \
        for (int64_t r = ra;;) {                                                         \
            V yv = (h0 + h1 + h2) * ((T)f01[r] * f);                                     \
            memcpy(yp + r * W2 + c, &yv, sizeof yv);                                     \
            if (++r == rb)                                                               \
                break;                                                                   \
            i += S1;                                                                     \
            if (c == 0 && i + 3 - S1 >= 0) /* the next plane's rows, as max3_column */   \
                prefetch(xp + v->pin + (i + 3 - S1) * W, sizeof(T) * (size_t)(S1 * W));  \
            if (S1 == 1) {                                                               \
                h0 = h1, h1 = h2;                                                        \
            } else {                                                                     \
                h0 = h2;                                                                 \
                avg3_rowat_##S(xp, i + 1, H, b, W, ST, LEFT, RIGHT, over, &h1);          \
            }                                                                            \
            avg3_rowat_##S(xp, i + 2, H, b, W, ST, LEFT, RIGHT, over, &h2);              \
        }                                                                                \
    }                                                                                    \
    LADLE_INLINE void avg3_band_##S(const pool *v, const T *xp, int64_t ra, int64_t rb,  \
                                    const int64_t ST, const int64_t S1, const T *f2,     \
                                    T *yp)                                               \
    {                                                                                    \
        int64_t W = v->in[2], W2 = v->out[2], p = v->p[2];                               \
        int64_t last = W2 - NB, over = (W2 - 1) * ST - p + 3 - W;                        \
        if (last == 0 && p && over > 0)                                                  \
            avg3_column_##S(v, xp, 0, ST, S1, 1, 1, over, ra, rb, f2, yp);               \
        else if (last == 0 && over > 0)                                                  \
            avg3_column_##S(v, xp, 0, ST, S1, 0, 1, over, ra, rb, f2, yp);               \
        else if (p)                                                                      \
            avg3_column_##S(v, xp, 0, ST, S1, 1, 0, 0, ra, rb, f2, yp);                  \
        else                                                                             \
            avg3_column_##S(v, xp, 0, ST, S1, 0, 0, 0, ra, rb, f2, yp);                  \
        if (last == 0)                                                                   \
            return;                                                                      \
        for (int64_t c = NB; c < last; c += NB)                                          \
            avg3_column_##S(v, xp, c, ST, S1, 0, 0, 0, ra, rb, f2, yp);                  \
        if (over > 0)                                                                    \
            avg3_column_##S(v, xp, last, ST, S1, 0, 1, over, ra, rb, f2, yp);            \
        else                                                                             \
            avg3_column_##S(v, xp, last, ST, S1, 0, 0, 0, ra, rb, f2, yp);               \
    }                                                                                    \
    LADLE_INLINE void avg3_columns_##S(const pool *v, const T *xp, const int64_t ST,     \
                                       const int64_t S1, const T *f2, T *yp)             \
    {                                                                                    \
        int64_t band = BAND(S1 * v->in[2] * (int64_t)sizeof(T)), H2 = v->out[1];         \
        for (int64_t r = 0; r < H2; r += band)                                           \
            avg3_band_##S(v, xp, r, r + band < H2 ? r + band : H2, ST, S1, f2, yp);      \
    }                                                                                    \
    /* rows narrower than a block: output by output from the plan's tables */           \
    LADLE_INLINE void avg3_fwd_one_##S(const pool *v, const T *xp, const T *f2, T *yp)   \
    {                                                                                    \
        for (int64_t r = 0; r < v->out[1]; r++)                                          \
            for (int64_t o = 0; o < v->out[2]; o++) {                                    \
                T acc = 0;                                                               \
                for (int64_t j = 0; j < v->ntrows[r]; j++)                               \
                    for (int64_t t = v->lo2[o]; t < v->hi2[o]; t++)                      \
                        acc += xp[v->trows[r * v->kk + j] * v->in[2] + v->base2[o] + t]; \
                yp[r * v->out[2] + o] = acc * ((T)v->f01[r] * f2[o]);                    \
            }                                                                            \
    }                                                                                    \
    LADLE_KERNEL static void avg3_fwd_##S(const pool *v, int64_t planes, const T *x, T *y, \
                                          const T *f2)                                   \
    {                                                                                    \
        int64_t ST = v->s[2], S1 = v->s[1];                                              \
        for (int64_t pl = 0; pl < planes; pl++) {                                        \
            const T *xp = x + pl * v->pin;                                               \
            T *yp = y + pl * v->pout;                                                    \
            if (v->out[2] < NB)                                                          \
                avg3_fwd_one_##S(v, xp, f2, yp);                                         \
            else if (ST == 1 && S1 == 1)                                                 \
                avg3_columns_##S(v, xp, 1, 1, f2, yp);                                   \
            else if (ST == 1)                                                            \
                avg3_columns_##S(v, xp, 1, 2, f2, yp);                                   \
            else if (S1 == 1)                                                            \
                avg3_columns_##S(v, xp, 2, 1, f2, yp);                                   \
            else                                                                         \
                avg3_columns_##S(v, xp, 2, 2, f2, yp);                                   \
        }                                                                                \
    }                                                                                    \
    /* a row of G (output row r's dy times the column factors, zero-padded):  \
     * summed over the outputs that hold each input column of a block, NB     \
     * columns from j on (stride 1) or NB pairs from 2 j on (stride 2: two    \
     * vectors, the even and odd columns interleaved) */                                 \
    LADLE_INLINE void avg3_spread_##S(const T *g, int64_t j, int64_t p, const int64_t ST, \
                                      V *lo, V *hi)                                      \
    {                                                                                    \
        V g0, g1, g2;                                                                    \
        if (ST == 1) { /* the outputs j + p - 2 .. j + p */                              \
            memcpy(&g0, g + j + p - 2, sizeof g0);                                       \
            memcpy(&g1, g + j + p - 1, sizeof g1);                                       \
            memcpy(&g2, g + j + p, sizeof g2);                                           \
            *lo = g0 + g1 + g2;                                                          \
            return;                                                                      \
        }                                                                                \
        /* column 2 j: the middle tap of output j (padding 1) or the first of j  \
         * and last of j - 1 (padding 0); 2 j + 1: the last of j and first of    \
         * j + 1, or the middle of j */                                                  \
        const M lane = LANES, ev = lane / 2 + (lane % 2) * NB;                           \
        memcpy(&g0, g + j, sizeof g0);                                                   \
        memcpy(&g1, g + j + (p ? 1 : -1), sizeof g1);                                    \
        V e = g0, o = g0 + g1;                                                           \
        if (!p) {                                                                        \
            e = o;                                                                       \
            o = g0;                                                                      \
        }                                                                                \
        *lo = __builtin_shuffle(e, o, ev);                                               \
        *hi = __builtin_shuffle(e, o, ev + NB / 2);                                      \
    }                                                                                    \
    /* a block of input columns down every input row: the spread rows of the \
     * three latest output rows held, each computed once, and the ones that  \
     * hold row i weighted by their row factors (the plan's bhi, bc) */                  \
    LADLE_INLINE void avg3_bcolumn_##S(const pool *v, const T *G, int64_t j,             \
                                       const int64_t ST, int64_t i0, int64_t i1, T *dxp) \
    {                                                                                    \
        /* locals: the stores below may alias the plan as far as C knows */              \
        const int64_t W = v->in[2], gs = v->out[2] + 4, p = v->p[2];                     \
        const int64_t *bhi = v->bhi;                                                     \
        const double *bc = v->bc;                                                        \
        int64_t next = bhi[i0] > 2 ? bhi[i0] - 2 : 0; /* the next output row */          \
        V e0 = {0}, e1 = {0}, e2 = {0}, u0 = {0}, u1 = {0}, u2 = {0};                    \
        for (int64_t i = i0; i < i1; i++) {                                              \
            for (; next <= bhi[i]; next++) {                                             \
                e0 = e1, e1 = e2, u0 = u1, u1 = u2;                                      \
                avg3_spread_##S(G + next * gs, j, p, ST, &e2, &u2);                      \
            }                                                                            \
            T c0 = (T)bc[3 * i], c1 = (T)bc[3 * i + 1], c2 = (T)bc[3 * i + 2];           \
            V d = c0 * e0 + c1 * e1 + c2 * e2;                                           \
            if (ST == 1) {                                                               \
                memcpy(dxp + i * W + j, &d, sizeof d);                                   \
            } else {                                                                     \
                memcpy(dxp + i * W + 2 * j, &d, sizeof d);                               \
                d = c0 * u0 + c1 * u1 + c2 * u2;                                         \
                memcpy(dxp + i * W + 2 * j + NB, &d, sizeof d);                          \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
    /* rows narrower than two blocks: input row by input row from the tables */          \
    LADLE_INLINE void avg3_bwd_one_##S(const pool *v, const T *dyp, const T *f2, T *dxp) \
    {                                                                                    \
        int64_t W = v->in[2], W2 = v->out[2];                                            \
        for (int64_t i = 0; i < v->in[1]; i++) {                                         \
            T *xr = dxp + i * W;                                                         \
            memset(xr, 0, sizeof(T) * (size_t)W);                                        \
            for (int64_t k = 0; k < v->ncrows[i]; k++) {                                 \
                int64_t r = v->crows[3 * i + k];                                         \
                for (int64_t o = 0; o < W2; o++)                                         \
                    for (int64_t t = v->lo2[o]; t < v->hi2[o]; t++)                      \
                        xr[v->base2[o] + t] += dyp[r * W2 + o] * ((T)v->f01[r] * f2[o]); \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
    LADLE_KERNEL static void avg3_bwd_##S(const pool *v, int64_t planes, const T *dy,    \
                                          T *dx, const T *f2)                            \
    {                                                                                    \
        int64_t W = v->in[2], W2 = v->out[2], p = v->p[2], ST = v->s[2], gs = W2 + 4;    \
        /* blocks of columns (stride 1) or of column pairs (2), the last one      \
         * overlapping its neighbour; an odd last column of stride 2 on its own */       \
        int64_t n = ST == 1 ? W : W / 2, last = n - NB, H = v->in[1];                    \
        int64_t band = BAND(W * (int64_t)sizeof(T));                                     \
        T *G = (T *)v->rows3 + 2; /* dy times the column factors, rows zero-padded */    \
        for (int64_t pl = 0; pl < planes; pl++) {                                        \
            const T *dyp = dy + pl * v->pout;                                            \
            T *dxp = dx + pl * v->pin;                                                   \
            if (n < NB) {                                                                \
                avg3_bwd_one_##S(v, dyp, f2, dxp);                                       \
                continue;                                                                \
            }                                                                            \
            /* a pass of its own: the spreads read G off its stores' alignment */        \
            for (int64_t r = 0; r < v->out[1]; r++) {                                    \
                T *restrict gr = G + r * gs;                                             \
                const T *restrict dr = dyp + r * W2, *restrict fr = f2;                  \
                for (int64_t o = 0; o < W2; o++)                                         \
                    gr[o] = dr[o] * fr[o];                                               \
            }                                                                            \
            for (int64_t i0 = 0; i0 < H; i0 += band)                                     \
                for (int64_t j = 0, i1 = i0 + band < H ? i0 + band : H; j < n; j += NB) {  \
                    j = j + NB <= n ? j : last;                                          \
                    if (ST == 1)                                                         \
                        avg3_bcolumn_##S(v, G, j, 1, i0, i1, dxp);                       \
                    else                                                                 \
                        avg3_bcolumn_##S(v, G, j, 2, i0, i1, dxp);                       \
                }                                                                        \
            if (ST == 2 && W % 2) /* the last column, the middle or first tap of W/2 */  \
                for (int64_t i = 0; i < v->in[1]; i++) {                                 \
                    T acc = 0;                                                           \
                    for (int64_t k = 0, r = v->bhi[i] - 2; k < 3; k++, r++) {            \
                        const T *g = G + r * gs + W / 2;                                 \
                        if (r >= 0 && v->bc[3 * i + k] != 0)                             \
                            acc += (T)v->bc[3 * i + k] * (p ? g[0] : g[-1] + g[0]);      \
                    }                                                                    \
                    dxp[i * W + W - 1] = acc;                                            \
                }                                                                        \
        }                                                                                \
    }

DEFINE_MAX3(float, f32, vf32, mf32, 8, LANES8)
DEFINE_MAX3(double, f64, vd4, md4, 4, LANES4)
DEFINE_AVG3(float, f32, vf32, mf32, 8, LANES8)
DEFINE_AVG3(double, f64, vd4, md4, 4, LANES4)

int ladle__pool_direct_case(const pool *v)
{
    if (v->in[0] != 1 || v->k[0] != 1 || v->s[0] != 1 || v->p[0] != 0)
        return POOL_GENERIC;
    int k2s2 = 1, k3 = 1;
    for (int a = 1; a < 3; a++) {
        k2s2 = k2s2 && v->k[a] == 2 && v->s[a] == 2 && v->p[a] == 0 && v->d[a] == 1 &&
               v->out[a] == v->in[a] / 2;
        k3 = k3 && v->k[a] == 3 && (v->s[a] == 1 || v->s[a] == 2) && v->p[a] <= 1 &&
             v->d[a] == 1;
    }
    return k2s2 ? POOL_K2S2 : k3 ? POOL_K3 : POOL_GENERIC;
}

/* POOL_K3's tables, after pool.c's: which output rows hold each input row,
 * and the workspace. */
int ladle__pool_direct_tables(pool *v)
{
    int64_t H = v->in[1], H2 = v->out[1];
    /* max: a plane of offsets, for a forward without a ctx; average: the
     * backward's plane of dy times the column factors, rows zero-padded */
    size_t rows3 = v->kind == LADLE_POOL_MAX ? sizeof(int32_t) * (size_t)v->pout
                                             : sizeof(double) * (size_t)(H2 * (v->out[2] + 4));
    v->crows = ladle__calloc((size_t)(3 * H), sizeof(int64_t));
    v->ncrows = ladle__calloc((size_t)H, sizeof(int64_t));
    v->bhi = ladle__calloc((size_t)H, sizeof(int64_t));
    v->bc = ladle__calloc((size_t)(3 * H), sizeof(double));
    v->rows3 = ladle__calloc(1, rows3);
    if (!v->crows || !v->ncrows || !v->bhi || !v->bc || !v->rows3)
        return 0;
    memset(v->rows3, 0, rows3); /* touched here, not in the first forward */
    for (int64_t o = 0; o < H2; o++)
        for (int64_t t = 0; t < 3; t++) {
            int64_t i = o * v->s[1] - v->p[1] + t;
            if (i >= 0 && i < H)
                v->crows[3 * i + v->ncrows[i]++] = o;
        }
    /* per input row the last output row holding it, and the row factors of
     * that row and the two before it (0 for those that do not hold it) */
    for (int64_t i = 0; i < H; i++) {
        int64_t n = v->ncrows[i], lo = n ? v->crows[3 * i] : 0;
        v->bhi[i] = n ? v->crows[3 * i + n - 1] : -1;
        for (int64_t k = 0; k < 3; k++) {
            int64_t r = v->bhi[i] - 2 + k;
            v->bc[3 * i + k] = n && r >= lo ? v->f01[r] : 0;
        }
    }
    return 1;
}

void ladle__pool_direct_forward(const pool *v, int f32, int64_t planes, const void *x, void *y,
                                uint8_t *codes)
{
    int max = v->kind == LADLE_POOL_MAX;
    if (v->direct == POOL_K3 && max && f32)
        max3_fwd_f32(v, planes, x, y, codes);
    else if (v->direct == POOL_K3 && max)
        max3_fwd_f64(v, planes, x, y, codes);
    else if (v->direct == POOL_K3 && f32)
        avg3_fwd_f32(v, planes, x, y, v->f2f);
    else if (v->direct == POOL_K3)
        avg3_fwd_f64(v, planes, x, y, v->f2d);
    else if (max && f32)
        max2_fwd_f32(v, planes, x, y, codes);
    else if (max)
        max2_fwd_f64(v, planes, x, y, codes);
    else if (f32)
        avg2_fwd_f32(v, planes, x, y);
    else
        avg2_fwd_f64(v, planes, x, y);
}

void ladle__pool_direct_backward(const pool *v, int f32, int64_t planes, const void *dy,
                                 void *dx, const uint8_t *codes)
{
    int max = v->kind == LADLE_POOL_MAX;
    if (v->direct == POOL_K3 && max && f32 && v->s[2] == 2)
        max3_gather_bwd_f32(v, planes, dy, dx, codes);
    else if (v->direct == POOL_K3 && max && v->s[2] == 2)
        max3_gather_bwd_f64(v, planes, dy, dx, codes);
    else if (v->direct == POOL_K3 && max && f32)
        max3_bwd_f32(v, planes, dy, dx, codes);
    else if (v->direct == POOL_K3 && max)
        max3_bwd_f64(v, planes, dy, dx, codes);
    else if (v->direct == POOL_K3 && f32)
        avg3_bwd_f32(v, planes, dy, dx, v->f2f);
    else if (v->direct == POOL_K3)
        avg3_bwd_f64(v, planes, dy, dx, v->f2d);
    else if (max && f32)
        max2_bwd_f32(v, planes, dy, dx, codes);
    else if (max)
        max2_bwd_f64(v, planes, dy, dx, codes);
    else if (f32)
        avg2_bwd_f32(v, planes, dy, dx);
    else
        avg2_bwd_f64(v, planes, dy, dx);
}
