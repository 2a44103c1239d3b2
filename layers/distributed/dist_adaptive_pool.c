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
    ladle__dist_window w;
} dadaptive;

static void da_free(dadaptive *v)
{
    if (v == NULL)
        return;
    ladle__dist_window_free(&v->w);
    ladle__free(v);
}

static ladle_status da_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    dadaptive *v = op->impl;
    (void)ctx, (void)n;
    LADLE_CALL(ladle_op_forward(v->w.gather, x, v->w.xw));
    if (y->numel > 0)
        LADLE_CALL(op->be->fn->adaptive_pool_forward(op->be, op->dtype, &v->g, v->w.planes,
                                                     v->w.xw->data, y->data));
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
    if (v->w.dxw->numel > 0)
        LADLE_CALL(op->be->fn->adaptive_pool_backward(op->be, op->dtype, &v->g, v->w.planes,
                                                      dy->data, v->w.dxw->data));
    LADLE_CALL(ladle_op_adjoint(v->w.gather, v->w.dxw, dx));
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

/* The inputs the outputs lo..hi average along axis a (a ladle__dist_span). */
static void span(const void *geom, int a, int64_t lo, int64_t hi, int64_t *x_lo,
                 int64_t *x_hi)
{
    const ladle_adaptive_geom *g = geom;
    int64_t b, e;
    ladle__adaptive_window(g->in[a], g->out[a], lo, x_lo, &e);
    ladle__adaptive_window(g->in[a], g->out[a], hi, &b, &e);
    *x_hi = e - 1;
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
    dadaptive spare = {0}, *p = v ? v : &spare; /* untouched when local failed */
    if (local == LADLE_OK)
        p->g = g;
    int64_t *const box[4] = {p->g.x_off, p->g.x_n, p->g.y_off, p->g.y_n};
    LADLE_CALL(ladle__dist_window_make(&m, local, p_x, ndim - 2, x_shape, ys, &p->g, span,
                                       box, &p->w));
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
    return st;
}
