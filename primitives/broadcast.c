/*
 * Broadcast P_x -> P_y (and the pair machinery SumReduce shares).
 *
 * Each owner's block goes to the group of destination ranks that DistDL's
 * rules pair with it (ladle__pairing). A group is the owner followed by its
 * receivers in P_y rank order; an owner that is also one of its own
 * receivers copies locally. Groups move their block down a binomial tree
 * (small blocks) or a chunked pipeline chain (large ones); the adjoint runs
 * the same groups upwards as a sum.
 */
#include "pair.h"

#include "../src/coll.h"

/* Tags per group: one per chunk. */
#define GROUP_TAGS LADLE_COLL_MAX_CHUNKS

static const ladle_op_vtable broadcast_vt = {.name = "broadcast"};
static const ladle_op_vtable sum_reduce_vt = {.name = "sum-reduce"};

typedef struct pair_plan {
    const ladle_partition *small, *big;
    const int *source;  /* source[j]: the owner (small rank) of big rank j */
    const int *to_comm; /* root rank -> op communicator rank */
    int64_t n;
    size_t esize;
} pair_plan;

/* Members of group i (comm ranks, owner first) and whether the owner is
 * its own receiver. Returns the group size. */
static int group_of(const pair_plan *pp, int i, int *members, int *self)
{
    int g = 0, owner = pp->small->ranks[i];
    members[g++] = pp->to_comm[owner];
    *self = 0;
    for (int j = 0; j < pp->big->size; j++) {
        if (pp->source[j] != i)
            continue;
        if (pp->big->ranks[j] == owner)
            *self = 1;
        else
            members[g++] = pp->to_comm[pp->big->ranks[j]];
    }
    return g;
}

static int position(const int *members, int g, int comm_rank)
{
    for (int k = 0; k < g; k++)
        if (members[k] == comm_rank)
            return k;
    return -1;
}

/* bcast: X on owners -> Y on receivers. reduce: X on receivers -> Y on owners. */
static void plan_pair(const pair_plan *pp, ladle_sched *bcast, ladle_sched *reduce,
                      int *members, int my_comm)
{
    ladle_ref X = ladle_ref_make(LADLE_BUF_X, 0), Y = ladle_ref_make(LADLE_BUF_Y, 0);
    int self = 0, g;
    if (pp->n == 0)
        return;
    if (pp->small->rank >= 0) {
        int i = pp->small->rank;
        g = group_of(pp, i, members, &self);
        ladle_coll_shape sb = ladle__coll_shape(g, pp->n, pp->esize, 0);
        ladle_coll_shape sr = ladle__coll_shape(g, pp->n, pp->esize, 1);
        ladle__coll_bcast(bcast, members, g, 0, sb, X, Y, pp->n, i * GROUP_TAGS, NULL,
                          NULL);
        if (self)
            ladle_sched_copy(bcast, LADLE_BOX_COPY, X, Y, pp->n);
        ladle__coll_reduce(reduce, members, g, 0, sr, self, X, Y, pp->n, i * GROUP_TAGS, 0,
                           NULL, NULL);
    }
    if (pp->big->rank >= 0) {
        int k = pp->source[pp->big->rank];
        if (pp->small->ranks[k] == pp->big->ranks[pp->big->rank])
            return; /* its own owner: handled above */
        g = group_of(pp, k, members, &self);
        int pos = position(members, g, my_comm);
        ladle_coll_shape sb = ladle__coll_shape(g, pp->n, pp->esize, 0);
        ladle_coll_shape sr = ladle__coll_shape(g, pp->n, pp->esize, 1);
        ladle__coll_bcast(bcast, members, g, pos, sb, X, Y, pp->n, k * GROUP_TAGS, NULL,
                          NULL);
        ladle__coll_reduce(reduce, members, g, pos, sr, 1, X, Y, pp->n, k * GROUP_TAGS, 0,
                           NULL, NULL);
    }
}

static ladle_status check_common(const char *func, int ndim, const int64_t *shape,
                                 ladle_dtype dtype, unsigned flags, unsigned allowed,
                                 int64_t *n)
{
    if (!ladle__is_real(dtype))
        return ladle__raise(LADLE_ERR_DTYPE, func, "dtype %s is not f32 or f64",
                            ladle_dtype_name(dtype));
    if (flags & ~allowed)
        return ladle__raise(LADLE_ERR_ARG, func, "unknown flags 0x%x", flags & ~allowed);
    return ladle__check_shape(func, ndim, shape, n);
}

ladle_status ladle__pair_create(const ladle_partition *p_x, const ladle_partition *p_y,
                                int ndim, const int64_t *shape, ladle_dtype dtype,
                                unsigned flags, int reduce, ladle_op **out,
                                const char *func)
{
    ladle_status st = LADLE_OK, local;
    ladle_op *op = NULL;
    ladle_layout *lx = NULL, *ly = NULL;
    int *source = NULL, *to_comm = NULL, *members = NULL;
    MPI_Comm comm = MPI_COMM_NULL;
    int64_t n = 0;
    uint64_t h = LADLE_HASH_INIT;
    const unsigned allowed = LADLE_TRANSPOSE_SRC | LADLE_TRANSPOSE_DEST | LADLE_CHECKED;

    LADLE_CHECK(out != NULL, LADLE_ERR_NULL, "output handle is NULL");
    LADLE_CHECK(p_x != NULL && p_y != NULL, LADLE_ERR_NULL, "%s is NULL",
                p_x == NULL ? "p_x" : "p_y");
    LADLE_CHECK(ladle__partitions_compatible(p_x, p_y), LADLE_ERR_PARTITION,
                "p_x and p_y were made from different parent communicators");
    const ladle_partition *small = reduce ? p_y : p_x, *big = reduce ? p_x : p_y;
    int t_small = (flags & (reduce ? LADLE_TRANSPOSE_DEST : LADLE_TRANSPOSE_SRC)) != 0;
    int t_big = (flags & (reduce ? LADLE_TRANSPOSE_SRC : LADLE_TRANSPOSE_DEST)) != 0;

    local = check_common(func, ndim, shape, dtype, flags, allowed, &n);
    source = ladle__calloc((size_t)big->size, sizeof(int));
    members = ladle__calloc((size_t)big->size + 1, sizeof(int));
    if (local == LADLE_OK && (source == NULL || members == NULL))
        local = ladle__raise(LADLE_ERR_ALLOC, func, "out of memory");
    if (local == LADLE_OK)
        local = ladle__pairing(small, t_small, big, t_big, source, reduce, func);
    if (local == LADLE_OK &&
        (int64_t)small->size * GROUP_TAGS > ladle__tag_ub(MPI_COMM_WORLD))
        local = ladle__raise(LADLE_ERR_UNSUPPORTED, func,
                             "%d groups need more message tags than this MPI offers",
                             small->size);
    if (local == LADLE_OK)
        local = ladle_layout_create_block(p_x, ndim, shape, &lx);
    if (local == LADLE_OK)
        local = ladle_layout_create_block(p_y, ndim, shape, &ly);
    if (local == LADLE_OK)
        local = ladle__op_new(reduce ? &sum_reduce_vt : &broadcast_vt, dtype, flags, lx, ly,
                              &op);
    /* every member reaches the agreement, whatever failed above */
    LADLE_CALL(ladle__op_comm(p_x, p_y, &comm, &to_comm));
    if (local == LADLE_OK && comm != MPI_COMM_NULL) {
        int my_comm;
        MPI_Comm_rank(comm, &my_comm);
        pair_plan pp = {small, big, source, to_comm, n, ladle_dtype_size(dtype)};
        plan_pair(&pp, reduce ? op->adj : op->fwd, reduce ? op->fwd : op->adj, members,
                  my_comm);
    }
    if (local == LADLE_OK) {
        h = ladle__layout_hash(h, lx);
        h = ladle__layout_hash(h, ly);
        h = ladle__hash(h, &dtype, sizeof dtype);
        h = ladle__hash(h, &flags, sizeof flags);
    }
    st = ladle__op_finish(&op, &comm, local, h, out, func);
fail:
    if (comm != MPI_COMM_NULL)
        MPI_Comm_free(&comm);
    ladle_op_destroy(&op);
    ladle_layout_destroy(&lx);
    ladle_layout_destroy(&ly);
    ladle__free(source);
    ladle__free(members);
    ladle__free(to_comm);
    return st;
}

ladle_status ladle_broadcast_create(const ladle_partition *p_x, const ladle_partition *p_y,
                                    int ndim, const int64_t shape[], ladle_dtype dtype,
                                    unsigned flags, ladle_op **op)
{
    return ladle__pair_create(p_x, p_y, ndim, shape, dtype, flags, 0, op, __func__);
}
