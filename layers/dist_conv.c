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
 * block. A convolution's weights are replicated on every rank: their
 * gradients are summed over the partition by ladle_layer_sync_gradients.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "layers/dist.h"

typedef struct dconv {
    int is_pool;
    int ndim;                 /* 2 + spatial dimensions */
    ladle_halo_geometry g;    /* this rank's boxes */
    int has_output;           /* this rank's output block is not empty */
    int same;                 /* the needed box is the whole padded tensor: the
                                 local layer reads and writes it in place */
    ladle_op *halo;
    ladle_op *local;          /* the layer on the needed box, or NULL */
    ladle_tensor *padded;     /* forward: bulk + halo + padding cells */
    ladle_tensor *gpadded;    /* backward: the same for gradients */
    ladle_tensor *xn;         /* the needed box for calls without a ctx */
    ladle_tensor *dxn;        /* the local layer's input gradient */
    ladle_tensor *own[2];     /* weights of ranks without a local layer */
    ladle_tensor *owng[2];
    ladle_op *sync[2];        /* all-sum-reduce of the weight gradients */
    int64_t wshape[5];        /* the weight's (global) shape */
    /* the sync groups: one over the partition */
    int *gid;
    int64_t *counts[2];
    int nparams;
} dconv;

typedef struct dctx {
    ladle_ctx *local;
    ladle_tensor *xn; /* the needed box: the local layer's saved input */
} dctx;

static void dc_free(dconv *v)
{
    if (v == NULL)
        return;
    ladle_op_destroy(&v->halo);
    ladle_op_destroy(&v->local);
    ladle_tensor_destroy(&v->padded);
    ladle_tensor_destroy(&v->gpadded);
    ladle_tensor_destroy(&v->xn);
    ladle_tensor_destroy(&v->dxn);
    for (int i = 0; i < 2; i++) {
        ladle_tensor_destroy(&v->own[i]);
        ladle_tensor_destroy(&v->owng[i]);
        ladle_op_destroy(&v->sync[i]);
        ladle__free(v->counts[i]);
    }
    ladle__free(v->gid);
    ladle__free(v);
}

static ladle_status dc_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    dconv *v = op->impl;
    dctx *c = ctx ? ctx->impl : NULL;
    ladle_tensor *xn = c ? c->xn : v->xn;
    /* with the needed box the whole padded tensor, the ctx's copy is the
     * padded tensor itself (its padding cells filled when the ctx was made) */
    ladle_tensor *padded = v->same && c ? c->xn : v->padded;
    int64_t zero[LADLE_MAX_NDIM] = {0};
    (void)n;
    LADLE_CALL(ladle__dist_box_copy(op, LADLE_BOX_COPY, v->ndim, v->g.bulk_shape, x, zero, padded, v->g.bulk_offset));
    LADLE_CALL(ladle_op_forward(v->halo, padded, padded));
    if (v->local) {
        if (!v->same || !c)
            LADLE_CALL(ladle__dist_box_copy(op, LADLE_BOX_COPY, v->ndim, v->g.needed_shape, padded,
                     v->g.needed_offset, xn, zero));
        LADLE_CALL(ladle_layer_forward(v->local, c ? c->local : NULL, xn, y));
    }
fail:
    return st;
}

static ladle_status dc_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    dconv *v = op->impl;
    dctx *c = ctx ? ctx->impl : NULL;
    int64_t zero[LADLE_MAX_NDIM] = {0};
    (void)n;
    if (dx == NULL)
        return LADLE_OK;
    /* the local layer writes every cell of its input gradient: straight into
     * the padded gradient when that is the whole of it */
    ladle_tensor *dxn = v->same && v->local ? v->gpadded : v->dxn;
    if (dxn != v->gpadded)
        LADLE_CALL(ladle_tensor_fill(v->gpadded, 0.0));
    if (v->local) {
        if (c)
            LADLE_CALL(ladle_layer_backward(v->local, c->local, dy, dxn));
        else
            LADLE_CALL(ladle_op_adjoint(v->local, dy, dxn));
        if (dxn != v->gpadded)
            LADLE_CALL(ladle__dist_box_copy(op, LADLE_BOX_COPY, v->ndim, v->g.needed_shape, v->dxn, zero, v->gpadded,
                     v->g.needed_offset));
    }
    LADLE_CALL(ladle_op_adjoint(v->halo, v->gpadded, v->gpadded));
    LADLE_CALL(ladle__dist_box_copy(op, LADLE_BOX_COPY, v->ndim, v->g.bulk_shape, v->gpadded, v->g.bulk_offset, dx,
             zero));
fail:
    return st;
}

static ladle_status dc_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       int64_t n)
{
    dconv *v = op->impl;
    dctx *c = ctx->impl;
    (void)n;
    if (v->local)
        return ladle_layer_backward_weight(v->local, c->local, dy);
    return LADLE_OK;
}

static ladle_status dc_sync(ladle_op *op)
{
    ladle_status st = LADLE_OK;
    dconv *v = op->impl;
    for (int i = 0; i < v->nparams; i++) {
        ladle_tensor *g = ladle_op_grad(op, i);
        LADLE_CALL(ladle_op_forward(v->sync[i], g, g));
    }
fail:
    return st;
}

static ladle_status dc_ctx_init(const ladle_op *op, ladle_ctx *ctx)
{
    ladle_status st = LADLE_OK;
    const dconv *v = op->impl;
    dctx *c = ladle__calloc(1, sizeof *c);
    LADLE_CHECK(c != NULL, LADLE_ERR_ALLOC, "out of memory");
    ctx->impl = c;
    LADLE_CALL(ladle__dist_tensor(op->dtype, op->be->device, v->ndim, v->g.needed_shape, &c->xn));
    if (v->same) /* it doubles as the padded tensor: the padding cells */
        LADLE_CALL(ladle_tensor_copy(c->xn, v->padded));
    if (v->local)
        LADLE_CALL(ladle_ctx_create(v->local, &c->local));
fail:
    return st;
}

static void dc_ctx_fini(ladle_ctx *ctx)
{
    dctx *c = ctx->impl;
    if (c == NULL)
        return;
    ladle_ctx_destroy(&c->local);
    ladle_tensor_destroy(&c->xn);
    ladle__free(c);
    ctx->impl = NULL;
}

static int dc_num_params(const ladle_op *op) { return ((const dconv *)op->impl)->nparams; }

static ladle_tensor *dc_param_at(const ladle_op *op, int i, int grad, const char **name)
{
    const dconv *v = op->impl;
    if (name)
        *name = i == 0 ? "weight" : "bias";
    if (v->local)
        return grad ? ladle_op_grad(v->local, i) : ladle_op_param(v->local, i);
    return grad ? v->owng[i] : v->own[i];
}

static void dc_param_info(const ladle_op *op, int i, ladle__pinfo *info)
{
    const dconv *v = op->impl;
    const ladle_tensor *t = dc_param_at(op, i, 0, NULL);
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
    info->sync = v->sync[i];
    info->sync_p = v->sync[i] ? ladle_layout_partition(ladle_op_x_layout(v->sync[i])) : NULL;
    info->sync_gid = v->gid;
    info->sync_counts = v->counts[i];
}

static void dc_set_training(ladle_op *op, int training)
{
    dconv *v = op->impl;
    if (v->local)
        ladle_layer_set_training(v->local, training);
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
    .num_params = dc_num_params,
    .param_at = dc_param_at,
    .set_training = dc_set_training,
    .param_info = dc_param_info,
    .sync_grads = dc_sync,
};

static const ladle_op_vtable dpool_vt = {
    .kind = LADLE_OP_DIST_POOL,
    .name = "distributed pooling",
    .destroy = dc_destroy,
    .layer_forward = dc_forward,
    .layer_backward = dc_backward,
    .ctx_init = dc_ctx_init,
    .ctx_fini = dc_ctx_fini,
    .num_params = dc_num_params,
    .set_training = dc_set_training,
};

/* What the two layers share: nd, kernel, stride, padding, dilation. */
typedef struct spec {
    int nd;
    int64_t k[3], s[3], p[3], d[3];
    int ceil_mode;
} spec;

static ladle_status validate(const ladle_partition *p_x, const int64_t *xs, const spec *sp,
                             ladle_dtype dtype, unsigned flags, const char *f)
{
    char a[128];
    if (!ladle__is_real(dtype))
        return ladle__raise(LADLE_ERR_DTYPE, f, "dtype %s is not f32 or f64",
                            ladle_dtype_name(dtype));
    if (flags & ~(unsigned)LADLE_CHECKED)
        return ladle__raise(LADLE_ERR_ARG, f, "unknown flags 0x%x", flags);
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
    ladle_status st = ladle__check_shape(f, 2 + sp->nd, xs, &numel);
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

/* The shared creation: make_local builds the local layer (padding 0) on
 * the needed box. */
typedef ladle_status (*make_local_fn)(const void *desc, const int64_t *needed, ladle_dtype dt,
                                      ladle_device device, uint64_t seed, ladle_op **op);

static ladle_status create(ladle_status pre, const ladle_partition *p_x, const int64_t *xs,
                           const spec *sp, int is_pool, double pad_value, const void *desc,
                           make_local_fn make_local, int64_t args_hash_n, const int64_t *args,
                           ladle_dtype dtype, ladle_device device, uint64_t seed, unsigned flags,
                           ladle_op **out, const char *f)
{
    ladle_status st = LADLE_OK, local;
    ladle_op *op = NULL;
    dconv *v = NULL;
    ladle_layout *lx = NULL, *ly = NULL;
    MPI_Comm comm = MPI_COMM_NULL;
    const ladle_partition *parts[1] = {p_x};
    int nd = 2 + sp->nd;

    local = pre != LADLE_OK ? pre : validate(p_x, xs, sp, dtype, flags, f);
    LADLE_CALL(ladle__dist_begin(
        1, parts, device, local,
        ladle__dist_hash(LADLE_HASH_INIT, 1, parts, (int)args_hash_n, args), &comm, f));
    v = ladle__calloc(1, sizeof *v);
    local = v ? LADLE_OK : ladle__raise(LADLE_ERR_ALLOC, f, "out of memory");
    if (local == LADLE_OK) {
        v->is_pool = is_pool;
        v->ndim = nd;
        local = ladle_layout_create_balanced(p_x, nd, xs, &lx);
    }
    LADLE_CALL(ladle__dist_step(comm, local, f));
    ladle_window w;
    ladle_window_init(&w, nd);
    for (int i = 0; i < sp->nd; i++) {
        w.kernel[2 + i] = sp->k[i];
        w.stride[2 + i] = sp->s[i];
        w.padding[2 + i] = sp->p[i];
        w.dilation[2 + i] = sp->d[i];
    }
    w.ceil_mode = sp->ceil_mode;
    LADLE_CALL(ladle__dist_step(
        comm, ladle_halo_exchange_create(lx, &w, dtype, device, flags, &v->halo), f));
    ladle_halo_exchange_geometry(v->halo, &v->g);

    local = LADLE_OK;
    int64_t outv = 1, needv = 1;
    for (int i = 0; i < nd; i++) {
        outv *= v->g.output_shape[i];
        needv *= v->g.needed_shape[i];
    }
    v->has_output = outv > 0 && needv > 0;
    v->same = 1;
    for (int i = 0; i < nd; i++)
        v->same &= v->g.needed_offset[i] == 0 && v->g.needed_shape[i] == v->g.padded_shape[i];
    local = ladle__dist_tensor(dtype, device, nd, v->g.padded_shape, &v->padded);
    if (local == LADLE_OK)
        local = ladle_tensor_fill(v->padded, pad_value);
    if (local == LADLE_OK)
        local = ladle__dist_tensor(dtype, device, nd, v->g.padded_shape, &v->gpadded);
    if (local == LADLE_OK)
        local = ladle__dist_tensor(dtype, device, nd, v->g.needed_shape, &v->xn);
    if (local == LADLE_OK)
        local = ladle__dist_tensor(dtype, device, nd, v->g.needed_shape, &v->dxn);
    if (local == LADLE_OK && v->has_output) {
        local = make_local(desc, v->g.needed_shape, dtype, device, seed, &v->local);
        if (local == LADLE_OK) {
            int ln;
            int64_t ls[LADLE_MAX_NDIM];
            ladle_op_y_shape(v->local, &ln, ls);
            for (int i = 0; i < nd; i++)
                if (i != 1 && ls[i] != v->g.output_shape[i])
                    local = ladle__raise(LADLE_ERR_INTERNAL, f,
                                         "the local layer's output does not match the "
                                         "output block");
        }
    }
    /* the weights every rank holds (a copy without a local layer) */
    if (local == LADLE_OK && !is_pool) {
        const ladle_conv_desc *cd = desc;
        /* members hold whole copies; other ranks zero-volume stand-ins */
        int member = ladle_partition_active(p_x);
        int64_t ws[5] = {cd->out_channels, cd->in_channels / cd->groups, 1, 1, 1};
        int64_t bs = member ? cd->out_channels : 0;
        for (int i = 0; i < sp->nd; i++)
            ws[2 + i] = sp->k[i];
        for (int i = 0; !member && i < nd; i++)
            ws[i] = 0;
        v->nparams = cd->bias ? 2 : 1;
        v->wshape[0] = cd->out_channels;
        v->wshape[1] = cd->in_channels / cd->groups;
        for (int i = 0; i < sp->nd; i++)
            v->wshape[2 + i] = sp->k[i];
        local = ladle__dist_tensor(dtype, device, nd, ws, &v->own[0]);
        if (local == LADLE_OK)
            local = ladle__dist_tensor(dtype, device, nd, ws, &v->owng[0]);
        if (local == LADLE_OK && cd->bias)
            local = ladle__dist_tensor(dtype, device, 1, &bs, &v->own[1]);
        if (local == LADLE_OK && cd->bias)
            local = ladle__dist_tensor(dtype, device, 1, &bs, &v->owng[1]);
    }
    LADLE_CALL(ladle__dist_step(comm, local, f));
    /* gradients of the replicated weights: summed over the whole partition */
    if (v->nparams > 0) {
        int size = ladle_partition_size(p_x);
        v->gid = ladle__calloc((size_t)size, sizeof(int));
        v->counts[0] = ladle__calloc((size_t)size, sizeof(int64_t));
        v->counts[1] = ladle__calloc((size_t)size, sizeof(int64_t));
        local = v->gid && v->counts[0] && v->counts[1]
                    ? LADLE_OK
                    : ladle__raise(LADLE_ERR_ALLOC, f, "out of memory");
        int64_t wn = 1;
        for (int i = 0; i < nd; i++)
            wn *= v->wshape[i];
        for (int r = 0; local == LADLE_OK && r < size; r++) {
            v->counts[0][r] = wn;
            v->counts[1][r] = v->wshape[0];
        }
        LADLE_CALL(ladle__dist_step(comm, local, f));
    }
    for (int i = 0; i < v->nparams; i++) {
        int axes[LADLE_MAX_NDIM];
        for (int a = 0; a < nd; a++)
            axes[a] = a;
        const ladle_conv_desc *cd = desc;
        int64_t full[5] = {cd->out_channels, cd->in_channels / cd->groups, 1, 1, 1};
        for (int j = 0; j < sp->nd; j++)
            full[2 + j] = sp->k[j];
        LADLE_CALL(
            ladle__dist_step(comm,
                             ladle_all_sum_reduce_create(p_x, nd, axes, i == 0 ? nd : 1, full,
                                                         dtype, device, flags, &v->sync[i]),
                             f));
    }

    /* y: the halo's output split, with the layer's channels */
    int64_t channels = is_pool ? xs[1] : ((const ladle_conv_desc *)desc)->out_channels;
    local = y_layout(ladle_halo_exchange_output_layout(v->halo), channels, &ly);
    int64_t ys[LADLE_MAX_NDIM];
    if (local == LADLE_OK) {
        ladle_layout_box(ly, LADLE_SELF, NULL, ys);
        local = ladle__layer_new(is_pool ? &dpool_vt : &dconv_vt, dtype, device, nd,
                                 v->g.bulk_shape, nd, ys, 0, &op, f);
    }
    if (local == LADLE_OK) {
        op->impl = v;
        v = NULL;
        op->comm = comm;
        op->active = comm != MPI_COMM_NULL;
        comm = MPI_COMM_NULL;
        op->flags = ladle__op_flags_from_env(flags);
        op->x_layout = ladle__layout_retain(lx);
        op->y_layout = ladle__layout_retain(ly);
        if (!is_pool) {
            const ladle_conv_desc *cd = desc;
            double kv = 1;
            for (int i = 0; i < sp->nd; i++)
                kv *= (double)sp->k[i];
            op->weighted = 1;
            op->linear = !cd->bias;
            op->fan_in = (double)(cd->in_channels / cd->groups) * kv;
            op->fan_out = (double)(cd->out_channels / cd->groups) * kv;
            local = ladle_layer_init(op, LADLE_INIT_DEFAULT, seed);
        } else {
            const ladle_pool_desc *pd = desc;
            op->linear = pd->kind == LADLE_POOL_AVG;
        }
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
    dc_free(v);
    ladle_layout_destroy(&lx);
    ladle_layout_destroy(&ly);
    return st;
}

static ladle_status make_conv(const void *desc, const int64_t *needed, ladle_dtype dt,
                              ladle_device device, uint64_t seed, ladle_op **op)
{
    ladle_conv_desc d = *(const ladle_conv_desc *)desc;
    for (int i = 0; i < 3; i++)
        d.padding[i] = 0;
    return ladle_conv_create(&d, needed, dt, device, seed, op);
}

static ladle_status make_pool(const void *desc, const int64_t *needed, ladle_dtype dt,
                              ladle_device device, uint64_t seed, ladle_op **op)
{
    ladle_pool_desc d = *(const ladle_pool_desc *)desc;
    (void)seed;
    for (int i = 0; i < 3; i++)
        d.padding[i] = 0;
    d.ceil_mode = 0; /* the needed box already holds every window */
    return ladle_pool_create(&d, needed, dt, device, op);
}

ladle_status ladle_dist_conv_create(const ladle_conv_desc *d, const ladle_partition *p_x,
                                    const int64_t x_shape[], ladle_dtype dtype, ladle_device device,
                                    uint64_t seed, unsigned flags, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    spec sp;
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    memset(&sp, 0, sizeof sp);
    sp.nd = d->nd;
    for (int i = 0; i < 3; i++) {
        sp.k[i] = d->kernel[i];
        sp.s[i] = d->stride[i];
        sp.p[i] = d->padding[i];
        sp.d[i] = d->dilation[i];
    }
    int64_t args[25] = {d->nd, d->in_channels, d->out_channels, d->groups, d->bias,
                        (int64_t)dtype, (int64_t)flags, (int64_t)seed};
    for (int i = 0; i < 3; i++) {
        args[8 + i] = d->kernel[i];
        args[11 + i] = d->stride[i];
        args[14 + i] = d->padding[i];
        args[17 + i] = d->dilation[i];
    }
    for (int i = 0; i < 2 + d->nd && i < 5 && d->nd >= 1 && d->nd <= 3; i++)
        args[20 + i] = x_shape[i];
    ladle_status pre = LADLE_OK;
    if (d->nd >= 1 && d->nd <= 3 &&
        !(x_shape[1] == d->in_channels && d->groups >= 1 && d->in_channels % d->groups == 0 &&
          d->out_channels % d->groups == 0))
        pre = ladle__raise(LADLE_ERR_SHAPE, __func__,
                           "x has %lld channels, the layer %lld in %lld groups (out %lld)",
                           (long long)x_shape[1], (long long)d->in_channels,
                           (long long)d->groups, (long long)d->out_channels);
    st = create(pre, p_x, x_shape, &sp, 0, 0.0, d, make_conv, 25, args, dtype, device, seed, flags,
                out, __func__);
fail:
    return st;
}

ladle_status ladle_dist_pool_create(const ladle_pool_desc *d, const ladle_partition *p_x,
                                    const int64_t x_shape[], ladle_dtype dtype, ladle_device device,
                                    unsigned flags, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    spec sp;
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    ladle_status pre = LADLE_OK;
    if (d->kind != LADLE_POOL_MAX && d->kind != LADLE_POOL_AVG)
        pre = ladle__raise(LADLE_ERR_ARG, __func__, "unknown pooling kind %d", (int)d->kind);
    else if (d->kind == LADLE_POOL_AVG && (!d->count_include_pad || d->ceil_mode))
        pre = ladle__raise(LADLE_ERR_UNSUPPORTED, __func__,
                           "distributed average pooling counts the padding and has no ceil "
                           "mode (a rank cannot tell padding from data in its halo)");
    memset(&sp, 0, sizeof sp);
    sp.nd = d->nd;
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
    st = create(pre, p_x, x_shape, &sp, 1, d->kind == LADLE_POOL_MAX ? -INFINITY : 0.0, d,
                make_pool, 25, args, dtype, device, 0, flags, out, __func__);
fail:
    return st;
}
