/*
 * Spatially partitioned convolution and pooling (see ladle/distributed.h):
 * each rank holds a block of x; a halo exchange brings in the cells its
 * share of the output reads from its neighbours, and a sequential layer with
 * no padding runs on the box it needs:
 *
 *   y = L (S H P x),      dx = P* H* S* L* dy
 *
 * P puts the block into the padded local tensor (whose cells outside the
 * global index space hold the kernel's padding: 0, or -inf for max pooling,
 * written once), H is the halo exchange, S selects the box the kernel reads
 * (a copy kept in the ctx, the local layer's saved input) and L is the local
 * layer. Their adjoints: L*'s dx added into S's box of a zeroed padded
 * gradient, H* adds the halos back into their owners' blocks, P* takes the
 * block. Average pooling that does not divide every window by the kernel's
 * volume (count_include_pad 0, or ceil mode, whose last windows are cut at
 * the padded edge) adds a diagonal R after L: the local layer sees its
 * padding as data and divides by the volume, and R rescales each output to
 * its own divisor. That divisor depends only on the window's global
 * position and the global extent, so R is planned once per local output;
 * R* = R. A convolution's weights are replicated on every rank: their
 * gradients are summed over the partition by ladle_layer_sync_gradients.
 *
 * When p_x splits no spatial dimension (data parallelism: the batch alone
 * is split, or nothing), H moves nothing and P, S and R only pad: the layer
 * is then the sequential layer itself, padding, options and all, run on the
 * rank's block of x and y directly (y = L x, dx = L* dy), without the
 * padded tensors or their copies.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "layers/distributed/dist_conv_impl.h"

/* The ctx (ladle__dist_ctx): saved[0] is the needed box, the local layer's
 * saved input. */
#define CTX_XN(c) ((c)->saved[0])

static const ladle__part dconv_parts[] = {
    LADLE__PART_DIST_BASE(dconv),      LADLE__PART_OP(dconv, halo),
    LADLE__PART_TENSOR(dconv, padded), LADLE__PART_TENSOR(dconv, gpadded),
    LADLE__PART_TENSOR(dconv, xn),     LADLE__PART_TENSOR(dconv, dxn),
    LADLE__PART_TENSOR(dconv, rescale), LADLE__PART_TENSOR(dconv, rezero),
    LADLE__PART_TENSOR(dconv, dyr),    LADLE__PARTS_END};

/* The overlap's parts (not in the table: their number varies), then the
 * table's. */
static void dc_free(dconv *v)
{
    if (v != NULL)
        ladle__dc_overlap_free(v);
    ladle__parts_free(v, dconv_parts, NULL);
}

/* Whether the layer fills the padding cells itself after the exchange
 * (reflect, replicate), and folds their gradients back before its adjoint:
 * zeros are written once, circular padding is the exchange's wrap-around. */
static int pads_edges(const dconv *v)
{
    return v->mode != LADLE_PAD_ZEROS && v->mode != LADLE_PAD_CIRCULAR;
}

/* Every plane times the factors. */
static ladle_status dc_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    dconv *v = op->impl;
    ladle__dist_ctx *c = ctx ? ctx->impl : NULL;
    ladle_tensor *xn = c ? CTX_XN(c) : v->xn;
    /* with the needed box the whole padded tensor, the ctx's copy is the
     * padded tensor itself (its padding cells filled when the ctx was made) */
    ladle_tensor *padded = v->same && c ? CTX_XN(c) : v->padded;
    int64_t zero[LADLE_MAX_NDIM] = {0};
    (void)n;
    if (v->direct)
        return v->base.local ? ladle_layer_forward(v->base.local, c ? c->local : NULL, x, y)
                             : LADLE_OK;
    if (v->nparts)
        return ladle__dc_overlap_forward(op, v, ctx ? ctx->impl : NULL, x, y);
    LADLE_CALL(ladle__dist_halo_in(op, v->halo, &v->g, x, padded));
    if (pads_edges(v)) /* the global edges, from the cells now in place */
        LADLE_CALL(ladle__pad_fill(op->be, op->dtype, v->mode, v->ndim, v->g.padded_shape, v->pd,
                                   padded->data, 0));
    if (v->base.local) {
        if (!v->same || !c)
            LADLE_CALL(ladle__dist_box_copy(op, LADLE_BOX_COPY, v->ndim, v->g.needed_shape,
                                            padded, v->g.needed_offset, xn, zero));
        LADLE_CALL(ladle_layer_forward(v->base.local, c ? c->local : NULL, xn, y));
        if (v->rescale)
            LADLE_CALL(ladle__dc_rescale(op, v, y->shape[0], y, y));
    }
fail:
    return st;
}

static ladle_status dc_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    dconv *v = op->impl;
    ladle__dist_ctx *c = ctx ? ctx->impl : NULL;
    ladle_op *local = v->base.local;
    int64_t zero[LADLE_MAX_NDIM] = {0};
    (void)n;
    if (dx == NULL)
        return LADLE_OK;
    if (v->direct) {
        /* without a local layer, an empty block: dx has no cells */
        return ladle__dist_local_backward(&v->base, c, dy, dx);
    }
    if (v->nparts)
        return ladle__dc_overlap_backward(op, v, ctx ? ctx->impl : NULL, dy, dx);
    /* the local layer writes every cell of its input gradient: straight into
     * the padded gradient when that is the whole of it */
    ladle_tensor *dxn = v->same && local ? v->gpadded : v->dxn;
    if (dxn != v->gpadded)
        LADLE_CALL(ladle_tensor_fill(v->gpadded, 0.0));
    if (local && v->rescale) { /* dy R into the planned buffer, cut to the batch */
        ladle_tensor *dyr = v->dyr;
        dyr->numel = dyr->numel / (dyr->shape[0] ? dyr->shape[0] : 1) * dy->shape[0];
        dyr->shape[0] = dy->shape[0];
        LADLE_CALL(ladle__dc_rescale(op, v, dy->shape[0], dy, dyr));
        dy = dyr;
    }
    if (local) {
        LADLE_CALL(ladle__dist_local_backward(&v->base, c, dy, dxn));
        if (dxn != v->gpadded)
            LADLE_CALL(ladle__dist_box_copy(op, LADLE_BOX_COPY, v->ndim, v->g.needed_shape,
                                            v->dxn, zero, v->gpadded, v->g.needed_offset));
    }
    if (pads_edges(v))
        LADLE_CALL(ladle__pad_fill(op->be, op->dtype, v->mode, v->ndim, v->g.padded_shape, v->pd,
                                   v->gpadded->data, 1));
    LADLE_CALL(ladle__dist_halo_out(op, v->halo, &v->g, v->gpadded, dx));
fail:
    return st;
}

static ladle_status dc_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       int64_t n)
{
    dconv *v = op->impl;
    ladle__dist_ctx *c = ctx->impl;
    (void)n;
    if (v->nparts)
        return ladle__dc_overlap_weight(op, v, ctx->impl, dy);
    if (v->base.local)
        return ladle_layer_backward_weight(v->base.local, c->local, dy);
    return LADLE_OK;
}

/* A ctx: the base's, or with the overlap each part's. */
static ladle_status dc_ctx_init(const ladle_op *op, ladle_ctx *ctx)
{
    ladle_status st = LADLE_OK;
    const dconv *v = op->impl;
    dc_ctx *c = ladle__calloc(1, sizeof *c);
    LADLE_CHECK(c != NULL, LADLE_ERR_ALLOC, "out of memory");
    ctx->impl = c;
    if (v->nparts)
        LADLE_CALL(ladle__dc_overlap_ctx_init(v, c, op->dtype, op->be->device));
    else
        LADLE_CALL(ladle__dist_ctx_fill(op, &c->base));
fail:
    return st;
}

static void dc_ctx_fini(ladle_ctx *ctx)
{
    dc_ctx *c = ctx->impl;
    if (c == NULL)
        return;
    ladle__dc_overlap_ctx_fini(c);
    ladle__dist_ctx_empty(&c->base);
    ladle__free(c);
    ctx->impl = NULL;
}

static void dc_set_training(ladle_op *op, int training)
{
    dconv *v = op->impl;
    ladle__dist_set_training(op, training);
    for (int r = 0; r < v->nparts; r++)
        ladle_layer_set_training(v->part[r].op, training);
}

static void dc_param_bound(ladle_op *op, int i)
{
    ladle__dist_param_bound(op, i);
    /* the memory passed the same checks for the local layer, whose twins
     * the parts are: binding them cannot fail */
    (void)ladle__dc_overlap_rebind(op->impl, i);
}

static void dc_param_info(const ladle_op *op, int i, ladle__pinfo *info)
{
    const dconv *v = op->impl;
    const ladle_tensor *t = ladle__dist_param_at(op, i, 0, NULL);
    info->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++)
        info->global[d] = t->shape[d];
    if (i == 0 && t->ndim > 0 && t->shape[0] == 0) /* a rank outside p_x */
        for (int d = 0; d < t->ndim; d++)
            info->global[d] = v->wshape[d];
    else if (i == 1 && t->shape[0] == 0)
        info->global[0] = v->wshape[0];
    /* replicated: partition rank 0 writes them */
    info->owner = ladle_partition_rank(ladle_layout_partition(op->x_layout)) == 0;
    ladle__dist_sync_info(v->base.sync[i], v->base.gid[i], v->base.cnt[i], info);
}

static void dc_destroy(ladle_op *op) { dc_free(op->impl); }

static const ladle_op_vtable dconv_vt = {
    .kind = LADLE_OP_DIST_CONV,
    .name = "distributed convolution",
    .destroy = dc_destroy,
    .layer_forward = dc_forward,
    .layer_backward = dc_backward,
    .layer_backward_weight = dc_backward_weight,
    .ctx_init = dc_ctx_init,
    .ctx_fini = dc_ctx_fini,
    .num_params = ladle__dist_num_params,
    .param_at = ladle__dist_param_at,
    .set_training = dc_set_training,
    .param_info = dc_param_info,
    .sync_grads = ladle__dist_sync_grads,
    .param_bound = dc_param_bound,
};

static const ladle_op_vtable dpool_vt = {
    .kind = LADLE_OP_DIST_POOL,
    .name = "distributed pooling",
    .destroy = dc_destroy,
    .layer_forward = dc_forward,
    .layer_backward = dc_backward,
    .ctx_init = dc_ctx_init,
    .ctx_fini = dc_ctx_fini,
    .num_params = ladle__dist_num_params,
    .set_training = dc_set_training,
};

int ladle__dist_conv_parts(const ladle_op *op)
{
    if (op == NULL || (op->vt != &dconv_vt && op->vt != &dpool_vt))
        return 0;
    return ((const dconv *)op->impl)->nparts;
}

int ladle__dist_conv_interior_parts(const ladle_op *op)
{
    if (op == NULL || (op->vt != &dconv_vt && op->vt != &dpool_vt))
        return 0;
    return ((const dconv *)op->impl)->ninterior;
}

int ladle__dist_conv_direct(const ladle_op *op)
{
    if (op == NULL || (op->vt != &dconv_vt && op->vt != &dpool_vt))
        return 0;
    return ((const dconv *)op->impl)->direct;
}

/* Whether every rank can pad the global edges of x (global shape xs over
 * p_x) from its own padded tensor: reflect and replicate read the edge
 * blocks (at least lo + 1 and hi + 1 cells, or 1, in the smallest block of a
 * split dimension). Circular padding needs no edge block: the halo
 * exchange wraps around (its periodic dimensions), from whichever ranks own
 * the cells. Global facts: every rank raises the same. */
static ladle_status check_modes(const ladle_partition *p_x, const int64_t *xs, const spec *sp,
                                const char *f)
{
    for (int i = 0; i < sp->nd && sp->mode != LADLE_PAD_ZEROS; i++) {
        if (sp->lo[i] == 0 && sp->hi[i] == 0)
            continue; /* nothing to fill */
        int parts = ladle_partition_shape(p_x)[2 + i];
        int64_t need = sp->mode == LADLE_PAD_REFLECT ? 1 + (sp->lo[i] > sp->hi[i] ? sp->lo[i]
                                                                                 : sp->hi[i])
                                                     : 1;
        if (!ladle__pad_fits(sp->mode, sp->lo[i], sp->hi[i], xs[2 + i]))
            return ladle__raise(LADLE_ERR_ARG, f,
                                "%s padding of %lld and %lld cells does not fit spatial "
                                "dimension %d of extent %lld (reflect: below the extent; "
                                "circular: at most the extent)",
                                ladle__pad_name(sp->mode), (long long)sp->lo[i],
                                (long long)sp->hi[i], i, (long long)xs[2 + i]);
        if (parts > 1 && sp->mode != LADLE_PAD_CIRCULAR && xs[2 + i] / parts < need)
            return ladle__raise(LADLE_ERR_UNSUPPORTED, f,
                                "%s padding of spatial dimension %d reads %lld cells of the "
                                "edge blocks, and p_x splits its %lld cells %d ways (blocks "
                                "of %lld)", ladle__pad_name(sp->mode), i, (long long)need,
                                (long long)xs[2 + i], parts, (long long)(xs[2 + i] / parts));
    }
    return LADLE_OK;
}

static ladle_status validate(const ladle_partition *p_x, const int64_t *xs, const spec *sp,
                             ladle_dtype dtype, unsigned flags, const char *f)
{
    char a[128];
    ladle_status st = ladle__make_check_kind(dtype, flags, f);
    if (st != LADLE_OK)
        return st;
    if (sp->nd < 1 || sp->nd > 3)
        return ladle__raise(LADLE_ERR_ARG, f, "%d spatial dimensions (1 to 3)", sp->nd);
    if (ladle_partition_ndim(p_x) != 2 + sp->nd)
        return ladle__raise(LADLE_ERR_PARTITION, f,
                            "p_x has %d dimensions; a %d-d layer's x has %d",
                            ladle_partition_ndim(p_x), sp->nd, 2 + sp->nd);
    if (ladle_partition_shape(p_x)[1] != 1)
        return ladle__raise(LADLE_ERR_PARTITION, f,
                            "p_x %s splits the channels; a spatially partitioned layer "
                            "takes batch and spatial splits only",
                            ladle__fmt_shape(a, sizeof a, ladle_partition_ndim(p_x),
                                             ladle_partition_shape(p_x)));
    for (int i = 0; i < 2 + sp->nd; i++)
        if (xs[i] < 1)
            return ladle__raise(LADLE_ERR_SHAPE, f, "x extent %lld in dimension %d",
                                (long long)xs[i], i);
    int64_t numel, m = 0;
    st = ladle__check_shape(f, 2 + sp->nd, xs, &numel);
    if (st == LADLE_OK)
        st = check_modes(p_x, xs, sp, f);
    for (int i = 0; st == LADLE_OK && i < sp->nd; i++) {
        snprintf(a, sizeof a, "spatial dimension %d", i);
        st = ladle__window_length(f, a, xs[2 + i], sp->k[i], sp->s[i], sp->p[i], sp->d[i],
                                  sp->ceil_mode, &m);
        if (st == LADLE_OK && m < 1)
            st = ladle__raise(LADLE_ERR_SHAPE, f,
                              "the window (%lld) is larger than the padded input (%lld)",
                              (long long)(sp->d[i] * (sp->k[i] - 1) + 1),
                              (long long)(xs[2 + i] + 2 * sp->p[i]));
    }
    return st;
}

/* The output's layout: o's split in every dimension but the channels,
 * which hold `channels` whole. */
static ladle_status y_layout(const ladle_layout *o, int64_t channels, ladle_layout **out)
{
    ladle_status st = LADLE_OK;
    const ladle_partition *p = ladle_layout_partition(o);
    int nd = ladle_layout_ndim(o), c[LADLE_MAX_NDIM] = {0};
    int64_t global[LADLE_MAX_NDIM], *sizes[LADLE_MAX_NDIM] = {0}, box[LADLE_MAX_NDIM];
    const int *shape = ladle_partition_shape(p);
    for (int d = 0; d < nd; d++) {
        global[d] = d == 1 ? channels : ladle_layout_global_shape(o)[d];
        sizes[d] = ladle__calloc((size_t)shape[d], sizeof(int64_t));
        LADLE_CHECK(sizes[d] != NULL, LADLE_ERR_ALLOC, "out of memory");
    }
    /* the extent of block i along d: the box of the rank at i on d, 0 elsewhere */
    for (int d = 0; d < nd; d++)
        for (int i = 0; i < shape[d]; i++) {
            int r = 0;
            memset(c, 0, sizeof c);
            c[d] = i;
            ladle_partition_rank_of(p, c, &r);
            ladle_layout_box(o, r, NULL, box);
            sizes[d][i] = d == 1 ? channels : box[d];
        }
    LADLE_CALL(ladle_layout_create_split(p, nd, global, (const int64_t *const *)sizes, out));
fail:
    for (int d = 0; d < nd; d++)
        ladle__free(sizes[d]);
    return st;
}

/* The halo exchange of the layer's window over x's layout (a centred
 * window of 2p + 1 when the sides differ), periodic on every spatial
 * dimension with circular padding: its wrapped halos are the padding. */
static ladle_status make_halo(ladle__make *m, dconv *v, const spec *sp)
{
    ladle_status st = LADLE_OK;
    ladle_window w;
    ladle_window_init(&w, v->ndim);
    for (int i = 0; i < sp->nd; i++) {
        int a = 2 + i;
        w.kernel[a] = sp->uneven ? 2 * sp->p[i] + 1 : sp->k[i];
        w.stride[a] = sp->uneven ? 1 : sp->s[i];
        w.dilation[a] = sp->uneven ? 1 : sp->d[i];
        w.padding[a] = sp->p[i];
        if (sp->mode == LADLE_PAD_CIRCULAR)
            w.periodic |= 1u << a;
    }
    w.ceil_mode = sp->ceil_mode;
    LADLE_CALL(ladle__make_step(
        m->comm, ladle_halo_exchange_create(m->lx, &w, m->dtype, m->device, m->flags, &v->halo),
        m->func));
    LADLE_CALL(ladle_halo_exchange_geometry(v->halo, &v->g));
fail:
    return st;
}

/* The halo exchange over x's layout and this rank's boxes. */
static ladle_status plan_halo(ladle__make *m, dconv *v, const spec *sp)
{
    ladle_status st = LADLE_OK;
    int nd = v->ndim;
    int64_t outv = 1, needv = 1;
    LADLE_CALL(make_halo(m, v, sp));
    for (int i = 0; sp->uneven && i < sp->nd; i++)
        if (v->g.output_shape[2 + i] > 0) { /* the centred box less the unused side */
            v->g.needed_offset[2 + i] += sp->p[i] - sp->lo[i];
            v->g.needed_shape[2 + i] -= 2 * sp->p[i] - sp->lo[i] - sp->hi[i];
        }
    v->mode = sp->mode;
    for (int i = 0; i < nd; i++) {
        int j = i - 2;
        v->pd[i] = (ladle__pad_dim){v->g.padded_offset[i],
                                    ladle_layout_global_shape(m->lx)[i], j < 0 ? 0 : sp->lo[j],
                                    j < 0 ? 0 : sp->hi[j]};
    }
    for (int i = 0; i < nd; i++) {
        outv *= v->g.output_shape[i];
        needv *= v->g.needed_shape[i];
    }
    v->has_output = outv > 0 && needv > 0;
    /* no spatial split (a fact of p_x, alike on every rank) */
    v->direct = 1;
    for (int i = 2; i < nd; i++)
        v->direct &= ladle_partition_shape(ladle_layout_partition(m->lx))[i] == 1;
    if (!v->direct) {
        /* Or a split that moves nothing: on every member the windows of the
         * output block read exactly the rank's own block, with no padding
         * cell and no halo (a pooling whose kernel is its stride on blocks
         * that are multiples of it: LeNet-5's first pooling on 2 x 2 tiles).
         * The sequential layer on the block is then the layer, as without
         * a split; the copies into and out of the padded tensors cost 2-3
         * times the pooling itself. Agreed, since the exchange is skipped
         * by all or by none. */
        int moves_nothing = 1;
        for (int i = 0; i < nd; i++)
            moves_nothing &= v->g.halo_left[i] == 0 && v->g.halo_right[i] == 0 &&
                             v->g.needed_offset[i] == v->g.bulk_offset[i] &&
                             v->g.needed_shape[i] == v->g.bulk_shape[i];
        if (m->comm != MPI_COMM_NULL) {
            int rc =
                MPI_Allreduce(MPI_IN_PLACE, &moves_nothing, 1, MPI_INT, MPI_LAND, m->comm);
            if (rc != MPI_SUCCESS)
                return ladle__raise_mpi(rc, m->func, "MPI_Allreduce");
        }
        v->direct = moves_nothing;
    }
    v->same = 1;
    for (int i = 0; i < nd; i++)
        v->same &= v->g.needed_offset[i] == 0 && v->g.needed_shape[i] == v->g.padded_shape[i];
fail:
    return st;
}

/* The weights every rank holds when it has no local layer: whole copies
 * on members, zero-volume stand-ins elsewhere. Local. */
static ladle_status allocate_weights(ladle__make *m, dconv *v, const ladle_conv_desc *cd,
                                     const spec *sp, const ladle_partition *p_x)
{
    ladle_status st = LADLE_OK;
    int nd = v->ndim, member = ladle_partition_active(p_x);
    int64_t ws[5] = {cd->out_channels, cd->in_channels / cd->groups, 1, 1, 1};
    int64_t bs = member ? cd->out_channels : 0;
    for (int i = 0; i < sp->nd; i++)
        ws[2 + i] = sp->k[i];
    for (int i = 0; !member && i < nd; i++)
        ws[i] = 0;
    v->base.nparams = cd->bias ? 2 : 1;
    v->wshape[0] = cd->out_channels;
    v->wshape[1] = cd->in_channels / cd->groups;
    for (int i = 0; i < sp->nd; i++)
        v->wshape[2 + i] = sp->k[i];
    LADLE_CALL(ladle__dist_param(m->dtype, m->device, nd, ws, &v->base.param[0]));
    LADLE_CALL(ladle__dist_grad(m->dtype, m->device, nd, ws, &v->base.grad[0]));
    if (cd->bias) {
        LADLE_CALL(ladle__dist_param(m->dtype, m->device, 1, &bs, &v->base.param[1]));
        LADLE_CALL(ladle__dist_grad(m->dtype, m->device, 1, &bs, &v->base.grad[1]));
    }
fail:
    return st;
}

/* Average pooling's divisor of global output o along a spatial dimension
 * of global extent len, as the sequential layer's: the window [b, e) cut at
 * the padded edge, and without count_include_pad at the input's. */
static int64_t avg_count(const spec *sp, int a, int64_t len, int64_t o)
{
    int64_t b = o * sp->s[a] - sp->p[a], e = b + sp->k[a];
    if (e > len + sp->p[a])
        e = len + sp->p[a];
    if (!sp->count_pad) {
        b = b < 0 ? 0 : b;
        e = e > len ? len : e;
    }
    return e > b ? e - b : 0;
}

/* R's factors for this rank's output block: the local layer divides by
 * the kernel's volume, the window by its own count. No R (NULL) when every
 * factor is 1. Local. */
static ladle_status plan_rescale(ladle__make *m, dconv *v, const spec *sp)
{
    ladle_status st = LADLE_OK;
    const int64_t *xs = ladle_layout_global_shape(m->lx), *os = v->g.output_shape;
    int64_t n = 1, ys[LADLE_MAX_NDIM];
    double *f = NULL;
    int ones = 1;
    for (int a = 0; a < sp->nd; a++)
        n *= os[2 + a];
    f = ladle__calloc((size_t)(n > 0 ? n : 1), sizeof *f);
    LADLE_CHECK(f != NULL, LADLE_ERR_ALLOC, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        int64_t rest = i;
        f[i] = 1;
        for (int a = sp->nd - 1; a >= 0; a--) {
            int64_t o = v->g.output_offset[2 + a] + rest % os[2 + a];
            int64_t cnt = avg_count(sp, a, xs[2 + a], o);
            rest /= os[2 + a];
            f[i] *= cnt > 0 ? (double)sp->k[a] / (double)cnt : 0.0;
        }
        ones &= f[i] == 1;
    }
    if (!ones) {
        for (int i = 0; i < v->ndim; i++)
            ys[i] = os[i];
        LADLE_CALL(ladle__dist_tensor(LADLE_F64, m->device, 1, &n, &v->rescale));
        LADLE_CALL(ladle__dist_tensor(LADLE_F64, m->device, 1, &n, &v->rezero));
        LADLE_CALL(ladle__dist_tensor(m->dtype, m->device, v->ndim, ys, &v->dyr));
        LADLE_CALL(ladle_tensor_write(v->rescale, f));
        LADLE_CALL(ladle_tensor_fill(v->rezero, 0.0));
    }
fail:
    ladle__free(f);
    return st;
}

/* The padded tensors and boxes, the local layer where this rank has
 * output, and a convolution's weights. Local. */
static ladle_status allocate(ladle__make *m, dconv *v, const kind *k, const spec *sp,
                             const ladle_partition *p_x, uint64_t seed)
{
    ladle_status st = LADLE_OK;
    ladle_dtype dt = m->dtype;
    ladle_device dev = m->device;
    int nd = v->ndim;
    if (v->direct) { /* the sequential layer on the block: nothing padded, nothing saved */
        if (v->has_output)
            LADLE_CALL(k->make_local(k, v->g.bulk_shape, 1, dt, dev, seed, &v->base.local));
        goto weights;
    }
    LADLE_CALL(ladle__dist_tensor(dt, dev, nd, v->g.padded_shape, &v->padded));
    LADLE_CALL(ladle_tensor_fill(v->padded, k->pad_value));
    LADLE_CALL(ladle__dist_tensor(dt, dev, nd, v->g.padded_shape, &v->gpadded));
    LADLE_CALL(ladle__dist_tensor(dt, dev, nd, v->g.needed_shape, &v->xn));
    LADLE_CALL(ladle__dist_tensor(dt, dev, nd, v->g.needed_shape, &v->dxn));
    if (v->has_output) {
        LADLE_CALL(k->make_local(k, v->g.needed_shape, 0, dt, dev, seed, &v->base.local));
        if (sp->avg)
            LADLE_CALL(plan_rescale(m, v, sp));
    }
    /* the ctx's copy of the needed box doubles as the padded tensor when
     * they are the same: it starts as the padding cells */
    v->base.nsaved = 1;
    v->base.saved_like[0] = v->xn;
    v->base.saved_from[0] = v->same ? v->padded : NULL;
weights:
    if (v->base.local) {
        int ln, fits = 1;
        int64_t ls[LADLE_MAX_NDIM];
        ladle_op_y_shape(v->base.local, &ln, ls);
        for (int i = 0; i < nd; i++)
            fits &= i == 1 || ls[i] == v->g.output_shape[i];
        LADLE_MAKE_CHECK(m, fits, LADLE_ERR_INTERNAL,
                         "the local layer's output does not match the output block");
    }
    if (!k->is_pool)
        LADLE_CALL(allocate_weights(m, v, k->desc, sp, p_x));
fail:
    return st;
}

/* The gradients of the replicated weights: summed over the whole partition
 * (one group, the whole weight per rank). */
static ladle_status plan_sync(ladle__make *m, dconv *v, const ladle_conv_desc *cd,
                              const spec *sp, const ladle_partition *p_x)
{
    ladle_status st = LADLE_OK;
    const char *f = m->func;
    ladle__dist_base *b = &v->base;
    int nd = v->ndim, size = ladle_partition_size(p_x), axes[LADLE_MAX_NDIM];
    int64_t wn = 1, full[5] = {cd->out_channels, cd->in_channels / cd->groups, 1, 1, 1};
    for (int i = 0; i < nd; i++)
        wn *= v->wshape[i];
    for (int i = 0; i < b->nparams; i++) {
        b->gid[i] = ladle__calloc((size_t)size, sizeof(int));
        b->cnt[i] = ladle__calloc((size_t)size, sizeof(int64_t));
    }
    LADLE_CALL(ladle__make_step(
        m->comm,
        ladle__make_alloc_ok(m, b->gid[0] && b->cnt[0] &&
                                    (b->nparams < 2 || (b->gid[1] && b->cnt[1]))),
        f));
    for (int r = 0; r < size; r++) {
        b->cnt[0][r] = wn;
        if (b->nparams > 1)
            b->cnt[1][r] = v->wshape[0];
    }
    for (int a = 0; a < nd; a++)
        axes[a] = a;
    for (int j = 0; j < sp->nd; j++)
        full[2 + j] = sp->k[j];
    for (int i = 0; i < b->nparams; i++) {
        ladle_all_sum_reduce_desc sd;
        ladle_all_sum_reduce_desc_init(&sd, nd, axes, i == 0 ? nd : 1, full);
        sd.flags = m->flags;
        LADLE_CALL(ladle__make_step(
            m->comm,
            ladle_all_sum_reduce_create(&sd, p_x, m->dtype, m->device, &b->sync[i]), f));
        LADLE_CALL(ladle__make_step(m->comm, ladle__dist_sync_view(m, b, i), f));
    }
fail:
    return st;
}

/* The layer op over the halo's output split (with the layer's channels)
 * and what is a convolution's or a pooling's own. */
static ladle_status finish(ladle__make *m, dconv **pv, const kind *k, const spec *sp,
                           const int64_t *xs, uint64_t seed, ladle_op **out)
{
    ladle_status st = LADLE_OK, local;
    dconv *v = *pv;
    ladle_op *op = NULL;
    int64_t channels = k->is_pool ? xs[1] : ((const ladle_conv_desc *)k->desc)->out_channels;
    local = y_layout(ladle_halo_exchange_output_layout(v->halo), channels, &m->ly);
    local = ladle__make_layer(m, local, k->is_pool ? &dpool_vt : &dconv_vt, v,
                              v->g.bulk_shape, &op);
    if (local == LADLE_OK)
        *pv = NULL;
    if (local == LADLE_OK && !k->is_pool) {
        const ladle_conv_desc *cd = k->desc;
        double kv = 1;
        for (int i = 0; i < sp->nd; i++)
            kv *= (double)sp->k[i];
        op->weighted = 1;
        op->linear = !cd->bias;
        op->fan_in = (double)(cd->in_channels / cd->groups) * kv;
        op->fan_out = (double)(cd->out_channels / cd->groups) * kv;
        local = ladle_layer_init(op, LADLE_INIT_DEFAULT, seed);
    } else if (local == LADLE_OK) {
        op->linear = ((const ladle_pool_desc *)k->desc)->kind == LADLE_POOL_AVG;
    }
    st = ladle__make_end(m, &op, local, out);
    return st;
}

/* The shared creation of both layers. */
static ladle_status create(ladle__make *m, ladle_status pre, const ladle_partition *p_x,
                           const int64_t *xs, const spec *sp, const kind *k, int nargs,
                           const int64_t *args, uint64_t seed, ladle_op **out)
{
    ladle_status st = LADLE_OK, local;
    const char *f = m->func;
    dconv *v = NULL;
    const ladle_partition *parts[1] = {p_x};
    int nd = 2 + sp->nd;

    local = pre != LADLE_OK ? pre : validate(p_x, xs, sp, m->dtype, m->flags, f);
    LADLE_CALL(ladle__make_open(m, 1, parts, local,
                                ladle__make_hash(LADLE_HASH_INIT, 1, parts, nargs, args)));
    v = ladle__calloc(1, sizeof *v);
    local = ladle__make_alloc_ok(m, v != NULL);
    if (local == LADLE_OK) {
        v->is_pool = k->is_pool;
        v->ndim = nd;
        local = ladle_layout_create_balanced(p_x, nd, xs, &m->lx);
    }
    LADLE_CALL(ladle__make_step(m->comm, local, f));
    LADLE_CALL(plan_halo(m, v, sp));
    LADLE_CALL(ladle__make_step(m->comm, allocate(m, v, k, sp, p_x, seed), f));
    if (sp->overlap)
        LADLE_CALL(ladle__make_step(
            m->comm, ladle__dc_overlap_plan(v, k, sp, xs, m->dtype, m->device), f));
    if (v->base.nparams > 0)
        LADLE_CALL(plan_sync(m, v, k->desc, sp, p_x));
    st = finish(m, &v, k, sp, xs, seed, out);
fail:
    ladle__make_close(m);
    dc_free(v);
    return st;
}

static ladle_status make_conv(const kind *k, const int64_t *xs, int whole, ladle_dtype dt,
                              ladle_device device, uint64_t seed, ladle_op **op)
{
    ladle_conv_desc d = *(const ladle_conv_desc *)k->desc;
    d.flags = 0;
    if (whole)
        return ladle_conv_create(&d, xs, dt, device, seed, op);
    for (int i = 0; i < 3; i++)
        d.padding[i] = 0;
    d.padding_mode = LADLE_PAD_ZEROS;
    d.same = 0;
    return ladle_conv_create(&d, xs, dt, device, seed, op);
}

static ladle_status make_pool(const kind *k, const int64_t *xs, int whole, ladle_dtype dt,
                              ladle_device device, uint64_t seed, ladle_op **op)
{
    ladle_pool_desc d = *(const ladle_pool_desc *)k->desc;
    (void)seed;
    d.flags = 0;
    if (whole)
        return ladle_pool_create(&d, xs, dt, device, op);
    for (int i = 0; i < 3; i++)
        d.padding[i] = 0;
    d.ceil_mode = 0; /* the needed box already holds every window */
    return ladle_pool_create(&d, xs, dt, device, op);
}

ladle_status ladle_dist_conv_create(const ladle_conv_desc *d, const ladle_partition *p_x,
                                    const int64_t x_shape[], ladle_dtype dtype,
                                    ladle_device device, uint64_t seed, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    spec sp;
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    memset(&sp, 0, sizeof sp);
    sp.nd = d->nd;
    unsigned flags = d->flags;
    ladle_status pre = ladle__conv_padding(d, __func__, sp.lo, sp.hi);
    sp.mode = pre == LADLE_OK ? d->padding_mode : LADLE_PAD_ZEROS;
    for (int i = 0; i < 3; i++) {
        sp.k[i] = d->kernel[i];
        sp.s[i] = d->stride[i];
        sp.p[i] = sp.lo[i] > sp.hi[i] ? sp.lo[i] : sp.hi[i];
        sp.d[i] = d->dilation[i];
        sp.uneven |= sp.lo[i] != sp.hi[i];
    }
    int64_t args[27] = {d->nd, d->in_channels, d->out_channels, d->groups, d->bias,
                        (int64_t)dtype, (int64_t)flags, (int64_t)seed};
    args[25] = (int64_t)sp.mode;
    args[26] = d->same;
    for (int i = 0; i < 3; i++) {
        args[8 + i] = d->kernel[i];
        args[11 + i] = d->stride[i];
        args[14 + i] = d->padding[i];
        args[17 + i] = d->dilation[i];
    }
    for (int i = 0; i < 2 + d->nd && i < 5 && d->nd >= 1 && d->nd <= 3; i++)
        args[20 + i] = x_shape[i];
    if (pre == LADLE_OK && d->nd >= 1 && d->nd <= 3 &&
        !(x_shape[1] == d->in_channels && d->groups >= 1 && d->in_channels % d->groups == 0 &&
          d->out_channels % d->groups == 0))
        pre = ladle__raise(LADLE_ERR_SHAPE, __func__,
                           "x has %lld channels, the layer %lld in %lld groups (out %lld)",
                           (long long)x_shape[1], (long long)d->in_channels,
                           (long long)d->groups, (long long)d->out_channels);
    sp.overlap = (flags & LADLE_OVERLAP_HALO) != 0;
    ladle__make m = {__func__,      dtype, device, flags & ~(unsigned)LADLE_OVERLAP_HALO,
                     MPI_COMM_NULL, NULL,  NULL};
    kind k = {0, 0.0, d, make_conv};
    st = create(&m, pre, p_x, x_shape, &sp, &k, 27, args, seed, out);
fail:
    return st;
}

/* deprecated (include/ladle/deprecated.h): the options and flags are the desc's */
ladle_status ladle_dist_conv_create_ex(const ladle_conv_desc *d, const ladle_conv_opts *o,
                                       const ladle_partition *p_x, const int64_t x_shape[],
                                       ladle_dtype dtype, ladle_device device,
                                       uint64_t seed, unsigned flags, ladle_op **out)
{
    ladle_conv_desc full;
    ladle_status st = ladle__conv_fold_opts(d, o, __func__, &full);
    if (st != LADLE_OK)
        return st;
    full.flags = flags;
    return ladle_dist_conv_create(&full, p_x, x_shape, dtype, device, seed, out);
}

ladle_status ladle_dist_pool_create(const ladle_pool_desc *d, const ladle_partition *p_x,
                                    const int64_t x_shape[], ladle_dtype dtype,
                                    ladle_device device, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    spec sp;
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    unsigned flags = d->flags;
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    ladle_status pre = LADLE_OK;
    if (d->kind != LADLE_POOL_MAX && d->kind != LADLE_POOL_AVG)
        pre = ladle__raise(LADLE_ERR_ARG, __func__, "unknown pooling kind %d", (int)d->kind);
    memset(&sp, 0, sizeof sp);
    sp.nd = d->nd;
    sp.avg = d->kind == LADLE_POOL_AVG;
    sp.count_pad = d->count_include_pad != 0;
    for (int i = 0; i < 3; i++) {
        sp.k[i] = d->kernel[i];
        sp.s[i] = d->stride[i] ? d->stride[i] : d->kernel[i];
        sp.p[i] = d->padding[i];
        sp.d[i] = d->dilation[i] ? d->dilation[i] : 1;
        if (pre == LADLE_OK && i < d->nd && 2 * sp.p[i] > sp.k[i])
            pre = ladle__raise(LADLE_ERR_ARG, __func__,
                               "padding %lld is more than half the kernel %lld",
                               (long long)sp.p[i], (long long)sp.k[i]);
    }
    sp.ceil_mode = d->ceil_mode;
    int64_t args[25] = {d->nd, (int64_t)d->kind, d->ceil_mode, d->count_include_pad,
                        (int64_t)dtype, (int64_t)flags};
    for (int i = 0; i < 3; i++) {
        args[8 + i] = sp.k[i];
        args[11 + i] = sp.s[i];
        args[14 + i] = sp.p[i];
        args[17 + i] = sp.d[i];
    }
    for (int i = 0; i < 2 + d->nd && i < 5 && d->nd >= 1 && d->nd <= 3; i++)
        args[20 + i] = x_shape[i];
    sp.overlap = (flags & LADLE_OVERLAP_HALO) != 0;
    ladle__make m = {__func__,      dtype, device, flags & ~(unsigned)LADLE_OVERLAP_HALO,
                     MPI_COMM_NULL, NULL,  NULL};
    kind k = {1, d->kind == LADLE_POOL_MAX ? -INFINITY : 0.0, d, make_pool};
    st = create(&m, pre, p_x, x_shape, &sp, &k, 25, args, 0, out);
fail:
    return st;
}
