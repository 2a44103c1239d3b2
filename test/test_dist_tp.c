/*
 * Tensor and sequence parallelism (ladle_dist_tp_attention_create,
 * ladle_dist_tp_linear_create): on every D x S grid that fits the ranks,
 * each layer against its sequential twin on the gathered tensors (y, dx,
 * the initial weights and the weight gradients summed over the batch
 * blocks' copies, f64, 1e-10), heads and features that do not divide
 * evenly, a head width other than E / H, no biases; the dot-product test
 * of the linear layers without bias; a column, GELU and row chain (the
 * MLP) against the sequential chain; and the refusals, alike on every rank.
 */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "src/op/op_impl.h" /* ladle__share_scratch, as a graph calls it */

static int world(void)
{
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

/* The grids D x S of at most `ranks` ranks this test runs: S = all of
 * them, D = all of them, and the mixed ones. */
static int grids(int ranks, int (*g)[2])
{
    int n = 0;
    for (int d = 1; d <= ranks; d++)
        for (int s = 1; d * s <= ranks; s++)
            if (d * s == ranks || (d * s == ranks - 1 && d > 1 && s > 1))
                g[n][0] = d, g[n][1] = s, n++;
    return n;
}

static void attention_case(ladle_partition *p, int D, int S, int64_t E, int64_t H,
                           int64_t hd, int bias, uint64_t seed)
{
    int64_t xs[3] = {D + 1, S + 3, E};
    ladle_attention_desc d;
    ladle_attention_desc_init(&d, E, H);
    d.head_dim = hd;
    d.qkv_bias = bias;
    d.out_bias = bias;
    d.block = 3; /* several tiles */
    ladle_op *dist = NULL, *seq = NULL;
    LT_OK(ladle_dist_tp_attention_create(&d, p, xs, LADLE_F64, lt_device(), seed, &dist));
    LT_OK(ladle_attention_create(&d, 3, xs, LADLE_F64, lt_device(), seed, &seq));
    char what[96];
    snprintf(what, sizeof what, "attention %dx%d, E %lld H %lld d %lld bias %d", D, S,
             (long long)E, (long long)H, (long long)hd, bias);
    LT_ASSERT(ladle_op_kind_of(dist) == LADLE_OP_DIST_TP, "%s: kind", what);
    lt_equivalent(dist, seq, seed + 100, 1e-10, what);
    ladle_op_destroy(&dist);
    ladle_op_destroy(&seq);
}

static void linear_case(ladle_partition *p, int D, int S, int row, int64_t E, int64_t F,
                        int bias, uint64_t seed)
{
    int64_t xs[3] = {D + 2, S + 1, E}, fs[3] = {D + 2, S + 1, F};
    ladle_op *dist = NULL, *seq = NULL;
    LT_OK(ladle_dist_tp_linear_create(
        LT_LINEAR(row ? F : E, row ? E : F, bias, row ? LADLE_TP_ROW : 0), p, xs, LADLE_F64,
        lt_device(), seed, &dist));
    LT_OK(ladle_linear_create(LT_LINEAR(row ? F : E, row ? E : F, bias, 0), 3,
                              row ? fs : xs, LADLE_F64, lt_device(), seed, &seq));
    char what[96];
    snprintf(what, sizeof what, "%s linear %dx%d, E %lld F %lld bias %d",
             row ? "row" : "column", D, S, (long long)E, (long long)F, bias);
    lt_equivalent(dist, seq, seed + 200, 1e-10, what);
    if (!bias)
        lt_adjoint_ok(dist, seed + 300, what);
    ladle_op_destroy(&dist);
    ladle_op_destroy(&seq);
}

START_TEST(layers_equal_their_twins)
{
    int g[32][2], n = grids(world(), g);
    for (int k = 0; k < n; k++) {
        int D = g[k][0], S = g[k][1];
        ladle_partition *p = lt_partition(3, (int[]){D, S, 1}, 0);
        attention_case(p, D, S, 12, 6, 2, 1, 11 + (uint64_t)k); /* uneven heads beyond 4 */
        attention_case(p, D, S, 8, S + 1, 3, 0, 21 + (uint64_t)k); /* H d != E, no biases */
        linear_case(p, D, S, 0, 6, 2 * S + 1, 1, 31 + (uint64_t)k);
        linear_case(p, D, S, 1, 6, 2 * S + 1, 1, 41 + (uint64_t)k);
        linear_case(p, D, S, 0, 5, S + 2, 0, 51 + (uint64_t)k);
        linear_case(p, D, S, 1, 5, S + 2, 0, 61 + (uint64_t)k);
        ladle_partition_destroy(&p);
    }
}
END_TEST

/* column -> GELU -> row, with the features split and no message between
 * the two linears, against the sequential chain: y, dx and every weight
 * gradient (the graph's pieces by hand). shared: the two linears share one
 * workspace of caller memory, and every weight pass is deferred until
 * after both backwards (a zero-bubble order), so the column layer must
 * gather its x again. */
static void mlp_case(int shared)
{
    int ranks = world(), D = ranks % 2 == 0 && ranks > 2 ? 2 : 1, S = ranks / D;
    ladle_partition *p = lt_partition(3, (int[]){D, S, 1}, 0);
    int64_t E = 6, F = 4 * S + 1, xs[3] = {D + 1, S + 2, E}, fs[3] = {D + 1, S + 2, F};
    ladle_op *c = NULL, *r = NULL, *gl = NULL, *sc = NULL, *sr = NULL, *sg = NULL;
    LT_OK(ladle_dist_tp_linear_create(LT_LINEAR(xs[2], F, 1, 0), p, xs, LADLE_F64,
                                      lt_device(), 7, &c));
    LT_OK(ladle_dist_tp_linear_create(LT_LINEAR(F, xs[2], 1, LADLE_TP_ROW), p, xs,
                                      LADLE_F64, lt_device(), 8, &r));
    /* the activation on this rank's block of the features-split value */
    int64_t mine[3];
    LT_OK(ladle_layout_box(ladle_op_y_layout(c), LADLE_SELF, NULL, mine));
    LT_OK(
        ladle_activation_create(LADLE_GELU_TANH, 0, 3, mine, LADLE_F64, lt_device(), &gl));
    LT_OK(ladle_linear_create(LT_LINEAR(xs[2], F, 1, 0), 3, xs, LADLE_F64, lt_device(), 7,
                              &sc));
    LT_OK(ladle_linear_create(LT_LINEAR(fs[2], E, 1, 0), 3, fs, LADLE_F64, lt_device(), 8,
                              &sr));
    LT_OK(ladle_activation_create(LADLE_GELU_TANH, 0, 3, fs, LADLE_F64, lt_device(), &sg));
    LT_ASSERT(ladle_layout_is_decomposition(ladle_op_y_layout(c)), "the split features");
    ladle_op *d3[3] = {c, gl, r}, *s3[3] = {sc, sg, sr};
    ladle_tensor *ws = NULL;
    if (shared) { /* memory of the device, from a tensor of it */
        size_t a = ladle_op_workspace_bytes(c), b = ladle_op_workspace_bytes(r);
        size_t most = a > b ? a : b;
        LT_ASSERT(most > 0, "the tensor-parallel layers have a workspace");
        ws = lt_tensor(LADLE_F64, 1, (int64_t[]){(int64_t)(most / 8 + 1)});
        LT_OK(ladle_op_set_workspace(c, ladle_tensor_data(ws), most));
        LT_OK(ladle_op_set_workspace(r, ladle_tensor_data(ws), most));
    }
    ladle_tensor *X = lt_tensor(LADLE_F64, 3, xs), *dY = lt_tensor(LADLE_F64, 3, xs);
    LT_OK(ladle_tensor_fill_random(X, 5, 1));
    LT_OK(ladle_tensor_fill_random(dY, 6, 1));
    ladle_tensor *x = lt_op_tensor(c, 0), *dy = lt_op_tensor(r, 1),
                 *dx = lt_op_tensor(c, 0);
    int64_t xo[3], yo[3];
    LT_OK(ladle_layout_box(ladle_op_x_layout(c), LADLE_SELF, xo, NULL));
    LT_OK(ladle_layout_box(ladle_op_y_layout(r), LADLE_SELF, yo, NULL));
    lt_box_extract(X, xo, x);
    lt_box_extract(dY, yo, dy);
    /* forward both chains, keeping every value; backward from dy */
    ladle_tensor *dv[4] = {x, lt_op_tensor(c, 1), lt_op_tensor(c, 1), lt_op_tensor(r, 1)};
    ladle_tensor *sv[4] = {X, lt_tensor(LADLE_F64, 3, fs), lt_tensor(LADLE_F64, 3, fs),
                           lt_tensor(LADLE_F64, 3, xs)};
    ladle_ctx *dc[3], *scx[3];
    for (int k = 0; k < 3; k++) {
        LT_OK(ladle_ctx_create(d3[k], &dc[k]));
        LT_OK(ladle_ctx_create(s3[k], &scx[k]));
        LT_OK(ladle_layer_forward(d3[k], dc[k], dv[k], dv[k + 1]));
        LT_OK(ladle_layer_forward(s3[k], scx[k], sv[k], sv[k + 1]));
    }
    LT_ASSERT(lt_box_error(sv[3], yo, dv[3]) <= 1e-12, "MLP y");
    ladle_tensor *dg[4] = {dx, lt_op_tensor(c, 1), lt_op_tensor(c, 1), dy};
    ladle_tensor *sg4[4] = {lt_tensor(LADLE_F64, 3, xs), lt_tensor(LADLE_F64, 3, fs),
                            lt_tensor(LADLE_F64, 3, fs), dY};
    for (int k = 2; k >= 0; k--) {
        LT_OK(ladle_layer_backward(d3[k], dc[k], dg[k + 1], dg[k]));
        if (!shared)
            LT_OK(ladle_layer_backward_weight(d3[k], dc[k], dg[k + 1]));
        LT_OK(ladle_layer_backward(s3[k], scx[k], sg4[k + 1], sg4[k]));
        LT_OK(ladle_layer_backward_weight(s3[k], scx[k], sg4[k + 1]));
    }
    for (int k = 2; k >= 0 && shared; k--)
        LT_OK(ladle_layer_backward_weight(d3[k], dc[k], dg[k + 1]));
    LT_ASSERT(lt_box_error(sg4[0], xo, dx) <= 1e-12, "MLP dx");
    double eg = 0;
    for (int k = 0; k < 3; k += 2) {
        LT_OK(ladle_layer_sync_gradients(d3[k]));
        for (int i = 0; i < ladle_op_num_params(d3[k]); i++) {
            int64_t off[3];
            LT_OK(ladle_op_param_shard(d3[k], i, NULL, NULL, off, NULL));
            eg = fmax(eg,
                      lt_box_error(ladle_op_grad(s3[k], i), off, ladle_op_grad(d3[k], i)));
        }
    }
    LT_ASSERT(eg <= 1e-10, "MLP weight gradients %.2e apart (shared workspace %d)", eg,
              shared);
    for (int k = 0; k < 3; k++) {
        ladle_ctx_destroy(&dc[k]);
        ladle_ctx_destroy(&scx[k]);
        ladle_op_destroy(&d3[k]);
        ladle_op_destroy(&s3[k]);
    }
    for (int k = 1; k < 4; k++) {
        ladle_tensor_destroy(&dv[k]);
        ladle_tensor_destroy(&sv[k]);
    }
    for (int k = 0; k < 3; k++) {
        ladle_tensor_destroy(&dg[k]);
        ladle_tensor_destroy(&sg4[k]);
    }
    LT_DESTROY(&X, &x, &dy, &dY, &ws);
    ladle_partition_destroy(&p);
}

/* Two tensor-parallel attentions sharing one workspace under one record,
 * as a graph shares it, with the weight passes deferred after both
 * backwards: each must notice that the other wrote the memory (its G x and
 * G dy, and its local attention's dQKV) and gather and recompute, giving
 * the gradients of a twin run in the plain order on its own workspace, bit
 * for bit. */
START_TEST(deferred_weight_passes_shared)
{
    int ranks = world(), D = ranks % 2 == 0 && ranks > 2 ? 2 : 1, S = ranks / D;
    ladle_partition *p = lt_partition(3, (int[]){D, S, 1}, 0);
    int64_t xs[3] = {D + 1, S + 2, 8};
    ladle_attention_desc d;
    ladle_attention_desc_init(&d, 8, S + 1);
    d.head_dim = 2;
    ladle_op *a[2] = {NULL}, *twin[2] = {NULL};
    for (int k = 0; k < 2; k++) {
        LT_OK(ladle_dist_tp_attention_create(&d, p, xs, LADLE_F64, lt_device(), 5 + k,
                                             &a[k]));
        LT_OK(ladle_dist_tp_attention_create(&d, p, xs, LADLE_F64, lt_device(), 5 + k,
                                             &twin[k]));
    }
    void *mem = NULL;
    const ladle_backend *be = NULL;
    ladle__ws_tags tags;
    LT_OK(ladle__share_scratch(2, a, &mem, &be, &tags));
    ladle_tensor *x[2], *y = lt_op_tensor(a[0], 1), *dy[2], *dx = lt_op_tensor(a[0], 0);
    ladle_ctx *c[2], *tc[2];
    for (int k = 0; k < 2; k++) {
        x[k] = lt_op_tensor(a[0], 0);
        dy[k] = lt_op_tensor(a[0], 1);
        LT_OK(ladle_tensor_fill_random(x[k], 10 + (uint64_t)k + 7 * (uint64_t)lt_rank, 1));
        LT_OK(ladle_tensor_fill_random(dy[k], 20 + (uint64_t)k + 7 * (uint64_t)lt_rank, 1));
        LT_OK(ladle_ctx_create(a[k], &c[k]));
        LT_OK(ladle_ctx_create(twin[k], &tc[k]));
    }
    /* shared: F0 F1 B0 B1 W0 W1; twins: F B W each */
    for (int k = 0; k < 2; k++)
        LT_OK(ladle_layer_forward(a[k], c[k], x[k], y));
    for (int k = 0; k < 2; k++)
        LT_OK(ladle_layer_backward(a[k], c[k], dy[k], dx));
    for (int k = 0; k < 2; k++)
        LT_OK(ladle_layer_backward_weight(a[k], c[k], dy[k]));
    for (int k = 0; k < 2; k++) {
        LT_OK(ladle_layer_forward(twin[k], tc[k], x[k], y));
        LT_OK(ladle_layer_backward(twin[k], tc[k], dy[k], dx));
        LT_OK(ladle_layer_backward_weight(twin[k], tc[k], dy[k]));
    }
    double worst = 0;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < ladle_op_num_params(a[k]); i++) {
            const ladle_tensor *g = ladle_op_grad(a[k], i), *t = ladle_op_grad(twin[k], i);
            for (int64_t e = 0; e < ladle_tensor_numel(g); e++)
                worst = fmax(worst, fabs(lt_get(g, e) - lt_get(t, e)));
        }
    LT_ASSERT(worst == 0, "deferred weight passes on a shared workspace: %.2e apart",
              worst);
    for (int k = 0; k < 2; k++) {
        ladle_ctx_destroy(&c[k]), ladle_ctx_destroy(&tc[k]);
        ladle_tensor_destroy(&x[k]), ladle_tensor_destroy(&dy[k]);
        ladle_op_destroy(&a[k]), ladle_op_destroy(&twin[k]);
    }
    if (mem)
        be->fn->free(be, mem);
    ladle_tensor_destroy(&y), ladle_tensor_destroy(&dx);
    ladle_partition_destroy(&p);
}
END_TEST

START_TEST(mlp_chain)
{
    mlp_case(0);
    mlp_case(1);
}
END_TEST

START_TEST(refusals)
{
    int ranks = world();
    ladle_partition *p = lt_partition(3, (int[]){1, ranks, 1}, 0);
    ladle_partition *p2 = lt_partition(2, (int[]){1, ranks}, 0);
    ladle_attention_desc d;
    ladle_attention_desc_init(&d, 8, 2);
    int64_t xs[3] = {2, ranks, 8};
    ladle_op *op = NULL;
    LT_FAILS(ladle_dist_tp_attention_create(NULL, p, xs, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_dist_tp_attention_create(&d, p2, xs, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_PARTITION);
    if (ranks > 2) /* 2 heads over 3 or more ranks */
        LT_FAILS(ladle_dist_tp_attention_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op),
                 LADLE_ERR_SHAPE);
    int64_t short_t[3] = {2, ranks > 1 ? ranks - 1 : 0, 8};
    LT_FAILS(ladle_dist_tp_attention_create(&d, p, short_t, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_SHAPE);
    int64_t wrong_e[3] = {2, ranks, 9};
    LT_FAILS(ladle_dist_tp_attention_create(&d, p, wrong_e, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_SHAPE);
    if (ranks <= 2) { /* flags: LADLE_CHECKED is the one the layer knows */
        d.flags = 0x100;
        LT_FAILS(ladle_dist_tp_attention_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op),
                 LADLE_ERR_ARG);
        d.flags = LADLE_CHECKED;
        LT_OK(ladle_dist_tp_attention_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op));
        ladle_op_destroy(&op);
        d.flags = 0;
    }
    LT_FAILS(ladle_dist_tp_linear_create(LT_LINEAR(xs[2], 4, 1, 0x100), p, xs, LADLE_F64,
                                         lt_device(), 1, &op),
             LADLE_ERR_ARG);
    /* the width of x is in_features of a column layer, out_features of a row one */
    LT_FAILS_SAYING(ladle_dist_tp_linear_create(LT_LINEAR(4, xs[2], 1, 0), p, xs, LADLE_F64,
                                                lt_device(), 1, &op),
                    LADLE_ERR_SHAPE, "in_features 4");
    LT_FAILS_SAYING(ladle_dist_tp_linear_create(LT_LINEAR(xs[2], 4, 1, LADLE_TP_ROW), p, xs,
                                                LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_SHAPE, "out_features 4");
    LT_FAILS(ladle_dist_tp_linear_create(LT_LINEAR(xs[2], ranks - 1, 1, 0), p, xs,
                                         LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_dist_tp_linear_create(LT_LINEAR(xs[2], 4, 1, 0), p, xs, LADLE_I64,
                                         lt_device(), 1, &op),
             LADLE_ERR_DTYPE);
    /* one rank asks for other features: every rank refuses */
    if (ranks > 1) {
        int rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        LT_FAILS(ladle_dist_tp_linear_create(
                     LT_LINEAR(rank == 1 ? 9 : 8, xs[2], 1, LADLE_TP_ROW), p, xs, LADLE_F64,
                     lt_device(), 1, &op),
                 LADLE_ERR_ARG);
    }
    LT_ASSERT(op == NULL, "no op after a refusal");
    ladle_partition_destroy(&p);
    ladle_partition_destroy(&p2);
}
END_TEST

LT_SUITE("dist_tp", "dist_tp", 0, layers_equal_their_twins, mlp_chain,
         deferred_weight_passes_shared, refusals)
