/*
 * The CPU's pooling plan, shared by pool.c (the plan, the generic separable
 * kernels) and pool_direct.c (the direct kernels of the common 2-d
 * windows). It lives at the start of the workspace that pool_setup fills,
 * its tables and scratch after it in the same block. Never included
 * outside src/backends/cpu/.
 */
#ifndef LADLE_BACKEND_CPU_POOL_IMPL_H
#define LADLE_BACKEND_CPU_POOL_IMPL_H

#include <stdint.h>

#include "src/backends/cpu/cpu.h"
#include "src/backends/cpu/simd.h"

enum { POOL_GENERIC, POOL_K2S2, POOL_K3 };

typedef struct cpu_pool {
    ladle_pool_kind kind;
    int count_include_pad;
    int global;
    int64_t in[3], out[3], k[3], s[3], p[3], d[3];
    int64_t pin, pout;
    int64_t rows_in, rows_out; /* rows (all but the last dimension) of a plane */
    /* along the last dimension, per output: the window's first input index
     * (o s - p) and its valid taps [lo2, hi2); [oa, ob) are the outputs
     * whose taps are all valid */
    int64_t *base2, *lo2, *hi2;
    int64_t oa, ob;
    /* per output row: its valid tap rows (kk slots each) and their count */
    int64_t kk;
    int64_t *trows, *ntrows;
    /* average pooling: reciprocal divisor factors, per output row (f01) and
     * per output along the last dimension (f2f, f2d: f32 and f64) */
    double *f01, *f2d;
    float *f2f;
    /* scratch: A's values (rows_in x out[2]) and offsets, a row of scaled
     * gradients, a row of offsets when no saved winners are asked for */
    void *av;
    int32_t *aa;
    int64_t astride, pw; /* average pooling's rows of av: stride, zeros each side */
    void *g;
    int32_t *tmp;
    int direct; /* POOL_GENERIC or the direct kernels of pool_direct.c */
    int narrow; /* the direct max kernels narrow codes by conversion (see narrow_f32) */
    /* POOL_K3: per input row, the output rows whose windows hold it (three
     * slots each) and their count, the last of them (bhi) and the row
     * factors of it and the two before (bc); scratch (pool_direct.c) */
    int64_t *crows, *ncrows, *bhi;
    double *bc;
    void *rows3;
} cpu_pool;

/* Blocks of BLK outputs are GCC/Clang vectors (two or four machine vectors
 * on SSE, one or two on AVX2) with integer masks of the same width. */
#define BLK 8
typedef float vf32 __attribute__((vector_size(BLK * 4)));
typedef int32_t mf32 __attribute__((vector_size(BLK * 4)));
typedef double vf64 __attribute__((vector_size(BLK * 8)));
typedef int64_t mf64 __attribute__((vector_size(BLK * 8)));
/* four doubles: GCC 12 takes 64-byte vectors apart lane by lane in the
 * cloned kernels (src/backends/cpu/simd.h), even in the AVX-512 copy */
typedef double vd4 __attribute__((vector_size(32)));
typedef int64_t md4 __attribute__((vector_size(32)));

/* val takes the place of best: the first maximum wins, a NaN wins and stays */
static inline int wins_f32(float val, float best)
{
    return (val > best) | ((val != val) & (best == best));
}
static inline int wins_f64(double val, double best)
{
    return (val > best) | ((val != val) & (best == best));
}

/* The direct kernels: the case a plan fits (POOL_GENERIC for none), their
 * tables (after pool.c's), and the forward and backward of a plan that has
 * one (f32 or f64; max: the winners' one-byte codes, or NULL in a forward
 * that saves none). */
int ladle__cpu_pool_direct_case(const cpu_pool *v);
void ladle__cpu_pool_direct_tables(cpu_pool *v);
void ladle__cpu_pool_direct_forward(const cpu_pool *v, int f32, int64_t planes,
                                    const void *x, void *y, uint8_t *codes);
void ladle__cpu_pool_direct_backward(const cpu_pool *v, int f32, int64_t planes,
                                     const void *dy, void *dx, const uint8_t *codes);

#endif /* LADLE_BACKEND_CPU_POOL_IMPL_H */
