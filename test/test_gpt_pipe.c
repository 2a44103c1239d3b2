/*
 * The GPT in a pipeline: the residual block (ladle_residual_create) against
 * y = x + f(x) computed here, its dot-product test and refusals; the GPT
 * as a chain (ladle_gpt_layers) whose weights are the graph's, one for
 * one, with and without dropout; and the chain cut into stages by the
 * planner from profiled layer costs (costs agreed from rank 0), run by
 * ladle_pipeline_step under 1F1B
 * and, where the planner replicates a stage, the hybrid schedule: the
 * losses of 3 AdamW steps and every weight each rank holds afterwards
 * against the graph GPT on the whole batch (f64, 1e-12 and 1e-10).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { V = 11, T = 6, MB = 2, M = 4, L = 2, E = 8, H = 2, STEPS = 3 };

static void desc(ladle_gpt_desc *d, int64_t batch)
{
    ladle_gpt_desc_init(d);
    d->vocab = V;
    d->context = T;
    d->batch = batch;
    d->layers = L;
    d->width = E;
    d->heads = H;
    d->mlp = 2;
    d->dtype = LADLE_F64;
    d->device = lt_device();
    d->seed = 9;
}

static void batch_of(int step, int64_t *ids, int64_t *tg)
{
    for (int i = 0; i < M * MB * T; i++) {
        ids[i] = (int64_t)(((uint64_t)step * 13 + (uint64_t)i * 7 + (uint64_t)(i * i)) % V);
        tg[i] = (int64_t)(((uint64_t)step * 5 + (uint64_t)i * 3 + 1) % V);
    }
}

static void opt_desc(ladle_optimizer_desc *od)
{
    ladle_optimizer_desc_init(od, LADLE_OPT_ADAMW, 1e-2);
    od->weight_decay = 0.01;
}

/* y = x + W x for a linear layer without bias, by hand; the backward's
 * dx = dy + W^T dy and the weight gradient dW = dy x^T; the adjoint. */
START_TEST(residual_block)
{
    int64_t xs[2] = {3, 4};
    ladle_op *lin = NULL, *res = NULL;
    LT_OK(ladle_linear_create(LT_LINEAR(xs[1], 4, 0, 0), 2, xs, LADLE_F64, lt_device(), 3,
                              &lin));
    ladle_op *body = lin;
    LT_OK(ladle_residual_create(&body, &res));
    LT_ASSERT(body == NULL && ladle_residual_body(res) == lin, "the block owns its body");
    LT_ASSERT(ladle_op_kind_of(res) == LADLE_OP_RESIDUAL, "kind");
    LT_ASSERT(ladle_op_num_params(res) == 1 &&
                  ladle_op_param(res, 0) == ladle_op_param(lin, 0),
              "the body's parameters");
    ladle_tensor *x = lt_tensor(LADLE_F64, 2, xs), *y = lt_tensor(LADLE_F64, 2, xs),
                 *dy = lt_tensor(LADLE_F64, 2, xs), *dx = lt_tensor(LADLE_F64, 2, xs);
    LT_OK(ladle_tensor_fill_random(x, 1, 1));
    LT_OK(ladle_tensor_fill_random(dy, 2, 1));
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_ctx_create(res, &ctx));
    LT_OK(ladle_op_zero_grad(res));
    LT_OK(ladle_layer_forward(res, ctx, x, y));
    LT_OK(ladle_layer_backward(res, ctx, dy, dx));
    LT_OK(ladle_layer_backward_weight(res, ctx, dy));
    const ladle_tensor *w = ladle_op_param(lin, 0), *gw = ladle_op_grad(lin, 0);
    double ey = 0, ex = 0, eg = 0;
    for (int n = 0; n < 3; n++)
        for (int o = 0; o < 4; o++) {
            double wantx = lt_get(x, n * 4 + o), wantd = lt_get(dy, n * 4 + o);
            for (int i = 0; i < 4; i++) {
                wantx += lt_get(w, o * 4 + i) * lt_get(x, n * 4 + i);
                wantd += lt_get(w, i * 4 + o) * lt_get(dy, n * 4 + i);
            }
            ey = fmax(ey, fabs(lt_get(y, n * 4 + o) - wantx));
            ex = fmax(ex, fabs(lt_get(dx, n * 4 + o) - wantd));
        }
    for (int o = 0; o < 4; o++)
        for (int i = 0; i < 4; i++) {
            double want = 0;
            for (int n = 0; n < 3; n++)
                want += lt_get(dy, n * 4 + o) * lt_get(x, n * 4 + i);
            eg = fmax(eg, fabs(lt_get(gw, o * 4 + i) - want));
        }
    LT_ASSERT(ey < 1e-14 && ex < 1e-14 && eg < 1e-14, "y %.2e, dx %.2e, dW %.2e by hand",
              ey, ex, eg);
    lt_adjoint_ok(res, 4, "residual of a linear layer");
    ladle_ctx_destroy(&ctx);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&y);
    ladle_tensor_destroy(&dy), ladle_tensor_destroy(&dx);
    ladle_op_destroy(&res);

    /* refusals: the body stays the caller's */
    ladle_op *wide = NULL, *emb = NULL, *out = NULL;
    LT_OK(ladle_linear_create(LT_LINEAR(xs[1], 5, 1, 0), 2, xs, LADLE_F64, lt_device(), 3,
                              &wide));
    LT_FAILS(ladle_residual_create(&wide, &out), LADLE_ERR_SHAPE);
    LT_ASSERT(wide != NULL && out == NULL, "a refused body stays the caller's");
    ladle_embedding_desc ed;
    ladle_embedding_desc_init(&ed, 7, 4);
    LT_OK(ladle_embedding_create(&ed, 2, xs, LADLE_F64, lt_device(), 1, &emb));
    LT_FAILS(ladle_residual_create(&emb, &out), LADLE_ERR_ARG);
    LT_FAILS(ladle_residual_create(NULL, &out), LADLE_ERR_NULL);
    ladle_op *none = NULL;
    LT_FAILS(ladle_residual_create(&none, &out), LADLE_ERR_NULL);
    LT_FAILS(ladle_residual_create(&wide, NULL), LADLE_ERR_NULL);
    ladle_op_destroy(&wide);
    ladle_op_destroy(&emb);
}
END_TEST

/* The graph GPT on the whole batch: losses of STEPS AdamW steps, and its
 * parameters afterwards (the graph, kept for comparison). */
static ladle_graph *reference(double *loss)
{
    ladle_gpt_desc d;
    desc(&d, M * MB);
    ladle_graph *g = NULL;
    LT_OK(ladle_gpt_create(&d, ladle_comm_of(MPI_COMM_SELF), &g));
    ladle_optimizer_desc od;
    opt_desc(&od);
    ladle_optimizer *opt = NULL;
    LT_OK(ladle_optimizer_create(&od, &opt));
    LT_OK(ladle_optimizer_add_graph(opt, g));
    int64_t ids[M * MB * T], tg[M * MB * T];
    ladle_tensor *X = lt_tensor(LADLE_I64, 2, (int64_t[]){M * MB, T});
    ladle_tensor *Y = lt_tensor(LADLE_I64, 1, (int64_t[]){M * MB * T});
    for (int t = 0; t < STEPS; t++) {
        batch_of(t, ids, tg);
        LT_OK(ladle_tensor_write(X, ids));
        LT_OK(ladle_tensor_write(Y, tg));
        const ladle_tensor *xs[1] = {X}, *ts[1] = {Y};
        LT_OK(ladle_graph_zero_grad(g));
        LT_OK(ladle_graph_forward(g, 1, xs, NULL));
        LT_OK(ladle_graph_loss(g, 1, ts, &loss[t]));
        LT_OK(ladle_graph_backward(g, 0));
        LT_OK(ladle_optimizer_step(opt));
    }
    ladle_tensor_destroy(&X), ladle_tensor_destroy(&Y);
    ladle_optimizer_destroy(&opt);
    return g;
}

/* The chain's layers have the graph's parameters, in the graph's order. */
START_TEST(chain_is_the_graph)
{
    ladle_gpt_desc d;
    desc(&d, MB);
    int n = ladle_gpt_num_layers(&d);
    LT_ASSERT(n == 2 + 2 * L + 3, "%d layers in the chain", n);
    ladle_op *ls[16] = {NULL};
    LT_OK(ladle_gpt_layers(&d, ladle_comm_of(MPI_COMM_SELF), 0, n, ls));
    ladle_gpt_desc dg;
    desc(&dg, MB);
    ladle_graph *g = NULL;
    LT_OK(ladle_gpt_create(&dg, ladle_comm_of(MPI_COMM_SELF), &g));
    int k = 0;
    double worst = 0;
    for (int i = 0; i < n; i++)
        for (int q = 0; q < ladle_op_num_params(ls[i]); q++, k++) {
            const char *name = NULL;
            ladle_tensor *p = NULL;
            LT_OK(ladle_graph_param(g, k, &name, &p, NULL));
            const ladle_tensor *c = ladle_op_param(ls[i], q);
            LT_ASSERT(ladle_tensor_numel(c) == ladle_tensor_numel(p), "%s: size", name);
            for (int64_t e = 0; e < ladle_tensor_numel(p); e++)
                worst = fmax(worst, fabs(lt_get(c, e) - lt_get(p, e)));
        }
    LT_ASSERT(k == ladle_graph_num_params(g), "%d parameters in the chain, %d in the graph",
              k, ladle_graph_num_params(g));
    LT_ASSERT(worst == 0, "the chain's weights differ from the graph's by %.2e", worst);
    /* a middle range draws the seeds it draws in the whole chain */
    ladle_op *mid[2] = {NULL};
    LT_OK(ladle_gpt_layers(&d, ladle_comm_of(MPI_COMM_SELF), 3, 2, mid));
    for (int q = 0; q < ladle_op_num_params(mid[1]); q++)
        for (int64_t e = 0; e < ladle_tensor_numel(ladle_op_param(mid[1], q)); e++)
            worst = fmax(worst, fabs(lt_get(ladle_op_param(mid[1], q), e) -
                                     lt_get(ladle_op_param(ls[4], q), e)));
    LT_ASSERT(worst == 0, "a range's weights differ from the whole chain's");
    /* with dropout the chain gains a layer and the blocks' dropouts draw
     * seeds: the weights still follow the graph's */
    ladle_gpt_desc dd = d;
    dd.dropout = 0.1;
    ladle_graph *gd = NULL;
    ladle_op *ld[16] = {NULL};
    int nd = ladle_gpt_num_layers(&dd);
    LT_ASSERT(nd == n + 1, "%d layers with dropout", nd);
    LT_OK(ladle_gpt_layers(&dd, ladle_comm_of(MPI_COMM_SELF), 0, nd, ld));
    LT_OK(ladle_gpt_create(&dd, ladle_comm_of(MPI_COMM_SELF), &gd));
    int kd = 0;
    for (int i = 0; i < nd; i++)
        for (int q = 0; q < ladle_op_num_params(ld[i]); q++, kd++) {
            ladle_tensor *p = NULL;
            LT_OK(ladle_graph_param(gd, kd, NULL, &p, NULL));
            for (int64_t e = 0; e < ladle_tensor_numel(p); e++)
                worst =
                    fmax(worst, fabs(lt_get(ladle_op_param(ld[i], q), e) - lt_get(p, e)));
        }
    LT_ASSERT(worst == 0 && kd == ladle_graph_num_params(gd),
              "with dropout the chain's weights differ from the graph's by %.2e", worst);
    for (int i = 0; i < nd; i++)
        ladle_op_destroy(&ld[i]);
    ladle_graph_destroy(&gd);
    /* refusals */
    LT_FAILS(ladle_gpt_layers(&d, ladle_comm_of(MPI_COMM_SELF), n - 1, 2, mid),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_gpt_layers(&d, ladle_comm_of(MPI_COMM_SELF), -1, 1, mid), LADLE_ERR_ARG);
    LT_FAILS(ladle_gpt_layers(&d, ladle_comm_of(MPI_COMM_SELF), 0, 0, mid), LADLE_ERR_ARG);
    LT_FAILS(ladle_gpt_layers(NULL, ladle_comm_of(MPI_COMM_SELF), 0, 1, mid),
             LADLE_ERR_NULL);
    ladle_gpt_desc bad = d;
    bad.tensor_ways = 2;
    LT_FAILS(ladle_gpt_layers(&bad, ladle_comm_of(MPI_COMM_SELF), 0, 1, mid),
             LADLE_ERR_ARG);
    bad = d;
    bad.heads = 3;
    LT_ASSERT(ladle_gpt_num_layers(&bad) == -1, "a bad descriptor has no chain");
    LT_FAILS(ladle_gpt_loss_create(&bad, ladle_comm_of(MPI_COMM_SELF), &mid[0]),
             LADLE_ERR_ARG);
    for (int i = 0; i < n; i++)
        ladle_op_destroy(&ls[i]);
    for (int i = 0; i < 2; i++)
        ladle_op_destroy(&mid[i]);
    ladle_graph_destroy(&g);
}
END_TEST

/* before[i]: the parameters of the one-rank chain's layers before layer i
 * (the graph's index of layer i's first parameter). */
static void params_before(int before[17])
{
    ladle_gpt_desc d;
    desc(&d, MB);
    ladle_op *all[16] = {NULL};
    int n = ladle_gpt_num_layers(&d);
    LT_OK(ladle_gpt_layers(&d, ladle_comm_of(MPI_COMM_SELF), 0, n, all));
    before[0] = 0;
    for (int i = 0; i < n; i++) {
        before[i + 1] = before[i] + ladle_op_num_params(all[i]);
        ladle_op_destroy(&all[i]);
    }
}

/* STEPS AdamW steps of pipeline pl on the batches of batch_of, the
 * targets in the row order of a last stage on S ranks: the losses on the
 * ranks in the pipeline (active) against the graph GPT's want (1e-12), and
 * every box of every weight this rank holds (stage j's layers from chain
 * layer first[j]) against g's (1e-10). */
static void check_steps(ladle_pipeline *pl, int active, int S, int nheld,
                        const ladle_pipe_stage *held, const int *first,
                        const ladle_graph *g, const double *want, const char *what)
{
    ladle_gpt_desc dt;
    desc(&dt, MB);
    dt.tensor_ways = S;
    int64_t ids[M * MB * T], tg[M * MB * T];
    ladle_tensor *X = lt_tensor(LADLE_I64, 2, (int64_t[]){M * MB, T});
    ladle_tensor *Yw = NULL, *Y = NULL;
    LT_OK(ladle_tensor_create(LADLE_I64, LADLE_CPU, 2, (int64_t[]){M * MB, T}, &Yw));
    LT_OK(ladle_tensor_create(LADLE_I64, LADLE_CPU, 1, (int64_t[]){M * MB * T}, &Y));
    double worst = 0;
    for (int t = 0; t < STEPS; t++) {
        double got = 0;
        batch_of(t, ids, tg);
        LT_OK(ladle_tensor_write(X, ids));
        LT_OK(ladle_tensor_write(Yw, tg));
        LT_OK(ladle_gpt_chain_targets(&dt, Yw, Y));
        LT_OK(ladle_pipeline_step(pl, X, Y, &got));
        if (active)
            worst = fmax(worst, fabs(got - want[t]) / fabs(want[t]));
    }
    LT_ASSERT(worst <= 1e-12, "%s: the losses differ from the graph's by %.2e", what,
              worst);
    /* chain layer i's parameters are the graph's from the count of those
     * before it */
    int before[17] = {0};
    params_before(before);
    double werr = 0;
    for (int h = 0; h < nheld; h++) {
        int count = 0, j = held[h].stage;
        ladle_op *const *ls = ladle_pipeline_layers(pl, j, &count);
        for (int i = 0; i < count; i++) {
            if (ladle_op_num_params(ls[i]) !=
                before[first[j] + i + 1] - before[first[j] + i])
                werr = INFINITY; /* asserted below, on every rank alike */
            for (int q = 0; q < ladle_op_num_params(ls[i]); q++) {
                ladle_tensor *ref = NULL;
                int nd = 0;
                int64_t glob[8], off[8], numel = 1;
                if (ladle_graph_param(g, before[first[j] + i] + q, NULL, &ref, NULL) != 0 ||
                    ladle_op_param_shard(ls[i], q, &nd, glob, off, NULL) != 0) {
                    werr = INFINITY;
                    continue;
                }
                for (int e = 0; e < nd; e++)
                    numel *= glob[e];
                if (numel != ladle_tensor_numel(ref))
                    werr = INFINITY;
                else
                    werr = fmax(werr, lt_box_error(ref, off, ladle_op_param(ls[i], q)));
            }
        }
    }
    LT_ASSERT(werr <= 1e-10, "%s: the weights differ from the graph's by %.2e", what, werr);
    ladle_tensor_destroy(&X), ladle_tensor_destroy(&Y), ladle_tensor_destroy(&Yw);
}

/* Stage boundaries and replicas for W workers from the layers' profiled
 * costs (rank 0's, so every rank plans alike): at least min(W, 2) stages. */
static void plan_stages(int W, int *stages, int *first, int *rep)
{
    ladle_gpt_desc d;
    desc(&d, MB);
    int n = ladle_gpt_num_layers(&d);
    ladle_op *ls[16] = {NULL};
    double cost[3 * 16];
    ladle_status st = LADLE_OK; /* LT_OK is collective: check after */
    if (lt_rank == 0) {
        st = ladle_gpt_layers(&d, ladle_comm_of(MPI_COMM_SELF), 0, n, ls);
        if (st == LADLE_OK)
            st = ladle_pipe_profile(n, ls, 3, cost, cost + n, cost + 2 * n);
        for (int i = 0; i < n; i++)
            ladle_op_destroy(&ls[i]);
    }
    MPI_Bcast(&st, 1, MPI_INT, 0, MPI_COMM_WORLD);
    LT_ASSERT(st == LADLE_OK, "profiling the chain on rank 0: %s", ladle_status_name(st));
    MPI_Bcast(cost, 3 * n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    ladle_pipe_plan plan;
    int lo = W < 2 ? 1 : 2;
    ladle_pipe_plan_desc pd;
    ladle_pipe_plan_desc_init(&pd, n, cost, cost + n, cost + 2 * n);
    pd.min_stages = lo;
    pd.max_stages = W;
    LT_OK(ladle_pipe_plan_create(&pd, W, &plan));
    *stages = plan.stages;
    for (int j = 0; j <= plan.stages; j++)
        first[j] = ladle_pipe_plan_first(&plan, j);
    for (int j = 0; j < plan.stages; j++)
        rep[j] = ladle_pipe_plan_replicas(&plan, j);
}

START_TEST(pipeline_equals_the_graph)
{
    if (lt_device() != LADLE_CPU) /* stage boundaries hand host memory to MPI */
        return;
    double want[STEPS];
    ladle_graph *g = reference(want);
    int W = lt_size > 4 ? 4 : lt_size, S = 0, first[8] = {0}, rep[8] = {0};
    plan_stages(W, &S, first, rep);
    int replicated = 0;
    for (int j = 0; j < S; j++)
        replicated |= rep[j] > 1;
    ladle_pipe_style style = replicated ? LADLE_PIPE_HYBRID : LADLE_PIPE_1F1B;
    ladle_pipe_schedule *s = NULL;
    LT_OK(ladle_pipe_schedule_generate(style, S, rep, 1, M, NULL, &s));
    int workers = ladle_pipe_schedule_workers(s);
    LT_ASSERT(workers == W, "the plan uses %d of %d workers", workers, W);
    char what[96];
    snprintf(what, sizeof what, "%s, %d stages on %d ranks", ladle_pipe_style_name(style),
             S, W);
    if (getenv("LT_VERBOSE") && lt_rank == 0)
        printf("planned: %s (first layers %d %d %d, replicas %d %d %d)\n", what, first[0],
               first[1], first[2], rep[0], rep[1], rep[2]);
    ladle_partition *p = lt_partition(1, (int[]){W}, 0);
    int me = ladle_partition_active(p) ? ladle_partition_rank(p) : -1;
    ladle_gpt_desc d;
    desc(&d, MB);
    ladle_pipe_stage held[8];
    ladle_op *mine[8][16];
    int nheld = 0, last_here = 0, made = 1;
    for (int j = 0; me >= 0 && j < S; j++)
        for (int q = 0; q < rep[j]; q++)
            if (ladle_pipe_schedule_worker(s, j, q) == me) {
                held[nheld].stage = j;
                held[nheld].n = first[j + 1] - first[j];
                made &= ladle_gpt_layers(&d, ladle_comm_of(MPI_COMM_SELF), first[j],
                                         held[nheld].n, mine[nheld]) == LADLE_OK;
                held[nheld].layers = mine[nheld];
                last_here |= j == S - 1;
                nheld++;
            }
    ladle_op *loss = NULL;
    if (last_here)
        made &= ladle_gpt_loss_create(&d, ladle_comm_of(MPI_COMM_SELF), &loss) == LADLE_OK;
    LT_ASSERT(made, "%s: the stages' layers", what);
    ladle_optimizer_desc od;
    opt_desc(&od);
    ladle_pipeline *pl = NULL;
    LT_OK(ladle_pipeline_create(p, s, nheld, held, loss, &od, &pl));
    check_steps(pl, me >= 0, 1, nheld, held, first, g, want, what);
    ladle_pipeline_destroy(&pl);
    ladle_pipe_schedule_destroy(&s);
    ladle_partition_destroy(&p);
    ladle_graph_destroy(&g);
}
END_TEST

/* Containers of distributed layers: a sequential over a data-parallel
 * linear sums its gradients as the layer alone does, and shows its
 * parameters' copies; the refusals of ladle_dist_replicate_create_on, of
 * residual blocks over bodies whose y lies elsewhere than x, and of the
 * _on GPT calls with the wrong number of ranks. */
START_TEST(distributed_containers)
{
    if (lt_device() == LADLE_CUDA) /* the residual refusals use the CPU layers only */
        return;
    int all[1] = {lt_size};
    ladle_partition *p = lt_partition(1, all, 0);
    int64_t xs[2] = {3, 4};
    ladle_op *a = NULL, *b = NULL, *la = NULL, *lb = NULL, *seq = NULL;
    LT_OK(ladle_linear_create(LT_LINEAR(xs[1], 2, 1, 0), 2, xs, LADLE_F64, lt_device(), 5,
                              &la));
    LT_OK(ladle_linear_create(LT_LINEAR(xs[1], 2, 1, 0), 2, xs, LADLE_F64, lt_device(), 5,
                              &lb));
    LT_OK(ladle_dist_replicate_create(p, &la, 0, &a));
    LT_OK(ladle_dist_replicate_create(p, &lb, 0, &b));
    LT_OK(ladle_sequential_create(1, &b, &seq));
    ladle_tensor *x = lt_tensor(LADLE_F64, 2, xs), *dy = lt_op_tensor(a, 1);
    ladle_tensor *y = lt_op_tensor(a, 1);
    LT_OK(ladle_tensor_fill_random(x, 11 + (uint64_t)lt_rank, 1));
    LT_OK(ladle_tensor_fill_random(dy, 21 + (uint64_t)lt_rank, 1));
    ladle_op *twins[2] = {a, seq};
    for (int k = 0; k < 2; k++) {
        ladle_ctx *c = NULL;
        LT_OK(ladle_ctx_create(twins[k], &c));
        LT_OK(ladle_op_zero_grad(twins[k]));
        LT_OK(ladle_layer_forward(twins[k], c, x, y));
        LT_OK(ladle_layer_backward_weight(twins[k], c, dy));
        LT_OK(ladle_layer_sync_gradients(twins[k]));
        ladle_ctx_destroy(&c);
    }
    double diff = 0;
    for (int q = 0; q < 2; q++)
        for (int64_t e = 0; e < ladle_tensor_numel(ladle_op_grad(a, q)); e++)
            diff = fmax(diff, fabs(lt_get(ladle_op_grad(a, q), e) -
                                   lt_get(ladle_op_grad(seq, q), e)));
    LT_ASSERT(diff == 0, "the container's summed gradients differ by %.2e", diff);
    int owner = -1;
    LT_OK(ladle_op_param_shard(seq, 0, NULL, NULL, NULL, &owner));
    LT_ASSERT(owner == (lt_rank == 0), "rank 0 alone writes the copies' weight");
    /* a copy of the layer that the data-parallel container already is */
    ladle_op *again = NULL;
    LT_FAILS(ladle_dist_replicate_create(p, &seq, 0, &again), LADLE_ERR_ARG);
    ladle_op_destroy(&seq);
    ladle_op_destroy(&a);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&y), ladle_tensor_destroy(&dy);

    /* layouts: 3 rows over the ranks (uneven), a layer of 1 row's block
     * fits rank 0's box nowhere but where the box is 1 row */
    int pr[2] = {lt_size, 1};
    ladle_partition *rows = lt_partition(2, pr, 0);
    ladle_layout *lx = NULL;
    LT_OK(ladle_layout_create_balanced(rows, 2, (int64_t[]){3 * lt_size - 1, 4}, &lx));
    int64_t mine[2], off[2];
    LT_OK(ladle_layout_box(lx, LADLE_SELF, off, mine));
    ladle_op *relu = NULL, *on = NULL;
    LT_OK(ladle_activation_create(LADLE_RELU, 0, 2, (int64_t[]){3, 4}, LADLE_F64,
                                  lt_device(), &relu));
    if (lt_size > 1) { /* the last rank's box is 2 rows: it fails, and the others with it */
        ladle_status st = ladle_dist_replicate_create_on(lx, lx, &relu, 0, &on);
        ladle_status want = mine[0] == 3 ? LADLE_ERR_REMOTE : LADLE_ERR_SHAPE;
        LT_ASSERT(st == want && on == NULL && relu != NULL,
                  "a box that is not the layer's on one rank: %s, expected %s",
                  ladle_status_name(st), ladle_status_name(want));
    }
    ladle_op_destroy(&relu);
    LT_OK(ladle_activation_create(LADLE_RELU, 0, 2, mine, LADLE_F64, lt_device(), &relu));
    LT_FAILS(ladle_dist_replicate_create_on(NULL, lx, &relu, 0, &on), LADLE_ERR_NULL);
    if (lt_size > 1) { /* y on the ranks in the other order: rank r's box is another */
        int rev[8];
        for (int r = 0; r < lt_size; r++)
            rev[r] = lt_size - 1 - r;
        ladle_partition *back = lt_partition_ranks(2, pr, rev);
        ladle_layout *ly = NULL;
        LT_OK(ladle_layout_create_balanced(back, 2, (int64_t[]){3 * lt_size, 4}, &ly));
        ladle_layout *lxe = NULL;
        LT_OK(ladle_layout_create_balanced(rows, 2, (int64_t[]){3 * lt_size, 4}, &lxe));
        ladle_op *r3 = NULL, *moved = NULL, *res = NULL;
        LT_OK(ladle_activation_create(LADLE_RELU, 0, 2, xs, LADLE_F64, lt_device(), &r3));
        LT_OK(ladle_dist_replicate_create_on(lxe, ly, &r3, 0, &moved));
        LT_ASSERT(ladle_op_x_layout(moved) == lxe && ladle_op_y_layout(moved) == ly,
                  "the copies have the layouts");
        /* a rank whose boxes agree (the middle one of an odd count) fails
         * with the others */
        LT_FAILS(ladle_residual_create(&moved, &res), LADLE_ERR_SHAPE);
        LT_ASSERT(moved != NULL, "a refused body stays the caller's");
        /* a chain distributed on one side only */
        ladle_op *plain = NULL, *chain[2] = {moved, NULL}, *half = NULL;
        LT_OK(
            ladle_activation_create(LADLE_RELU, 0, 2, xs, LADLE_F64, lt_device(), &plain));
        chain[1] = plain;
        LT_OK(ladle_sequential_create(2, chain, &half));
        LT_FAILS(ladle_residual_create(&half, &res), LADLE_ERR_ARG);
        ladle_op_destroy(&half);
        ladle_layout_destroy(&ly), ladle_layout_destroy(&lxe);
        ladle_partition_destroy(&back);
    }
    ladle_op_destroy(&relu);
    ladle_layout_destroy(&lx);
    ladle_partition_destroy(&rows);

    /* the GPT over a communicator of the wrong size, and the targets */
    ladle_gpt_desc d;
    desc(&d, MB);
    d.tensor_ways = lt_size + 1;
    ladle_op *ls[2] = {NULL};
    LT_FAILS(ladle_gpt_layers(&d, ladle_comm_of(MPI_COMM_WORLD), 0, 1, ls), LADLE_ERR_ARG);
    LT_FAILS(ladle_gpt_loss_create(&d, ladle_comm_of(MPI_COMM_WORLD), &ls[0]),
             LADLE_ERR_ARG);
    d.tensor_ways = 2;
    ladle_tensor *tw = NULL, *tr = NULL, *odd = NULL;
    LT_OK(ladle_tensor_create(LADLE_I64, LADLE_CPU, 2, (int64_t[]){MB, T}, &tw));
    LT_OK(ladle_tensor_create(LADLE_I64, LADLE_CPU, 1, (int64_t[]){MB * T}, &tr));
    LT_OK(ladle_tensor_create(LADLE_I64, LADLE_CPU, 2, (int64_t[]){MB + 1, T}, &odd));
    int64_t w[MB * T], r[MB * T];
    for (int i = 0; i < MB * T; i++)
        w[i] = i;
    LT_OK(ladle_tensor_write(tw, w));
    LT_OK(ladle_gpt_chain_targets(&d, tw, tr));
    LT_OK(ladle_tensor_read(tr, r));
    /* block 0: window 0 positions 0-2, window 1 positions 0-2; then block 1 */
    int64_t want[12] = {0, 1, 2, 6, 7, 8, 3, 4, 5, 9, 10, 11};
    int same = MB * T == 12;
    for (int i = 0; same && i < 12; i++)
        same = r[i] == want[i];
    LT_ASSERT(same, "the rows' order by sequence block");
    LT_FAILS(ladle_gpt_chain_targets(&d, odd, tr), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_gpt_chain_targets(&d, tw, tw), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_gpt_chain_targets(&d, tr, tr), LADLE_ERR_SHAPE);
    ladle_tensor_destroy(&tw), ladle_tensor_destroy(&tr), ladle_tensor_destroy(&odd);
    ladle_partition_destroy(&p);
}
END_TEST

/* One pipeline whose workers are groups of ranks, each running its
 * stages' layers tensor parallel over the group (ladle_gpt_layers_on):
 * nst stages cut at cut[] (layer numbers), replicated rep[] times, on
 * workers of the sizes wsize[] (in the schedule's worker order, ranks
 * from 0 on). The losses of STEPS AdamW steps and every weight box each
 * rank holds afterwards against the graph GPT on one rank. */
static void tp_case(ladle_pipe_style style, int nst, const int *cut, const int *rep,
                    const int *wsize, const ladle_graph *g, const double *want)
{
    ladle_pipe_schedule *s = NULL;
    LT_OK(ladle_pipe_schedule_generate(style, nst, rep, 1, M, NULL, &s));
    int W = ladle_pipe_schedule_workers(s), base = 0, mine = -1;
    char what[128];
    int len = snprintf(what, sizeof what, "%s, workers of", ladle_pipe_style_name(style));
    ladle_partition *workers[8] = {NULL};
    for (int w = 0; w < W; w++) {
        int ranks[8];
        for (int r = 0; r < wsize[w]; r++)
            ranks[r] = base + r;
        workers[w] = lt_partition_ranks(1, &wsize[w], ranks);
        if (lt_rank >= base && lt_rank < base + wsize[w])
            mine = w;
        base += wsize[w];
        len += snprintf(what + len, sizeof what - (size_t)len, " %d", wsize[w]);
    }
    MPI_Comm wc = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, mine >= 0 ? mine : MPI_UNDEFINED, lt_rank, &wc);
    ladle_gpt_desc d;
    desc(&d, MB);
    ladle_pipe_stage held[4];
    ladle_op *ls[4][16];
    ladle_op *loss = NULL;
    int nheld = 0, made = 1, last_S = 1;
    for (int w = 0; w < W; w++)
        if (ladle_pipe_schedule_worker(s, nst - 1, 0) == w)
            last_S = wsize[w];
    for (int j = 0; mine >= 0 && j < nst; j++)
        for (int q = 0; q < rep[j]; q++)
            if (ladle_pipe_schedule_worker(s, j, q) == mine) {
                d.tensor_ways = wsize[mine];
                held[nheld] = (ladle_pipe_stage){j, cut[j + 1] - cut[j], ls[nheld]};
                made &= ladle_gpt_layers(&d, ladle_comm_of(wc), cut[j], held[nheld].n,
                                         ls[nheld]) == LADLE_OK;
                if (j == nst - 1)
                    made &= ladle_gpt_loss_create(&d, ladle_comm_of(wc), &loss) == LADLE_OK;
                nheld++;
            }
    LT_ASSERT(made, "%s: the stages' layers: %s", what, ladle_error_message());
    ladle_optimizer_desc od;
    opt_desc(&od);
    ladle_pipeline *pl = NULL;
    ladle_pipeline_desc pld;
    ladle_pipeline_desc_init(&pld, s, &od);
    LT_OK(ladle_pipeline_create_workers(&pld, W, workers, nheld, held, loss, &pl));
    check_steps(pl, mine >= 0, last_S, nheld, held, cut, g, want, what);
    ladle_pipeline_destroy(&pl);
    ladle_pipe_schedule_destroy(&s);
    for (int w = 0; w < W; w++)
        ladle_partition_destroy(&workers[w]);
    if (wc != MPI_COMM_NULL)
        MPI_Comm_free(&wc);
}

/* Tensor parallelism inside pipeline stages, at every rank count that
 * has the ranks: one stage on two ranks (2), a one-rank stage feeding a
 * two-rank one (3), two stages of two ranks each and one stage of two
 * ranks replicated twice (4). */
START_TEST(pipeline_tensor_parallel)
{
    if (lt_device() != LADLE_CPU || lt_size < 2)
        return;
    double want[STEPS];
    ladle_graph *g = reference(want);
    int n = 2 + 2 * L + 3;
    int one[2] = {1, 1}, w2[1] = {2}, w12[2] = {1, 2}, w22[2] = {2, 2};
    tp_case(LADLE_PIPE_1F1B, 1, (int[]){0, n}, one, w2, g, want);
    if (lt_size >= 3)
        tp_case(LADLE_PIPE_1F1B, 2, (int[]){0, 4, n}, one, w12, g, want);
    if (lt_size >= 4) {
        tp_case(LADLE_PIPE_1F1B, 2, (int[]){0, 5, n}, one, w22, g, want);
        tp_case(LADLE_PIPE_HYBRID, 1, (int[]){0, n}, (int[]){2}, w22, g, want);
    }
    ladle_graph_destroy(&g);
}
END_TEST

/* A stage other than the first may not start with the embedding. */
START_TEST(ids_only_on_stage_zero)
{
    if (lt_device() != LADLE_CPU || lt_size < 2)
        return;
    ladle_gpt_desc d;
    desc(&d, MB);
    int n = ladle_gpt_num_layers(&d);
    ladle_pipe_schedule *s = NULL;
    LT_OK(ladle_pipe_schedule_generate(LADLE_PIPE_1F1B, 2, NULL, 1, 2, NULL, &s));
    ladle_partition *p = lt_partition(1, (int[]){2}, 0);
    int me = ladle_partition_active(p) ? ladle_partition_rank(p) : -1;
    /* stage 1 gets the whole chain, stage 0 the position embedding */
    ladle_op *layers[16] = {NULL};
    ladle_pipe_stage held = {me, me == 1 ? n : 1, layers};
    ladle_op *loss = NULL;
    int made = 1;
    if (me == 1) {
        made &=
            ladle_gpt_layers(&d, ladle_comm_of(MPI_COMM_SELF), 0, n, layers) == LADLE_OK;
        made &= ladle_gpt_loss_create(&d, ladle_comm_of(MPI_COMM_SELF), &loss) == LADLE_OK;
    } else if (me == 0) {
        made &=
            ladle_gpt_layers(&d, ladle_comm_of(MPI_COMM_SELF), 1, 1, layers) == LADLE_OK;
    }
    LT_ASSERT(made, "the stages' layers");
    ladle_optimizer_desc od;
    opt_desc(&od);
    ladle_pipeline *pl = NULL;
    ladle_status st = LADLE_ERR_ARG;
    if (me >= 0) {
        st = ladle_pipeline_create(p, s, 1, &held, loss, &od, &pl);
        for (int i = 0; st != LADLE_OK && i < (me == 1 ? n : 1); i++)
            ladle_op_destroy(&layers[i]);
        if (st != LADLE_OK)
            ladle_op_destroy(&loss);
    }
    LT_ASSERT(st != LADLE_OK, "a stage 1 that takes ids is refused");
    ladle_pipeline_destroy(&pl);
    ladle_pipe_schedule_destroy(&s);
    ladle_partition_destroy(&p);
}
END_TEST

LT_SUITE("gpt_pipe", "gpt_pipe", 300, residual_block, chain_is_the_graph,
         pipeline_equals_the_graph, distributed_containers, pipeline_tensor_parallel,
         ids_only_on_stage_zero)
