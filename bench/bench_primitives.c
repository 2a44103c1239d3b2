/*
 * bench_primitives: each primitive's forward and adjoint against the raw MPI
 * call that moves the same bytes, in one run, as medians of repeated
 * timings. One row per (primitive, direction, payload):
 *
 *   ranks primitive dir payload ladle_us mpi_us ratio  (ratio = ladle / mpi)
 *
 * A timing is the slowest rank's time for one call (barrier, call,
 * all-reduce of the elapsed time), taken as the second of two back-to-back
 * calls; ladle's and MPI's pairs alternate so that drift on a noisy machine
 * hits both alike. Where the primitive does more than the bare call (the
 * repartition's pack or unpack, the halo adjoint's add and zero), a second
 * row times the plain-MPI code of the same result.
 *
 *   mpiexec -n 2 bench_primitives [--min-kib 1] [--max-kib 65536] [--reps N]
 */
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ladle.h"

#include "common.h"
#include "shapes.h"

static int rank, size;

typedef struct bench {
    const char *name;
    const char *dir;
    const char *mpi_name;
    ladle_op *op;
    int adjoint;
    ladle_tensor *in, *out;
    /* the raw MPI version of the same data movement */
    void (*raw)(struct bench *b);
    void *sbuf, *rbuf;
    int64_t count; /* elements of the raw call */
    int *counts, *displs;
    MPI_Comm comm;
    int in_place; /* forward and adjoint on one tensor (halo exchange) */
    /* optionally, a second raw version of the forward (what a user of plain
     * MPI would have to write for the same result) */
    void (*raw2)(struct bench *b);
    const char *mpi_name2;
    /* and of the adjoint */
    void (*raw2_adj)(struct bench *b);
    const char *mpi_name2_adj;
    int64_t rows, cols; /* repartition: x's local shape */
} bench;

static double *samples;

static void run_ladle(bench *b)
{
    ladle_status st = b->adjoint ? ladle_op_adjoint(b->op, b->in, b->out)
                                 : ladle_op_forward(b->op, b->in, b->out);
    if (st != LADLE_OK) {
        fprintf(stderr, "bench: %s %s failed: %s\n", b->name, b->dir,
                ladle_error_message());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* When ranks outnumber cores, MPI's blocking barrier busy-polls and lets
 * ranks leave it up to a time slice apart, which would be charged to
 * whatever is timed next; the harness's own synchronisation therefore
 * polls and yields there. */
static int oversubscribed;

static void wait_politely(MPI_Request *req)
{
    int done = 0;
    MPI_Status st;
    while (!done) {
        MPI_Test(req, &done, &st);
        if (!done)
            sched_yield();
    }
}

static double timed(bench *b, int use_mpi)
{
    double t, worst;
    MPI_Request req;
    if (oversubscribed) {
        MPI_Ibarrier(MPI_COMM_WORLD, &req);
        wait_politely(&req);
    } else {
        MPI_Barrier(MPI_COMM_WORLD); /* leaves ranks closest together */
    }
    t = MPI_Wtime();
    if (use_mpi)
        b->raw(b);
    else
        run_ladle(b);
    t = MPI_Wtime() - t;
    if (oversubscribed) {
        MPI_Iallreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req);
        wait_politely(&req);
    } else {
        MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    return worst;
}

static void measure(bench *b, int64_t bytes, int reps)
{
    double *lt = samples, *mt = samples + reps;
    /* warm up both: first touches, MPI's lazy connection set-up */
    for (int w = 0; w < 2; w++) {
        timed(b, 0);
        timed(b, 1);
    }
    /* Each sample is the second of two back-to-back calls, so both sides are
     * timed with their buffers in cache (as OSU-style benchmarks do); the
     * pairs alternate so that drift on a noisy machine hits both alike. */
    for (int r = 0; r < reps; r++) {
        timed(b, 0);
        lt[r] = timed(b, 0);
        timed(b, 1);
        mt[r] = timed(b, 1);
    }
    double l = bench_median(lt, reps), m = bench_median(mt, reps);
    if (rank == 0) {
        char sz[32];
        if (bytes >= 1 << 20)
            snprintf(sz, sizeof sz, "%lld MiB", (long long)(bytes >> 20));
        else
            snprintf(sz, sizeof sz, "%lld KiB", (long long)(bytes >> 10));
        printf("%5d  %-15s %-8s %9s %12.1f %12.1f %7.2f   %s\n", size, b->name, b->dir, sz,
               l * 1e6, m * 1e6, l / m, b->mpi_name);
        fflush(stdout);
    }
}

/* ---- the raw calls ---- */
static void raw_bcast(bench *b)
{
    MPI_Bcast(b->sbuf, (int)b->count, MPI_FLOAT, 0, b->comm);
}

static void raw_reduce(bench *b)
{
    MPI_Reduce(b->sbuf, b->rbuf, (int)b->count, MPI_FLOAT, MPI_SUM, 0, b->comm);
}

static void raw_allreduce(bench *b)
{
    MPI_Allreduce(b->sbuf, b->rbuf, (int)b->count, MPI_FLOAT, MPI_SUM, b->comm);
}

/* a 1-D halo of one row each side: two shifts, as halo codes write them */
static void raw_sendrecv(bench *b)
{
    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL,
        down = rank + 1 < size ? rank + 1 : MPI_PROC_NULL;
    float *t = b->sbuf;
    int64_t row = b->count;
    /* rows: 0 = top halo, 1..2 = bulk, 3 = bottom halo */
    MPI_Sendrecv(t + 2 * row, (int)row, MPI_FLOAT, down, 0, t, (int)row, MPI_FLOAT, up, 0,
                 b->comm, MPI_STATUS_IGNORE);
    MPI_Sendrecv(t + 1 * row, (int)row, MPI_FLOAT, up, 1, t + 3 * row, (int)row, MPI_FLOAT,
                 down, 1, b->comm, MPI_STATUS_IGNORE);
}

/* What a halo exchange's adjoint must do in plain MPI: each halo row goes
 * back to its owner, which adds it into the edge row of its bulk, and the
 * halo rows end zero (rbuf: one row of scratch). */
static void raw_sendrecv_adjoint(bench *b)
{
    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL,
        down = rank + 1 < size ? rank + 1 : MPI_PROC_NULL;
    float *t = b->sbuf, *w = b->rbuf;
    int64_t row = b->count;
    MPI_Sendrecv(t, (int)row, MPI_FLOAT, up, 0, w, (int)row, MPI_FLOAT, down, 0, b->comm,
                 MPI_STATUS_IGNORE);
    if (down != MPI_PROC_NULL)
        for (int64_t i = 0; i < row; i++)
            t[2 * row + i] += w[i];
    MPI_Sendrecv(t + 3 * row, (int)row, MPI_FLOAT, down, 1, w, (int)row, MPI_FLOAT, up, 1,
                 b->comm, MPI_STATUS_IGNORE);
    if (up != MPI_PROC_NULL) {
        for (int64_t i = 0; i < row; i++)
            t[row + i] += w[i];
        memset(t, 0, (size_t)row * sizeof(float));
    }
    if (down != MPI_PROC_NULL)
        memset(t + 3 * row, 0, (size_t)row * sizeof(float));
}

/* The whole tensor's balanced shards (counts, displs): sbuf holds this
 * rank's shard for the gather and the whole tensor for the scatter. */
static void raw_allgatherv(bench *b)
{
    MPI_Allgatherv(b->sbuf, b->counts[rank], MPI_FLOAT, b->rbuf, b->counts, b->displs,
                   MPI_FLOAT, b->comm);
}

static void raw_reduce_scatter(bench *b)
{
    MPI_Reduce_scatter(b->sbuf, b->rbuf, b->counts, MPI_FLOAT, MPI_SUM, b->comm);
}

static void raw_alltoallv(bench *b)
{
    MPI_Alltoallv(b->sbuf, b->counts, b->displs, MPI_FLOAT, b->rbuf, b->counts, b->displs,
                  MPI_FLOAT, b->comm);
}

/* What plain MPI needs for the same repartition: pack each destination's
 * columns of x, then MPI_Alltoallv (the pieces land contiguous in y). */
static void raw_pack_alltoallv(bench *b)
{
    const float *x = ladle_tensor_data(b->in);
    float *s = b->sbuf;
    int64_t w = b->cols / size;
    for (int r = 0; r < size; r++)
        for (int64_t i = 0; i < b->rows; i++)
            memcpy(s + b->displs[r] + i * w, x + i * b->cols + r * w,
                   (size_t)w * sizeof(float));
    MPI_Alltoallv(b->sbuf, b->counts, b->displs, MPI_FLOAT, ladle_tensor_data(b->out),
                  b->counts, b->displs, MPI_FLOAT, b->comm);
}

/* And the adjoint's: MPI_Alltoallv of y's contiguous row blocks, then each
 * source's piece unpacked into its columns of x. */
static void raw_alltoallv_unpack(bench *b)
{
    float *x = ladle_tensor_data(b->out), *r = b->rbuf;
    int64_t w = b->cols / size;
    MPI_Alltoallv(b->sbuf, b->counts, b->displs, MPI_FLOAT, r, b->counts, b->displs,
                  MPI_FLOAT, b->comm);
    for (int q = 0; q < size; q++)
        for (int64_t i = 0; i < b->rows; i++)
            memcpy(x + i * b->cols + q * w, r + b->displs[q] + i * w,
                   (size_t)w * sizeof(float));
}

static ladle_tensor *tensor(const ladle_op *op, int which)
{
    ladle_tensor *t = NULL;
    bench_tensor_like(op, which, LADLE_F32, 1, (uint64_t)rank, &t);
    return t;
}

static void *buffer(int64_t elems)
{
    float *p = calloc((size_t)(elems > 0 ? elems : 1), sizeof(float));
    for (int64_t i = 0; i < elems; i++)
        p[i] = (float)(i % 17);
    return p;
}

static const char *only = NULL; /* comma-separated primitive names */

static int selected(const char *name)
{
    size_t n = strlen(name);
    for (const char *p = only; p != NULL; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return only == NULL;
}

/* b measured again against a second plain-MPI baseline raw (named name),
 * where it has one (raw not NULL). */
static void measure_again(const bench *b, void (*raw)(bench *), const char *name,
                          int64_t bytes, int reps)
{
    if (raw == NULL)
        return;
    bench g = *b;
    g.raw = raw;
    g.mpi_name = name;
    measure(&g, bytes, reps);
}

static void run_pair(bench *f, bench *a, int64_t bytes, int reps)
{
    if (!selected(f->name)) {
        ladle_op_destroy(&f->op);
        return;
    }
    f->in = tensor(f->op, 0);
    f->out = f->in_place ? f->in : tensor(f->op, 1);
    void (*raw_adj)(struct bench *) = a->raw ? a->raw : f->raw;
    const char *adj_name = a->raw ? a->mpi_name : f->mpi_name;
    *a = *f;
    a->raw = raw_adj;
    a->mpi_name = adj_name;
    a->adjoint = 1;
    a->dir = "adjoint";
    a->in = tensor(f->op, 1);
    a->out = f->in_place ? a->in : tensor(f->op, 0);
    measure(f, bytes, reps);
    measure_again(f, f->raw2, f->mpi_name2, bytes, reps);
    measure(a, bytes, reps);
    measure_again(a, f->raw2_adj, f->mpi_name2_adj, bytes, reps);
    if (!f->in_place) {
        ladle_tensor_destroy(&f->out);
        ladle_tensor_destroy(&a->out);
    }
    ladle_tensor_destroy(&f->in);
    ladle_tensor_destroy(&a->in);
    ladle_op_destroy(&f->op);
}

static int reps_for(int64_t bytes, int reps)
{
    if (reps > 0)
        return reps;
    return bytes <= (1 << 20) ? 41 : bytes <= (16 << 20) ? 15 : 7;
}

/* What every row runs on: a partition of rank 0 alone, of every rank, of
 * every rank as rows and as columns, and a duplicate of the world for the
 * raw MPI calls. */
typedef struct grids {
    ladle_partition *p1, *pall, *prow, *pcol;
    MPI_Comm comm;
} grids;

/* f, the forward of primitive `name` (its op made by the caller), and a,
 * its adjoint, against the raw calls raw and raw_adj (NULL: raw's). */
static void pair_set(bench *f, bench *a, const char *name, void (*raw)(bench *),
                     const char *mpi_name, void (*raw_adj)(bench *), const char *mpi_adj)
{
    memset(a, 0, sizeof *a);
    f->name = name;
    f->dir = "forward";
    f->raw = raw;
    f->mpi_name = mpi_name;
    a->raw = raw_adj;
    a->mpi_name = mpi_adj;
}

/* broadcast 1 -> all, and its adjoint: a sum onto rank 0; sum-reduce all
 * -> 1, and its adjoint: a broadcast; all-sum-reduce over all ranks
 * (self-adjoint). n floats each. */
static void reduction_rows(const grids *g, int64_t n, int64_t bytes, int reps)
{
    bench f, a;
    memset(&f, 0, sizeof f);
    f.comm = g->comm;
    f.count = n;
    f.sbuf = buffer(n);
    f.rbuf = buffer(n);
    ladle_broadcast_desc bd;
    ladle_broadcast_desc_init(&bd, 1, &n);
    ladle_broadcast_create(&bd, g->p1, g->pall, LADLE_F32, LADLE_CPU, &f.op);
    pair_set(&f, &a, "broadcast", raw_bcast, "MPI_Bcast", raw_reduce, "MPI_Reduce");
    run_pair(&f, &a, bytes, reps);

    ladle_sum_reduce_create(&bd, g->pall, g->p1, LADLE_F32, LADLE_CPU, &f.op);
    pair_set(&f, &a, "sum-reduce", raw_reduce, "MPI_Reduce", raw_bcast, "MPI_Bcast");
    run_pair(&f, &a, bytes, reps);

    int axes[1] = {0};
    ladle_all_sum_reduce_desc ad;
    ladle_all_sum_reduce_desc_init(&ad, 1, axes, 1, &n);
    ladle_all_sum_reduce_create(&ad, g->pall, LADLE_F32, LADLE_CPU, &f.op);
    pair_set(&f, &a, "all-sum-reduce", raw_allreduce, "MPI_Allreduce", NULL, NULL);
    run_pair(&f, &a, bytes, reps);
    free(f.sbuf);
    free(f.rbuf);
}

/* all-gather of a tensor of n floats in balanced shards over every rank,
 * its adjoint a reduce-scatter; and reduce-scatter, its adjoint the
 * all-gather. The payload is the whole tensor. */
static void shard_rows(const grids *g, int64_t n, int64_t bytes, int reps)
{
    bench f, a;
    memset(&f, 0, sizeof f);
    f.comm = g->comm;
    f.sbuf = buffer(n);
    f.rbuf = buffer(n);
    f.counts = calloc((size_t)size, sizeof(int));
    f.displs = calloc((size_t)size, sizeof(int));
    for (int r = 0, at = 0; r < size; r++) {
        f.counts[r] = (int)(n / size + (r < n % size));
        f.displs[r] = at;
        at += f.counts[r];
    }
    ladle_all_gather_desc d;
    ladle_all_gather_desc_init(&d, 0, 1, &n, 0);
    ladle_all_gather_create(&d, g->pall, LADLE_F32, LADLE_CPU, &f.op);
    pair_set(&f, &a, "all-gather", raw_allgatherv, "MPI_Allgatherv", raw_reduce_scatter,
             "MPI_Reduce_scatter");
    run_pair(&f, &a, bytes, reps);
    ladle_reduce_scatter_create(&d, g->pall, LADLE_F32, LADLE_CPU, &f.op);
    pair_set(&f, &a, "reduce-scatter", raw_reduce_scatter, "MPI_Reduce_scatter",
             raw_allgatherv, "MPI_Allgatherv");
    run_pair(&f, &a, bytes, reps);
    free(f.sbuf);
    free(f.rbuf);
    free(f.counts);
    free(f.displs);
}

/* halo exchange: 1-D partition of rows, 3-row kernel, one halo row of n
 * floats each side */
static void halo_rows(const grids *g, int64_t n, int64_t bytes, int reps)
{
    ladle_layout *lx = NULL;
    int64_t global[2] = {2 * size, n};
    ladle_layout_create_balanced(g->prow, 2, global, &lx);
    ladle_window w;
    ladle_window_init(&w, 2);
    w.kernel[0] = 3;
    w.padding[0] = 1;
    bench f, a;
    memset(&f, 0, sizeof f);
    f.comm = g->comm;
    f.count = n;
    f.sbuf = buffer(4 * n);
    ladle_halo_exchange_create(lx, &w, LADLE_F32, LADLE_CPU, 0, &f.op);
    pair_set(&f, &a, "halo-exchange", raw_sendrecv, "MPI_Sendrecv x2", NULL, NULL);
    f.raw2_adj = raw_sendrecv_adjoint;
    f.mpi_name2_adj = "MPI_Sendrecv+add+zero x2";
    f.rbuf = buffer(n);
    f.in_place = 1;
    run_pair(&f, &a, bytes, reps);
    free(f.sbuf);
    free(f.rbuf);
    ladle_layout_destroy(&lx);
}

/* repartition: rows to columns of a (size*r) x (size*c) matrix whose local
 * block is n floats; every rank keeps 1/size and sends the rest, like an
 * all-to-all */
static void repartition_rows(const grids *g, int64_t n, int reps)
{
    ladle_layout *lx = NULL, *ly = NULL;
    int64_t side = (int64_t)sqrt((double)n);
    int64_t g2[2] = {side * size, (n / side) / size * size};
    ladle_layout_create_balanced(g->prow, 2, g2, &lx);
    ladle_layout_create_balanced(g->pcol, 2, g2, &ly);
    bench f, a;
    memset(&f, 0, sizeof f);
    f.comm = g->comm;
    int64_t local = side * g2[1], piece = local / size;
    f.sbuf = buffer(local);
    f.rbuf = buffer(local);
    f.counts = calloc((size_t)size, sizeof(int));
    f.displs = calloc((size_t)size, sizeof(int));
    for (int r = 0; r < size; r++) {
        f.counts[r] = (int)piece;
        f.displs[r] = (int)(r * piece);
    }
    ladle_repartition_create(lx, ly, LADLE_F32, LADLE_CPU, 0, &f.op);
    pair_set(&f, &a, "repartition", raw_alltoallv, "MPI_Alltoallv", NULL, NULL);
    f.raw2 = raw_pack_alltoallv;
    f.mpi_name2 = "pack+MPI_Alltoallv";
    f.raw2_adj = raw_alltoallv_unpack;
    f.mpi_name2_adj = "MPI_Alltoallv+unpack";
    f.rows = side;
    f.cols = g2[1];
    run_pair(&f, &a, local * 4, reps);
    free(f.sbuf);
    free(f.rbuf);
    free(f.counts);
    free(f.displs);
    ladle_layout_destroy(&lx);
    ladle_layout_destroy(&ly);
}

/* The options into *min_kib, *max_kib, *reps: 0, or 2 with rank 0's reason
 * printed. */
static int parse(int argc, char **argv, int64_t *min_kib, int64_t *max_kib, int *reps)
{
    long long nmin = *min_kib, nmax = *max_kib, nreps = 0;
    const bench_opt opts[] = {
        {"--min-kib", 1, 1 << 20, &nmin, NULL, NULL, 0},
        {"--max-kib", 1, 1 << 20, &nmax, NULL, NULL, 0},
        {"--reps", 1, 1000, &nreps, NULL, NULL, 0},
        {"--only", 0, 0, NULL, &only,
         "broadcast,sum-reduce,all-sum-reduce,halo-exchange,repartition,all-gather,"
         "reduce-scatter",
         1},
    };
    if (bench_options("bench_primitives", rank, argc, argv, opts,
                      sizeof opts / sizeof opts[0]))
        return 2;
    if (nmin > nmax) {
        if (rank == 0)
            fprintf(stderr, "bench_primitives: --min-kib %lld is above --max-kib %lld\n",
                    nmin, nmax);
        return 2;
    }
    *min_kib = nmin, *max_kib = nmax, *reps = (int)nreps;
    return 0;
}

/* parse; then, for payloads growing 4 times from --min-kib to --max-kib,
 * the reductions, all-gather and reduce-scatter, the halo exchange and the
 * repartition */
int main(int argc, char **argv)
{
    int64_t min_kib = 1, max_kib = 64 * 1024;
    int reps_opt = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (parse(argc, argv, &min_kib, &max_kib, &reps_opt)) {
        MPI_Finalize();
        return 2;
    }
    samples = calloc(2 * 1024, sizeof(double));
    const char *local = getenv("MPI_LOCALNRANKS");
    if (local == NULL)
        local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    oversubscribed = local != NULL && atol(local) > sysconf(_SC_NPROCESSORS_ONLN);
    int one[1] = {1}, all[1] = {size}, rows_cols[2] = {size, 1}, cols_rows[2] = {1, size};
    grids g = {NULL, NULL, NULL, NULL, MPI_COMM_NULL};
    ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 1, one, NULL, &g.p1);
    ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 1, all, NULL, &g.pall);
    ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 2, rows_cols, NULL, &g.prow);
    ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 2, cols_rows, NULL, &g.pcol);
    MPI_Comm_dup(MPI_COMM_WORLD, &g.comm);
    if (rank == 0)
        printf("%5s  %-15s %-8s %9s %12s %12s %7s   %s\n", "ranks", "primitive", "dir",
               "payload", "ladle_us", "mpi_us", "ratio", "raw MPI call");
    for (int64_t kib = min_kib; kib <= max_kib; kib *= 4) {
        int64_t bytes = kib * 1024, n = bytes / 4;
        int reps = reps_for(bytes, reps_opt);
        reduction_rows(&g, n, bytes, reps);
        shard_rows(&g, n, bytes, reps);
        halo_rows(&g, n, bytes, reps);
        repartition_rows(&g, n, reps);
    }
    ladle_partition_destroy(&g.p1);
    ladle_partition_destroy(&g.pall);
    ladle_partition_destroy(&g.prow);
    ladle_partition_destroy(&g.pcol);
    MPI_Comm_free(&g.comm);
    free(samples);
    MPI_Finalize();
    return 0;
}
