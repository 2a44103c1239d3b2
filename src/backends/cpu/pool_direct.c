/*
 * Direct kernels for the common 2-d windows, which skip the generic path's
 * two separable steps (see pool.c): the same results, fewer passes.
 */
#include <math.h>
#include <string.h>

#include "src/backends/cpu/pool_impl.h"

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

/* The kernels' block per dtype (each_dtype.h names T and S): its vector V
 * and mask M, NB lanes, their numbers and the low bytes of each. */
#define V_f32 vf32
#define M_f32 mf32
#define NB_f32 8
#define LANES_f32 LANES8
#define BYTES_f32 LOW4
#define V_f64 vd4
#define M_f64 md4
#define NB_f64 4
#define LANES_f64 LANES4
#define BYTES_f64 LOW8
#define V FN(V)
#define M FN(M)
#define NB FN(NB)
#define LANES FN(LANES)
#define BYTES FN(BYTES)
#define LADLE_CPU_KERNELS "src/backends/cpu/pool_k2.inc"
#include "src/backends/cpu/each_dtype.h"
#define LADLE_CPU_KERNELS "src/backends/cpu/pool_max3.inc"
#include "src/backends/cpu/each_dtype.h"
#define LADLE_CPU_KERNELS "src/backends/cpu/pool_avg3.inc"
#include "src/backends/cpu/each_dtype.h"
#undef V
#undef M
#undef NB
#undef LANES
#undef BYTES

int ladle__cpu_pool_direct_case(const cpu_pool *v)
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
void ladle__cpu_pool_direct_tables(cpu_pool *v)
{
    int64_t H = v->in[1], H2 = v->out[1];
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
}

/* The f32 or f64 table of the column factors (the average's divisor). */
static const void *col_factors(const cpu_pool *v, int f32)
{
    return f32 ? (const void *)v->f2f : (const void *)v->f2d;
}

void ladle__cpu_pool_direct_forward(const cpu_pool *v, int f32, int64_t planes, const void *x, void *y,
                                uint8_t *codes)
{
    int max = v->kind == LADLE_POOL_MAX, k3 = v->direct == POOL_K3;
    if (k3 && max)
        LADLE_CPU_TYPED(f32, max3_fwd, (v, planes, x, y, codes));
    else if (k3)
        LADLE_CPU_TYPED(f32, avg3_fwd, (v, planes, x, y, col_factors(v, f32)));
    else if (max)
        LADLE_CPU_TYPED(f32, max2_fwd, (v, planes, x, y, codes));
    else
        LADLE_CPU_TYPED(f32, avg2_fwd, (v, planes, x, y));
}

/* For column stride 2 the max gathers (see the 3 x 3 kernels above). */
void ladle__cpu_pool_direct_backward(const cpu_pool *v, int f32, int64_t planes, const void *dy,
                                 void *dx, const uint8_t *codes)
{
    int max = v->kind == LADLE_POOL_MAX, k3 = v->direct == POOL_K3;
    if (k3 && max && v->s[2] == 2)
        LADLE_CPU_TYPED(f32, max3_gather_bwd, (v, planes, dy, dx, codes));
    else if (k3 && max)
        LADLE_CPU_TYPED(f32, max3_bwd, (v, planes, dy, dx, codes));
    else if (k3)
        LADLE_CPU_TYPED(f32, avg3_bwd, (v, planes, dy, dx, col_factors(v, f32)));
    else if (max)
        LADLE_CPU_TYPED(f32, max2_bwd, (v, planes, dy, dx, codes));
    else
        LADLE_CPU_TYPED(f32, avg2_bwd, (v, planes, dy, dx));
}
