/*
 * bench_overhead: what one call of a ladle operator costs from C, on tensors
 * so small that the call is all there is, the baseline of the same calls
 * made from Python through ladle.torch (bench/torch_overhead.py).
 *
 *  - broadcast   ladle_op_forward of a broadcast over a 1-rank partition, 4
 *                elements (a copy of 16 bytes)
 *  - linear      ladle_layer_forward of a sequential linear layer, batch 1,
 *                4 -> 4, with a ctx (the training form)
 *  - linear-fb   the same forward, then ladle_op_zero_grad, backward and
 *                backward_weight: one training call of the layer
 *
 * Each row prints the median over --reps timings of --calls calls, in ns
 * per call:
 *
 *   overhead   broadcast    f32   123.4 ns/call
 *
 *   bench_overhead [--reps R] [--calls K]     (one rank is enough)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ladle.h"

#include "common.h"

static int reps = 31, calls = 20000;

static void check(ladle_status st, const char *what)
{
    if (st != LADLE_OK) {
        fprintf(stderr, "bench_overhead: %s: %s\n", what, ladle_error_message());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

typedef enum row { BROADCAST, LINEAR, LINEAR_FB } row;

typedef struct subject {
    ladle_op *op;
    ladle_ctx *ctx;
    ladle_tensor *x, *y, *dy, *dx;
} subject;

static void one_call(row r, subject *s)
{
    switch (r) {
    case BROADCAST:
        check(ladle_op_forward(s->op, s->x, s->y), "forward");
        break;
    case LINEAR:
        check(ladle_layer_forward(s->op, s->ctx, s->x, s->y), "forward");
        break;
    case LINEAR_FB:
        check(ladle_layer_forward(s->op, s->ctx, s->x, s->y), "forward");
        check(ladle_op_zero_grad(s->op), "zero_grad");
        check(ladle_layer_backward(s->op, s->ctx, s->dy, s->dx), "backward");
        check(ladle_layer_backward_weight(s->op, s->ctx, s->dy), "backward_weight");
        break;
    }
}

/* Median nanoseconds per call of row r. */
static double time_row(row r, subject *s)
{
    double *t = calloc((size_t)reps, sizeof(double));
    for (int i = 0; i < calls / 10; i++) /* warm up */
        one_call(r, s);
    for (int k = 0; k < reps; k++) {
        double t0 = bench_now();
        for (int i = 0; i < calls; i++)
            one_call(r, s);
        t[k] = (bench_now() - t0) / calls * 1e9;
    }
    double m = bench_median(t, reps);
    free(t);
    return m;
}

static ladle_tensor *make(int nd, const int64_t *shape)
{
    ladle_tensor *t = NULL;
    check(ladle_tensor_create(LADLE_F32, LADLE_CPU, nd, shape, &t), "tensor");
    check(ladle_tensor_fill_random(t, 1, 0), "fill");
    return t;
}

/* The two subjects over the one-rank partition p: a broadcast of 4 floats
 * (b) and a 4 x 4 linear layer on one row (l), with their tensors. */
static void subjects_create(ladle_partition *p, subject *b, subject *l)
{
    int64_t four[1] = {4}, row4[2] = {1, 4};
    ladle_broadcast_desc bd;
    ladle_broadcast_desc_init(&bd, 1, four);
    check(ladle_broadcast_create(&bd, p, p, LADLE_F32, LADLE_CPU, &b->op), "broadcast");
    b->x = make(1, four);
    b->y = make(1, four);
    ladle_linear_desc ld;
    ladle_linear_desc_init(&ld, row4[1], 4);
    check(ladle_linear_create(&ld, 2, row4, LADLE_F32, LADLE_CPU, 1, &l->op), "linear");
    check(ladle_ctx_create(l->op, &l->ctx), "ctx");
    l->x = make(2, row4), l->y = make(2, row4), l->dy = make(2, row4), l->dx = make(2, row4);
}

/* What subjects_create made. */
static void subjects_destroy(subject *b, subject *l)
{
    ladle_ctx_destroy(&l->ctx);
    ladle_op_destroy(&l->op);
    ladle_op_destroy(&b->op);
    ladle_tensor_destroy(&b->x), ladle_tensor_destroy(&b->y);
    ladle_tensor_destroy(&l->x), ladle_tensor_destroy(&l->y);
    ladle_tensor_destroy(&l->dy), ladle_tensor_destroy(&l->dx);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long long nreps = reps, ncalls = calls;
    const bench_opt opts[] = {
        {"--reps", 1, 1000, &nreps, NULL, NULL, 0},
        {"--calls", 10, 100000000, &ncalls, NULL, NULL, 0},
    };
    if (bench_options("bench_overhead", rank, argc, argv, opts,
                      sizeof opts / sizeof opts[0])) {
        MPI_Finalize();
        return 2;
    }
    reps = (int)nreps, calls = (int)ncalls;
    ladle_set_num_threads(1);
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    /* every rank measures alone, over its own one-rank partition */
    ladle_partition *p = NULL;
    int one[1] = {1}, self[1] = {0};
    MPI_Comm solo;
    MPI_Comm_split(MPI_COMM_WORLD, me, 0, &solo);
    check(ladle_partition_create(ladle_comm_of(solo), 1, one, self, &p), "partition");

    subject b = {0}, l = {0};
    subjects_create(p, &b, &l);
    double tb = time_row(BROADCAST, &b), tl = time_row(LINEAR, &l),
           tf = time_row(LINEAR_FB, &l);
    if (me == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        MPI_Get_library_version(lib, &len);
        lib[strcspn(lib, ",\n")] = '\0';
        printf("# C, %s, median of %d timings of %d calls\n", lib, reps, calls);
        printf("overhead   %-12s f32 %9.1f ns/call\n", "broadcast", tb);
        printf("overhead   %-12s f32 %9.1f ns/call\n", "linear", tl);
        printf("overhead   %-12s f32 %9.1f ns/call\n", "linear-fb", tf);
        fflush(stdout);
    }
    subjects_destroy(&b, &l);
    ladle_partition_destroy(&p);
    MPI_Comm_free(&solo);
    MPI_Finalize();
    return 0;
}
