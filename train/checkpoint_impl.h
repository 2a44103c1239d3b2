/*
 * The checkpoint calls with the most bytes per message as a parameter: the
 * public ladle_checkpoint_save/load pass LADLE_MPI_CHUNK_BYTES, and a test
 * passes a few bytes so that a small checkpoint crosses many chunks.
 * chunk_bytes must be the same on every rank, from 1 to
 * LADLE_MPI_CHUNK_BYTES (else LADLE_ERR_ARG). Collective over comm, as the
 * public calls. Never installed.
 */
#ifndef LADLE_CHECKPOINT_IMPL_H
#define LADLE_CHECKPOINT_IMPL_H

#include "src/core/internal.h"

ladle_status ladle__checkpoint_save_chunked(const char *path, MPI_Comm comm,
                                            const ladle_network *net,
                                            const ladle_optimizer *opt, int nmeta,
                                            const int64_t meta[], int64_t chunk_bytes);
ladle_status ladle__checkpoint_load_chunked(const char *path, MPI_Comm comm,
                                            ladle_network *net, ladle_optimizer *opt,
                                            int max_meta, int64_t meta[], int *nmeta,
                                            int64_t chunk_bytes);

/* What a checkpoint holds: the layers of a network or a graph in their
 * order (the records follow it), their dtype, and the argument's name for
 * messages. ops NULL stands for a NULL argument. */
typedef struct ladle__model {
    int n;
    ladle_op *const *ops;
    ladle_dtype dtype;
    const char *what;
} ladle__model;

ladle_status ladle__checkpoint_save_model(const char *path, MPI_Comm comm, const ladle__model *m,
                                          const ladle_optimizer *opt, int nmeta,
                                          const int64_t meta[], int64_t chunk);
ladle_status ladle__checkpoint_load_model(const char *path, MPI_Comm comm, const ladle__model *m,
                                          ladle_optimizer *opt, int max_meta, int64_t meta[],
                                          int *nmeta, int64_t chunk);

/* The layers of a network (train/network.c), borrowed; *n their number. */
ladle_op *const *ladle__network_layers(const ladle_network *net, int *n);
/* After the layers' parameters were written (a checkpoint loaded): stages
 * 1 and 2 take their slices from them again. Local. */
ladle_status ladle__network_params_written(ladle_network *net);

#endif /* LADLE_CHECKPOINT_IMPL_H */
