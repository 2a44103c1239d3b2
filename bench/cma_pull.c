/*
 * cma_pull - would a single-copy pull of strided pieces beat packing them?
 *
 * The repartition's forward packs each strided piece before MPI moves it
 * (docs/runs/2026-11-29-primitives-vs-mpi.md, "This repartition must change
 * the layout"). This program measures the alternative on Linux: the
 * receiver reads the sender's strided rows straight into its own buffer with
 * process_vm_readv (cross-memory attach, the kernel call MPICH's
 * single-copy path uses for contiguous messages), one iovec per row.
 *
 * Two ranks on one node, rows to columns of a matrix: rank r holds rows
 * [r h, (r+1) h) of a 2h x C matrix and receives columns [r C/2, (r+1) C/2);
 * each keeps a quarter of the matrix and sends a quarter, in rows of C/2
 * elements (the contiguous run) at a stride of C. Three ways, medians of
 * the repetitions, each against MPI_Alltoallv moving the same bytes between
 * buffers already laid out:
 *   pack+a2av  pack both pieces, MPI_Alltoallv (what plain MPI code does);
 *   pull       exchange the buffers' addresses, copy the kept piece, read
 *              the peer's piece with process_vm_readv, then a zero-byte
 *              message to say it may reuse its buffer.
 * The pulled result is checked element by element.
 *
 *   mpiexec -n 2 cma_pull [MiB per rank, 1-1024] [run KiB, 1-1024] [reps, 1-199]
 *
 * Not part of `make bench`: a measurement behind a design decision, kept
 * so that the figures in docs/benchmarks.md can be made again.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bench/common.h"

#define MAX_REPS 199
#define IOV_BATCH 1024 /* at most IOV_MAX (1024 on Linux) iovecs a call */

/* a whole number in [lo, hi], or -1 */
static long parse(const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno || end == s || *end || v < lo || v > hi ? -1 : v;
}

/* One rank's side of the exchange: the local h x cols matrix x, its two
 * pieces of h rows of hc floats, and the buffers each way moves them into. */
typedef struct shard {
    long n, h, hc, cols, quarter; /* floats; quarter: the elements of one piece */
    int rank, peer;
    pid_t peer_pid;
    float *x, *y, *pk, *a, *b;
    struct iovec *riov; /* the peer's rows to pull, one iovec each */
    int cnt[2], dsp[2];
} shard;

/* The baseline: MPI_Alltoallv of the same bytes between buffers already
 * laid out. Returns its time. */
static double time_a2av(shard *s)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now();
    MPI_Alltoallv(s->a, s->cnt, s->dsp, MPI_FLOAT, s->b, s->cnt, s->dsp, MPI_FLOAT,
                  MPI_COMM_WORLD);
    return bench_now() - t0;
}

/* Pack both pieces, then MPI_Alltoallv (what plain MPI code does). Returns
 * its time. */
static double time_pack(shard *s)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now();
    for (int q = 0; q < 2; q++)
        for (long i = 0; i < s->h; i++)
            memcpy(s->pk + q * s->quarter + i * s->hc, s->x + i * s->cols + q * s->hc,
                   (size_t)s->hc * 4);
    MPI_Alltoallv(s->pk, s->cnt, s->dsp, MPI_FLOAT, s->y, s->cnt, s->dsp, MPI_FLOAT,
                  MPI_COMM_WORLD);
    return bench_now() - t0;
}

/* Exchange the buffers' addresses, copy the kept piece, read the peer's
 * piece with process_vm_readv, then a zero-byte message to say it may
 * reuse its buffer. *failed: whether a read failed on any rank. Returns
 * its time. */
static double time_pull(shard *s, int *failed)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now();
    long h = s->h, hc = s->hc, cols = s->cols;
    int rank = s->rank, peer = s->peer;
    uintptr_t mine = (uintptr_t)s->x, theirs = 0;
    MPI_Request rq[2];
    MPI_Irecv(&theirs, sizeof theirs, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(&mine, sizeof mine, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[1]);
    for (long i = 0; i < h; i++) /* the kept piece, while the address travels */
        memcpy(s->y + (rank * h + i) * hc, s->x + i * cols + rank * hc, (size_t)hc * 4);
    MPI_Status sts[2];
    MPI_Waitall(2, rq, sts);
    const float *rx = (const float *)theirs;
    for (long i = 0; i < h; i++) {
        s->riov[i].iov_base = (void *)(rx + i * cols + rank * hc);
        s->riov[i].iov_len = (size_t)hc * 4;
    }
    for (long i = 0; i < h && !*failed; i += IOV_BATCH) {
        long m = h - i < IOV_BATCH ? h - i : IOV_BATCH;
        struct iovec l = {s->y + (peer * h + i) * hc, (size_t)(m * hc) * 4};
        ssize_t got = process_vm_readv(s->peer_pid, &l, 1, s->riov + i, (unsigned long)m, 0);
        if (got != (ssize_t)l.iov_len) {
            fprintf(stderr, "cma_pull: rank %d: process_vm_readv read %zd of %zu bytes: %s\n",
                    rank, got, l.iov_len, got < 0 ? strerror(errno) : "short read");
            *failed = 1;
        }
    }
    char z = 0, zz;
    MPI_Sendrecv(&z, 1, MPI_BYTE, peer, 3, &zz, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Allreduce(MPI_IN_PLACE, failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return bench_now() - t0;
}

/* The elements of the pulled result that are wrong, over both ranks. */
static long count_wrong(const shard *s)
{
    long bad = 0;
    for (long i = 0; i < 2 * s->h; i++)
        for (long j = 0; j < s->hc; j++) {
            long from = i / s->h, row = i % s->h;
            bad += s->y[i * s->hc + j] !=
                   (float)(from * s->n + row * s->cols + s->rank * s->hc + j);
        }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return bad;
}

/* The buffers of s, first touched with distinct values, and the peer's
 * process id. */
static void shard_setup(shard *s)
{
    long n = s->n;
    s->x = malloc((size_t)n * 4), s->y = malloc((size_t)n * 4), s->pk = malloc((size_t)n * 4);
    s->a = malloc((size_t)n * 4), s->b = malloc((size_t)n * 4);
    s->riov = malloc(sizeof *s->riov * (size_t)s->h);
    if (!s->x || !s->y || !s->pk || !s->a || !s->b || !s->riov) {
        fprintf(stderr, "cma_pull: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (long i = 0; i < n; i++) /* distinct values, first touch */
        s->x[i] = (float)(s->rank * n + i), s->y[i] = s->pk[i] = s->b[i] = 0,
        s->a[i] = (float)i;
    s->cnt[0] = s->cnt[1] = (int)s->quarter, s->dsp[0] = 0, s->dsp[1] = (int)s->quarter;
    pid_t mine_pid = getpid();
    MPI_Sendrecv(&mine_pid, sizeof mine_pid, MPI_BYTE, s->peer, 1, &s->peer_pid,
                 sizeof s->peer_pid, MPI_BYTE, s->peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long mib = argc > 1 ? parse(argv[1], 1, 1024) : 16;
    long run_kib = argc > 2 ? parse(argv[2], 1, 1024) : 4;
    long reps = argc > 3 ? parse(argv[3], 1, MAX_REPS) : 15;
    if (size != 2 || mib < 0 || run_kib < 0 || reps < 0 || argc > 4) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiexec -n 2 cma_pull [MiB per rank, 1-1024] "
                            "[run KiB, 1-1024] [reps, 1-%d]\n",
                    MAX_REPS);
        MPI_Finalize();
        return 2;
    }
    shard s = {0};
    s.rank = rank, s.peer = 1 - rank;
    s.hc = run_kib * 256, s.cols = 2 * s.hc;   /* floats */
    s.n = mib * 262144, s.h = s.n / s.cols; /* local: h x cols */
    if (s.h < 2) {
        if (rank == 0)
            fprintf(stderr, "cma_pull: %ld MiB holds fewer than 2 rows of %ld KiB\n", mib,
                    2 * run_kib);
        MPI_Finalize();
        return 2;
    }
    s.quarter = s.h * s.hc;
    shard_setup(&s);
    double t[3][MAX_REPS];
    int failed = 0;
    for (long r = -3; r < reps && !failed; r++) {
        double ta = time_a2av(&s), tp = time_pack(&s), tq = time_pull(&s, &failed);
        if (r >= 0)
            t[0][r] = ta, t[1][r] = tp, t[2][r] = tq;
    }
    long bad = failed ? 0 : count_wrong(&s);
    int status = failed || bad ? 1 : 0;
    if (rank == 0) {
        if (failed)
            printf("cma_pull: the pull failed (process_vm_readv is not permitted here?)\n");
        else if (bad)
            printf("cma_pull: %ld elements pulled wrong\n", bad);
        else {
            double m0 = bench_median(t[0], (int)reps), m1 = bench_median(t[1], (int)reps);
            double m2 = bench_median(t[2], (int)reps);
            printf("%4ld MiB, runs of %4ld KiB: MPI_Alltoallv %9.1f us  pack+a2av %9.1f us "
                   "(%.2f)  pull %9.1f us (%.2f)\n",
                   mib, run_kib, m0 * 1e6, m1 * 1e6, m1 / m0, m2 * 1e6, m2 / m0);
        }
    }
    free(s.x), free(s.y), free(s.pk), free(s.a), free(s.b), free(s.riov);
    MPI_Finalize();
    return status;
}
