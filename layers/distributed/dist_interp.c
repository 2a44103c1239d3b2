/*
 * Distributed interpolation (see ladle/distributed.h): x and y are split in
 * balance over the same partition. The output tile of a rank reads, along
 * each spatial dimension, the input indices from the first tap of its first
 * output to the last tap of its last (taps never go back as the output
 * index grows), a window that may reach into its neighbours' blocks:
 *
 *   y = I W x,      dx = W* I* dy
 *
 * W gathers every rank's window from the owners (a box exchange like a
 * repartition's, to boxes that overlap), I is the interpolation of the
 * window into the tile at global coordinates (the backend's interp slots
 * with the window's and the tile's offsets). I* scatters dy into the
 * window, W* adds every window back into the owners of its cells.
 */
#include <string.h>

#include "layers/distributed/dist.h"
#include "layers/sequential/interp_impl.h"

typedef struct dinterp {
    ladle_interp_geom g; /* global extents; this rank's window and tile */
    int64_t planes;      /* this rank's samples x channels */
    ladle_op *gather;    /* W */
    ladle_tensor *xw;    /* the window (forward) */
    ladle_tensor *dxw;   /* its gradient (backward) */
} dinterp;

static void di_free(dinterp *v)
{
    if (v == NULL)
        return;
    ladle_op_destroy(&v->gather);
    ladle_tensor_destroy(&v->xw);
    ladle_tensor_destroy(&v->dxw);
    ladle__free(v);
}

static ladle_status di_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    dinterp *v = op->impl;
    (void)ctx, (void)n;
    LADLE_CALL(ladle_op_forward(v->gather, x, v->xw));
    if (y->numel > 0)
        LADLE_CALL(op->be->fn->interp_forward(op->be, op->dtype, &v->g, v->planes, v->xw->data,
                                              y->data));
fail:
    return st;
}

static ladle_status di_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    dinterp *v = op->impl;
    (void)ctx, (void)n;
    if (dx == NULL)
        return LADLE_OK;
    if (v->dxw->numel > 0)
        LADLE_CALL(op->be->fn->interp_backward(op->be, op->dtype, &v->g, v->planes, dy->data,
                                               v->dxw->data));
    LADLE_CALL(ladle_op_adjoint(v->gather, v->dxw, dx));
fail:
    return st;
}

static void di_destroy(ladle_op *op) { di_free(op->impl); }

static const ladle_op_vtable dinterp_vt = {
    .kind = LADLE_OP_DIST_INTERPOLATE,
    .name = "distributed interpolation",
    .destroy = di_destroy,
    .layer_forward = di_forward,
    .layer_backward = di_backward,
};

/* Rank r's window (offset and extents in x, ndim of them): x's block in
 * the batch and channels, the taps of its output tile in space; nothing
 * when the tile is empty. */
static void window_of(const ladle_interp_geom *g, int nd, const ladle_layout *lx,
                      const ladle_layout *ly, int r, int64_t *off, int64_t *ext)
{
    int64_t yo[LADLE_MAX_NDIM], yn[LADLE_MAX_NDIM], vol = 1;
    int ndim = 2 + nd;
    ladle_layout_box(lx, r, off, ext);
    ladle_layout_box(ly, r, yo, yn);
    for (int d = 0; d < ndim; d++)
        vol *= yn[d];
    for (int s = 0; s < nd && vol > 0; s++) {
        int a = 3 - nd + s;
        int64_t lo[2], hi[2];
        double w[2];
        ladle__interp_taps(g, a, yo[2 + s], lo, w);
        ladle__interp_taps(g, a, yo[2 + s] + yn[2 + s] - 1, hi, w);
        off[2 + s] = lo[0];
        ext[2 + s] = hi[1] - lo[0] + 1;
    }
    if (vol == 0)
        for (int d = 0; d < ndim; d++)
            off[d] = ext[d] = 0;
}

/* The windows' layout on p_x, and this rank's window and tile in v->g. */
static ladle_status plan_windows(ladle__make *m, const ladle_partition *p_x, int nd,
                                 const int64_t *xs, dinterp *v, ladle_layout **lw)
{
    ladle_status st = LADLE_OK;
    int size = ladle_partition_size(p_x), ndim = 2 + nd;
    int64_t *off = ladle__calloc((size_t)(size * ndim), sizeof(int64_t));
    int64_t *ext = ladle__calloc((size_t)(size * ndim), sizeof(int64_t));
    LADLE_CHECK(off && ext, LADLE_ERR_ALLOC, "out of memory");
    for (int r = 0; r < size; r++)
        window_of(&v->g, nd, m->lx, m->ly, r, off + r * ndim, ext + r * ndim);
    LADLE_CALL(ladle__layout_create_explicit(p_x, ndim, xs, off, ext, lw));
    int64_t wo[LADLE_MAX_NDIM], wn[LADLE_MAX_NDIM], yo[LADLE_MAX_NDIM], yn[LADLE_MAX_NDIM];
    ladle_layout_box(*lw, LADLE_SELF, wo, wn);
    ladle_layout_box(m->ly, LADLE_SELF, yo, yn);
    v->planes = wn[0] * wn[1];
    for (int s = 0; s < nd; s++) {
        int a = 3 - nd + s;
        v->g.x_off[a] = wo[2 + s];
        v->g.x_n[a] = wn[2 + s];
        v->g.y_off[a] = yo[2 + s];
        v->g.y_n[a] = yn[2 + s];
    }
    LADLE_CALL(ladle__dist_tensor(m->dtype, m->device, ndim, wn, &v->xw));
    LADLE_CALL(ladle__dist_tensor(m->dtype, m->device, ndim, wn, &v->dxw));
fail:
    ladle__free(off);
    ladle__free(ext);
    return st;
}

/* The checks every rank makes alike; the global geometry and y's shape. */
static ladle_status di_checks(const ladle_interp_desc *d, const ladle_partition *p_x,
                              const int64_t *xs, ladle_dtype dtype, unsigned flags,
                              ladle_interp_geom *g, int64_t *ys, const char *f)
{
    ladle_status st = ladle__interp_plan(d, xs, dtype, g, ys, f);
    if (st == LADLE_OK)
        st = ladle__make_check_kind(dtype, flags, f);
    if (st == LADLE_OK && ladle_partition_ndim(p_x) != 2 + d->nd)
        st = ladle__raise(LADLE_ERR_PARTITION, f, "p_x has %d dimensions; x has %d",
                          ladle_partition_ndim(p_x), 2 + d->nd);
    return st;
}

ladle_status ladle_dist_interp_create(const ladle_interp_desc *d, const ladle_partition *p_x,
                                      const int64_t x_shape[], ladle_dtype dtype,
                                      ladle_device device, unsigned flags, ladle_op **out)
{
    const char *f = __func__;
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle__make m = {f, dtype, device, flags, MPI_COMM_NULL, NULL, NULL};
    ladle_op *op = NULL;
    dinterp *v = NULL;
    ladle_layout *lw = NULL;
    ladle_interp_geom g;
    int64_t ys[5] = {0}, args[24] = {0};
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    const ladle_partition *parts[1] = {p_x};
    local = di_checks(d, p_x, x_shape, dtype, flags, &g, ys, f);
    if (local == LADLE_OK) {
        int64_t head[6] = {d->nd, d->mode, d->align_corners, dtype, flags, 0};
        memcpy(args, head, sizeof head);
        memcpy(args + 6, d->out_size, sizeof d->out_size);
        memcpy(args + 9, d->scale, sizeof d->scale);
        memcpy(args + 12, x_shape, sizeof(int64_t) * (size_t)(2 + d->nd));
    }
    LADLE_CALL(ladle__make_open(&m, 1, parts, local,
                                ladle__make_hash(LADLE_HASH_INIT, 1, parts, 24, args)));
    v = ladle__calloc(1, sizeof *v);
    local = ladle__make_alloc_ok(&m, v != NULL);
    if (local == LADLE_OK) {
        v->g = g;
        local = ladle_layout_create_balanced(p_x, 2 + d->nd, x_shape, &m.lx);
    }
    if (local == LADLE_OK)
        local = ladle_layout_create_balanced(p_x, 2 + d->nd, ys, &m.ly);
    if (local == LADLE_OK)
        local = plan_windows(&m, p_x, d->nd, x_shape, v, &lw);
    LADLE_CALL(ladle__make_step(m.comm, local, f));
    LADLE_CALL(ladle__make_step(
        m.comm, ladle__window_gather_create(m.lx, lw, dtype, device, flags, &v->gather),
        f));
    local = ladle__make_layer(&m, local, &dinterp_vt, v, NULL, &op);
    if (local == LADLE_OK) {
        v = NULL;
        op->linear = 1;
        if (op->be->fn->interp_forward == NULL || op->be->fn->interp_backward == NULL)
            local = ladle__raise(LADLE_ERR_DEVICE, f, "the %s backend has no interpolation "
                                 "kernels", op->be->fn->name);
    }
    st = ladle__make_end(&m, &op, local, out);
fail:
    ladle_op_destroy(&op);
    ladle__make_close(&m);
    di_free(v);
    ladle_layout_destroy(&lw);
    return st;
}
