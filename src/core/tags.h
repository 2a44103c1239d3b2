/*
 * Every MPI message tag ladle uses, in one table. Never installed.
 *
 * Tags only have to differ between messages that may be in flight at once
 * between the same two ranks on the same communicator, and ladle gives each
 * of its users a private communicator: every partition root (a duplicate of
 * the user's), every operator (MPI_Comm_create_group over its ranks), every
 * pipeline and every checkpoint call (duplicates). So the values below are
 * grouped by the communicator they travel on; values on different
 * communicators may repeat. Within one operator only one schedule runs at a
 * time (the workspace is shared, and the split calls refuse a second start),
 * so its forward and adjoint may use the same tags.
 *
 * The smallest MPI_TAG_UB the standard allows is 32767; a plan that would
 * need a larger tag checks ladle__tag_ub() first (broadcast's groups, the
 * pipeline's microbatches).
 */
#ifndef LADLE_TAGS_H
#define LADLE_TAGS_H

/* ---- on a partition root (MPI_Comm_create_group's tag argument) ---- */

/* A partition's members make their communicator (src/core/partition.c). */
#define LADLE_TAG_PARTITION_COMM 7301
/* An operator's ranks make its communicator (src/op/op.c). */
#define LADLE_TAG_OP_COMM 7302

/* ---- on an operator's communicator: one schedule's messages ---- */

/* Tags a chunked message may take, one per chunk: a collective's pieces
 * (src/comm/coll.c, at most LADLE_COLL_MAX_CHUNKS) and an exchange's slabs
 * (src/comm/exchange.c). Each base below owns this many tags from it. */
#define LADLE_TAG_CHUNKS 64
/* All-sum-reduce (primitives/all_sum_reduce.c): one group per rank, tags
 * [0, 2 * 32 * 16) from src/comm/coll.c's all-reduce. */
#define LADLE_TAG_ALLREDUCE 0
/* Broadcast and sum-reduce (primitives/broadcast.c): owner i's group takes
 * [i, i + 1) * LADLE_TAG_CHUNKS, since a rank may be an owner in one group
 * and a receiver in another of the same schedule. */
static inline int ladle__tag_pair_group(int i) { return i * LADLE_TAG_CHUNKS; }
/* Repartition's box exchange (primitives/repartition.c), slab k at base + k. */
#define LADLE_TAG_REPARTITION (11 * LADLE_TAG_CHUNKS)
/* All-gather and reduce-scatter (primitives/all_gather.c): every pair of a
 * group exchanges one message each way, chunk c at base + c. */
#define LADLE_TAG_SHARD (12 * LADLE_TAG_CHUNKS)
/* Halo exchange's box exchange, forward and adjoint (primitives/halo_exchange.c). */
#define LADLE_TAG_HALO (13 * LADLE_TAG_CHUNKS)
/* Its wrap-around on periodic dimensions: shift k of 3^n (n wrapping
 * dimensions) is one more box exchange, slab j at the returned base + j;
 * the creation checks the largest against ladle__tag_ub(). */
static inline int ladle__tag_halo_wrap(int k) { return LADLE_TAG_HALO + (k + 1) * LADLE_TAG_CHUNKS; }

/* ---- on a pipeline's communicator (pipeline/pipeline_run.c) ---- */

/* The activation (backward 0) or gradient (backward 1) of microbatch mb of
 * m entering stage `stage`: unique per message of a step, tags [0, 2 m S). */
static inline int ladle__tag_pipe(int stage, int m, int mb, int backward)
{
    return 2 * (stage * m + mb) + backward;
}

/* ---- on a checkpoint call's communicator (train/checkpoint.c) ---- */

/* A shard's bytes, owner to rank 0, in chunks sent in order. */
#define LADLE_TAG_CHECKPOINT_DATA 7412

#endif /* LADLE_TAGS_H */
