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
#include <string.h>

#include "primitives/pair.h"
#include "primitives/primitives_impl.h"

#include "src/comm/coll.h"
#include "src/core/tags.h"

_Static_assert(LADLE_COLL_MAX_CHUNKS <= LADLE_TAG_CHUNKS, "a group has a tag per chunk");

static const ladle_op_vtable broadcast_vt = {.kind = LADLE_OP_BROADCAST, .name = "broadcast"};
static const ladle_op_vtable sum_reduce_vt = {.kind = LADLE_OP_SUM_REDUCE,
                                              .name = "sum-reduce"};

typedef struct pair_plan {
    const ladle_partition *small, *big;
    const int *source;  /* source[j]: the owner (small rank) of big rank j */
    const int *to_comm; /* root rank -> op communicator rank */
    const int64_t *n;   /* n[i]: the elements of owner i's block */
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
    if (pp->small->rank >= 0 && pp->n[pp->small->rank] > 0) {
        int i = pp->small->rank;
        int64_t n = pp->n[i];
        g = group_of(pp, i, members, &self);
        ladle_coll_shape sb = ladle__coll_shape(g, n, pp->esize, 0);
        ladle_coll_shape sr = ladle__coll_shape(g, n, pp->esize, 1);
        int tag = ladle__tag_pair_group(i);
        ladle__coll_bcast(bcast, members, g, 0, sb, X, Y, n, tag, NULL, NULL);
        if (self)
            ladle_sched_copy(bcast, LADLE_BOX_COPY, X, Y, n);
        ladle__coll_reduce(reduce, members, g, 0, sr, self, X, Y, n, tag, 0, NULL, NULL);
    }
    if (pp->big->rank >= 0) {
        int k = pp->source[pp->big->rank];
        int64_t n = pp->n[k];
        if (n == 0 || pp->small->ranks[k] == pp->big->ranks[pp->big->rank])
            return; /* nothing to move, or its own owner: handled above */
        g = group_of(pp, k, members, &self);
        int pos = position(members, g, my_comm);
        ladle_coll_shape sb = ladle__coll_shape(g, n, pp->esize, 0);
        ladle_coll_shape sr = ladle__coll_shape(g, n, pp->esize, 1);
        int tag = ladle__tag_pair_group(k);
        ladle__coll_bcast(bcast, members, g, pos, sb, X, Y, n, tag, NULL, NULL);
        ladle__coll_reduce(reduce, members, g, pos, sr, 1, X, Y, n, tag, 0, NULL, NULL);
    }
}

/* Every receiver's block must have its owner's shape; n[i] gets owner i's
 * volume. The checks use only global facts, so every rank agrees. */
static ladle_status owner_blocks(const ladle_layout *ls, const ladle_layout *lb,
                                 const int *source, int64_t *n, const char *func)
{
    const ladle_partition *small = ladle_layout_partition(ls), *big = ladle_layout_partition(lb);
    int64_t a[LADLE_MAX_NDIM], b[LADLE_MAX_NDIM];
    char sa[128], sb[128];
    if (ladle_layout_ndim(ls) != ladle_layout_ndim(lb))
        return ladle__raise(LADLE_ERR_SHAPE, func, "the blocks have %d and %d dimensions",
                            ladle_layout_ndim(ls), ladle_layout_ndim(lb));
    int nd = ladle_layout_ndim(ls);
    for (int i = 0; i < small->size; i++)
        n[i] = ladle_layout_local_volume(ls, i);
    for (int j = 0; j < big->size; j++) {
        ladle_layout_box(lb, j, NULL, b);
        ladle_layout_box(ls, source[j], NULL, a);
        for (int d = 0; d < nd; d++)
            if (a[d] != b[d])
                return ladle__raise(LADLE_ERR_SHAPE, func,
                                    "rank %d's block %s differs from its partner's %s", j,
                                    ladle__fmt_shape64(sb, sizeof sb, nd, b),
                                    ladle__fmt_shape64(sa, sizeof sa, nd, a));
    }
    return LADLE_OK;
}

/* The pair over layouts lx (on p_x) and ly (on p_y). `pre` is a failure
 * the caller found already (lx, ly may then be NULL): the ranks still meet
 * in the agreement, so every rank fails alike. */
static ladle_status pair_core(const ladle_partition *p_x, const ladle_partition *p_y,
                              const ladle_layout *lx, const ladle_layout *ly, ladle_dtype dtype,
                              ladle_device device, unsigned flags, int reduce, ladle_status pre,
                              const int *given, ladle_op **out, const char *func)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle_op *op = NULL;
    int *source = NULL, *to_comm = NULL, *members = NULL;
    int64_t *n = NULL;
    MPI_Comm comm = MPI_COMM_NULL;
    uint64_t h = LADLE_HASH_INIT;
    const unsigned allowed = LADLE_TRANSPOSE_SRC | LADLE_TRANSPOSE_DEST | LADLE_CHECKED;

    LADLE_CHECK(ladle__partitions_compatible(p_x, p_y), LADLE_ERR_PARTITION,
                "p_x and p_y were made from different parent communicators");
    const ladle_partition *small = reduce ? p_y : p_x, *big = reduce ? p_x : p_y;
    int t_small = (flags & (reduce ? LADLE_TRANSPOSE_DEST : LADLE_TRANSPOSE_SRC)) != 0;
    int t_big = (flags & (reduce ? LADLE_TRANSPOSE_SRC : LADLE_TRANSPOSE_DEST)) != 0;

    if (pre != LADLE_OK)
        local = pre;
    else if (!ladle__is_real(dtype))
        local = ladle__raise(LADLE_ERR_DTYPE, func, "dtype %s is not f32 or f64",
                             ladle_dtype_name(dtype));
    else if (flags & ~allowed)
        local = ladle__raise(LADLE_ERR_ARG, func, "unknown flags 0x%x", flags & ~allowed);
    source = ladle__calloc((size_t)big->size, sizeof(int));
    members = ladle__calloc((size_t)big->size + 1, sizeof(int));
    n = ladle__calloc((size_t)small->size, sizeof(int64_t));
    if (local == LADLE_OK && (source == NULL || members == NULL || n == NULL))
        local = ladle__raise(LADLE_ERR_ALLOC, func, "out of memory");
    if (local == LADLE_OK && given != NULL)
        memcpy(source, given, sizeof(int) * (size_t)big->size);
    else if (local == LADLE_OK)
        local = ladle__pairing(small, t_small, big, t_big, source, reduce, func);
    if (local == LADLE_OK)
        local = owner_blocks(reduce ? ly : lx, reduce ? lx : ly, source, n, func);
    if (local == LADLE_OK &&
        (int64_t)small->size * LADLE_TAG_CHUNKS > ladle__tag_ub(MPI_COMM_WORLD))
        local = ladle__raise(LADLE_ERR_UNSUPPORTED, func,
                             "%d groups need more message tags than this MPI offers",
                             small->size);
    if (local == LADLE_OK)
        local = ladle__op_new(reduce ? &sum_reduce_vt : &broadcast_vt, dtype, device, flags, lx, ly,
                              &op, func);
    /* every member reaches the agreement, whatever failed above */
    st = ladle__op_comm(p_x, p_y, &comm, &to_comm);
    if (st == LADLE_OK && local == LADLE_OK && comm != MPI_COMM_NULL) {
        int my_comm;
        MPI_Comm_rank(comm, &my_comm);
        pair_plan pp = {small, big, source, to_comm, n, ladle_dtype_size(dtype)};
        plan_pair(&pp, reduce ? op->adj : op->fwd, reduce ? op->fwd : op->adj, members,
                  my_comm);
    }
    if (local == LADLE_OK) {
        h = ladle__layout_hash(h, lx);
        h = ladle__layout_hash(h, ly);
        h = ladle__prim_hash(h, dtype, device, flags);
    }
    st = ladle__prim_finish(st, &op, &comm, &to_comm, local, h, out, func);
fail:
    ladle__free(source);
    ladle__free(members);
    ladle__free(n);
    return st;
}

ladle_status ladle__pair_create_layouts(const ladle_layout *lx, const ladle_layout *ly,
                                        ladle_dtype dtype, ladle_device device, unsigned flags,
                                        int reduce, ladle_op **out, const char *func)
{
    ladle_status st = LADLE_OK;
    LADLE_CHECK(out != NULL, LADLE_ERR_NULL, "output handle is NULL");
    LADLE_CHECK(lx != NULL && ly != NULL, LADLE_ERR_NULL, "a layout is NULL");
    st = pair_core(ladle_layout_partition(lx), ladle_layout_partition(ly), lx, ly, dtype, device,
                   flags, reduce, LADLE_OK, NULL, out, func);
fail:
    return st;
}

ladle_status ladle__pair_create_mapped(const ladle_layout *lx, const ladle_layout *ly,
                                       const int *source, ladle_dtype dtype, ladle_device device,
                                       int reduce, ladle_op **out, const char *func)
{
    ladle_status st = LADLE_OK;
    LADLE_CHECK(out != NULL, LADLE_ERR_NULL, "output handle is NULL");
    LADLE_CHECK(lx != NULL && ly != NULL && source != NULL, LADLE_ERR_NULL, "NULL argument");
    st = pair_core(ladle_layout_partition(lx), ladle_layout_partition(ly), lx, ly, dtype, device, 0,
                   reduce, LADLE_OK, source, out, func);
fail:
    return st;
}

ladle_status ladle__pair_create(const ladle_broadcast_desc *d, const ladle_partition *p_x,
                                const ladle_partition *p_y, ladle_dtype dtype,
                                ladle_device device, int reduce, ladle_op **out,
                                const char *func)
{
    ladle_status st = LADLE_OK, local;
    ladle_layout *lx = NULL, *ly = NULL;
    int64_t n = 0;
    /* the descriptor is the caller's argument: its errors name func */
    if (d == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "%s is NULL", "d");
    LADLE_CALL(ladle__check_size(func, "d", d->size, sizeof *d));
    int ndim = d->ndim;
    const int64_t *shape = d->shape;
    unsigned flags = d->flags;
    LADLE_CHECK(out != NULL, LADLE_ERR_NULL, "output handle is NULL");
    LADLE_CHECK(p_x != NULL && p_y != NULL, LADLE_ERR_NULL, "%s is NULL",
                p_x == NULL ? "p_x" : "p_y");
    local = ladle__check_shape(func, ndim, shape, &n);
    if (local == LADLE_OK)
        local = ladle_layout_create_block(p_x, ndim, shape, &lx);
    if (local == LADLE_OK)
        local = ladle_layout_create_block(p_y, ndim, shape, &ly);
    st = pair_core(p_x, p_y, lx, ly, dtype, device, flags, reduce, local, NULL, out, func);
fail:
    ladle_layout_destroy(&lx);
    ladle_layout_destroy(&ly);
    return st;
}

void ladle_broadcast_desc_init(ladle_broadcast_desc *d, int ndim, const int64_t shape[])
{
    if (!LADLE_DESC_START(d))
        return;
    d->ndim = ndim;
    d->shape = shape;
}

ladle_status ladle_broadcast_create(const ladle_broadcast_desc *d,
                                    const ladle_partition *p_x, const ladle_partition *p_y,
                                    ladle_dtype dtype, ladle_device device, ladle_op **op)
{
    return ladle__pair_create(d, p_x, p_y, dtype, device, 0, op, __func__);
}
