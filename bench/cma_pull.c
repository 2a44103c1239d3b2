/*
 * cma_pull - would a single-copy pull of strided pieces beat packing them?
 *
 * The repartition's forward packs each strided piece before MPI moves it
 * (docs/benchmarks.md, "This repartition must change the layout"). This
 * program measures the alternative on Linux: the receiver reads the
 * sender's strided rows straight into its own buffer with
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
    const long hc = run_kib * 256, cols = 2 * hc; /* floats */
    const long n = mib * 262144, h = n / cols;    /* local: h x cols */
    if (h < 2) {
        if (rank == 0)
            fprintf(stderr, "cma_pull: %ld MiB holds fewer than 2 rows of %ld KiB\n", mib,
                    2 * run_kib);
        MPI_Finalize();
        return 2;
    }
    const long quarter = h * hc; /* elements of one piece */
    const int peer = 1 - rank;
    float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4), *pk = malloc((size_t)n * 4);
    float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
    struct iovec *riov = malloc(sizeof *riov * (size_t)h);
    if (!x || !y || !pk || !a || !b || !riov) {
        fprintf(stderr, "cma_pull: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (long i = 0; i < n; i++) /* distinct values, first touch */
        x[i] = (float)(rank * n + i), y[i] = pk[i] = b[i] = 0, a[i] = (float)i;
    int cnt[2] = {(int)quarter, (int)quarter}, dsp[2] = {0, (int)quarter};
    pid_t mine_pid = getpid(), peer_pid;
    MPI_Sendrecv(&mine_pid, sizeof mine_pid, MPI_BYTE, peer, 1, &peer_pid, sizeof peer_pid,
                 MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    double t[3][MAX_REPS];
    int failed = 0;
    for (long r = -3; r < reps && !failed; r++) {
        double t0;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = bench_now();
        MPI_Alltoallv(a, cnt, dsp, MPI_FLOAT, b, cnt, dsp, MPI_FLOAT, MPI_COMM_WORLD);
        if (r >= 0)
            t[0][r] = bench_now() - t0;

        MPI_Barrier(MPI_COMM_WORLD);
        t0 = bench_now();
        for (int q = 0; q < 2; q++)
            for (long i = 0; i < h; i++)
                memcpy(pk + q * quarter + i * hc, x + i * cols + q * hc, (size_t)hc * 4);
        MPI_Alltoallv(pk, cnt, dsp, MPI_FLOAT, y, cnt, dsp, MPI_FLOAT, MPI_COMM_WORLD);
        if (r >= 0)
            t[1][r] = bench_now() - t0;

        MPI_Barrier(MPI_COMM_WORLD);
        t0 = bench_now();
        uintptr_t mine = (uintptr_t)x, theirs = 0;
        MPI_Request rq[2];
        MPI_Irecv(&theirs, sizeof theirs, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(&mine, sizeof mine, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[1]);
        for (long i = 0; i < h; i++) /* the kept piece, while the address travels */
            memcpy(y + (rank * h + i) * hc, x + i * cols + rank * hc, (size_t)hc * 4);
        MPI_Status sts[2];
        MPI_Waitall(2, rq, sts);
        const float *rx = (const float *)theirs;
        for (long i = 0; i < h; i++) {
            riov[i].iov_base = (void *)(rx + i * cols + rank * hc);
            riov[i].iov_len = (size_t)hc * 4;
        }
        for (long i = 0; i < h && !failed; i += IOV_BATCH) {
            long m = h - i < IOV_BATCH ? h - i : IOV_BATCH;
            struct iovec l = {y + (peer * h + i) * hc, (size_t)(m * hc) * 4};
            ssize_t got = process_vm_readv(peer_pid, &l, 1, riov + i, (unsigned long)m, 0);
            if (got != (ssize_t)l.iov_len) {
                fprintf(stderr, "cma_pull: rank %d: process_vm_readv read %zd of %zu bytes: %s\n",
                        rank, got, l.iov_len, got < 0 ? strerror(errno) : "short read");
                failed = 1;
            }
        }
        char z = 0, zz;
        MPI_Sendrecv(&z, 1, MPI_BYTE, peer, 3, &zz, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (r >= 0)
            t[2][r] = bench_now() - t0;
    }
    long bad = 0;
    for (long i = 0; i < 2 * h && !failed; i++)
        for (long j = 0; j < hc; j++) {
            long from = i / h, row = i % h;
            bad += y[i * hc + j] != (float)(from * n + row * cols + rank * hc + j);
        }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
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
    free(x), free(y), free(pk), free(a), free(b), free(riov);
    MPI_Finalize();
    return status;
}
