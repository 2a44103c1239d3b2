/*
 * Convolution over a weight grid (see ladle/distributed.h): the channel
 * and general distributed convolutions. x is split over p_x = 1 x Pci x S
 * (S the spatial grid), y over p_y = 1 x Pco x S, and the weight's blocks
 * (out block i, in block j) live on p_w = Pco x Pci x S, one copy per tile:
 *
 *   y = R (I (x) Conv_ij) B S H P x
 *
 * P, H, S as in the spatially partitioned layer (bulk into the padded
 * tensor, halo exchange over the tiles, the box the tile's output needs;
 * with reflect or replicate padding H is followed by the fill of the global
 * edges from the cells in place, with circular padding H wraps around);
 * B broadcasts that box from (0, j, s) of p_x to (i, j, s) of p_w; each
 * worker convolves with its block; R sums the partial outputs of (i, ., s)
 * onto (0, i, s) of p_y. The backward runs the adjoints in reverse; the
 * weight blocks' copies over the tiles have their gradients summed by
 * ladle_layer_sync_gradients (as do the bias blocks, on column j = 0).
 */
#include <stdio.h>
#include <string.h>

#include "layers/distributed/dist.h"
#include "layers/sequential/pad_impl.h"
#include "primitives/pair.h"

typedef struct dgrid {
    /* local: the worker's convolution, or NULL; param/grad: zero-volume
     * stand-ins off the workers; sync: the sums of the blocks' copies */
    ladle__dist_base base;
    int ndim, nd;                              /* tensor dimensions, spatial dimensions */
    ladle_halo_geometry g;                     /* this rank's boxes on p_x */
    ladle_op *halo;                            /* on p_x */
    ladle__dist_grid grid;                     /* B, R and their tensors on p_w */
    ladle_tensor *padded, *gpadded, *xn, *dxn; /* on p_x */
    int64_t co, cig, k[3];  /* global out channels, in channels, kernel */
    int64_t co_off, ci_off; /* this worker's blocks */
    int worker;
    ladle_padding_mode mode;           /* reflect and replicate: filled after H */
    ladle__pad_dim pd[LADLE_MAX_NDIM]; /* the padded tensor's dimensions */
} dgrid;

static const ladle__part dgrid_parts[] = {
    LADLE__PART_DIST_BASE(dgrid),       LADLE__PART_OP(dgrid, halo),
    LADLE__PART_DIST_GRID(dgrid),       LADLE__PART_TENSOR(dgrid, padded),
    LADLE__PART_TENSOR(dgrid, gpadded), LADLE__PART_TENSOR(dgrid, xn),
    LADLE__PART_TENSOR(dgrid, dxn),     LADLE__PARTS_END};

/* Whether the layer fills the padding cells after the exchange (reflect,
 * replicate): zeros are written once, circular padding is the exchange's. */
static int pads_edges(const dgrid *v)
{
    return v->mode != LADLE_PAD_ZEROS && v->mode != LADLE_PAD_CIRCULAR;
}

static ladle_status dg_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    dgrid *v = op->impl;
    int64_t zero[LADLE_MAX_NDIM] = {0};
    (void)n;
    LADLE_CALL(ladle__dist_halo_in(op, v->halo, &v->g, x, v->padded));
    if (pads_edges(v))
        LADLE_CALL(ladle__pad_fill(op->be, op->dtype, v->mode, v->ndim, v->g.padded_shape,
                                   v->pd, v->padded->data, 0));
    LADLE_CALL(ladle__dist_box_copy(op, LADLE_BOX_COPY, v->ndim, v->g.needed_shape,
                                    v->padded, v->g.needed_offset, v->xn, zero));
    st = ladle__dist_grid_forward(&v->base, &v->grid, ctx ? ctx->impl : NULL, v->xn, y);
fail:
    return st;
}

static ladle_status dg_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    dgrid *v = op->impl;
    int64_t zero[LADLE_MAX_NDIM] = {0};
    (void)n;
    if (dx == NULL)
        return LADLE_OK;
    LADLE_CALL(
        ladle__dist_grid_backward(&v->base, &v->grid, ctx ? ctx->impl : NULL, dy, v->dxn));
    LADLE_CALL(ladle_tensor_fill(v->gpadded, 0.0));
    LADLE_CALL(ladle__dist_box_copy(op, LADLE_BOX_COPY, v->ndim, v->g.needed_shape, v->dxn,
                                    zero, v->gpadded, v->g.needed_offset));
    if (pads_edges(v)) /* the edges' gradients folded back into the cells they read */
        LADLE_CALL(ladle__pad_fill(op->be, op->dtype, v->mode, v->ndim, v->g.padded_shape,
                                   v->pd, v->gpadded->data, 1));
    LADLE_CALL(ladle__dist_halo_out(op, v->halo, &v->g, v->gpadded, dx));
fail:
    return st;
}

static ladle_status dg_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       int64_t n)
{
    dgrid *v = op->impl;
    (void)n;
    return ladle__dist_grid_backward_weight(&v->base, &v->grid, ctx->impl, dy);
}

static void dg_param_info(const ladle_op *op, int i, ladle__pinfo *info)
{
    const dgrid *v = op->impl;
    const ladle__dist_base *b = &v->base;
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
    const ladle_partition *pw = ladle_layout_partition(ladle_op_x_layout(v->grid.reduce));
    const int *c = ladle_partition_coords(pw);
    int first = c != NULL;
    for (int d = 2; c && d < v->ndim; d++)
        first &= c[d] == 0;
    info->owner = first && b->local && i < ladle_op_num_params(b->local);
    ladle__dist_sync_info(b->sync[i], b->gid[i], b->cnt[i], info);
}

static void dg_destroy(ladle_op *op) { ladle__parts_free(op->impl, dgrid_parts, NULL); }

static const ladle_op_vtable dgrid_vt = {
    .kind = LADLE_OP_DIST_CONV_GRID,
    .name = "distributed convolution (weight grid)",
    .destroy = dg_destroy,
    .layer_forward = dg_forward,
    .layer_backward = dg_backward,
    .layer_backward_weight = dg_backward_weight,
    .param_info = dg_param_info,
    LADLE__DIST_BASE_SLOTS,
};

/* Whether every rank can pad the global edges from its own padded tensor:
 * reflect reads padding + 1 cells of the edge blocks, replicate 1 (the
 * smallest block of a split dimension must hold them); circular padding is
 * the exchange's wrap-around and needs no edge block. Global facts. */
static ladle_status check_modes(const ladle_conv_desc *d, const int *sx, const int64_t *xs,
                                const char *f)
{
    for (int i = 0; i < d->nd && d->padding_mode != LADLE_PAD_ZEROS; i++) {
        int64_t p = d->padding[i], n = xs[2 + i];
        int64_t need = d->padding_mode == LADLE_PAD_REFLECT ? p + 1 : 1;
        if (p == 0)
            continue;
        if (!ladle__pad_fits(d->padding_mode, p, p, n))
            return ladle__raise(
                LADLE_ERR_ARG, f,
                "%s padding of %lld cells does not fit spatial dimension %d "
                "of extent %lld",
                ladle__pad_name(d->padding_mode), (long long)p, i, (long long)n);
        if (sx[2 + i] > 1 && d->padding_mode != LADLE_PAD_CIRCULAR && n / sx[2 + i] < need)
            return ladle__raise(
                LADLE_ERR_UNSUPPORTED, f,
                "%s padding of spatial dimension %d reads %lld cells of the "
                "edge blocks, and p_x splits its %lld cells %d ways",
                ladle__pad_name(d->padding_mode), i, (long long)need, (long long)n,
                sx[2 + i]);
    }
    return LADLE_OK;
}

/* The checks every rank makes alike. */
static ladle_status validate(const ladle_conv_desc *d, const ladle_partition *p_x,
                             const ladle_partition *p_w, const ladle_partition *p_y,
                             const int64_t *xs, ladle_dtype dtype, unsigned flags,
                             const char *f)
{
    ladle_status st = ladle__make_check_kind(dtype, flags, f);
    if (st != LADLE_OK)
        return st;
    if (d->nd < 1 || d->nd > 3)
        return ladle__raise(LADLE_ERR_ARG, f, "%d spatial dimensions (1 to 3)", d->nd);
    int nd = 2 + d->nd;
    int64_t numel;
    st = ladle__check_shape(f, nd, xs, &numel);
    if (st != LADLE_OK)
        return st;
    if (ladle_partition_ndim(p_x) != nd || ladle_partition_ndim(p_w) != nd ||
        ladle_partition_ndim(p_y) != nd)
        return ladle__raise(LADLE_ERR_PARTITION, f, "p_x, p_w and p_y need %d dimensions",
                            nd);
    const int *sx = ladle_partition_shape(p_x), *sw = ladle_partition_shape(p_w),
              *sy = ladle_partition_shape(p_y);
    int fits = sx[0] == 1 && sy[0] == 1 && sw[0] == sy[1] && sw[1] == sx[1];
    for (int a = 2; a < nd; a++)
        fits &= sx[a] == sw[a] && sy[a] == sw[a];
    if (!fits)
        return ladle__raise(
            LADLE_ERR_PARTITION, f,
            "p_x must be 1 x Pci x S, p_y 1 x Pco x S and p_w Pco x Pci x S");
    if (d->groups < 1)
        return ladle__raise(LADLE_ERR_ARG, f, "%lld groups", (long long)d->groups);
    if (d->same)
        return ladle__raise(LADLE_ERR_UNSUPPORTED, f,
                            "the weight grid takes explicit padding, not 'same' "
                            "(ladle_dist_conv_create takes it)");
    if (ladle__pad_name(d->padding_mode) == NULL)
        return ladle__raise(LADLE_ERR_ARG, f, "unknown padding mode %d",
                            (int)d->padding_mode);
    if (d->groups != 1 && (sw[0] > 1 || sw[1] > 1))
        return ladle__raise(LADLE_ERR_UNSUPPORTED, f,
                            "grouped convolutions cannot split their channels");
    if (xs[1] != d->in_channels || d->in_channels < sw[1] || d->out_channels < sw[0] ||
        d->in_channels % d->groups || d->out_channels % d->groups)
        return ladle__raise(
            LADLE_ERR_SHAPE, f,
            "x has %lld channels; the layer %lld in, %lld out, over %d x %d",
            (long long)xs[1], (long long)d->in_channels, (long long)d->out_channels, sw[0],
            sw[1]);
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
    return check_modes(d, sx, xs, f);
}

/* An explicit layout over p: rank r's box has shape shapes[r] (offsets 0). */
static ladle_status boxes(const ladle_partition *p, int nd, const int64_t *global,
                          const int64_t *shapes, ladle_layout **l)
{
    ladle_status st = LADLE_OK;
    int64_t *off =
        ladle__calloc((size_t)(ladle_partition_size(p) * nd) + 1, sizeof(int64_t));
    LADLE_CHECK(off != NULL, LADLE_ERR_ALLOC, "out of memory");
    LADLE_CALL(ladle__layout_create_explicit(p, nd, global, off, shapes, l));
fail:
    ladle__free(off);
    return st;
}

/* A creation's temporaries: every rank's needed box on p_x, the boxes on
 * p_w of the broadcast x and the partial y, where each comes from or goes
 * to, and their layouts. */
typedef struct plan {
    int64_t *xshapes, *bshapes, *yshapes;
    int *src_x, *src_y;
    ladle_layout *lxn, *lxb, *lyp;
} plan;

static void plan_free(plan *pl)
{
    ladle__free(pl->xshapes);
    ladle__free(pl->bshapes);
    ladle__free(pl->yshapes);
    ladle__free(pl->src_x);
    ladle__free(pl->src_y);
    ladle_layout_destroy(&pl->lxn);
    ladle_layout_destroy(&pl->lxb);
    ladle_layout_destroy(&pl->lyp);
}

/* Every rank's needed box (a global fact: the geometry of each rank),
 * summed over the union from each rank of p_x's own. */
static ladle_status gather_needed(ladle__make *m, const dgrid *v,
                                  const ladle_partition *p_x, int64_t *xshapes)
{
    int nd = v->ndim, me = ladle_partition_rank(p_x);
    if (m->comm == MPI_COMM_NULL)
        return LADLE_OK;
    if (me >= 0)
        memcpy(xshapes + me * nd, v->g.needed_shape, sizeof(int64_t) * (size_t)nd);
    int rc = MPI_Allreduce(MPI_IN_PLACE, xshapes, ladle_partition_size(p_x) * nd,
                           MPI_INT64_T, MPI_SUM, m->comm);
    return rc == MPI_SUCCESS ? LADLE_OK : ladle__raise_mpi(rc, m->func, "MPI_Allreduce");
}

/* y's layout on p_y, and the boxes of B's and R's sides on p_w: worker
 * (i, j, s) takes the box of (0, j, s) of p_x and sends onto (0, i, s) of
 * p_y. Local. */
static ladle_status plan_boxes(ladle__make *m, const dgrid *v, const ladle_conv_desc *d,
                               const ladle_partition *p_x, const ladle_partition *p_w,
                               const ladle_partition *p_y, const int64_t *x_shape, plan *pl)
{
    ladle_status st = LADLE_OK;
    int nd = v->ndim, sw = ladle_partition_size(p_w), c[LADLE_MAX_NDIM], cx[LADLE_MAX_NDIM];
    int64_t yg[LADLE_MAX_NDIM];
    yg[0] = x_shape[0];
    yg[1] = d->out_channels;
    for (int a = 2; a < nd; a++)
        yg[a] = ladle_layout_global_shape(ladle_halo_exchange_output_layout(v->halo))[a];
    LADLE_CALL(ladle_layout_create_balanced(p_y, nd, yg, &m->ly));
    for (int r = 0; r < sw; r++) {
        ladle_partition_coords_of(p_w, r, c);
        memcpy(cx, c, sizeof c);
        cx[0] = 0;
        ladle_partition_rank_of(p_x, cx, &pl->src_x[r]);
        cx[1] = c[0];
        ladle_partition_rank_of(p_y, cx, &pl->src_y[r]);
        /* the needed box's channels are the tile's own (no window) */
        memcpy(pl->bshapes + r * nd, pl->xshapes + pl->src_x[r] * nd,
               sizeof(int64_t) * (size_t)nd);
        ladle_layout_box(m->ly, pl->src_y[r], NULL, pl->yshapes + r * nd);
    }
    LADLE_CALL(boxes(p_x, nd, x_shape, pl->xshapes, &pl->lxn));
    LADLE_CALL(boxes(p_w, nd, x_shape, pl->bshapes, &pl->lxb));
    LADLE_CALL(boxes(p_w, nd, yg, pl->yshapes, &pl->lyp));
fail:
    return st;
}

/* The arguments every rank must pass alike (x's shape where it is valid). */
static uint64_t args_hash(const ladle_conv_desc *d, const ladle_partition *const *parts,
                          const int64_t *x_shape, int valid, uint64_t seed,
                          const ladle__make *m)
{
    int64_t args[26] = {d->nd,   d->in_channels,    d->out_channels,   d->groups,
                        d->bias, (int64_t)m->dtype, (int64_t)m->flags, (int64_t)seed};
    for (int i = 0; i < 3; i++) {
        args[8 + i] = d->kernel[i];
        args[11 + i] = d->stride[i];
        args[14 + i] = d->padding[i];
        args[17 + i] = d->dilation[i];
    }
    for (int i = 0; i < 2 + d->nd && i < 5 && valid; i++)
        args[20 + i] = x_shape[i];
    args[25] = (int64_t)d->padding_mode;
    return ladle__make_hash(LADLE_HASH_INIT, 3, parts, 26, args);
}

/* The boxes and layouts of B's and R's sides (every step agreed), then B
 * and R themselves. */
static ladle_status plan_ops(ladle__make *m, dgrid *v, const ladle_conv_desc *d,
                             const ladle_partition *p_x, const ladle_partition *p_w,
                             const ladle_partition *p_y, const int64_t *x_shape, plan *pl)
{
    ladle_status st = LADLE_OK, local;
    const char *f = m->func;
    int nd = v->ndim, sx = ladle_partition_size(p_x), sw = ladle_partition_size(p_w);
    pl->xshapes = ladle__calloc((size_t)(sx * nd), sizeof(int64_t));
    pl->bshapes = ladle__calloc((size_t)(sw * nd), sizeof(int64_t));
    pl->yshapes = ladle__calloc((size_t)(sw * nd), sizeof(int64_t));
    pl->src_x = ladle__calloc((size_t)sw, sizeof(int));
    pl->src_y = ladle__calloc((size_t)sw, sizeof(int));
    LADLE_CALL(
        ladle__make_step(m->comm,
                         ladle__make_alloc_ok(m, pl->xshapes && pl->bshapes &&
                                                     pl->yshapes && pl->src_x && pl->src_y),
                         f));
    local = gather_needed(m, v, p_x, pl->xshapes);
    if (local == LADLE_OK)
        local = plan_boxes(m, v, d, p_x, p_w, p_y, x_shape, pl);
    LADLE_CALL(ladle__make_step(m->comm, local, f));
    LADLE_CALL(
        ladle__make_step(m->comm,
                         ladle__pair_create_mapped(pl->lxn, pl->lxb, pl->src_x, m->dtype,
                                                   m->device, 0, &v->grid.bcast, f),
                         f));
    LADLE_CALL(
        ladle__make_step(m->comm,
                         ladle__pair_create_mapped(pl->lyp, m->ly, pl->src_y, m->dtype,
                                                   m->device, 1, &v->grid.reduce, f),
                         f));
fail:
    return st;
}

/* The worker's convolution (its blocks of channels, its bias on column 0)
 * and every buffer. Local. */
static ladle_status allocate(ladle__make *m, dgrid *v, const ladle_conv_desc *d,
                             const ladle_partition *p_w, const plan *pl, uint64_t seed)
{
    ladle_status st = LADLE_OK;
    ladle_dtype dt = m->dtype;
    ladle_device dev = m->device;
    int nd = v->ndim;
    int64_t xb[LADLE_MAX_NDIM], ypb[LADLE_MAX_NDIM], w0[LADLE_MAX_NDIM] = {0}, b0[1] = {0};
    ladle_layout_box(pl->lxb, LADLE_SELF, NULL, xb);
    ladle_layout_box(pl->lyp, LADLE_SELF, NULL, ypb);
    const int *cw = ladle_partition_coords(p_w);
    v->worker = cw != NULL;
    if (v->worker) {
        const int *sh = ladle_partition_shape(p_w);
        ladle_conv_desc ld = *d;
        ld.flags = 0;
        for (int i = 0; i < 3; i++)
            ld.padding[i] = 0;
        ld.in_channels = xb[1];
        ld.out_channels = ladle__balanced_size(d->out_channels, sh[0], cw[0]);
        ld.bias = d->bias && cw[1] == 0;
        v->co_off = ladle__balanced_start(d->out_channels, sh[0], cw[0]);
        v->ci_off = ladle__balanced_start(d->in_channels, sh[1], cw[1]) / d->groups;
        LADLE_CALL(ladle_conv_create(&ld, xb, dt, dev, seed, &v->base.local));
    }
    LADLE_CALL(ladle__dist_tensor(dt, dev, nd, v->g.padded_shape, &v->padded));
    LADLE_CALL(ladle_tensor_fill(v->padded, 0.0));
    LADLE_CALL(ladle__dist_tensor(dt, dev, nd, v->g.padded_shape, &v->gpadded));
    LADLE_CALL(ladle__dist_tensor(dt, dev, nd, v->g.needed_shape, &v->xn));
    LADLE_CALL(ladle__dist_tensor(dt, dev, nd, v->g.needed_shape, &v->dxn));
    LADLE_CALL(ladle__dist_tensor(dt, dev, nd, xb, &v->grid.xb));
    LADLE_CALL(ladle__dist_tensor(dt, dev, nd, xb, &v->grid.dxp));
    LADLE_CALL(ladle__dist_tensor(dt, dev, nd, ypb, &v->grid.yp));
    LADLE_CALL(ladle__dist_tensor(dt, dev, nd, ypb, &v->grid.dyp));
    for (int i = 0; i < 2; i++) {
        int n = i == 0 ? nd : 1;
        const int64_t *s = i == 0 ? w0 : b0;
        LADLE_CALL(ladle__dist_param(dt, dev, n, s, &v->base.param[i]));
        LADLE_CALL(ladle__dist_grad(dt, dev, n, s, &v->base.grad[i]));
    }
    v->base.nsaved = 2;
    v->base.saved_like[0] = v->grid.xb;
    v->base.saved_like[1] = v->grid.dyp;
fail:
    return st;
}

/* The weight blocks' copies over the tiles: one group per block (rank r
 * of p_w), the bias blocks on column 0. */
typedef struct tiles_arg {
    const ladle_conv_desc *d;
    const ladle_partition *p_w;
} tiles_arg;

static void tile_group(const void *arg, int i, int r, int *gid, int64_t *count)
{
    const ladle_conv_desc *d = ((const tiles_arg *)arg)->d;
    const ladle_partition *p_w = ((const tiles_arg *)arg)->p_w;
    const int *sh = ladle_partition_shape(p_w);
    int c[LADLE_MAX_NDIM];
    int64_t kv = 1;
    for (int a = 0; a < d->nd; a++)
        kv *= d->kernel[a];
    ladle_partition_coords_of(p_w, r, c);
    int64_t co = ladle__balanced_size(d->out_channels, sh[0], c[0]);
    int64_t ci = ladle__balanced_size(d->in_channels, sh[1], c[1]) / d->groups;
    int has = i == 0 || c[1] == 0;
    *gid = has ? c[0] * sh[1] + c[1] : sh[0] * sh[1] + r;
    *count = !has ? 0 : i == 0 ? co * ci * kv : co;
}

/* The halo exchange of the window over x's layout (periodic on every
 * spatial dimension with circular padding), this rank's boxes, and the
 * padded tensor's dimensions for reflect and replicate. */
static ladle_status make_halo(ladle__make *m, dgrid *v, const ladle_conv_desc *d)
{
    ladle_status st = LADLE_OK;
    ladle_window w;
    ladle_window_init(&w, v->ndim);
    for (int i = 0; i < d->nd; i++) {
        w.kernel[2 + i] = d->kernel[i];
        w.stride[2 + i] = d->stride[i];
        w.padding[2 + i] = d->padding[i];
        w.dilation[2 + i] = d->dilation[i];
        if (d->padding_mode == LADLE_PAD_CIRCULAR)
            w.periodic |= 1u << (2 + i);
    }
    LADLE_CALL(ladle__dist_halo(m, &w, &v->halo, &v->g));
    v->mode = d->padding_mode;
    for (int i = 0; i < v->ndim; i++) {
        int64_t p = i < 2 ? 0 : d->padding[i - 2];
        v->pd[i] = (ladle__pad_dim){v->g.padded_offset[i],
                                    ladle_layout_global_shape(m->lx)[i], p, p};
    }
fail:
    return st;
}

/* The layer's extents from d, and x's layout on p_x. Local. */
static ladle_status plan_shape(ladle__make *m, dgrid *v, const ladle_conv_desc *d,
                               const ladle_partition *p_x, const int64_t *x_shape)
{
    v->ndim = 2 + d->nd;
    v->nd = d->nd;
    v->base.nparams = d->bias ? 2 : 1;
    v->co = d->out_channels;
    v->cig = d->in_channels / d->groups;
    for (int i = 0; i < d->nd; i++)
        v->k[i] = d->kernel[i];
    return ladle_layout_create_balanced(p_x, v->ndim, x_shape, &m->lx);
}

ladle_status ladle_dist_conv_grid_create(const ladle_conv_desc *d,
                                         const ladle_dist_partitions *p,
                                         const int64_t x_shape[], ladle_dtype dtype,
                                         ladle_device device, uint64_t seed, ladle_op **out)
{
    const char *f = __func__;
    ladle_status st = LADLE_OK, local;
    ladle__make m = {f, dtype, device, 0, MPI_COMM_NULL, NULL, NULL};
    dgrid *v = NULL;
    plan pl = {0};
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    LADLE_NOT_NULL(p);
    const ladle_partition *p_x = p->x, *p_w = p->w, *p_y = p->y;
    unsigned flags = d->flags;
    m.flags = flags;
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(p_w);
    LADLE_NOT_NULL(p_y);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    const ladle_partition *parts[3] = {p_x, p_w, p_y};
    local = validate(d, p_x, p_w, p_y, x_shape, dtype, flags, f);
    int nd = 2 + d->nd;
    LADLE_CALL(ladle__make_open(&m, 3, parts, local,
                                args_hash(d, parts, x_shape, local == LADLE_OK, seed, &m)));

    v = ladle__calloc(1, sizeof *v);
    local = ladle__make_alloc_ok(&m, v != NULL);
    if (local == LADLE_OK)
        local = plan_shape(&m, v, d, p_x, x_shape);
    LADLE_CALL(ladle__make_step(m.comm, local, f));
    /* the spatial part on p_x: the halo exchange over the tiles */
    LADLE_CALL(make_halo(&m, v, d));

    LADLE_CALL(plan_ops(&m, v, d, p_x, p_w, p_y, x_shape, &pl));
    LADLE_CALL(ladle__make_step(m.comm, allocate(&m, v, d, p_w, &pl, seed), f));

    const int *sh = ladle_partition_shape(p_w);
    int tiles = 1;
    for (int a = 2; a < nd; a++)
        tiles *= sh[a];
    if (tiles > 1) {
        tiles_arg arg = {d, p_w};
        LADLE_CALL(
            ladle__dist_replicas(&m, &v->base, v->base.nparams, p_w, tile_group, &arg));
    }
    double kv = 1;
    for (int i = 0; i < d->nd; i++)
        kv *= (double)d->kernel[i];
    int taken = 0;
    st =
        ladle__dist_grid_end(&m, &dgrid_vt, v, v->g.bulk_shape, d->bias,
                             (double)(d->in_channels / d->groups) * kv,
                             (double)(d->out_channels / d->groups) * kv, seed, &taken, out);
    if (taken)
        v = NULL;
fail:
    ladle__make_close(&m);
    ladle__parts_free(v, dgrid_parts, NULL);
    plan_free(&pl);
    return st;
}
