/*
 * Convolution over a weight grid (see ladle/distributed.h): the channel
 * and general distributed convolutions. x is split over p_x = 1 x Pci x S
 * (S the spatial grid), y over p_y = 1 x Pco x S, and the weight's blocks
 * (out block i, in block j) live on p_w = Pco x Pci x S, one copy per tile:
 *
 *   y = R (I (x) Conv_ij) B S H P x
 *
 * P, H, S as in the spatially partitioned layer (bulk into the padded
 * tensor, halo exchange over the tiles, the box the tile's output needs);
 * B broadcasts that box from (0, j, s) of p_x to (i, j, s) of p_w; each
 * worker convolves with its block; R sums the partial outputs of (i, ., s)
 * onto (0, i, s) of p_y. The backward runs the adjoints in reverse; the
 * weight blocks' copies over the tiles have their gradients summed by
 * ladle_layer_sync_gradients (as do the bias blocks, on column j = 0).
 */
#include <stdio.h>
#include <string.h>

#include "primitives/pair.h"
#include "layers/dist.h"

typedef struct dgrid {
    int ndim, nd;                 /* tensor dimensions, spatial dimensions */
    ladle_halo_geometry g;        /* this rank's boxes on p_x */
    ladle_op *halo;               /* on p_x */
    ladle_op *bcast, *reduce;     /* B and R */
    ladle_op *local;              /* the worker's convolution, or NULL */
    ladle_tensor *padded, *gpadded, *xn, *dxn; /* on p_x */
    ladle_tensor *xb, *dyp;       /* on p_w, for calls without a ctx */
    ladle_tensor *yp, *dxp;       /* on p_w */
    ladle_tensor *own[2], *owng[2]; /* zero-volume stand-ins off the workers */
    ladle_op *sync[2];
    ladle_tensor *flat[2];        /* 1-D views of the gradients for sync */
    int *gid[2];
    int64_t *cnt[2];
    int has_bias;
    int64_t co, cig, k[3];        /* global out channels, in channels, kernel */
    int64_t co_off, ci_off;       /* this worker's blocks */
    int worker;
} dgrid;

typedef struct dctx {
    ladle_ctx *local;
    ladle_tensor *xb, *dyp;
    int dyp_ready;
} dctx;

static void dg_free(dgrid *v)
{
    if (v == NULL)
        return;
    ladle_op_destroy(&v->halo);
    ladle_op_destroy(&v->bcast);
    ladle_op_destroy(&v->reduce);
    ladle_op_destroy(&v->local);
    ladle_tensor_destroy(&v->padded);
    ladle_tensor_destroy(&v->gpadded);
    ladle_tensor_destroy(&v->xn);
    ladle_tensor_destroy(&v->dxn);
    ladle_tensor_destroy(&v->xb);
    ladle_tensor_destroy(&v->dyp);
    ladle_tensor_destroy(&v->yp);
    ladle_tensor_destroy(&v->dxp);
    for (int i = 0; i < 2; i++) {
        ladle_tensor_destroy(&v->own[i]);
        ladle_tensor_destroy(&v->owng[i]);
        ladle_tensor_destroy(&v->flat[i]);
        ladle_op_destroy(&v->sync[i]);
        ladle__free(v->gid[i]);
        ladle__free(v->cnt[i]);
    }
    ladle__free(v);
}

static ladle_status dg_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    dgrid *v = op->impl;
    dctx *c = ctx ? ctx->impl : NULL;
    ladle_tensor *xb = c ? c->xb : v->xb;
    int64_t zero[LADLE_MAX_NDIM] = {0};
    (void)n;
    LADLE_CALL(ladle__dist_box_copy(op, LADLE_BOX_COPY, v->ndim, v->g.bulk_shape, x, zero, v->padded, v->g.bulk_offset));
    LADLE_CALL(ladle_op_forward(v->halo, v->padded, v->padded));
    LADLE_CALL(ladle__dist_box_copy(op, LADLE_BOX_COPY, v->ndim, v->g.needed_shape, v->padded, v->g.needed_offset,
             v->xn, zero));
    LADLE_CALL(ladle_op_forward(v->bcast, v->xn, xb));
    if (v->local)
        LADLE_CALL(ladle_layer_forward(v->local, c ? c->local : NULL, xb, v->yp));
    LADLE_CALL(ladle_op_forward(v->reduce, v->yp, y));
    if (c)
        c->dyp_ready = 0;
fail:
    return st;
}

static ladle_status spread_dy(dgrid *v, dctx *c, const ladle_tensor *dy, ladle_tensor **dyp)
{
    ladle_status st = LADLE_OK;
    *dyp = c ? c->dyp : v->dyp;
    if (c == NULL || !c->dyp_ready) {
        LADLE_CALL(ladle_op_adjoint(v->reduce, dy, *dyp));
        if (c)
            c->dyp_ready = 1;
    }
fail:
    return st;
}

static ladle_status dg_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    dgrid *v = op->impl;
    dctx *c = ctx ? ctx->impl : NULL;
    ladle_tensor *dyp;
    int64_t zero[LADLE_MAX_NDIM] = {0};
    (void)n;
    if (dx == NULL)
        return LADLE_OK;
    LADLE_CALL(spread_dy(v, c, dy, &dyp));
    if (v->local && c)
        LADLE_CALL(ladle_layer_backward(v->local, c->local, dyp, v->dxp));
    else if (v->local)
        LADLE_CALL(ladle_op_adjoint(v->local, dyp, v->dxp));
    LADLE_CALL(ladle_op_adjoint(v->bcast, v->dxp, v->dxn));
    LADLE_CALL(ladle_tensor_fill(v->gpadded, 0.0));
    LADLE_CALL(ladle__dist_box_copy(op, LADLE_BOX_COPY, v->ndim, v->g.needed_shape, v->dxn, zero, v->gpadded,
             v->g.needed_offset));
    LADLE_CALL(ladle_op_adjoint(v->halo, v->gpadded, v->gpadded));
    LADLE_CALL(ladle__dist_box_copy(op, LADLE_BOX_COPY, v->ndim, v->g.bulk_shape, v->gpadded, v->g.bulk_offset, dx,
             zero));
fail:
    return st;
}

static ladle_status dg_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       int64_t n)
{
    ladle_status st = LADLE_OK;
    dgrid *v = op->impl;
    dctx *c = ctx->impl;
    ladle_tensor *dyp;
    (void)n;
    LADLE_CALL(spread_dy(v, c, dy, &dyp));
    if (v->local)
        LADLE_CALL(ladle_layer_backward_weight(v->local, c->local, dyp));
fail:
    return st;
}

static ladle_status dg_sync(ladle_op *op)
{
    ladle_status st = LADLE_OK;
    dgrid *v = op->impl;
    for (int i = 0; i < 2; i++)
        if (v->sync[i])
            LADLE_CALL(ladle_op_forward(v->sync[i], v->flat[i], v->flat[i]));
fail:
    return st;
}

static ladle_status dg_ctx_init(const ladle_op *op, ladle_ctx *ctx)
{
    ladle_status st = LADLE_OK;
    const dgrid *v = op->impl;
    dctx *c = ladle__calloc(1, sizeof *c);
    LADLE_CHECK(c != NULL, LADLE_ERR_ALLOC, "out of memory");
    ctx->impl = c;
    LADLE_CALL(ladle__dist_tensor(op->dtype, op->be->device, v->ndim, v->xb->shape, &c->xb));
    LADLE_CALL(ladle__dist_tensor(op->dtype, op->be->device, v->ndim, v->dyp->shape, &c->dyp));
    if (v->local)
        LADLE_CALL(ladle_ctx_create(v->local, &c->local));
fail:
    return st;
}

static void dg_ctx_fini(ladle_ctx *ctx)
{
    dctx *c = ctx->impl;
    if (c == NULL)
        return;
    ladle_ctx_destroy(&c->local);
    ladle_tensor_destroy(&c->xb);
    ladle_tensor_destroy(&c->dyp);
    ladle__free(c);
    ctx->impl = NULL;
}

static int dg_num_params(const ladle_op *op) { return ((const dgrid *)op->impl)->has_bias ? 2 : 1; }

static ladle_tensor *dg_param_at(const ladle_op *op, int i, int grad, const char **name)
{
    const dgrid *v = op->impl;
    if (name)
        *name = i == 0 ? "weight" : "bias";
    if (v->local && i < ladle_op_num_params(v->local))
        return grad ? ladle_op_grad(v->local, i) : ladle_op_param(v->local, i);
    return grad ? v->owng[i] : v->own[i];
}

static void dg_param_info(const ladle_op *op, int i, ladle__pinfo *info)
{
    const dgrid *v = op->impl;
    info->ndim = i == 0 ? v->ndim : 1;
    info->global[0] = v->co;
    info->offset[0] = v->worker ? v->co_off : 0;
    if (i == 0) {
        info->global[1] = v->cig;
        info->offset[1] = v->worker ? v->ci_off : 0;
        for (int d = 0; d < v->nd; d++)
            info->global[2 + d] = v->k[d];
    }
    /* the copy on the first tile writes */
    const ladle_partition *pw = ladle_layout_partition(ladle_op_x_layout(v->reduce));
    const int *c = ladle_partition_coords(pw);
    int first = c != NULL;
    for (int d = 2; c && d < v->ndim; d++)
        first &= c[d] == 0;
    info->owner = first && v->local && i < ladle_op_num_params(v->local);
    info->sync = v->sync[i];
    info->sync_p = v->sync[i] ? ladle_layout_partition(ladle_op_x_layout(v->sync[i])) : NULL;
    info->sync_gid = v->gid[i];
    info->sync_counts = v->cnt[i];
}

static void dg_set_training(ladle_op *op, int training)
{
    dgrid *v = op->impl;
    if (v->local)
        ladle_layer_set_training(v->local, training);
}

static void dg_destroy(ladle_op *op) { dg_free(op->impl); }

static const ladle_op_vtable dgrid_vt = {
    .kind = LADLE_OP_DIST_CONV_GRID,
    .name = "distributed convolution (weight grid)",
    .destroy = dg_destroy,
    .layer_forward = dg_forward,
    .layer_backward = dg_backward,
    .layer_backward_weight = dg_backward_weight,
    .ctx_init = dg_ctx_init,
    .ctx_fini = dg_ctx_fini,
    .num_params = dg_num_params,
    .param_at = dg_param_at,
    .param_info = dg_param_info,
    .set_training = dg_set_training,
    .sync_grads = dg_sync,
};

/* The checks every rank makes alike. */
static ladle_status validate(const ladle_conv_desc *d, const ladle_partition *p_x,
                             const ladle_partition *p_w, const ladle_partition *p_y,
                             const int64_t *xs, ladle_dtype dtype, unsigned flags,
                             const char *f)
{
    if (!ladle__is_real(dtype))
        return ladle__raise(LADLE_ERR_DTYPE, f, "dtype %s is not f32 or f64",
                            ladle_dtype_name(dtype));
    if (flags & ~(unsigned)LADLE_CHECKED)
        return ladle__raise(LADLE_ERR_ARG, f, "unknown flags 0x%x", flags);
    if (d->nd < 1 || d->nd > 3)
        return ladle__raise(LADLE_ERR_ARG, f, "%d spatial dimensions (1 to 3)", d->nd);
    int nd = 2 + d->nd;
    int64_t numel;
    ladle_status st = ladle__check_shape(f, nd, xs, &numel);
    if (st != LADLE_OK)
        return st;
    if (ladle_partition_ndim(p_x) != nd || ladle_partition_ndim(p_w) != nd ||
        ladle_partition_ndim(p_y) != nd)
        return ladle__raise(LADLE_ERR_PARTITION, f, "p_x, p_w and p_y need %d dimensions", nd);
    const int *sx = ladle_partition_shape(p_x), *sw = ladle_partition_shape(p_w),
              *sy = ladle_partition_shape(p_y);
    int fits = sx[0] == 1 && sy[0] == 1 && sw[0] == sy[1] && sw[1] == sx[1];
    for (int a = 2; a < nd; a++)
        fits &= sx[a] == sw[a] && sy[a] == sw[a];
    if (!fits)
        return ladle__raise(LADLE_ERR_PARTITION, f,
                            "p_x must be 1 x Pci x S, p_y 1 x Pco x S and p_w Pco x Pci x S");
    if (d->groups < 1)
        return ladle__raise(LADLE_ERR_ARG, f, "%lld groups", (long long)d->groups);
    if (d->groups != 1 && (sw[0] > 1 || sw[1] > 1))
        return ladle__raise(LADLE_ERR_UNSUPPORTED, f,
                            "grouped convolutions cannot split their channels");
    if (xs[1] != d->in_channels || d->in_channels < sw[1] || d->out_channels < sw[0] ||
        d->in_channels % d->groups || d->out_channels % d->groups)
        return ladle__raise(LADLE_ERR_SHAPE, f,
                            "x has %lld channels; the layer %lld in, %lld out, over %d x %d",
                            (long long)xs[1], (long long)d->in_channels,
                            (long long)d->out_channels, sw[0], sw[1]);
    char what[40];
    int64_t m = 0;
    for (int i = 0; i < d->nd; i++) {
        snprintf(what, sizeof what, "spatial dimension %d", i);
        st = ladle__window_length(f, what, xs[2 + i], d->kernel[i], d->stride[i],
                                  d->padding[i], d->dilation[i], 0, &m);
        if (st != LADLE_OK)
            return st;
        if (m < 1)
            return ladle__raise(LADLE_ERR_SHAPE, f, "the window does not fit the input");
    }
    return LADLE_OK;
}

/* An explicit layout over p: rank r's box has shape shapes[r] (offsets 0). */
static ladle_status boxes(const ladle_partition *p, int nd, const int64_t *global,
                          const int64_t *shapes, ladle_layout **l)
{
    ladle_status st = LADLE_OK;
    int64_t *off = ladle__calloc((size_t)(ladle_partition_size(p) * nd) + 1, sizeof(int64_t));
    LADLE_CHECK(off != NULL, LADLE_ERR_ALLOC, "out of memory");
    LADLE_CALL(ladle__layout_create_explicit(p, nd, global, off, shapes, l));
fail:
    ladle__free(off);
    return st;
}

ladle_status ladle_dist_conv_grid_create(const ladle_conv_desc *d, const ladle_partition *p_x,
                                         const ladle_partition *p_w, const ladle_partition *p_y,
                                         const int64_t x_shape[], ladle_dtype dtype,
                                         ladle_device device, uint64_t seed, unsigned flags,
                                         ladle_op **out)
{
    const char *f = __func__;
    ladle_status st = LADLE_OK, local;
    ladle_op *op = NULL;
    dgrid *v = NULL;
    ladle_layout *lx = NULL, *ly = NULL, *lxn = NULL, *lxb = NULL, *lyp = NULL;
    MPI_Comm comm = MPI_COMM_NULL;
    int64_t *xshapes = NULL, *bshapes = NULL, *yshapes = NULL;
    int *src_x = NULL, *src_y = NULL;
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(p_w);
    LADLE_NOT_NULL(p_y);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    const ladle_partition *parts[3] = {p_x, p_w, p_y};
    local = validate(d, p_x, p_w, p_y, x_shape, dtype, flags, f);
    int nd = 2 + d->nd;
    int64_t args[26] = {d->nd, d->in_channels, d->out_channels, d->groups, d->bias,
                        (int64_t)dtype, (int64_t)flags, (int64_t)seed};
    for (int i = 0; i < 3; i++) {
        args[8 + i] = d->kernel[i];
        args[11 + i] = d->stride[i];
        args[14 + i] = d->padding[i];
        args[17 + i] = d->dilation[i];
    }
    for (int i = 0; i < nd && i < 5 && local == LADLE_OK; i++)
        args[20 + i] = x_shape[i];
    LADLE_CALL(ladle__dist_begin(3, parts, device, local,
                                 ladle__dist_hash(LADLE_HASH_INIT, 3, parts, 26, args), &comm, f));

    /* the spatial part on p_x: halo exchange over the tiles */
    v = ladle__calloc(1, sizeof *v);
    local = v ? LADLE_OK : ladle__raise(LADLE_ERR_ALLOC, f, "out of memory");
    if (local == LADLE_OK) {
        v->ndim = nd;
        v->nd = d->nd;
        v->has_bias = d->bias != 0;
        v->co = d->out_channels;
        v->cig = d->in_channels / d->groups;
        for (int i = 0; i < d->nd; i++)
            v->k[i] = d->kernel[i];
        local = ladle_layout_create_balanced(p_x, nd, x_shape, &lx);
    }
    LADLE_CALL(ladle__dist_step(comm, local, f));
    ladle_window w;
    ladle_window_init(&w, nd);
    for (int i = 0; i < d->nd; i++) {
        w.kernel[2 + i] = d->kernel[i];
        w.stride[2 + i] = d->stride[i];
        w.padding[2 + i] = d->padding[i];
        w.dilation[2 + i] = d->dilation[i];
    }
    LADLE_CALL(ladle__dist_step(
        comm, ladle_halo_exchange_create(lx, &w, dtype, device, flags, &v->halo), f));
    ladle_halo_exchange_geometry(v->halo, &v->g);

    /* every rank's needed box (a global fact: the geometry of each rank) */
    int sx = ladle_partition_size(p_x), sw = ladle_partition_size(p_w),
        sy = ladle_partition_size(p_y);
    xshapes = ladle__calloc((size_t)(sx * nd), sizeof(int64_t));
    bshapes = ladle__calloc((size_t)(sw * nd), sizeof(int64_t));
    yshapes = ladle__calloc((size_t)(sw * nd), sizeof(int64_t));
    src_x = ladle__calloc((size_t)sw, sizeof(int));
    src_y = ladle__calloc((size_t)sw, sizeof(int));
    local = xshapes && bshapes && yshapes && src_x && src_y
                ? LADLE_OK
                : ladle__raise(LADLE_ERR_ALLOC, f, "out of memory");
    if (local == LADLE_OK && comm != MPI_COMM_NULL) {
        /* gather the needed shapes of p_x's ranks over the union */
        int64_t mine[LADLE_MAX_NDIM] = {0};
        int me = ladle_partition_rank(p_x);
        for (int a = 0; a < nd; a++)
            mine[a] = me >= 0 ? v->g.needed_shape[a] : 0;
        int64_t *all = ladle__calloc((size_t)(sx * nd), sizeof(int64_t));
        if (all == NULL)
            local = ladle__raise(LADLE_ERR_ALLOC, f, "out of memory");
        else {
            if (me >= 0)
                memcpy(all + me * nd, mine, sizeof(int64_t) * (size_t)nd);
            int rc = MPI_Allreduce(MPI_IN_PLACE, all, sx * nd, MPI_INT64_T, MPI_SUM, comm);
            if (rc != MPI_SUCCESS)
                local = ladle__raise_mpi(rc, f, "MPI_Allreduce");
            memcpy(xshapes, all, sizeof(int64_t) * (size_t)(sx * nd));
            ladle__free(all);
        }
    }
    if (local == LADLE_OK) {
        int c[LADLE_MAX_NDIM], cx[LADLE_MAX_NDIM];
        ladle_layout *lyg = NULL;
        int64_t yg[LADLE_MAX_NDIM];
        yg[0] = x_shape[0];
        yg[1] = d->out_channels;
        for (int a = 2; a < nd; a++)
            yg[a] = ladle_layout_global_shape(ladle_halo_exchange_output_layout(v->halo))[a];
        local = ladle_layout_create_balanced(p_y, nd, yg, &ly);
        for (int r = 0; local == LADLE_OK && r < sw; r++) {
            ladle_partition_coords_of(p_w, r, c);
            /* x: from (0, j, s) of p_x; y: onto (0, i, s) of p_y */
            memcpy(cx, c, sizeof c);
            cx[0] = 0;
            ladle_partition_rank_of(p_x, cx, &src_x[r]);
            cx[1] = c[0];
            ladle_partition_rank_of(p_y, cx, &src_y[r]);
            /* the needed box's channels are the tile's own (no window) */
            memcpy(bshapes + r * nd, xshapes + src_x[r] * nd, sizeof(int64_t) * (size_t)nd);
            int64_t yb[LADLE_MAX_NDIM];
            ladle_layout_box(ly, src_y[r], NULL, yb);
            memcpy(yshapes + r * nd, yb, sizeof(int64_t) * (size_t)nd);
        }
        (void)lyg;
        (void)sy;
        if (local == LADLE_OK)
            local = boxes(p_x, nd, x_shape, xshapes, &lxn);
        if (local == LADLE_OK)
            local = boxes(p_w, nd, x_shape, bshapes, &lxb);
        if (local == LADLE_OK)
            local = boxes(p_w, nd, yg, yshapes, &lyp);
    }
    LADLE_CALL(ladle__dist_step(comm, local, f));
    LADLE_CALL(ladle__dist_step(
        comm, ladle__pair_create_mapped(lxn, lxb, src_x, dtype, device, 0, &v->bcast, f), f));
    LADLE_CALL(ladle__dist_step(
        comm, ladle__pair_create_mapped(lyp, ly, src_y, dtype, device, 1, &v->reduce, f), f));

    /* the worker's convolution and the buffers */
    local = LADLE_OK;
    int64_t xb[LADLE_MAX_NDIM], ypb[LADLE_MAX_NDIM];
    ladle_layout_box(lxb, LADLE_SELF, NULL, xb);
    ladle_layout_box(lyp, LADLE_SELF, NULL, ypb);
    const int *cw = ladle_partition_coords(p_w);
    v->worker = cw != NULL;
    if (v->worker) {
        const int *sh = ladle_partition_shape(p_w);
        ladle_conv_desc ld = *d;
        for (int i = 0; i < 3; i++)
            ld.padding[i] = 0;
        ld.in_channels = xb[1];
        ld.out_channels = ladle__balanced_size(d->out_channels, sh[0], cw[0]);
        ld.bias = d->bias && cw[1] == 0;
        v->co_off = ladle__balanced_start(d->out_channels, sh[0], cw[0]);
        v->ci_off = ladle__balanced_start(d->in_channels, sh[1], cw[1]) / d->groups;
        local = ladle_conv_create(&ld, xb, dtype, device, seed, &v->local);
    }
    int64_t w0[LADLE_MAX_NDIM] = {0}, b0[1] = {0};
    if (local == LADLE_OK)
        local = ladle__dist_tensor(dtype, device, nd, v->g.padded_shape, &v->padded);
    if (local == LADLE_OK)
        local = ladle_tensor_fill(v->padded, 0.0);
    if (local == LADLE_OK)
        local = ladle__dist_tensor(dtype, device, nd, v->g.padded_shape, &v->gpadded);
    if (local == LADLE_OK)
        local = ladle__dist_tensor(dtype, device, nd, v->g.needed_shape, &v->xn);
    if (local == LADLE_OK)
        local = ladle__dist_tensor(dtype, device, nd, v->g.needed_shape, &v->dxn);
    if (local == LADLE_OK)
        local = ladle__dist_tensor(dtype, device, nd, xb, &v->xb);
    if (local == LADLE_OK)
        local = ladle__dist_tensor(dtype, device, nd, xb, &v->dxp);
    if (local == LADLE_OK)
        local = ladle__dist_tensor(dtype, device, nd, ypb, &v->yp);
    if (local == LADLE_OK)
        local = ladle__dist_tensor(dtype, device, nd, ypb, &v->dyp);
    for (int i = 0; local == LADLE_OK && i < 2; i++) {
        local = ladle__dist_tensor(dtype, device, i == 0 ? nd : 1, i == 0 ? w0 : b0, &v->own[i]);
        if (local == LADLE_OK)
            local =
                ladle__dist_tensor(dtype, device, i == 0 ? nd : 1, i == 0 ? w0 : b0, &v->owng[i]);
    }
    LADLE_CALL(ladle__dist_step(comm, local, f));

    /* the weight blocks' copies over the tiles: summed gradients */
    const int *sh = ladle_partition_shape(p_w);
    int tiles = 1;
    for (int a = 2; a < nd; a++)
        tiles *= sh[a];
    if (tiles > 1) {
        for (int i = 0; i < 1 + v->has_bias && local == LADLE_OK; i++) {
            v->gid[i] = ladle__calloc((size_t)sw, sizeof(int));
            v->cnt[i] = ladle__calloc((size_t)sw, sizeof(int64_t));
            if (!v->gid[i] || !v->cnt[i]) {
                local = ladle__raise(LADLE_ERR_ALLOC, f, "out of memory");
                break;
            }
            int64_t kv = 1;
            for (int a = 0; a < d->nd; a++)
                kv *= d->kernel[a];
            for (int r = 0; r < sw; r++) {
                int c[LADLE_MAX_NDIM];
                ladle_partition_coords_of(p_w, r, c);
                int64_t co = ladle__balanced_size(d->out_channels, sh[0], c[0]);
                int64_t ci = ladle__balanced_size(d->in_channels, sh[1], c[1]) / d->groups;
                int has = i == 0 || c[1] == 0;
                v->gid[i][r] = has ? c[0] * sh[1] + c[1] : sh[0] * sh[1] + r;
                v->cnt[i][r] = !has ? 0 : i == 0 ? co * ci * kv : co;
            }
            local = ladle__dist_step(comm,
                                     ladle__all_sum_reduce_groups(p_w, v->gid[i], v->cnt[i], dtype,
                                                                  device, flags, &v->sync[i]),
                                     f);
            if (local == LADLE_OK) {
                ladle_tensor *g = v->local && i < ladle_op_num_params(v->local)
                                      ? ladle_op_grad(v->local, i)
                                      : v->owng[i];
                int64_t n = ladle_tensor_numel(g);
                local = ladle_tensor_wrap(dtype, device, 1, &n, NULL, g->data, &v->flat[i]);
            }
        }
        LADLE_CALL(ladle__dist_step(comm, local, f));
    }

    int64_t lys[LADLE_MAX_NDIM];
    ladle_layout_box(ly, LADLE_SELF, NULL, lys);
    local =
        ladle__layer_new(&dgrid_vt, dtype, device, nd, v->g.bulk_shape, nd, lys, 0, &op, __func__);
    if (local == LADLE_OK) {
        op->impl = v;
        v = NULL;
        op->comm = comm;
        op->active = comm != MPI_COMM_NULL;
        comm = MPI_COMM_NULL;
        op->flags = ladle__op_flags_from_env(flags);
        op->x_layout = ladle__layout_retain(lx);
        op->y_layout = ladle__layout_retain(ly);
        double kv = 1;
        for (int i = 0; i < d->nd; i++)
            kv *= (double)d->kernel[i];
        op->weighted = 1;
        op->linear = !d->bias;
        op->fan_in = (double)(d->in_channels / d->groups) * kv;
        op->fan_out = (double)(d->out_channels / d->groups) * kv;
        local = ladle_layer_init(op, LADLE_INIT_DEFAULT, seed);
    }
    st = ladle__dist_step(op ? op->comm : comm, local, f);
    if (st == LADLE_OK) {
        *out = op;
        op = NULL;
    }
fail:
    if (comm != MPI_COMM_NULL)
        MPI_Comm_free(&comm);
    ladle_op_destroy(&op);
    dg_free(v);
    ladle_layout_destroy(&lx);
    ladle_layout_destroy(&ly);
    ladle_layout_destroy(&lxn);
    ladle_layout_destroy(&lxb);
    ladle_layout_destroy(&lyp);
    ladle__free(xshapes);
    ladle__free(bshapes);
    ladle__free(yshapes);
    ladle__free(src_x);
    ladle__free(src_y);
    return st;
}
