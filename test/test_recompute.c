/*
 * Activation recomputation (ladle_recompute_create): a network with its
 * layers wrapped must give the bits of the same network without the
 * wrapper (outputs, input and parameter gradients, batch norm's running
 * statistics, dropout masks), the reference being an independently built
 * twin from the same seeds; the wrapper's gradient agrees with finite
 * differences; bad wrappers are refused. Also prints the GPT's activation
 * bytes per microbatch with and without recomputation, and the time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { NB = 6, NF = 5, NH = 7 };

/* linear -> batch norm -> ReLU -> dropout -> linear, all from seed. */
static void make_chain(ladle_op *l[5], uint64_t seed)
{
    int64_t xs[2] = {NB, NF}, hs[2] = {NB, NH};
    ladle_linear_desc ld;
    ladle_batchnorm_desc bd;
    ladle_linear_desc_init(&ld, NF, NH);
    LT_OK(ladle_linear_create(&ld, 2, xs, LADLE_F64, lt_device(), seed, &l[0]));
    ladle_batchnorm_desc_init(&bd, NH);
    LT_OK(ladle_batchnorm_create(&bd, 2, hs, LADLE_F64, lt_device(), &l[1]));
    LT_OK(ladle_activation_create(LADLE_RELU, 0, 2, hs, LADLE_F64, lt_device(), &l[2]));
    LT_OK(ladle_dropout_create(2, hs, 0.3, LADLE_F64, lt_device(), seed + 1, &l[3]));
    ladle_linear_desc_init(&ld, NH, 3);
    LT_OK(ladle_linear_create(&ld, 2, hs, LADLE_F64, lt_device(), seed + 2, &l[4]));
}

/* The plain chain, and its twin whose first four layers are recomputed. */
static void make_pair(ladle_op *nets[2])
{
    ladle_op *a[5], *b[5], *seg = NULL, *rc = NULL;
    make_chain(a, 7);
    make_chain(b, 7);
    LT_OK(ladle_sequential_create(5, a, &nets[0]));
    LT_OK(ladle_sequential_create(4, b, &seg));
    LT_OK(ladle_recompute_create(&seg, &rc));
    LT_ASSERT(seg == NULL && ladle_op_kind_of(rc) == LADLE_OP_RECOMPUTE, "the wrapper owns it");
    ladle_op *outer[2] = {rc, b[4]};
    LT_OK(ladle_sequential_create(2, outer, &nets[1]));
}

/* Whether every gradient of two ops is the same bits. */
static int same_grads(const ladle_op *a, const ladle_op *b)
{
    int ok = ladle_op_num_params(a) == ladle_op_num_params(b);
    for (int i = 0; ok && i < ladle_op_num_params(a); i++)
        ok = lt_same_values(ladle_op_grad(a, i), ladle_op_grad(b, i));
    return ok;
}

/* w -= 0.1 dw, so that later steps see other weights. */
static void sgd(ladle_op *op)
{
    for (int i = 0; i < ladle_op_num_params(op); i++) {
        ladle_tensor *w = ladle_op_param(op, i);
        double *v = lt_values(w), *g = lt_values(ladle_op_grad(op, i));
        for (int64_t k = 0; k < ladle_tensor_numel(w); k++)
            v[k] -= 0.1 * g[k];
        lt_store(w, v);
        free(v);
        free(g);
    }
}

/* Two microbatches in flight per step, their backwards in reverse order
 * and the weight passes last (the order a pipeline's schedules use), so
 * the wrapper reruns its forward for all but the last one. */
START_TEST(chain_dropout_batchnorm_bits)
{
    ladle_op *nets[2];
    make_pair(nets);
    int64_t xs[2] = {NB, NF}, ys[2] = {NB, 3};
    ladle_tensor *x[2], *y[2][2], *dy[2], *dx[2][2];
    ladle_ctx *c[2][2];
    int ok = 1;
    for (int m = 0; m < 2; m++) {
        x[m] = lt_tensor(LADLE_F64, 2, xs);
        dy[m] = lt_tensor(LADLE_F64, 2, ys);
        for (int k = 0; k < 2; k++) {
            y[k][m] = lt_tensor(LADLE_F64, 2, ys);
            dx[k][m] = lt_tensor(LADLE_F64, 2, xs);
            LT_OK(ladle_ctx_create(nets[k], &c[k][m]));
        }
    }
    for (int step = 0; step < 3; step++) {
        for (int m = 0; m < 2; m++) {
            LT_OK(ladle_tensor_fill_random(x[m], 100 + 10 * step + m, 0));
            LT_OK(ladle_tensor_fill_random(dy[m], 200 + 10 * step + m, 0));
        }
        for (int k = 0; k < 2; k++) {
            LT_OK(ladle_op_zero_grad(nets[k]));
            for (int m = 0; m < 2; m++)
                LT_OK(ladle_layer_forward(nets[k], c[k][m], x[m], y[k][m]));
            for (int m = 1; m >= 0; m--)
                LT_OK(ladle_layer_backward(nets[k], c[k][m], dy[m], dx[k][m]));
            for (int m = 0; m < 2; m++)
                LT_OK(ladle_layer_backward_weight(nets[k], c[k][m], dy[m]));
        }
        for (int m = 0; m < 2; m++)
            ok &= lt_same_values(y[0][m], y[1][m]) && lt_same_values(dx[0][m], dx[1][m]);
        ok &= same_grads(nets[0], nets[1]);
        sgd(nets[0]);
        sgd(nets[1]);
    }
    LT_ASSERT(ok, "outputs, input and parameter gradients the same bits over 3 steps");
    ladle_tensor *mean[2], *var[2];
    for (int k = 0; k < 2; k++) {
        ladle_op *bn = ladle_sequential_layer(k ? ladle_recompute_inner(
                                                      ladle_sequential_layer(nets[1], 0))
                                                : nets[0],
                                              1);
        LT_OK(ladle_batchnorm_running_stats(bn, &mean[k], &var[k]));
    }
    LT_ASSERT(lt_same_values(mean[0], mean[1]) && lt_same_values(var[0], var[1]),
              "running statistics updated once per forward: the same bits");
    size_t held0 = ladle_ctx_bytes_held(c[0][0]), held1 = ladle_ctx_bytes_held(c[1][0]);
    LT_ASSERT(held1 < held0 && held1 > 0, "the wrapped chain's ctx holds less (%zu < %zu)",
              held1, held0);
    for (int m = 0; m < 2; m++) {
        for (int k = 0; k < 2; k++) {
            ladle_ctx_destroy(&c[k][m]);
            LT_DESTROY(&y[k][m], &dx[k][m]);
        }
        LT_DESTROY(&x[m], &dy[m]);
    }
    ladle_op_destroy(&nets[0]);
    ladle_op_destroy(&nets[1]);
}
END_TEST

/* A residual block over a recomputed body, against the same block without
 * the wrapper. */
START_TEST(residual_bits)
{
    int64_t xs[2] = {NB, NF};
    ladle_op *blk[2];
    for (int k = 0; k < 2; k++) {
        ladle_op *l[3], *body = NULL;
        ladle_linear_desc ld;
        ladle_linear_desc_init(&ld, NF, NF);
        LT_OK(ladle_linear_create(&ld, 2, xs, LADLE_F64, lt_device(), 3, &l[0]));
        LT_OK(ladle_activation_create(LADLE_TANH, 0, 2, xs, LADLE_F64, lt_device(), &l[1]));
        LT_OK(ladle_dropout_create(2, xs, 0.5, LADLE_F64, lt_device(), 9, &l[2]));
        LT_OK(ladle_sequential_create(3, l, &body));
        if (k == 1)
            LT_OK(ladle_recompute_create(&body, &body));
        LT_OK(ladle_residual_create(&body, &blk[k]));
    }
    ladle_tensor *x = lt_tensor(LADLE_F64, 2, xs), *dy = lt_tensor(LADLE_F64, 2, xs);
    ladle_tensor *y[2], *dx[2];
    LT_OK(ladle_tensor_fill_random(x, 5, 0));
    LT_OK(ladle_tensor_fill_random(dy, 6, 0));
    for (int k = 0; k < 2; k++) {
        y[k] = lt_tensor(LADLE_F64, 2, xs);
        dx[k] = lt_tensor(LADLE_F64, 2, xs);
        ladle_ctx *c = NULL;
        LT_OK(ladle_ctx_create(blk[k], &c));
        LT_OK(ladle_layer_forward(blk[k], c, x, y[k]));
        /* a second forward on another ctx takes the scratch away */
        ladle_ctx *c2 = NULL;
        ladle_tensor *y2 = lt_tensor(LADLE_F64, 2, xs);
        LT_OK(ladle_ctx_create(blk[k], &c2));
        LT_OK(ladle_layer_forward(blk[k], c2, dy, y2));
        /* c's backward reruns; c2's takes the scratch again, so c's weight
         * pass reruns the forward and the inner backward */
        LT_OK(ladle_layer_backward(blk[k], c, dy, dx[k]));
        LT_OK(ladle_layer_backward(blk[k], c2, x, y2));
        LT_OK(ladle_layer_backward_weight(blk[k], c, dy));
        ladle_ctx_destroy(&c);
        ladle_ctx_destroy(&c2);
        LT_DESTROY(&y2);
    }
    LT_ASSERT(lt_same_values(y[0], y[1]) && lt_same_values(dx[0], dx[1]) &&
                  same_grads(blk[0], blk[1]),
              "a residual block over a recomputed body: the same bits");
    LT_DESTROY(&x, &dy, &y[0], &y[1], &dx[0], &dx[1]);
    ladle_op_destroy(&blk[0]);
    ladle_op_destroy(&blk[1]);
}
END_TEST

/* A graph with a branch: a = seg(x), c = a + lin(a), loss MSE(head(c)),
 * seg and lin recomputed in graph 1 (sharing one scratch) and not in
 * graph 0. */
static ladle_graph *make_graph(int recompute, int *xid)
{
    ladle_op *l[5], *seg = NULL, *lin = NULL;
    int64_t xs[2] = {NB, NF}, hs[2] = {NB, NH}, ys[2] = {NB, 3};
    ladle_graph *g = NULL;
    ladle_linear_desc ld;
    int a, b, c, d, ab[2];
    make_chain(l, 17);
    LT_OK(ladle_sequential_create(4, l, &seg));
    if (recompute)
        LT_OK(ladle_recompute_create(&seg, &seg));
    ladle_linear_desc_init(&ld, NH, NH);
    LT_OK(ladle_linear_create(&ld, 2, hs, LADLE_F64, lt_device(), 50, &lin));
    if (recompute) /* two wrappers: the graph shares one scratch between them */
        LT_OK(ladle_recompute_create(&lin, &lin));
    ladle_loss_desc dl;
    ladle_loss_desc_init(&dl, LADLE_LOSS_MSE, LADLE_REDUCE_MEAN);
    ladle_op *loss = NULL;
    LT_OK(ladle_loss_create(&dl, 2, ys, LADLE_F64, lt_device(), &loss));
    LT_OK(ladle_graph_create(LADLE_F64, lt_device(), 0, &g));
    LT_OK(ladle_graph_add_input(g, "x", NULL, 2, xs, xid));
    LT_OK(ladle_graph_add_layer(g, "seg", seg, *xid, &a));
    LT_OK(ladle_graph_add_layer(g, "lin", lin, a, &b));
    ab[0] = a, ab[1] = b;
    LT_OK(ladle_graph_add_add(g, "add", 2, ab, &c));
    LT_OK(ladle_graph_add_layer(g, "head", l[4], c, &d));
    LT_OK(ladle_graph_add_loss(g, "loss", loss, d, 1.0, NULL));
    LT_OK(ladle_graph_finalize(g));
    return g;
}

START_TEST(graph_bits)
{
    int64_t xs[2] = {NB, NF}, ys[2] = {NB, 3};
    ladle_graph *g[2];
    int xid[2];
    for (int k = 0; k < 2; k++)
        g[k] = make_graph(k, &xid[k]);
    ladle_tensor *x = lt_tensor(LADLE_F64, 2, xs), *t = lt_tensor(LADLE_F64, 2, ys);
    int ok = 1;
    for (int step = 0; step < 3; step++) {
        LT_OK(ladle_tensor_fill_random(x, 300 + (uint64_t)step, 0));
        LT_OK(ladle_tensor_fill_random(t, 400 + (uint64_t)step, 0));
        double loss[2];
        const ladle_tensor *dx[2];
        for (int k = 0; k < 2; k++) {
            LT_OK(ladle_graph_zero_grad(g[k]));
            LT_OK(ladle_graph_forward(g[k], 1, (const ladle_tensor *[]){x}, NULL));
            LT_OK(ladle_graph_loss(g[k], 1, (const ladle_tensor *[]){t}, &loss[k]));
            LT_OK(ladle_graph_backward(g[k], 1));
            LT_OK(ladle_graph_value_grad(g[k], xid[k], &dx[k]));
        }
        ok &= memcmp(&loss[0], &loss[1], sizeof loss[0]) == 0 && lt_same_values(dx[0], dx[1]);
        for (int i = 0; i < ladle_graph_num_layers(g[0]); i++) {
            ladle_op *a = ladle_graph_layer(g[0], i), *b = ladle_graph_layer(g[1], i);
            ok &= same_grads(a, b);
            sgd(a);
            sgd(b);
        }
    }
    LT_ASSERT(ok, "a graph with a recomputed segment: losses and gradients the same bits");
    LT_DESTROY(&x, &t);
    ladle_graph_destroy(&g[0]);
    ladle_graph_destroy(&g[1]);
}
END_TEST

/* <dx, v> against (f(x + h v) - f(x - h v)) / 2h, f(x) = <y(x), dy>, on
 * a recomputed chain of linear, tanh and batch norm in training mode
 * (forwards without a ctx leave the running statistics alone). */
START_TEST(finite_differences)
{
    int64_t xs[2] = {NB, NF}, hs[2] = {NB, NH};
    ladle_op *l[3], *seg = NULL, *rc = NULL;
    ladle_linear_desc ld;
    ladle_batchnorm_desc bd;
    ladle_linear_desc_init(&ld, NF, NH);
    LT_OK(ladle_linear_create(&ld, 2, xs, LADLE_F64, lt_device(), 11, &l[0]));
    LT_OK(ladle_activation_create(LADLE_TANH, 0, 2, hs, LADLE_F64, lt_device(), &l[1]));
    ladle_batchnorm_desc_init(&bd, NH);
    LT_OK(ladle_batchnorm_create(&bd, 2, hs, LADLE_F64, lt_device(), &l[2]));
    LT_OK(ladle_sequential_create(3, l, &seg));
    LT_OK(ladle_recompute_create(&seg, &rc));
    ladle_tensor *x = lt_tensor(LADLE_F64, 2, xs), *v = lt_tensor(LADLE_F64, 2, xs);
    ladle_tensor *xp = lt_tensor(LADLE_F64, 2, xs), *dx = lt_tensor(LADLE_F64, 2, xs);
    ladle_tensor *y = lt_tensor(LADLE_F64, 2, hs), *dy = lt_tensor(LADLE_F64, 2, hs);
    LT_OK(ladle_tensor_fill_random(x, 21, 0));
    LT_OK(ladle_tensor_fill_random(v, 22, 0));
    LT_OK(ladle_tensor_fill_random(dy, 23, 0));
    ladle_ctx *c = lt_forward_backward(rc, x, y, dy, dx);
    double h = 1e-5, f[2], an = 0;
    LT_OK(ladle_tensor_dot(dx, v, &an));
    double *xv = lt_values(x), *vv = lt_values(v), *p = malloc(sizeof(double) * NB * NF);
    for (int s = 0; s < 2; s++) {
        for (int k = 0; k < NB * NF; k++)
            p[k] = xv[k] + (s ? -h : h) * vv[k];
        lt_store(xp, p);
        LT_OK(ladle_layer_forward(rc, NULL, xp, y));
        LT_OK(ladle_tensor_dot(y, dy, &f[s]));
    }
    double fd = (f[0] - f[1]) / (2 * h);
    LT_ASSERT(fabs(fd - an) <= 1e-7 * (1 + fabs(an)), "finite differences %.12g vs %.12g", fd,
              an);
    free(xv);
    free(vv);
    free(p);
    ladle_ctx_destroy(&c);
    LT_DESTROY(&x, &v, &xp, &dx, &y, &dy);
    ladle_op_destroy(&rc);
}
END_TEST

START_TEST(refusals)
{
    int64_t xs[2] = {NB, NF};
    ladle_op *op = NULL, *rs = NULL, *loss = NULL;
    LT_FAILS(ladle_recompute_create(NULL, &op), LADLE_ERR_NULL);
    LT_FAILS(ladle_recompute_create(&op, &op), LADLE_ERR_NULL);
    LT_OK(ladle_reshape_create(2, xs, 2, xs, LADLE_F64, lt_device(), &rs));
    LT_FAILS_SAYING(ladle_recompute_create(&rs, &op), LADLE_ERR_ARG, "saves nothing");
    LT_ASSERT(rs != NULL && op == NULL, "a refused inner layer stays the caller's");
    ladle_loss_desc d;
    ladle_loss_desc_init(&d, LADLE_LOSS_MSE, LADLE_REDUCE_MEAN);
    LT_OK(ladle_loss_create(&d, 2, xs, LADLE_F64, lt_device(), &loss));
    LT_FAILS(ladle_recompute_create(&loss, &op), LADLE_ERR_ARG);
    LT_ASSERT(loss != NULL && op == NULL, "a refused loss stays the caller's");
    LT_ASSERT(ladle_recompute_inner(rs) == NULL && ladle_recompute_inner(NULL) == NULL &&
                  ladle_ctx_bytes_held(NULL) == 0,
              "accessors on other ops and NULL");
    LT_FAILS(ladle_recompute_share(2, NULL), LADLE_ERR_NULL);
    LT_FAILS(ladle_recompute_share(2, (ladle_op *const[]){rs, NULL}), LADLE_ERR_NULL);
    LT_OK(ladle_recompute_share(1, &rs)); /* no wrapper under it: nothing to share */
    LT_ASSERT(ladle_recompute_total_bytes(1, &rs) == 0 &&
                  ladle_recompute_total_bytes(1, (ladle_op *const[]){NULL}) == 0,
              "no scratch without wrappers");
    ladle_op_destroy(&rs);
    ladle_op_destroy(&loss);
}
END_TEST

/* The GPT chain over the world's S ranks (tensor and sequence parallel
 * for S > 1), its residual blocks recomputed (recompute 1: a scratch per
 * wrapper, 2: one shared by all) or not (0). */
static ladle_op *gpt_chain(const ladle_gpt_desc *d, int recompute)
{
    int n = ladle_gpt_num_layers(d);
    ladle_op **l = calloc((size_t)n, sizeof *l), *seq = NULL;
    LT_OK(ladle_gpt_layers(d, ladle_comm_of(MPI_COMM_WORLD), 0, n, l));
    for (int i = 0; recompute && i < n; i++)
        if (ladle_op_kind_of(l[i]) == LADLE_OP_RESIDUAL)
            LT_OK(ladle_recompute_create(&l[i], &l[i]));
    /* without "rows", a reshape of the whole batch (no batch dimension):
     * the chain then ends in the N x T x V logits */
    ladle_op_destroy(&l[--n]);
    LT_OK(ladle_sequential_create(n, l, &seq));
    if (recompute == 2)
        LT_OK(ladle_recompute_share(1, &seq));
    free(l);
    return seq;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { MB = 4 };

/* MB microbatches in flight, GPipe's order: every forward, then the
 * backwards in reverse and the weight passes (a wrapper reruns its forward
 * for all but the last microbatch). The median of reps steps' times. */
static double gpt_steps(ladle_op *net, ladle_ctx **c, ladle_tensor *ids, ladle_tensor **y,
                        ladle_tensor *dy, int reps)
{
    double t[9];
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        LT_OK(ladle_op_zero_grad(net));
        for (int m = 0; m < MB; m++)
            LT_OK(ladle_layer_forward(net, c[m], ids, y[m]));
        for (int m = MB - 1; m >= 0; m--) {
            LT_OK(ladle_layer_backward(net, c[m], dy, NULL));
            LT_OK(ladle_layer_backward_weight(net, c[m], dy));
        }
        t[r] = MPI_Wtime() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return t[reps / 2];
}

/* The activation bytes of MB microbatches: their ctxs and the wrappers'
 * scratch, held once. */
static size_t gpt_bytes(const ladle_op *net, ladle_ctx **c)
{
    size_t n = 0, each = 0;
    for (int m = 0; m < MB; m++)
        n += ladle_ctx_bytes_held(c[m]);
    for (int i = 0; i < ladle_sequential_size(net); i++)
        each += ladle_recompute_scratch_bytes(ladle_sequential_layer(net, i));
    size_t total = ladle_recompute_total_bytes(1, (ladle_op *const[]){(ladle_op *)net});
    /* unshared, the total is the sum of the wrappers' scratch */
    return n + (each > total ? total : each);
}

START_TEST(gpt_blocks_bits_and_memory)
{
    ladle_gpt_desc d;
    ladle_gpt_desc_init(&d);
    d.vocab = 32, d.context = 12, d.batch = 2, d.layers = 4, d.width = 24, d.heads = 12;
    d.dropout = 0.1, d.dtype = LADLE_F64, d.tensor_ways = lt_size, d.seed = 5;
    d.device = lt_device();
    ladle_op *net[3];
    for (int k = 0; k < 3; k++)
        net[k] = gpt_chain(&d, k);
    int nd = 0;
    int64_t s[LADLE_MAX_NDIM];
    LT_OK(ladle_op_x_shape(net[0], &nd, s));
    ladle_tensor *ids = NULL, *y[3][MB], *dy = lt_op_tensor(net[0], 1);
    LT_OK(ladle_tensor_create(LADLE_I64, lt_device(), nd, s, &ids));
    for (int64_t i = 0; i < ladle_tensor_numel(ids); i++)
        lt_set(ids, i, (double)((i * 7 + lt_rank * 3) % d.vocab));
    LT_OK(ladle_tensor_fill_random(dy, 31 + (uint64_t)lt_rank, 0));
    ladle_ctx *c[3][MB];
    double tm[3];
    size_t held[3];
    for (int k = 0; k < 3; k++) {
        for (int m = 0; m < MB; m++) {
            y[k][m] = lt_op_tensor(net[k], 1);
            LT_OK(ladle_ctx_create(net[k], &c[k][m]));
        }
        tm[k] = gpt_steps(net[k], c[k], ids, y[k], dy, 5);
        held[k] = gpt_bytes(net[k], c[k]);
    }
    int ok = 1;
    for (int k = 1; k < 3; k++) {
        ok &= same_grads(net[0], net[k]);
        for (int m = 0; m < MB; m++)
            ok &= lt_same_values(y[0][m], y[k][m]);
    }
    LT_ASSERT(ok, "GPT blocks recomputed at %d ranks: logits and gradients the same bits",
              lt_size);
    LT_ASSERT(held[1] < held[0] && held[2] < held[1], "activation bytes cut: %zu -> %zu -> %zu",
              held[0], held[1], held[2]);
    if (lt_rank == 0)
        printf("gpt L%d E%lld T%lld N%lld f64, %d microbatches, %d rank(s): activation bytes "
               "per rank %zu -> %zu a scratch per wrapper (%.2fx less) -> %zu shared (%.2fx), "
               "step %.3g -> %.3g -> %.3g ms\n",
               d.layers, (long long)d.width, (long long)d.context, (long long)d.batch, MB,
               lt_size, held[0], held[1], (double)held[0] / (double)held[1], held[2],
               (double)held[0] / (double)held[2], 1e3 * tm[0], 1e3 * tm[1], 1e3 * tm[2]);
    for (int k = 0; k < 3; k++) {
        for (int m = 0; m < MB; m++) {
            ladle_ctx_destroy(&c[k][m]);
            LT_DESTROY(&y[k][m]);
        }
        ladle_op_destroy(&net[k]);
    }
    LT_DESTROY(&ids, &dy);
}
END_TEST

/* ladle_gpt_create with each recompute mode, data parallel over the world
 * (dropout on): the losses and gradients of 3 SGD steps the same bits as
 * without recomputation, and the activation bytes besides. */
START_TEST(gpt_graph_modes_bits)
{
    ladle_gpt_desc d;
    ladle_gpt_desc_init(&d);
    d.vocab = 29, d.context = 8, d.batch = 2 * lt_size, d.layers = 3, d.width = 16;
    d.heads = 4, d.dropout = 0.2, d.dtype = LADLE_F64, d.data_ways = lt_size, d.seed = 9;
    d.device = lt_device();
    ladle_graph *g[3];
    for (int k = 0; k < 3; k++) {
        d.recompute = k;
        LT_OK(ladle_gpt_create(&d, ladle_comm_of(MPI_COMM_WORLD), &g[k]));
    }
    int64_t n = d.batch / lt_size;
    ladle_tensor *ids = NULL, *tgt = NULL;
    LT_OK(ladle_tensor_create(LADLE_I64, lt_device(), 2, (int64_t[]){n, d.context}, &ids));
    LT_OK(ladle_tensor_create(LADLE_I64, lt_device(), 1, (int64_t[]){n * d.context}, &tgt));
    int ok = 1;
    for (int step = 0; step < 3; step++) {
        for (int64_t i = 0; i < n * d.context; i++) {
            lt_set(ids, i, (double)((i * 5 + step * 3 + lt_rank * 11) % d.vocab));
            lt_set(tgt, i, (double)((i * 7 + step + lt_rank * 13) % d.vocab));
        }
        double loss[3];
        for (int k = 0; k < 3; k++) {
            LT_OK(ladle_graph_zero_grad(g[k]));
            LT_OK(ladle_graph_forward(g[k], 1, (const ladle_tensor *[]){ids}, NULL));
            LT_OK(ladle_graph_loss(g[k], 1, (const ladle_tensor *[]){tgt}, &loss[k]));
            LT_OK(ladle_graph_backward(g[k], 1));
        }
        int np = ladle_graph_num_params(g[0]);
        for (int k = 1; k < 3; k++) {
            ok &= memcmp(&loss[0], &loss[k], sizeof loss[0]) == 0;
            ok &= ladle_graph_num_params(g[k]) == np;
            for (int i = 0; ok && i < np; i++) {
                ladle_tensor *a = NULL, *b = NULL;
                LT_OK(ladle_graph_param(g[0], i, NULL, NULL, &a));
                LT_OK(ladle_graph_param(g[k], i, NULL, NULL, &b));
                ok &= lt_same_values(a, b);
            }
        }
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < ladle_graph_num_layers(g[k]); i++)
                sgd(ladle_graph_layer(g[k], i));
    }
    LT_ASSERT(ok, "GPT graph, recompute block and selective: losses and gradients of 3 steps "
                  "the same bits as none");
    LT_DESTROY(&ids, &tgt);
    for (int k = 0; k < 3; k++)
        ladle_graph_destroy(&g[k]);
}
END_TEST

LT_SUITE("recompute", "recompute", 120, chain_dropout_batchnorm_bits, residual_bits, graph_bits,
         finite_differences, refusals, gpt_blocks_bits_and_memory, gpt_graph_modes_bits)
