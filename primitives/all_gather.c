/*
 * AllGather and ReduceScatter along one axis of a partition: one pair of
 * plans read in two directions (primitives/shard.h). All-gather runs the
 * gather forward and the scatter as its adjoint; reduce-scatter the other
 * way round.
 *
 * Every pair of a group exchanges one message each way, all posted at once
 * (a direct exchange rather than a ring: the same bytes per rank, one step
 * of latency instead of g - 1). The scatter's receiver sums what arrives in
 * member order, member 0's copy first, in chunks so the adds overlap the
 * messages still in flight: the order is the plan's, never the arrival's or
 * the MPI's, so every run gives the same bits. A shard that is a contiguous
 * run of the whole tensor (every dimension before `dim` of extent 1) moves
 * straight between the tensors; otherwise it is packed into (or unpacked
 * from) the workspace with one box copy.
 */
#include <string.h>

#include "primitives/primitives_impl.h"
#include "primitives/shard.h"
#include "src/core/tags.h"
#include "src/op/make.h"

/* A scatter's piece is cut into chunks of about this size (at most
 * MAX_CHUNKS), so that adding one chunk overlaps receiving the next. */
#define CHUNK_BYTES (512 * 1024)
#define MAX_CHUNKS 16

static const ladle_op_vtable all_gather_vt = {.kind = LADLE_OP_ALL_GATHER,
                                              .name = "all-gather"};
static const ladle_op_vtable reduce_scatter_vt = {.kind = LADLE_OP_REDUCE_SCATTER,
                                                  .name = "reduce-scatter"};

/* What both plans need: the group, the shards' places and the geometry. */
typedef struct shard_plan {
    int g, pos, ndim, dim, contiguous;
    int *members;         /* comm ranks of the group, by coordinate along the axis */
    int64_t *start, *len; /* shard k: indices [start[k], start[k] + len[k]) of dim */
    int64_t shape[LADLE_MAX_NDIM];
    int64_t inner; /* elements per index of dim */
} shard_plan;

static int64_t piece_volume(const shard_plan *sp, int k)
{
    int64_t v = sp->len[k] * sp->inner;
    for (int d = 0; d < sp->dim; d++)
        v *= sp->shape[d];
    return v;
}

/* Shard k's box in the whole tensor and the box of the same extents in a
 * packed shard-shaped buffer. */
static void piece_boxes(const shard_plan *sp, int k, ladle_box *whole, ladle_box *packed)
{
    int64_t lo[LADLE_MAX_NDIM] = {0}, zero[LADLE_MAX_NDIM] = {0}, ext[LADLE_MAX_NDIM];
    memcpy(ext, sp->shape, sizeof ext);
    ext[sp->dim] = sp->len[k];
    lo[sp->dim] = sp->start[k];
    *whole = ladle_box_in(sp->ndim, sp->shape, lo, ext);
    *packed = ladle_box_in(sp->ndim, ext, zero, ext);
}

static int chunks_of(int64_t n, size_t esize)
{
    int64_t c = n * (int64_t)esize / CHUNK_BYTES;
    return c < 1 ? 1 : c > MAX_CHUNKS ? MAX_CHUNKS : (int)c;
}

static void chunk_at(int64_t n, int nc, int c, int64_t *off, int64_t *len)
{
    *off = ladle__balanced_start(n, nc, c);
    *len = ladle__balanced_size(n, nc, c);
}

/* x (this member's shard) to y (the whole tensor): send x to every peer,
 * place every peer's shard, copy x's own place. */
static void plan_gather(ladle_sched *s, const shard_plan *sp, ladle_ref x, ladle_ref y)
{
    const int g = sp->g, pos = sp->pos;
    const int64_t mine = piece_volume(sp, pos);
    ladle_box whole, packed;
    ladle_ref ws = ladle_ref_make(LADLE_BUF_WS, 0);
    if (!sp->contiguous) {
        int64_t total = 0;
        for (int k = 0; k < g; k++)
            total += k == pos ? 0 : piece_volume(sp, k);
        ws = ladle_sched_workspace(s, total);
    }
    for (int step = 1; step < g; step++) {
        int k = (pos - step + g) % g; /* receive from the left, send to the right */
        int64_t n = piece_volume(sp, k);
        if (n == 0)
            continue;
        if (sp->contiguous) {
            ladle_sched_recv(s, ladle_ref_at(y, sp->start[k] * sp->inner), n,
                             sp->members[k], LADLE_TAG_SHARD);
            continue;
        }
        int r = ladle_sched_recv(s, ws, n, sp->members[k], LADLE_TAG_SHARD);
        piece_boxes(sp, k, &whole, &packed);
        ladle_sched_dep(s, r, ladle_sched_box(s, LADLE_BOX_COPY, ws, &packed, y, &whole));
        ws = ladle_ref_at(ws, n);
    }
    for (int step = 1; mine > 0 && step < g; step++)
        ladle_sched_send(s, x, mine, sp->members[(pos + step) % g], LADLE_TAG_SHARD);
    if (mine > 0) {
        piece_boxes(sp, pos, &whole, &packed);
        ladle_sched_box(s, LADLE_BOX_COPY, x, &packed, y, &whole);
    }
}

/* Where the scatter reads member k's piece k of x: in place when shards
 * are contiguous runs, else packed into the workspace first (*ready: the
 * packing step, -1 for none). */
static ladle_ref scatter_source(ladle_sched *s, const shard_plan *sp, int k, ladle_ref x,
                                ladle_ref *pack, int *ready)
{
    ladle_box whole, packed;
    *ready = -1;
    if (sp->contiguous)
        return ladle_ref_at(x, sp->start[k] * sp->inner);
    ladle_ref at = *pack;
    piece_boxes(sp, k, &whole, &packed);
    *ready = ladle_sched_box(s, LADLE_BOX_COPY, x, &whole, at, &packed);
    *pack = ladle_ref_at(*pack, piece_volume(sp, k));
    return at;
}

/* Chunk c of y = t_0 + t_1 + ... + t_{g-1}, in that order: term k is the
 * piece member k sent (slot[k], landed by step got[k][c]) or, for k = pos,
 * this member's own (own, ready at own_ready). */
static void scatter_sum(ladle_sched *s, const shard_plan *sp, const ladle_ref *slot,
                        int (*got)[MAX_CHUNKS], ladle_ref y, int own_ready, int64_t off,
                        int64_t n, int c)
{
    int last = -1;
    for (int k = 0; k < sp->g; k++) {
        ladle_ref t = ladle_ref_at(slot[k], off), yc = ladle_ref_at(y, off);
        int ready = k == sp->pos ? own_ready : got[k][c], id;
        if (k == 0 && sp->g == 1)
            id = ladle_sched_copy(s, LADLE_BOX_COPY, t, yc, n);
        else if (k == 0)
            continue;
        else if (k == 1)
            id = ladle_sched_add(s, ladle_ref_at(slot[0], off), t, yc, n);
        else
            id = ladle_sched_add(s, yc, t, yc, n);
        ladle_sched_dep(s, ready, id);
        if (k == 1)
            ladle_sched_dep(s, sp->pos == 0 ? own_ready : got[0][c], id);
        ladle_sched_dep(s, last, id);
        last = id;
    }
}

/* x (the whole tensor) to y (this member's shard of the group's sum). */
static void plan_scatter(ladle_sched *s, const shard_plan *sp, ladle_ref x, ladle_ref y,
                         int (*got)[MAX_CHUNKS], ladle_ref *slot)
{
    const int g = sp->g, pos = sp->pos;
    const int64_t mine = piece_volume(sp, pos);
    const size_t es = ladle_sched_esize(s);
    int64_t packed = 0, off, n;
    for (int k = 0; !sp->contiguous && k < g; k++)
        packed += piece_volume(sp, k);
    ladle_ref pack = ladle_sched_workspace(s, packed);
    ladle_ref land = ladle_sched_workspace(s, mine * (g - 1));
    const int nc = chunks_of(mine, es);
    /* receives first, into one slot per peer */
    for (int step = 1; mine > 0 && step < g; step++) {
        int k = (pos - step + g) % g;
        slot[k] = land;
        land = ladle_ref_at(land, mine);
        for (int c = 0; c < nc; c++) {
            chunk_at(mine, nc, c, &off, &n);
            got[k][c] = n > 0 ? ladle_sched_recv(s, ladle_ref_at(slot[k], off), n,
                                                 sp->members[k], LADLE_TAG_SHARD + c)
                              : -1;
        }
    }
    for (int step = 1; step < g; step++) {
        int k = (pos + step) % g, ready;
        int64_t vk = piece_volume(sp, k);
        if (vk == 0)
            continue;
        ladle_ref src = scatter_source(s, sp, k, x, &pack, &ready);
        const int nk = chunks_of(vk, es);
        for (int c = 0; c < nk; c++) {
            chunk_at(vk, nk, c, &off, &n);
            if (n > 0)
                ladle_sched_dep(s, ready,
                                ladle_sched_send(s, ladle_ref_at(src, off), n,
                                                 sp->members[k], LADLE_TAG_SHARD + c));
        }
    }
    if (mine == 0)
        return;
    int own_ready;
    slot[pos] = scatter_source(s, sp, pos, x, &pack, &own_ready);
    for (int c = 0; c < nc; c++) {
        chunk_at(mine, nc, c, &off, &n);
        if (n > 0)
            scatter_sum(s, sp, slot, got, y, own_ready, off, n, c);
    }
}

/* The group of this rank along `axis` (partition ranks = comm ranks) and
 * every member's shard; global facts, so every rank finds the same. */
static ladle_status plan_group(const ladle_partition *p, const ladle_all_gather_desc *d,
                               shard_plan *sp, const char *func)
{
    const int g = p->shape[d->axis];
    sp->g = g;
    sp->ndim = d->ndim;
    sp->dim = d->dim;
    memcpy(sp->shape, d->shape, sizeof(int64_t) * (size_t)d->ndim);
    sp->members = ladle__calloc((size_t)g, sizeof(int));
    sp->start = ladle__calloc((size_t)g, sizeof(int64_t));
    sp->len = ladle__calloc((size_t)g, sizeof(int64_t));
    if (!sp->members || !sp->start || !sp->len)
        return ladle__raise(LADLE_ERR_ALLOC, func, "out of memory");
    sp->inner = 1;
    sp->contiguous = 1;
    for (int q = 0; q < d->ndim; q++) {
        if (q > d->dim)
            sp->inner *= d->shape[q];
        if (q < d->dim && d->shape[q] != 1)
            sp->contiguous = 0;
    }
    for (int k = 0, c[LADLE_MAX_NDIM]; k < g; k++) {
        sp->len[k] =
            d->counts ? d->counts[k] : ladle__balanced_size(d->shape[d->dim], g, k);
        sp->start[k] = k ? sp->start[k - 1] + sp->len[k - 1] : 0;
        if (p->rank >= 0) {
            memcpy(c, p->coords, sizeof c);
            c[d->axis] = k;
            sp->members[k] = ladle__ravel(p->ndim, p->shape, c);
        }
    }
    sp->pos = p->rank >= 0 ? p->coords[d->axis] : -1;
    return LADLE_OK;
}

static void plan_free(shard_plan *sp)
{
    ladle__free(sp->members);
    ladle__free(sp->start);
    ladle__free(sp->len);
}

/* The descriptor against the partition (global facts only). */
static ladle_status check_desc(const ladle_all_gather_desc *d, const ladle_partition *p,
                               ladle_dtype dtype, const char *func)
{
    int64_t n = 0, sum = 0;
    ladle_status st = ladle__make_check_kind(dtype, d->flags, func);
    if (st != LADLE_OK)
        return st;
    if (d->axis < 0 || d->axis >= p->ndim)
        return ladle__raise(LADLE_ERR_ARG, func, "axis %d is outside the partition's 0..%d",
                            d->axis, p->ndim - 1);
    if (d->ndim < 1)
        return ladle__raise(LADLE_ERR_ARG, func,
                            "ndim %d: a sharded tensor has at least one dimension",
                            d->ndim);
    LADLE_CALL(ladle__check_shape(func, d->ndim, d->shape, &n));
    if (d->dim < 0 || d->dim >= d->ndim)
        return ladle__raise(LADLE_ERR_ARG, func, "dim %d is outside the tensor's 0..%d",
                            d->dim, d->ndim - 1);
    for (int k = 0; d->counts && k < p->shape[d->axis]; k++) {
        if (d->counts[k] < 0 || d->counts[k] > d->shape[d->dim] - sum)
            return ladle__raise(LADLE_ERR_ARG, func,
                                "counts[%d] = %lld is %s (dim %d has %lld indices, %lld "
                                "given to the shards before it)",
                                k, (long long)d->counts[k],
                                d->counts[k] < 0 ? "negative" : "too large", d->dim,
                                (long long)d->shape[d->dim], (long long)sum);
        sum += d->counts[k];
    }
    if (d->counts && sum != d->shape[d->dim])
        return ladle__raise(LADLE_ERR_ARG, func,
                            "the counts sum to %lld, not to dim %d's extent %lld",
                            (long long)sum, d->dim, (long long)d->shape[d->dim]);
fail:
    return st;
}

/* The shards' layout (rank r holds shard coords[axis] of r) and the whole
 * tensor's (a block on every member). */
static ladle_status make_layouts(const ladle_partition *p, const ladle_all_gather_desc *d,
                                 const shard_plan *sp, ladle_layout **shards,
                                 ladle_layout **whole)
{
    ladle_status st = LADLE_OK;
    const size_t nd = (size_t)d->ndim;
    int64_t *off = ladle__calloc((size_t)p->size * nd + 1, sizeof(int64_t));
    int64_t *ext = ladle__calloc((size_t)p->size * nd + 1, sizeof(int64_t));
    LADLE_CHECK(off && ext, LADLE_ERR_ALLOC, "out of memory");
    for (int r = 0, c[LADLE_MAX_NDIM]; r < p->size; r++) {
        ladle__unravel(p->ndim, p->shape, r, c);
        memcpy(ext + r * nd, d->shape, sizeof(int64_t) * nd);
        off[r * nd + (size_t)d->dim] = sp->start[c[d->axis]];
        ext[r * nd + (size_t)d->dim] = sp->len[c[d->axis]];
    }
    LADLE_CALL(ladle__layout_create_explicit(p, d->ndim, d->shape, off, ext, shards));
    LADLE_CALL(ladle_layout_create_block(p, d->ndim, d->shape, whole));
fail:
    ladle__free(off);
    ladle__free(ext);
    return st;
}

/* Both plans on a member: gather from the shards' X into the whole Y, or
 * scatter from the whole X into the shard Y. */
static ladle_status plan_both(ladle_op *op, const shard_plan *sp, int reduce,
                              const char *func)
{
    int(*got)[MAX_CHUNKS] = ladle__calloc((size_t)sp->g, sizeof *got);
    ladle_ref *slot = ladle__calloc((size_t)sp->g, sizeof *slot);
    ladle_ref X = ladle_ref_make(LADLE_BUF_X, 0), Y = ladle_ref_make(LADLE_BUF_Y, 0);
    ladle_status st = LADLE_OK;
    if (got == NULL || slot == NULL) {
        st = ladle__raise(LADLE_ERR_ALLOC, func, "out of memory");
    } else {
        plan_gather(reduce ? op->adj : op->fwd, sp, X, Y);
        plan_scatter(reduce ? op->fwd : op->adj, sp, X, Y, got, slot);
    }
    ladle__free(got);
    ladle__free(slot);
    return st;
}

ladle_status ladle__shard_create(const ladle_all_gather_desc *d, const ladle_partition *p,
                                 ladle_dtype dtype, ladle_device device, int reduce,
                                 ladle_op **out, const char *func)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle_layout *shards = NULL, *whole = NULL;
    ladle_op *op = NULL;
    int *to_comm = NULL;
    MPI_Comm comm = MPI_COMM_NULL;
    uint64_t h = LADLE_HASH_INIT;
    shard_plan sp = {0};

    LADLE_NOT_NULL(out);
    LADLE_NOT_NULL(p);
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    local = check_desc(d, p, dtype, func);
    if (local == LADLE_OK)
        local = plan_group(p, d, &sp, func);
    if (local == LADLE_OK)
        local = make_layouts(p, d, &sp, &shards, &whole);
    if (local == LADLE_OK)
        local = ladle__op_new(reduce ? &reduce_scatter_vt : &all_gather_vt, dtype, device,
                              d->flags, reduce ? whole : shards, reduce ? shards : whole,
                              &op, func);
    st = ladle__op_comm(p, NULL, &comm, &to_comm);
    if (st == LADLE_OK && local == LADLE_OK && p->rank >= 0)
        local = plan_both(op, &sp, reduce, func);
    if (local == LADLE_OK) {
        int64_t v[2] = {d->axis, d->dim};
        h = ladle__layout_hash(h, shards);
        h = ladle__hash(h, v, sizeof v);
        h = ladle__prim_hash(h, dtype, device, d->flags);
    }
    st = ladle__prim_finish(st, &op, &comm, &to_comm, local, h, out, func);
    ladle_layout_destroy(&shards);
    ladle_layout_destroy(&whole);
    plan_free(&sp);
fail:
    return st;
}

/* The group of this rank among the members of p sharing its group id,
 * in partition rank order, and every member's slice of a vector padded to
 * g equal slices (global facts, so every member plans the same). */
static ladle_status plan_groups(const ladle_partition *p, const int *group_id,
                                const int64_t *counts, shard_plan *sp, const char *func)
{
    int g = 0;
    for (int r = 0; r < p->size; r++)
        g += group_id[r] == group_id[p->rank];
    sp->g = g;
    sp->ndim = 1;
    sp->dim = 0;
    sp->inner = 1;
    sp->contiguous = 1;
    sp->members = ladle__calloc((size_t)g, sizeof(int));
    sp->start = ladle__calloc((size_t)g, sizeof(int64_t));
    sp->len = ladle__calloc((size_t)g, sizeof(int64_t));
    if (!sp->members || !sp->start || !sp->len)
        return ladle__raise(LADLE_ERR_ALLOC, func, "out of memory");
    const int64_t slice = (counts[p->rank] + g - 1) / g;
    for (int r = 0, k = 0; r < p->size; r++)
        if (group_id[r] == group_id[p->rank]) {
            if (r == p->rank)
                sp->pos = k;
            sp->members[k] = r; /* comm rank = partition rank */
            sp->start[k] = (int64_t)k * slice;
            sp->len[k] = slice;
            k++;
        }
    sp->shape[0] = (int64_t)g * slice;
    return LADLE_OK;
}

/* Rank r's whole (padded) length and slice in the grouped form. */
static void group_sizes(const ladle_partition *p, const int *group_id, const int64_t *counts,
                        int r, int64_t *whole, int64_t *slice)
{
    int g = 0;
    for (int q = 0; q < p->size; q++)
        g += group_id[q] == group_id[r];
    *slice = (counts[r] + g - 1) / g;
    *whole = *slice * g;
}

ladle_status ladle__shard_groups_create(const ladle_partition *p, const int *group_id,
                                        const int64_t *counts, ladle_dtype dtype,
                                        ladle_device device, int reduce, ladle_op **out)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle_layout *lw = NULL, *ls = NULL;
    ladle_op *op = NULL;
    int *to_comm = NULL;
    MPI_Comm comm = MPI_COMM_NULL;
    uint64_t h = LADLE_HASH_INIT;
    shard_plan sp = {0};
    const char *f = reduce ? "ladle_reduce_scatter" : "ladle_all_gather";
    const size_t n = (size_t)p->size + 1;
    int64_t *zero = ladle__calloc(n, sizeof(int64_t)), *whole = ladle__calloc(n, sizeof(int64_t));
    int64_t *slice = ladle__calloc(n, sizeof(int64_t)), tw = 0, ts = 0;
    if (!zero || !whole || !slice)
        local = ladle__raise(LADLE_ERR_ALLOC, f, "out of memory");
    for (int r = 0; local == LADLE_OK && r < p->size; r++) {
        for (int q = 0; q < p->size; q++)
            if (group_id[q] == group_id[r] && counts[q] != counts[r])
                local = ladle__raise(LADLE_ERR_SHAPE, f, "a group's blocks differ");
        group_sizes(p, group_id, counts, r, &whole[r], &slice[r]);
        tw += whole[r];
        ts += slice[r];
    }
    if (local == LADLE_OK)
        local = ladle__layout_create_explicit(p, 1, &tw, zero, whole, &lw);
    if (local == LADLE_OK)
        local = ladle__layout_create_explicit(p, 1, &ts, zero, slice, &ls);
    if (local == LADLE_OK && p->rank >= 0)
        local = plan_groups(p, group_id, counts, &sp, f);
    if (local == LADLE_OK)
        local = ladle__op_new(reduce ? &reduce_scatter_vt : &all_gather_vt, dtype, device, 0,
                              reduce ? lw : ls, reduce ? ls : lw, &op, f);
    st = ladle__op_comm(p, NULL, &comm, &to_comm);
    if (st == LADLE_OK && local == LADLE_OK && p->rank >= 0)
        local = plan_both(op, &sp, reduce, f);
    if (local == LADLE_OK) {
        h = ladle__layout_hash(h, lw);
        h = ladle__hash(h, group_id, sizeof(int) * (size_t)p->size);
        h = ladle__prim_hash(h, dtype, device, 0);
    }
    st = ladle__prim_finish(st, &op, &comm, &to_comm, local, h, out, f);
    ladle_layout_destroy(&lw);
    ladle_layout_destroy(&ls);
    ladle__free(zero);
    ladle__free(whole);
    ladle__free(slice);
    plan_free(&sp);
    return st;
}

void ladle_all_gather_desc_init(ladle_all_gather_desc *d, int axis, int ndim,
                                const int64_t shape[], int dim)
{
    if (!LADLE_DESC_START(d))
        return;
    d->axis = axis;
    d->ndim = ndim;
    d->shape = shape;
    d->dim = dim;
}

ladle_status ladle_all_gather_create(const ladle_all_gather_desc *d,
                                     const ladle_partition *p, ladle_dtype dtype,
                                     ladle_device device, ladle_op **op)
{
    return ladle__shard_create(d, p, dtype, device, 0, op, __func__);
}
