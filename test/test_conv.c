/* Convolution: the fast paths (im2col, wide rows) against a deliberately naive direct loop nest
 * on random shapes (odd sizes, stride, dilation, groups, large padding,
 * batch 1, 1-D to 3-D), finite differences, and the adjoint. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layers/sequential/conv_impl.h" /* to see which path a layer takes */
#include "src/backends/cpu/simd.h"

/* p is the left padding, p + extra the right one; mode a ladle_padding_mode;
 * same: made with padding 'same' (p and extra then as PyTorch works them out) */
typedef struct geom {
    int nd;
    int64_t n, c, co, g, in[3], k[3], s[3], p[3], d[3], out[3];
    int mode, same;
    int64_t extra[3];
} geom;

static int64_t in_at(const geom *G, int64_t n, int64_t c, const int64_t *i)
{
    return ((n * G->c + c) * G->in[0] + i[0]) * G->in[1] * G->in[2] + i[1] * G->in[2] + i[2];
}

/* Index i of a padded dimension of extent n read back into [0, n) by the
 * padding mode's definition (PyTorch's F.pad), or -1 for a zero. */
static int64_t pad_index(int mode, int64_t i, int64_t n)
{
    if (i >= 0 && i < n)
        return i;
    switch (mode) {
    case LADLE_PAD_REFLECT: /* mirror about the edge cell, the edge not repeated */
        return i < 0 ? -i : (n - 1) - (i - (n - 1));
    case LADLE_PAD_REPLICATE:
        return i < 0 ? 0 : n - 1;
    case LADLE_PAD_CIRCULAR:
        return ((i % n) + n) % n;
    default:
        return -1;
    }
}

/* For output position o and tap k, the input index, or 0 for a zero. */
static int tap(const geom *G, const int64_t *o, const int64_t *k, int64_t *i)
{
    for (int a = 0; a < 3; a++) {
        i[a] = pad_index(G->mode, o[a] * G->s[a] - G->p[a] + k[a] * G->d[a], G->in[a]);
        if (i[a] < 0)
            return 0;
    }
    return 1;
}

/* y = conv(x) + b; dx = conv^T(dy); dW, db: all by the definition. */
static void naive(const geom *G, const double *x, const double *w, const double *b,
                  const double *dy, double *y, double *dx, double *dw, double *db)
{
    int64_t cg = G->c / G->g, cog = G->co / G->g, kv = G->k[0] * G->k[1] * G->k[2];
    int64_t pout = G->out[0] * G->out[1] * G->out[2];
    int64_t nx = G->n * G->c * G->in[0] * G->in[1] * G->in[2];
    for (int64_t i = 0; i < nx; i++)
        dx[i] = 0;
    for (int64_t i = 0; i < G->co * cg * kv; i++)
        dw[i] = 0;
    for (int64_t co = 0; co < G->co; co++)
        db[co] = 0;
    for (int64_t n = 0; n < G->n; n++)
        for (int64_t co = 0; co < G->co; co++) {
            int64_t g = co / cog;
            for (int64_t q = 0; q < pout; q++) {
                int64_t o[3] = {q / (G->out[1] * G->out[2]), q / G->out[2] % G->out[1],
                                q % G->out[2]};
                int64_t yi = (n * G->co + co) * pout + q;
                double s = b ? b[co] : 0;
                db[co] += dy[yi];
                for (int64_t ci = 0; ci < cg; ci++)
                    for (int64_t t = 0; t < kv; t++) {
                        int64_t k[3] = {t / (G->k[1] * G->k[2]), t / G->k[2] % G->k[1],
                                        t % G->k[2]},
                                i[3];
                        if (!tap(G, o, k, i))
                            continue;
                        int64_t xi = in_at(G, n, g * cg + ci, i), wi = (co * cg + ci) * kv + t;
                        s += w[wi] * x[xi];
                        dx[xi] += w[wi] * dy[yi];
                        dw[wi] += dy[yi] * x[xi];
                    }
                y[yi] = s;
            }
        }
}

static uint64_t rng = 88172645463325252ull;
static int64_t pick(int64_t lo, int64_t hi)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (int64_t)(rng % (uint64_t)(hi - lo + 1));
}

/* A random legal geometry. */
static geom random_geom(int nd)
{
    geom G;
    for (;;) {
        G.nd = nd;
        G.n = pick(1, 3);
        G.g = pick(1, 3);
        G.c = G.g * pick(1, 3);
        G.co = G.g * pick(1, 3);
        int ok = 1;
        for (int a = 0; a < 3; a++) {
            int used = a >= 3 - nd;
            G.in[a] = used ? pick(1, nd == 3 ? 7 : 11) : 1;
            G.k[a] = used ? pick(1, 4) : 1;
            G.s[a] = used ? pick(1, 3) : 1;
            G.d[a] = used ? pick(1, 2) : 1;
            G.p[a] = used ? pick(0, 4) : 0; /* padding beyond the kernel's half too */
            int64_t span = G.in[a] + 2 * G.p[a] - G.d[a] * (G.k[a] - 1) - 1;
            ok &= span >= 0;
            G.out[a] = span >= 0 ? span / G.s[a] + 1 : 0;
            G.extra[a] = 0;
            /* some tap of some output reads x (else the layer is 0, and the
             * adjoint test has nothing to compare) */
            int reads = 0;
            for (int64_t o = 0; o < G.out[a]; o++)
                for (int64_t t = 0; t < G.k[a]; t++) {
                    int64_t i = o * G.s[a] - G.p[a] + t * G.d[a];
                    reads |= i >= 0 && i < G.in[a];
                }
            ok &= reads;
        }
        G.mode = G.same = 0;
        if (ok)
            return G;
    }
}

static ladle_op *make(const geom *G, int bias, ladle_dtype dt)
{
    ladle_conv_desc d;
    ladle_conv_desc_init(&d, G->nd, G->c, G->co, 1);
    d.groups = G->g;
    d.bias = bias;
    int64_t xs[5] = {G->n, G->c};
    for (int i = 0; i < G->nd; i++) {
        int a = 3 - G->nd + i;
        d.kernel[i] = G->k[a];
        d.stride[i] = G->s[a];
        d.padding[i] = G->p[a];
        d.dilation[i] = G->d[a];
        xs[2 + i] = G->in[a];
    }
    ladle_op *op = NULL;
    if (G->mode == 0 && !G->same) {
        LT_OK(ladle_conv_create(&d, xs, dt, lt_device(), 17, &op));
        return op;
    }
    d.padding_mode = (ladle_padding_mode)G->mode;
    d.same = G->same;
    for (int i = 0; G->same && i < G->nd; i++)
        d.padding[i] = 0;
    LT_OK(ladle_conv_create(&d, xs, dt, lt_device(), 17, &op));
    return op;
}

/* A random geometry with padding mode `mode` (its padding within what the
 * mode takes), or with padding 'same' (stride 1; PyTorch's rule: total
 * d(k - 1), the left half rounded down). */
static geom random_pad_geom(int nd, int mode, int same)
{
    for (;;) {
        geom G = random_geom(nd);
        G.mode = mode;
        G.same = same;
        int ok = 1;
        for (int a = 3 - nd; a < 3; a++) {
            if (same) {
                int64_t total = G.d[a] * (G.k[a] - 1);
                G.s[a] = 1;
                G.p[a] = total / 2;
                G.extra[a] = total - 2 * G.p[a];
            }
            int64_t hi = G.p[a] + G.extra[a];
            if (mode == LADLE_PAD_REFLECT)
                ok &= hi < G.in[a];
            if (mode == LADLE_PAD_CIRCULAR)
                ok &= hi <= G.in[a];
            int64_t span = G.in[a] + G.p[a] + hi - G.d[a] * (G.k[a] - 1) - 1;
            ok &= span >= 0;
            G.out[a] = span >= 0 ? span / G.s[a] + 1 : 0;
            if (same)
                ok &= G.out[a] == G.in[a];
        }
        if (ok && (mode != 0 || same))
            return G;
    }
}

static void compare_with_naive(const geom *G, ladle_dtype dt, double tol, const char *what)
{
    ladle_op *op = make(G, 1, dt);
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    ladle_tensor *dy = lt_op_tensor(op, 1), *dx = lt_op_tensor(op, 0);
    LT_OK(ladle_tensor_fill_random(x, 1, 0));
    LT_OK(ladle_tensor_fill_random(dy, 1, 1));
    ladle_ctx *ctx = lt_forward_backward(op, x, y, dy, dx);
    LT_OK(ladle_layer_backward_weight(op, ctx, dy));
    int64_t nx = ladle_tensor_numel(x), ny = ladle_tensor_numel(y);
    const ladle_tensor *w = ladle_op_param(op, 0), *b = ladle_op_param(op, 1);
    int64_t nw = ladle_tensor_numel(w);
    /* one transfer a tensor (on a GPU an element's costs a copy and a
     * synchronisation) */
    double *xd = lt_values(x), *wd = lt_values(w), *bd = lt_values(b), *dyd = lt_values(dy);
    double *yr = calloc((size_t)ny, sizeof(double)), *dxr = calloc((size_t)nx, sizeof(double));
    double *dwr = calloc((size_t)nw, sizeof(double)),
           *dbr = calloc((size_t)G->co, sizeof(double));
    naive(G, xd, wd, bd, dyd, yr, dxr, dwr, dbr);
    double *yv = lt_values(y), *dxv = lt_values(dx), *dwv = lt_values(ladle_op_grad(op, 0)),
           *dbv = lt_values(ladle_op_grad(op, 1));
    double ey = 0, ex = 0, ew = 0, eb = 0;
    for (int64_t i = 0; i < ny; i++)
        ey = fmax(ey, fabs(yv[i] - yr[i]));
    for (int64_t i = 0; i < nx; i++)
        ex = fmax(ex, fabs(dxv[i] - dxr[i]));
    for (int64_t i = 0; i < nw; i++)
        ew = fmax(ew, fabs(dwv[i] - dwr[i]));
    for (int64_t i = 0; i < G->co; i++)
        eb = fmax(eb, fabs(dbv[i] - dbr[i]));
    free(yv), free(dxv), free(dwv), free(dbv);
    LT_ASSERT(ey < tol && ex < tol && ew < tol && eb < tol,
              "%s: nd %d n %lld c %lld->%lld g %lld: errors y %.1e dx %.1e dw %.1e db %.1e", what,
              G->nd, (long long)G->n, (long long)G->c, (long long)G->co, (long long)G->g, ey, ex,
              ew, eb);
    free(xd), free(wd), free(bd), free(dyd), free(yr), free(dxr), free(dwr), free(dbr);
    ladle_ctx_destroy(&ctx);
    LT_DESTROY(&x, &y, &dx, &dy);
    ladle_op_destroy(&op);
}

START_TEST(against_naive_loops)
{
    for (int trial = 0; trial < 60; trial++) {
        geom G = random_geom(1 + trial % 3);
        compare_with_naive(&G, LADLE_F64, 1e-12, "f64");
        if (trial % 4 == 0)
            compare_with_naive(&G, LADLE_F32, 1e-4, "f32");
    }
    /* shapes of the fast paths: pointwise, and many images per GEMM */
    geom pw = {2, 3, 4, 6, 2, {1, 5, 7}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, {1, 5, 7},
               0, 0, {0, 0, 0}};
    compare_with_naive(&pw, LADLE_F64, 1e-12, "pointwise");
    geom lenet = {2, 9, 1, 6, 1, {1, 28, 28}, {1, 5, 5}, {1, 1, 1}, {0, 2, 2}, {1, 1, 1},
                  {1, 28, 28}, 0, 0, {0, 0, 0}};
    compare_with_naive(&lenet, LADLE_F64, 1e-12, "LeNet conv1, batched GEMM");
    /* column matrices of B P = 1024 (one image) and 256 (four, then one):
     * their rows are planned with a stride of 16 elements more */
    geom big = {2,         2,         4,         20,          1, {1, 32, 32}, {1, 3, 3},
                {1, 1, 1}, {0, 1, 1}, {1, 1, 1}, {1, 32, 32}, 0, 0,           {0, 0, 0}};
    compare_with_naive(&big, LADLE_F64, 1e-12, "32 x 32 planes");
    compare_with_naive(&big, LADLE_F32, 1e-4, "32 x 32 planes, f32");
    geom four = {2,         5,         2,         20,        1, {1, 8, 8}, {1, 3, 3},
                 {1, 1, 1}, {0, 1, 1}, {1, 1, 1}, {1, 8, 8}, 0, 0,         {0, 0, 0}};
    compare_with_naive(&four, LADLE_F64, 1e-12, "8 x 8 planes, four per GEMM");
    /* A device that queues its calls (a GPU) batches images up to 65536
     * columns: 190 x 190 outputs go two per GEMM, then one; the wide path's
     * 130 x 130 (17158 columns an image) four, then one. The CPU takes
     * one image per GEMM in both. The weight and bias gradients sum 10^5
     * terms of magnitude 1 (absolute errors about 1e-12, 1e-14 relative). */
    /* clang-format off */
    geom two = {2, 3, 1, 2, 1, {1, 190, 190}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1},
                {1, 190, 190}, 0, 0, {0, 0, 0}};
    geom wide = {2, 5, 8, 4, 1, {1, 130, 130}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1},
                 {1, 130, 130}, 0, 0, {0, 0, 0}};
    /* clang-format on */
    compare_with_naive(&two, LADLE_F64, 1e-10,
                       "190 x 190 planes, two per GEMM on a device");
    compare_with_naive(&wide, LADLE_F64, 1e-10, "wide rows of 130 x 130, four per GEMM");
}
END_TEST

/* A random geometry of the wide-row path (conv_wide.c): 1-D or 2-D,
 * stride 1 along the rows, at least 64 taps, at most 16 output channels per
 * group, spare columns at most half. Batches of 1-5 leave partial GEMM
 * blocks. */
static geom wide_geom(void)
{
    geom G = {0};
    for (;;) {
        G.nd = (int)pick(1, 2);
        G.n = pick(1, 5);
        G.g = pick(1, 2);
        G.co = G.g * pick(1, 16);
        int64_t taps = 1;
        for (int a = 0; a < 3; a++) {
            int used = a >= 3 - G.nd;
            G.k[a] = used ? pick(1, 5) : 1;
            G.d[a] = used ? pick(1, 2) : 1;
            G.p[a] = used ? pick(0, 3) : 0;
            G.s[a] = 1;
            G.in[a] = used ? pick(G.d[a] * (G.k[a] - 1) + 1, 18) : 1;
            G.out[a] = G.in[a] + 2 * G.p[a] - G.d[a] * (G.k[a] - 1);
            taps *= G.k[a];
        }
        G.c = G.g * ((64 + taps - 1) / taps + pick(0, 2));
        int64_t wp = G.in[2] + 2 * G.p[2];
        double spare = (double)((G.out[1] - 1) * wp + G.out[2]) / (double)(G.out[1] * G.out[2]);
        int pointwise = taps == 1 && G.p[1] + G.p[2] == 0; /* no im2col at all */
        if (spare <= 1.5 && !pointwise)
            return G;
    }
}

START_TEST(wide_rows)
{
    int taken = 1;
    for (int trial = 0; trial < 30; trial++) {
        geom G = wide_geom();
        ladle_op *op = make(&G, 0, LADLE_F64);
        taken &= ((const conv *)op->impl)->wide;
        if (trial < 3)
            lt_adjoint_ok(op, 5, "wide conv without bias");
        ladle_op_destroy(&op);
        compare_with_naive(&G, LADLE_F64, 1e-12, "wide f64");
        if (trial % 3 == 0)
            compare_with_naive(&G, LADLE_F32, 1e-4, "wide f32");
    }
    geom conv2 = {2, 5, 6, 16, 1, {1, 14, 14}, {1, 5, 5}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1},
                  {1, 10, 10}, 0, 0, {0, 0, 0}};
    compare_with_naive(&conv2, LADLE_F64, 1e-12, "LeNet conv2, two images per GEMM");
    compare_with_naive(&conv2, LADLE_F32, 1e-4, "LeNet conv2, f32");
    LT_ASSERT(taken, "a wide geometry took the im2col path");
}
END_TEST

/* A random geometry of the direct path (the conv_direct slots): 1-D or
 * 2-D, stride 1, at most 32 taps, output rows of at least 16 elements
 * (64 bytes of f32), some a whole number of vectors and some not; up to 20
 * output channels per group and kernel rows up to 7 leave partial register
 * blocks (8 channels in the forward, 3 x 5 or 3 x 3 in the weight
 * gradient). */
static geom direct_geom(void)
{
    geom G = {0};
    for (;;) {
        G.nd = (int)pick(1, 2);
        G.n = pick(1, 4);
        G.g = pick(1, 2);
        G.co = G.g * pick(1, 20);
        G.c = G.g * pick(1, 3);
        int64_t taps = G.c / G.g;
        for (int a = 0; a < 3; a++) {
            int used = a >= 3 - G.nd;
            G.k[a] = used ? pick(1, a == 2 ? 7 : 5) : 1;
            G.d[a] = used ? pick(1, 2) : 1;
            G.p[a] = used ? pick(0, 3) : 0;
            G.s[a] = 1;
            int64_t span = G.d[a] * (G.k[a] - 1) + 1;
            G.in[a] = !used    ? 1
                      : a == 2 ? pick(16 + span - 1 - 2 * G.p[a], 40)
                               : pick(span, 9);
            if (G.in[a] < 1)
                G.in[a] = 1;
            G.out[a] = G.in[a] + 2 * G.p[a] - span + 1;
            taps *= G.k[a];
        }
        int pointwise = taps == G.c / G.g && G.p[1] + G.p[2] == 0; /* no im2col at all */
        if (taps <= 32 && G.out[2] >= 16 && G.out[1] >= 1 && !pointwise)
            return G;
    }
}

/* The direct path at the width LADLE_CONV_DIRECT leaves it (cap: NULL or
 * "v3"), against the naive loops: the path each geometry takes, the width
 * its calls run at, the values, the adjoint. */
static void direct_pass(const char *cap)
{
    int best = ladle__simd_width();
    int bytes = cap == NULL ? best : best < 32 ? best : 32;
    int64_t lanes = bytes == 32 ? 8 : 16; /* f32 elements in a vector */
    if (cap != NULL)
        setenv("LADLE_CONV_DIRECT", cap, 1);
    int taken = 1, width = 1, whole = 0, partial = 0;
    for (int trial = 0; trial < 40; trial++) {
        geom G = direct_geom();
        ladle_op *op = make(&G, 0, LADLE_F64);
        const conv *v = op->impl;
        /* the CPU takes it where the x86-64-v3 or v4 copies run; a device
         * without the slots (the CUDA backend) takes im2col */
        int slots = op->be->fn->conv_direct_plan != NULL;
        taken &=
            v->direct_fwd == v->direct_wgt && (v->direct_wgt != 0) == (slots && bytes > 0);
        /* the CPU's variant is the width its calls run at */
        width &= !slots || v->direct_fwd == bytes;
        if (trial < 3)
            lt_adjoint_ok(op, 5, "direct conv without bias");
        ladle_op_destroy(&op);
        whole += G.out[2] % lanes == 0;
        partial += G.out[2] % lanes != 0;
        compare_with_naive(&G, LADLE_F64, 1e-12, "direct f64");
        if (trial % 2 == 0)
            compare_with_naive(&G, LADLE_F32, 1e-4, "direct f32");
    }
    geom lenet = {2,         5,         1,         6,           1, {1, 28, 28}, {1, 5, 5},
                  {1, 1, 1}, {0, 2, 2}, {1, 1, 1}, {1, 28, 28}, 0, 0,           {0, 0, 0}};
    compare_with_naive(&lenet, LADLE_F32, 1e-4, "LeNet conv1, direct f32");
    /* explicit padding (reflect) pads x first; the direct path then reads it */
    geom refl = {2,         2,         3,         10,        1,          {1, 6, 20},
                 {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1}, {1, 6, 20}, LADLE_PAD_REFLECT,
                 0,         {0, 0, 0}};
    compare_with_naive(&refl, LADLE_F64, 1e-12, "direct, reflect padding");
    unsetenv("LADLE_CONV_DIRECT");
    LT_ASSERT(taken, "%s: a direct geometry took another path", cap ? cap : "default");
    LT_ASSERT(width, "%s: a plan runs its calls at another width than %d bytes",
              cap ? cap : "default", bytes);
    LT_ASSERT(whole > 0 && partial > 0, "rows of whole vectors %d, with a remainder %d",
              whole, partial);
}

START_TEST(direct_taps) { direct_pass(NULL); }
END_TEST

/* The 32-byte kernels (AVX2's), which a CPU without AVX-512 runs: here
 * chosen by LADLE_CONV_DIRECT=v3 wherever the CPU runs them. */
START_TEST(direct_taps_32_bytes) { direct_pass("v3"); }
END_TEST

/* A random geometry of the channels' kernels (src/backends/cpu/
 * conv_channels.inc): 1-D or 2-D, stride 1, dilation 1, more than 32 taps,
 * output rows of 4 or more (one to three blocks of outputs, some
 * overlapping; short rows a few at a time), cog output channels a group,
 * kernels 2 to 7 wide (the weight gradient takes 3, 5 and 7 wide, for 25
 * outputs or more; the others leave it to the column path) and padding up
 * to the kernel's less one. */
static geom channels_geom(int64_t cog)
{
    geom G = {0};
    for (;;) {
        G.nd = (int)pick(1, 2);
        G.n = pick(1, 3);
        G.g = pick(1, 2);
        G.co = G.g * cog;
        G.c = G.g * pick(1, 8);
        int64_t taps = G.c / G.g;
        for (int a = 0; a < 3; a++) {
            int used = a >= 3 - G.nd;
            G.k[a] = used ? pick(a == 2 ? 2 : 1, 7) : 1;
            G.d[a] = G.s[a] = 1;
            G.p[a] = used ? pick(0, G.k[a] - 1) : 0;
            G.in[a] = !used    ? 1
                      : a == 2 ? pick(4 + G.k[a] - 1 - 2 * G.p[a], 40)
                               : pick(1, 10);
            if (G.in[a] < 1)
                G.in[a] = 1;
            G.out[a] = G.in[a] + 2 * G.p[a] - G.k[a] + 1;
            taps *= G.k[a];
        }
        if (taps > 32 && G.out[2] >= 4 && G.out[1] >= 1)
            return G;
    }
}

/* The channels' kernels at the width LADLE_CONV_DIRECT leaves them (cap:
 * NULL or "v3"), against the naive loops: the plan (f32 with 16 output
 * channels a group, f64 with 8: two or one vectors at either width; the
 * input gradient where the planes have rows enough), the values (with a
 * bias), the adjoint (without). */
static void channels_pass(const char *cap)
{
    int best = ladle__simd_width();
    int bytes = cap == NULL ? best : best < 32 ? best : 32;
    if (cap != NULL)
        setenv("LADLE_CONV_DIRECT", cap, 1);
    int taken = 1, fwd_only = 0, blocks = 0, short_rows = 0, bwd = 0, bwd_not = 0;
    for (int trial = 0; trial < 40; trial++) {
        ladle_dtype dt = trial % 2 ? LADLE_F64 : LADLE_F32;
        geom G = channels_geom(dt == LADLE_F32 ? 16 : 8);
        ladle_op *op = make(&G, 0, dt);
        const conv *v = op->impl;
        int slots = op->be->fn->conv_direct_plan != NULL && bytes > 0;
        int weight =
            (G.k[2] == 3 || G.k[2] == 5 || G.k[2] == 7) && G.out[1] * G.out[2] >= 25;
        /* the CPU's variant: the width, + 1 for these kernels */
        /* the input gradient: planes of 3 rows or more at 64 bytes (2 at
         * 32), whose blocks of rows of whole vectors are at most 1.25 times
         * the outputs */
        int64_t rows = bytes == 64 ? 3 : 2, lanes = bytes / (dt == LADLE_F32 ? 4 : 8);
        int64_t vec = (G.in[2] + lanes - 1) / lanes * lanes;
        int backward = G.in[1] >= rows && 4 * ((G.in[1] + rows - 1) / rows) * rows * vec <=
                                              5 * G.out[1] * G.out[2];
        taken &= v->direct_fwd == (slots ? bytes + 1 : 0) &&
                 v->direct_wgt == (slots && weight ? bytes + 1 : 0) &&
                 v->direct_bwd == (slots && backward ? bytes + 1 : 0);
        bwd += backward, bwd_not += !backward;
        fwd_only += !weight;
        blocks += G.out[2] > 16;
        short_rows += G.out[2] < 8 && G.out[1] >= 2; /* rows a few at a time */
        if (trial < 4)
            lt_adjoint_ok(op, 5, "channels conv without bias");
        ladle_op_destroy(&op);
        compare_with_naive(&G, dt, dt == LADLE_F32 ? 1e-4 : 1e-12,
                           dt == LADLE_F32 ? "channels f32" : "channels f64");
    }
    geom conv2 = {2,         7,         6,         16,          1, {1, 14, 14}, {1, 5, 5},
                  {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, {1, 10, 10}, 0, 0,           {0, 0, 0}};
    compare_with_naive(&conv2, LADLE_F32, 1e-4, "LeNet conv2, channels f32");
    unsetenv("LADLE_CONV_DIRECT");
    LT_ASSERT(taken, "%s: a channels geometry took another path", cap ? cap : "default");
    LT_ASSERT(
        fwd_only > 0 && blocks > 0 && short_rows > 0 && bwd > 0 && bwd_not > 0,
        "kernels of other widths %d, rows of blocks %d, short rows %d, input gradients "
        "taken %d, not %d",
        fwd_only, blocks, short_rows, bwd, bwd_not);
}

START_TEST(channels_taps) { channels_pass(NULL); }
END_TEST

START_TEST(channels_taps_32_bytes) { channels_pass("v3"); }
END_TEST

/* LADLE_CONV_DIRECT=off leaves the direct path to no geometry; a value
 * that is none of v4, v3, off is refused at creation, saying what. */
START_TEST(direct_switch)
{
    geom lenet = {2,         5,         1,         6,           1, {1, 28, 28}, {1, 5, 5},
                  {1, 1, 1}, {0, 2, 2}, {1, 1, 1}, {1, 28, 28}, 0, 0,           {0, 0, 0}};
    setenv("LADLE_CONV_DIRECT", "off", 1);
    ladle_op *op = make(&lenet, 1, LADLE_F32);
    const conv *v = op->impl;
    int slots = op->be->fn->conv_direct_plan != NULL; /* not on CUDA */
    LT_ASSERT(v->direct_fwd == 0 && v->direct_wgt == 0, "off: the direct path was taken");
    ladle_op_destroy(&op);
    compare_with_naive(&lenet, LADLE_F32, 1e-4, "LeNet conv1, direct path off");
    ladle_conv_desc d;
    ladle_conv_desc_init(&d, 2, 1, 6, 5);
    d.padding[0] = d.padding[1] = 2;
    int64_t xs[4] = {5, 1, 28, 28};
    setenv("LADLE_CONV_DIRECT", "avx9", 1);
    if (slots)
        LT_FAILS_SAYING(ladle_conv_create(&d, xs, LADLE_F32, lt_device(), 17, &op),
                        LADLE_ERR_ARG, "LADLE_CONV_DIRECT");
    unsetenv("LADLE_CONV_DIRECT");
    LT_ASSERT(op == NULL, "a refused creation left an op");
}
END_TEST

START_TEST(gradients_and_adjoint)
{
    for (int trial = 0; trial < 6; trial++) {
        geom G = random_geom(1 + trial % 3);
        ladle_op *op = make(&G, 1, LADLE_F64);
        ladle_gradient_result r;
        LT_OK(ladle_gradient_test(op, 3, 100, &r));
        LT_ASSERT(r.input_error < 1e-6 && r.param_error[0] < 1e-6 && r.param_error[1] < 1e-6,
                  "conv gradients %.1e %.1e %.1e", r.input_error, r.param_error[0],
                  r.param_error[1]);
        ladle_op_destroy(&op);
        op = make(&G, 0, LADLE_F64);
        lt_adjoint_ok(op, 5, "conv without bias");
        ladle_op_destroy(&op);
    }
}
END_TEST

START_TEST(padding_modes)
{
    static const char *names[4] = {"zeros", "reflect", "replicate", "circular"};
    char what[64];
    for (int trial = 0; trial < 96; trial++) {
        int mode = trial % 4, same = trial / 4 % 2 || mode == 0;
        geom G = random_pad_geom(1 + trial / 8 % 3, mode, same);
        snprintf(what, sizeof what, "%s%s f64", names[mode], same ? " same" : "");
        compare_with_naive(&G, LADLE_F64, 1e-12, what);
        if (trial % 8 == 0) {
            snprintf(what, sizeof what, "%s%s f32", names[mode], same ? " same" : "");
            compare_with_naive(&G, LADLE_F32, 1e-4, what);
        }
        if (trial < 16) {
            ladle_op *op = make(&G, 1, LADLE_F64);
            ladle_gradient_result r;
            LT_OK(ladle_gradient_test(op, 3, 100, &r));
            LT_ASSERT(r.input_error < 1e-6 && r.param_error[0] < 1e-6 &&
                          r.param_error[1] < 1e-6,
                      "%s gradients %.1e %.1e %.1e", what, r.input_error, r.param_error[0],
                      r.param_error[1]);
            ladle_op_destroy(&op);
            op = make(&G, 0, LADLE_F64);
            lt_adjoint_ok(op, 5, what);
            ladle_op_destroy(&op);
        }
    }
    /* 'same' by hand: kernel 4, dilation 1 pads 1 left and 2 right */
    geom even = {1, 2, 1, 1, 1, {1, 1, 5}, {1, 1, 4}, {1, 1, 1}, {0, 0, 1}, {1, 1, 1},
                 {1, 1, 5}, LADLE_PAD_ZEROS, 1, {0, 0, 1}};
    compare_with_naive(&even, LADLE_F64, 1e-12, "same, kernel 4");
    geom wide = wide_geom(); /* the wide-row path under a padding mode */
    wide.mode = LADLE_PAD_REPLICATE;
    compare_with_naive(&wide, LADLE_F64, 1e-12, "replicate, wide rows");
}
END_TEST

START_TEST(padding_bad_input)
{
    ladle_conv_desc d;
    int64_t xs[4] = {2, 3, 5, 5};
    ladle_op *op = NULL;
    ladle_conv_desc_init(&d, 2, 3, 4, 3);
    d.padding_mode = (ladle_padding_mode)7;
    LT_FAILS_SAYING(ladle_conv_create(&d, xs, LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "padding mode 7");
    d.padding_mode = LADLE_PAD_ZEROS;
    d.flags = 0x100;
    LT_FAILS_SAYING(ladle_conv_create(&d, xs, LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "unknown flags 0x100");
    d.flags =
        LADLE_CHECKED | LADLE_OVERLAP_HALO; /* the distributed layer's: nothing here */
    LT_OK(ladle_conv_create(&d, xs, LADLE_F64, lt_device(), 1, &op));
    ladle_op_destroy(&op);
    d.flags = 0;
    d.same = 1;
    d.stride[1] = 2;
    LT_FAILS_SAYING(ladle_conv_create(&d, xs, LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "stride 1");
    d.stride[1] = 1;
    d.padding[0] = 1;
    LT_FAILS(ladle_conv_create(&d, xs, LADLE_F64, lt_device(), 1, &op), LADLE_ERR_ARG);
    d.same = 0;
    d.padding_mode = LADLE_PAD_REFLECT;
    d.padding[0] = d.padding[1] = 5; /* reflect needs padding below the extent 5 */
    LT_FAILS_SAYING(ladle_conv_create(&d, xs, LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "reflect padding");
    d.padding_mode = LADLE_PAD_CIRCULAR; /* circular takes the extent itself, not 6 */
    LT_OK(ladle_conv_create(&d, xs, LADLE_F64, lt_device(), 1, &op));
    ladle_op_destroy(&op);
    d.padding[1] = 6;
    LT_FAILS(ladle_conv_create(&d, xs, LADLE_F64, lt_device(), 1, &op), LADLE_ERR_ARG);
    d.padding_mode = LADLE_PAD_REPLICATE; /* replicate takes any */
    d.padding[0] = d.padding[1] = 9;
    LT_OK(ladle_conv_create(&d, xs, LADLE_F64, lt_device(), 1, &op));
    ladle_op_destroy(&op);
    d.padding[1] = INT64_MAX / 2; /* too large to pad */
    LT_FAILS(ladle_conv_create(&d, xs, LADLE_F64, lt_device(), 1, &op), LADLE_ERR_ARG);
    LT_ASSERT(op == NULL, "no op on failure");
}
END_TEST

/* The 0.1 names (deprecated): ladle_conv_create_ex with ladle_conv_opts
 * gives the layer of the desc's fields, bit for bit. */
START_TEST(deprecated_conv_ex)
{
    int64_t xs[4] = {2, 3, 6, 5};
    ladle_conv_desc d;
    ladle_conv_desc_init(&d, 2, 3, 4, 4); /* an even kernel: uneven 'same' */
    ladle_op *old = NULL, *now = NULL, *plain = NULL;
    LT_DEPRECATED_BEGIN
    ladle_conv_opts o;
    ladle_conv_opts_init(&o);
    LT_ASSERT(o.size == sizeof o && o.padding_mode == LADLE_PAD_ZEROS && o.same == 0,
              "ladle_conv_opts_init's defaults");
    o.padding_mode = LADLE_PAD_REFLECT;
    o.same = 1;
    LT_OK(ladle_conv_create_ex(&d, &o, xs, LADLE_F64, lt_device(), 9, &old));
    LT_OK(ladle_conv_create_ex(&d, NULL, xs, LADLE_F64, lt_device(), 9, &plain));
    o.size = 4;
    LT_FAILS(ladle_conv_create_ex(&d, &o, xs, LADLE_F64, lt_device(), 9, &now),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_conv_create_ex(NULL, NULL, xs, LADLE_F64, lt_device(), 9, &now),
             LADLE_ERR_NULL);
    LT_DEPRECATED_END
    LT_ASSERT(now == NULL, "no op on failure");
    d.padding_mode = LADLE_PAD_REFLECT;
    d.same = 1;
    LT_OK(ladle_conv_create(&d, xs, LADLE_F64, lt_device(), 9, &now));
    lt_same_layer(old, now, 31, "conv_create_ex and conv_create with the desc's options");
    ladle_op_destroy(&now);
    ladle_conv_desc_init(&d, 2, 3, 4, 4);
    LT_OK(ladle_conv_create(&d, xs, LADLE_F64, lt_device(), 9, &now));
    lt_same_layer(plain, now, 32, "conv_create_ex without options");
    ladle_op_destroy(&old);
    ladle_op_destroy(&now);
    ladle_op_destroy(&plain);
}
END_TEST

START_TEST(bad_input)
{
    ladle_conv_desc d;
    int64_t xs[4] = {2, 3, 5, 5};
    ladle_op *op = NULL;
    ladle_conv_desc_init(&d, 2, 3, 4, 3);
    d.groups = 2; /* 3 channels do not split in 2 */
    LT_FAILS(ladle_conv_create(&d, xs, LADLE_F32, lt_device(), 1, &op), LADLE_ERR_ARG);
    ladle_conv_desc_init(&d, 2, 4, 4, 3);
    LT_FAILS(ladle_conv_create(&d, xs, LADLE_F32, lt_device(), 1, &op),
             LADLE_ERR_SHAPE); /* channels */
    ladle_conv_desc_init(&d, 2, 3, 4, 7);
    LT_FAILS(ladle_conv_create(&d, xs, LADLE_F32, lt_device(), 1, &op),
             LADLE_ERR_SHAPE); /* too large */
    d.padding[0] = d.padding[1] = 1;
    LT_OK(ladle_conv_create(&d, xs, LADLE_F32, lt_device(), 1, &op)); /* fits with padding */
    ladle_op_destroy(&op);
    ladle_conv_desc_init(&d, 4, 3, 4, 3);
    LT_FAILS(ladle_conv_create(&d, xs, LADLE_F32, lt_device(), 1, &op), LADLE_ERR_ARG);
    ladle_conv_desc_init(&d, 2, 3, 4, 3);
    d.stride[1] = 0;
    LT_FAILS(ladle_conv_create(&d, xs, LADLE_F32, lt_device(), 1, &op), LADLE_ERR_ARG);
    LT_FAILS(ladle_conv_create(NULL, xs, LADLE_F32, lt_device(), 1, &op), LADLE_ERR_NULL);
    LT_ASSERT(op == NULL, "no op on failure");
}
END_TEST

LT_SUITE("conv", "conv", LT_CHECK_TIMEOUT, against_naive_loops, wide_rows, direct_taps,
         direct_taps_32_bytes, direct_switch, channels_taps, channels_taps_32_bytes,
         gradients_and_adjoint, bad_input, padding_modes, padding_bad_input,
         deprecated_conv_ex)
