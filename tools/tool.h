/*
 * Collective helpers of ladle's MPI tools: every rank reaches the same
 * verdict, and one rank says why. Each call here is collective over
 * MPI_COMM_WORLD.
 */
#ifndef LADLE_TOOLS_TOOL_H
#define LADLE_TOOLS_TOOL_H

#include <mpi.h>
#include <stdio.h>

#include "cli.h"

static inline int tool_rank(void)
{
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

/* End an MPI tool with rc, the verdict every rank has reached alike: call
 * it in place of MPI_Finalize and return what it returns from main. Only
 * rank 0 carries a failing status out. mpiexec reports it all the same
 * (MPICH's launcher returns the largest status, Open MPI's the first
 * non-zero one), and no other rank's non-zero exit can make Open MPI's
 * launcher tear the job down while rank 0's message is still on its way
 * (seen once in tool_errors.sh under load). */
static inline int tool_exit(int rc)
{
    int me = tool_rank();
    MPI_Finalize();
    return me == 0 ? rc : 0;
}

/* Count what ladle allocates on this thread from now on, for
 * tool_memory_line: the tracker, or NULL when it cannot be made (the line
 * is then left out). Local. */
static inline ladle_memory_tracker *tool_memory_start(void)
{
    ladle_memory_tracker *t = NULL;
    if (ladle_memory_tracker_create(&t) != LADLE_OK)
        return NULL;
    ladle_memory_track(t);
    return t;
}

/* The summary's memory line, printed by rank 0 unless quiet: each kind's
 * peak bytes per rank (the largest over the ranks), in MiB. Collective
 * over MPI_COMM_WORLD (every rank calls it, with a tracker or without). */
static inline void tool_memory_line(const ladle_memory_tracker *t, int quiet)
{
    ladle_memory_stats s;
    ladle_memory_stats_init(&s);
    int have = t != NULL && ladle_memory_report(t, &s) == LADLE_OK, all = 0;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all || ladle_memory_stats_max(&s, ladle_comm_of(MPI_COMM_WORLD)) != LADLE_OK ||
        quiet || tool_rank() != 0)
        return;
    printf("memory: peak per rank %.2f MiB (", (double)s.peak_total / 1048576.0);
    for (int k = 0; k < LADLE_MEM_KINDS; k++)
        printf("%s%s %.2f", k ? ", " : "", ladle_memory_kind_name((ladle_memory_kind)k),
               (double)s.peak[k] / 1048576.0);
    printf(")\n");
}

/* Stop counting and free the tracker once nothing it counted is left
 * (else it stays, for the frees still to come). Local. */
static inline void tool_memory_end(ladle_memory_tracker **t)
{
    ladle_memory_track(NULL);
    if (*t != NULL && ladle_memory_tracker_destroy(t) != LADLE_OK)
        *t = NULL;
}

/* The lowest rank on which st failed, the same on every rank, or -1 where
 * it failed on none. */
static inline int tool_first_failed(ladle_status st)
{
    int size, me = tool_rank(), first;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int mine = st == LADLE_OK ? size : me;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return first == size ? -1 : first;
}

/* 1 on every rank if st failed on any; the lowest failing rank prints
 * "tool: what: message" (ladle's message names the rank and the call). */
static inline int tool_failed(const char *tool, ladle_status st, const char *what)
{
    int first = tool_first_failed(st);
    if (first < 0)
        return 0;
    if (tool_rank() == first) {
        fprintf(stderr, "%s: %s: %s (%s)\n", tool, what, ladle_error_message(),
                ladle_status_name(st));
        fflush(stderr);
    }
    return 1;
}

/* Rank 0 checks that each of the n output paths (NULL entries skipped)
 * can be written, before any work starts; 1 on every rank if one cannot,
 * with rank 0's reason printed. (Checkpoints: ladle_checkpoint_check_path.) */
static inline int tool_outputs_ok(const char *tool, int n, const char *const *opt,
                                  const char *const *path)
{
    char why[CLI_WHY];
    int bad = 0;
    if (tool_rank() == 0)
        for (int i = 0; i < n && !bad; i++)
            if (path[i] && cli_output_ok(opt[i], path[i], why)) {
                fprintf(stderr, "%s: %s\n", tool, why);
                bad = 1;
            }
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return bad;
}

#endif /* LADLE_TOOLS_TOOL_H */
