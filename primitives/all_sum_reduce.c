/*
 * AllSumReduce over some axes of a partition: every group of ranks that
 * share their coordinates on the other axes ends with the group's sum.
 * Self-adjoint, so forward and adjoint run the same plan. Small blocks use
 * recursive doubling (or a reduce-then-broadcast tree when the group size
 * is not a power of two), large ones a chunked ring.
 */
#include <string.h>

#include "primitives/primitives_impl.h"
#include "src/comm/coll.h"
#include "src/core/tags.h"
#include "src/op/make.h"

static const ladle_op_vtable all_sum_reduce_vt = {.kind = LADLE_OP_ALL_SUM_REDUCE,
                                                  .name = "all-sum-reduce"};

/* This rank's group (partition ranks in row-major order of the reduced
 * coordinates) and its position in it. */
static int group_of(const ladle_partition *p, const int *reduced, int *members, int *pos)
{
    int c[LADLE_MAX_NDIM], ext[LADLE_MAX_NDIM], sub[LADLE_MAX_NDIM], nr = 0, g = 1;
    for (int d = 0; d < p->ndim; d++)
        if (reduced[d])
            ext[nr++] = p->shape[d], g *= p->shape[d];
    for (int k = 0; k < g; k++) {
        ladle__unravel(nr, ext, k, sub);
        for (int d = 0, q = 0; d < p->ndim; d++)
            c[d] = reduced[d] ? sub[q++] : p->coords[d];
        members[k] = ladle__ravel(p->ndim, p->shape, c);
        if (members[k] == p->rank)
            *pos = k;
    }
    return g;
}

/* The op over layout l (on p): each rank's block is its box in l, the same
 * shape across every group (checked from global facts). pre: a failure the
 * caller already found; the members still meet in the agreement. */
static ladle_status asr_core(const ladle_partition *p, const int *reduced, const ladle_layout *l,
                             ladle_dtype dtype, ladle_device device, unsigned flags,
                             ladle_status pre, ladle_op **out, const char *func)
{
    ladle_status st = LADLE_OK, local = pre;
    ladle_op *op = NULL;
    int *to_comm = NULL, *members = NULL;
    MPI_Comm comm = MPI_COMM_NULL;
    uint64_t h = LADLE_HASH_INIT;
    int64_t a[LADLE_MAX_NDIM], b[LADLE_MAX_NDIM];

    if (local == LADLE_OK) {
        members = ladle__calloc((size_t)p->size + 1, sizeof(int));
        if (members == NULL)
            local = ladle__raise(LADLE_ERR_ALLOC, func, "out of memory");
    }
    /* every group's members hold blocks of one shape */
    for (int r = 0; local == LADLE_OK && r < p->size; r++) {
        ladle_partition q = *p;
        int pos = 0;
        ladle__unravel(p->ndim, p->shape, r, q.coords);
        q.rank = r;
        int g = group_of(&q, reduced, members, &pos);
        ladle_layout_box(l, r, NULL, a);
        for (int k = 0; k < g && local == LADLE_OK; k++) {
            ladle_layout_box(l, members[k], NULL, b);
            for (int d = 0; d < l->ndim; d++)
                if (a[d] != b[d])
                    local = ladle__raise(LADLE_ERR_SHAPE, func,
                                         "ranks %d and %d of one group hold blocks of "
                                         "different shapes", r, members[k]);
        }
    }
    if (local == LADLE_OK)
        local = ladle__op_new(&all_sum_reduce_vt, dtype, device, flags, l, l, &op, func);
    if (local == LADLE_OK)
        op->in_place = 1;
    st = ladle__op_comm(p, NULL, &comm, &to_comm);
    if (st == LADLE_OK && local == LADLE_OK && p->rank >= 0) {
        int pos = 0, g = group_of(p, reduced, members, &pos);
        int64_t n = ladle_layout_local_volume(l, LADLE_SELF);
        /* comm rank = partition rank: the communicator lists p's ranks in order */
        ladle_ref X = ladle_ref_make(LADLE_BUF_X, 0), Y = ladle_ref_make(LADLE_BUF_Y, 0);
        if (n > 0) {
            ladle__coll_allreduce(op->fwd, members, g, pos, X, Y, n, LADLE_TAG_ALLREDUCE);
            ladle__coll_allreduce(op->adj, members, g, pos, X, Y, n, LADLE_TAG_ALLREDUCE);
        }
    }
    if (local == LADLE_OK) {
        h = ladle__layout_hash(h, l);
        h = ladle__hash(h, reduced, sizeof(int) * LADLE_MAX_NDIM);
        h = ladle__prim_hash(h, dtype, device, flags);
    }
    st = ladle__prim_finish(st, &op, &comm, &to_comm, local, h, out, func);
    ladle__free(members);
    return st;
}

ladle_status ladle__all_sum_reduce_layout(const ladle_layout *l, int naxes, const int axes[],
                                          ladle_dtype dtype, ladle_device device, unsigned flags,
                                          ladle_op **out)
{
    int reduced[LADLE_MAX_NDIM] = {0};
    for (int k = 0; k < naxes; k++)
        reduced[axes[k]] = 1;
    return asr_core(l->p, reduced, l, dtype, device, flags, LADLE_OK, out, "ladle_all_sum_reduce");
}

void ladle_all_sum_reduce_desc_init(ladle_all_sum_reduce_desc *d, int naxes,
                                    const int axes[], int ndim, const int64_t shape[])
{
    if (!LADLE_DESC_START(d))
        return;
    d->naxes = naxes;
    d->axes = axes;
    d->ndim = ndim;
    d->shape = shape;
}

ladle_status ladle_all_sum_reduce_create(const ladle_all_sum_reduce_desc *d,
                                         const ladle_partition *p, ladle_dtype dtype,
                                         ladle_device device, ladle_op **out)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle_layout *l = NULL;
    int reduced[LADLE_MAX_NDIM] = {0};
    int64_t n = 0;
    char buf[128];

    LADLE_NOT_NULL(out);
    LADLE_NOT_NULL(p);
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    const int naxes = d->naxes, ndim = d->ndim, *axes = d->axes;
    const int64_t *shape = d->shape;
    const unsigned flags = d->flags;
    local = ladle__make_check_kind(dtype, flags, __func__);
    if (local == LADLE_OK && (naxes < 0 || naxes > p->ndim || (naxes > 0 && axes == NULL)))
        local = ladle__raise(
            axes == NULL && naxes > 0 ? LADLE_ERR_NULL : LADLE_ERR_ARG, __func__,
            "naxes %d is invalid for the %d-dimensional "
            "partition %s",
            naxes, p->ndim, ladle__fmt_shape(buf, sizeof buf, p->ndim, p->shape));
    for (int k = 0; local == LADLE_OK && k < naxes; k++) {
        if (axes[k] < 0 || axes[k] >= p->ndim)
            local = ladle__raise(LADLE_ERR_ARG, __func__,
                                 "axis %d is outside the partition's 0..%d", axes[k],
                                 p->ndim - 1);
        else if (reduced[axes[k]]++)
            local =
                ladle__raise(LADLE_ERR_ARG, __func__, "axis %d is listed twice", axes[k]);
    }
    if (local == LADLE_OK)
        local = ladle__check_shape(__func__, ndim, shape, &n);
    if (local == LADLE_OK)
        local = ladle_layout_create_block(p, ndim, shape, &l);
    st = asr_core(p, reduced, l, dtype, device, flags, local, out, __func__);
    ladle_layout_destroy(&l);
fail:
    return st;
}

ladle_status ladle__all_sum_reduce_groups(const ladle_partition *p, const int *group_id,
                                          const int64_t *counts, ladle_dtype dtype,
                                          ladle_device device, unsigned flags, ladle_op **out)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle_op *op = NULL;
    ladle_layout *l = NULL;
    int *to_comm = NULL, *members = NULL;
    MPI_Comm comm = MPI_COMM_NULL;
    int64_t n = 0;
    uint64_t h = LADLE_HASH_INIT;
    const char *f = "ladle_all_sum_reduce";

    int64_t *zero = ladle__calloc((size_t)p->size + 1, sizeof(int64_t)), total = 0;
    if (zero == NULL)
        local = ladle__raise(LADLE_ERR_ALLOC, f, "out of memory");
    for (int r = 0; local == LADLE_OK && r < p->size; r++) {
        total += counts[r];
        for (int q = 0; q < p->size; q++)
            if (group_id[q] == group_id[r] && counts[q] != counts[r])
                local = ladle__raise(LADLE_ERR_SHAPE, f, "a group's blocks differ");
    }
    if (local == LADLE_OK)
        local = ladle__layout_create_explicit(p, 1, &total, zero, counts, &l);
    ladle__free(zero);
    if (local == LADLE_OK) {
        n = ladle_layout_local_volume(l, LADLE_SELF);
        local = ladle__op_new(&all_sum_reduce_vt, dtype, device, flags, l, l, &op, f);
    }
    if (local == LADLE_OK) {
        op->in_place = 1;
        members = ladle__calloc((size_t)p->size + 1, sizeof(int));
        if (members == NULL)
            local = ladle__raise(LADLE_ERR_ALLOC, f, "out of memory");
    }
    st = ladle__op_comm(p, NULL, &comm, &to_comm);
    if (st == LADLE_OK && local == LADLE_OK && p->rank >= 0 && n > 0) {
        int g = 0, pos = 0;
        for (int r = 0; r < p->size; r++)
            if (group_id[r] == group_id[p->rank]) {
                if (r == p->rank)
                    pos = g;
                members[g++] = r; /* comm rank = partition rank */
            }
        ladle_ref X = ladle_ref_make(LADLE_BUF_X, 0), Y = ladle_ref_make(LADLE_BUF_Y, 0);
        ladle__coll_allreduce(op->fwd, members, g, pos, X, Y, n, LADLE_TAG_ALLREDUCE);
        ladle__coll_allreduce(op->adj, members, g, pos, X, Y, n, LADLE_TAG_ALLREDUCE);
    }
    if (local == LADLE_OK) {
        h = ladle__layout_hash(h, l);
        h = ladle__hash(h, group_id, sizeof(int) * (size_t)p->size);
        h = ladle__prim_hash(h, dtype, device, flags);
    }
    st = ladle__prim_finish(st, &op, &comm, &to_comm, local, h, out, f);
    ladle_layout_destroy(&l);
    ladle__free(members);
    return st;
}
