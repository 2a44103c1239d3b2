/*
 * bench_dist: distributed layers and training, measured in one run as
 * medians of repeated timings (the slowest rank's time of each repetition).
 *
 *  - conv-halo: a spatially partitioned convolution's forward + backward +
 *    weight gradient against the same rank's local convolution on the box
 *    its tile needs (the compute alone): what the halo exchange and the
 *    copies around it add. Target: at most 1.1 at 2 ranks. Beside it, the
 *    halo exchange alone (forward and adjoint on the padded tensor): the
 *    most that overlapping the exchange with the interior could hide.
 *    Then (halo-ovl) the layer with LADLE_OVERLAP_HALO against without,
 *    alternated the same way: below 1 where the overlap gains.
 *  - dp-sync: a data-parallel LeNet-5 step against the same step without
 *    the gradient reduction (ladle_network_backward(net, 0)): what the
 *    reduction adds after overlapping the backward pass. Target: 1.1.
 *  - lenet: LeNet-5 (batch 64, 28 x 28) training steps in every layout that
 *    fits the ranks: ms per step, images/s, the speed-up over one rank's
 *    sequential network measured in the same run, and for data-parallel
 *    layouts the share of the step that is not the rank's own compute (a
 *    sequential step on the rank's part of the batch, run at the same time
 *    on every rank).
 *
 *  - vocab-loss: the vocabulary-parallel cross entropy (a 1 x P grid: the
 *    classes over the ranks) forward + backward against the sequential
 *    cross entropy on the rank's own slice of the logits (the same
 *    exponentials), alternated: what the distribution adds. Target: 1.1.
 *
 *  - resnet: ResNet-20 (batch 64, 28 x 28, f32) training steps, the graph
 *    network of ladle_resnet_create: one rank's sequential network, then
 *    every data, spatial and channel layout that fits the ranks, with the
 *    speed-up over the sequential step measured in the same run (fewer
 *    repetitions: a step takes a good part of a second).
 *
 *   mpiexec -n 2 bench_dist [--reps R]
 *                           [--only conv-halo|dp-sync|vocab-loss|lenet|resnet]
 */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ladle.h"

#include "common.h"
#include "shapes.h"

static int me, world, reps = 21;
#define LADLE_BENCH_MAX_RANKS 64 /* row tiles: one per rank */
static const char *only;

/* A barrier that yields the core while it waits (the ranks may outnumber
 * the cores). */
static void barrier(void)
{
    MPI_Request r;
    int done = 0;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    while (!done) {
        MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (!done)
            sched_yield();
    }
}

/* The slowest rank's time. */
static double slowest(double t)
{
    MPI_Request r;
    int done = 0;
    MPI_Iallreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &r);
    while (!done) {
        MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (!done)
            sched_yield();
    }
    return t;
}

static void check(ladle_status st, const char *what)
{
    if (st != LADLE_OK) {
        fprintf(stderr, "bench_dist (rank %d): %s: %s\n", me, what, ladle_error_message());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* One layer's tensors and ctx for timed steps. */
typedef bench_layer_run run_of;

static void run_open(run_of *u, ladle_op *op)
{
    const char *what;
    ladle_status st = bench_layer_open(u, op, 3, &what);
    check(st, what);
}

/* A piece of timed work on its state. */
typedef void (*work_fn)(void *arg);

/* The slowest rank's time of work(arg), the ranks starting together. */
static double time_slowest(work_fn work, void *arg)
{
    barrier();
    double t0 = MPI_Wtime();
    work(arg);
    return slowest(MPI_Wtime() - t0);
}

typedef struct slowest_of {
    work_fn work;
    void *arg;
} slowest_of;

/* a bench_once_fn: time_slowest of a slowest_of */
static double slowest_once(void *arg)
{
    slowest_of *s = arg;
    return time_slowest(s->work, s->arg);
}

/* The median of n time_slowest's, after two to warm up. */
static double median_slowest(work_fn work, void *arg, int n)
{
    slowest_of s = {work, arg};
    return bench_median_of(slowest_once, &s, n);
}

/* a work_fn: forward + backward + weight gradient of a run_of */
static void layer_step(void *arg)
{
    run_of *u = arg;
    check(ladle_layer_forward(u->op, u->ctx, u->x, u->y), "forward");
    check(ladle_layer_backward(u->op, u->ctx, u->dy, u->dx), "backward");
    check(ladle_layer_backward_weight(u->op, u->ctx, u->dy), "backward_weight");
}

/* The slowest rank's forward + backward + weight gradient. */
static double run_once(run_of *u)
{
    return time_slowest(layer_step, u);
}

/* Two layers alternated repetition by repetition (the machine's speed
 * drifts from one second to the next, which timing them one after the
 * other charges to one of them): their medians in *ta and *tb, and the
 * median of the repetitions' own ratios a / b returned. */
static double time_two(ladle_op *a, ladle_op *b, double *ta, double *tb)
{
    run_of ua, ub;
    run_open(&ua, a);
    run_open(&ub, b);
    double *t = calloc((size_t)(3 * reps), sizeof(double));
    for (int r = -3; r < reps; r++) {
        double ea = run_once(&ua), eb = run_once(&ub);
        if (r >= 0)
            t[r] = ea, t[reps + r] = eb, t[2 * reps + r] = ea / eb;
    }
    *ta = bench_median(t, reps);
    *tb = bench_median(t + reps, reps);
    double q = bench_median(t + 2 * reps, reps);
    free(t);
    bench_layer_close(&ua), bench_layer_close(&ub);
    return q;
}

/* The halo exchange alone, forward then adjoint, on the padded tensor of
 * geometry g: the most that overlapping it with the interior could hide. */
typedef struct halo_work {
    ladle_op *halo;
    ladle_tensor *t;
} halo_work;

/* a work_fn: the halo exchange forward, then its adjoint, in place */
static void halo_step(void *arg)
{
    halo_work *w = arg;
    check(ladle_op_forward(w->halo, w->t, w->t), "halo forward");
    check(ladle_op_adjoint(w->halo, w->t, w->t), "halo adjoint");
}

static double time_halo(ladle_op *halo, const ladle_halo_geometry *g)
{
    halo_work w = {halo, NULL};
    check(ladle_tensor_create(LADLE_F32, LADLE_CPU, g->ndim, g->padded_shape, &w.t),
          "padded tensor");
    check(ladle_tensor_fill_random(w.t, 7, 0), "fill");
    double m = median_slowest(halo_step, &w, reps);
    ladle_tensor_destroy(&w.t);
    return m;
}

/* Every rank, in order, on a grid of nd dims. */
static ladle_partition *all_ranks(int nd, const int *grid)
{
    int ranks[LADLE_BENCH_MAX_RANKS];
    for (int r = 0; r < world; r++)
        ranks[r] = r;
    ladle_partition *p = NULL;
    check(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), nd, grid, ranks, &p),
          "partition");
    return p;
}

/* NCHW tensors cut into one row band per rank. */
static ladle_partition *row_tiles(void)
{
    return all_ranks(4, (int[]){1, 1, world, 1});
}

static void conv_halo(int64_t n, int64_t c, int64_t s, int64_t k, int64_t co, int64_t pad)
{
    ladle_partition *p = row_tiles();
    int64_t xs[4] = {n, c, s, s};
    ladle_conv_desc d;
    ladle_conv_desc_init(&d, 2, c, co, k);
    d.padding[0] = d.padding[1] = pad;
    ladle_op *dist = NULL, *local = NULL, *halo = NULL;
    check(ladle_dist_conv_create(&d, p, xs, LADLE_F32, LADLE_CPU, 1, &dist), "dist conv");
    /* the box this rank's tile needs: the halo exchange's geometry */
    ladle_layout *lx = NULL;
    ladle_window w;
    ladle_window_init(&w, 4);
    w.kernel[2] = w.kernel[3] = k;
    w.padding[2] = w.padding[3] = pad;
    check(ladle_layout_create_balanced(p, 4, xs, &lx), "layout");
    check(ladle_halo_exchange_create(lx, &w, LADLE_F32, LADLE_CPU, 0, &halo), "halo");
    ladle_halo_geometry g;
    ladle_halo_exchange_geometry(halo, &g);
    ladle_conv_desc ld = d;
    ld.padding[0] = ld.padding[1] = 0;
    /* with more tiles than output rows some ranks have no box: then only
     * the overlap's row below */
    int boxed = g.output_shape[2] > 0, all_boxed = 0;
    MPI_Allreduce(&boxed, &all_boxed, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (all_boxed)
        check(ladle_conv_create(&ld, g.needed_shape, LADLE_F32, LADLE_CPU, 1, &local),
              "local conv");
    double td = 0, tl = 0, q = all_boxed ? time_two(dist, local, &td, &tl) : 0,
           th = time_halo(halo, &g);
    if (me == 0 && !all_boxed) {
        printf("conv-halo  %-34s   (%d tiles of %lld rows: some without output)\n", "-",
               world, (long long)s);
        fflush(stdout);
    } else if (me == 0) {
        char sh[64];
        snprintf(sh, sizeof sh, "%lldx%lldx%lld^2 k%lld -> %lld, %dx1 tiles", (long long)n,
                 (long long)c, (long long)s, (long long)k, (long long)co, world);
        printf("conv-halo  %-34s %9.3f %9.3f %6.2f   (exchange alone %.3f ms, %.1f%% of "
               "the layer)\n",
               sh, td * 1e3, tl * 1e3, q, th * 1e3, 100 * th / td);
        fflush(stdout);
    }
    ladle_op *ovl = NULL;
    d.flags = LADLE_OVERLAP_HALO;
    check(ladle_dist_conv_create(&d, p, xs, LADLE_F32, LADLE_CPU, 1, &ovl),
          "overlapped dist conv");
    double to, tp, qo = time_two(ovl, dist, &to, &tp);
    if (me == 0) {
        char sh[64];
        snprintf(sh, sizeof sh, "%lldx%lldx%lld^2 k%lld -> %lld, %dx1 tiles", (long long)n,
                 (long long)c, (long long)s, (long long)k, (long long)co, world);
        printf("halo-ovl   %-34s %9.3f %9.3f %6.2f   (overlapped / plain)\n", sh, to * 1e3,
               tp * 1e3, qo);
        fflush(stdout);
    }
    ladle_op_destroy(&ovl);
    ladle_op_destroy(&dist), ladle_op_destroy(&local), ladle_op_destroy(&halo);
    ladle_layout_destroy(&lx);
    ladle_partition_destroy(&p);
}

typedef struct loss_work {
    ladle_op *op;
    ladle_ctx *ctx;
    ladle_tensor *x, *t, *out, *dl, *dx;
} loss_work;

/* a work_fn: a loss's forward and backward */
static void loss_step(void *arg)
{
    loss_work *w = arg;
    check(ladle_loss_forward(w->op, w->ctx, w->x, w->t, w->out), "loss forward");
    check(ladle_loss_backward(w->op, w->ctx, w->dl, w->dx), "loss backward");
}

/* The vocabulary-parallel cross entropy over M rows of C classes (f32,
 * mean) against the sequential one on this rank's M x C/P slice. */
static void vocab_loss(int64_t M, int64_t C)
{
    ladle_partition *p = all_ranks(2, (int[]){1, world});
    ladle_loss_desc d;
    ladle_loss_desc_init(&d, LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN);
    ladle_op *ops[2] = {NULL, NULL};
    check(ladle_dist_vocab_loss_create(&d, p, (int64_t[]){M, C}, LADLE_F32, LADLE_CPU,
                                       &ops[0]),
          "vocabulary-parallel loss");
    int64_t off[2], box[2];
    check(ladle_layout_box(ladle_op_x_layout(ops[0]), LADLE_SELF, off, box), "box");
    check(ladle_loss_create(&d, 2, box, LADLE_F32, LADLE_CPU, &ops[1]), "loss");
    ladle_tensor *x[2], *dx[2], *t[2], *out[2], *dl[2];
    ladle_ctx *ctx[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        check(ladle_tensor_create(LADLE_F32, LADLE_CPU, 2, box, &x[k]), "x");
        check(ladle_tensor_create(LADLE_F32, LADLE_CPU, 2, box, &dx[k]), "dx");
        check(ladle_tensor_create(LADLE_I64, LADLE_CPU, 1, &M, &t[k]), "labels");
        check(ladle_tensor_create(LADLE_F32, LADLE_CPU, 0, NULL, &out[k]), "loss");
        check(ladle_tensor_create(LADLE_F32, LADLE_CPU, 0, NULL, &dl[k]), "dloss");
        check(ladle_tensor_fill_random(x[k], 5, 0), "fill");
        check(ladle_tensor_fill(dl[k], 1.0), "fill");
        int64_t *lab = ladle_tensor_data(t[k]);
        for (int64_t m = 0; m < M; m++) /* the whole vocabulary's, or the slice's */
            lab[m] = (m * 7919) % (k == 0 ? C : box[1]);
        check(ladle_ctx_create(ops[k], &ctx[k]), "ctx");
    }
    loss_work w[2];
    for (int k = 0; k < 2; k++)
        w[k] = (loss_work){ops[k], ctx[k], x[k], t[k], out[k], dl[k], dx[k]};
    double *v = calloc((size_t)(3 * reps), sizeof(double));
    for (int r = -2; r < reps; r++) {
        double e[2];
        for (int k = 0; k < 2; k++)
            e[k] = time_slowest(loss_step, &w[k]);
        if (r >= 0)
            v[r] = e[0], v[reps + r] = e[1], v[2 * reps + r] = e[0] / e[1];
    }
    double td = bench_median(v, reps), tl = bench_median(v + reps, reps),
           q = bench_median(v + 2 * reps, reps);
    free(v);
    if (me == 0) {
        char sh[64];
        snprintf(sh, sizeof sh, "%lld x %lld classes, 1x%d", (long long)M, (long long)C,
                 world);
        printf("vocab-loss %-34s %9.3f %9.3f %6.2f   (slice of %lld)\n", sh, td * 1e3,
               tl * 1e3, q, (long long)box[1]);
        fflush(stdout);
    }
    for (int k = 0; k < 2; k++) {
        ladle_ctx_destroy(&ctx[k]);
        ladle_tensor_destroy(&x[k]), ladle_tensor_destroy(&dx[k]);
        ladle_tensor_destroy(&t[k]), ladle_tensor_destroy(&out[k]);
        ladle_tensor_destroy(&dl[k]);
        ladle_op_destroy(&ops[k]);
    }
    ladle_partition_destroy(&p);
}

/* Max pooling k3 s2 p1 on row tiles, with the overlap against without. */
static void pool_overlap(int64_t n, int64_t c, int64_t s)
{
    ladle_partition *p = row_tiles();
    int64_t xs[4] = {n, c, s, s};
    ladle_pool_desc d;
    ladle_pool_desc_init(&d, LADLE_POOL_MAX, 2, 3);
    d.stride[0] = d.stride[1] = 2;
    d.padding[0] = d.padding[1] = 1;
    ladle_op *plain = NULL, *ovl = NULL;
    check(ladle_dist_pool_create(&d, p, xs, LADLE_F32, LADLE_CPU, &plain), "dist pool");
    d.flags = LADLE_OVERLAP_HALO;
    check(ladle_dist_pool_create(&d, p, xs, LADLE_F32, LADLE_CPU, &ovl),
          "overlapped dist pool");
    double to, tp, q = time_two(ovl, plain, &to, &tp);
    if (me == 0) {
        char sh[64];
        snprintf(sh, sizeof sh, "maxpool %lldx%lldx%lld^2 k3s2, %dx1", (long long)n,
                 (long long)c, (long long)s, world);
        printf("halo-ovl   %-34s %9.3f %9.3f %6.2f   (overlapped / plain)\n", sh, to * 1e3,
               tp * 1e3, q);
        fflush(stdout);
    }
    ladle_op_destroy(&ovl), ladle_op_destroy(&plain);
    ladle_partition_destroy(&p);
}

/* This rank's input and label blocks for a LeNet network, filled once. */
typedef struct batch {
    ladle_tensor *x, *t;
} batch;

static void make_batch(ladle_network *net, batch *b, int64_t nbatch)
{
    const ladle_layout *lx = ladle_op_x_layout(ladle_network_layer(net, 0));
    const ladle_layout *ll = ladle_op_x_layout(ladle_network_loss_op(net));
    int64_t xb[4] = {nbatch, 1, 28, 28}, lb[2] = {nbatch}, off[4] = {0};
    if (lx) {
        ladle_layout_box(lx, LADLE_SELF, off, xb);
        ladle_layout_box(ll, LADLE_SELF, NULL, lb);
        if (!ladle_partition_active(ladle_layout_partition(ll)))
            lb[0] = 0;
    }
    check(ladle_tensor_create(LADLE_F32, LADLE_CPU, 4, xb, &b->x), "x");
    check(ladle_tensor_create(LADLE_I64, LADLE_CPU, 1, lb, &b->t), "labels");
    ladle_tensor_fill_random(b->x, 9, (uint64_t)off[0]);
    for (int64_t i = 0; i < lb[0]; i++)
        ((int64_t *)ladle_tensor_data(b->t))[i] = i % 10;
}

/* The fields LeNet-5's and ResNet-20's descriptions share: the batch,
 * sequential or not, the data and spatial ways. */
#define SET_LAYOUT(d, nbatch, seq, D, Ph, Pw) \
    do {                                      \
        (d).batch = (nbatch);                 \
        (d).sequential = (seq);               \
        (d).data_ways = (D);                  \
        (d).spatial[0] = (Ph);                \
        (d).spatial[1] = (Pw);                \
    } while (0)

static ladle_network *lenet(int seq, int D, int Ph, int Pw, int F, int bn, int64_t nbatch,
                            MPI_Comm comm)
{
    ladle_lenet_desc d;
    ladle_lenet_desc_init(&d);
    SET_LAYOUT(d, nbatch, seq, D, Ph, Pw);
    d.fc_ways = F;
    d.batchnorm = bn;
    ladle_network *net = NULL;
    check(ladle_lenet_create(&d, ladle_comm_of(comm), &net), "lenet");
    return net;
}

/* Median slowest-rank time of a training step (no optimizer: the update is
 * local and the same in every layout). */
static double time_steps(ladle_network *net, int64_t nbatch, int sync)
{
    batch b;
    double *t = calloc((size_t)reps, sizeof(double)), loss;
    make_batch(net, &b, nbatch);
    for (int r = -3; r < reps; r++) {
        barrier();
        double t0 = MPI_Wtime();
        check(ladle_network_zero_grad(net), "zero_grad");
        check(ladle_network_forward(net, b.x, NULL), "forward");
        check(ladle_network_loss(net, b.t, &loss), "loss");
        check(ladle_network_backward(net, sync), "backward");
        double e = slowest(MPI_Wtime() - t0);
        if (r >= 0)
            t[r] = e;
    }
    double m = bench_median(t, reps);
    free(t);
    ladle_tensor_destroy(&b.x);
    ladle_tensor_destroy(&b.t);
    return m;
}

/* ---- ResNet-20 ------------------------------------------------------------ */

static ladle_graph *resnet20(int seq, int D, int Ph, int Pw, int C, int64_t nbatch)
{
    ladle_resnet_desc d;
    ladle_resnet_desc_init(&d, LADLE_RESNET20);
    SET_LAYOUT(d, nbatch, seq, D, Ph, Pw);
    d.channel_ways = C;
    ladle_graph *g = NULL;
    check(ladle_resnet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &g), "resnet20");
    return g;
}

typedef struct graph_work {
    ladle_graph *g;
    const ladle_tensor *x, *t;
} graph_work;

/* a work_fn: zero the gradients, forward, loss, backward */
static void graph_step(void *arg)
{
    graph_work *w = arg;
    const ladle_tensor *xs[1] = {w->x}, *ts[1] = {w->t};
    double loss;
    check(ladle_graph_zero_grad(w->g), "zero_grad");
    check(ladle_graph_forward(w->g, 1, xs, NULL), "forward");
    check(ladle_graph_loss(w->g, 1, ts, &loss), "loss");
    check(ladle_graph_backward(w->g, 1), "backward");
}

/* Median slowest-rank time of a ResNet training step (zero, forward, loss,
 * backward with the gradient sums; no optimizer, as for LeNet-5). */
static double time_graph(ladle_graph *g, int64_t nbatch, int n)
{
    const ladle_layout *lx = ladle_graph_value_layout(g, 0);
    const ladle_op *fc = ladle_graph_layer(g, ladle_graph_num_layers(g) - 1);
    const ladle_layout *ll = ladle_op_y_layout(fc);
    int64_t xb[4] = {nbatch, 1, 28, 28}, lb[2] = {nbatch, 10}, off[4] = {0};
    if (lx) {
        ladle_layout_box(lx, LADLE_SELF, off, xb);
        ladle_layout_box(ll, LADLE_SELF, NULL, lb);
        if (!ladle_partition_active(ladle_layout_partition(ll)))
            lb[0] = 0;
    }
    ladle_tensor *x = NULL, *t = NULL;
    check(ladle_tensor_create(LADLE_F32, LADLE_CPU, 4, xb, &x), "x");
    check(ladle_tensor_create(LADLE_I64, LADLE_CPU, 1, lb, &t), "labels");
    ladle_tensor_fill_random(x, 9, (uint64_t)off[0]);
    for (int64_t i = 0; i < lb[0]; i++)
        ((int64_t *)ladle_tensor_data(t))[i] = i % 10;
    graph_work w = {g, x, t};
    double m = median_slowest(graph_step, &w, n);
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&t);
    return m;
}

static void resnet_rows(int64_t B)
{
    int n = reps < 7 ? reps : 7;
    /* the sequential reference, every rank at once (the same load) */
    ladle_graph *seq = resnet20(1, 1, 1, 1, 1, B);
    double t1 = time_graph(seq, B, n);
    ladle_graph_destroy(&seq);
    if (me == 0) {
        printf("\n%-10s %-34s %9s %9s %7s   (median of %d)\n", "row",
               "layout (D x Ph x Pw, channels C)", "ms/step", "images/s", "speedup", n);
        printf("resnet20   %-34s %9.3f %9.1f %7.2f\n", "sequential, 1 rank's work", t1 * 1e3,
               (double)B / t1, 1.0);
        fflush(stdout);
    }
    static const int layouts[][4] = {{1, 1, 1, 1}, {2, 1, 1, 1}, {1, 2, 1, 1}, {4, 1, 1, 1},
                                     {2, 2, 1, 1}, {1, 2, 2, 1}, {1, 1, 1, 2}};
    for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
        int D = layouts[k][0], Ph = layouts[k][1], Pw = layouts[k][2], C = layouts[k][3];
        int need = C > 1 ? C * C * Ph * Pw : D * Ph * Pw;
        if (need != world)
            continue;
        ladle_graph *g = resnet20(0, D, Ph, Pw, C, B);
        double t = time_graph(g, B, n);
        ladle_graph_destroy(&g);
        if (me == 0) {
            char name[64];
            snprintf(name, sizeof name, "%dx%dx%d, channels %d", D, Ph, Pw, C);
            printf("resnet20   %-34s %9.3f %9.1f %7.2f\n", name, t * 1e3, (double)B / t, t1 / t);
            fflush(stdout);
        }
    }
}

/* 1 if the rows of `name` are to run (no --only, or --only name) */
static int wanted(const char *name)
{
    return !only || !strcmp(only, name);
}

static void conv_halo_rows(void)
{
    if (me == 0)
        printf("%-10s %-34s %9s %9s %6s\n", "row", "shape", "dist_ms", "local_ms", "ratio");
    conv_halo(64, 6, 14, 5, 16, 0);
    conv_halo(64, 1, 28, 5, 6, 2);
    conv_halo(32, 16, 32, 3, 16, 1);
    /* spatial parallelism's own case: few images, large planes */
    conv_halo(1, 32, 128, 3, 32, 1);
    conv_halo(2, 64, 64, 3, 64, 1);
    pool_overlap(8, 32, 64);
}

static void dp_sync_rows(int64_t B)
{
    for (int bn = 0; bn < 2; bn++) {
        ladle_network *net = lenet(0, world, 1, 1, 1, bn, B, MPI_COMM_WORLD);
        double with = time_steps(net, B, 1), without = time_steps(net, B, 0);
        if (me == 0) {
            printf("dp-sync    %-34s %9.3f %9.3f %6.2f   (%d buckets)\n",
                   bn ? "lenet+bn, batch split all ways" : "lenet, batch split all ways",
                   with * 1e3, without * 1e3, with / without, ladle_network_buckets(net));
            fflush(stdout);
        }
        ladle_network_destroy(&net);
    }
}

/* LeNet-5 on layout D x Ph x Pw, fc F, batch norm bn, against the
 * sequential step t1; data-parallel only, the share of the step that is
 * not the rank's own compute (a sequential step on its part of the batch). */
static void lenet_row(const int l[5], int64_t B, double t1)
{
    int D = l[0], Ph = l[1], Pw = l[2], F = l[3], bn = l[4];
    ladle_network *net = lenet(0, D, Ph, Pw, F, bn, B, MPI_COMM_WORLD);
    double t = time_steps(net, B, 1);
    ladle_network_destroy(&net);
    char other[16] = "-";
    if (Ph * Pw == 1 && F == 1) {
        ladle_network *part = lenet(1, 1, 1, 1, 1, bn, B / D, MPI_COMM_WORLD);
        double tp = time_steps(part, B / D, 1);
        ladle_network_destroy(&part);
        snprintf(other, sizeof other, "%.0f%%", 100 * (1 - tp / t));
    }
    if (me == 0) {
        char name[64];
        snprintf(name, sizeof name, "%dx%dx%d fc %d%s", D, Ph, Pw, F, bn ? " bn" : "");
        printf("lenet      %-34s %9.3f %9.0f %7.2f %7s\n", name, t * 1e3, (double)B / t, t1 / t,
               other);
        fflush(stdout);
    }
}

/* The layouts of this many ranks (D x Ph x Pw, fc F, batch norm). */
static void lenet_rows(int64_t B)
{
    /* the sequential reference, every rank at once (the same load) */
    ladle_network *seq = lenet(1, 1, 1, 1, 1, 0, B, MPI_COMM_WORLD);
    double t1 = time_steps(seq, B, 1);
    ladle_network_destroy(&seq);
    if (me == 0)
        printf("\n%-10s %-34s %9s %9s %7s %7s\n", "row", "layout (D x Ph x Pw, fc F)",
               "ms/step", "images/s", "speedup", "other");
    if (me == 0)
        printf("lenet      %-34s %9.3f %9.0f %7.2f %7s\n", "sequential, 1 rank's work",
               t1 * 1e3, (double)B / t1, 1.0, "-");
    static const int layouts[][5] = {
        {1, 1, 1, 1, 0}, {2, 1, 1, 1, 0}, {1, 2, 1, 1, 0}, {1, 1, 2, 2, 0},
        {2, 1, 1, 1, 1}, {4, 1, 1, 1, 0}, {2, 2, 1, 2, 0}, {1, 2, 2, 2, 0},
        {2, 2, 1, 2, 1},
    };
    for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++)
        if (layouts[k][0] * layouts[k][1] * layouts[k][2] == world)
            lenet_row(layouts[k], B, t1);
}

/* parse, then the tables: the convolutions' halos, data-parallel gradient
 * sync, the vocabulary-parallel loss, LeNet-5's and ResNet-20's layouts */
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    long long nreps = reps;
    const bench_opt opts[] = {
        {"--reps", 1, 1000, &nreps, NULL, NULL, 0},
        {"--only", 0, 0, NULL, &only, "conv-halo,dp-sync,vocab-loss,lenet,resnet", 0},
    };
    if (bench_options("bench_dist", me, argc, argv, opts, sizeof opts / sizeof opts[0])) {
        MPI_Finalize();
        return 2;
    }
    reps = (int)nreps;
    ladle_set_num_threads(1);
    const int64_t B = 64;
    if (me == 0)
        printf("# f32, %d ranks, median of %d (slowest rank each time)\n", world, reps);
    if (world >= 2 && world <= LADLE_BENCH_MAX_RANKS && wanted("conv-halo"))
        conv_halo_rows();
    if (world >= 2 && wanted("dp-sync"))
        dp_sync_rows(B);
    if (world <= LADLE_BENCH_MAX_RANKS && wanted("vocab-loss")) {
        if (me == 0)
            printf("\n%-10s %-34s %9s %9s %6s\n", "row", "shape", "dist_ms", "local_ms",
                   "ratio");
        vocab_loss(256, 50257); /* GPT-2's vocabulary */
    }
    if (wanted("lenet"))
        lenet_rows(B);
    if (wanted("resnet"))
        resnet_rows(B);
    MPI_Finalize();
    return 0;
}
