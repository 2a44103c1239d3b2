/*
 * ladle/checkpoint.h - save and restore training state as *global* tensors.
 *
 * A checkpoint holds every parameter of a network as its global tensor, the
 * layers' buffers (batch norm's running statistics), the optimizer's state
 * (also global) and step count, and a few integers of the caller's (epoch,
 * step, seed...). Since nothing in it depends on the layout, a checkpoint
 * written by a network on 4 ranks loads into the same architecture on 1
 * rank, or on 6 ranks laid out another way; with the same data order and
 * seeds, training then continues exactly as if it had never stopped.
 *
 * The file (native byte order, documented in docs/training.md): a header
 * ("LADLECKP", version, dtype, counts, the caller's integers), one record
 * per tensor (kind, shape, values) and a trailer ("LADLEEND", the byte count
 * and a 64-bit FNV-1a hash of everything before it). It is written to
 * path.tmp and renamed, so a crash leaves the previous file whole; a torn,
 * truncated or altered file fails the size or hash check and is refused.
 *
 * Both calls are collective over comm, the communicator the network's
 * ranks belong to (for a network of sequential layers any communicator:
 * every rank holds everything). Rank 0 of comm writes and reads the file.
 */
#ifndef LADLE_CHECKPOINT_H
#define LADLE_CHECKPOINT_H

#include <mpi.h>

#include "core.h"
#include "network.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most caller integers a checkpoint keeps. */
#define LADLE_CHECKPOINT_MAX_META 16

/* Save net (and opt, which may be NULL) with nmeta integers. Returns
 * LADLE_ERR_NULL, LADLE_ERR_ARG, LADLE_ERR_IO (on every rank), LADLE_ERR_MPI,
 * LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_checkpoint_save(const char *path, MPI_Comm comm,
                                             const ladle_network *net,
                                             const ladle_optimizer *opt, int nmeta,
                                             const int64_t meta[]);

/* Load into net (and opt, which may be NULL) and return the caller's
 * integers (up to max_meta of them; *nmeta gets their number). Returns
 * LADLE_ERR_IO for a missing, torn, truncated or foreign file and
 * LADLE_ERR_SHAPE for one of another architecture (on every rank, with
 * nothing changed), and the codes of ladle_checkpoint_save. */
LADLE_API ladle_status ladle_checkpoint_load(const char *path, MPI_Comm comm,
                                             ladle_network *net, ladle_optimizer *opt,
                                             int max_meta, int64_t meta[], int *nmeta);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_CHECKPOINT_H */
