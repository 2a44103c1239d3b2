/*
 * bench_pipe: pipeline schedules on a network whose stages are deliberately
 * unequal, measured next to what the simulator predicts from the layers'
 * profiled costs.
 *
 * The network: four blocks of linear + ReLU on microbatches of MB rows, f32,
 * MSE loss: H -> H, H -> H, H -> 3H, 3H -> H/3 (H = 256). The third block
 * has 3x the arithmetic of the others and is one layer, so no split of the
 * layers balances the stages: as a 4-stage pipeline it sets the pace. Each
 * layer's forward, input-gradient and weight-gradient times are profiled
 * on every rank at once (medians, averaged over the ranks), again just
 * before and after each schedule's run; the simulator replays every
 * schedule with the mean of those two profiles.
 *
 * Rows: GPipe, 1F1B and ZB-H1 on the 4 stages (on 8 ranks one layer a
 * stage; on 2 ranks the planner's best 2-stage cut), the planner's
 * hybrid (every worker used; on 4 and 8 ranks at least 3 stages, the heavy
 * stage replicated; on 2 ranks its free choice), and on 2 and 4 ranks
 * ZB-V on 2P stages, two a worker in a V (on 2 ranks one block a stage,
 * on 4 one layer): ms per step (median of
 * the timed steps), images/s, the throughput against 1F1B, the measured
 * bubble (from every worker's action timestamps), the simulated step time
 * and bubble from the profiled costs, and the simulation replayed with the
 * run's own mean action durations. m = 16 microbatches by default (m >= 4p).
 *
 * Both simulations model what surrounds the compute too, measured before
 * the runs: each stage boundary's message (the one-way time of a ping-pong
 * of its bytes between ranks 0 and 1: a one-float message's latency as the
 * delay, the rest as the receiver's time, ladle_pipe_sim_desc's recv),
 * each stage's optimizer step (SGD over its layers and the zeroing of
 * their gradients, on rank 0) and, for
 * a replicated stage, the sum of its gradients over the replicas (an
 * MPI_Allreduce of as many floats over as many ranks, plus the runtime's
 * two copies of them). The last column is the profiled simulation without
 * them: what the compute alone predicts.
 *
 * The planner (ladle_pipe_plan_create) gets the same kind of inputs per
 * layer: the receive of each layer's output, and each layer's all-reduce
 * between two replicas as a latency and a bandwidth term. The bench prints
 * its plan, the plan it would choose without them, and its modelled time
 * per microbatch against the measured step over m, for 1F1B and for its
 * plan: the model's predicted speed-up of its plan over 1F1B against the
 * measured one.
 *
 *   mpiexec -n 4 bench_pipe [--steps K] [--microbatches M] [--hidden H]
 *                           [--svg-dir DIR]   (measured and simulated timelines)
 */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ladle.h"

#include "common.h"

#define BLOCKS 4
#define NL (2 * BLOCKS)

static int me, world, steps = 12, m = 16, hidden = 256, mb = 128;

/* the width into block i (and out of the last) */
static int64_t width(int i)
{
    int64_t w[BLOCKS + 1] = {hidden, hidden, hidden, 3 * hidden, hidden / 3};
    return w[i];
}
static const char *svg_dir;

static void die(const char *what)
{
    fprintf(stderr, "bench_pipe [rank %d]: %s: %s\n", me, what, ladle_error_message());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

#define CHECK(expr)                                                                        \
    do {                                                                                   \
        if ((expr) != LADLE_OK)                                                            \
            die(#expr);                                                                    \
    } while (0)

/* Layer i: even ones linear, odd ones ReLU. */
static ladle_op *make_layer(int i)
{
    int64_t xs[2] = {mb, width(i / 2)}, ys[2] = {mb, width(i / 2 + 1)};
    ladle_op *op = NULL;
    if (i % 2 == 0) {
        ladle_linear_desc ld;
        ladle_linear_desc_init(&ld, xs[1], ys[1]);
        CHECK(ladle_linear_create(&ld, 2, xs, LADLE_F32, LADLE_CPU, 10 + (uint64_t)i, &op));
    } else
        CHECK(ladle_activation_create(LADLE_RELU, 0, 2, ys, LADLE_F32, LADLE_CPU, &op));
    return op;
}

/* Forward, input-gradient and weight-gradient seconds of each layer:
 * profiled on every rank at once, as the stages run at once (a core alone
 * may run faster than with its neighbours busy), and averaged over the
 * ranks. Collective. */
static void profile(double f[NL], double b[NL], double w[NL])
{
    ladle_op *ops[NL];
    for (int i = 0; i < NL; i++)
        ops[i] = make_layer(i);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(ladle_pipe_profile(NL, ops, 31, f, b, w));
    for (int i = 0; i < NL; i++)
        ladle_op_destroy(&ops[i]);
    double *v[3] = {f, b, w};
    for (int k = 0; k < 3; k++) {
        MPI_Allreduce(MPI_IN_PLACE, v[k], NL, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; i < NL; i++)
            v[k][i] /= world;
    }
}

typedef struct result {
    double ms, sim_ms, bubble, sim_bubble; /* the profiled costs' prediction */
    double rsim_ms, rsim_bubble;          /* replayed with the run's own durations */
    double bare_ms;                       /* the profiled compute alone */
} result;

/* ---- what surrounds the compute ---------------------------------------- */

/* Layer i's parameters (a linear layer's weight and bias) and the floats of
 * its output for one microbatch. */
static int64_t layer_params(int i)
{
    return i % 2 ? 0 : width(i / 2) * width(i / 2 + 1) + width(i / 2 + 1);
}
static int64_t layer_out(int i) { return (int64_t)mb * width(i / 2 + 1); }

/* The one-way time of `floats` f32 between ranks 0 and 1: half the median
 * round trip. Collective (the other ranks wait). */
static double one_way(int64_t floats)
{
    enum { REPS = 31 };
    float *buf = calloc((size_t)floats, sizeof(float));
    double t[REPS];
    if (buf == NULL)
        die("out of memory");
    MPI_Barrier(MPI_COMM_WORLD);
    for (int r = -3; r < REPS && me < 2; r++) {
        double t0 = MPI_Wtime();
        if (me == 0) {
            MPI_Send(buf, (int)floats, MPI_FLOAT, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)floats, MPI_FLOAT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, (int)floats, MPI_FLOAT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)floats, MPI_FLOAT, 0, 0, MPI_COMM_WORLD);
        }
        if (r >= 0)
            t[r] = (MPI_Wtime() - t0) / 2;
    }
    double v = me == 0 ? bench_median(t, REPS) : 0;
    MPI_Bcast(&v, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    free(buf);
    return v;
}

/* The sum of `floats` f32 over ranks 0 .. r-1 (MPI_Allreduce) and the
 * runtime's copies into and out of its buffer. Collective. */
static double all_reduce(int64_t floats, int r)
{
    enum { REPS = 21 };
    MPI_Comm c;
    MPI_Comm_split(MPI_COMM_WORLD, me < r ? 0 : MPI_UNDEFINED, me, &c);
    float *buf = calloc((size_t)floats, sizeof(float)),
          *g = calloc((size_t)floats, sizeof(float));
    double t[REPS];
    if (buf == NULL || g == NULL)
        die("out of memory");
    for (int k = -2; k < REPS && c != MPI_COMM_NULL; k++) {
        MPI_Barrier(c);
        double t0 = MPI_Wtime();
        memcpy(buf, g, (size_t)floats * sizeof(float));
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)floats, MPI_FLOAT, MPI_SUM, c);
        memcpy(g, buf, (size_t)floats * sizeof(float));
        double e = MPI_Wtime() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &e, 1, MPI_DOUBLE, MPI_MAX, c);
        if (k >= 0)
            t[k] = e;
    }
    double v = me == 0 ? bench_median(t, REPS) : 0;
    MPI_Bcast(&v, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (c != MPI_COMM_NULL)
        MPI_Comm_free(&c);
    free(buf), free(g);
    return v;
}

/* The optimizer step of layers first .. last-1 (SGD, as the runs use) and
 * the zeroing of their gradients, on rank 0 (broadcast). Collective. */
static double step_time(int first, int last)
{
    enum { REPS = 21 };
    double v = 0, t[REPS];
    if (me == 0) {
        ladle_op *ops[NL];
        ladle_optimizer_desc od;
        ladle_optimizer_desc_init(&od, LADLE_OPT_SGD, 0.001);
        ladle_optimizer *opt = NULL;
        CHECK(ladle_optimizer_create(&od, &opt));
        for (int i = first; i < last; i++) {
            ops[i] = make_layer(i);
            CHECK(ladle_optimizer_add_op(opt, ops[i]));
        }
        for (int k = -2; k < REPS; k++) {
            double t0 = MPI_Wtime();
            CHECK(ladle_optimizer_step(opt));
            for (int i = first; i < last; i++)
                CHECK(ladle_op_zero_grad(ops[i]));
            if (k >= 0)
                t[k] = MPI_Wtime() - t0;
        }
        v = bench_median(t, REPS);
        ladle_optimizer_destroy(&opt);
        for (int i = first; i < last; i++)
            ladle_op_destroy(&ops[i]);
    }
    MPI_Bcast(&v, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return v;
}

/* What the planner takes beyond the profile (ladle_pipe_plan_desc),
 * measured by ladle_pipe_profile_comm as ladle-train measures it: the
 * receive of each layer's output, each layer's all-reduce between two
 * replicas, a ring step's latency. Collective. */
static void plan_inputs(double cut[NL], double red[NL], double *lat)
{
    ladle_op *ops[NL];
    for (int i = 0; i < NL; i++)
        ops[i] = make_layer(i);
    CHECK(
        ladle_pipe_profile_comm(ladle_comm_of(MPI_COMM_WORLD), NL, ops, 31, cut, red, lat));
    for (int i = 0; i < NL; i++)
        ladle_op_destroy(&ops[i]);
}

/* Print a plan: its stages, replicas and modelled time per microbatch. */
static void print_plan(const char *what, const ladle_pipe_plan *p)
{
    if (me != 0)
        return;
    printf("%s: %d stages (layers", what, p->stages);
    for (int j = 0; j <= p->stages; j++)
        printf(" %d", ladle_pipe_plan_first(p, j));
    printf("), replicas");
    for (int j = 0; j < p->stages; j++)
        printf(" %d", ladle_pipe_plan_replicas(p, j));
    printf("; %.3f ms per microbatch modelled\n", 1e3 * p->slowest);
}

/* The costs of a split into S stages (replicas r, NULL: 1): the profiled
 * compute of each stage and what surrounds it. Collective. */
typedef struct model {
    double f[64], b[64], w[64], send[64], reduce[64], step[64];
    double recv[64]; /* the receiver's share of a boundary's time */
} model;

/* The stages' compute: the sums of their layers' costs. */
static void stage_sums(int S, const int *first, const double *f, const double *b,
                       const double *w, model *md)
{
    for (int j = 0; j < S; j++) {
        md->f[j] = md->b[j] = md->w[j] = 0;
        for (int i = first[j]; i < first[j + 1]; i++)
            md->f[j] += f[i], md->b[j] += b[i], md->w[j] += w[i];
    }
}

static void model_of(int S, const int *first, const int *r, const double *f,
                     const double *b, const double *w, model *md)
{
    stage_sums(S, first, f, b, w, md);
    for (int j = 0; j < S; j++) {
        int64_t params = 0;
        for (int i = first[j]; i < first[j + 1]; i++)
            params += layer_params(i);
        /* a boundary's one-way time, split: a message's latency (one
         * float's one-way time), the delay before the message is there;
         * the rest, what the bytes add, worker time on the receiver
         * (shared-memory MPI has the receiver copy them across) */
        md->send[j] = md->recv[j] = 0;
        if (j + 1 < S) {
            double t = one_way(layer_out(first[j + 1] - 1)), lat = one_way(1);
            md->send[j] = lat < t ? lat : t;
            md->recv[j] = t - md->send[j];
        }
        md->step[j] = step_time(first[j], first[j + 1]);
        md->reduce[j] = r && r[j] > 1 ? all_reduce(params, r[j]) : 0;
    }
    if (me == 0) {
        printf("modelled (ms): boundaries (latency + receiver's time)");
        for (int j = 0; j + 1 < S; j++)
            printf(" %.3f+%.3f", 1e3 * md->send[j], 1e3 * md->recv[j]);
        printf("; steps");
        for (int j = 0; j < S; j++)
            printf(" %.3f", 1e3 * md->step[j]);
        printf("; gradient sums");
        for (int j = 0; j < S; j++)
            printf(" %.3f", 1e3 * md->reduce[j]);
        printf("\n");
    }
}

/* Replay the schedule with the mean duration of each (stage, kind) in the
 * measured events: what the schedule's order alone explains of the run. */
static void replay(const ladle_pipe_schedule *s, const model *md, int n,
                   const ladle_pipe_event *ev, double *ms, double *bubble)
{
    double sum[3][64] = {{0}}, cnt[3][64] = {{0}};
    for (int i = 0; i < n; i++)
        if (ev[i].action.kind <= LADLE_PIPE_W) {
            sum[ev[i].action.kind][ev[i].action.stage] += ev[i].end - ev[i].start;
            cnt[ev[i].action.kind][ev[i].action.stage] += 1;
        }
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 64; j++)
            sum[k][j] = cnt[k][j] > 0 ? sum[k][j] / cnt[k][j] : 0;
    ladle_pipe_costs c = {sum[0], sum[1], sum[2], md->send, md->reduce, md->step, NULL};
    ladle_pipe_sim_desc o;
    ladle_pipe_sim_desc_init(&o);
    o.recv = md->recv;
    ladle_pipe_sim sim;
    CHECK(ladle_pipe_simulate(s, &c, &o, &sim));
    *ms = 1e3 * sim.makespan;
    *bubble = sim.bubble;
    ladle_pipe_sim_destroy(&sim);
}

static int svg_failed; /* a picture asked for and not written: exit status 1 */

static void write_svg(const char *name, const char *title, int W, int n,
                      const ladle_pipe_event *ev)
{
    char path[512];
    int len = snprintf(path, sizeof path, "%s/%s.svg", svg_dir, name);
    FILE *f = len > 0 && (size_t)len < sizeof path ? fopen(path, "w") : NULL;
    int ok = f != NULL && ladle_pipe_write_svg(f, title, W, n, ev) == LADLE_OK;
    if (f != NULL && fclose(f) != 0)
        ok = 0;
    if (!ok) {
        fprintf(stderr, "bench_pipe: cannot write %s\n", path);
        svg_failed = 1;
    }
}

/* Build the stages of s that worker w holds (none where w < 0), stage j
 * being layers first[j] .. first[j+1]-1; *last says whether one of them is
 * the last stage (the one with the loss). Returns how many it holds. */
static int hold_stages(const ladle_pipe_schedule *s, int w, const int *first,
                       ladle_pipe_stage held[8], ladle_op *ops[8][NL], int *last)
{
    int nheld = 0, S = ladle_pipe_schedule_stages(s);
    *last = 0;
    for (int j = 0; w >= 0 && j < S; j++)
        for (int q = 0; q < ladle_pipe_schedule_replicas(s, j); q++)
            if (ladle_pipe_schedule_worker(s, j, q) == w) {
                held[nheld].stage = j;
                held[nheld].n = first[j + 1] - first[j];
                for (int i = first[j]; i < first[j + 1]; i++)
                    ops[nheld][i - first[j]] = make_layer(i);
                held[nheld].layers = ops[nheld];
                *last |= j == S - 1;
                nheld++;
            }
    return nheld;
}

/* Two warm-up steps, then `steps` timed ones of pl; worker 0 keeps each
 * step's time, measured bubble and replay (and draws the last one). */
static void time_steps(const char *name, ladle_pipeline *pl, const ladle_pipe_schedule *s,
                       const model *md, int w, ladle_tensor *x, ladle_tensor *y, double *times,
                       double *bubbles, double *rms, double *rbub)
{
    int W = ladle_pipe_schedule_workers(s);
    for (int t = -2; t < steps; t++) {
        double t0 = MPI_Wtime();
        CHECK(ladle_pipeline_step(pl, x, y, NULL));
        double dt = MPI_Wtime() - t0;
        int n = 0;
        ladle_pipe_event *ev = NULL;
        CHECK(ladle_pipeline_gather_events(pl, &n, &ev));
        if (t >= 0 && w == 0) {
            times[t] = dt;
            bubbles[t] = ladle_pipe_events_bubble(W, n, ev);
            replay(s, md, n, ev, &rms[t], &rbub[t]);
            if (svg_dir && t == steps - 1) {
                char title[160], file[96];
                snprintf(title, sizeof title, "%s, measured on %d ranks: %.2f ms, bubble %.0f%%",
                         name, W, 1e3 * dt, 100 * bubbles[t]);
                snprintf(file, sizeof file, "pipeline_%s_measured", name);
                write_svg(file, title, W, n, ev);
            }
        }
        ladle_pipe_events_destroy(&ev);
    }
}

/* Profile the layers again and model the stages on the mean of this
 * profile and the one before the run (f0, b0, w0). */
static void reprofile(const double *f0, const double *b0, const double *w0, int S,
                      const int *first, model *md)
{
    double f1[NL], b1[NL], w1[NL];
    profile(f1, b1, w1);
    for (int i = 0; i < NL; i++) {
        f1[i] = (f0[i] + f1[i]) / 2;
        b1[i] = (b0[i] + b1[i]) / 2;
        w1[i] = (w0[i] + w1[i]) / 2;
    }
    stage_sums(S, first, f1, b1, w1, md);
}

/* Rank 0: what the simulator predicts for s under the model md (with the
 * boundaries, steps and sums, and from the compute alone), into res. */
static void simulate_result(const char *name, const ladle_pipe_schedule *s, const model *md,
                            result *res)
{
    ladle_pipe_costs full = {md->f, md->b, md->w, md->send, md->reduce, md->step, NULL},
                     bare = {md->f, md->b, md->w, NULL, NULL, NULL, NULL};
    ladle_pipe_sim sim;
    ladle_pipe_sim_desc o;
    ladle_pipe_sim_desc_init(&o);
    o.recv = md->recv;
    CHECK(ladle_pipe_simulate(s, &full, &o, &sim));
    res->sim_ms = 1e3 * sim.makespan;
    res->sim_bubble = sim.bubble;
    if (svg_dir) {
        char title[160], file[96];
        snprintf(title, sizeof title, "%s, simulated: %.2f ms, bubble %.0f%%", name,
                 res->sim_ms, 100 * sim.bubble);
        snprintf(file, sizeof file, "pipeline_%s_simulated", name);
        write_svg(file, title, ladle_pipe_schedule_workers(s), sim.nevents, sim.events);
    }
    ladle_pipe_sim_destroy(&sim);
    CHECK(ladle_pipe_simulate(s, &bare, NULL, &sim));
    res->bare_ms = 1e3 * sim.makespan;
    ladle_pipe_sim_destroy(&sim);
}

/* Run schedule s with stage j = layers first[j] .. first[j+1]-1. */
static result run(const char *name, ladle_pipe_schedule *s, const int *first,
                  const model *md0)
{
    result res = {0, 0, 0, 0, 0, 0, 0};
    /* the layers profiled again just before and just after the run, and
     * their mean taken: this machine's speed drifts over tens of seconds,
     * which a profile taken minutes earlier would charge to the schedule */
    model fresh = *md0, *md = &fresh;
    double f0[NL], b0[NL], w0[NL];
    profile(f0, b0, w0);
    int W = ladle_pipe_schedule_workers(s), S = ladle_pipe_schedule_stages(s);
    int shape[1] = {W};
    ladle_partition *p = NULL;
    CHECK(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 1, shape, NULL, &p));
    int w = ladle_partition_active(p) ? ladle_partition_rank(p) : -1;
    ladle_pipe_stage held[8];
    ladle_op *ops[8][NL];
    int last = 0, nheld = hold_stages(s, w, first, held, ops, &last);
    ladle_op *loss = NULL;
    int64_t ys[2] = {mb, width(BLOCKS)}, all[2] = {(int64_t)m * mb, width(0)},
            yall[2] = {(int64_t)m * mb, width(BLOCKS)};
    ladle_loss_desc ld;
    ladle_loss_desc_init(&ld, LADLE_LOSS_MSE, LADLE_REDUCE_MEAN);
    if (last)
        CHECK(ladle_loss_create(&ld, 2, ys, LADLE_F32, LADLE_CPU, &loss));
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, LADLE_OPT_SGD, 0.001);
    ladle_pipeline *pl = NULL;
    CHECK(ladle_pipeline_create(p, s, nheld, held, loss, &od, &pl));
    ladle_tensor *x = NULL, *y = NULL;
    CHECK(ladle_tensor_create(LADLE_F32, LADLE_CPU, 2, all, &x));
    CHECK(ladle_tensor_create(LADLE_F32, LADLE_CPU, 2, yall, &y));
    CHECK(ladle_tensor_fill_random(x, 3, 0));
    CHECK(ladle_tensor_fill_random(y, 4, 0));
    double *times = calloc((size_t)steps, sizeof(double));
    double *bubbles = calloc((size_t)steps, sizeof(double));
    double *rms = calloc((size_t)steps, sizeof(double)), *rbub = calloc((size_t)steps, sizeof(double));
    time_steps(name, pl, s, md, w, x, y, times, bubbles, rms, rbub);
    reprofile(f0, b0, w0, S, first, md);
    if (w == 0) {
        res.ms = 1e3 * bench_median(times, steps);
        res.bubble = bench_median(bubbles, steps);
        res.rsim_ms = bench_median(rms, steps);
        res.rsim_bubble = bench_median(rbub, steps);
        simulate_result(name, s, md, &res);
    }
    MPI_Bcast(&res, 7, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    free(times), free(bubbles), free(rms), free(rbub);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&y);
    CHECK(ladle_pipeline_destroy(&pl));
    ladle_partition_destroy(&p);
    return res;
}

/* Read the options into steps, m, hidden and svg_dir. Returns -1 to go on,
 * else the exit status (2: a bad option or --svg-dir not a directory). */
static int parse_options(int argc, char **argv)
{
    long long nsteps = steps, nm = m, nhidden = hidden;
    const bench_opt opts[] = {
        {"--steps", 1, 1000, &nsteps, NULL, NULL, 0},
        {"--microbatches", 1, 4096, &nm, NULL, NULL, 0},
        {"--hidden", 3, 16384, &nhidden, NULL, NULL, 0}, /* a layer of hidden / 3 */
        {"--svg-dir", 0, 0, NULL, &svg_dir, NULL, 0},
    };
    if (bench_options("bench_pipe", me, argc, argv, opts, sizeof opts / sizeof opts[0]))
        return 2;
    steps = (int)nsteps, m = (int)nm, hidden = (int)nhidden;
    struct stat sb;
    if (svg_dir != NULL && (stat(svg_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))) {
        if (me == 0)
            fprintf(stderr, "bench_pipe: --svg-dir %s: not a directory\n", svg_dir);
        return 2;
    }
    return -1;
}

/* Profile the layers and measure the boundaries and sums: the planner's
 * description over them, printed on rank 0. */
static void plan_inputs_desc(double f[NL], double b[NL], double w[NL], double cut[NL],
                             double red[NL], ladle_pipe_plan_desc *po)
{
    double lat;
    profile(f, b, w);
    plan_inputs(cut, red, &lat);
    ladle_pipe_plan_desc_init(po, NL, f, b, w);
    po->cut = cut;
    po->reduce = red;
    po->reduce_latency = lat;
    po->microbatches = m;
    if (me == 0) {
        printf("planner inputs (ms): receives");
        for (int i = 0; i + 1 < NL; i++)
            printf(" %.3f", 1e3 * cut[i]);
        printf("; all-reduce latency %.4f, bandwidth terms", 1e3 * lat);
        for (int i = 0; i < NL; i++)
            printf(" %.3f", 1e3 * red[i]);
        printf("\n");
    }
}

/* The unequal pipeline's split of P ranks into first[0..P]: one block per
 * stage on 4 ranks, one layer per stage on 8; on 2 ranks (one per core,
 * where the measurement can be compared with the simulator) the planner's
 * best 2-stage cut. */
static void fixed_split(ladle_pipe_plan_desc *po, int P, int first[NL + 1])
{
    static const int blocks[NL + 1] = {0, 2, 4, 6, 8};
    for (int j = 0; j <= NL; j++)
        first[j] = P == 8 ? j : blocks[j];
    if (P == 2) {
        ladle_pipe_plan two;
        po->min_stages = po->max_stages = 2;
        CHECK(ladle_pipe_plan_create(po, 2, &two));
        po->min_stages = po->max_stages = 0;
        for (int j = 0; j <= 2; j++)
            first[j] = ladle_pipe_plan_first(&two, j);
    }
}

/* The three fixed schedules on the split first4, modelled by m4, into r[0..2]. */
static void run_fixed(int P, const int *first4, const model *m4, const char *const *names,
                      result *r)
{
    static const int styles[3] = {LADLE_PIPE_GPIPE, LADLE_PIPE_1F1B, LADLE_PIPE_ZBH1};
    ladle_pipe_costs c4 = {m4->f, m4->b, m4->w, m4->send, m4->reduce, m4->step, NULL};
    for (int k = 0; k < 3; k++) {
        ladle_pipe_schedule *s = NULL;
        CHECK(ladle_pipe_schedule_generate(styles[k], P, NULL, 1, m, &c4, &s));
        r[k] = run(names[k], s, first4, m4);
        ladle_pipe_schedule_destroy(&s);
    }
}

/* ZB-V on S = 2P stages of NL / S layers each (two stages a worker, in a
 * V), into *r. */
static void run_zbv(int P, const double *f, const double *b, const double *w,
                    const char *name, result *r)
{
    int S = 2 * P, first[NL + 1];
    for (int j = 0; j <= S; j++)
        first[j] = j * NL / S;
    model mv;
    model_of(S, first, NULL, f, b, w, &mv);
    ladle_pipe_costs c = {mv.f, mv.b, mv.w, mv.send, mv.reduce, mv.step, NULL};
    ladle_pipe_schedule *s = NULL;
    CHECK(ladle_pipe_schedule_generate(LADLE_PIPE_ZBV, S, NULL, 2, m, &c, &s));
    *r = run(name, s, first, &mv);
    ladle_pipe_schedule_destroy(&s);
}

/* The planner's layout, every worker used: on 2 ranks its free choice
 * (one pipeline stage each, or one stage on both), on more at least 3
 * stages (a pipeline, not pure data parallelism); and what it would
 * choose without the model, for comparison. Runs the plan's hybrid
 * schedule into *r and returns the plan in *plan. */
static void run_planned(ladle_pipe_plan_desc *po, int P, const double *f, const double *b,
                        const double *w, const char *name, ladle_pipe_plan *plan, result *r)
{
    ladle_pipe_plan bare_plan;
    po->min_stages = P == 2 ? 0 : 3;
    CHECK(ladle_pipe_plan_create(po, P, plan));
    ladle_pipe_plan_desc bare;
    ladle_pipe_plan_desc_init(&bare, NL, f, b, w);
    bare.min_stages = po->min_stages;
    CHECK(ladle_pipe_plan_create(&bare, P, &bare_plan));
    print_plan("planner", plan);
    print_plan("planner without the model (timed with it)", &bare_plan);
    {
        ladle_pipe_plan again;
        CHECK(ladle_pipe_plan_explicit(po, bare_plan.stages, bare_plan.first,
                                       bare_plan.replicas, &again));
        if (me == 0)
            printf("  (its split under the model: %.3f ms per microbatch)\n",
                   1e3 * again.slowest);
    }
    model mh;
    model_of(plan->stages, plan->first, plan->replicas, f, b, w, &mh);
    ladle_pipe_costs ch = {mh.f, mh.b, mh.w, mh.send, mh.reduce, mh.step, NULL};
    ladle_pipe_schedule *s = NULL;
    CHECK(ladle_pipe_schedule_generate(LADLE_PIPE_HYBRID, plan->stages, plan->replicas, 1, m,
                                       &ch, &s));
    *r = run(name, s, plan->first, &mh);
    ladle_pipe_schedule_destroy(&s);
}

/* Rank 0: the measurements against the planner's model, and the table of
 * the rows schedules in r. */
static void print_results(int rows, const char *const *names, const result *r,
                          const ladle_pipe_plan *fixed, const ladle_pipe_plan *plan)
{
    if (me != 0)
        return;
    printf("per microbatch, measured (ms/step / m) against the planner's model:\n");
    printf("  1F1B   %.3f against %.3f (%.2f)\n", r[1].ms / m, 1e3 * fixed->slowest,
           r[1].ms / m / (1e3 * fixed->slowest));
    printf("  hybrid %.3f against %.3f (%.2f)\n", r[3].ms / m, 1e3 * plan->slowest,
           r[3].ms / m / (1e3 * plan->slowest));
    printf("  the planner's plan against 1F1B: %.2fx modelled, %.2fx measured\n",
           fixed->slowest / plan->slowest, r[1].ms / r[3].ms);
    printf("(sim: the profiled costs; replay: the run's own mean durations; both with\n"
           " the modelled boundaries, steps and sums; compute: the profiled costs "
           "alone)\n");
    printf("%-8s %9s %9s %8s %7s %8s %8s %8s %9s %8s %8s\n", "schedule", "ms/step",
           "images/s", "vs 1F1B", "bubble", "sim ms", "sim bub", "sim/1F1B",
           "replay ms", "rep bub", "compute");
    for (int k = 0; k < rows; k++)
        printf("%-8s %9.3f %9.0f %8.2f %7.3f %8.3f %8.3f %8.2f %9.3f %8.3f %8.3f\n",
               names[k], r[k].ms, m * mb / (r[k].ms * 1e-3), r[1].ms / r[k].ms,
               r[k].bubble, r[k].sim_ms, r[k].sim_bubble, r[1].sim_ms / r[k].sim_ms,
               r[k].rsim_ms, r[k].rsim_bubble, r[k].bare_ms);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int status = parse_options(argc, argv);
    if (status >= 0) {
        MPI_Finalize();
        return status;
    }
    if (world != 2 && world != 4 && world != 8) {
        if (me == 0)
            printf("bench_pipe: runs on 2, 4 or 8 ranks (got %d); skipped\n", world);
        MPI_Finalize();
        return 0;
    }
    double f[NL], b[NL], w[NL], cut[NL], red[NL];
    ladle_pipe_plan_desc po;
    plan_inputs_desc(f, b, w, cut, red, &po);
    int first4[NL + 1], P = world;
    fixed_split(&po, P, first4);
    ladle_pipe_plan fixed;
    CHECK(ladle_pipe_plan_explicit(&po, P, first4, NULL, &fixed));
    print_plan("the schedules' split", &fixed);
    model m4;
    if (me == 0) {
        printf("bench_pipe: %d ranks, %d microbatches of %d rows, widths %lld %lld %lld %lld %lld "
               "(f32), %d timed steps\n",
               P, m, mb, (long long)width(0), (long long)width(1), (long long)width(2),
               (long long)width(3), (long long)width(4), steps);
    }
    model_of(P, first4, NULL, f, b, w, &m4);
    if (me == 0) {
        printf("stage costs (ms, f+b+w):");
        for (int j = 0; j < P; j++)
            printf(" %.3f", 1e3 * (m4.f[j] + m4.b[j] + m4.w[j]));
        printf("\n");
    }
    result r[5];
    const char *const names[5] = {"gpipe", "1f1b", "zbh1", "hybrid", "zbv"};
    run_fixed(P, first4, &m4, names, r);
    ladle_pipe_plan plan;
    run_planned(&po, P, f, b, w, names[3], &plan, &r[3]);
    int rows = 4;
    if (2 * P <= NL) /* a layer for each of the V's 2P stages */
        run_zbv(P, f, b, w, names[rows++], &r[4]);
    print_results(rows, names, r, &fixed, &plan);
    MPI_Allreduce(MPI_IN_PLACE, &svg_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return svg_failed ? 1 : 0;
}
