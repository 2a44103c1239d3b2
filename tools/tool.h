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
