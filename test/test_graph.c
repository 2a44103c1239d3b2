/* Graph networks (ladle/graph.h): a residual block and a branch/concat/split
 * graph with two weighted losses equal their sequential twins on the
 * gathered tensors (forward, loss, input and weight gradients; f64, 1e-10)
 * on data-parallel, spatial, channel and mixed layouts; an add whose
 * inputs come on different layouts (an inserted repartition) equals its
 * twin; 5 SGD steps of a distributed residual graph equal one rank's;
 * fan-out gradients agree with central differences of the total loss;
 * checkpoints move between layouts; bad graphs and calls out of order are
 * refused with their status on every rank. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define N 6
#define S 6

/* A layout: batch blocks, tile rows and columns, channel blocks (pc > 1:
 * the channel-split convolution over a weight grid). */
typedef struct lay {
    int d, ph, pw, pc;
} lay;

static int need(const lay *l) { return l->pc > 1 ? l->pc * l->pc : l->d * l->ph * l->pw; }

/* The parts of a graph under test and the partitions it is laid out on. */
typedef struct built {
    ladle_graph *g;
    ladle_partition *px, *pw;
    int in, out, in2;
} built;

static void built_free(built *b)
{
    ladle_graph_destroy(&b->g);
    ladle_partition_destroy(&b->px);
    ladle_partition_destroy(&b->pw);
}

/* This rank's box of value id (the whole tensor without a layout). */
static void value_box(const ladle_graph *g, int id, const ladle_tensor *global, int64_t *off)
{
    const ladle_layout *l = ladle_graph_value_layout(g, id);
    int nd = ladle_tensor_ndim(global);
    for (int d = 0; d < nd; d++)
        off[d] = 0;
    if (l)
        LT_OK(ladle_layout_box(l, LADLE_SELF, off, NULL));
}

/* An op on the last value, with the graph's device and dtype. */
static int add_layer(built *b, const char *name, ladle_op *op, int x)
{
    int id = -1;
    LT_OK(ladle_graph_add_layer(b->g, name, op, x, &id));
    return id;
}

static int relu(built *b, const char *name, const ladle_op *prev, int x)
{
    int nd;
    int64_t s[LADLE_MAX_NDIM];
    ladle_op *op = NULL;
    LT_OK(ladle_op_y_shape(prev, &nd, s));
    LT_OK(ladle_activation_create(LADLE_RELU, 0, nd, s, LADLE_F64, lt_device(), &op));
    return add_layer(b, name, op, x);
}

/* A convolution C_in -> C_out (kernel k, padding k/2) of x (global shape
 * xs) on layout l, or sequential (l NULL). */
static ladle_op *conv(const built *b, const lay *l, const int64_t *xs, int64_t co, int64_t k,
                      uint64_t seed)
{
    ladle_conv_desc c;
    ladle_op *op = NULL;
    ladle_conv_desc_init(&c, 2, xs[1], co, k);
    c.padding[0] = c.padding[1] = k / 2;
    if (l == NULL)
        LT_OK(ladle_conv_create(&c, xs, LADLE_F64, lt_device(), seed, &op));
    else if (l->pc > 1)
        LT_OK(ladle_dist_conv_grid_create(
            &c, &(ladle_dist_partitions){.x = b->px, .w = b->pw, .y = b->px}, xs, LADLE_F64,
            lt_device(), seed, &op));
    else
        LT_OK(ladle_dist_conv_create(&c, b->px, xs, LADLE_F64, lt_device(), seed, &op));
    return op;
}

static ladle_op *bnorm(const built *b, const lay *l, const int64_t *xs)
{
    ladle_batchnorm_desc d;
    ladle_op *op = NULL;
    ladle_batchnorm_desc_init(&d, xs[1]);
    if (l == NULL)
        LT_OK(ladle_batchnorm_create(&d, 4, xs, LADLE_F64, lt_device(), &op));
    else
        LT_OK(ladle_dist_batchnorm_create(&d, b->px, xs, LADLE_F64, lt_device(), &op));
    return op;
}

static ladle_op *mse(const built *b, const lay *l, const int64_t *xs)
{
    ladle_op *op = NULL;
    if (l == NULL)
        LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 4, xs,
                                LADLE_F64, lt_device(), &op));
    else
        LT_OK(ladle_dist_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0),
                                     b->px, xs, LADLE_F64, lt_device(), &op));
    return op;
}

/* The partitions of layout l (none for NULL) and the input's layout. */
static ladle_layout *partitions(built *b, const lay *l, const int64_t *xs)
{
    ladle_layout *lx = NULL;
    if (l == NULL)
        return NULL;
    if (l->pc > 1) {
        b->px = lt_partition(4, (int[]){1, l->pc, 1, 1}, 0);
        b->pw = lt_partition(4, (int[]){l->pc, l->pc, 1, 1}, 0);
    } else
        b->px = lt_partition(4, (int[]){l->d, 1, l->ph, l->pw}, 0);
    LT_OK(ladle_layout_create_balanced(b->px, 4, xs, &lx));
    return lx;
}

/* x -> conv-bn-relu-conv-bn, + x, relu, MSE. */
static built residual(const lay *l, int64_t c)
{
    built b = {0};
    int64_t xs[4] = {N, c, S, S};
    LT_OK(ladle_graph_create(LADLE_F64, lt_device(), 0, &b.g));
    ladle_layout *lx = partitions(&b, l, xs);
    LT_OK(ladle_graph_add_input(b.g, "x", lx, 4, xs, &b.in));
    ladle_layout_destroy(&lx);
    ladle_op *c1 = conv(&b, l, xs, c, 3, 11);
    int v = add_layer(&b, "block.conv1", c1, b.in);
    v = add_layer(&b, "block.bn1", bnorm(&b, l, xs), v);
    ladle_op *bn1 = ladle_graph_layer(b.g, 0); /* not finalized: NULL */
    LT_ASSERT(bn1 == NULL, "a layer before finalize");
    v = relu(&b, "block.relu1", c1, v);
    v = add_layer(&b, "block.conv2", conv(&b, l, xs, c, 3, 12), v);
    v = add_layer(&b, "block.bn2", bnorm(&b, l, xs), v);
    int sum = -1;
    LT_OK(ladle_graph_add_add(b.g, "block.add", 2, (int[]){v, b.in}, &sum));
    b.out = relu(&b, "block.relu2", c1, sum);
    LT_OK(ladle_graph_add_loss(b.g, "mse", mse(&b, l, xs), b.out, 1.0, NULL));
    LT_OK(ladle_graph_set_outputs(b.g, 1, &b.out));
    LT_OK(ladle_graph_finalize(b.g));
    LT_OK(ladle_graph_set_training(b.g, 1));
    return b;
}

/* x -> (conv 3x3 -> 2 | conv 1x1 -> 3, relu) -> concat -> bn -> split
 * (4, 1) -> two MSE losses, weights 1 and 0.5. */
static built branches(const lay *l)
{
    built b = {0};
    int64_t xs[4] = {N, 3, S, S}, cs[4] = {N, 5, S, S};
    LT_OK(ladle_graph_create(LADLE_F64, lt_device(), 0, &b.g));
    ladle_layout *lx = partitions(&b, l, xs);
    LT_OK(ladle_graph_add_input(b.g, "x", lx, 4, xs, &b.in));
    ladle_layout_destroy(&lx);
    int a = add_layer(&b, "left", conv(&b, l, xs, 2, 3, 21), b.in);
    ladle_op *c = conv(&b, l, xs, 3, 1, 22);
    int r = add_layer(&b, "right", c, b.in);
    r = relu(&b, "right.relu", c, r);
    int cat = -1, parts[2];
    LT_OK(ladle_graph_add_concat(b.g, "cat", 2, (int[]){a, r}, 1, &cat));
    int n = add_layer(&b, "bn", bnorm(&b, l, cs), cat);
    LT_OK(ladle_graph_add_split(b.g, "split", n, 1, 2, (int64_t[]){4, 1}, parts));
    int64_t p0[4] = {N, 4, S, S}, p1[4] = {N, 1, S, S};
    LT_OK(ladle_graph_add_loss(b.g, "mse0", mse(&b, l, p0), parts[0], 1.0, NULL));
    LT_OK(ladle_graph_add_loss(b.g, "mse1", mse(&b, l, p1), parts[1], 0.5, NULL));
    b.out = parts[0];
    LT_OK(ladle_graph_set_outputs(b.g, 2, parts));
    LT_OK(ladle_graph_finalize(b.g));
    LT_OK(ladle_graph_set_training(b.g, 1));
    return b;
}

/* Every rank's block of a global tensor for value id (a tensor on the
 * test device; the caller destroys it). */
static ladle_tensor *block_of(const ladle_graph *g, int id, const ladle_tensor *global)
{
    int64_t off[LADLE_MAX_NDIM], shape[LADLE_MAX_NDIM];
    const ladle_layout *l = ladle_graph_value_layout(g, id);
    int nd = ladle_tensor_ndim(global);
    value_box(g, id, global, off);
    for (int d = 0; d < nd; d++)
        shape[d] = ladle_tensor_shape(global)[d];
    if (l)
        LT_OK(ladle_layout_box(l, LADLE_SELF, NULL, shape));
    ladle_tensor *t = lt_tensor(LADLE_F64, nd, shape);
    lt_box_extract(global, off, t);
    return t;
}

/* The targets of each loss of g: this rank's block of targets[k] (the
 * global tensors), for loss k reading value ids[k]. */
static double run(built *b, int ninputs, ladle_tensor *const X[], const int *in_ids, int nl,
                  ladle_tensor *const T[], const int *loss_in, int sync)
{
    ladle_tensor *xs[2], *ts[2];
    for (int k = 0; k < ninputs; k++)
        xs[k] = block_of(b->g, in_ids[k], X[k]);
    for (int k = 0; k < nl; k++)
        ts[k] = block_of(b->g, loss_in[k], T[k]);
    double loss = 0;
    LT_OK(ladle_graph_forward(b->g, ninputs, (const ladle_tensor *const *)xs, NULL));
    LT_OK(ladle_graph_loss(b->g, nl, (const ladle_tensor *const *)ts, &loss));
    LT_OK(ladle_graph_backward(b->g, sync));
    for (int k = 0; k < ninputs; k++)
        ladle_tensor_destroy(&xs[k]);
    for (int k = 0; k < nl; k++)
        ladle_tensor_destroy(&ts[k]);
    return loss;
}

/* The largest error of a value (or its gradient) of d against the global
 * tensor of the same value in the sequential twin r. */
static double value_err(const built *d, const built *r, int id, int grad)
{
    const ladle_tensor *a, *ref;
    int64_t off[LADLE_MAX_NDIM];
    if (grad) {
        LT_OK(ladle_graph_value_grad(d->g, id, &a));
        LT_OK(ladle_graph_value_grad(r->g, id, &ref));
    } else {
        LT_OK(ladle_graph_value(d->g, id, &a));
        LT_OK(ladle_graph_value(r->g, id, &ref));
    }
    value_box(d->g, id, ref, off);
    return lt_box_error(ref, off, a);
}

/* Every parameter (grad 0) or gradient (grad 1) shard of d against r's. */
static double param_err(const built *d, const built *r, int grad)
{
    double err = 0;
    LT_ASSERT(ladle_graph_num_params(d->g) == ladle_graph_num_params(r->g), "parameter counts");
    for (int i = 0; i < ladle_graph_num_layers(d->g); i++) {
        ladle_op *a = ladle_graph_layer(d->g, i), *s = ladle_graph_layer(r->g, i);
        for (int q = 0; q < ladle_op_num_params(a); q++) {
            int64_t off[LADLE_MAX_NDIM];
            LT_OK(ladle_op_param_shard(a, q, NULL, NULL, off, NULL));
            err = fmax(err, lt_box_error(grad ? ladle_op_grad(s, q) : ladle_op_param(s, q), off,
                                         grad ? ladle_op_grad(a, q) : ladle_op_param(a, q)));
        }
    }
    return err;
}

static const lay layouts[] = {
    {1, 1, 1, 1}, {2, 1, 1, 1}, {1, 2, 1, 1}, {1, 1, 2, 1}, {3, 1, 1, 1}, {1, 1, 1, 2},
    {2, 2, 1, 1}, {1, 2, 2, 1}, {2, 1, 2, 1}, {3, 2, 1, 1}, {2, 1, 3, 1},
};
#define NLAYOUTS ((int)(sizeof layouts / sizeof layouts[0]))

/* The loss as this rank knows it: a distributed loss only on its ranks. */
static int knows_loss(const built *b)
{
    return b->px == NULL || ladle_partition_active(b->px);
}

/* The residual block by hand, with layer calls and no graph: the
 * reference that ties the sequential graph (and through it every
 * distributed one) to the definition. y = relu(bn2(conv2(relu(bn1(conv1
 * x)))) + x); dx = (the block's backward) + dy of the skip. Errors of the
 * graph r's output, input gradient, weight gradients and loss into err. */
static double by_hand(const built *r, const ladle_tensor *X, const ladle_tensor *T, double loss)
{
    enum { L = 6 };
    ladle_op *ops[L], *mse_op = NULL;
    ladle_ctx *ctx[L + 1];
    ladle_tensor *y[L + 1], *dy[L + 1], *dx = lt_tensor(LADLE_F64, 4, ladle_tensor_shape(X));
    const int64_t *xs = ladle_tensor_shape(X);
    for (int i = 0; i < L; i++) {
        /* fresh layers with the graph's seeds: conv 11 and 12 */
        ladle_op *g = ladle_graph_layer(r->g, i);
        ladle_op_kind k = ladle_op_kind_of(g);
        if (k == LADLE_OP_CONV)
            ops[i] = conv(r, NULL, xs, xs[1], 3, i == 0 ? 11 : 12);
        else if (k == LADLE_OP_BATCHNORM)
            ops[i] = bnorm(r, NULL, xs);
        else
            LT_OK(ladle_activation_create(LADLE_RELU, 0, 4, xs, LADLE_F64, lt_device(), &ops[i]));
    }
    mse_op = mse(r, NULL, xs);
    for (int i = 0; i <= L; i++) {
        y[i] = lt_tensor(LADLE_F64, 4, xs);
        dy[i] = lt_tensor(LADLE_F64, 4, xs);
        LT_OK(ladle_ctx_create(i < L ? ops[i] : mse_op, &ctx[i]));
    }
    /* y[0..4] the block, y[5] = y[4] + x, y[6] = relu(y[5]) */
    const ladle_tensor *in = X;
    for (int i = 0; i < 5; i++, in = y[i - 1])
        LT_OK(ladle_layer_forward(ops[i], ctx[i], in, y[i]));
    LT_OK(ladle_add(y[4], X, y[5]));
    LT_OK(ladle_layer_forward(ops[5], ctx[5], y[5], y[6]));
    int64_t one = 1;
    ladle_tensor *lv = lt_tensor(LADLE_F64, 0, &one), *dl = lt_tensor(LADLE_F64, 0, &one);
    LT_OK(ladle_tensor_fill(dl, 1.0));
    LT_OK(ladle_loss_forward(mse_op, ctx[L], y[6], T, lv));
    LT_OK(ladle_loss_backward(mse_op, ctx[L], dl, dy[6]));
    LT_OK(ladle_layer_backward(ops[5], ctx[5], dy[6], dy[5]));
    LT_OK(ladle_layer_backward_weight(ops[5], ctx[5], dy[6]));
    for (int i = 4; i >= 0; i--) {
        const ladle_tensor *up = i == 4 ? dy[5] : dy[i + 1];
        LT_OK(ladle_layer_backward(ops[i], ctx[i], up, i ? dy[i] : dx));
        LT_OK(ladle_layer_backward_weight(ops[i], ctx[i], up));
    }
    /* the skip's share, added element by element */
    const ladle_tensor *gx, *gy;
    LT_OK(ladle_graph_value_grad(r->g, r->in, &gx));
    LT_OK(ladle_graph_value(r->g, r->out, &gy));
    double err = fabs(lt_get(lv, 0) - loss);
    for (int64_t i = 0; i < ladle_tensor_numel(X); i++) {
        double want = lt_get(dx, i) + lt_get(dy[5], i);
        err = fmax(err, fabs(lt_get(gx, i) - want) + fabs(lt_get(gy, i) - lt_get(y[6], i)));
    }
    for (int i = 0; i < L; i++)
        for (int q = 0; q < ladle_op_num_params(ops[i]); q++) {
            ladle_tensor *a = ladle_op_grad(ladle_graph_layer(r->g, i), q), *b = ladle_op_grad(ops[i], q);
            for (int64_t e = 0; e < ladle_tensor_numel(a); e++)
                err = fmax(err, fabs(lt_get(a, e) - lt_get(b, e)));
        }
    for (int i = 0; i <= L; i++) {
        ladle_tensor_destroy(&y[i]);
        ladle_tensor_destroy(&dy[i]);
        ladle_ctx_destroy(&ctx[i]);
        if (i < L)
            ladle_op_destroy(&ops[i]);
    }
    ladle_op_destroy(&mse_op);
    LT_DESTROY(&dx, &lv, &dl);
    return err;
}

START_TEST(residual_twin)
{
    int64_t c = 4, xs[4] = {N, c, S, S};
    ladle_tensor *X = lt_tensor(LADLE_F64, 4, xs), *T = lt_tensor(LADLE_F64, 4, xs);
    LT_OK(ladle_tensor_fill_random(X, 31, 0));
    LT_OK(ladle_tensor_fill_random(T, 32, 0));
    built r = residual(NULL, c);
    double lr = run(&r, 1, &X, &r.in, 1, &T, &r.out, 1);
    double eh = by_hand(&r, X, T, lr);
    LT_ASSERT(eh < 1e-12, "the sequential graph is %.2e from the block by hand", eh);
    for (int k = 0; k < NLAYOUTS; k++) {
        const lay *l = &layouts[k];
        if (need(l) > lt_size)
            continue;
        built d = residual(l, c);
        double ld = run(&d, 1, &X, &d.in, 1, &T, &d.out, 1);
        double ey = value_err(&d, &r, d.out, 0), edx = value_err(&d, &r, d.in, 1);
        double ew = param_err(&d, &r, 1);
        double el = knows_loss(&d) ? fabs(ld - lr) / (1 + fabs(lr)) : 0;
        LT_ASSERT(ey < 1e-10 && edx < 1e-10 && ew < 1e-10 && el < 1e-10 &&
                      ladle_graph_num_repartitions(d.g) == 0,
                  "layout %dx%dx%d c%d: y %.2e, dx %.2e, dW %.2e, loss %.2e, %d repartitions",
                  l->d, l->ph, l->pw, l->pc, ey, edx, ew, el, ladle_graph_num_repartitions(d.g));
        built_free(&d);
    }
    built_free(&r);
    ladle_tensor_destroy(&X);
    ladle_tensor_destroy(&T);
}
END_TEST

START_TEST(branch_twin)
{
    int64_t xs[4] = {N, 3, S, S}, t0[4] = {N, 4, S, S}, t1[4] = {N, 1, S, S};
    ladle_tensor *X = lt_tensor(LADLE_F64, 4, xs);
    ladle_tensor *T[2] = {lt_tensor(LADLE_F64, 4, t0), lt_tensor(LADLE_F64, 4, t1)};
    LT_OK(ladle_tensor_fill_random(X, 41, 0));
    LT_OK(ladle_tensor_fill_random(T[0], 42, 0));
    LT_OK(ladle_tensor_fill_random(T[1], 43, 0));
    built r = branches(NULL);
    int lin[2] = {r.out, r.out + 1};
    double lr = run(&r, 1, &X, &r.in, 2, T, lin, 1);
    for (int k = 0; k < NLAYOUTS; k++) {
        const lay *l = &layouts[k];
        if (need(l) > lt_size || l->pc > 1) /* the channels are concatenated */
            continue;
        built d = branches(l);
        double ld = run(&d, 1, &X, &d.in, 2, T, lin, 1);
        double ey = fmax(value_err(&d, &r, lin[0], 0), value_err(&d, &r, lin[1], 0));
        double edx = value_err(&d, &r, d.in, 1), ew = param_err(&d, &r, 1);
        double el = knows_loss(&d) ? fabs(ld - lr) / (1 + fabs(lr)) : 0;
        LT_ASSERT(ey < 1e-10 && edx < 1e-10 && ew < 1e-10 && el < 1e-10,
                  "layout %dx%dx%d: y %.2e, dx %.2e, dW %.2e, loss %.2e", l->d, l->ph, l->pw, ey,
                  edx, ew, el);
        built_free(&d);
    }
    built_free(&r);
    LT_DESTROY(&X, &T[0], &T[1]);
}
END_TEST

/* conv(x) + y, x batch-split on the first ranks, y split by rows on the
 * last ones: the graph repartitions y onto the convolution's layout. */
static built two_layouts(int dist)
{
    built b = {0};
    int64_t xs[4] = {N, 2, S, S};
    ladle_layout *lx = NULL, *ly = NULL;
    ladle_partition *py = NULL;
    LT_OK(ladle_graph_create(LADLE_F64, lt_device(), 0, &b.g));
    lay l = {lt_size >= 2 ? 2 : 1, 1, 1, 1};
    if (dist) {
        b.px = lt_partition(4, (int[]){l.d, 1, 1, 1}, 0);
        py = lt_partition(4, (int[]){1, 1, l.d, 1}, lt_size - l.d);
        LT_OK(ladle_layout_create_balanced(b.px, 4, xs, &lx));
        LT_OK(ladle_layout_create_balanced(py, 4, xs, &ly));
    }
    LT_OK(ladle_graph_add_input(b.g, "x", lx, 4, xs, &b.in));
    LT_OK(ladle_graph_add_input(b.g, "y", ly, 4, xs, &b.in2));
    int v = add_layer(&b, "conv", conv(&b, dist ? &l : NULL, xs, 2, 3, 51), b.in);
    LT_OK(ladle_graph_add_add(b.g, "add", 2, (int[]){v, b.in2}, &b.out));
    LT_OK(ladle_graph_add_loss(b.g, "mse", mse(&b, dist ? &l : NULL, xs), b.out, 2.0, NULL));
    LT_OK(ladle_graph_finalize(b.g));
    ladle_layout_destroy(&lx);
    ladle_layout_destroy(&ly);
    ladle_partition_destroy(&py);
    return b;
}

START_TEST(repartition_inserted)
{
    int64_t xs[4] = {N, 2, S, S};
    ladle_tensor *X[2] = {lt_tensor(LADLE_F64, 4, xs), lt_tensor(LADLE_F64, 4, xs)};
    ladle_tensor *T = lt_tensor(LADLE_F64, 4, xs);
    LT_OK(ladle_tensor_fill_random(X[0], 61, 0));
    LT_OK(ladle_tensor_fill_random(X[1], 62, 0));
    LT_OK(ladle_tensor_fill_random(T, 63, 0));
    built r = two_layouts(0), d = two_layouts(1);
    int ins[2] = {r.in, r.in2};
    double lr = run(&r, 2, X, ins, 1, &T, &r.out, 1);
    double ld = run(&d, 2, X, ins, 1, &T, &d.out, 1);
    double ey = value_err(&d, &r, d.out, 0);
    double edx = fmax(value_err(&d, &r, d.in, 1), value_err(&d, &r, d.in2, 1));
    double ew = param_err(&d, &r, 1), el = knows_loss(&d) ? fabs(ld - lr) / (1 + fabs(lr)) : 0;
    int want = lt_size >= 2 ? 1 : 0;
    LT_ASSERT(ey < 1e-10 && edx < 1e-10 && ew < 1e-10 && el < 1e-10 &&
                  ladle_graph_num_repartitions(d.g) == want,
              "y %.2e, dx %.2e, dW %.2e, loss %.2e, %d repartitions (want %d)", ey, edx, ew, el,
              ladle_graph_num_repartitions(d.g), want);
    built_free(&r);
    built_free(&d);
    LT_DESTROY(&X[0], &X[1], &T);
}
END_TEST

START_TEST(training_equivalence)
{
    int64_t c = 3, xs[4] = {N, c, S, S};
    ladle_tensor *X = lt_tensor(LADLE_F64, 4, xs), *T = lt_tensor(LADLE_F64, 4, xs);
    LT_OK(ladle_tensor_fill_random(X, 71, 0));
    LT_OK(ladle_tensor_fill_random(T, 72, 0));
    lay pick[] = {{3, 2, 1, 1}, {1, 2, 2, 1}, {2, 1, 1, 1}, {1, 1, 1, 1}};
    const lay *l = NULL;
    for (int k = 0; k < 4 && l == NULL; k++)
        if (need(&pick[k]) <= lt_size)
            l = &pick[k];
    built r = residual(NULL, c), d = residual(l, c);
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, LADLE_OPT_SGD, 0.05);
    od.momentum = 0.9;
    ladle_optimizer *or_ = NULL, *optd = NULL;
    LT_OK(ladle_optimizer_create(&od, &or_));
    LT_OK(ladle_optimizer_create(&od, &optd));
    LT_OK(ladle_optimizer_add_graph(or_, r.g));
    LT_OK(ladle_optimizer_add_graph(optd, d.g));
    for (int s = 0; s < 5; s++) {
        LT_OK(ladle_graph_zero_grad(r.g));
        LT_OK(ladle_graph_zero_grad(d.g));
        run(&r, 1, &X, &r.in, 1, &T, &r.out, 1);
        run(&d, 1, &X, &d.in, 1, &T, &d.out, 1);
        LT_OK(ladle_optimizer_step(or_));
        LT_OK(ladle_optimizer_step(optd));
    }
    double ew = param_err(&d, &r, 0);
    LT_ASSERT(ew < 1e-10, "layout %dx%dx%d c%d: parameters %.2e apart after 5 steps (%d buckets)",
              l->d, l->ph, l->pw, l->pc, ew, ladle_graph_buckets(d.g));
    ladle_optimizer_destroy(&or_);
    ladle_optimizer_destroy(&optd);
    built_free(&r);
    built_free(&d);
    ladle_tensor_destroy(&X);
    ladle_tensor_destroy(&T);
}
END_TEST

/* A sequential graph whose values are read several times: h by a
 * sequential layer (linear, tanh), by the add (twice), by the concat and by
 * a loss. */
typedef struct small {
    ladle_graph *g;
    int in, h, out[3];
} small;

static small small_graph(void)
{
    small s;
    ladle_op *a = NULL, *ta = NULL, *b = NULL, *tb = NULL, *l[3] = {NULL, NULL, NULL};
    int64_t xs[2] = {3, 4}, hs[2] = {3, 5}, p0[2] = {3, 6}, p1[2] = {3, 4};
    ladle_device dev = lt_device();
    LT_OK(ladle_graph_create(LADLE_F64, dev, 0, &s.g));
    LT_OK(ladle_graph_add_input(s.g, NULL, NULL, 2, xs, &s.in));
    LT_OK(ladle_linear_create(LT_LINEAR(xs[1], 5, 1, 0), 2, xs, LADLE_F64, dev, 1, &a));
    LT_OK(ladle_activation_create(LADLE_TANH, 0, 2, hs, LADLE_F64, dev, &ta));
    LT_OK(ladle_linear_create(LT_LINEAR(hs[1], 5, 1, 0), 2, hs, LADLE_F64, dev, 2, &b));
    LT_OK(ladle_activation_create(LADLE_TANH, 0, 2, hs, LADLE_F64, dev, &tb));
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 2, p0,
                            LADLE_F64, dev, &l[0]));
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_SUM, 0, 0), 2, p1,
                            LADLE_F64, dev, &l[1]));
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 2, hs,
                            LADLE_F64, dev, &l[2]));
    int v, u, sum, cat, parts[2];
    LT_OK(ladle_graph_add_layer(s.g, "a", a, s.in, &v));
    LT_OK(ladle_graph_add_layer(s.g, "a.tanh", ta, v, &s.h));
    /* b and its tanh as one sequential layer */
    ladle_op *seq = NULL;
    LT_OK(ladle_sequential_create(2, (ladle_op *[]){b, tb}, &seq));
    LT_OK(ladle_graph_add_layer(s.g, "b", seq, s.h, &u));
    LT_OK(ladle_graph_add_add(s.g, "add", 3, (int[]){s.h, u, s.h}, &sum));
    LT_OK(ladle_graph_add_concat(s.g, "cat", 2, (int[]){sum, s.h}, 1, &cat));
    LT_OK(ladle_graph_add_split(s.g, "split", cat, 1, 2, (int64_t[]){6, 4}, parts));
    LT_OK(ladle_graph_add_loss(s.g, "l0", l[0], parts[0], 1.0, NULL));
    LT_OK(ladle_graph_add_loss(s.g, "l1", l[1], parts[1], 0.7, NULL));
    LT_OK(ladle_graph_add_loss(s.g, "l2", l[2], s.h, 0.3, NULL));
    s.out[0] = parts[0], s.out[1] = parts[1], s.out[2] = s.h;
    LT_OK(ladle_graph_finalize(s.g));
    return s;
}

static double total_loss(small *s, const ladle_tensor *x, ladle_tensor *const t[])
{
    double loss = 0;
    LT_OK(ladle_graph_forward(s->g, 1, &x, NULL));
    LT_OK(ladle_graph_loss(s->g, 3, (const ladle_tensor *const *)t, &loss));
    return loss;
}

/* Central differences of the total loss in t's element i against the
 * gradient g[i]; the largest error so far in *err. */
static void central(small *s, const ladle_tensor *x, ladle_tensor *const tg[], ladle_tensor *t,
                    int64_t i, double grad, double *err)
{
    double h = 1e-6, v = lt_get(t, i);
    lt_set(t, i, v + h);
    double up = total_loss(s, x, tg);
    lt_set(t, i, v - h);
    double down = total_loss(s, x, tg);
    lt_set(t, i, v);
    *err = fmax(*err, fabs((up - down) / (2 * h) - grad) / (1 + fabs(grad)));
}

START_TEST(fanout_finite_differences)
{
    small s = small_graph();
    ladle_tensor *x = lt_tensor(LADLE_F64, 2, (int64_t[]){3, 4});
    ladle_tensor *t[3] = {lt_tensor(LADLE_F64, 2, (int64_t[]){3, 6}),
                          lt_tensor(LADLE_F64, 2, (int64_t[]){3, 4}),
                          lt_tensor(LADLE_F64, 2, (int64_t[]){3, 5})};
    LT_OK(ladle_tensor_fill_random(x, 81, 0));
    for (int k = 0; k < 3; k++)
        LT_OK(ladle_tensor_fill_random(t[k], 82 + (uint64_t)k, 0));
    LT_OK(ladle_graph_zero_grad(s.g));
    total_loss(&s, x, t);
    LT_OK(ladle_graph_backward(s.g, 1));
    /* the gradients, copied before the differences run more forwards */
    int np = ladle_graph_num_params(s.g);
    double grads[4][32], dx[12];
    const ladle_tensor *gx;
    LT_OK(ladle_graph_value_grad(s.g, s.in, &gx));
    for (int64_t i = 0; i < 12; i++)
        dx[i] = lt_get(gx, i);
    LT_ASSERT(np == 4, "%d parameters", np);
    for (int p = 0; p < np; p++) {
        ladle_tensor *grad;
        LT_OK(ladle_graph_param(s.g, p, NULL, NULL, &grad));
        for (int64_t i = 0; i < ladle_tensor_numel(grad); i++)
            grads[p][i] = lt_get(grad, i);
    }
    double err = 0;
    for (int p = 0; p < np; p++) {
        ladle_tensor *w;
        LT_OK(ladle_graph_param(s.g, p, NULL, &w, NULL));
        for (int64_t i = 0; i < ladle_tensor_numel(w); i++)
            central(&s, x, t, w, i, grads[p][i], &err);
    }
    for (int64_t i = 0; i < 12; i++)
        central(&s, x, t, x, i, dx[i], &err);
    const char *name;
    LT_OK(ladle_graph_param(s.g, 2, &name, NULL, NULL));
    LT_ASSERT(err < 1e-7 && strcmp(name, "b.weight") == 0,
              "central differences %.2e apart; parameter 2 is '%s'", err, name);
    ladle_graph_destroy(&s.g);
    ladle_tensor_destroy(&x);
    for (int k = 0; k < 3; k++)
        ladle_tensor_destroy(&t[k]);
}
END_TEST

/* Train a graph two steps (so that its parameters and running statistics
 * are no longer their initial values). */
static void train_two(built *b, ladle_tensor *X, ladle_tensor *T)
{
    ladle_optimizer_desc od;
    ladle_optimizer *opt = NULL;
    ladle_optimizer_desc_init(&od, LADLE_OPT_SGD, 0.1);
    LT_OK(ladle_optimizer_create(&od, &opt));
    LT_OK(ladle_optimizer_add_graph(opt, b->g));
    for (int s = 0; s < 2; s++) {
        LT_OK(ladle_graph_zero_grad(b->g));
        run(b, 1, &X, &b->in, 1, &T, &b->out, 1);
        LT_OK(ladle_optimizer_step(opt));
    }
    ladle_optimizer_destroy(&opt);
}

/* The output of an evaluation forward of b on X. */
static const ladle_tensor *evaluate(built *b, ladle_tensor *X)
{
    const ladle_tensor *y[1];
    ladle_tensor *x = block_of(b->g, b->in, X);
    LT_OK(ladle_graph_set_training(b->g, 0));
    LT_OK(ladle_graph_forward(b->g, 1, (const ladle_tensor *[]){x}, y));
    ladle_tensor_destroy(&x);
    return y[0];
}

START_TEST(checkpoint_layouts)
{
    int64_t c = 3, xs[4] = {N, c, S, S};
    ladle_tensor *X = lt_tensor(LADLE_F64, 4, xs), *T = lt_tensor(LADLE_F64, 4, xs);
    LT_OK(ladle_tensor_fill_random(X, 91, 0));
    LT_OK(ladle_tensor_fill_random(T, 92, 0));
    char path[128];
    snprintf(path, sizeof path, "/tmp/ladle-test-graph-%d.ckpt", lt_size);
    lay from[] = {{2, 1, 2, 1}, {1, 1, 1, 2}, {2, 1, 1, 1}, {1, 1, 1, 1}};
    lay to[] = {{1, 3, 1, 1}, {1, 1, 2, 1}, {1, 2, 1, 1}, {1, 1, 1, 1}};
    const lay *a = NULL, *b = NULL;
    for (int k = 0; k < 4 && a == NULL; k++)
        if (need(&from[k]) <= lt_size)
            a = &from[k];
    for (int k = 0; k < 4 && b == NULL; k++)
        if (need(&to[k]) <= lt_size)
            b = &to[k];
    built src = residual(a, c), dst = residual(b, c), ref = residual(NULL, c);
    train_two(&src, X, T);
    LT_OK(ladle_checkpoint_save_graph(path, ladle_comm_of(MPI_COMM_WORLD), src.g, NULL, 1,
                                      (int64_t[]){7}));
    int64_t meta[1] = {0};
    int nmeta = 0;
    LT_OK(ladle_checkpoint_load_graph(path, ladle_comm_of(MPI_COMM_WORLD), dst.g, NULL, 1,
                                      meta, &nmeta));
    LT_OK(ladle_checkpoint_load_graph(path, ladle_comm_of(MPI_COMM_WORLD), ref.g, NULL, 0,
                                      NULL, NULL));
    const ladle_tensor *ys = evaluate(&src, X), *yd = evaluate(&dst, X), *yr = evaluate(&ref, X);
    int64_t off[4];
    value_box(src.g, src.out, yr, off);
    double e1 = lt_box_error(yr, off, ys);
    value_box(dst.g, dst.out, yr, off);
    double e2 = lt_box_error(yr, off, yd), ew = param_err(&dst, &ref, 0);
    LT_ASSERT(e1 < 1e-12 && e2 < 1e-12 && ew == 0 && nmeta == 1 && meta[0] == 7,
              "saved on %dx%dx%d c%d, loaded on %dx%dx%d c%d: outputs %.2e and %.2e apart, "
              "parameters %.2e, %d integers",
              a->d, a->ph, a->pw, a->pc, b->d, b->ph, b->pw, b->pc, e1, e2, ew, nmeta);
    /* an unfinalized graph is refused before anything is written */
    ladle_graph *g = NULL;
    LT_OK(ladle_graph_create(LADLE_F64, lt_device(), 0, &g));
    LT_FAILS(
        ladle_checkpoint_save_graph(path, ladle_comm_of(MPI_COMM_WORLD), g, NULL, 0, NULL),
        LADLE_ERR_STATE);
    LT_FAILS(ladle_checkpoint_load_graph(path, ladle_comm_of(MPI_COMM_WORLD), NULL, NULL, 0,
                                         NULL, NULL),
             LADLE_ERR_NULL);
    ladle_graph_destroy(&g);
    MPI_Barrier(MPI_COMM_WORLD);
    if (lt_rank == 0)
        remove(path);
    built_free(&src);
    built_free(&dst);
    built_free(&ref);
    ladle_tensor_destroy(&X);
    ladle_tensor_destroy(&T);
}
END_TEST

/* A counting allocator (ladle/memory.h): finalize may allocate, the run
 * calls may not. */
typedef struct counter {
    long allocs;
} counter;

static void *count_alloc(void *user, size_t bytes, size_t align, ladle_device device)
{
    void *p = NULL;
    if (posix_memalign(&p, align < 16 ? 16 : align, bytes ? bytes : 1) != 0)
        return NULL;
    ((counter *)user)->allocs++;
    return p;
}

static void count_free(void *user, void *ptr, size_t bytes, ladle_device device) { free(ptr); }

/* Steps of the small graph (fan-out scratch, add, concat, split) and of the
 * graph with a repartition, the allocations counted around the run calls. */
static long run_counted(counter *c)
{
    long during = 0;
    small s = small_graph();
    built d = two_layouts(1);
    int64_t xs[4] = {N, 2, S, S};
    ladle_tensor *X = lt_tensor(LADLE_F64, 4, xs), *T = lt_tensor(LADLE_F64, 4, xs);
    ladle_tensor *bx = block_of(d.g, d.in, X), *by = block_of(d.g, d.in2, X);
    ladle_tensor *bt = block_of(d.g, d.out, T), *x = lt_tensor(LADLE_F64, 2, (int64_t[]){3, 4});
    ladle_tensor *t[3] = {lt_tensor(LADLE_F64, 2, (int64_t[]){3, 6}),
                          lt_tensor(LADLE_F64, 2, (int64_t[]){3, 4}),
                          lt_tensor(LADLE_F64, 2, (int64_t[]){3, 5})};
    for (int k = 0; k < 2; k++) {
        long before = c->allocs;
        LT_OK(ladle_graph_forward(s.g, 1, (const ladle_tensor *[]){x}, NULL));
        LT_OK(ladle_graph_loss(s.g, 3, (const ladle_tensor *const *)t, NULL));
        LT_OK(ladle_graph_backward(s.g, 1));
        LT_OK(ladle_graph_forward(d.g, 2, (const ladle_tensor *[]){bx, by}, NULL));
        LT_OK(ladle_graph_loss(d.g, 1, (const ladle_tensor *[]){bt}, NULL));
        LT_OK(ladle_graph_backward(d.g, 1));
        LT_OK(ladle_graph_zero_grad(d.g));
        during += c->allocs - before;
    }
    ladle_tensor *all[8] = {X, T, bx, by, bt, x, t[0], t[1]};
    for (int k = 0; k < 8; k++)
        ladle_tensor_destroy(&all[k]);
    ladle_tensor_destroy(&t[2]);
    ladle_graph_destroy(&s.g);
    built_free(&d);
    return during;
}

START_TEST(no_allocation)
{
    static counter c; /* outlives a failing assertion while the hook is set */
    c.allocs = 0;
    ladle_allocator a = {sizeof a, count_alloc, count_free, &c};
    LT_OK(ladle_allocator_set(&a));
    long during = run_counted(&c), made = c.allocs;
    LT_OK(ladle_allocator_set(NULL));
    LT_ASSERT(during == 0 && made > 0, "forward, loss and backward allocated %ld times (%ld in all)",
              during, made);
}
END_TEST

static ladle_op *lin(int64_t in, int64_t out)
{
    ladle_op *op = NULL;
    LT_OK(ladle_linear_create(LT_LINEAR(in, out, 1, 0), 2, (int64_t[]){3, in}, LADLE_F64,
                              lt_device(), 3, &op));
    return op;
}

static ladle_graph *fresh(int *in)
{
    ladle_graph *g = NULL;
    LT_OK(ladle_graph_create(LADLE_F64, lt_device(), 0, &g));
    LT_OK(ladle_graph_add_input(g, "x", NULL, 2, (int64_t[]){3, 4}, in));
    return g;
}

START_TEST(bad_graphs)
{
    int in, a, b, ids[2];
    ladle_graph *g = fresh(&in);
    ladle_op *op = NULL;
    /* a cycle: a reads b's value (id 2), b reads a's (id 1) */
    LT_OK(ladle_graph_add_layer(g, "a", lin(4, 4), 2, &a));
    LT_OK(ladle_graph_add_layer(g, "b", lin(4, 4), a, &b));
    LT_FAILS(ladle_graph_finalize(g), LADLE_ERR_ARG);
    LT_FAILS(ladle_graph_finalize(g), LADLE_ERR_STATE);
    LT_FAILS(ladle_graph_forward(g, 0, NULL, NULL), LADLE_ERR_STATE);
    ladle_graph_destroy(&g);
    /* a value no node defines, and an unconnected input */
    int dangling[2] = {7, -1};
    for (int k = 0; k < 2; k++) {
        g = fresh(&in);
        LT_OK(ladle_graph_add_layer(g, "a", lin(4, 4), dangling[k], &a));
        LT_FAILS(ladle_graph_finalize(g), LADLE_ERR_ARG);
        ladle_graph_destroy(&g);
    }
    /* a name given to one node that an unnamed one later takes */
    g = fresh(&in);
    LT_OK(ladle_graph_add_layer(g, "node2", lin(4, 4), in, &a));
    LT_OK(ladle_graph_add_layer(g, NULL, lin(4, 4), a, &b));
    LT_FAILS(ladle_graph_finalize(g), LADLE_ERR_ARG);
    ladle_graph_destroy(&g);
    /* shapes: a layer taking 5 features on 4; a concat of 3x4 and 3x5
     * along dimension 0; a split cutting 5 of 4, or overflowing */
    g = fresh(&in);
    LT_OK(ladle_graph_add_layer(g, "a", lin(5, 4), in, &a));
    LT_FAILS(ladle_graph_finalize(g), LADLE_ERR_SHAPE);
    ladle_graph_destroy(&g);
    g = fresh(&in);
    LT_OK(ladle_graph_add_layer(g, "a", lin(4, 5), in, &a));
    LT_OK(ladle_graph_add_concat(g, "cat", 2, (int[]){in, a}, 0, &b));
    LT_FAILS(ladle_graph_finalize(g), LADLE_ERR_SHAPE);
    ladle_graph_destroy(&g);
    int64_t cuts[2][2] = {{2, 3}, {INT64_MAX, INT64_MAX}};
    for (int k = 0; k < 2; k++) {
        g = fresh(&in);
        LT_OK(ladle_graph_add_split(g, "split", in, 1, 2, cuts[k], ids));
        LT_FAILS(ladle_graph_finalize(g), LADLE_ERR_SHAPE);
        ladle_graph_destroy(&g);
    }
    /* at add time: dtype, op twice, name twice, arity, NULL, negative split */
    g = fresh(&in);
    LT_OK(ladle_linear_create(LT_LINEAR(4, 4, 1, 0), 2, (int64_t[]){3, 4}, LADLE_F32,
                              lt_device(), 3, &op));
    LT_FAILS(ladle_graph_add_layer(g, "a", op, in, &a), LADLE_ERR_DTYPE);
    ladle_op_destroy(&op); /* refused: still the caller's */
    op = lin(4, 4);
    LT_OK(ladle_graph_add_layer(g, "a", op, in, &a));
    LT_FAILS(ladle_graph_add_layer(g, "b", op, a, &b), LADLE_ERR_ARG);
    op = lin(4, 4);
    LT_FAILS(ladle_graph_add_layer(g, "a", op, a, &b), LADLE_ERR_ARG);
    LT_FAILS(ladle_graph_add_layer(NULL, "c", op, a, &b), LADLE_ERR_NULL);
    LT_FAILS(ladle_graph_add_layer(g, "c", op, a, NULL), LADLE_ERR_NULL);
    LT_FAILS(ladle_graph_add_loss(g, "c", op, a, 1.0, NULL), LADLE_ERR_ARG);
    ladle_op_destroy(&op);
    LT_FAILS(ladle_graph_add_add(g, "s", 1, &a, &b), LADLE_ERR_ARG);
    LT_FAILS(ladle_graph_add_concat(g, "s", 1, &a, -1, &b), LADLE_ERR_ARG);
    LT_FAILS(ladle_graph_add_split(g, "s", a, 1, 2, (int64_t[]){-1, 5}, ids), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_graph_add_input(g, "s", NULL, LADLE_MAX_NDIM + 1, NULL, &b), LADLE_ERR_ARG);
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 2,
                            (int64_t[]){3, 4}, LADLE_F64, lt_device(), &op));
    LT_FAILS(ladle_graph_add_loss(g, "l", op, a, NAN, NULL), LADLE_ERR_ARG);
    LT_OK(ladle_graph_add_loss(g, "l", op, a, 1.0, NULL));
    /* calls out of order */
    LT_FAILS(ladle_graph_forward(g, 1, NULL, NULL), LADLE_ERR_STATE);
    LT_OK(ladle_graph_finalize(g));
    LT_FAILS(ladle_graph_add_input(g, "y", NULL, 1, (int64_t[]){1}, &b), LADLE_ERR_STATE);
    LT_FAILS(ladle_graph_finalize(g), LADLE_ERR_STATE);
    ladle_tensor *x = lt_tensor(LADLE_F64, 2, (int64_t[]){3, 4});
    ladle_tensor *t = lt_tensor(LADLE_F64, 2, (int64_t[]){3, 4});
    ladle_tensor *wrong = lt_tensor(LADLE_F64, 2, (int64_t[]){3, 5});
    LT_FAILS(ladle_graph_loss(g, 1, (const ladle_tensor *const *)&t, NULL), LADLE_ERR_STATE);
    LT_FAILS(ladle_graph_backward(g, 1), LADLE_ERR_STATE);
    LT_FAILS(ladle_graph_forward(g, 2, (const ladle_tensor *[]){x, x}, NULL), LADLE_ERR_ARG);
    LT_FAILS(ladle_graph_forward(g, 1, (const ladle_tensor *[]){wrong}, NULL), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_graph_loss(g, 1, (const ladle_tensor *const *)&t, NULL), LADLE_ERR_STATE);
    LT_OK(ladle_graph_forward(g, 1, (const ladle_tensor *[]){x}, NULL));
    LT_FAILS(ladle_graph_backward(g, 1), LADLE_ERR_STATE);
    LT_FAILS(ladle_graph_loss(g, 2, (const ladle_tensor *[]){t, t}, NULL), LADLE_ERR_ARG);
    LT_OK(ladle_graph_loss(g, 1, (const ladle_tensor *const *)&t, NULL));
    LT_OK(ladle_graph_backward(g, 1));
    LT_FAILS(ladle_graph_backward(g, 1), LADLE_ERR_STATE);
    LT_FAILS(ladle_graph_param(g, 2, NULL, NULL, NULL), LADLE_ERR_ARG);
    LT_FAILS(ladle_graph_value(g, 99, (const ladle_tensor **)&x), LADLE_ERR_ARG);
    LT_DESTROY(&x, &t, &wrong);
    ladle_graph_destroy(&g);
    LT_OK(ladle_graph_destroy(NULL));
    /* an empty graph runs and has no loss to take */
    LT_OK(ladle_graph_create(LADLE_F64, lt_device(), 0, &g));
    LT_OK(ladle_graph_finalize(g));
    LT_OK(ladle_graph_forward(g, 0, NULL, NULL));
    LT_FAILS(ladle_graph_loss(g, 0, NULL, NULL), LADLE_ERR_STATE);
    LT_ASSERT(ladle_graph_num_layers(g) == 0 && ladle_graph_buckets(g) == 0, "an empty graph");
    ladle_graph_destroy(&g);
    LT_FAILS(ladle_graph_create(LADLE_I64, lt_device(), 0, &g), LADLE_ERR_DTYPE);
    LT_FAILS(ladle_graph_create(LADLE_F64, lt_device(), 0, NULL), LADLE_ERR_NULL);
    LT_FAILS(ladle_graph_finalize(NULL), LADLE_ERR_NULL);
    LT_FAILS(ladle_graph_backward(NULL, 1), LADLE_ERR_NULL);
}
END_TEST

/* Layouts that cannot be connected, refused on every rank. */
START_TEST(bad_layouts)
{
    int64_t xs[4] = {N, 2, S, S}, wide[4] = {N, 2, S, S + 1};
    int p = lt_size >= 2 ? 2 : 1, in, a, b;
    ladle_partition *px = lt_partition(4, (int[]){p, 1, 1, 1}, 0);
    ladle_partition *pc = lt_partition(4, (int[]){1, p, 1, 1}, 0);
    ladle_layout *lw = NULL, *lb = NULL, *lc = NULL;
    ladle_graph *g = NULL;
    ladle_conv_desc c;
    ladle_conv_desc_init(&c, 2, 2, 2, 3);
    c.padding[0] = c.padding[1] = 1;
    LT_OK(ladle_layout_create_balanced(px, 4, wide, &lw));
    LT_OK(ladle_layout_create_block(px, 4, xs, &lb));
    LT_OK(ladle_layout_create_balanced(pc, 4, xs, &lc));
    /* another global shape than the layer takes */
    const ladle_layout *feeds[2] = {lw, lb};
    ladle_status want[2] = {LADLE_ERR_SHAPE, p > 1 ? LADLE_ERR_PARTITION : LADLE_OK};
    for (int k = 0; k < 2; k++) {
        ladle_op *op = NULL;
        LT_OK(ladle_graph_create(LADLE_F64, lt_device(), 0, &g));
        LT_OK(ladle_graph_add_input(g, "x", feeds[k], 0, NULL, &in));
        LT_OK(ladle_dist_conv_create(&c, px, xs, LADLE_F64, lt_device(), 1, &op));
        LT_OK(ladle_graph_add_layer(g, "conv", op, in, &a));
        if (want[k] == LADLE_OK)
            LT_OK(ladle_graph_finalize(g));
        else
            LT_FAILS(ladle_graph_finalize(g), want[k]);
        ladle_graph_destroy(&g);
    }
    /* a concat along a split dimension */
    LT_OK(ladle_graph_create(LADLE_F64, lt_device(), 0, &g));
    LT_OK(ladle_graph_add_input(g, "x", lc, 0, NULL, &in));
    LT_OK(ladle_graph_add_concat(g, "cat", 2, (int[]){in, in}, 1, &b));
    if (p > 1)
        LT_FAILS(ladle_graph_finalize(g), LADLE_ERR_PARTITION);
    else
        LT_OK(ladle_graph_finalize(g));
    ladle_graph_destroy(&g);
    ladle_layout_destroy(&lw);
    ladle_layout_destroy(&lb);
    ladle_layout_destroy(&lc);
    ladle_partition_destroy(&px);
    ladle_partition_destroy(&pc);
}
END_TEST

/* Token ids as a graph input: ids -> embedding e -> linear l, y = e + l
 * (e read twice), MSE. Its twin takes x = W[ids], gathered here from the
 * embedding's weight, as an f64 input: the same loss and linear
 * gradients, and the embedding's weight gradient is the scatter of the
 * twin's input gradient, dW[v] = sum of dx over the positions holding v,
 * summed here by loops. Then the refusals. */
static ladle_graph *token_graph(int ids_input, int *in, int *e, int *y)
{
    enum { TN = 3, TT = 5, TV = 7, TE = 4 };
    int64_t ids_shape[2] = {TN, TT}, xs[3] = {TN, TT, TE};
    ladle_graph *g = NULL;
    ladle_op *emb = NULL, *lin = NULL, *loss = NULL;
    int l;
    LT_OK(ladle_graph_create(LADLE_F64, lt_device(), 0, &g));
    if (ids_input) {
        LT_OK(ladle_graph_add_input(g, "ids", NULL, 2, ids_shape, in));
        ladle_embedding_desc ed;
        ladle_embedding_desc_init(&ed, TV, TE);
        LT_OK(ladle_embedding_create(&ed, 2, ids_shape, LADLE_F64, lt_device(), 9, &emb));
        LT_OK(ladle_graph_add_layer(g, "emb", emb, *in, e));
    } else {
        LT_OK(ladle_graph_add_input(g, "x", NULL, 3, xs, in));
        *e = *in;
    }
    LT_OK(ladle_linear_create(LT_LINEAR(xs[2], TE, 1, 0), 3, xs, LADLE_F64, lt_device(), 4,
                              &lin));
    LT_OK(ladle_graph_add_layer(g, "lin", lin, *e, &l));
    LT_OK(ladle_graph_add_add(g, "res", 2, (int[]){*e, l}, y));
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 3, xs,
                            LADLE_F64, lt_device(), &loss));
    LT_OK(ladle_graph_add_loss(g, "mse", loss, *y, 1.0, NULL));
    LT_OK(ladle_graph_finalize(g));
    return g;
}

START_TEST(token_inputs)
{
    enum { TN = 3, TT = 5, TV = 7, TE = 4 };
    if (lt_device() == LADLE_CUDA)
        return; /* the CUDA backend has no embedding kernels yet */
    int in_a, e_a, y_a, in_b, e_b, y_b;
    ladle_graph *a = token_graph(1, &in_a, &e_a, &y_a), *b = token_graph(0, &in_b, &e_b, &y_b);
    int64_t idv[TN * TT];
    for (int i = 0; i < TN * TT; i++)
        idv[i] = (i * 5 + 3) % TV; /* every id, some twice */
    ladle_tensor *ids = lt_tensor(LADLE_I64, 2, (int64_t[]){TN, TT});
    ladle_tensor *x = lt_tensor(LADLE_F64, 3, (int64_t[]){TN, TT, TE});
    ladle_tensor *tg = lt_tensor(LADLE_F64, 3, (int64_t[]){TN, TT, TE});
    LT_OK(ladle_tensor_write(ids, idv));
    LT_OK(ladle_tensor_fill_random(tg, 31, 0));
    ladle_op *emb = ladle_graph_layer(a, 0);
    LT_ASSERT(ladle_op_kind_of(emb) == LADLE_OP_EMBEDDING, "the first layer is the embedding");
    double w[TV * TE], xv[TN * TT * TE];
    LT_OK(ladle_tensor_read(ladle_op_param(emb, 0), w));
    for (int i = 0; i < TN * TT; i++)
        for (int c = 0; c < TE; c++)
            xv[i * TE + c] = w[idv[i] * TE + c];
    LT_OK(ladle_tensor_write(x, xv));
    double la = 0, lb = 0;
    const ladle_tensor *xa[1] = {ids}, *xb[1] = {x}, *t[1] = {tg};
    for (int g = 0; g < 2; g++) {
        ladle_graph *gr = g ? b : a;
        LT_OK(ladle_graph_zero_grad(gr));
        LT_OK(ladle_graph_forward(gr, 1, g ? xb : xa, NULL));
        LT_OK(ladle_graph_loss(gr, 1, t, g ? &lb : &la));
        LT_OK(ladle_graph_backward(gr, 1));
    }
    LT_ASSERT(fabs(la - lb) <= 1e-14 * fabs(lb), "loss %.17g against %.17g", la, lb);
    /* the linear's gradients: layer 1 of a, layer 0 of b */
    ladle_op *lin_a = ladle_graph_layer(a, 1), *lin_b = ladle_graph_layer(b, 0);
    for (int q = 0; q < 2; q++)
        LT_ASSERT(lt_box_error(ladle_op_grad(lin_b, q), (int64_t[]){0, 0},
                               ladle_op_grad(lin_a, q)) < 1e-13,
                  "linear gradient %d", q);
    const ladle_tensor *dx = NULL;
    LT_OK(ladle_graph_value_grad(b, in_b, &dx));
    double dxv[TN * TT * TE], want[TV * TE] = {0}, got[TV * TE];
    LT_OK(ladle_tensor_read(dx, dxv));
    for (int i = 0; i < TN * TT; i++)
        for (int c = 0; c < TE; c++)
            want[idv[i] * TE + c] += dxv[i * TE + c];
    LT_OK(ladle_tensor_read(ladle_op_grad(emb, 0), got));
    double err = 0;
    for (int k = 0; k < TV * TE; k++)
        err = fmax(err, fabs(got[k] - want[k]));
    LT_ASSERT(err < 1e-13, "the embedding's weight gradient: error %.2e", err);
    /* ids have no gradient; the wrong dtype is refused on binding */
    const ladle_tensor *none = NULL;
    LT_FAILS(ladle_graph_value_grad(a, in_a, &none), LADLE_ERR_ARG);
    LT_FAILS(ladle_graph_forward(a, 1, xb, NULL), LADLE_ERR_DTYPE);
    ladle_graph_destroy(&a);
    ladle_graph_destroy(&b);
    LT_DESTROY(&ids, &x, &tg);

    /* ids read by a layer that wants values; an embedding fed a value the
     * graph computes; an ids input with a layout */
    int64_t ids_shape[2] = {TN, TT};
    for (int k = 0; k < 2; k++) {
        ladle_graph *g = NULL;
        ladle_op *op = NULL, *l2 = NULL;
        int in, v1, v2;
        LT_OK(ladle_graph_create(LADLE_F64, lt_device(), 0, &g));
        LT_OK(ladle_graph_add_input(g, "ids", NULL, 2, ids_shape, &in));
        LT_OK(ladle_linear_create(LT_LINEAR(ids_shape[1], TT, 0, 0), 2, ids_shape,
                                  LADLE_F64, lt_device(), 1, &l2));
        ladle_embedding_desc ed;
        ladle_embedding_desc_init(&ed, TV, TE);
        LT_OK(ladle_embedding_create(&ed, 2, ids_shape, LADLE_F64, lt_device(), 9, &op));
        if (k == 0) { /* both read the input: the linear as f64 */
            LT_OK(ladle_graph_add_layer(g, "emb", op, in, &v1));
            LT_OK(ladle_graph_add_layer(g, "lin", l2, in, &v2));
        } else { /* the embedding reads the linear's output */
            LT_OK(ladle_graph_add_layer(g, "lin", l2, in, &v2));
            LT_OK(ladle_graph_add_layer(g, "emb", op, v2, &v1));
        }
        ladle_status st = ladle_graph_finalize(g);
        LT_ASSERT(st == LADLE_ERR_DTYPE && strstr(ladle_error_message(), "token ids") != NULL,
                  "case %d: %s: %s", k, ladle_status_name(st), ladle_error_message());
        ladle_graph_destroy(&g);
    }
}
END_TEST

LT_SUITE("graph", "graph", 0, bad_graphs, bad_layouts, fanout_finite_differences,
         residual_twin, branch_twin, repartition_inserted, training_equivalence,
         checkpoint_layouts, no_allocation, token_inputs)
