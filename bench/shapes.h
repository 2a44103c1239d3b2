/*
 * bench/shapes.h - the rows of the layer tables that the CPU and the GPU
 * benchmarks share: a linear row (batch, in, out) and a convolution row
 * (batch, cin, cout, size, kernel, padding; square images) turned into the
 * layer's description, its input shape, the forward GEMM's M x N x K and
 * the row's label; and a tensor shaped for a layer.
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

/* A CPU tensor of dtype dt shaped as op's input (y = 0) or output (y = 1),
 * filled by ladle_tensor_fill_random(t, seed, stream): the status, *t. */
static inline ladle_status bench_tensor_like(const ladle_op *op, int y, ladle_dtype dt,
                                             uint64_t seed, uint64_t stream, ladle_tensor **t)
{
    int nd;
    int64_t s[LADLE_MAX_NDIM];
    if (y)
        ladle_op_y_shape(op, &nd, s);
    else
        ladle_op_x_shape(op, &nd, s);
    ladle_status st = ladle_tensor_create(dt, LADLE_CPU, nd, s, t);
    if (st == LADLE_OK)
        ladle_tensor_fill_random(*t, seed, stream);
    return st;
}

/* A layer's tensors and ctx for timed forward + backward + backward_weight. */
typedef struct bench_layer_run {
    ladle_op *op;
    ladle_tensor *x, *y, *dy, *dx;
    ladle_ctx *ctx;
} bench_layer_run;

/* x and dx shaped as op's input (stream 0), y and dy as its output (stream
 * 1), random under seed, and a ctx: the status, with the first failure's
 * part ("tensor", "ctx") in *what. */
static inline ladle_status bench_layer_open(bench_layer_run *l, ladle_op *op, uint64_t seed,
                                            const char **what)
{
    ladle_dtype dt = ladle_op_dtype(op);
    ladle_tensor **t[4] = {&l->x, &l->y, &l->dy, &l->dx};
    ladle_status st = LADLE_OK;
    *l = (bench_layer_run){.op = op};
    *what = "tensor";
    for (int i = 0; i < 4 && st == LADLE_OK; i++)
        st = bench_tensor_like(op, i == 1 || i == 2, dt, seed, (uint64_t)(i == 1 || i == 2),
                               t[i]);
    if (st == LADLE_OK)
        *what = "ctx", st = ladle_ctx_create(op, &l->ctx);
    return st;
}

static inline void bench_layer_close(bench_layer_run *l)
{
    ladle_ctx_destroy(&l->ctx);
    ladle_tensor_destroy(&l->x);
    ladle_tensor_destroy(&l->y);
    ladle_tensor_destroy(&l->dx);
    ladle_tensor_destroy(&l->dy);
}

#endif /* LADLE_BENCH_SHAPES_H */
