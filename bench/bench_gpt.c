/*
 * bench_gpt: the GPT training step (forward, loss, backward with the
 * gradients summed, AdamW) in tokens per second, on one rank and, at R
 * ranks, data parallel (D = R) and tensor parallel with sequence
 * parallelism (S = R), measured in the same launch, the layouts interleaved
 * rep by rep; and the memory each rank's model holds after creation
 * (nothing is allocated later), from ladle's allocator hook: parameters
 * with their gradients, and the rest (activations, saved contexts,
 * workspace).
 *
 *   mpiexec -n 2 bench_gpt [--layers 4] [--width 128] [--heads 4]
 *                          [--context 128] [--batch 16] [--steps 3] [--reps 5]
 *                          [--microbatches 4] [--f32-tiles 0|1]
 *
 * At R ranks a fourth layout is the pipeline: the GPT as a chain
 * (ladle_gpt_layers) cut into R stages by the planner from the profiled
 * layer costs, 1F1B over the microbatches of the same batch. At an even R
 * a fifth is the same with tensor parallelism inside the stages: R/2
 * stages, each on a worker of 2 ranks (ladle_gpt_layers_on); at R = 2 one
 * stage, which is tensor parallelism with the batch in microbatches.
 *
 * Two more layouts are the data-parallel one (one rank's model at R = 1)
 * with activation recomputation (ladle_gpt_desc's recompute: block, then
 * selective); a line compares their step time and memory besides the
 * parameters with the same layout without it.
 *
 * One line per layout and a summary of ratios against one rank. Random
 * token ids: the speed does not depend on the text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "ladle.h"

typedef struct counter {
    size_t live, peak;
} counter;

static void *count_alloc(void *user, size_t bytes, size_t align, ladle_device device)
{
    counter *c = user;
    (void)device;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align,
                       bytes ? bytes : 1) != 0)
        return NULL;
    c->live += bytes;
    if (c->live > c->peak)
        c->peak = c->live;
    return p;
}

static void count_free(void *user, void *ptr, size_t bytes, ladle_device device)
{
    counter *c = user;
    (void)device;
    c->live -= bytes;
    free(ptr);
}

#define CHECK(call)                                                                        \
    do {                                                                                   \
        ladle_status st_ = (call);                                                         \
        if (st_ != LADLE_OK) {                                                             \
            fprintf(stderr, "bench_gpt: %s: %s\n", #call, ladle_error_message());          \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                  \
        }                                                                                  \
    } while (0)

typedef struct run {
    const char *name;
    int D, S, active;
    int recompute; /* a ladle_gpt_recompute */
    MPI_Comm comm;
    ladle_graph *g;
    ladle_optimizer *opt;
    ladle_pipeline *pl; /* the pipeline layout: R stages, 1F1B */
    ladle_pipe_schedule *sched;
    ladle_partition *p;
    ladle_partition *wp[64]; /* the workers of the tensor-parallel pipeline */
    int nw;
    MPI_Comm wcomm;   /* this rank's worker's ranks */
    double simulated; /* the schedule's speedup over one rank, simulated */
    int skip;         /* the layout does not fit the ranks */
    ladle_tensor *ids, *tgt;
    size_t bytes, param_bytes;
    size_t kinds[LADLE_MEM_KINDS]; /* the graph's bytes by kind (the tracker's) */
    size_t values[3]; /* the graph's values: bytes of y, of dy, how many */
    ladle_memory_tracker *tracker;
    double *times;
} run;

static void make(run *r, const ladle_gpt_desc *base, int rank, counter *c)
{
    ladle_gpt_desc d = *base;
    d.data_ways = r->D;
    d.tensor_ways = r->S;
    d.recompute = r->recompute;
    r->active = rank < r->D * r->S;
    MPI_Comm_split(MPI_COMM_WORLD, r->active ? 0 : MPI_UNDEFINED, rank, &r->comm);
    if (!r->active)
        return;
    ladle_allocator a = {sizeof a, count_alloc, count_free, c};
    size_t before = c->live;
    ladle_memory_tracker *mt = NULL;
    CHECK(ladle_memory_tracker_create(&mt));
    CHECK(ladle_allocator_set(&a));
    CHECK(ladle_memory_track(mt));
    CHECK(ladle_gpt_create(&d, ladle_comm_of(r->comm), &r->g));
    CHECK(ladle_memory_track(NULL));
    CHECK(ladle_allocator_set(NULL));
    r->bytes = c->live - before;
    ladle_memory_stats s;
    ladle_memory_stats_init(&s);
    CHECK(ladle_memory_report(mt, &s));
    memcpy(r->kinds, s.current, sizeof r->kinds);
    for (int id = 0;; id++) { /* until the ids run out */
        const ladle_tensor *y = NULL, *dy = NULL;
        if (ladle_graph_value(r->g, id, &y) != LADLE_OK)
            break;
        if (y != NULL)
            r->values[0] += (size_t)ladle_tensor_numel(y) * ladle_dtype_size(ladle_tensor_dtype(y));
        if (ladle_graph_value_grad(r->g, id, &dy) == LADLE_OK && dy != NULL)
            r->values[1] += (size_t)ladle_tensor_numel(dy) * ladle_dtype_size(ladle_tensor_dtype(dy));
        r->values[2]++;
    }
    r->tracker = mt; /* it still counts the graph: freed after it */
    for (int i = 0; i < ladle_graph_num_params(r->g); i++) {
        ladle_tensor *p = NULL;
        CHECK(ladle_graph_param(r->g, i, NULL, &p, NULL));
        r->param_bytes += 2 * (size_t)ladle_tensor_numel(p) * ladle_dtype_size(d.dtype);
    }
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, LADLE_OPT_ADAMW, 1e-3);
    CHECK(ladle_optimizer_create(&od, &r->opt));
    CHECK(ladle_optimizer_add_graph(r->opt, r->g));
    int64_t n = d.batch / r->D, t = d.context / r->S;
    CHECK(ladle_tensor_create(LADLE_I64, LADLE_CPU, 2, (int64_t[]){n, t}, &r->ids));
    CHECK(ladle_tensor_create(LADLE_I64, LADLE_CPU, 1, (int64_t[]){n * t}, &r->tgt));
    int64_t *x = ladle_tensor_data(r->ids), *y = ladle_tensor_data(r->tgt);
    for (int64_t k = 0; k < n * t; k++) {
        x[k] = (int64_t)(((uint64_t)(k + rank * 7919) * 2654435761u) % (uint64_t)d.vocab);
        y[k] = (int64_t)(((uint64_t)(k + rank * 104729) * 40503u) % (uint64_t)d.vocab);
    }
}

/* Rank 0's profile of the n layers of the chain d into cost (f, b, w, n
 * each), sent to every rank so that every rank cuts alike. */
static void profile_chain(const ladle_gpt_desc *d, int rank, int n, double *cost,
                          ladle_op **ls)
{
    if (rank == 0) {
        CHECK(ladle_gpt_layers(d, ladle_comm_of(MPI_COMM_SELF), 0, n, ls));
        CHECK(ladle_pipe_profile(n, ls, 3, cost, cost + n, cost + 2 * n));
        for (int i = 0; i < n; i++)
            ladle_op_destroy(&ls[i]);
    }
    MPI_Bcast(cost, 3 * n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

/* The planner's cut of the n profiled layers into `stages`, into *plan, and
 * its 1F1B schedule over m microbatches into r->sched, with the
 * simulator's speedup over one rank (tp == 1 only) in r->simulated. */
static void plan_pipe(run *r, const double *cost, int n, int stages, int tp, int m,
                      ladle_pipe_plan *plan)
{
    ladle_pipe_plan_desc pd;
    ladle_pipe_plan_desc_init(&pd, n, cost, cost + n, cost + 2 * n);
    pd.min_stages = pd.max_stages = stages;
    CHECK(ladle_pipe_plan_create(&pd, stages, plan));
    ladle_pipe_costs pc = {0};
    double f[64], b[64], w[64];
    for (int j = 0; j < plan->stages; j++) {
        f[j] = b[j] = w[j] = 0;
        for (int i = ladle_pipe_plan_first(plan, j);
             i < ladle_pipe_plan_first(plan, j + 1); i++)
            f[j] += cost[i], b[j] += cost[n + i], w[j] += cost[2 * n + i];
    }
    pc.f = f, pc.b = b, pc.w = w;
    CHECK(
        ladle_pipe_schedule_generate(LADLE_PIPE_1F1B, stages, NULL, 1, m, &pc, &r->sched));
    /* the simulator's view: one rank runs m (f + b + w) of every layer */
    ladle_pipe_sim sim = {0};
    CHECK(ladle_pipe_simulate(r->sched, &pc, NULL, &sim));
    double serial = 0;
    for (int i = 0; i < 3 * n; i++)
        serial += m * cost[i];
    r->simulated = sim.makespan > 0 && tp == 1 ? serial / sim.makespan : 0;
    ladle_pipe_sim_destroy(&sim);
}

/* This rank's stage of the plan (cnt layers from lo, in ls) and the
 * pipeline over it: one rank a worker (tp == 1) or tp ranks a tensor
 * parallel worker. The allocations are counted into r->bytes. */
static void build_stage(run *r, ladle_gpt_desc *d, int rank, int ranks, int tp, int stages,
                        const ladle_pipe_plan *plan, ladle_op **ls, counter *c)
{
    r->comm = MPI_COMM_WORLD;
    r->active = 1;
    int stage = rank / tp, lo = ladle_pipe_plan_first(plan, stage),
        cnt = ladle_pipe_plan_first(plan, stage + 1) - lo;
    ladle_allocator a = {sizeof a, count_alloc, count_free, c};
    size_t before = c->live;
    CHECK(ladle_allocator_set(&a));
    ladle_op *loss = NULL;
    ladle_pipe_stage st = {stage, cnt, ls};
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, LADLE_OPT_ADAMW, 1e-3);
    if (tp == 1) {
        CHECK(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 1, (int[]){ranks}, NULL,
                                     &r->p));
        CHECK(ladle_gpt_layers(d, ladle_comm_of(MPI_COMM_SELF), lo, cnt, ls));
        if (stage == stages - 1)
            CHECK(ladle_gpt_loss_create(d, ladle_comm_of(MPI_COMM_SELF), &loss));
        CHECK(ladle_pipeline_create(r->p, r->sched, 1, &st, loss, &od, &r->pl));
    } else { /* worker w: ranks w tp .. w tp + tp - 1 */
        r->nw = stages;
        for (int w = 0; w < stages; w++) {
            int members[64];
            for (int q = 0; q < tp; q++)
                members[q] = w * tp + q;
            CHECK(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 1, (int[]){tp},
                                         members, &r->wp[w]));
        }
        MPI_Comm_split(MPI_COMM_WORLD, stage, rank, &r->wcomm);
        d->tensor_ways = tp;
        CHECK(ladle_gpt_layers(d, ladle_comm_of(r->wcomm), lo, cnt, ls));
        if (stage == stages - 1)
            CHECK(ladle_gpt_loss_create(d, ladle_comm_of(r->wcomm), &loss));
        ladle_pipeline_desc pld;
        ladle_pipeline_desc_init(&pld, r->sched, &od);
        CHECK(ladle_pipeline_create_workers(&pld, stages, r->wp, 1, &st, loss, &r->pl));
    }
    CHECK(ladle_allocator_set(NULL));
    r->bytes = c->live - before;
    for (int i = 0; i < cnt; i++)
        for (int q = 0; q < ladle_op_num_params(ls[i]); q++)
            r->param_bytes += 2 * (size_t)ladle_tensor_numel(ladle_op_param(ls[i], q)) *
                              ladle_dtype_size(d->dtype);
}

/* The pipeline's whole batch of base's shape: token ids, and the targets
 * in the last stage's row order. */
static void pipe_inputs(run *r, const ladle_gpt_desc *base, const ladle_gpt_desc *d)
{
    int64_t nb = base->batch, t = base->context;
    CHECK(ladle_tensor_create(LADLE_I64, LADLE_CPU, 2, (int64_t[]){nb, t}, &r->ids));
    CHECK(ladle_tensor_create(LADLE_I64, LADLE_CPU, 1, (int64_t[]){nb * t}, &r->tgt));
    ladle_tensor *windows = NULL;
    CHECK(ladle_tensor_create(LADLE_I64, LADLE_CPU, 2, (int64_t[]){nb, t}, &windows));
    int64_t *x = ladle_tensor_data(r->ids), *y = ladle_tensor_data(windows);
    for (int64_t k = 0; k < nb * t; k++) {
        x[k] = (int64_t)(((uint64_t)k * 2654435761u) % (uint64_t)d->vocab);
        y[k] = (int64_t)(((uint64_t)k * 40503u) % (uint64_t)d->vocab);
    }
    CHECK(ladle_gpt_chain_targets(d, windows, r->tgt)); /* the last stage's row order */
    ladle_tensor_destroy(&windows);
}

/* The GPT cut into R / tp stages, each on tp ranks, by the planner from
 * rank 0's profile of the chain (so every rank cuts alike), run 1F1B over
 * m microbatches of the same global batch. */
static void make_pipe(run *r, const ladle_gpt_desc *base, int rank, int ranks, int tp,
                      int m, counter *c)
{
    ladle_gpt_desc d = *base;
    int stages = ranks / tp;
    d.batch = base->batch / m;
    int n = ladle_gpt_num_layers(&d);
    double *cost = calloc((size_t)(3 * n), sizeof(double));
    ladle_op **ls = calloc((size_t)n, sizeof(ladle_op *));
    if (cost == NULL || ls == NULL) {
        fprintf(stderr, "bench_gpt: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    profile_chain(&d, rank, n, cost, ls);
    ladle_pipe_plan plan;
    plan_pipe(r, cost, n, stages, tp, m, &plan);
    build_stage(r, &d, rank, ranks, tp, stages, &plan, ls, c);
    if (rank == 0) {
        printf("# pipeline%s: %d stages from the profile, first layers",
               tp > 1 ? " x tensor parallel 2" : "", stages);
        for (int j = 0; j < plan.stages; j++)
            printf(" %d", ladle_pipe_plan_first(&plan, j));
        printf(" of %d; %d microbatches of %lld\n", n, m, (long long)d.batch);
    }
    pipe_inputs(r, base, &d);
    free(cost);
    free(ls);
}

static double steps(run *r, int k)
{
    const ladle_tensor *xs[1] = {r->ids}, *ts[1] = {r->tgt};
    MPI_Barrier(r->comm);
    double t0 = bench_now();
    for (int s = 0; r->pl && s < k; s++)
        CHECK(ladle_pipeline_step(r->pl, r->ids, r->tgt, NULL));
    for (int s = 0; r->g && s < k; s++) {
        CHECK(ladle_graph_zero_grad(r->g));
        CHECK(ladle_graph_forward(r->g, 1, xs, NULL));
        CHECK(ladle_graph_loss(r->g, 1, ts, NULL));
        CHECK(ladle_graph_backward(r->g, 1));
        CHECK(ladle_optimizer_step(r->opt));
    }
    double dt = bench_now() - t0, worst = 0;
    MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, r->comm);
    return worst / k;
}

/* Read the options into d and k (steps), reps and m (microbatches).
 * Returns nonzero on a bad option. */
static int parse_options(int rank, int argc, char **argv, ladle_gpt_desc *d, int *k,
                         int *reps, int *m)
{
    long long layers = 4, width = 128, heads = 4, context = 128, batch = 16, nsteps = 3,
              nreps = 5, micro = 4, tiles = 0;
    const long long most = 1 << 20;
    const bench_opt opts[] = {
        {"--layers", 1, most, &layers, NULL, NULL, 0},
        {"--width", 1, most, &width, NULL, NULL, 0},
        {"--heads", 1, most, &heads, NULL, NULL, 0},
        {"--context", 1, most, &context, NULL, NULL, 0},
        {"--batch", 1, most, &batch, NULL, NULL, 0},
        {"--steps", 1, most, &nsteps, NULL, NULL, 0},
        {"--reps", 1, most, &nreps, NULL, NULL, 0},
        {"--microbatches", 1, most, &micro, NULL, NULL, 0},
        {"--f32-tiles", 0, 1, &tiles, NULL, NULL, 0},
    };
    if (bench_options("bench_gpt", rank, argc, argv, opts, sizeof opts / sizeof opts[0]))
        return 1;
    d->layers = (int)layers, d->width = width, d->heads = heads, d->context = context;
    d->batch = batch;
    d->attn_f32_tiles = (int)tiles;
    *k = (int)nsteps, *reps = (int)nreps, *m = (int)micro;
    return 0;
}

enum { NRUNS = 7 };

/* The layouts named in runs, each marked skip where it does not fit the
 * ranks (said on rank 0; on one rank only the one rank's and the two
 * recomputed ones are tried). Returns how many there are. */
static int plan_runs(run *runs, const ladle_gpt_desc *d, int m, int rank, int ranks)
{
    static const char *const names[NRUNS] = {
        "1 rank",        "data parallel", "tensor parallel", "pipeline 1F1B",
        "pipe x TP 2",   "DP recompute",  "DP selective"};
    int ways[NRUNS][2] = {{1, 1},         {ranks, 1}, {1, ranks}, {ranks, 1},
                          {ranks / 2, 2}, {ranks, 1}, {ranks, 1}};
    for (int i = 0; i < NRUNS; i++) {
        runs[i].name = names[i], runs[i].D = ways[i][0], runs[i].S = ways[i][1];
        runs[i].wcomm = MPI_COMM_NULL;
    }
    runs[5].recompute = LADLE_GPT_RECOMPUTE_BLOCK;
    runs[6].recompute = LADLE_GPT_RECOMPUTE_SELECTIVE;
    /* the pipeline needs a layer per stage: without, the three others */
    ladle_gpt_desc dm = *d;
    dm.batch = d->batch / m;
    int chain = ladle_gpt_num_layers(&dm);
    int nruns = NRUNS;
    /* the layouts that fit R ranks: D divides the batch; S divides the
     * context and has a head and a feature each; a layer per stage */
    runs[1].skip = d->batch % ranks != 0;
    runs[2].skip = d->context % ranks != 0 || d->heads < ranks || 4 * d->width < ranks;
    runs[3].skip = chain < ranks || ranks > 64;
    runs[4].skip = ranks % 2 != 0 || d->context % 2 != 0 || d->heads < 2 ||
                   chain < ranks / 2 || ranks > 128;
    runs[5].skip = runs[6].skip = runs[1].skip;
    for (int i = 1; i < nruns; i++)
        if (rank == 0 && runs[i].skip && ranks > 1)
            printf("# %s: does not fit %d ranks (batch %lld, context %lld, %lld heads, "
                   "%d layers in the chain)\n",
                   runs[i].name, ranks, (long long)d->batch, (long long)d->context,
                   (long long)d->heads, chain);
    for (int i = 1; i < 5 && ranks == 1; i++)
        runs[i].skip = 1;
    return nruns;
}

/* A warm-up step of each active run, then reps rounds of k steps of each,
 * the ranks in step between runs. */
static void time_runs(run *runs, int nruns, int reps, int k)
{
    for (int i = 0; i < nruns; i++) /* a warm-up step each */
        if (runs[i].active)
            steps(&runs[i], 1);
    for (int rep = 0; rep < reps; rep++)
        for (int i = 0; i < nruns; i++) {
            if (runs[i].active)
                runs[i].times[rep] = steps(&runs[i], k);
            MPI_Barrier(MPI_COMM_WORLD);
        }
}

/* The largest over the ranks of what run r holds besides its parameters
 * and their gradients: activations, saved contexts, workspace. Collective. */
static size_t other_bytes(const run *r)
{
    size_t other = r->active ? r->bytes - r->param_bytes : 0, most = 0;
    MPI_Allreduce(&other, &most, 1, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
    return most;
}

/* Rank 0: the bytes by kind (the largest over the ranks, MiB) of the
 * data-parallel runs' graphs, with and without recomputation.
 * Collective. */
static void kinds_lines(const run *runs, int b)
{
    const int which[3] = {b, 5, 6};
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int j = 0; j < 3; j++) {
        const run *r = &runs[which[j]];
        unsigned long v[LADLE_MEM_KINDS + 3], most[LADLE_MEM_KINDS + 3];
        for (int k = 0; k < LADLE_MEM_KINDS; k++)
            v[k] = r->active ? (unsigned long)r->kinds[k] : 0;
        for (int k = 0; k < 3; k++)
            v[LADLE_MEM_KINDS + k] = r->active ? (unsigned long)r->values[k] : 0;
        MPI_Allreduce(v, most, LADLE_MEM_KINDS + 3, MPI_UNSIGNED_LONG, MPI_MAX,
                      MPI_COMM_WORLD);
        if (rank != 0)
            continue;
        printf("# %-14s MiB/rank by kind:", j == 0 ? r->name : j == 1 ? "block" : "selective");
        for (int k = 0; k < LADLE_MEM_KINDS; k++)
            printf(" %s %.2f", ladle_memory_kind_name((ladle_memory_kind)k),
                   (double)most[k] / 1048576.0);
        printf("; %lu values: y %.2f dy %.2f\n", most[LADLE_MEM_KINDS + 2],
               (double)most[LADLE_MEM_KINDS] / 1048576.0,
               (double)most[LADLE_MEM_KINDS + 1] / 1048576.0);
    }
}

/* Rank 0: recomputation (runs 5 and 6) against the same layout without
 * it (run b): memory besides the parameters, and the step time. */
static void recompute_line(const run *runs, int b, int rank, int reps)
{
    size_t base = other_bytes(&runs[b]), blk = other_bytes(&runs[5]),
           sel = other_bytes(&runs[6]);
    if (rank != 0)
        return;
    double t = bench_median(runs[b].times, reps);
    printf("# recomputation at %d rank(s): non-parameter MiB/rank %.2f -> block %.2f (%.2fx "
           "less, %.2fx the step time), selective %.2f (%.2fx less, %.2fx the time)\n",
           runs[b].D, (double)base / 1048576.0, (double)blk / 1048576.0,
           (double)base / (double)blk, bench_median(runs[5].times, reps) / t,
           (double)sel / 1048576.0, (double)base / (double)sel,
           bench_median(runs[6].times, reps) / t);
}

/* Rank 0: the table of the runs' medians and memory (the largest over the
 * ranks), and the pipeline's speedup against the simulator's. Collective. */
static void print_table(const run *runs, int nruns, const ladle_gpt_desc *d, int rank,
                        int reps, int k)
{
    double tokens = (double)(d->batch * d->context), base = 0;
    if (rank == 0)
        printf("# GPT step (AdamW), %d layers, width %lld, %lld heads, context %lld, batch "
               "%lld, f32; medians of %d reps of %d steps\n"
               "%-16s %5s %12s %12s %10s %14s %14s\n",
               d->layers, (long long)d->width, (long long)d->heads, (long long)d->context,
               (long long)d->batch, reps, k, "layout", "ranks", "ms/step", "tokens/s",
               "vs 1 rank", "params MiB/rk", "other MiB/rk");
    for (int i = 0; i < nruns; i++) {
        if (runs[i].skip) /* alike on every rank */
            continue;
        double med = runs[i].active ? bench_median(runs[i].times, reps) : 0;
        size_t other = runs[i].bytes - runs[i].param_bytes, o_max = 0, p_max = 0;
        size_t pb = runs[i].param_bytes;
        MPI_Allreduce(&other, &o_max, 1, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(&pb, &p_max, 1, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
        if (i == 0)
            base = med;
        if (rank == 0)
            printf("%-16s %5d %12.2f %12.0f %10.2f %14.2f %14.2f\n", runs[i].name,
                   runs[i].D * runs[i].S, 1e3 * med, tokens / med, base / med,
                   (double)p_max / 1048576.0, (double)o_max / 1048576.0);
    }
    if (!runs[5].skip)
        kinds_lines(runs, runs[1].skip || runs[1].D == 1 ? 0 : 1);
    if (!runs[5].skip)
        recompute_line(runs, runs[1].skip || runs[1].D == 1 ? 0 : 1, rank, reps);
    if (rank == 0 && nruns > 3 && !runs[3].skip)
        printf(
            "# pipeline 1F1B: %.2f x one rank measured, %.2f simulated from the profiled "
            "layer costs (compute only: no optimizer step, messages free)\n",
            base / bench_median(runs[3].times, reps), runs[3].simulated);
}

/* Everything each run made. */
static void destroy_runs(run *runs, int nruns)
{
    for (int i = 0; i < nruns; i++) {
        ladle_tensor_destroy(&runs[i].ids);
        ladle_tensor_destroy(&runs[i].tgt);
        ladle_optimizer_destroy(&runs[i].opt);
        ladle_graph_destroy(&runs[i].g);
        ladle_memory_tracker_destroy(&runs[i].tracker);
        ladle_pipeline_destroy(&runs[i].pl);
        ladle_pipe_schedule_destroy(&runs[i].sched);
        ladle_partition_destroy(&runs[i].p);
        for (int w = 0; w < runs[i].nw; w++)
            ladle_partition_destroy(&runs[i].wp[w]);
        if (runs[i].wcomm != MPI_COMM_NULL)
            MPI_Comm_free(&runs[i].wcomm);
        if (!runs[i].skip && runs[i].comm != MPI_COMM_NULL &&
            runs[i].comm != MPI_COMM_WORLD)
            MPI_Comm_free(&runs[i].comm);
        free(runs[i].times);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    ladle_gpt_desc d;
    ladle_gpt_desc_init(&d);
    d.vocab = 114; /* the fortunes' */
    int k = 0, reps = 0, m = 0;
    if (parse_options(rank, argc, argv, &d, &k, &reps, &m)) {
        MPI_Finalize();
        return 2;
    }
    if (d.batch % m != 0) {
        if (rank == 0)
            fprintf(stderr, "bench_gpt: --microbatches %d must divide the batch %lld\n", m,
                    (long long)d.batch);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    counter c = {0, 0};
    run runs[NRUNS];
    memset(runs, 0, sizeof runs);
    int nruns = plan_runs(runs, &d, m, rank, ranks);
    for (int i = 0; i < nruns; i++) {
        if (runs[i].skip)
            continue;
        if (i == 3 || i == 4)
            make_pipe(&runs[i], &d, rank, ranks, i == 3 ? 1 : 2, m, &c);
        else
            make(&runs[i], &d, rank, &c);
        runs[i].times = calloc((size_t)reps, sizeof(double));
    }
    time_runs(runs, nruns, reps, k);
    print_table(runs, nruns, &d, rank, reps, k);
    destroy_runs(runs, nruns);
    MPI_Finalize();
    return 0;
}
