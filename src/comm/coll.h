/*
 * Collective plans built from point-to-point steps: tree broadcast and
 * reduction, all-reduce (recursive doubling, tree, or ring), and the
 * DistDL pairing of partitions for broadcast and sum-reduce. Planned on
 * ladle's own buffers, so a call never allocates, and summed in a fixed
 * order, so results never depend on timing.
 */
#ifndef LADLE_COLL_H
#define LADLE_COLL_H

#include "src/comm/schedule.h"

#define LADLE_COLL_MAX_CHUNKS 64

typedef struct ladle_coll_shape {
    int chain;   /* 1: a pipeline chain, 0: a binomial tree */
    int nchunks; /* pieces the message is cut into, for pipelining */
} ladle_coll_shape;

/* The tree and chunking for a group of g ranks moving n elements. */
ladle_coll_shape ladle__coll_shape(int g, int64_t n, size_t esize, int reduce);

/* Broadcast over members[0..g-1] (comm ranks, members[0] the root) from the
 * root's src into every other member's dst; pos is the caller's position.
 * root_after[c] (optional) must finish before the root sends chunk c;
 * recv_after[c] (optional) before a member receives chunk c. */
void ladle__coll_bcast(ladle_sched *s, const int *members, int g, int pos,
                       ladle_coll_shape sh, ladle_ref src, ladle_ref dst, int64_t n,
                       int tagbase, const int *root_after, const int *recv_after);

/* Sum the members' src into the root's dst. Members other than the root
 * always contribute; the root contributes its src when has_own. With
 * alias_safe the root's dst may be its src. root_done[c] (root) and sent[c]
 * (others) receive the step after which chunk c is done (may be NULL). */
void ladle__coll_reduce(ladle_sched *s, const int *members, int g, int pos,
                        ladle_coll_shape sh, int has_own, ladle_ref src, ladle_ref dst,
                        int64_t n, int tagbase, int alias_safe, int *root_done, int *sent);

/* dst = the sum of every member's src, bitwise equal on all members; dst may
 * be src. Uses tags from tagbase up to tagbase + 2 * g * 16. */
void ladle__coll_allreduce(ladle_sched *s, const int *members, int g, int pos,
                           ladle_ref src, ladle_ref dst, int64_t n, int tagbase);

/* For a broadcast from partition `small` (the owners) onto `big`, the small
 * rank whose block each big rank receives (DistDL's rules; see
 * primitives.h). Raises LADLE_ERR_PARTITION for an illegal pair, worded for
 * `verb` ("broadcast" or "sum-reduce"). */
ladle_status ladle__pairing(const ladle_partition *small, int transpose_small,
                            const ladle_partition *big, int transpose_big, int *source,
                            int reduce, const char *func);

#endif /* LADLE_COLL_H */
