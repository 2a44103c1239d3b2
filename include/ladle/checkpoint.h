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
 * path.tmp, synced to the disk and renamed, so a crash or a failed write
 * leaves the previous file whole (and no path.tmp behind); a torn,
 * truncated or altered file fails the size or hash check and is refused.
 *
 * The calls are collective over comm, the communicator the network's
 * ranks belong to (for a network of sequential layers any communicator:
 * every rank holds everything). Each call talks on its own duplicate of
 * comm (MPI_ERRORS_RETURN, freed before it returns), so it never meets the
 * caller's messages, and sends payloads in chunks below 2 GiB, so no shard
 * is too large. Like any collective over comm, not for two threads at once
 * on the same comm. Rank 0 of comm writes and reads the file;
 * every rank returns the same status, with the message of the rank that
 * found the problem (other ranks prefix it with "on rank R:"). Everything
 * that can be checked without the file is checked before the first message
 * and before anything is written. An I/O failure is LADLE_ERR_IO with the
 * step that failed (create, write, flush, close, rename, open, read) and
 * the system's reason ("No space left on device", "File too large",
 * "Permission denied", "Not a directory", "Is a directory", ...).
 */
#ifndef LADLE_CHECKPOINT_H
#define LADLE_CHECKPOINT_H

#include <mpi.h>

#include "comm.h"
#include "core.h"
#include "graph.h"
#include "network.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most caller integers a checkpoint keeps. */
#define LADLE_CHECKPOINT_MAX_META 16

/* Save net (and opt, which may be NULL) with nmeta integers. opt must hold
 * exactly the network's parameters, the same tensors in the network's
 * order (as ladle_optimizer_add_network adds them): an optimizer of no
 * parameters, of some, or of others is refused rather than saved as if
 * there were none. Collective over comm.
 * Returns LADLE_ERR_NULL, LADLE_ERR_ARG (nmeta outside 0 to
 * LADLE_CHECKPOINT_MAX_META, an optimizer that does not hold the network's
 * parameters, comm MPI_COMM_NULL's handle), LADLE_ERR_SHAPE (a tensor too large
 * for a file),
 * LADLE_ERR_IO (path a directory, its directory missing or not writable,
 * the disk full...; an existing file at path is then untouched),
 * LADLE_ERR_MPI, LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_checkpoint_save(const char *path, ladle_comm comm,
                                             const ladle_network *net,
                                             const ladle_optimizer *opt, int nmeta,
                                             const int64_t meta[]);

/* Load into net (and opt, which may be NULL, and otherwise must hold the
 * network's parameters as for ladle_checkpoint_save) and return the
 * caller's integers (up to max_meta of them; *nmeta gets their number).
 * Collective over comm.
 * Returns LADLE_ERR_IO for a missing, unreadable, torn, truncated or
 * foreign file or one that is a directory, LADLE_ERR_SHAPE for one of
 * another architecture (on every rank, with nothing changed),
 * LADLE_ERR_ARG (max_meta negative, or room for integers at NULL), and
 * the codes of ladle_checkpoint_save. */
LADLE_API ladle_status ladle_checkpoint_load(const char *path, ladle_comm comm,
                                             ladle_network *net, ladle_optimizer *opt,
                                             int max_meta, int64_t meta[], int *nmeta);

/* The same for a finalized graph network (ladle/graph.h): its layers'
 * parameters and buffers in the graph's topological order (the order of
 * ladle_graph_param, which depends on the graph's structure only, not on
 * its layouts), so a graph saved on one layout loads into the same graph
 * built on any other. opt must hold the graph's parameters in that order
 * (ladle_optimizer_add_graph). The file is the chain's format.
 * Collective over comm. Returns the
 * codes of ladle_checkpoint_save and ladle_checkpoint_load, and
 * LADLE_ERR_STATE for a graph that is not finalized. */
LADLE_API ladle_status ladle_checkpoint_save_graph(const char *path, ladle_comm comm,
                                                   const ladle_graph *g,
                                                   const ladle_optimizer *opt, int nmeta,
                                                   const int64_t meta[]);
LADLE_API ladle_status ladle_checkpoint_load_graph(const char *path, ladle_comm comm,
                                                   ladle_graph *g, ladle_optimizer *opt,
                                                   int max_meta, int64_t meta[],
                                                   int *nmeta);

/* Only the caller's integers of the checkpoint at path (up to max_meta of
 * them into meta; *nmeta gets their number), after the same checks of the
 * file as ladle_checkpoint_load, whatever network it was written from: so a
 * caller can compare what the checkpoint says it is (an epoch, a seed, a
 * model) with what it was asked to do before loading, and say what differs.
 * Rank 0 of comm reads the file; every rank gets the integers or the same
 * status. Collective over comm. Returns LADLE_ERR_NULL, LADLE_ERR_ARG,
 * LADLE_ERR_IO (missing, unreadable, torn, truncated or foreign),
 * LADLE_ERR_MPI, LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_checkpoint_read_meta(const char *path, ladle_comm comm,
                                                  int max_meta, int64_t meta[], int *nmeta);

/* Check, before any training starts, that ladle_checkpoint_save could
 * write path: path is not a directory, its directory exists and is
 * writable, and path.tmp can be created (it is removed again; nothing is
 * written at path itself). A tool calls it once at start-up so that a bad
 * path fails in the first second instead of after an epoch; a disk that
 * fills up later is still reported by the save. Rank 0 of comm tries;
 * every rank gets its verdict. Collective over comm. Returns LADLE_ERR_NULL,
 * LADLE_ERR_ARG (comm MPI_COMM_NULL's handle), LADLE_ERR_IO (with the reason),
 * LADLE_ERR_MPI. */
LADLE_API ladle_status ladle_checkpoint_check_path(const char *path, ladle_comm comm);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_CHECKPOINT_H */
