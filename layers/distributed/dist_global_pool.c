/*
 * Distributed global average pooling (see ladle/distributed.h): x [N, C,
 * S...] is split in balance over p_x (D x Pc x spatial grid), y [N, C] over
 * p_y (D x Pc). With V the global spatial volume and v a block's,
 *
 *   y = R L x,      dx = L* R* dy
 *
 * L is the local layer on each block, the sequential global average pool
 * (the block's mean per sample and channel) scaled by v / V, so that it
 * gives the block's partial sum divided by V; R sums the partial results
 * of every spatial tile onto the rank of p_y that holds the same batch and
 * channel blocks (a sum-reduce with the pairing given). R* is the
 * broadcast of dy back to every spatial tile, L* spreads each value,
 * divided by V, over the block. The scale runs on the small [n, c] buffer,
 * never on x.
 */
#include <string.h>

#include "layers/distributed/dist.h"
#include "primitives/pair.h"

typedef struct dgpool {
    ladle_op *local;    /* the block's global average pool (p_x members) */
    ladle_op *reduce;   /* R: partial sums on p_x -> y on p_y */
    ladle_tensor *part; /* [n, c] of this rank's block (zero volume off p_x) */
    double scale;       /* v / V */
} dgpool;

static const ladle__part dgpool_parts[] = {
    LADLE__PART_OP(dgpool, local), LADLE__PART_OP(dgpool, reduce),
    LADLE__PART_TENSOR(dgpool, part), LADLE__PARTS_END};

static ladle_status dg_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    dgpool *v = op->impl;
    (void)ctx, (void)n;
    if (v->local) {
        LADLE_CALL(ladle_op_forward(v->local, x, v->part));
        LADLE_CALL(op->be->fn->scal(op->be, op->dtype, v->part->numel, v->scale, v->part->data));
    }
    LADLE_CALL(ladle_op_forward(v->reduce, v->part, y));
fail:
    return st;
}

static ladle_status dg_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    dgpool *v = op->impl;
    (void)ctx, (void)n;
    if (dx == NULL)
        return LADLE_OK;
    LADLE_CALL(ladle_op_adjoint(v->reduce, dy, v->part));
    if (v->local) {
        LADLE_CALL(op->be->fn->scal(op->be, op->dtype, v->part->numel, v->scale, v->part->data));
        LADLE_CALL(ladle_op_adjoint(v->local, v->part, dx));
    }
fail:
    return st;
}

static void dg_destroy(ladle_op *op) { ladle__parts_free(op->impl, dgpool_parts, NULL); }

static const ladle_op_vtable dgpool_vt = {
    .kind = LADLE_OP_DIST_GLOBAL_POOL,
    .name = "distributed global average pooling",
    .destroy = dg_destroy,
    .layer_forward = dg_forward,
    .layer_backward = dg_backward,
};

/* The checks every rank makes alike (global facts only). */
static ladle_status gp_checks(const ladle_partition *p_x, int ndim, const int64_t *xs,
                              const ladle_partition *p_y, ladle_dtype dtype, unsigned flags,
                              const char *f)
{
    int64_t numel = 0;
    ladle_status st = ladle__make_check_kind(dtype, flags, f);
    if (st != LADLE_OK)
        return st;
    if (ndim < 3 || ndim > 5)
        return ladle__raise(LADLE_ERR_SHAPE, f, "x needs 1 to 3 spatial dimensions, not %d",
                            ndim - 2);
    st = ladle__check_shape(f, ndim, xs, &numel);
    if (st != LADLE_OK)
        return st;
    const int *gx = ladle_partition_shape(p_x), *gy = ladle_partition_shape(p_y);
    if (ladle_partition_ndim(p_x) != ndim || ladle_partition_ndim(p_y) != 2 ||
        gy[0] != gx[0] || gy[1] != gx[1])
        return ladle__raise(LADLE_ERR_PARTITION, f,
                            "p_x needs x's %d dimensions and p_y two, p_y's extents being "
                            "p_x's first two",
                            ndim);
    for (int d = 0; d < ndim; d++)
        if (xs[d] < gx[d])
            return ladle__raise(LADLE_ERR_SHAPE, f,
                                "dimension %d of x (%lld) is split over %d ranks: every "
                                "block must hold something",
                                d, (long long)xs[d], gx[d]);
    return LADLE_OK;
}

/* The partial sums' layout on p_x (rank r holds the [n, c] box of its
 * batch and channel blocks, the same box on every spatial tile) and the
 * pairing: source[r] is the rank of p_y that sums rank r's part. Local. */
static ladle_status plan_reduce(const ladle_partition *p_x, const ladle_partition *p_y,
                                const int64_t *yg, ladle_layout **lp, int *source)
{
    ladle_status st = LADLE_OK;
    int size = ladle_partition_size(p_x), c[LADLE_MAX_NDIM];
    const int *gx = ladle_partition_shape(p_x);
    int64_t *off = ladle__calloc((size_t)size * 2, sizeof(int64_t));
    int64_t *ext = ladle__calloc((size_t)size * 2, sizeof(int64_t));
    LADLE_CHECK(off && ext, LADLE_ERR_ALLOC, "out of memory");
    for (int r = 0; r < size; r++) {
        ladle_partition_coords_of(p_x, r, c);
        for (int d = 0; d < 2; d++) {
            off[2 * r + d] = ladle__balanced_start(yg[d], gx[d], c[d]);
            ext[2 * r + d] = ladle__balanced_size(yg[d], gx[d], c[d]);
        }
        LADLE_CALL(ladle_partition_rank_of(p_y, c, &source[r]));
    }
    LADLE_CALL(ladle__layout_create_explicit(p_x, 2, yg, off, ext, lp));
fail:
    ladle__free(off);
    ladle__free(ext);
    return st;
}

/* This rank's local layer, its partial sums and their scale. Local. */
static ladle_status allocate(ladle__make *m, dgpool *v, const ladle_layout *lp,
                             const int64_t *xs)
{
    ladle_status st = LADLE_OK;
    int nd = ladle_layout_ndim(m->lx);
    int64_t box[LADLE_MAX_NDIM], pbox[2];
    double vol = 1, gvol = 1;
    ladle_layout_box(m->lx, LADLE_SELF, NULL, box);
    ladle_layout_box(lp, LADLE_SELF, NULL, pbox);
    LADLE_CALL(ladle__dist_tensor(m->dtype, m->device, 2, pbox, &v->part));
    if (!ladle_partition_active(ladle_layout_partition(m->lx)))
        return LADLE_OK;
    for (int d = 2; d < nd; d++) {
        vol *= (double)box[d];
        gvol *= (double)xs[d];
    }
    v->scale = vol / gvol;
    LADLE_CALL(ladle_global_avg_pool_create(nd, box, m->dtype, m->device, &v->local));
fail:
    return st;
}

ladle_status ladle_dist_global_avg_pool_create(const ladle_partition *p_x,
                                               const int64_t x_shape[],
                                               const ladle_partition *p_y,
                                               ladle_dtype dtype, ladle_device device,
                                               unsigned flags, ladle_op **out)
{
    const char *f = __func__;
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle__make m = {f, dtype, device, flags, MPI_COMM_NULL, NULL, NULL};
    dgpool *v = NULL;
    ladle_layout *lp = NULL;
    int *source = NULL;
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(p_y);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    int ndim = ladle_partition_ndim(p_x);
    local = gp_checks(p_x, ndim, x_shape, p_y, dtype, flags, f);
    int64_t yg[2] = {0, 0};
    if (local == LADLE_OK)
        yg[0] = x_shape[0], yg[1] = x_shape[1];
    LADLE_CALL(ladle__dist_open_xy(&m, p_x, p_y, ndim, x_shape, local));
    v = ladle__calloc(1, sizeof *v);
    source = ladle__calloc((size_t)ladle_partition_size(p_x), sizeof(int));
    local = ladle__make_alloc_ok(&m, v != NULL && source != NULL);
    if (local == LADLE_OK)
        local = ladle_layout_create_balanced(p_x, ndim, x_shape, &m.lx);
    if (local == LADLE_OK)
        local = ladle_layout_create_balanced(p_y, 2, yg, &m.ly);
    if (local == LADLE_OK)
        local = plan_reduce(p_x, p_y, yg, &lp, source);
    LADLE_CALL(ladle__make_step(m.comm, local, f));
    LADLE_CALL(ladle__make_step(
        m.comm,
        ladle__pair_create_mapped(lp, m.ly, source, dtype, device, 1, &v->reduce, f), f));
    int taken = 0;
    ladle_status made = allocate(&m, v, lp, x_shape);
    const ladle_op *inner[2] = {v ? v->local : NULL, v ? v->reduce : NULL};
    st = ladle__dist_make_linear(&m, made, &dgpool_vt, v, &taken, out);
    if (taken)
        v = NULL;
    for (int i = 0; st == LADLE_OK && i < 2; i++)
        ladle__dist_hold(*out, inner[i]);
fail:
    ladle__make_close(&m);
    ladle__parts_free(v, dgpool_parts, NULL);
    ladle_layout_destroy(&lp);
    ladle__free(source);
    return st;
}
