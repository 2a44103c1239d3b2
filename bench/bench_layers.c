/*
 * bench_layers: the sequential layers against what bounds them, measured in
 * one run as medians of repeated timings.
 *
 *  - Linear and Conv2d, forward + backward (input and weight gradients):
 *    GFLOP/s next to OpenBLAS GEMM on the same sizes (three GEMMs: the
 *    forward M x N x K and the two backward products), and the ratio.
 *  - Pooling, batch norm and activations, forward + backward: GB/s of the
 *    bytes they must move next to memcpy of as many bytes, and the ratio.
 *
 * A row's layer and its reference run in alternation, one repetition each,
 * and the ratio is the median of the repetitions' own ratios: this
 * machine's speed drifts between two levels from one second to the next,
 * which timing the two one after the other charged to one of them.
 *
 *   bench_layers [--threads T] [--reps R] [--dtype f32|f64] [--only LAYER]
 *                [--device cpu|cuda]   (the device of the gemm_bf16 table)
 */
#include <cblas.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ladle.h"

#include "common.h"
#include "shapes.h"

static int reps = 15;
static const char *only; /* run the rows of this layer alone */

/* 1 if the rows of layer `name` are to run (no --only, or --only name) */
static int wanted(const char *name)
{
    return !only || strcmp(only, name) == 0;
}

/* A failed ladle call in the setup or the timing of a row: fatal. */
static void die(const char *what)
{
    fprintf(stderr, "bench_layers: %s%s\n", what, ladle_error_message());
    exit(1);
}

typedef bench_layer_run layer_run;

static void layer_open(layer_run *lr, ladle_op *op)
{
    const char *what;
    bench_layer_open(lr, op, 1, &what);
}

/* a bench_once_fn on a layer_run */
static double layer_once(void *arg)
{
    layer_run *lr = arg;
    double t0 = bench_now();
    if (ladle_layer_forward(lr->op, lr->ctx, lr->x, lr->y) ||
        ladle_layer_backward(lr->op, lr->ctx, lr->dy, lr->dx) ||
        ladle_layer_backward_weight(lr->op, lr->ctx, lr->dy))
        die("");
    return bench_now() - t0;
}

/* Median seconds of forward + backward + backward_weight. */
static double time_layer(ladle_op *op)
{
    layer_run lr;
    layer_open(&lr, op);
    double m = bench_median_of(layer_once, &lr, reps);
    bench_layer_close(&lr);
    return m;
}

/* The three GEMMs of a layer with forward M x N x K: C = A B, then
 * A^T-shaped and B^T-shaped products of the same flops. */
typedef struct gemms {
    ladle_dtype dt;
    int64_t m, n, k;
    void *a, *b, *c, *da, *db;
} gemms;

static void gemms_open(gemms *g, ladle_dtype dt, int64_t m, int64_t n, int64_t k)
{
    size_t es = dt == LADLE_F32 ? 4 : 8;
    g->dt = dt, g->m = m, g->n = n, g->k = k;
    g->a = calloc((size_t)(m * k), es), g->b = calloc((size_t)(k * n), es);
    g->c = calloc((size_t)(m * n), es), g->da = calloc((size_t)(m * k), es);
    g->db = calloc((size_t)(k * n), es);
    memset(g->a, 0, (size_t)(m * k) * es);
}

/* a bench_once_fn on a gemms */
static double gemms_once(void *arg)
{
    gemms *g = arg;
    int m = (int)g->m, n = (int)g->n, k = (int)g->k;
    double t0 = bench_now();
    if (g->dt == LADLE_F32) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, g->a, k, g->b, n,
                    0, g->c, n);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, n, m, 1, g->a, k, g->c, n,
                    0, g->db, n);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, k, n, 1, g->c, n, g->b, n,
                    1, g->da, k);
    } else {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, g->a, k, g->b, n,
                    0, g->c, n);
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, n, m, 1, g->a, k, g->c, n,
                    0, g->db, n);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, k, n, 1, g->c, n, g->b, n,
                    1, g->da, k);
    }
    return bench_now() - t0;
}

static void gemms_close(gemms *g)
{
    free(g->a), free(g->b), free(g->c), free(g->da), free(g->db);
}

/* Median seconds of the three GEMMs. */
static double time_gemms(ladle_dtype dt, int64_t m, int64_t n, int64_t k)
{
    gemms g;
    gemms_open(&g, dt, m, n, k);
    double med = bench_median_of(gemms_once, &g, reps);
    gemms_close(&g);
    return med;
}

/* The reference of a row, timed in alternation with the layer: the GEMMs,
 * or memcpy of `bytes` (bytes > 0). */
typedef struct ref {
    gemms g;
    size_t bytes;
    char *src, *dst;
} ref;

/* A memcpy reference of half of `bytes` (a copy reads and writes them):
 * 1 if its buffers could not be had. */
static int ref_copy_open(ref *f, double bytes)
{
    *f = (ref){.bytes = (size_t)(bytes / 2)};
    f->src = malloc(f->bytes), f->dst = malloc(f->bytes);
    if (f->src == NULL || f->dst == NULL)
        return 1;
    memset(f->src, 1, f->bytes);
    memset(f->dst, 0, f->bytes);
    return 0;
}

static double ref_once(ref *f)
{
    if (f->bytes == 0)
        return gemms_once(&f->g);
    double t0 = bench_now();
    memcpy(f->dst, f->src, f->bytes);
    return bench_now() - t0;
}

/* once(arg) and its reference alternated repetition by repetition, so that
 * both see the same phases of the machine (whose speed drifts from one
 * second to the next): their medians in *tl and *tf, and the median of the
 * repetitions' own ratios tf / tl returned. */
static double time_pair(bench_once_fn once, void *arg, ref *f, double *tl, double *tf)
{
    double *t = calloc((size_t)(3 * reps), sizeof(double));
    for (int r = -2; r < reps; r++) {
        double a = once(arg), b = ref_once(f);
        if (r >= 0)
            t[r] = a, t[reps + r] = b, t[2 * reps + r] = b / a;
    }
    *tl = bench_median(t, reps);
    *tf = bench_median(t + reps, reps);
    double q = bench_median(t + 2 * reps, reps);
    free(t);
    return q;
}

/* time_pair of a layer's forward + backward + backward_weight */
static double time_layer_pair(ladle_op *op, ref *f, double *tl, double *tf)
{
    layer_run lr;
    layer_open(&lr, op);
    double q = time_pair(layer_once, &lr, f, tl, tf);
    bench_layer_close(&lr);
    return q;
}

/* A row of the GEMM and memcpy tables: the layer's and the reference's
 * milliseconds, the rates at which they do `work` (flops or bytes) in G/s,
 * and the ratio. */
static void print_row(const char *name, const char *shape, double tl, double tf, double work,
                      double ratio)
{
    printf("%-8s %-34s %9.3f %9.3f %8.2f %8.2f %6.2f\n", name, shape, tl * 1e3, tf * 1e3,
           work / tl * 1e-9, work / tf * 1e-9, ratio);
    fflush(stdout);
}

static void compute_row(const char *name, const char *shape, ladle_op *op, int64_t m,
                        int64_t n, int64_t k)
{
    if (!wanted(name))
        return;
    double flops = 3.0 * 2.0 * (double)m * (double)n * (double)k, tl, tg;
    ref f = {.bytes = 0};
    gemms_open(&f.g, ladle_op_dtype(op), m, n, k);
    double q = time_layer_pair(op, &f, &tl, &tg);
    gemms_close(&f.g);
    print_row(name, shape, tl, tg, flops, q);
}

/* Attention: the layer's forward + backward + backward_weight against
 * three GEMMs (as compute_row's) of the same flops, cubes of side s with
 * 6 s^3 = flops, the time scaled to the exact count. flops is what the
 * layer must do at the least: the projections' 3 x 2 GEMMs (24 N T E H d)
 * and the core's six T x T x d products per (sample, head), S, P V, dV,
 * dP, dQ, dK (12 N H T^2 d, half of it when causal). The layer does more:
 * its backward recomputes S and P (backward_weight reuses the backward's
 * dqkv here, called straight after it), and the core's products are double
 * GEMMs of tiles, at about half the f32 rate (f32 GEMMs in the rows marked
 * "f32 tiles", ladle_attention_desc's f32_tiles), so a ratio near 1 would
 * mean its kernels beat GEMM speed; what it shows is the cost of
 * recomputing, in double or in f32. */
static void attention_row(const char *shape, ladle_op *op, double flops)
{
    const char *name = "attn";
    if (!wanted(name))
        return;
    int64_t side = (int64_t)cbrt(flops / 6.0);
    double tl = time_layer(op), tg = time_gemms(ladle_op_dtype(op), side, side, side);
    tg *= flops / (6.0 * (double)side * (double)side * (double)side);
    print_row(name, shape, tl, tg, flops, tg / tl);
}

/* bytes: what forward + backward must move at the least */
static void memory_row(const char *name, const char *shape, ladle_op *op, double bytes)
{
    if (!wanted(name))
        return;
    double tl, tm;
    ref f;
    if (ref_copy_open(&f, bytes)) {
        fprintf(stderr, "bench_layers: out of memory\n");
        exit(1);
    }
    double q = time_layer_pair(op, &f, &tl, &tm);
    free(f.src), free(f.dst);
    print_row(name, shape, tl, tm, bytes, q);
}

/* A loss's tensors for timed forward + backward. */
typedef struct loss_run {
    ladle_op *op;
    ladle_tensor *x, *t, *out, *dl, *dx;
    ladle_ctx *ctx;
} loss_run;

/* a bench_once_fn on a loss_run */
static double loss_once(void *arg)
{
    loss_run *lr = arg;
    double t0 = bench_now();
    if (ladle_loss_forward(lr->op, lr->ctx, lr->x, lr->t, lr->out) != LADLE_OK ||
        ladle_loss_backward(lr->op, lr->ctx, lr->dl, lr->dx) != LADLE_OK)
        die("xent: ");
    return bench_now() - t0;
}

/* Cross entropy (mean) over n samples of c contiguous classes with labels
 * spread over the classes: forward + backward against memcpy of the bytes
 * they must move (the forward reads x; the backward reads x, writes dx),
 * alternated repetition by repetition as time_pair does. */
static void xent_row(const char *shape, int64_t n, int64_t c, ladle_dtype dt)
{
    const char *name = "xent";
    if (!wanted(name))
        return;
    int64_t xs[2] = {n, c};
    size_t es = dt == LADLE_F32 ? 4 : 8;
    double bytes = 3.0 * (double)(n * c) * (double)es;
    loss_run lr = {NULL};
    ladle_loss_desc ld;
    ladle_loss_desc_init(&ld, LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN);
    int64_t *labels = malloc(sizeof(int64_t) * (size_t)n);
    ref f;
    if (ref_copy_open(&f, bytes) || labels == NULL ||
        ladle_loss_create(&ld, 2, xs, dt, LADLE_CPU, &lr.op) != LADLE_OK ||
        ladle_tensor_create(dt, LADLE_CPU, 2, xs, &lr.x) != LADLE_OK ||
        ladle_tensor_create(dt, LADLE_CPU, 2, xs, &lr.dx) != LADLE_OK ||
        ladle_tensor_create(LADLE_I64, LADLE_CPU, 1, &n, &lr.t) != LADLE_OK ||
        ladle_tensor_create(dt, LADLE_CPU, 0, NULL, &lr.out) != LADLE_OK ||
        ladle_tensor_create(dt, LADLE_CPU, 0, NULL, &lr.dl) != LADLE_OK ||
        ladle_ctx_create(lr.op, &lr.ctx) != LADLE_OK)
        die("xent: ");
    for (int64_t i = 0; i < n; i++)
        labels[i] = (i * 7) % c;
    ladle_tensor_write(lr.t, labels);
    ladle_tensor_fill_random(lr.x, 1, 3);
    ladle_tensor_fill(lr.dl, 1.0);
    double tl, tf, q = time_pair(loss_once, &lr, &f, &tl, &tf);
    print_row(name, shape, tl, tf, bytes, q);
    free(labels), free(f.src), free(f.dst);
    ladle_ctx_destroy(&lr.ctx);
    ladle_tensor_destroy(&lr.x);
    ladle_tensor_destroy(&lr.dx);
    ladle_tensor_destroy(&lr.t);
    ladle_tensor_destroy(&lr.out);
    ladle_tensor_destroy(&lr.dl);
    ladle_op_destroy(&lr.op);
}

/* Linear: batch, in, out */
static void linear_table(ladle_dtype dt)
{
    static const int64_t lin[][3] = {
        {64, 400, 120}, {64, 120, 84}, {64, 84, 10}, {64, 1024, 1024}, {256, 4096, 1024}};
    for (size_t i = 0; i < sizeof lin / sizeof lin[0]; i++) {
        ladle_op *op = NULL;
        ladle_linear_desc d;
        bench_gemm_row l;
        bench_linear_row(lin[i], &d, &l);
        ladle_linear_create(&d, 2, l.xs, dt, LADLE_CPU, 1, &op);
        compute_row("linear", l.shape, op, l.m, l.n, l.k);
        ladle_op_destroy(&op);
    }
}

/* Conv2d: batch, cin, cout, size, kernel, pad */
static void conv_table(ladle_dtype dt)
{
    static const int64_t cv[][6] = {
        {64, 1, 6, 28, 5, 2},    {64, 6, 16, 14, 5, 0},   {32, 3, 16, 32, 3, 1},
        {32, 16, 16, 32, 3, 1},  {32, 32, 32, 16, 3, 1},  {32, 64, 64, 16, 3, 1},
        {32, 128, 128, 8, 3, 1}, {32, 256, 256, 4, 3, 1}, {64, 64, 64, 8, 1, 0},
    };
    for (size_t i = 0; i < sizeof cv / sizeof cv[0]; i++) {
        ladle_op *op = NULL;
        ladle_conv_desc d;
        bench_gemm_row c;
        bench_conv_row(cv[i], &d, &c);
        ladle_conv_create(&d, c.xs, dt, LADLE_CPU, 1, &op);
        compute_row("conv2d", c.shape, op, c.m, c.n, c.k);
        ladle_op_destroy(&op);
    }
}

/* One row of the direct convolutions: the layer of conv `c` (batch, cin,
 * cout, size, kernel, pad) made three times from one seed, with
 * LADLE_CONV_DIRECT unset (the widest vectors), "v3" (32-byte ones) and
 * "off" (the column path), run in alternation one repetition each. */
static void convdirect_row(const int64_t c[6], ladle_dtype dt)
{
    static const char *const cap[3] = {"", "v3", "off"};
    ladle_conv_desc d;
    bench_gemm_row cv;
    bench_conv_row(c, &d, &cv);
    layer_run lr[3];
    for (int k = 0; k < 3; k++) {
        ladle_op *op = NULL;
        setenv("LADLE_CONV_DIRECT", cap[k], 1);
        if (ladle_conv_create(&d, cv.xs, dt, LADLE_CPU, 1, &op) != LADLE_OK)
            die("");
        layer_open(&lr[k], op);
    }
    unsetenv("LADLE_CONV_DIRECT");
    double *t = calloc((size_t)(5 * reps), sizeof(double));
    for (int r = -2; r < reps; r++) {
        double e[3];
        for (int k = 0; k < 3; k++)
            e[k] = layer_once(&lr[k]);
        for (int k = 0; r >= 0 && k < 3; k++)
            t[k * reps + r] = e[k];
        if (r >= 0)
            t[3 * reps + r] = e[2] / e[0], t[4 * reps + r] = e[2] / e[1];
    }
    char sh[64];
    snprintf(sh, sizeof sh, "%lldx%lldx%lld^2 k%lld p%lld -> %lld", (long long)c[0],
             (long long)c[1], (long long)c[3], (long long)c[4], (long long)c[5],
             (long long)c[2]);
    printf("%-10s %-26s %9.3f %9.3f %9.3f %10.2f %10.2f\n", "convdirect", sh,
           bench_median(t, reps) * 1e3, bench_median(t + reps, reps) * 1e3,
           bench_median(t + 2 * reps, reps) * 1e3, bench_median(t + 3 * reps, reps),
           bench_median(t + 4 * reps, reps));
    fflush(stdout);
    free(t);
    for (int k = 0; k < 3; k++) {
        ladle_op *op = lr[k].op;
        bench_layer_close(&lr[k]);
        ladle_op_destroy(&op);
    }
}

/* The direct convolutions (src/backends/cpu/conv_direct.c: of few taps
 * along the rows, the first four; of small planes along the channels,
 * the next three and the last; the others, wider, which the plan leaves
 * to the GEMMs: about 1) at the widths LADLE_CONV_DIRECT leaves them,
 * against the column path (=off), the three layers made from one seed
 * and run in alternation, one repetition each: medians, and the
 * medians of the repetitions' ratios column / direct (above 1: the
 * direct path is faster). "widest" is what this CPU runs unasked
 * (64-byte vectors with AVX-512, 32 with AVX2 alone); "32 B" the
 * kernels an AVX2-only CPU runs. */
static void convdirect_table(ladle_dtype dt)
{
    static const int64_t dcv[][6] = {
        {64, 1, 6, 28, 5, 2},   {32, 3, 16, 32, 3, 1},   {32, 3, 64, 32, 3, 1},
        {64, 1, 16, 12, 3, 0},  {64, 6, 16, 14, 5, 0},   {32, 16, 16, 32, 3, 1},
        {32, 32, 32, 16, 3, 1}, {32, 64, 64, 16, 3, 1},  {32, 128, 128, 8, 3, 1},
        {32, 64, 64, 8, 3, 1},  {32, 256, 256, 4, 3, 1}, {32, 16, 16, 8, 5, 2}};
    if (!wanted("convdirect"))
        return;
    printf("\n%-10s %-26s %9s %9s %9s %10s %10s\n", "layer", "shape (fwd+bwd)", "widest_ms",
           "32B_ms", "column_ms", "col/widest", "col/32B");
    for (size_t i = 0; i < sizeof dcv / sizeof dcv[0]; i++)
        convdirect_row(dcv[i], dt);
    printf("\n");
}

/* Attention: N, T, E, H (d = E / H), causal */
static void attention_table(ladle_dtype dt)
{
    static const int64_t at[][5] = {{8, 128, 256, 4, 1},
                                    {2, 512, 256, 4, 1},
                                    {1, 2048, 128, 2, 1},
                                    {2, 512, 256, 4, 0}};
    /* each shape with the tiles in double, then (f32) with f32_tiles */
    for (size_t i = 0; i < 2 * sizeof at / sizeof at[0]; i++) {
        const int64_t *a = at[i / 2];
        int tiles = (int)(i % 2);
        if (tiles && dt != LADLE_F32)
            continue;
        ladle_attention_desc d;
        ladle_attention_desc_init(&d, a[2], a[3]);
        d.causal = (int)a[4];
        d.f32_tiles = tiles;
        int64_t xs[3] = {a[0], a[1], a[2]};
        ladle_op *op = NULL;
        char sh[64];
        if (ladle_attention_create(&d, 3, xs, dt, LADLE_CPU, 1, &op) != LADLE_OK)
            die("");
        double n = (double)a[0], t = (double)a[1], e = (double)a[2];
        double flops = 24 * n * t * e * e + 12 * n * t * t * e * (a[4] ? 0.5 : 1);
        snprintf(sh, sizeof sh, "%lldx%lldx%lld h%lld%s%s", (long long)a[0],
                 (long long)a[1], (long long)a[2], (long long)a[3], a[4] ? " causal" : "",
                 tiles ? ", f32 tiles" : "");
        attention_row(sh, op, flops);
        ladle_op_destroy(&op);
    }
}

/* The transformer's MLP block, linear E -> 4E, GELU, linear 4E -> E (a
 * sequential), against the GEMMs of its two linears' shapes (3 each,
 * as compute_row's): 48 N T E^2 flops in all; the GELU and the biases
 * are the block's own time on top. */
static void mlp_table(ladle_dtype dt)
{
    static const int64_t mlp[][3] = {{16, 128, 128}, {8, 128, 256}, {4, 256, 512}};
    for (size_t i = 0; i < sizeof mlp / sizeof mlp[0]; i++) {
        int64_t xs[3] = {mlp[i][0], mlp[i][1], mlp[i][2]}, e = mlp[i][2];
        int64_t hs[3] = {mlp[i][0], mlp[i][1], 4 * e};
        ladle_op *parts[3] = {NULL}, *op = NULL;
        ladle_linear_desc fc, proj;
        ladle_linear_desc_init(&fc, e, 4 * e);
        ladle_linear_desc_init(&proj, 4 * e, e);
        if (ladle_linear_create(&fc, 3, xs, dt, LADLE_CPU, 1, &parts[0]) != LADLE_OK ||
            ladle_activation_create(LADLE_GELU_TANH, 0, 3, hs, dt, LADLE_CPU, &parts[1]) !=
                LADLE_OK ||
            ladle_linear_create(&proj, 3, hs, dt, LADLE_CPU, 2, &parts[2]) != LADLE_OK ||
            ladle_sequential_create(3, parts, &op) != LADLE_OK)
            die("");
        char sh[64];
        snprintf(sh, sizeof sh, "%lldx%lldx%lld -> 4E -> E", (long long)mlp[i][0],
                 (long long)mlp[i][1], (long long)e);
        if (wanted("mlp")) {
            int64_t m = mlp[i][0] * mlp[i][1];
            double flops = 48.0 * (double)m * (double)(e * e), tl = time_layer(op);
            double tg = time_gemms(dt, m, 4 * e, e) + time_gemms(dt, m, e, 4 * e);
            print_row("mlp", sh, tl, tg, flops, tg / tl);
        }
        ladle_op_destroy(&op);
    }
}

/* the images of the memcpy tables (xb: their bytes) */
static const int64_t img[4] = {32, 64, 32, 32};

/* memory_row of `op`, then destroys it */
static void memory_row_of(const char *name, const char *shape, ladle_op *op, double bytes)
{
    memory_row(name, shape, op, bytes);
    ladle_op_destroy(&op);
}

static void pool_table(ladle_dtype dt, double xb)
{
    /* k2 s2 and k3 s2 p1: fwd reads x, writes y = x/4; bwd reads dy, writes
     * dx; stride 1: y and dx as large as x. bytes: in units of x's */
    static const struct {
        const char *name, *shape;
        ladle_pool_kind kind;
        int64_t kernel, stride, padding;
        double bytes;
    } pools[] = {{"maxpool", "32x64x32x32 k2 s2", LADLE_POOL_MAX, 2, 2, 0, 2.5},
                 {"maxpool", "32x64x32x32 k3 s2 p1", LADLE_POOL_MAX, 3, 2, 1, 2.5},
                 {"avgpool", "32x64x32x32 k2 s2", LADLE_POOL_AVG, 2, 2, 0, 2.5},
                 {"avgpool", "32x64x32x32 k3 s1 p1", LADLE_POOL_AVG, 3, 1, 1, 4}};
    ladle_op *op = NULL;
    for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++) {
        ladle_pool_desc d;
        ladle_pool_desc_init(&d, pools[i].kind, 2, pools[i].kernel);
        d.stride[0] = d.stride[1] = pools[i].stride;
        d.padding[0] = d.padding[1] = pools[i].padding;
        ladle_pool_create(&d, img, dt, LADLE_CPU, &op);
        memory_row_of(pools[i].name, pools[i].shape, op, pools[i].bytes * xb);
    }
    ladle_global_avg_pool_create(4, img, dt, LADLE_CPU, &op);
    memory_row_of("gavgpool", "32x64x32x32", op, 2 * xb); /* read x, write dx */
}

static void batchnorm_activation_table(ladle_dtype dt, double xb)
{
    ladle_batchnorm_desc d;
    ladle_op *op = NULL;
    ladle_batchnorm_desc_init(&d, 64);
    ladle_batchnorm_create(&d, 4, img, dt, LADLE_CPU, &op);
    /* fwd: read x twice (mean, variance), once more, write y; bwd: read x, dy
     * (sums), then x, dy again and write dx; weights: read x, dy */
    memory_row_of("batchnorm", "32x64x32x32 training", op, 12 * xb);
    ladle_activation_create(LADLE_RELU, 0, 4, img, dt, LADLE_CPU, &op);
    memory_row_of("relu", "32x64x32x32", op, 5 * xb); /* x->y; y, dy -> dx */
    ladle_activation_create(LADLE_GELU, 0, 4, img, dt, LADLE_CPU, &op);
    memory_row_of("gelu", "32x64x32x32", op, 5 * xb);
    /* the others: each backward reads one of x or y and dy, writes dx */
    static const struct {
        const char *name;
        ladle_activation kind;
    } acts[] = {{"leaky", LADLE_LEAKY_RELU},
                {"sigmoid", LADLE_SIGMOID},
                {"tanh", LADLE_TANH},
                {"gelutanh", LADLE_GELU_TANH}};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        ladle_activation_create(acts[i].kind, 0.01, 4, img, dt, LADLE_CPU, &op);
        memory_row_of(acts[i].name, "32x64x32x32", op, 5 * xb);
    }
}

/* the transformers' rowwise layers on 2048 rows of 1024 (as many bytes as
 * the images above): softmax reads x, writes y; its backward reads y and
 * dy, writes dx. The norms' backward (input and weight gradients) reads x
 * and dy once and writes dx. Dropout regenerates its mask from the seed:
 * x -> y, dy -> dx. */
static void rowwise_table(ladle_dtype dt, double xb)
{
    int64_t rows[2] = {2048, 1024};
    ladle_op *op = NULL;
    ladle_softmax_create(2, rows, -1, LADLE_SOFTMAX, dt, LADLE_CPU, &op);
    memory_row_of("softmax", "2048x1024 along rows", op, 5 * xb);
    ladle_layernorm_desc ln;
    ladle_layernorm_desc_init(&ln, 1);
    ladle_layernorm_create(&ln, 2, rows, dt, LADLE_CPU, &op);
    memory_row_of("layernorm", "2048x1024 along rows", op, 5 * xb);
    ladle_rmsnorm_desc rn;
    ladle_rmsnorm_desc_init(&rn, 1);
    ladle_rmsnorm_create(&rn, 2, rows, dt, LADLE_CPU, &op);
    memory_row_of("rmsnorm", "2048x1024 along rows", op, 5 * xb);
    ladle_dropout_create(2, rows, 0.1, dt, LADLE_CPU, 7, &op);
    memory_row_of("dropout", "2048x1024 p 0.1", op, 4 * xb);
    xent_row("2048x1024 classes", 2048, 1024, dt);
}

/* ladle_tensor_convert of src into dst */
typedef struct convert_run {
    ladle_tensor *src, *dst;
} convert_run;

static double convert_once(void *arg)
{
    convert_run *c = arg;
    double t0 = bench_now();
    if (ladle_tensor_convert(c->dst, c->src) != LADLE_OK)
        die("ladle_tensor_convert: ");
    return bench_now() - t0;
}

/* The conversions mixed precision runs between f32 and the 2-byte formats,
 * on x's 32x64x32x32 elements: bytes read and written against memcpy of as
 * many. The rows are conversions, not layers: no backward. */
static void convert_table(void)
{
    static const struct {
        ladle_dtype from, to;
        const char *shape;
    } rows[] = {{LADLE_F32, LADLE_BF16, "f32 -> bf16 32x64x32x32"},
                {LADLE_BF16, LADLE_F32, "bf16 -> f32 32x64x32x32"},
                {LADLE_F32, LADLE_F16, "f32 -> f16 32x64x32x32"},
                {LADLE_F16, LADLE_F32, "f16 -> f32 32x64x32x32"}};
    int64_t n = 32 * 64 * 32 * 32;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        convert_run c = {NULL, NULL};
        ref f;
        double bytes = (double)n * (double)(ladle_dtype_size(rows[i].from) +
                                            ladle_dtype_size(rows[i].to));
        if (ladle_tensor_create(rows[i].from, LADLE_CPU, 1, &n, &c.src) != LADLE_OK ||
            ladle_tensor_create(rows[i].to, LADLE_CPU, 1, &n, &c.dst) != LADLE_OK ||
            ladle_tensor_fill(c.src, 0.3) != LADLE_OK || ref_copy_open(&f, bytes))
            die("the conversions' tensors: ");
        double tl, tf, q = time_pair(convert_once, &c, &f, &tl, &tf);
        print_row("convert", rows[i].shape, tl, tf, bytes, q);
        free(f.src), free(f.dst);
        ladle_tensor_destroy(&c.src);
        ladle_tensor_destroy(&c.dst);
    }
}

/* The bf16 GEMM through the public API: a bf16 linear layer without bias,
 * whose forward is one gemm_half (the path the CPU picks: AVX-512 BF16
 * where it runs), against OpenBLAS sgemm of the same shape (x W^T, m rows
 * of k into n), interleaved rep by rep; ratio = sgemm ms / bf16 ms, the
 * median of the per-rep ratios. (The converting path is reached only by
 * the backend's internal entry point, which bench may not use.) With
 * --device cuda both sides are on the GPU: the bf16 layer's one
 * cublasGemmEx against the f32 layer's cublasSgemm (TF32 as the device is
 * set, off by default), each timed to a device synchronize. */
typedef struct gemm16_run {
    int64_t m, n, k;
    ladle_op *op;
    ladle_ctx *ctx;
    ladle_tensor *x, *y;
    float *fa, *fb, *fc;
    ladle_device dev;
    ladle_op *op32; /* the f32 layer on a device other than the CPU */
    ladle_ctx *ctx32;
    ladle_tensor *x32, *y32;
} gemm16_run;

static void forward_synced(ladle_device dev, ladle_op *op, ladle_ctx *ctx,
                           const ladle_tensor *x, ladle_tensor *y, const char *what)
{
    if (ladle_layer_forward(op, ctx, x, y) != LADLE_OK ||
        (dev != LADLE_CPU && ladle_device_synchronize(dev) != LADLE_OK))
        die(what);
}

static double gemm16_once(void *arg)
{
    gemm16_run *g = arg;
    double t0 = bench_now();
    forward_synced(g->dev, g->op, g->ctx, g->x, g->y, "bf16 linear forward: ");
    return bench_now() - t0;
}

static double sgemm_once(void *arg)
{
    gemm16_run *g = arg;
    double t0 = bench_now();
    if (g->dev != LADLE_CPU) {
        forward_synced(g->dev, g->op32, g->ctx32, g->x32, g->y32, "f32 linear forward: ");
        return bench_now() - t0;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)g->m, (int)g->n, (int)g->k, 1,
                g->fa, (int)g->k, g->fb, (int)g->k, 0, g->fc, (int)g->n);
    return bench_now() - t0;
}

static void gemm_bf16_table(ladle_device dev)
{
    static const struct {
        int64_t m, n, k;
        const char *what;
    } rows[] = {{8192, 1536, 384, "GPT mlp up 8192x1536x384"},
                {8192, 384, 1536, "GPT mlp down 8192x384x1536"},
                {8192, 384, 384, "GPT proj 8192x384x384"},
                {256, 120, 400, "LeNet fc1 256x120x400"}};
    printf("\n%-8s %-34s %9s %9s %8s %8s %6s\n", "gemm16", "shape m x n x k", "bf16_ms",
           "sgemm_ms", "bf16_GF", "sgemm_GF", "ratio");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        gemm16_run g;
        memset(&g, 0, sizeof g);
        g.m = rows[i].m, g.n = rows[i].n, g.k = rows[i].k, g.dev = dev;
        ladle_linear_desc d;
        ladle_linear_desc_init(&d, g.k, g.n);
        d.bias = 0;
        int64_t xs[2] = {g.m, g.k}, ys[2] = {g.m, g.n};
        if (ladle_linear_create(&d, 2, xs, LADLE_BF16, dev, 1, &g.op) != LADLE_OK ||
            ladle_ctx_create(g.op, &g.ctx) != LADLE_OK ||
            ladle_tensor_create(LADLE_BF16, dev, 2, xs, &g.x) != LADLE_OK ||
            ladle_tensor_create(LADLE_BF16, dev, 2, ys, &g.y) != LADLE_OK ||
            ladle_tensor_fill(g.x, 0.3) != LADLE_OK)
            die("the bf16 linear layer: ");
        if (dev != LADLE_CPU &&
            (ladle_linear_create(&d, 2, xs, LADLE_F32, dev, 1, &g.op32) != LADLE_OK ||
             ladle_ctx_create(g.op32, &g.ctx32) != LADLE_OK ||
             ladle_tensor_create(LADLE_F32, dev, 2, xs, &g.x32) != LADLE_OK ||
             ladle_tensor_create(LADLE_F32, dev, 2, ys, &g.y32) != LADLE_OK ||
             ladle_tensor_fill(g.x32, 0.3) != LADLE_OK))
            die("the f32 linear layer: ");
        size_t na = (size_t)(g.m * g.k), nb = (size_t)(g.k * g.n), nc = (size_t)(g.m * g.n);
        g.fa = malloc(na * 4), g.fb = malloc(nb * 4), g.fc = malloc(nc * 4);
        for (size_t e = 0; e < na; e++)
            g.fa[e] = 0.5f + (float)(e % 7) / 8;
        for (size_t e = 0; e < nb; e++)
            g.fb[e] = 0.25f + (float)(e % 5) / 8;
        double *t = calloc((size_t)(3 * reps), sizeof(double));
        for (int r = -2; r < reps; r++) {
            double a = gemm16_once(&g), b = sgemm_once(&g);
            if (r >= 0)
                t[r] = a, t[reps + r] = b, t[2 * reps + r] = b / a;
        }
        double tl = bench_median(t, reps), tf = bench_median(t + reps, reps);
        double q = bench_median(t + 2 * reps, reps), fl = 2.0 * (double)nc * (double)g.k;
        printf("%-8s %-34s %9.3f %9.3f %8.1f %8.1f %6.2f\n", "bf16", rows[i].what, tl * 1e3,
               tf * 1e3, fl / tl * 1e-9, fl / tf * 1e-9, q);
        free(t), free(g.fa), free(g.fb), free(g.fc);
        ladle_ctx_destroy(&g.ctx);
        ladle_tensor_destroy(&g.x);
        ladle_tensor_destroy(&g.y);
        ladle_op_destroy(&g.op);
        ladle_ctx_destroy(&g.ctx32);
        ladle_tensor_destroy(&g.x32);
        ladle_tensor_destroy(&g.y32);
        ladle_op_destroy(&g.op32);
    }
}

/* The header of the GEMM and memcpy tables, the columns of print_row. */
static void table_header(const char *ref_ms, const char *ladle_rate, const char *ref_rate)
{
    printf("%-8s %-34s %9s %9s %8s %8s %6s\n", "layer", "shape (fwd+bwd)", "ladle_ms", ref_ms,
           ladle_rate, ref_rate, "ratio");
}

int main(int argc, char **argv)
{
    int threads = 1;
    ladle_dtype dt = LADLE_F32;
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long long nthreads = threads, nreps = reps;
    const char *dtype = "f32", *device = "cpu";
    const bench_opt opts[] = {
        {"--threads", 1, 256, &nthreads, NULL, NULL, 0},
        {"--reps", 1, 1000, &nreps, NULL, NULL, 0},
        {"--only", 0, 0, NULL, &only,
         "linear,conv2d,convdirect,maxpool,avgpool,gavgpool,batchnorm,relu,gelu,leaky,"
         "sigmoid,"
         "tanh,gelutanh,softmax,layernorm,rmsnorm,dropout,xent,attn,mlp,convert,gemm_bf16",
         0},
        {"--dtype", 0, 0, NULL, &dtype, "f32,f64", 0},
        {"--device", 0, 0, NULL, &device, "cpu,cuda", 0},
    };
    if (bench_options("bench_layers", rank, argc, argv, opts,
                      sizeof opts / sizeof opts[0])) {
        MPI_Finalize();
        return 2;
    }
    threads = (int)nthreads, reps = (int)nreps;
    dt = strcmp(dtype, "f64") == 0 ? LADLE_F64 : LADLE_F32;
    ladle_set_num_threads(threads);
    double xb = (double)(32 * 64 * 32 * 32) * (double)(dt == LADLE_F32 ? 4 : 8);
    printf("# %s, %d BLAS thread(s), median of %d\n", ladle_dtype_name(dt), threads, reps);
    table_header("gemm_ms", "ladle_GF", "gemm_GF");
    linear_table(dt);
    conv_table(dt);
    convdirect_table(dt);
    attention_table(dt);
    mlp_table(dt);
    printf("\n");
    table_header("memcpy_ms", "ladle_GB", "memcpy_GB");
    pool_table(dt, xb);
    batchnorm_activation_table(dt, xb);
    rowwise_table(dt, xb);
    if (wanted("convert"))
        convert_table();
    if (wanted("gemm_bf16"))
        gemm_bf16_table(strcmp(device, "cuda") == 0 ? LADLE_CUDA : LADLE_CPU);
    MPI_Finalize();
    return 0;
}
