/*
 * ladle - Linear-Algebraic Distributed LEarning.
 *
 * The one header a user includes. See README.md and docs/ for the guide;
 * every prototype below says what it computes, whether it is collective,
 * who owns what, and which status codes it returns.
 *
 * Collective or local. A call that says "Collective over X" must be made by
 * every rank of X, in the same order relative to the other collective calls
 * on X; ranks outside an op's partitions take part with zero-volume tensors.
 * "Local" calls never communicate and may be made by any rank alone.
 *
 * Threads. ladle keeps no global mutable state: every object is its own, and
 * the last error message is per thread (ladle_error_message reads the
 * calling thread's). So:
 *  - distinct objects may be used from distinct threads at once, as far as
 *    ladle is concerned, provided MPI allows those threads to communicate
 *    (below);
 *  - one object is not for two threads at once: not even two calls on one
 *    op (it owns its buffers), nor a call on an object while another thread
 *    destroys or changes it; read-only accessors of an object nobody changes
 *    are safe;
 *  - ladle_set_num_threads is process-wide (it is OpenBLAS's setting).
 *
 * MPI. ladle needs MPI initialised (MPI_Init or MPI_Init_thread) and not yet
 * finalised while any of its objects talks, and it calls MPI only from the
 * thread that calls ladle: it starts no threads of its own that do, and the
 * threads OpenBLAS starts for the CPU kernels never call MPI. The level it
 * needs therefore follows from the caller's threads:
 *  - ladle called from the main thread only: any level; MPI_Init's (often
 *    MPI_THREAD_SINGLE) serves, as in ladle's tests and tools. Strictly,
 *    MPI_THREAD_SINGLE promises MPI one thread in the process, which
 *    OpenBLAS's threads break in letter but not in effect, since they never
 *    call MPI; ask for MPI_THREAD_FUNNELED to be exact, or call
 *    ladle_set_num_threads(1);
 *  - ladle called from other threads, one at a time: MPI_THREAD_SERIALIZED;
 *  - ladle called from several threads at once (on distinct objects):
 *    MPI_THREAD_MULTIPLE.
 * ladle_partition_create, where ladle first meets MPI, checks what it can
 * without a message: LADLE_ERR_STATE when MPI is not initialised or already
 * finalised, LADLE_ERR_UNSUPPORTED when it is called from a thread other
 * than MPI's main thread below MPI_THREAD_SERIALIZED, and LADLE_ERR_MPI
 * when the process's MPI (or the mpi.h the caller was compiled with) is not
 * the one libladle was built with (ladle_mpi_library() names it).
 */
#ifndef LADLE_H
#define LADLE_H

#include "ladle/builder.h"
#include "ladle/check.h"
#include "ladle/checkpoint.h"
#include "ladle/layers.h"
#include "ladle/optim.h"
#include "ladle/core.h"
#include "ladle/comm.h"
#include "ladle/custom.h"
#include "ladle/deprecated.h"
#include "ladle/data.h"
#include "ladle/text.h"
#include "ladle/device.h"
#include "ladle/distributed.h"
#include "ladle/layout.h"
#include "ladle/memory.h"
#include "ladle/models.h"
#include "ladle/network.h"
#include "ladle/graph.h"
#include "ladle/op.h"
#include "ladle/partition.h"
#include "ladle/pipeline.h"
#include "ladle/primitives.h"
#include "ladle/tensor.h"

#endif /* LADLE_H */
