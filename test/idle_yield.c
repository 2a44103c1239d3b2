/* A test-only shim for oversubscribed runs under MPICH over UCX (Debian's
 * MPICH: ch4:ucx). test/run.sh preloads it into the ranks of a launch that
 * has more ranks than the machine has cores.
 *
 * MPICH waits for a message by polling UCX in a loop and never gives the
 * core away; ch4 has no setting that makes it yield (MPIR_CVAR_POLLS_BEFORE_YIELD
 * is ch3's). With 12 ranks on 2 cores every step of a collective then waits
 * for a time slice of the scheduler: an 8-byte MPI_Allreduce took 62 ms at 12
 * ranks and 4.3 ms at 4 here, and a test that agrees on each assertion spent
 * its time in those waits (test_dist_conv: 27 s at 12 ranks; 3.5 s with this).
 *
 * The wrapper calls UCX's progress and, when it found nothing to do, yields
 * the core, which is what Open MPI's mpi_yield_when_idle does. It changes
 * when a rank runs, never what it computes or sends. A process that does not
 * use UCX never calls it. Not for timings: the benchmarks run one rank per
 * core and do not load it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

struct ucp_worker;
unsigned ucp_worker_progress(struct ucp_worker *worker);

typedef unsigned (*progress_fn)(struct ucp_worker *);

/* UCX's own progress, looked up once when the shim is loaded (MPICH links
 * UCX, so it is there), before any rank can call it, and never written
 * again. (A lookup per call cost a
 * quarter more time per 12-rank all-reduce: 0.19-0.29 ms against
 * 0.15-0.19.) */
static progress_fn real_progress;

__attribute__((constructor)) static void find_progress(void)
{
    real_progress = (progress_fn)dlsym(RTLD_NEXT, "ucp_worker_progress");
}

unsigned ucp_worker_progress(struct ucp_worker *worker)
{
    /* UCX loaded later, by dlopen, was not there to be found at load time */
    progress_fn real = real_progress != NULL
                           ? real_progress
                           : (progress_fn)dlsym(RTLD_NEXT, "ucp_worker_progress");
    if (real == NULL) {
        fprintf(stderr, "idle_yield: ucp_worker_progress not found after the shim\n");
        abort();
    }
    unsigned events = real(worker);
    if (events == 0)
        sched_yield();
    return events;
}
