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

/* 1 on every rank if st failed on any; the lowest failing rank prints
 * "tool: what: message" (ladle's message names the rank and the call). */
static inline int tool_failed(const char *tool, ladle_status st, const char *what)
{
    int size, me = tool_rank(), first;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int mine = st == LADLE_OK ? size : me;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == size)
        return 0;
    if (me == first) {
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
