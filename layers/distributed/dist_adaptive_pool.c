/*
 * Distributed adaptive average pooling (see ladle/distributed.h): x and y
 * are split in balance over the same partition. The output tile of a rank
 * reads, along each spatial dimension, the inputs from the window of its
 * first output to the window of its last (windows never go back as the
 * output index grows), a box that may reach into its neighbours' blocks:
 *
 *   y = A W x,      dx = W* A* dy
 *
 * W gathers every rank's box from the owners (the window gather the
 * distributed interpolation uses), A pools the box into the tile at global
 * coordinates (the backend's adaptive_pool slots with the box's and the
 * tile's offsets). A* spreads dy over the box, W* adds every box back into
 * the owners of its cells.
 */
#include <string.h>

#include "layers/distributed/dist.h"
#include "layers/sequential/adaptive_impl.h"

typedef struct dadaptive {
    ladle_adaptive_geom g; /* global extents; this rank's box and tile */
    int64_t planes;        /* this rank's samples x channels */
    ladle_op *gather;      /* W */
    ladle_tensor *xw;      /* the box (forward) */
    ladle_tensor *dxw;     /* its gradient (backward) */
} dadaptive;

static void da_free(dadaptive *v)
{
    if (v == NULL)
        return;
    ladle_op_destroy(&v->gather);
    ladle_tensor_destroy(&v->xw);
    ladle_tensor_destroy(&v->dxw);
    ladle__free(v);
}

static ladle_status da_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    dadaptive *v = op->impl;
    (void)ctx, (void)n;
    LADLE_CALL(ladle_op_forward(v->gather, x, v->xw));
    if (y->numel > 0)
        LADLE_CALL(op->be->fn->adaptive_pool_forward(op->be, op->dtype, &v->g, v->planes,
                                                     v->xw->data, y->data));
fail:
    return st;
}

static ladle_status da_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    dadaptive *v = op->impl;
    (void)ctx, (void)n;
    if (dx == NULL)
        return LADLE_OK;
    if (v->dxw->numel > 0)
        LADLE_CALL(op->be->fn->adaptive_pool_backward(op->be, op->dtype, &v->g, v->planes,
                                                      dy->data, v->dxw->data));
    LADLE_CALL(ladle_op_adjoint(v->gather, v->dxw, dx));
fail:
    return st;
}

static void da_destroy(ladle_op *op) { da_free(op->impl); }

static const ladle_op_vtable dadaptive_vt = {
    .kind = LADLE_OP_DIST_ADAPTIVE_POOL,
    .name = "distributed adaptive average pooling",
    .destroy = da_destroy,
    .layer_forward = da_forward,
    .layer_backward = da_backward,
};

/* Rank r's box (offset and extents in x, ndim of them): x's block in the
 * batch and channels, its output tile's windows in space; nothing when the
 * tile is empty. */
static void box_of(const ladle_adaptive_geom *g, int nd, const ladle_layout *lx,
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
        int64_t b0, e0, b1, e1;
        ladle__adaptive_window(g->in[a], g->out[a], yo[2 + s], &b0, &e0);
        ladle__adaptive_window(g->in[a], g->out[a], yo[2 + s] + yn[2 + s] - 1, &b1, &e1);
        off[2 + s] = b0;
        ext[2 + s] = e1 - b0;
    }
    if (vol == 0)
        for (int d = 0; d < ndim; d++)
            off[d] = ext[d] = 0;
}

/* The boxes' layout on p_x, and this rank's box and tile in v->g. */
static ladle_status plan_boxes(ladle__make *m, const ladle_partition *p_x, int nd,
                               const int64_t *xs, dadaptive *v, ladle_layout **lw)
{
    ladle_status st = LADLE_OK;
    int size = ladle_partition_size(p_x), ndim = 2 + nd;
    int64_t *off = ladle__calloc((size_t)(size * ndim), sizeof(int64_t));
    int64_t *ext = ladle__calloc((size_t)(size * ndim), sizeof(int64_t));
    LADLE_CHECK(off && ext, LADLE_ERR_ALLOC, "out of memory");
    for (int r = 0; r < size; r++)
        box_of(&v->g, nd, m->lx, m->ly, r, off + r * ndim, ext + r * ndim);
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

ladle_status ladle_dist_adaptive_avg_pool_create(const ladle_partition *p_x, int ndim,
                                                 const int64_t x_shape[],
                                                 const int64_t out_size[], ladle_dtype dtype,
                                                 ladle_device device, unsigned flags,
                                                 ladle_op **out)
{
    const char *f = __func__;
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle__make m = {f, dtype, device, flags, MPI_COMM_NULL, NULL, NULL};
    ladle_op *op = NULL;
    dadaptive *v = NULL;
    ladle_layout *lw = NULL;
    ladle_adaptive_geom g;
    int64_t ys[5] = {0}, args[16] = {0};
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out_size);
    LADLE_NOT_NULL(out);
    const ladle_partition *parts[1] = {p_x};
    local = ladle__adaptive_plan(ndim, x_shape, out_size, dtype, &g, ys, f);
    if (local == LADLE_OK)
        local = ladle__make_check_kind(dtype, flags, f);
    if (local == LADLE_OK && ladle_partition_ndim(p_x) != ndim)
        local = ladle__raise(LADLE_ERR_PARTITION, f, "p_x has %d dimensions; x has %d",
                             ladle_partition_ndim(p_x), ndim);
    if (local == LADLE_OK) {
        int64_t head[4] = {ndim, dtype, flags, 0};
        memcpy(args, head, sizeof head);
        memcpy(args + 4, x_shape, sizeof(int64_t) * (size_t)ndim);
        memcpy(args + 9, out_size, sizeof(int64_t) * (size_t)(ndim - 2));
    }
    LADLE_CALL(ladle__make_open(&m, 1, parts, local,
                                ladle__make_hash(LADLE_HASH_INIT, 1, parts, 16, args)));
    v = ladle__calloc(1, sizeof *v);
    local = ladle__make_alloc_ok(&m, v != NULL);
    if (local == LADLE_OK) {
        v->g = g;
        local = ladle_layout_create_balanced(p_x, ndim, x_shape, &m.lx);
    }
    if (local == LADLE_OK)
        local = ladle_layout_create_balanced(p_x, ndim, ys, &m.ly);
    if (local == LADLE_OK)
        local = plan_boxes(&m, p_x, ndim - 2, x_shape, v, &lw);
    LADLE_CALL(ladle__make_step(m.comm, local, f));
    LADLE_CALL(ladle__make_step(
        m.comm, ladle__window_gather_create(m.lx, lw, dtype, device, flags, &v->gather),
        f));
    local = ladle__make_layer(&m, local, &dadaptive_vt, v, NULL, &op);
    if (local == LADLE_OK) {
        v = NULL;
        op->linear = 1;
        if (op->be->fn->adaptive_pool_forward == NULL ||
            op->be->fn->adaptive_pool_backward == NULL)
            local = ladle__raise(LADLE_ERR_DEVICE, f,
                                 "the %s backend has no adaptive pooling kernels",
                                 op->be->fn->name);
    }
    st = ladle__make_end(&m, &op, local, out);
fail:
    ladle_op_destroy(&op);
    ladle__make_close(&m);
    da_free(v);
    ladle_layout_destroy(&lw);
    return st;
}
