/*
 * The window-gather layers (see dist_window.h): y = K W x, dx = W* K* dy,
 * with W the gather of every rank's window from the owners of its cells
 * (a box exchange like a repartition's, to boxes that overlap) and K the
 * sequential kernels of planes run on the window into the tile at global
 * coordinates (the geometry's window and tile offsets). K* scatters dy
 * into the window, W* adds every window back into the owners of its cells.
 */
#include "layers/distributed/dist_window.h"

typedef struct dwindow {
    ladle__planes p;   /* global extents; this rank's window and tile */
    int64_t planes;    /* this rank's samples x channels */
    ladle_op *gather;  /* W */
    ladle_tensor *xw;  /* the window (forward) */
    ladle_tensor *dxw; /* its gradient (backward) */
} dwindow;

static const ladle__part dwindow_parts[] = {
    LADLE__PART_OP(dwindow, gather), LADLE__PART_TENSOR(dwindow, xw),
    LADLE__PART_TENSOR(dwindow, dxw), LADLE__PARTS_END};

static ladle_status dw_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    dwindow *v = op->impl;
    (void)n;
    LADLE_CALL(ladle_op_forward(v->gather, x, v->xw));
    if (y->numel > 0)
        LADLE_CALL(ladle__planes_forward(op, &v->p, v->planes, v->xw->data, y->data,
                                         ctx ? ctx->buf : NULL));
fail:
    return st;
}

static ladle_status dw_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    dwindow *v = op->impl;
    (void)n;
    if (dx == NULL)
        return LADLE_OK;
    if (v->dxw->numel > 0)
        LADLE_CALL(ladle__planes_backward(op, &v->p, v->planes, dy->data, v->dxw->data,
                                          ctx ? ctx->buf : NULL));
    LADLE_CALL(ladle_op_adjoint(v->gather, v->dxw, dx));
fail:
    return st;
}

static void dw_destroy(ladle_op *op) { ladle__parts_free(op->impl, dwindow_parts, NULL); }

/* By kind of planes: the gather and the kernels are the layer, so only the
 * name differs. */
static const ladle_op_vtable dwindow_vt[] = {
    [LADLE__PLANES_ADAPTIVE] = {.kind = LADLE_OP_DIST_ADAPTIVE_POOL,
                                .name = "distributed adaptive average pooling",
                                .destroy = dw_destroy,
                                .layer_forward = dw_forward,
                                .layer_backward = dw_backward},
    [LADLE__PLANES_INTERP] = {.kind = LADLE_OP_DIST_INTERPOLATE,
                              .name = "distributed interpolation",
                              .destroy = dw_destroy,
                              .layer_forward = dw_forward,
                              .layer_backward = dw_backward},
    [LADLE__PLANES_ADAPTIVE_MAX] = {.kind = LADLE_OP_DIST_ADAPTIVE_MAX_POOL,
                                    .name = "distributed adaptive max pooling",
                                    .destroy = dw_destroy,
                                    .layer_forward = dw_forward,
                                    .layer_backward = dw_backward},
};

/* Rank r's window (offset and extents in x): x's block in the batch and
 * channels, the span of its output tile in space; nothing when the tile is
 * empty. */
static void window_of(const ladle__make *m, int nd, const ladle__planes *p, int r,
                      int64_t *off, int64_t *ext)
{
    int64_t yo[LADLE_MAX_NDIM], yn[LADLE_MAX_NDIM], vol = 1;
    int ndim = 2 + nd;
    ladle_layout_box(m->lx, r, off, ext);
    ladle_layout_box(m->ly, r, yo, yn);
    for (int d = 0; d < ndim; d++)
        vol *= yn[d];
    for (int s = 0; s < nd && vol > 0; s++) {
        int64_t lo, hi;
        ladle__planes_span(p, 3 - nd + s, yo[2 + s], yo[2 + s] + yn[2 + s] - 1, &lo, &hi);
        off[2 + s] = lo;
        ext[2 + s] = hi - lo + 1;
    }
    if (vol == 0)
        for (int d = 0; d < ndim; d++)
            off[d] = ext[d] = 0;
}

/* The windows' layout on p_x, this rank's window and tile into the
 * geometry's boxes, the tensors. */
static ladle_status plan_windows(ladle__make *m, const ladle_partition *p_x, int nd,
                                 const int64_t *xs, dwindow *v, ladle_layout **lw)
{
    ladle_status st = LADLE_OK;
    int size = ladle_partition_size(p_x), ndim = 2 + nd;
    int64_t *box[4];
    int64_t *off = ladle__calloc((size_t)(size * ndim), sizeof(int64_t));
    int64_t *ext = ladle__calloc((size_t)(size * ndim), sizeof(int64_t));
    LADLE_CHECK(off && ext, LADLE_ERR_ALLOC, "out of memory");
    for (int r = 0; r < size; r++)
        window_of(m, nd, &v->p, r, off + r * ndim, ext + r * ndim);
    LADLE_CALL(ladle__layout_create_explicit(p_x, ndim, xs, off, ext, lw));
    int64_t wo[LADLE_MAX_NDIM], wn[LADLE_MAX_NDIM], yo[LADLE_MAX_NDIM], yn[LADLE_MAX_NDIM];
    ladle_layout_box(*lw, LADLE_SELF, wo, wn);
    ladle_layout_box(m->ly, LADLE_SELF, yo, yn);
    v->planes = wn[0] * wn[1];
    ladle__planes_boxes(&v->p, box);
    for (int s = 0; s < nd; s++) {
        int a = 3 - nd + s;
        box[0][a] = wo[2 + s];
        box[1][a] = wn[2 + s];
        box[2][a] = yo[2 + s];
        box[3][a] = yn[2 + s];
    }
    LADLE_CALL(ladle__dist_tensor(m->dtype, m->device, ndim, wn, &v->xw));
    LADLE_CALL(ladle__dist_tensor(m->dtype, m->device, ndim, wn, &v->dxw));
fail:
    ladle__free(off);
    ladle__free(ext);
    return st;
}

/* m's layouts of x and y over p_x, the windows, then W; each step agreed
 * over m's communicator. */
static ladle_status plan(ladle__make *m, ladle_status local, const ladle_partition *p_x,
                         int nd, const int64_t *xs, const int64_t *ys, dwindow *v)
{
    ladle_status st = LADLE_OK;
    ladle_layout *lw = NULL;
    if (local == LADLE_OK)
        local = ladle_layout_create_balanced(p_x, 2 + nd, xs, &m->lx);
    if (local == LADLE_OK)
        local = ladle_layout_create_balanced(p_x, 2 + nd, ys, &m->ly);
    if (local == LADLE_OK)
        local = plan_windows(m, p_x, nd, xs, v, &lw);
    LADLE_CALL(ladle__make_step(m->comm, local, m->func));
    LADLE_CALL(ladle__make_step(
        m->comm,
        ladle__window_gather_create(m->lx, lw, m->dtype, m->device, m->flags, &v->gather),
        m->func));
fail:
    ladle_layout_destroy(&lw);
    return st;
}

ladle_status ladle__dist_window_create(ladle__make *m, ladle_status local, uint64_t hash,
                                       const ladle_partition *p_x, const ladle__planes *p,
                                       int nd, const int64_t *xs, const int64_t *ys,
                                       ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    dwindow *v = NULL;
    LADLE_CALL(ladle__make_open(m, 1, &p_x, local, hash));
    v = ladle__calloc(1, sizeof *v);
    local = ladle__make_alloc_ok(m, v != NULL);
    dwindow spare = {0}, *w = v ? v : &spare; /* untouched when local failed */
    if (local == LADLE_OK)
        w->p = *p;
    LADLE_CALL(plan(m, local, p_x, nd, xs, ys, w));
    local = ladle__make_layer(m, local, &dwindow_vt[p->kind], v, NULL, &op);
    if (local == LADLE_OK) {
        v = NULL;
        op->linear = ladle__planes_linear(p->kind);
        if (!op->linear) /* the max's winners, an int64 per element of the tile */
            op->ctx_bytes = (size_t)op->y_numel * sizeof(int64_t);
        local = ladle__planes_check_backend(op, p->kind, m->func);
    }
    st = ladle__make_end(m, &op, local, out);
fail:
    ladle_op_destroy(&op);
    ladle__make_close(m);
    ladle__parts_free(v, dwindow_parts, NULL);
    return st;
}
