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
    ladle__dist_window w;
} dinterp;

static void di_free(dinterp *v)
{
    if (v == NULL)
        return;
    ladle__dist_window_free(&v->w);
    ladle__free(v);
}

static ladle_status di_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    dinterp *v = op->impl;
    (void)ctx, (void)n;
    LADLE_CALL(ladle_op_forward(v->w.gather, x, v->w.xw));
    if (y->numel > 0)
        LADLE_CALL(op->be->fn->interp_forward(op->be, op->dtype, &v->g, v->w.planes,
                                              v->w.xw->data, y->data));
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
    if (v->w.dxw->numel > 0)
        LADLE_CALL(op->be->fn->interp_backward(op->be, op->dtype, &v->g, v->w.planes,
                                               dy->data, v->w.dxw->data));
    LADLE_CALL(ladle_op_adjoint(v->w.gather, v->w.dxw, dx));
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

/* The taps the outputs lo..hi read along axis a (a ladle__dist_span). */
static void span(const void *geom, int a, int64_t lo, int64_t hi, int64_t *x_lo,
                 int64_t *x_hi)
{
    int64_t t[2];
    double w[2];
    ladle__interp_taps(geom, a, lo, t, w);
    *x_lo = t[0];
    ladle__interp_taps(geom, a, hi, t, w);
    *x_hi = t[1];
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
    dinterp spare = {0}, *p = v ? v : &spare; /* untouched when local failed */
    if (local == LADLE_OK)
        p->g = g;
    int64_t *const box[4] = {p->g.x_off, p->g.x_n, p->g.y_off, p->g.y_n};
    LADLE_CALL(ladle__dist_window_make(&m, local, p_x, d->nd, x_shape, ys, &p->g, span, box,
                                       &p->w));
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
    return st;
}
