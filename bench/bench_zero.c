/*
 * bench_zero: what sharded data parallelism (ladle_network_desc's
 * zero_stage) holds and costs, in one run.
 *
 * Memory rows: a data-parallel chain of 4 linear layers of 512 x 512 (f64,
 * with tanh between, AdamW) at stages 0, 1 and 2; the largest rank's bytes
 * of parameters, gradients and optimizer states (ladle_network_bytes and
 * the sizes of the ladle_optimizer_state tensors) and of the gradient
 * buckets' buffers and workspaces, and params + grads + states against
 * stage 0's:
 *
 *   mem ranks stage params grads states buffers pgs_ratio
 *
 * Time rows: the replicated gradient sum as ladle now runs it (a
 * reduce-scatter then an all-gather of the padded slices) against
 * ladle's all-sum-reduce of the same bytes, and one training step per
 * stage, medians of repeated timings (slowest rank):
 *
 *   sum ranks payload_kib asr_us rs_ag_us ratio
 *   step ranks stage step_ms ratio_to_stage0
 *
 *   mpiexec -n 4 bench_zero [reps]
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "ladle.h"

#include "common.h"

#define LAYERS 4
#define WIDTH 512

static int rank, size;

static void ok(ladle_status st, const char *what)
{
    if (st != LADLE_OK) {
        fprintf(stderr, "bench_zero: %s: %s\n", what, ladle_error_message());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

typedef struct run {
    ladle_network *net;
    ladle_optimizer *opt;
    ladle_tensor *x, *t;
    ladle_partition *p, *pw;
} run;

static run make_run(int stage, int64_t batch)
{
    run r = {0};
    ladle_op *ops[2 * LAYERS], *loss = NULL;
    int k = 0;
    ok(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 2, (int[]){size, 1}, NULL, &r.p),
       "partition");
    ok(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 3, (int[]){1, size, 1}, NULL,
                              &r.pw),
       "partition");
    ladle_linear_desc ld;
    ladle_linear_desc_init(&ld, WIDTH, WIDTH);
    for (int l = 0; l < LAYERS; l++) {
        ok(ladle_dist_linear_create(&ld, &(ladle_dist_partitions){r.p, r.pw, r.p},
                                    (int64_t[]){batch, WIDTH}, LADLE_F64, LADLE_CPU,
                                    (uint64_t)l + 1, &ops[k++]),
           "linear");
        int nd;
        int64_t ys[LADLE_MAX_NDIM];
        ladle_op_y_shape(ops[k - 1], &nd, ys);
        if (l + 1 < LAYERS)
            ok(ladle_activation_create(LADLE_TANH, 0, nd, ys, LADLE_F64, LADLE_CPU, &ops[k++]),
               "tanh");
    }
    ladle_loss_desc lo;
    ladle_loss_desc_init(&lo, LADLE_LOSS_MSE, LADLE_REDUCE_MEAN);
    ok(ladle_dist_loss_create(&lo, r.p, (int64_t[]){batch, WIDTH}, LADLE_F64, LADLE_CPU, &loss),
       "loss");
    ladle_network_desc d;
    ladle_network_desc_init(&d);
    d.zero_stage = stage;
    ok(ladle_network_create_desc(&d, k, ops, loss, &r.net), "network");
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, LADLE_OPT_ADAMW, 1e-3);
    ok(ladle_optimizer_create(&od, &r.opt), "optimizer");
    ok(ladle_optimizer_add_network(r.opt, r.net), "add");
    int nd;
    int64_t s[LADLE_MAX_NDIM];
    ladle_op_x_shape(ops[0], &nd, s);
    ok(ladle_tensor_create(LADLE_F64, LADLE_CPU, nd, s, &r.x), "x");
    ok(ladle_tensor_fill_random(r.x, 7, (uint64_t)rank), "x");
    ok(ladle_tensor_create(LADLE_F64, LADLE_CPU, nd, s, &r.t), "t");
    ok(ladle_tensor_fill_random(r.t, 8, (uint64_t)rank), "t");
    return r;
}

static void free_run(run *r)
{
    ladle_network_destroy(&r->net);
    ladle_optimizer_destroy(&r->opt);
    ladle_tensor_destroy(&r->x);
    ladle_tensor_destroy(&r->t);
    ladle_partition_destroy(&r->p);
    ladle_partition_destroy(&r->pw);
}

static double step_once(void *arg)
{
    run *r = arg;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now();
    ok(ladle_network_zero_grad(r->net), "zero");
    ok(ladle_network_forward(r->net, r->x, NULL), "forward");
    ok(ladle_network_loss(r->net, r->t, NULL), "loss");
    ok(ladle_network_backward(r->net, 1), "backward");
    ok(ladle_optimizer_step(r->opt), "step");
    double e = bench_now() - t0, m;
    MPI_Allreduce(&e, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

static size_t state_bytes(const ladle_optimizer *opt)
{
    size_t b = 0;
    for (int i = 0; i < ladle_optimizer_num_params(opt); i++)
        for (int k = 0; k < 2; k++) {
            const ladle_tensor *s = ladle_optimizer_state(opt, i, k);
            if (s)
                b += (size_t)ladle_tensor_numel(s) * ladle_dtype_size(ladle_tensor_dtype(s));
        }
    return b;
}

typedef struct sum_case {
    ladle_op *a, *b;
    ladle_tensor *whole, *slice;
    int split; /* 0: the all-sum-reduce, 1: reduce-scatter + all-gather */
} sum_case;

static double sum_once(void *arg)
{
    sum_case *c = arg;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now();
    if (c->split) {
        ok(ladle_op_forward(c->b, c->whole, c->slice), "reduce-scatter");
        ok(ladle_op_forward(c->a, c->slice, c->whole), "all-gather");
    } else {
        ok(ladle_op_forward(c->a, c->whole, c->whole), "all-sum-reduce");
    }
    double e = bench_now() - t0, m;
    MPI_Allreduce(&e, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

static void sums(int64_t kib, int reps)
{
    int64_t n = kib * 1024 / 8;
    n -= n % size;
    ladle_partition *p = NULL;
    ok(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 1, &size, NULL, &p), "partition");
    sum_case asr = {0}, rsag = {0};
    ladle_all_sum_reduce_desc ad;
    ladle_all_sum_reduce_desc_init(&ad, 1, (int[]){0}, 1, &n);
    ok(ladle_all_sum_reduce_create(&ad, p, LADLE_F64, LADLE_CPU, &asr.a), "asr");
    ladle_all_gather_desc gd;
    ladle_all_gather_desc_init(&gd, 0, 1, &n, 0);
    ok(ladle_all_gather_create(&gd, p, LADLE_F64, LADLE_CPU, &rsag.a), "all-gather");
    ok(ladle_reduce_scatter_create(&gd, p, LADLE_F64, LADLE_CPU, &rsag.b), "reduce-scatter");
    int64_t slice = n / size;
    ok(ladle_tensor_create(LADLE_F64, LADLE_CPU, 1, &n, &asr.whole), "t");
    ok(ladle_tensor_fill_random(asr.whole, 3, (uint64_t)rank), "t");
    rsag.whole = asr.whole;
    ok(ladle_tensor_create(LADLE_F64, LADLE_CPU, 1, &slice, &rsag.slice), "t");
    rsag.split = 1;
    double ta = 0, tb = 0, va[64], vb[64];
    for (int r = -2; r < reps; r++) { /* alternate, so drift hits both */
        ta = sum_once(&asr);
        tb = sum_once(&rsag);
        if (r >= 0)
            va[r] = ta, vb[r] = tb;
    }
    ta = bench_median(va, reps);
    tb = bench_median(vb, reps);
    if (rank == 0)
        printf("sum %d %lld %.1f %.1f %.3f\n", size, (long long)kib, ta * 1e6, tb * 1e6,
               tb / ta);
    ladle_op_destroy(&asr.a);
    ladle_op_destroy(&rsag.a);
    ladle_op_destroy(&rsag.b);
    ladle_tensor_destroy(&asr.whole);
    ladle_tensor_destroy(&rsag.slice);
    ladle_partition_destroy(&p);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int reps = argc > 1 ? atoi(argv[1]) : 9;
    reps = reps < 1 ? 1 : reps > 64 ? 64 : reps;
    int64_t batch = 16 * size;
    size_t base = 0;
    double t0 = 0;
    if (rank == 0)
        printf("# mem ranks stage params grads states buffers pgs_ratio\n");
    for (int stage = 0; stage <= 2; stage++) {
        run r = make_run(stage, batch);
        step_once(&r); /* every buffer in use once */
        size_t v[4] = {0}, m[4];
        ok(ladle_network_bytes(r.net, &v[0], &v[1], &v[3]), "bytes");
        v[2] = state_bytes(r.opt);
        MPI_Allreduce(v, m, 4, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
        size_t pgs = m[0] + m[1] + m[2];
        base = stage == 0 ? pgs : base;
        if (rank == 0)
            printf("mem %d %d %zu %zu %zu %zu %.3f\n", size, stage, m[0], m[1], m[2], m[3],
                   (double)pgs / (double)base);
        free_run(&r);
    }
    if (rank == 0)
        printf("# sum ranks payload_kib asr_us rs_ag_us ratio\n");
    sums(1024, reps);
    sums(16384, reps);
    if (rank == 0)
        printf("# step ranks stage step_ms ratio_to_stage0\n");
    for (int stage = 0; stage <= 2; stage++) {
        run r = make_run(stage, batch);
        double t = bench_median_of(step_once, &r, reps);
        t0 = stage == 0 ? t : t0;
        if (rank == 0)
            printf("step %d %d %.2f %.3f\n", size, stage, t * 1e3, t / t0);
        free_run(&r);
    }
    MPI_Finalize();
    return 0;
}
