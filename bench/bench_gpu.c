/*
 * bench_gpu: the CUDA backend on one GPU against what bounds it, measured in
 * one run as medians of repeated timings. A sample is the work followed by
 * ladle_device_synchronize, on a steady clock, after warm-up calls; short
 * work is repeated within a sample so that each lasts about 2 ms.
 *
 *  - gemm: Linear and Conv2d forward + backward (input and weight
 *    gradients) at LeNet-5's shapes (batch 256) and ResNet's 3x3
 *    convolutions (batch 32), against cuBLAS called directly (one
 *    cublasSgemm each) on the layer's three products over the whole batch:
 *      linear, x[B, in] -> y[B, out]:   y = x W^T       m B     n out  k in
 *                                       dx = dy W       m B     n in   k out
 *                                       dW += dy^T x    m out   n in   k B
 *      conv, K = cin kh kw rows and N = B oh ow columns of im2col:
 *                                       y = W col       m cout  n N    k K
 *                                       dcol = W^T dy   m K     n N    k cout
 *                                       dW += dy col^T  m cout  n K    k N
 *    The layer runs the same products (in groups of images for a
 *    convolution) plus im2col, col2im and the bias. ratio = GEMM time /
 *    layer time; target >= 0.7.
 *  - memory: batch norm, ReLU, GELU, max and average pooling and global
 *    average pooling (forward + backward), and ladle_concat and its split
 *    along channels, rows and columns (the box copies of a halo exchange),
 *    against one device-to-device cudaMemcpyAsync moving as
 *    many bytes, read plus written, as the layer's kernels must (each row
 *    says how many). ratio = copy time / layer time; target >= 0.6.
 *  - prim (2 or more ranks, all on the one GPU): the primitives' forward
 *    and adjoint on CUDA tensors against the same op on CPU tensors, and
 *    the staging estimate: a device-to-host and a host-to-device copy of
 *    the bytes a rank sends, through pinned memory, timed alone, as a share
 *    of the CUDA call (an MPI that is not CUDA-aware reads host memory, so
 *    every message is staged). No target.
 *  - lenet: a LeNet-5 training step (zero_grad, forward, loss, backward,
 *    SGD with momentum) at batch 256 on the GPU, with and without batch
 *    norm, and on the CPU; with --torch FILE (bench/torch_lenet_gpu.py's
 *    lines) PyTorch's time for the same step on the same GPU and the ratio
 *    torch / ladle; target >= 1.0.
 *
 * The last table sums up every ratio against its target. A row whose
 * kernels the backend does not have yet prints "n/a" with the reason; the
 * exit status is then 3, 1 after any other failure, 0 when every row was
 * measured. The baselines call cuBLAS and the CUDA runtime directly
 * (bench/gpu_raw.cu, on a stream of their own); the rest goes through
 * ladle's public API only. --quick runs tiny shapes (timings meaningless).
 *
 *   mpiexec -n 1 bench_gpu [--quick] [--reps R] [--only gemm|memory|lenet]
 *                          [--tf32] [--torch FILE]
 *   mpiexec -n 2 bench_gpu [--quick] [--reps R]        (the primitives)
 */
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ladle.h"

#include "common.h"
#include "gpu_raw.h"
#include "shapes.h"

/* On failure: st set, to the cleanup at fail. */
#define CALL(expr)                                                                         \
    do {                                                                                   \
        st = (expr);                                                                       \
        if (st != LADLE_OK)                                                                \
            goto fail;                                                                     \
    } while (0)
#define CHECK_ALLOC(p, what)                                                               \
    do {                                                                                   \
        if ((p) == NULL) {                                                                 \
            st = raw_failed(LADLE_ERR_ALLOC, "no memory for " what);                       \
            goto fail;                                                                     \
        }                                                                                  \
    } while (0)

static int me, world, reps = 15, quick, any_na, any_fail;
static double sample_s = 2e-3;
static const char *only, *torch_file;
static gpu_raw *raw;      /* the raw baselines' stream and cuBLAS handle */
static char raw_why[256]; /* the last failure outside ladle, or "" */

/* A failure outside ladle (the baselines, the bench's own memory): its
 * message for reason(), and st. */
static ladle_status raw_failed(ladle_status st, const char *why)
{
    snprintf(raw_why, sizeof raw_why, "%s", why);
    return st;
}

/* A raw call's result as a status. */
static ladle_status raw_status(int rc)
{
    return rc == 0 ? LADLE_OK : raw_failed(LADLE_ERR_DEVICE, gpu_raw_error(raw));
}

/* ---- the summary table ---- */

typedef struct verdict {
    char group[8], row[96];
    double ratio, target; /* ratio NAN: not measured; target 0: none */
    char note[64];
} verdict;

static verdict verdicts[192];
static int nverdicts;

static void record(const char *group, const char *row, double ratio, double target,
                   const char *note)
{
    if (nverdicts == (int)(sizeof verdicts / sizeof verdicts[0]))
        return;
    verdict *v = &verdicts[nverdicts++];
    snprintf(v->group, sizeof v->group, "%s", group);
    snprintf(v->row, sizeof v->row, "%s", row);
    v->ratio = ratio;
    v->target = target;
    snprintf(v->note, sizeof v->note, "%.63s", note ? note : ""); /* cut */
}

/* A row that could not be measured: its reason, printed as a comment so
 * that bench/summarize.awk skips it, and counted for the exit status. */
static void not_measured(const char *group, const char *name, const char *shape,
                         ladle_status st, const char *why)
{
    char row[96];
    if (st == LADLE_ERR_UNSUPPORTED)
        any_na = 1;
    else
        any_fail = 1;
    snprintf(row, sizeof row, "%s %s", name, shape);
    if (me == 0) {
        printf("# n/a    %-8s %-34s %s (%s)\n", name, shape, why, ladle_status_name(st));
        fflush(stdout);
    }
    record(group, row, NAN, 0, st == LADLE_ERR_UNSUPPORTED ? "n/a: not yet on cuda" : why);
}

/* ---- timing ---- */

/* Wait for a request, yielding the core (the ranks may outnumber them). */
static void wait_politely(MPI_Request *r)
{
    int done = 0;
    while (!done) {
        MPI_Test(r, &done, MPI_STATUS_IGNORE);
        if (!done)
            sched_yield();
    }
}

static void barrier(void)
{
    MPI_Request r;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    wait_politely(&r);
}

/* The slowest rank's time, and the verdict of every rank: the worst status,
 * LADLE_ERR_UNSUPPORTED when any rank lacked a kernel. */
static double slowest(double t, ladle_status *st)
{
    double v[3] = {t, (double)*st, *st == LADLE_ERR_UNSUPPORTED}, w[3];
    MPI_Request r;
    MPI_Iallreduce(v, w, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &r);
    wait_politely(&r);
    *st = w[2] > 0 ? LADLE_ERR_UNSUPPORTED : (ladle_status)w[1];
    return w[0];
}

typedef ladle_status (*work_fn)(void *arg);

/* Where work runs, for the wait that ends a sample: ladle's CPU or CUDA
 * device, or the raw baselines' stream. */
typedef enum where { ON_CPU, ON_CUDA, ON_RAW } where;

static ladle_status run(work_fn fn, void *arg, where on, int n)
{
    for (int i = 0; i < n; i++) {
        ladle_status st = fn(arg);
        if (st != LADLE_OK)
            return st;
    }
    if (on == ON_RAW)
        return raw_status(gpu_raw_sync(raw));
    return ladle_device_synchronize(on == ON_CUDA ? LADLE_CUDA : LADLE_CPU);
}

/* Median seconds of one call of fn on `on` (the slowest rank's) into *sec,
 * after two warm-up calls; collective. A failure on any rank stops every
 * rank and is returned (the failing rank keeps its message). */
static ladle_status timed(work_fn fn, void *arg, where on, double *sec)
{
    ladle_status st = LADLE_OK;
    double *t = calloc((size_t)reps, sizeof *t), e = 0;
    int inner = 1;
    for (int w = 0; w < 2 && st == LADLE_OK; w++) {
        barrier();
        double t0 = bench_now();
        st = run(fn, arg, on, 1);
        e = slowest(bench_now() - t0, &st);
    }
    /* the same e on every rank, so the same inner */
    if (e > 0 && e < sample_s)
        inner = (int)fmin(64, ceil(sample_s / e));
    for (int r = 0; r < reps && st == LADLE_OK; r++) {
        barrier();
        double t0 = bench_now();
        st = run(fn, arg, on, inner);
        t[r] = slowest(bench_now() - t0, &st) / inner;
    }
    if (st == LADLE_OK)
        *sec = bench_median(t, reps);
    free(t);
    return st;
}

/* What failed, for a row: this rank's message, or that another rank's call
 * failed. */
static const char *reason(void)
{
    const char *m = raw_why[0] ? raw_why : ladle_error_message();
    return m[0] ? m : "failed on another rank";
}

/* Forget the last failure, ladle's and the raw baselines'. */
static void clear_error(void)
{
    raw_why[0] = 0;
    ladle_error_clear();
}

/* ---- data ---- */

static uint64_t rng = 88172645463325252ull;

static float uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) * 0x1.0p-52 - 1.0);
}

/* A tensor of dev with uniform values in [-1, 1), written from the host
 * (this needs only the backend's copies, none of its kernels). */
static ladle_status random_tensor(ladle_device dev, int nd, const int64_t *shape,
                                  ladle_tensor **t)
{
    ladle_status st = LADLE_OK;
    float *h = NULL;
    CALL(ladle_tensor_create(LADLE_F32, dev, nd, shape, t));
    int64_t n = ladle_tensor_numel(*t);
    h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
    CHECK_ALLOC(h, "a tensor's values");
    for (int64_t i = 0; i < n; i++)
        h[i] = uniform();
    CALL(ladle_tensor_write(*t, h));
fail:
    free(h);
    if (st != LADLE_OK)
        ladle_tensor_destroy(t);
    return st;
}

/* n floats of device memory, random, for the raw baselines. */
static ladle_status device_random(int64_t n, void **p)
{
    ladle_status st = LADLE_OK;
    float *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
    *p = NULL;
    CHECK_ALLOC(h, "a staging buffer");
    for (int64_t i = 0; i < n; i++)
        h[i] = uniform();
    CALL(raw_status(gpu_raw_alloc(raw, (size_t)n * sizeof(float), h, p)));
fail:
    free(h);
    return st;
}

static void device_free(void **p, int n)
{
    for (int i = 0; i < n; i++) {
        gpu_raw_free(raw, p[i]);
        p[i] = NULL;
    }
}

/* ---- layers ---- */

typedef struct layer_work {
    ladle_op *op;
    ladle_ctx *ctx;
    ladle_tensor *x, *y, *dy, *dx;
} layer_work;

static ladle_status layer_step(void *arg)
{
    layer_work *w = arg;
    ladle_status st = ladle_layer_forward(w->op, w->ctx, w->x, w->y);
    if (st == LADLE_OK)
        st = ladle_layer_backward(w->op, w->ctx, w->dy, w->dx);
    if (st == LADLE_OK)
        st = ladle_layer_backward_weight(w->op, w->ctx, w->dy);
    return st;
}

/* Median seconds of forward + backward + weight gradient of op. */
static ladle_status time_layer(ladle_op *op, double *sec)
{
    ladle_status st = LADLE_OK;
    layer_work w = {op, NULL, NULL, NULL, NULL, NULL};
    int nx, ny;
    int64_t xs[LADLE_MAX_NDIM], ys[LADLE_MAX_NDIM];
    ladle_op_x_shape(op, &nx, xs);
    ladle_op_y_shape(op, &ny, ys);
    CALL(random_tensor(LADLE_CUDA, nx, xs, &w.x));
    CALL(random_tensor(LADLE_CUDA, ny, ys, &w.dy));
    CALL(ladle_tensor_create(LADLE_F32, LADLE_CUDA, ny, ys, &w.y));
    CALL(ladle_tensor_create(LADLE_F32, LADLE_CUDA, nx, xs, &w.dx));
    CALL(ladle_ctx_create(op, &w.ctx));
    CALL(timed(layer_step, &w, ON_CUDA, sec));
fail:
    ladle_ctx_destroy(&w.ctx);
    ladle_tensor_destroy(&w.x);
    ladle_tensor_destroy(&w.y);
    ladle_tensor_destroy(&w.dy);
    ladle_tensor_destroy(&w.dx);
    return st;
}

/* ---- the GEMM baseline ---- */

typedef struct product {
    int ta, tb;
    int64_t m, n, k;
    const void *a;
    int64_t lda;
    const void *b;
    int64_t ldb;
    double beta;
    void *c;
    int64_t ldc;
} product;

typedef struct gemm_work {
    product p[3];
    void *buf[5];
} gemm_work;

static ladle_status gemm_step(void *arg)
{
    gemm_work *w = arg;
    for (int i = 0; i < 3; i++) {
        const product *p = &w->p[i];
        int rc = gpu_raw_sgemm(raw, p->ta, p->tb, p->m, p->n, p->k, p->a, p->lda, p->b,
                               p->ldb, (float)p->beta, p->c, p->ldc);
        if (rc != 0)
            return raw_status(rc);
    }
    return LADLE_OK;
}

/* The five device buffers of a layer's products, n[i] random floats each. */
static ladle_status gemm_buffers(gemm_work *w, const int64_t n[5])
{
    ladle_status st = LADLE_OK;
    for (int i = 0; i < 5; i++)
        CALL(device_random(n[i], &w->buf[i]));
fail:
    return st;
}

/* A linear layer's products, x[B, in] -> y[B, out] (see the header): the
 * buffers are x, W, y (also dy), dx, dW. */
static ladle_status linear_products(gemm_work *w, int64_t b, int64_t in, int64_t out)
{
    ladle_status st = LADLE_OK;
    int64_t n[5] = {b * in, out * in, b * out, b * in, out * in};
    CALL(gemm_buffers(w, n));
    void *x = w->buf[0], *wt = w->buf[1], *y = w->buf[2], *dx = w->buf[3], *dw = w->buf[4];
    w->p[0] = (product){0, 1, b, out, in, x, in, wt, in, 0.0, y, out};
    w->p[1] = (product){0, 0, b, in, out, y, out, wt, in, 0.0, dx, in};
    w->p[2] = (product){1, 0, out, in, b, y, out, x, in, 1.0, dw, in};
fail:
    return st;
}

/* A convolution's products on the whole batch's columns, K rows and N
 * columns: the buffers are W, col, y (also dy), dcol, dW. */
static ladle_status conv_products(gemm_work *w, int64_t cout, int64_t k, int64_t n)
{
    ladle_status st = LADLE_OK;
    int64_t e[5] = {cout * k, k * n, cout * n, k * n, cout * k};
    CALL(gemm_buffers(w, e));
    void *wt = w->buf[0], *col = w->buf[1], *y = w->buf[2], *dcol = w->buf[3],
         *dw = w->buf[4];
    w->p[0] = (product){0, 0, cout, n, k, wt, k, col, n, 0.0, y, n};
    w->p[1] = (product){1, 0, k, n, cout, wt, k, y, n, 0.0, dcol, n};
    w->p[2] = (product){0, 1, cout, k, n, y, n, col, n, 1.0, dw, k};
fail:
    return st;
}

/* One gemm row: the layer (made by the caller, NULL when that failed with
 * st0) against its products; flops = 3 x 2 m n k. */
static void gemm_row(const char *name, const char *shape, ladle_op *op, ladle_status st0,
                     int conv, int64_t m, int64_t n, int64_t k)
{
    ladle_status st = st0;
    double tl = 0, tg = 0, flops = 6.0 * (double)m * (double)n * (double)k;
    gemm_work w;
    memset(&w, 0, sizeof w);
    if (st == LADLE_OK)
        st = time_layer(op, &tl);
    if (st == LADLE_OK)
        st = conv ? conv_products(&w, m, k, n) : linear_products(&w, m, k, n);
    if (st == LADLE_OK)
        st = timed(gemm_step, &w, ON_RAW, &tg);
    device_free(w.buf, 5);
    ladle_op_destroy(&op);
    if (st != LADLE_OK) {
        not_measured("gemm", name, shape, st, reason());
        clear_error();
        return;
    }
    printf("%-8s %-34s %9.3f %9.3f %8.1f %8.1f %6.2f\n", name, shape, tl * 1e3, tg * 1e3,
           flops / tl * 1e-9, flops / tg * 1e-9, tg / tl);
    fflush(stdout);
    char row[96];
    snprintf(row, sizeof row, "%s %s", name, shape);
    record("gemm", row, tg / tl, 0.7, "");
}

static void linear_rows(void)
{
    /* LeNet-5's three at batch 256, then two wide ones */
    static const int64_t full[][3] = {{256, 400, 120},
                                      {256, 120, 84},
                                      {256, 84, 10},
                                      {256, 1024, 1024},
                                      {256, 4096, 1024}};
    static const int64_t tiny[][3] = {{8, 40, 12}, {8, 12, 10}};
    const int64_t(*sh)[3] = quick ? tiny : full;
    int rows = quick ? 2 : 5;
    for (int i = 0; i < rows; i++) {
        ladle_op *op = NULL;
        ladle_linear_desc d;
        bench_gemm_row l;
        bench_linear_row(sh[i], &d, &l);
        ladle_status st = ladle_linear_create(&d, 2, l.xs, LADLE_F32, LADLE_CUDA, 1, &op);
        gemm_row("linear", l.shape, op, st, 0, l.m, l.n, l.k);
    }
}

static void conv_rows(void)
{
    /* batch, cin, cout, size, kernel, padding: LeNet-5's two at batch 256,
     * then ResNet's 3x3 stages at batch 32, and a bottleneck block's 1x1
     * expansion */
    static const int64_t full[][6] = {{256, 1, 6, 28, 5, 2},    {256, 6, 16, 14, 5, 0},
                                      {32, 64, 64, 56, 3, 1},   {32, 128, 128, 28, 3, 1},
                                      {32, 256, 256, 14, 3, 1}, {32, 512, 512, 7, 3, 1},
                                      {32, 256, 1024, 14, 1, 0}};
    static const int64_t tiny[][6] = {{2, 1, 4, 12, 5, 2}, {2, 4, 6, 6, 3, 1}};
    const int64_t(*cv)[6] = quick ? tiny : full;
    int rows = quick ? 2 : 7;
    for (int i = 0; i < rows; i++) {
        ladle_op *op = NULL;
        ladle_conv_desc d;
        bench_gemm_row c;
        bench_conv_row(cv[i], &d, &c);
        ladle_status st = ladle_conv_create(&d, c.xs, LADLE_F32, LADLE_CUDA, 1, &op);
        gemm_row("conv2d", c.shape, op, st, 1, c.m, c.n, c.k);
    }
}

/* ---- the copy baseline ---- */

typedef struct copy_work {
    int64_t n;
    void *buf[2];
} copy_work;

static ladle_status copy_step(void *arg)
{
    copy_work *w = arg;
    return raw_status(
        gpu_raw_copy(raw, w->buf[1], w->buf[0], (size_t)w->n * sizeof(float)));
}

/* Median seconds of a device-to-device copy moving `bytes` (read + write). */
static ladle_status time_copy(double bytes, double *sec)
{
    ladle_status st = LADLE_OK;
    copy_work w = {(int64_t)(bytes / 2 / sizeof(float)), {NULL, NULL}};
    CALL(device_random(w.n, &w.buf[0]));
    CALL(device_random(w.n, &w.buf[1]));
    CALL(timed(copy_step, &w, ON_RAW, sec));
fail:
    device_free(w.buf, 2);
    return st;
}

static void memory_print(const char *name, const char *shape, double tl, double tm,
                         double bytes)
{
    printf("%-8s %-34s %9.3f %9.3f %8.1f %8.1f %6.2f\n", name, shape, tl * 1e3, tm * 1e3,
           bytes / tl * 1e-9, bytes / tm * 1e-9, tm / tl);
    fflush(stdout);
    char row[96];
    snprintf(row, sizeof row, "%s %s", name, shape);
    record("memory", row, tm / tl, 0.6, "");
}

/* One memory row: a layer (made by the caller; st0 its creation's status)
 * whose forward + backward must move `bytes`. */
static void memory_row(const char *name, const char *shape, ladle_op *op, ladle_status st0,
                       double bytes)
{
    double tl = 0, tm = 0;
    ladle_status st = st0;
    if (st == LADLE_OK)
        st = time_layer(op, &tl);
    if (st == LADLE_OK)
        st = time_copy(bytes, &tm);
    ladle_op_destroy(&op);
    if (st != LADLE_OK) {
        not_measured("memory", name, shape, st, reason());
        clear_error();
        return;
    }
    memory_print(name, shape, tl, tm, bytes);
}

static void pool_rows(const int64_t *img, double xb)
{
    ladle_pool_desc d;
    ladle_op *op = NULL;
    ladle_status st;
    /* k2 s2 and k3 s2 p1: forward reads x, writes y = x/4; backward reads
     * dy, writes dx (the saved winners not counted) */
    ladle_pool_desc_init(&d, LADLE_POOL_MAX, 2, 2);
    st = ladle_pool_create(&d, img, LADLE_F32, LADLE_CUDA, &op);
    memory_row("maxpool", "k2 s2, 2.5 x", op, st, 2.5 * xb);
    ladle_pool_desc_init(&d, LADLE_POOL_MAX, 2, 3);
    d.stride[0] = d.stride[1] = 2;
    d.padding[0] = d.padding[1] = 1;
    st = ladle_pool_create(&d, img, LADLE_F32, LADLE_CUDA, &op);
    memory_row("maxpool", "k3 s2 p1, 2.5 x", op, st, 2.5 * xb);
    ladle_pool_desc_init(&d, LADLE_POOL_AVG, 2, 2);
    st = ladle_pool_create(&d, img, LADLE_F32, LADLE_CUDA, &op);
    memory_row("avgpool", "k2 s2, 2.5 x", op, st, 2.5 * xb);
    /* stride 1: y and dx as large as x */
    ladle_pool_desc_init(&d, LADLE_POOL_AVG, 2, 3);
    d.stride[0] = d.stride[1] = 1;
    d.padding[0] = d.padding[1] = 1;
    st = ladle_pool_create(&d, img, LADLE_F32, LADLE_CUDA, &op);
    memory_row("avgpool", "k3 s1 p1, 4 x", op, st, 4 * xb);
    st = ladle_global_avg_pool_create(4, img, LADLE_F32, LADLE_CUDA, &op);
    memory_row("gavgpool", "read x, write dx: 2 x", op, st, 2 * xb);
}

static void norm_act_rows(const int64_t *img, double xb)
{
    ladle_op *op = NULL;
    ladle_batchnorm_desc d;
    ladle_batchnorm_desc_init(&d, img[1]);
    ladle_status st = ladle_batchnorm_create(&d, 4, img, LADLE_F32, LADLE_CUDA, &op);
    /* forward: the mean and the variance read x, the affine reads x and
     * writes y (4); backward: the sums read x and dy, the affine reads dy
     * and x and writes dx (5); the weight gradient reuses the sums */
    memory_row("batchnorm", "training, 9 x", op, st, 9 * xb);
    st = ladle_activation_create(LADLE_RELU, 0, 4, img, LADLE_F32, LADLE_CUDA, &op);
    memory_row("relu", "x->y; y, dy->dx: 5 x", op, st, 5 * xb);
    st = ladle_activation_create(LADLE_GELU, 0, 4, img, LADLE_F32, LADLE_CUDA, &op);
    memory_row("gelu", "x->y; x, y, dy->dx: 6 x", op, st, 6 * xb);
}

/* ---- concatenation: the box copies ---- */

typedef struct cat_work {
    int split, dim;
    ladle_tensor *part[2], *whole;
} cat_work;

static ladle_status cat_step(void *arg)
{
    cat_work *w = arg;
    if (w->split)
        return ladle_concat_backward(w->whole, w->dim, 2, w->part);
    return ladle_concat(2, (const ladle_tensor *const *)w->part, w->dim, w->whole);
}

/* ladle_concat (split: its backward) of two parts along dim, the first
 * `first` wide, into a tensor of extents img, against a copy of as many
 * bytes (every element read once and written once). */
static void cat_row(const int64_t *img, int dim, int64_t first, int split, const char *what)
{
    ladle_status st = LADLE_OK;
    cat_work w = {split, dim, {NULL, NULL}, NULL};
    int64_t ext[2][4];
    double tc = 0, tm = 0,
           bytes = 2.0 * sizeof(float) * (double)(img[0] * img[1] * img[2] * img[3]);
    char s[64];
    for (int k = 0; k < 2; k++) {
        memcpy(ext[k], img, sizeof ext[k]);
        ext[k][dim] = k == 0 ? first : img[dim] - first;
        CALL(random_tensor(LADLE_CUDA, 4, ext[k], &w.part[k]));
    }
    CALL(random_tensor(LADLE_CUDA, 4, img, &w.whole));
    CALL(timed(cat_step, &w, ON_CUDA, &tc));
    CALL(time_copy(bytes, &tm));
fail:
    snprintf(s, sizeof s, "%s + the rest, dim %d, 2 x", what, dim);
    for (int k = 0; k < 2; k++)
        ladle_tensor_destroy(&w.part[k]);
    ladle_tensor_destroy(&w.whole);
    if (st != LADLE_OK) {
        not_measured("memory", split ? "split" : "concat", s, st, reason());
        clear_error();
        return;
    }
    memory_print(split ? "split" : "concat", s, tc, tm, bytes);
}

/* The boxes a halo exchange packs and unpacks, as ladle_concat copies
 * them: a block of channels (contiguous runs per sample), one row (a run
 * per channel), one column (one element per row: the strided case). */
static void cat_rows(const int64_t *img)
{
    static const char *what[3] = {"half the channels", "a row", "a column"};
    int64_t first[3] = {img[1] / 2, 1, 1};
    for (int e = 0; e < 3; e++)
        for (int u = 0; u < 2; u++)
            cat_row(img, e + 1, first[e], u, what[e]);
}

static void memory_rows(void)
{
    /* ResNet's first stage at batch 32: 25.7 MB a tensor in f32, x, y, dy
     * and dx together above the H200's 60 MB of L2 */
    int64_t img[4] = {32, 64, 56, 56};
    if (quick)
        img[0] = 2, img[1] = 4, img[2] = img[3] = 8;
    double xb = (double)(img[0] * img[1] * img[2] * img[3]) * sizeof(float);
    if (me == 0)
        printf(
            "\n# %lldx%lldx%lldx%lld f32; bytes in units of x\n%-8s %-34s %9s %9s %8s %8s "
            "%6s\n",
            (long long)img[0], (long long)img[1], (long long)img[2], (long long)img[3],
            "layer", "shape (fwd+bwd), bytes moved", "ladle_ms", "copy_ms", "ladle_GB",
            "copy_GB", "ratio");
    norm_act_rows(img, xb);
    pool_rows(img, xb);
    cat_rows(img);
}

/* ---- LeNet-5 training steps ---- */

typedef struct step_work {
    ladle_network *net;
    ladle_optimizer *opt;
    ladle_tensor *x, *labels;
} step_work;

static ladle_status lenet_step(void *arg)
{
    step_work *w = arg;
    double loss;
    ladle_status st = ladle_network_zero_grad(w->net);
    if (st == LADLE_OK)
        st = ladle_network_forward(w->net, w->x, NULL);
    if (st == LADLE_OK)
        st = ladle_network_loss(w->net, w->labels, &loss);
    if (st == LADLE_OK)
        st = ladle_network_backward(w->net, 1);
    if (st == LADLE_OK)
        st = ladle_optimizer_step(w->opt);
    return st;
}

/* Median seconds of a training step of the sequential LeNet-5 on dev. */
static ladle_status time_lenet(ladle_device dev, int64_t batch, int bn, double *sec)
{
    ladle_status st = LADLE_OK;
    step_work w = {NULL, NULL, NULL, NULL};
    ladle_lenet_desc d;
    ladle_optimizer_desc od;
    int64_t *lab = malloc((size_t)batch * sizeof *lab), xs[4] = {batch, 1, 28, 28};
    CHECK_ALLOC(lab, "labels");
    ladle_lenet_desc_init(&d);
    d.batch = batch;
    d.sequential = 1;
    d.batchnorm = bn;
    d.device = dev;
    CALL(ladle_lenet_create(&d, ladle_comm_of(MPI_COMM_SELF), &w.net));
    ladle_optimizer_desc_init(&od, LADLE_OPT_SGD, 0.01);
    od.momentum = 0.9;
    CALL(ladle_optimizer_create(&od, &w.opt));
    CALL(ladle_optimizer_add_network(w.opt, w.net));
    CALL(random_tensor(dev, 4, xs, &w.x));
    for (int64_t i = 0; i < batch; i++)
        lab[i] = i % 10;
    CALL(ladle_tensor_create(LADLE_I64, dev, 1, &batch, &w.labels));
    CALL(ladle_tensor_write(w.labels, lab));
    CALL(timed(lenet_step, &w, dev == LADLE_CUDA ? ON_CUDA : ON_CPU, sec));
fail:
    free(lab);
    ladle_tensor_destroy(&w.x);
    ladle_tensor_destroy(&w.labels);
    ladle_optimizer_destroy(&w.opt);
    ladle_network_destroy(&w.net);
    return st;
}

/* PyTorch's ms per step for (batch, bn) from --torch's file, or NAN. */
static double torch_ms(int64_t batch, int bn)
{
    FILE *f = torch_file ? fopen(torch_file, "r") : NULL;
    char line[256];
    double ms = NAN;
    while (f && fgets(line, sizeof line, f)) {
        int b;
        long long n;
        double v;
        if (sscanf(line, "torch-lenet bn=%d batch=%lld ms=%lf", &b, &n, &v) == 3 &&
            b == bn && n == batch)
            ms = v;
    }
    if (f)
        fclose(f);
    return ms;
}

static void lenet_rows(void)
{
    int64_t batch = quick ? 8 : 256;
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (me == 0)
        printf("\n%-10s %-34s %9s %9s %7s %7s\n", "row", "network (sequential, f32)",
               "ms/step", "images/s", "vs", "ref_ms");
    for (int bn = 0; bn < 2; bn++) {
        char s[64], row[96], note[64];
        double tg = 0, tc = 0, tt = torch_ms(batch, bn);
        snprintf(s, sizeof s, "cuda, batch %lld%s", (long long)batch, bn ? ", bn" : "");
        ladle_status st = time_lenet(LADLE_CUDA, batch, bn, &tg);
        if (st != LADLE_OK) {
            not_measured("train", "lenet", s, st, reason());
            clear_error();
            continue;
        }
        /* the CPU's step with every core, for scale */
        ladle_set_num_threads(threads);
        ladle_status sc = time_lenet(LADLE_CPU, batch, bn, &tc);
        ladle_set_num_threads(1);
        if (sc != LADLE_OK)
            tc = NAN, clear_error();
        /* vs: torch / ladle when PyTorch's time is known */
        char vs[16] = "-", ref[16] = "-";
        if (!isnan(tt)) {
            snprintf(vs, sizeof vs, "%.2f", tt / (tg * 1e3));
            snprintf(ref, sizeof ref, "%.3f", tt);
        }
        printf("lenet      %-34s %9.3f %9.0f %7s %7s\n", s, tg * 1e3, (double)batch / tg,
               vs, ref);
        printf("#          the CPU, %d threads: %.3f ms/step (cpu / gpu %.2f)\n", threads,
               tc * 1e3, tc / tg);
        fflush(stdout);
        snprintf(row, sizeof row, "lenet %s vs torch", s);
        snprintf(note, sizeof note, isnan(tt) ? "no torch time (--torch)" : "torch %.3f ms",
                 tt);
        record("train", row, tt / (tg * 1e3), 1.0, note);
    }
}

/* ---- primitives: CUDA tensors against CPU tensors ---- */

typedef struct prim_work {
    ladle_op *op;
    ladle_tensor *in, *out;
    int adjoint;
} prim_work;

static ladle_status prim_step(void *arg)
{
    prim_work *w = arg;
    return w->adjoint ? ladle_op_adjoint(w->op, w->in, w->out)
                      : ladle_op_forward(w->op, w->in, w->out);
}

/* The partitions and layouts of one payload's ops (as bench_primitives). */
typedef struct prim_setup {
    ladle_partition *p1, *pall, *prow, *pcol;
    ladle_layout *halo, *rows, *cols;
    int64_t n;     /* floats of the payload */
    int64_t local; /* repartition: this rank's block */
} prim_setup;

enum { BROADCAST, SUM_REDUCE, ALL_SUM_REDUCE, HALO, REPARTITION, NPRIM };
static const char *prim_name[NPRIM] = {"broadcast", "sum-reduce", "all-sum-reduce",
                                       "halo-exchange", "repartition"};

static ladle_status prim_create(const prim_setup *s, int kind, ladle_device dev,
                                ladle_op **op)
{
    int axes[1] = {0};
    ladle_window w;
    ladle_broadcast_desc bd;
    ladle_broadcast_desc_init(&bd, 1, &s->n);
    ladle_all_sum_reduce_desc ad;
    ladle_all_sum_reduce_desc_init(&ad, 1, axes, 1, &s->n);
    switch (kind) {
    case BROADCAST:
        return ladle_broadcast_create(&bd, s->p1, s->pall, LADLE_F32, dev, op);
    case SUM_REDUCE:
        return ladle_sum_reduce_create(&bd, s->pall, s->p1, LADLE_F32, dev, op);
    case ALL_SUM_REDUCE:
        return ladle_all_sum_reduce_create(&ad, s->pall, LADLE_F32, dev, op);
    case HALO:
        /* rows split over the ranks, a 3-row kernel: one halo row each side */
        ladle_window_init(&w, 2);
        w.kernel[0] = 3;
        w.padding[0] = 1;
        return ladle_halo_exchange_create(s->halo, &w, LADLE_F32, dev, 0, op);
    default:
        return ladle_repartition_create(s->rows, s->cols, LADLE_F32, dev, 0, op);
    }
}

/* Bytes a rank sends (and receives) per call: what the staging estimate
 * copies each way. */
static double prim_staged(const prim_setup *s, int kind)
{
    if (kind == HALO)
        return 2.0 * (double)s->n * sizeof(float); /* a row each side */
    if (kind == REPARTITION)
        return (double)s->local * sizeof(float) * (world - 1) / world;
    return (double)s->n * sizeof(float);
}

static ladle_status prim_tensors(prim_work *w, ladle_device dev)
{
    ladle_status st = LADLE_OK;
    int nx, ny;
    int64_t xs[LADLE_MAX_NDIM], ys[LADLE_MAX_NDIM];
    ladle_op_x_shape(w->op, &nx, xs);
    ladle_op_y_shape(w->op, &ny, ys);
    if (w->adjoint)
        CALL(random_tensor(dev, ny, ys, &w->in));
    else
        CALL(random_tensor(dev, nx, xs, &w->in));
    if (ladle_op_kind_of(w->op) == LADLE_OP_HALO_EXCHANGE)
        return LADLE_OK; /* in place: in is out */
    if (w->adjoint)
        CALL(ladle_tensor_create(LADLE_F32, dev, nx, xs, &w->out));
    else
        CALL(ladle_tensor_create(LADLE_F32, dev, ny, ys, &w->out));
fail:
    return st;
}

/* Median seconds of the op of `kind` on dev, forward or adjoint. */
static ladle_status time_prim(const prim_setup *s, int kind, ladle_device dev, int adjoint,
                              double *sec)
{
    ladle_status st = LADLE_OK;
    prim_work w = {NULL, NULL, NULL, adjoint};
    CALL(prim_create(s, kind, dev, &w.op));
    CALL(prim_tensors(&w, dev));
    w.out = w.out ? w.out : w.in;
    st = timed(prim_step, &w, dev == LADLE_CUDA ? ON_CUDA : ON_CPU, sec);
    if (st != LADLE_OK)
        /* A call that failed half-way may leave its receives posted (the
         * op's schedule does not cancel them), and a peer's message may
         * still land in the op's buffers or its tensors: they stay. */
        return st;
fail:
    if (w.out != w.in)
        ladle_tensor_destroy(&w.out);
    ladle_tensor_destroy(&w.in);
    ladle_op_destroy(&w.op);
    return st;
}

typedef struct stage_work {
    size_t bytes;
    void *host, *dev;
} stage_work;

static ladle_status stage_step(void *arg)
{
    stage_work *w = arg;
    /* the same host buffer back: the stream keeps the two in order */
    return raw_status(gpu_raw_stage(raw, w->host, w->dev, w->bytes));
}

/* Median seconds of a device-to-host and a host-to-device copy of bytes
 * through pinned memory. */
static ladle_status time_staging(double bytes, double *sec)
{
    ladle_status st = LADLE_OK;
    stage_work w = {(size_t)bytes, NULL, NULL};
    CALL(raw_status(gpu_raw_host_alloc(raw, w.bytes, &w.host)));
    CALL(device_random((int64_t)(bytes / sizeof(float)) + 1, &w.dev));
    CALL(timed(stage_step, &w, ON_RAW, sec));
fail:
    gpu_raw_host_free(raw, w.host);
    device_free(&w.dev, 1);
    return st;
}

static void prim_row(const prim_setup *s, int kind, int adjoint, const char *payload)
{
    double tc = 0, th = 0, ts = 0, staged = prim_staged(s, kind);
    const char *dir = adjoint ? "adjoint" : "forward";
    char shape[64];
    snprintf(shape, sizeof shape, "%d ranks %s %s", world, dir, payload);
    ladle_status st = time_prim(s, kind, LADLE_CUDA, adjoint, &tc);
    if (st == LADLE_OK)
        st = time_prim(s, kind, LADLE_CPU, adjoint, &th);
    if (st == LADLE_OK)
        st = time_staging(staged, &ts);
    if (st != LADLE_OK) {
        not_measured("prim", prim_name[kind], shape, st, reason());
        clear_error();
        return;
    }
    char row[96], note[64];
    snprintf(row, sizeof row, "%s %s", prim_name[kind], shape);
    snprintf(note, sizeof note, "staging %.0f%% of the cuda call", 100 * ts / tc);
    record("prim", row, th / tc, 0, note);
    if (me != 0)
        return;
    printf("%5d  %-15s %-8s %9s %12.1f %12.1f %7.2f   %s\n", world, prim_name[kind], dir,
           payload, tc * 1e6, th * 1e6, tc / th, "cpu tensors");
    printf("#      staging: D2H + H2D of %.0f KiB, %.1f us: %.0f%% of the cuda call\n",
           staged / 1024, ts * 1e6, 100 * ts / tc);
    fflush(stdout);
}

static ladle_status prim_setup_make(prim_setup *s, int64_t bytes)
{
    ladle_status st = LADLE_OK;
    int one[1] = {1}, all[1] = {world}, rc[2] = {world, 1}, cr[2] = {1, world};
    s->n = bytes / (int64_t)sizeof(float);
    CALL(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 1, one, NULL, &s->p1));
    CALL(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 1, all, NULL, &s->pall));
    CALL(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 2, rc, NULL, &s->prow));
    CALL(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 2, cr, NULL, &s->pcol));
    int64_t g[2] = {2 * world, s->n};
    CALL(ladle_layout_create_balanced(s->prow, 2, g, &s->halo));
    /* rows to columns of a matrix whose local block is `bytes`: every rank
     * keeps 1/world of it and sends the rest */
    int64_t side = (int64_t)sqrt((double)s->n);
    int64_t g2[2] = {side * world, (s->n / side) / world * world};
    s->local = side * g2[1];
    CALL(ladle_layout_create_balanced(s->prow, 2, g2, &s->rows));
    CALL(ladle_layout_create_balanced(s->pcol, 2, g2, &s->cols));
fail:
    return st;
}

static void prim_setup_free(prim_setup *s)
{
    ladle_layout_destroy(&s->halo);
    ladle_layout_destroy(&s->rows);
    ladle_layout_destroy(&s->cols);
    ladle_partition_destroy(&s->p1);
    ladle_partition_destroy(&s->pall);
    ladle_partition_destroy(&s->prow);
    ladle_partition_destroy(&s->pcol);
}

static void prim_rows(void)
{
    static const int64_t full[] = {64, 1024, 16384}, tiny[] = {1, 16};
    const int64_t *kib = quick ? tiny : full;
    int sizes = quick ? 2 : 3;
    if (me == 0)
        printf("%5s  %-15s %-8s %9s %12s %12s %7s   %s\n", "ranks", "primitive", "dir",
               "payload", "cuda_us", "cpu_us", "ratio", "vs");
    for (int i = 0; i < sizes; i++) {
        prim_setup s;
        char payload[32];
        memset(&s, 0, sizeof s);
        if (kib[i] >= 1024)
            snprintf(payload, sizeof payload, "%lld MiB", (long long)(kib[i] / 1024));
        else
            snprintf(payload, sizeof payload, "%lld KiB", (long long)kib[i]);
        ladle_status st = prim_setup_make(&s, kib[i] * 1024);
        for (int k = 0; k < NPRIM; k++)
            for (int a = 0; a < 2; a++) {
                if (st == LADLE_OK)
                    prim_row(&s, k, a, payload);
                else
                    not_measured("prim", prim_name[k], payload, st, reason());
            }
        prim_setup_free(&s);
    }
}

/* ---- the summary ---- */

static void summary(void)
{
    int meets = 0, below = 0, na = 0, info = 0;
    if (me != 0)
        return;
    printf(
        "\n== summary: ratio = reference time / ladle time (higher is better)\n"
        "   gemm: cuBLAS GEMMs of the same m n k; memory: device copy of the same bytes;\n"
        "   prim: the op on CPU tensors; train: PyTorch's step on the same GPU\n");
    printf("%-7s %-47s %7s %7s  %s\n", "group", "row", "ratio", "target", "verdict");
    for (int i = 0; i < nverdicts; i++) {
        const verdict *v = &verdicts[i];
        const char *what;
        if (isnan(v->ratio))
            what = "n/a", na++;
        else if (v->target <= 0)
            what = "-", info++;
        else if (v->ratio >= v->target)
            what = "meets", meets++;
        else
            what = "below", below++;
        char r[16] = "-", t[16] = "-";
        if (!isnan(v->ratio))
            snprintf(r, sizeof r, "%.2f", v->ratio);
        if (v->target > 0)
            snprintf(t, sizeof t, "%.2f", v->target);
        printf("%-7s %-47s %7s %7s  %s%s%s\n", v->group, v->row, r, t, what,
               v->note[0] ? "  " : "", v->note);
    }
    printf("-- %d rows meet their target, %d below, %d without a target, %d not measured\n",
           meets, below, info, na);
    fflush(stdout);
}

static void usage(void)
{
    printf("usage: mpiexec -n 1 bench_gpu [--quick] [--reps R] [--only gemm|memory|lenet]\n"
           "                 [--tf32] [--torch FILE]\n"
           "       mpiexec -n 2 bench_gpu [--quick] [--reps R]   (the primitives)\n");
}

/* The options; 0, or the exit status for a bad one. */
static int parse(int argc, char **argv, int *tf32)
{
    long long count;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick"))
            quick = 1;
        else if (!strcmp(a, "--tf32"))
            *tf32 = 1;
        else if (!strcmp(a, "--reps") && v && bench_count(v, 1, 1000, &count))
            reps = (int)count, i++;
        else if (!strcmp(a, "--only") && v)
            only = v, i++;
        else if (!strcmp(a, "--torch") && v && access(v, R_OK) == 0)
            torch_file = v, i++;
        else {
            if (me == 0)
                usage();
            return strcmp(a, "--help") ? 2 : -1;
        }
    }
    return 0;
}

/* Open the GPU and print the header; 0, or the exit status. */
static int open_gpu(int tf32)
{
    int count = 0;
    char line[256];
    ladle_status st = ladle_device_count(LADLE_CUDA, &count);
    if (st == LADLE_OK && count == 0)
        st = raw_failed(LADLE_ERR_DEVICE, "no GPU: the CUDA driver sees none");
    if (st == LADLE_OK && gpu_raw_open(tf32, &raw) != 0)
        st = raw_status(-1);
    if (st == LADLE_OK && tf32)
        st = ladle_device_set(LADLE_CUDA, LADLE_DEVICE_TF32, 1);
    if (st == LADLE_OK)
        st = ladle_device_describe(LADLE_CUDA, line, sizeof line);
    if (st != LADLE_OK) {
        fprintf(stderr, "bench_gpu (rank %d): %s\n", me, reason());
        return 1;
    }
    if (me == 0) {
        printf("# f32, %d ranks, median of %d (slowest rank each time)%s\n# %s\n", world,
               reps, quick ? ", --quick: tiny shapes, timings meaningless" : "", line);
        fflush(stdout);
    }
    return 0;
}

static int wanted(const char *section)
{
    return only == NULL || strcmp(only, section) == 0;
}

int main(int argc, char **argv)
{
    int tf32 = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int rc = parse(argc, argv, &tf32);
    if (quick)
        sample_s = 0, reps = reps < 3 ? reps : 3;
    if (rc == 0)
        rc = open_gpu(tf32);
    if (rc == 0) {
        ladle_set_num_threads(1);
        if (world == 1 && wanted("gemm")) {
            printf("%-8s %-34s %9s %9s %8s %8s %6s\n", "layer", "shape (fwd+bwd)",
                   "ladle_ms", "gemm_ms", "ladle_GF", "gemm_GF", "ratio");
            linear_rows();
            conv_rows();
        }
        if (world == 1 && wanted("memory"))
            memory_rows();
        if (world == 1 && wanted("lenet"))
            lenet_rows();
        if (world > 1)
            prim_rows();
        summary();
        rc = any_fail ? 1 : any_na ? 3 : 0;
    }
    gpu_raw_close(&raw);
    MPI_Finalize();
    return rc < 0 ? 0 : rc;
}
