/*
 * The sanitizer canary: faults of the kind ladle could have, made on
 * purpose. make asan and make valgrind run it under the same launcher,
 * wrapper, options and suppressions as the suite and demand a report; if
 * the tool stays quiet, the suppressions (or the options) would hide ladle's
 * own problems too, and the whole run fails. make check never runs it.
 *
 *   canary leak   loses two tensors from ladle_tensor_create: one in plain
 *                 code, one inside an MPI_Init of our own (the profiling
 *                 interface's wrapper), so its stack passes through a frame
 *                 named MPI_Init, which a suppression must not match
 *   canary read   reads a tensor's shape after ladle_tensor_destroy freed it
 *   canary oob    writes one element past the end of a tensor's data (the
 *                 backend's block, which both tools must see into)
 *   canary ub     overflows a signed int (UBSan; fatal in this build)
 *   canary device reads a tensor of the guarded test device through its data
 *                 pointer instead of the backend (ASan only: the device's
 *                 memory is poisoned outside its own slots)
 *
 * Collective in spirit: every rank makes the same faults.
 */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ladle.h"

/* the mode, known before MPI_Init runs */
static const char *mode = "";

/* CPU tensors whatever LADLE_TEST_DEVICE says: the faults below are host
 * accesses to ladle's own memory, which the checkers must report. */
static ladle_tensor *new_tensor(int64_t n)
{
    ladle_tensor *t = NULL;
    int64_t shape[1] = {n};
    if (ladle_tensor_create(LADLE_F64, LADLE_CPU, 1, shape, &t) != LADLE_OK) {
        fprintf(stderr, "canary: %s\n", ladle_error_message());
        exit(EXIT_FAILURE);
    }
    return t;
}

/* noinline: each fault keeps a frame of its own in the reports */
__attribute__((noinline)) static void canary_leak(void)
{
    ladle_tensor *t = new_tensor(5);
    ((double *)ladle_tensor_data(t))[0] = 1.0;
}

__attribute__((noinline)) static void canary_leak_in_init(void)
{
    ladle_tensor *t = new_tensor(7);
    ((double *)ladle_tensor_data(t))[0] = 2.0;
}

/* The profiling interface lets a program define MPI_Init and reach MPI's
 * through PMPI_Init; a leak made here is ladle's although its stack holds
 * MPI_Init. */
int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (strcmp(mode, "leak") == 0)
        canary_leak_in_init();
    return rc;
}

__attribute__((noinline)) static int64_t canary_read(void)
{
    ladle_tensor *t = new_tensor(3);
    const int64_t *shape = ladle_tensor_shape(t);
    ladle_tensor_destroy(&t);
    return *(const int64_t volatile *)shape;
}

__attribute__((noinline)) static double canary_oob(void)
{
    ladle_tensor *t = new_tensor(5);
    double volatile *d = ladle_tensor_data(t);
    d[5] = 3.0;
    double v = d[0];
    ladle_tensor_destroy(&t);
    return v;
}

__attribute__((noinline)) static double canary_device(void)
{
    ladle_tensor *t = NULL;
    int64_t shape[1] = {4};
    double host[4] = {1, 2, 3, 4};
    if (ladle_tensor_create(LADLE_F64, LADLE_GUARDED, 1, shape, &t) != LADLE_OK ||
        ladle_tensor_write(t, host) != LADLE_OK) {
        fprintf(stderr, "canary: %s\n", ladle_error_message());
        exit(EXIT_FAILURE);
    }
    double v = ((const double volatile *)ladle_tensor_data(t))[1]; /* around the backend */
    ladle_tensor_destroy(&t);
    return v;
}

__attribute__((noinline)) static int canary_ub(int n)
{
    int big = INT_MAX - 1;
    return big + n;
}

int main(int argc, char **argv)
{
    mode = argc > 1 ? argv[1] : "";
    MPI_Init(&argc, &argv);
    int rank = 0, v = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (strcmp(mode, "leak") == 0) {
        canary_leak();
    } else if (strcmp(mode, "read") == 0) {
        v = (int)canary_read();
    } else if (strcmp(mode, "oob") == 0) {
        v = (int)canary_oob();
    } else if (strcmp(mode, "device") == 0) {
        v = (int)canary_device();
    } else if (strcmp(mode, "ub") == 0) {
        v = canary_ub(argc + 1);
    } else {
        if (rank == 0)
            fprintf(stderr, "usage: canary leak|read|oob|ub|device\n");
        MPI_Finalize();
        return 2;
    }
    if (rank == 0)
        printf("canary %s: made its fault (%d)\n", mode, v);
    MPI_Finalize();
    return 0;
}
