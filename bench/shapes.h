/*
 * bench/shapes.h - the rows of the layer tables that the CPU and the GPU
 * benchmarks share: a linear row (batch, in, out) and a convolution row
 * (batch, cin, cout, size, kernel, padding; square images) turned into the
 * layer's description, its input shape, the forward GEMM's M x N x K and
 * the row's label.
 */
#ifndef LADLE_BENCH_SHAPES_H
#define LADLE_BENCH_SHAPES_H

#include <stdio.h>

#include "ladle.h"

/* A row's input shape (xs[0..1] for a linear), its forward GEMM's
 * M x N x K and its label. */
typedef struct bench_gemm_row {
    int64_t xs[4], m, n, k;
    char shape[64];
} bench_gemm_row;

/* y[B, out] = x[B, in] W^T: M = B, N = out, K = in (the forward product) */
static inline void bench_linear_row(const int64_t r[3], ladle_linear_desc *d, bench_gemm_row *g)
{
    ladle_linear_desc_init(d, r[1], r[2]);
    g->xs[0] = r[0], g->xs[1] = r[1];
    g->m = r[0], g->n = r[2], g->k = r[1];
    snprintf(g->shape, sizeof g->shape, "%lldx%lld -> %lld", (long long)r[0],
             (long long)r[1], (long long)r[2]);
}

/* M = cout, N = B oh ow, K = cin kh kw */
static inline void bench_conv_row(const int64_t r[6], ladle_conv_desc *d, bench_gemm_row *g)
{
    ladle_conv_desc_init(d, 2, r[1], r[2], r[4]);
    d->padding[0] = d->padding[1] = r[5];
    g->xs[0] = r[0], g->xs[1] = r[1], g->xs[2] = g->xs[3] = r[3];
    int64_t out = r[3] + 2 * r[5] - r[4] + 1;
    g->m = r[2], g->n = r[0] * out * out, g->k = r[1] * r[4] * r[4];
    snprintf(g->shape, sizeof g->shape, "%lldx%lldx%lld^2 k%lld -> %lld", (long long)r[0],
             (long long)r[1], (long long)r[3], (long long)r[4], (long long)r[2]);
}

#endif /* LADLE_BENCH_SHAPES_H */
