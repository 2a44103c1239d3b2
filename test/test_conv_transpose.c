/* Transposed convolution 1-3d against a naive scatter loop written from the
 * definition (PyTorch's ConvTranspose: every input cell adds w times itself
 * to the outputs its taps land on), the dot-product identity
 * <conv(u), x> = <u, tconv(x)> against the convolution of the same weight,
 * finite differences and the adjoint; stride 1-3, dilation, output padding,
 * groups and depthwise, bias on and off, odd sizes. The distributed layer
 * against the sequential one on gathered tensors, and the distributed
 * convolution in depthwise form; refusals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

/* Spatial dimensions are the last nd of three (the others extent 1). */
typedef struct tgeom {
    int nd;
    int64_t n, c, co, g, in[3], k[3], s[3], p[3], a[3], d[3], out[3];
} tgeom;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static int64_t pick(int64_t lo, int64_t hi)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (int64_t)(rng % (uint64_t)(hi - lo + 1));
}

/* Output position of input i and tap t along a, or -1 outside y. */
static int64_t land(const tgeom *G, int a, int64_t i, int64_t t)
{
    int64_t o = i * G->s[a] - G->p[a] + t * G->d[a];
    return o >= 0 && o < G->out[a] ? o : -1;
}

/* Fill the channels and the windows (in, k, s, p, a, d set): the output
 * extents, and whether some tap of some input lands in y. */
static int finish_geom(tgeom *G)
{
    int ok = 1;
    for (int a = 0; a < 3; a++) {
        G->out[a] =
            (G->in[a] - 1) * G->s[a] - 2 * G->p[a] + G->d[a] * (G->k[a] - 1) + G->a[a] + 1;
        if (G->out[a] < 1)
            return 0;
        int lands = 0;
        for (int64_t i = 0; i < G->in[a]; i++)
            for (int64_t t = 0; t < G->k[a]; t++)
                lands |= land(G, a, i, t) >= 0;
        ok &= lands;
    }
    return ok;
}

static tgeom random_geom(int nd, int depthwise)
{
    tgeom G;
    do {
        G.nd = nd;
        G.n = pick(1, 3);
        G.g = pick(1, 3);
        G.c = depthwise ? G.g : G.g * pick(1, 3);
        G.co = G.g * pick(1, 3);
        for (int a = 0; a < 3; a++) {
            int used = a >= 3 - nd;
            G.in[a] = used ? pick(1, nd == 3 ? 5 : 9) : 1;
            G.k[a] = used ? pick(1, 4) : 1;
            G.s[a] = used ? pick(1, 3) : 1;
            G.d[a] = used ? pick(1, 2) : 1;
            G.p[a] = used ? pick(0, 3) : 0;
            /* below the stride or the dilation (PyTorch's rule) */
            G.a[a] = used ? pick(0, (G.s[a] > G.d[a] ? G.s[a] : G.d[a]) - 1) : 0;
        }
    } while (!finish_geom(&G));
    return G;
}

static void tdesc(const tgeom *G, int bias, ladle_conv_transpose_desc *d)
{
    ladle_conv_transpose_desc_init(d, G->nd, G->c, G->co, 1);
    d->groups = G->g;
    d->bias = bias;
    for (int i = 0; i < G->nd; i++) {
        int a = 3 - G->nd + i;
        d->kernel[i] = G->k[a];
        d->stride[i] = G->s[a];
        d->padding[i] = G->p[a];
        d->output_padding[i] = G->a[a];
        d->dilation[i] = G->d[a];
    }
}

static void shape_of(const tgeom *G, int64_t ch, const int64_t *sp, int64_t *s)
{
    s[0] = G->n;
    s[1] = ch;
    for (int i = 0; i < G->nd; i++)
        s[2 + i] = sp[3 - G->nd + i];
}

static ladle_op *make(const tgeom *G, int bias, ladle_dtype dt)
{
    ladle_conv_transpose_desc d;
    int64_t xs[5];
    ladle_op *op = NULL;
    tdesc(G, bias, &d);
    shape_of(G, G->c, G->in, xs);
    LT_OK(ladle_conv_transpose_create(&d, xs, dt, lt_device(), 7, &op));
    return op;
}

/* The definition, scattered: y[n, g Co_g + j, o] += w[ci, j, t] x[n, ci, i]
 * for ci in group g and o = i s - p + t d inside y; and the gradients of
 * the same sums. */
static void naive(const tgeom *G, const double *x, const double *w, const double *b,
                  const double *dy, double *y, double *dx, double *dw, double *db)
{
    int64_t cg = G->c / G->g, cog = G->co / G->g, kv = G->k[0] * G->k[1] * G->k[2];
    int64_t pin = G->in[0] * G->in[1] * G->in[2], pout = G->out[0] * G->out[1] * G->out[2];
    for (int64_t i = 0; i < G->n * G->co * pout; i++)
        y[i] = b ? b[i / pout % G->co] : 0;
    for (int64_t i = 0; i < G->n * G->c * pin; i++)
        dx[i] = 0;
    for (int64_t i = 0; i < G->c * cog * kv; i++)
        dw[i] = 0;
    for (int64_t j = 0; j < G->co; j++)
        db[j] = 0;
    for (int64_t i = 0; i < G->n * G->co * pout; i++)
        db[i / pout % G->co] += dy[i];
    for (int64_t n = 0; n < G->n; n++)
        for (int64_t ci = 0; ci < G->c; ci++)
            for (int64_t q = 0; q < pin; q++) {
                int64_t iq[3] = {q / (G->in[1] * G->in[2]), q / G->in[2] % G->in[1],
                                 q % G->in[2]};
                int64_t xi = (n * G->c + ci) * pin + q;
                for (int64_t j = 0; j < cog; j++)
                    for (int64_t t = 0; t < kv; t++) {
                        int64_t tk[3] = {t / (G->k[1] * G->k[2]), t / G->k[2] % G->k[1],
                                         t % G->k[2]};
                        int64_t o[3], inside = 1;
                        for (int a = 0; a < 3; a++)
                            inside &= (o[a] = land(G, a, iq[a], tk[a])) >= 0;
                        if (!inside)
                            continue;
                        int64_t co = ci / cg * cog + j;
                        int64_t yi =
                            ((n * G->co + co) * G->out[0] + o[0]) * G->out[1] * G->out[2] +
                            o[1] * G->out[2] + o[2];
                        int64_t wi = (ci * cog + j) * kv + t;
                        y[yi] += w[wi] * x[xi];
                        dx[xi] += w[wi] * dy[yi];
                        dw[wi] += x[xi] * dy[yi];
                    }
            }
}

static double max_diff(const double *a, const double *b, int64_t n)
{
    double e = 0;
    for (int64_t i = 0; i < n; i++)
        e = fmax(e, fabs(a[i] - b[i]) / (1 + fabs(b[i])));
    return e;
}

static void compare_with_naive(const tgeom *G, int bias, ladle_dtype dt, double tol,
                               const char *what)
{
    ladle_op *op = make(G, bias, dt);
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    ladle_tensor *dy = lt_op_tensor(op, 1), *dx = lt_op_tensor(op, 0);
    LT_OK(ladle_tensor_fill_random(x, 3, 0));
    LT_OK(ladle_tensor_fill_random(dy, 3, 1));
    ladle_ctx *ctx = lt_forward_backward(op, x, y, dy, dx);
    LT_OK(ladle_layer_backward_weight(op, ctx, dy));
    int64_t nx = ladle_tensor_numel(x), ny = ladle_tensor_numel(y);
    int64_t nw = ladle_tensor_numel(ladle_op_param(op, 0));
    double *xd = lt_values(x), *wd = lt_values(ladle_op_param(op, 0)), *dyd = lt_values(dy);
    double *bd = bias ? lt_values(ladle_op_param(op, 1)) : NULL;
    double *yr = calloc((size_t)ny, sizeof(double)),
           *dxr = calloc((size_t)nx, sizeof(double));
    double *dwr = calloc((size_t)nw, sizeof(double)),
           *dbr = calloc((size_t)G->co, sizeof(double));
    naive(G, xd, wd, bd, dyd, yr, dxr, dwr, dbr);
    double *yv = lt_values(y), *dxv = lt_values(dx), *dwv = lt_values(ladle_op_grad(op, 0));
    double ey = max_diff(yv, yr, ny), ex = max_diff(dxv, dxr, nx),
           ew = max_diff(dwv, dwr, nw);
    double eb = 0;
    if (bias) {
        double *dbv = lt_values(ladle_op_grad(op, 1));
        eb = max_diff(dbv, dbr, G->co);
        free(dbv);
    }
    LT_ASSERT(ey < tol && ex < tol && ew < tol && eb < tol,
              "%s: nd %d n %lld c %lld->%lld g %lld s %lld p %lld a %lld d %lld k %lld: "
              "errors y %.1e dx %.1e dw %.1e db %.1e",
              what, G->nd, (long long)G->n, (long long)G->c, (long long)G->co,
              (long long)G->g, (long long)G->s[2], (long long)G->p[2], (long long)G->a[2],
              (long long)G->d[2], (long long)G->k[2], ey, ex, ew, eb);
    free(yv), free(dxv), free(dwv), free(xd), free(wd), free(bd), free(dyd);
    free(yr), free(dxr), free(dwr), free(dbr);
    ladle_ctx_destroy(&ctx);
    LT_DESTROY(&x, &y, &dx, &dy);
    ladle_op_destroy(&op);
}

static void dot_identity(const tgeom *G);

START_TEST(against_naive)
{
    for (int trial = 0; trial < 60; trial++) {
        tgeom G = random_geom(1 + trial % 3, trial % 5 == 4);
        compare_with_naive(&G, trial % 2 == 0, LADLE_F64, 1e-12, "f64");
        if (trial % 6 == 0)
            compare_with_naive(&G, 1, LADLE_F32, 1e-4, "f32");
    }
    /* by hand: PyTorch's ConvTranspose2d(4, 6, 3, stride 2, padding 1,
     * output_padding 1, groups 2) doubles a 5 x 7 plane to 10 x 14 */
    tgeom up = {2,         2,         4,         6,         2,         {1, 5, 7},
                {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1}, {0}};
    LT_ASSERT(finish_geom(&up) && up.out[1] == 10 && up.out[2] == 14,
              "upsampling geometry");
    compare_with_naive(&up, 1, LADLE_F64, 1e-12, "x2 upsampling");
    /* output padding at least the stride, below the dilation: the far
     * columns of y take no input */
    tgeom far = {1,         2,         2,         3,         1,         {1, 1, 6},
                 {1, 1, 3}, {1, 1, 1}, {0, 0, 1}, {0, 0, 2}, {1, 1, 3}, {0}};
    LT_ASSERT(finish_geom(&far) && far.out[2] == 12,
              "output padding 2, stride 1, dilation 3");
    compare_with_naive(&far, 1, LADLE_F64, 1e-12, "output padding above the stride");
    dot_identity(&far);
    /* a 3-d depthwise layer with stride 3 and dilation 2 */
    tgeom dw = {3,         1,         3,         6,         3,         {3, 4, 2},
                {2, 3, 2}, {3, 1, 2}, {1, 0, 1}, {2, 0, 1}, {2, 2, 1}, {0}};
    LT_ASSERT(finish_geom(&dw), "depthwise geometry");
    compare_with_naive(&dw, 1, LADLE_F64, 1e-12, "3-d depthwise");
}
END_TEST

/* <C u, x> = <u, T x> with C the convolution C_out -> C_in of T's weight. */
static void dot_identity(const tgeom *G)
{
    ladle_op *t = make(G, 0, LADLE_F64), *c = NULL;
    ladle_conv_desc cd;
    int64_t us[5];
    ladle_conv_desc_init(&cd, G->nd, G->co, G->c, 1);
    cd.groups = G->g;
    cd.bias = 0;
    for (int i = 0; i < G->nd; i++) {
        int a = 3 - G->nd + i;
        cd.kernel[i] = G->k[a];
        cd.stride[i] = G->s[a];
        cd.padding[i] = G->p[a];
        cd.dilation[i] = G->d[a];
    }
    shape_of(G, G->co, G->out, us);
    LT_OK(ladle_conv_create(&cd, us, LADLE_F64, lt_device(), 1, &c));
    LT_OK(ladle_tensor_copy(ladle_op_param(c, 0), ladle_op_param(t, 0)));
    ladle_tensor *u = lt_op_tensor(c, 0), *cu = lt_op_tensor(c, 1);
    ladle_tensor *x = lt_op_tensor(t, 0), *tx = lt_op_tensor(t, 1);
    LT_OK(ladle_tensor_fill_random(u, 11, 0));
    LT_OK(ladle_tensor_fill_random(x, 11, 1));
    LT_OK(ladle_op_forward(c, u, cu));
    LT_OK(ladle_op_forward(t, x, tx));
    /* C's output may be longer than x (an output padding of at least the
     * stride): x then meets the leading cells of each row */
    int cn;
    int64_t cs[5], ce[3] = {1, 1, 1};
    LT_OK(ladle_op_y_shape(c, &cn, cs));
    for (int i = 0; i < G->nd; i++)
        ce[3 - G->nd + i] = cs[2 + i];
    double *cuv = lt_values(cu), *xv = lt_values(x), *uv = lt_values(u),
           *txv = lt_values(tx);
    double lhs = 0, rhs = 0, scale = 0;
    int64_t pin = G->in[0] * G->in[1] * G->in[2];
    for (int64_t i = 0; i < ladle_tensor_numel(x); i++) {
        int64_t q = i % pin, nc = i / pin;
        int64_t a0 = q / (G->in[1] * G->in[2]), a1 = q / G->in[2] % G->in[1],
                a2 = q % G->in[2];
        double v = cuv[((nc * ce[0] + a0) * ce[1] + a1) * ce[2] + a2];
        lhs += v * xv[i];
        scale += fabs(v * xv[i]);
    }
    for (int64_t i = 0; i < ladle_tensor_numel(u); i++)
        rhs += uv[i] * txv[i];
    LT_ASSERT(fabs(lhs - rhs) <= 1e-13 * fmax(scale, 1e-300),
              "<C u, x> %.17g, <u, T x> %.17g", lhs, rhs);
    free(cuv), free(xv), free(uv), free(txv);
    LT_DESTROY(&u, &cu, &x, &tx);
    ladle_op_destroy(&c);
    ladle_op_destroy(&t);
}

START_TEST(adjoint_of_conv)
{
    for (int trial = 0; trial < 30; trial++) {
        tgeom G = random_geom(1 + trial % 3, trial % 4 == 3);
        dot_identity(&G);
        if (trial % 3 == 0) {
            ladle_op *op = make(&G, 0, LADLE_F64);
            lt_adjoint_ok(op, 5, "transposed conv without bias");
            ladle_op_destroy(&op);
        }
    }
}
END_TEST

START_TEST(gradients)
{
    for (int trial = 0; trial < 9; trial++) {
        tgeom G = random_geom(1 + trial % 3, trial % 3 == 2);
        ladle_op *op = make(&G, 1, LADLE_F64);
        ladle_gradient_result r;
        LT_OK(ladle_gradient_test(op, 3, 100, &r));
        LT_ASSERT(r.input_error < 1e-6 && r.max_param_error < 1e-6,
                  "transposed conv gradients %.1e %.1e", r.input_error, r.max_param_error);
        ladle_op_destroy(&op);
    }
}
END_TEST

/* A smaller batch in a call gives the first images' y, and the weight
 * bound to caller memory is the one the layer reads. */
START_TEST(batch_and_binding)
{
    tgeom G = random_geom(2, 0);
    G.n = 3;
    ladle_op *op = make(&G, 1, LADLE_F64);
    ladle_tensor *w = ladle_op_param(op, 0);
    int wn = ladle_tensor_ndim(w);
    const int64_t *ws = ladle_tensor_shape(w);
    ladle_tensor *mine = lt_tensor(LADLE_F64, wn, ws), *mg = lt_tensor(LADLE_F64, wn, ws);
    LT_OK(ladle_tensor_copy(mine, w));
    ladle_tensor *x = lt_op_tensor(op, 0), *y1 = lt_op_tensor(op, 1),
                 *y2 = lt_op_tensor(op, 1);
    LT_OK(ladle_tensor_fill_random(x, 4, 0));
    LT_OK(ladle_op_forward(op, x, y1));
    int64_t xs1[4] = {1, G.c, G.in[1], G.in[2]}, ys1[4] = {1, G.co, G.out[1], G.out[2]};
    ladle_tensor *x1 = lt_tensor(LADLE_F64, 4, xs1), *y11 = lt_tensor(LADLE_F64, 4, ys1);
    double *xv = lt_values(x), *yv = lt_values(y1);
    lt_store(x1, xv);
    LT_OK(ladle_op_forward(op, x1, y11));
    double *y1v = lt_values(y11);
    LT_ASSERT(max_diff(y1v, yv, ladle_tensor_numel(y11)) == 0,
              "a batch of 1: the first image");
    free(xv), free(yv), free(y1v);
    LT_OK(ladle_op_bind_param(op, 0, ladle_tensor_data(mine), ladle_tensor_data(mg)));
    LT_OK(ladle_op_forward(op, x, y2));
    LT_ASSERT(lt_same_values(y1, y2), "the bound weight gives the same y");
    LT_OK(ladle_tensor_fill(mine, 0.0));
    LT_OK(ladle_op_forward(op, x, y2));
    LT_ASSERT(fabs(lt_get(y2, 0) - lt_get(ladle_op_param(op, 1), 0)) < 1e-15,
              "a zero bound weight leaves the bias alone");
    ladle_op_destroy(&op);
    LT_DESTROY(&x, &y1, &y2, &x1, &y11, &mine, &mg);
}
END_TEST

START_TEST(bad_input)
{
    ladle_conv_transpose_desc d;
    int64_t xs[4] = {2, 4, 5, 5};
    ladle_op *op = NULL;
    ladle_conv_transpose_desc_init(&d, 2, 4, 6, 3);
    LT_FAILS(ladle_conv_transpose_create(NULL, xs, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_NULL);
    d.size = 0;
    LT_FAILS(ladle_conv_transpose_create(&d, xs, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_ARG);
    ladle_conv_transpose_desc_init(&d, 2, 4, 6, 3);
    d.padding_mode = LADLE_PAD_REFLECT;
    LT_FAILS_SAYING(ladle_conv_transpose_create(&d, xs, LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_UNSUPPORTED, "zeros only");
    d.padding_mode = (ladle_padding_mode)9;
    LT_FAILS_SAYING(ladle_conv_transpose_create(&d, xs, LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "padding mode 9");
    d.padding_mode = LADLE_PAD_ZEROS;
    d.groups = 4; /* 6 output channels */
    LT_FAILS_SAYING(ladle_conv_transpose_create(&d, xs, LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "groups 4");
    d.groups = 2;
    xs[1] = 3;
    LT_FAILS_SAYING(ladle_conv_transpose_create(&d, xs, LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_SHAPE, "x has 3 channels");
    xs[1] = 4;
    d.output_padding[1] = 1; /* stride 1, dilation 1 */
    LT_FAILS_SAYING(ladle_conv_transpose_create(&d, xs, LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "output padding 1 must be below");
    d.dilation[1] = 2; /* below the dilation: taken, 5 + 4 + 1 columns */
    LT_OK(ladle_conv_transpose_create(&d, xs, LADLE_F64, lt_device(), 1, &op));
    int yn;
    int64_t ys[5];
    LT_OK(ladle_op_y_shape(op, &yn, ys));
    LT_ASSERT(ys[3] == 10, "output padding 1 below the dilation: %lld columns",
              (long long)ys[3]);
    ladle_op_destroy(&op);
    d.output_padding[1] = 0;
    d.dilation[1] = 1;
    d.padding[0] = 4; /* (5 - 1) + 2 + 1 - 8 */
    LT_FAILS_SAYING(ladle_conv_transpose_create(&d, xs, LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_SHAPE, "below 1");
    d.padding[0] = -1;
    LT_FAILS(ladle_conv_transpose_create(&d, xs, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_ARG);
    d.padding[0] = 0;
    d.kernel[1] = 0;
    LT_FAILS(ladle_conv_transpose_create(&d, xs, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_ARG);
    d.kernel[1] = 3;
    d.stride[0] = INT64_MAX / 2;
    LT_FAILS_SAYING(ladle_conv_transpose_create(&d, xs, LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "overflows");
    d.stride[0] = 0; /* zeroed: 1 */
    d.flags = 0x100;
    LT_FAILS_SAYING(ladle_conv_transpose_create(&d, xs, LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "unknown flags");
    d.flags = LADLE_CHECKED | LADLE_OVERLAP_HALO; /* the distributed layer's */
    d.nd = 4;
    LT_FAILS(ladle_conv_transpose_create(&d, xs, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_ARG);
    d.nd = 2;
    LT_FAILS(ladle_conv_transpose_create(&d, xs, LADLE_I64, lt_device(), 1, &op),
             LADLE_ERR_DTYPE);
    LT_ASSERT(op == NULL, "a refused creation left an op");
    LT_OK(ladle_conv_transpose_create(&d, xs, LADLE_F64, lt_device(), 1, &op));
    LT_ASSERT(ladle_op_kind_of(op) == LADLE_OP_CONV_TRANSPOSE, "its kind");
    LT_OK(ladle_op_y_shape(op, &yn, ys));
    LT_ASSERT(ys[2] == 7 && ys[3] == 7, "stride 0 means 1: 7 x 7");
    ladle_op_destroy(&op);
}
END_TEST

/* ---- distributed --------------------------------------------------- */

typedef struct dcase {
    int nd;
    int grid[5];  /* p_x */
    int64_t x[5]; /* the global x of the transposed convolution */
    int64_t co, k, s, p, a, d, groups;
    unsigned flags;
} dcase;

static const dcase dcases[] = {
    {2, {1, 1, 1, 1}, {2, 3, 5, 4}, 4, 3, 2, 1, 1, 1, 1, 0},
    {2, {1, 1, 2, 1}, {2, 3, 5, 4}, 4, 3, 2, 1, 1, 1, 1, 0},
    {1, {1, 1, 2}, {2, 2, 9}, 3, 4, 1, 1, 0, 1, 1, 0},
    {1, {1, 1, 3}, {1, 2, 7}, 3, 3, 3, 0, 2, 2, 1, 0},
    {2, {1, 1, 2, 2}, {1, 4, 5, 6}, 6, 3, 2, 1, 1, 1, 2, 0},
    {2, {1, 1, 1, 2}, {2, 4, 4, 7}, 8, 3, 1, 1, 0, 2, 4, 0}, /* depthwise */
    {2, {2, 1, 1, 2}, {2, 2, 4, 5}, 2, 2, 2, 0, 1, 1, 1, 0},
    {3, {1, 1, 2, 1, 2}, {1, 2, 3, 3, 4}, 2, 3, 2, 1, 1, 1, 1, 0},
    {2, {1, 1, 2, 3}, {1, 2, 6, 7}, 3, 3, 1, 1, 0, 1, 1, 0},
    {2, {1, 1, 3, 2}, {1, 3, 4, 5}, 3, 3, 2, 1, 1, 1, 3, 0},
    {2, {1, 1, 2, 2}, {2, 2, 6, 6}, 3, 3, 1, 1, 0, 1, 1, LADLE_OVERLAP_HALO},
    {2, {2, 1, 1, 1}, {4, 3, 5, 5}, 2, 3, 2, 1, 1, 1, 1, 0}, /* the batch alone */
    {1, {1, 1, 4}, {1, 1, 3}, 2, 2, 1, 0, 0, 1, 1, 0},       /* ranks with 0 or 1 cells */
};
#define NDCASES (int)(sizeof dcases / sizeof dcases[0])

static void dcase_desc(const dcase *c, int bias, ladle_conv_transpose_desc *d)
{
    ladle_conv_transpose_desc_init(d, c->nd, c->x[1], c->co, c->k);
    for (int i = 0; i < c->nd; i++) {
        d->stride[i] = c->s;
        d->padding[i] = c->p;
        d->output_padding[i] = c->a;
        d->dilation[i] = c->d;
    }
    d->groups = c->groups;
    d->bias = bias;
    d->flags = c->flags;
}

START_TEST(dist_equivalence)
{
    for (int k = 0; k < NDCASES; k++) {
        const dcase *c = &dcases[k];
        if (lt_ranks_of(2 + c->nd, c->grid) > lt_size)
            continue;
        ladle_partition *p = lt_partition(2 + c->nd, c->grid, 0);
        for (int t = 0; t < 3; t++) {
            ladle_dtype dt = t == 2 ? LADLE_F32 : LADLE_F64;
            ladle_conv_transpose_desc d;
            dcase_desc(c, t != 1, &d);
            ladle_op *dist = NULL, *seq = NULL;
            LT_OK(ladle_dist_conv_transpose_create(&d, p, c->x, dt, lt_device(),
                                                   21 + (uint64_t)k, &dist));
            d.flags = 0;
            LT_OK(ladle_conv_transpose_create(&d, c->x, dt, lt_device(), 21 + (uint64_t)k,
                                              &seq));
            char what[80];
            snprintf(what, sizeof what, "transposed conv case %d (%s%s)", k,
                     t == 2 ? "f32" : "f64", t == 1 ? ", no bias" : "");
            lt_equivalent(dist, seq, 400 + (uint64_t)k, t == 2 ? 1e-4 : 1e-10, what);
            if (t == 1)
                lt_adjoint_ok(dist, 500 + (uint64_t)k, what);
            ladle_op_destroy(&dist);
            ladle_op_destroy(&seq);
        }
        ladle_partition_destroy(&p);
    }
}
END_TEST

/* The weight pass without a backward before it (the first layer: dx NULL)
 * runs the convolution itself: the same gradients. */
START_TEST(dist_weight_pass_alone)
{
    const dcase *c = &dcases[4];
    if (lt_ranks_of(2 + c->nd, c->grid) > lt_size)
        return;
    ladle_partition *p = lt_partition(2 + c->nd, c->grid, 0);
    ladle_conv_transpose_desc d;
    dcase_desc(c, 1, &d);
    ladle_op *op = NULL;
    LT_OK(ladle_dist_conv_transpose_create(&d, p, c->x, LADLE_F64, lt_device(), 3, &op));
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1),
                 *dy = lt_op_tensor(op, 1);
    ladle_tensor *dx = lt_op_tensor(op, 0);
    LT_OK(ladle_tensor_fill_random(x, 8, (uint64_t)lt_rank));
    LT_OK(ladle_tensor_fill_random(dy, 9, (uint64_t)lt_rank));
    ladle_tensor *g[2][2] = {{NULL}};
    for (int pass = 0; pass < 2; pass++) {
        ladle_ctx *ctx = NULL;
        LT_OK(ladle_op_zero_grad(op));
        LT_OK(ladle_ctx_create(op, &ctx));
        LT_OK(ladle_layer_forward(op, ctx, x, y));
        LT_OK(ladle_layer_backward(op, ctx, dy, pass ? NULL : dx));
        LT_OK(ladle_layer_backward_weight(op, ctx, dy));
        for (int i = 0; i < 2; i++) {
            const ladle_tensor *gi = ladle_op_grad(op, i);
            g[pass][i] =
                lt_tensor(LADLE_F64, ladle_tensor_ndim(gi), ladle_tensor_shape(gi));
            LT_OK(ladle_tensor_copy(g[pass][i], gi));
        }
        ladle_ctx_destroy(&ctx);
    }
    LT_ASSERT(lt_same_values(g[0][0], g[1][0]) && lt_same_values(g[0][1], g[1][1]),
              "the weight pass alone gives the gradients of one after the backward");
    LT_DESTROY(&x, &y, &dy, &dx, &g[0][0], &g[0][1], &g[1][0], &g[1][1]);
    ladle_op_destroy(&op);
    ladle_partition_destroy(&p);
}
END_TEST

/* The distributed convolution in depthwise form (groups = C_in, C_out a
 * multiple), against the sequential one. */
START_TEST(dist_conv_depthwise)
{
    static const struct {
        int nd, grid[5];
        int64_t x[5], mult, k, s, p;
    } cases[] = {
        {2, {1, 1, 2, 1}, {2, 3, 9, 7}, 2, 3, 1, 1},
        {2, {1, 1, 2, 2}, {1, 4, 8, 9}, 1, 3, 2, 1},
        {1, {1, 1, 3}, {2, 2, 13}, 3, 5, 1, 2},
        {3, {1, 1, 1, 2, 2}, {1, 2, 4, 6, 6}, 2, 3, 1, 1},
        {2, {1, 1, 3, 2}, {1, 3, 10, 8}, 2, 3, 1, 1},
    };
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
        if (lt_ranks_of(2 + cases[k].nd, cases[k].grid) > lt_size)
            continue;
        ladle_partition *p = lt_partition(2 + cases[k].nd, cases[k].grid, 0);
        ladle_conv_desc d;
        int64_t c = cases[k].x[1];
        ladle_conv_desc_init(&d, cases[k].nd, c, c * cases[k].mult, cases[k].k);
        d.groups = c;
        for (int i = 0; i < cases[k].nd; i++) {
            d.stride[i] = cases[k].s;
            d.padding[i] = cases[k].p;
        }
        ladle_op *dist = NULL, *seq = NULL;
        LT_OK(ladle_dist_conv_create(&d, p, cases[k].x, LADLE_F64, lt_device(), 5, &dist));
        LT_OK(ladle_conv_create(&d, cases[k].x, LADLE_F64, lt_device(), 5, &seq));
        char what[64];
        snprintf(what, sizeof what, "depthwise conv case %d", k);
        lt_equivalent(dist, seq, 600 + (uint64_t)k, 1e-10, what);
        ladle_op_destroy(&dist);
        ladle_op_destroy(&seq);
        ladle_partition_destroy(&p);
    }
}
END_TEST

START_TEST(dist_bad_input)
{
    int grid[4] = {1, 1, lt_size, 1};
    ladle_partition *p = lt_partition(4, grid, 0);
    int64_t xs[4] = {1, 2, 4 * lt_size, 5};
    ladle_conv_transpose_desc d;
    ladle_op *op = NULL;
    ladle_conv_transpose_desc_init(&d, 2, 2, 3, 3);
    LT_FAILS(ladle_dist_conv_transpose_create(NULL, p, xs, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_NULL);
    d.padding_mode = LADLE_PAD_CIRCULAR;
    LT_FAILS_SAYING(
        ladle_dist_conv_transpose_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op),
        LADLE_ERR_UNSUPPORTED, "zeros only");
    d.padding_mode = LADLE_PAD_ZEROS;
    d.output_padding[0] = 2;
    d.stride[0] = 2;
    LT_FAILS_SAYING(
        ladle_dist_conv_transpose_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op),
        LADLE_ERR_ARG, "output padding 2");
    d.stride[0] = 1;
    d.output_padding[0] = 1;
    d.dilation[0] = 2; /* the sequential layer takes it */
    LT_FAILS_SAYING(
        ladle_dist_conv_transpose_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op),
        LADLE_ERR_UNSUPPORTED, "not below the stride");
    d.output_padding[0] = 0;
    d.dilation[0] = 1;
    xs[1] = 5;
    LT_FAILS(ladle_dist_conv_transpose_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_SHAPE);
    xs[1] = 2;
    d.nd = 1; /* p_x has four dimensions */
    LT_FAILS(ladle_dist_conv_transpose_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_PARTITION);
    d.nd = 2;
    d.flags = 0x100;
    LT_FAILS(ladle_dist_conv_transpose_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_ARG);
    d.flags = 0;
    /* ranks that disagree on the arguments: refused on every rank */
    d.kernel[1] = lt_size > 1 && lt_rank == 1 ? 2 : 3;
    if (lt_size > 1)
        LT_FAILS(
            ladle_dist_conv_transpose_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op),
            LADLE_ERR_ARG);
    d.kernel[1] = 3;
    LT_ASSERT(op == NULL, "a refused creation left an op");
    LT_OK(ladle_dist_conv_transpose_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op));
    LT_ASSERT(ladle_op_kind_of(op) == LADLE_OP_DIST_CONV_TRANSPOSE, "its kind");
    ladle_op_destroy(&op);
    ladle_partition_destroy(&p);
}
END_TEST

LT_SUITE("conv_transpose", "core", 600, against_naive, adjoint_of_conv, gradients,
         batch_and_binding, bad_input, dist_equivalence, dist_weight_pass_alone,
         dist_conv_depthwise, dist_bad_input)
