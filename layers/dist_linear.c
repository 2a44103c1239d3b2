/*
 * Distributed linear layer (see ladle/distributed.h): a broadcast of x over
 * the weight grid, a sequential Linear on every worker's block, and a
 * sum-reduce of the partial outputs:
 *
 *   y = R (I (x) Linear_ij) B x,     dx = B* (Linear_ij*) R* dy
 *
 * with B the broadcast P_x -> P_w (x block j down column j) and R the
 * sum-reduce P_w -> P_y (row i onto rank i of P_y, the weight grid read
 * transposed). B* is a sum-reduce and R* a broadcast, so the backward is
 * the same primitives run the other way. The broadcast x is kept in the ctx
 * (the local Linear's saved input) and so is the broadcast dy, which the
 * weight pass reuses.
 */
#include <string.h>

#include "primitives/pair.h"
#include "layers/dist.h"

typedef struct dlinear {
    int64_t batch, in, out;
    int row, col;                   /* this rank's coordinates on P_w, or -1 */
    int rep, reps;                  /* its batch block (replica) and their number */
    int64_t batch_len;              /* the rows of its batch block */
    int64_t in_off, in_len;         /* its block of the input features */
    int64_t out_off, out_len;       /* and of the output features */
    int bias;
    ladle_op *bcast_x;  /* B: P_x -> P_w */
    ladle_op *reduce_y; /* R: P_w -> P_y */
    ladle_op *local;    /* the block's Linear on P_w members, else NULL */
    ladle_tensor *xb, *dyp;      /* workspace on P_w for calls without a ctx */
    ladle_tensor *yp, *dxp;      /* partial y, partial dx */
    ladle_tensor *none[2];       /* zero-volume stand-ins for missing shards */
    ladle_op *sync[2];           /* replicas' gradient sums (batch-split grids) */
    ladle_tensor *flat[2];       /* 1-D views of the local gradients for them */
    /* the sync groups: ids and counts per rank of p_w */
    int *gid[2];
    int64_t *cnt[2];
} dlinear;

typedef struct dctx {
    ladle_ctx *local;
    ladle_tensor *xb;  /* x broadcast onto P_w: the local forward's input */
    ladle_tensor *dyp; /* dy broadcast onto P_w */
    int dyp_ready;
} dctx;

static void dl_free(dlinear *v)
{
    if (v == NULL)
        return;
    ladle_op_destroy(&v->bcast_x);
    ladle_op_destroy(&v->reduce_y);
    ladle_op_destroy(&v->local);
    ladle_tensor_destroy(&v->xb);
    ladle_tensor_destroy(&v->dyp);
    ladle_tensor_destroy(&v->yp);
    ladle_tensor_destroy(&v->dxp);
    for (int i = 0; i < 2; i++) {
        ladle_tensor_destroy(&v->none[i]);
        ladle_tensor_destroy(&v->flat[i]);
        ladle_op_destroy(&v->sync[i]);
        ladle__free(v->gid[i]);
        ladle__free(v->cnt[i]);
    }
    ladle__free(v);
}

static ladle_status dl_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    dlinear *v = op->impl;
    dctx *c = ctx ? ctx->impl : NULL;
    ladle_tensor *xb = c ? c->xb : v->xb;
    (void)n;
    LADLE_CALL(ladle_op_forward(v->bcast_x, x, xb));
    if (v->local)
        LADLE_CALL(ladle_layer_forward(v->local, c ? c->local : NULL, xb, v->yp));
    LADLE_CALL(ladle_op_forward(v->reduce_y, v->yp, y));
    if (c)
        c->dyp_ready = 0;
fail:
    return st;
}

/* dy broadcast along the rows of P_w: once per ctx and dy (into the ctx),
 * or into the workspace for a linear layer's ctx-less adjoint. */
static ladle_status spread_dy(dlinear *v, dctx *c, const ladle_tensor *dy,
                              ladle_tensor **dyp)
{
    ladle_status st = LADLE_OK;
    *dyp = c ? c->dyp : v->dyp;
    if (c == NULL || !c->dyp_ready) {
        LADLE_CALL(ladle_op_adjoint(v->reduce_y, dy, *dyp));
        if (c)
            c->dyp_ready = 1;
    }
fail:
    return st;
}

static ladle_status dl_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    dlinear *v = op->impl;
    dctx *c = ctx ? ctx->impl : NULL;
    ladle_tensor *dyp;
    (void)n;
    if (dx == NULL)
        return LADLE_OK;
    LADLE_CALL(spread_dy(v, c, dy, &dyp));
    if (v->local && c)
        LADLE_CALL(ladle_layer_backward(v->local, c->local, dyp, v->dxp));
    else if (v->local) /* the adjoint of a layer without bias */
        LADLE_CALL(ladle_op_adjoint(v->local, dyp, v->dxp));
    LADLE_CALL(ladle_op_adjoint(v->bcast_x, v->dxp, dx));
fail:
    return st;
}

static ladle_status dl_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       int64_t n)
{
    ladle_status st = LADLE_OK;
    dlinear *v = op->impl;
    dctx *c = ctx->impl;
    ladle_tensor *dyp;
    (void)n;
    LADLE_CALL(spread_dy(v, c, dy, &dyp));
    if (v->local)
        LADLE_CALL(ladle_layer_backward_weight(v->local, c->local, dyp));
fail:
    return st;
}

static ladle_status dl_ctx_init(const ladle_op *op, ladle_ctx *ctx)
{
    ladle_status st = LADLE_OK;
    const dlinear *v = op->impl;
    dctx *c = ladle__calloc(1, sizeof *c);
    LADLE_CHECK(c != NULL, LADLE_ERR_ALLOC, "out of memory");
    ctx->impl = c;
    int member = v->row >= 0;
    int64_t xs[2] = {member ? v->batch_len : 0, member ? v->in_len : 0};
    int64_t ys[2] = {member ? v->batch_len : 0, member ? v->out_len : 0};
    LADLE_CALL(ladle__dist_tensor(op->dtype, op->be->device, 2, xs, &c->xb));
    LADLE_CALL(ladle__dist_tensor(op->dtype, op->be->device, 2, ys, &c->dyp));
    if (v->local)
        LADLE_CALL(ladle_ctx_create(v->local, &c->local));
fail:
    return st;
}

static void dl_ctx_fini(ladle_ctx *ctx)
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

static int dl_num_params(const ladle_op *op)
{
    const dlinear *v = op->impl;
    return v->bias ? 2 : 1;
}

static ladle_tensor *dl_param_at(const ladle_op *op, int i, int grad, const char **name)
{
    const dlinear *v = op->impl;
    if (name)
        *name = i == 0 ? "weight" : "bias";
    if (v->local && i < ladle_op_num_params(v->local))
        return grad ? ladle_op_grad(v->local, i) : ladle_op_param(v->local, i);
    return v->none[i];
}

static void dl_param_info(const ladle_op *op, int i, ladle__pinfo *info)
{
    const dlinear *v = op->impl;
    info->ndim = i == 0 ? 2 : 1;
    info->global[0] = v->out;
    info->global[1] = v->in;
    info->offset[0] = v->row >= 0 ? v->out_off : 0;
    info->offset[1] = v->row >= 0 ? v->in_off : 0;
    info->owner = v->local != NULL && i < ladle_op_num_params(v->local) && v->rep == 0;
    info->sync = v->sync[i];
    info->sync_p = v->sync[i] ? ladle_layout_partition(ladle_op_x_layout(v->sync[i])) : NULL;
    info->sync_gid = v->gid[i];
    info->sync_counts = v->cnt[i];
}

static ladle_status dl_sync(ladle_op *op)
{
    ladle_status st = LADLE_OK;
    dlinear *v = op->impl;
    for (int i = 0; i < 2; i++)
        if (v->sync[i])
            LADLE_CALL(ladle_op_forward(v->sync[i], v->flat[i], v->flat[i]));
fail:
    return st;
}

static void dl_set_training(ladle_op *op, int training)
{
    dlinear *v = op->impl;
    if (v->local)
        ladle_layer_set_training(v->local, training);
}

static void dl_destroy(ladle_op *op) { dl_free(op->impl); }

static const ladle_op_vtable dlinear_vt = {
    .kind = LADLE_OP_DIST_LINEAR,
    .name = "distributed linear",
    .destroy = dl_destroy,
    .layer_forward = dl_forward,
    .layer_backward = dl_backward,
    .layer_backward_weight = dl_backward_weight,
    .ctx_init = dl_ctx_init,
    .ctx_fini = dl_ctx_fini,
    .num_params = dl_num_params,
    .param_at = dl_param_at,
    .set_training = dl_set_training,
    .param_info = dl_param_info,
    .sync_grads = dl_sync,
};

/* The checks every rank makes alike, from global facts only. */
static ladle_status validate(const ladle_partition *p_x, const ladle_partition *p_w,
                             const ladle_partition *p_y, int64_t batch, int64_t in,
                             int64_t out, ladle_dtype dtype, unsigned flags, const char *f)
{
    if (!ladle__is_real(dtype))
        return ladle__raise(LADLE_ERR_DTYPE, f, "dtype %s is not f32 or f64",
                            ladle_dtype_name(dtype));
    if (flags & ~(unsigned)LADLE_CHECKED)
        return ladle__raise(LADLE_ERR_ARG, f, "unknown flags 0x%x", flags);
    if (ladle_partition_ndim(p_x) != 2 || ladle_partition_ndim(p_y) != 2 ||
        (ladle_partition_ndim(p_w) != 2 && ladle_partition_ndim(p_w) != 3))
        return ladle__raise(LADLE_ERR_PARTITION, f,
                            "p_x and p_y must be 2-D grids and p_w 2-D or 3-D");
    const int *sx = ladle_partition_shape(p_x), *sw = ladle_partition_shape(p_w),
              *sy = ladle_partition_shape(p_y);
    int three = ladle_partition_ndim(p_w) == 3, reps = three ? sw[1] : 1;
    int pout = sw[0], pin = sw[three ? 2 : 1];
    if (sx[0] != reps || sy[0] != reps || pout != sy[1] || pin != sx[1])
        return ladle__raise(LADLE_ERR_PARTITION, f,
                            "p_x %dx%d, p_w and p_y %dx%d do not fit: p_x must be D x Pin, p_y "
                            "D x Pout and p_w Pout x Pin (D = 1) or Pout x D x Pin",
                            sx[0], sx[1], sy[0], sy[1]);
    if (batch < reps)
        return ladle__raise(LADLE_ERR_SHAPE, f, "a batch of %lld over %d blocks",
                            (long long)batch, reps);
    if (batch < 1 || in < sx[1] || out < sy[1] || in > INT32_MAX || out > INT32_MAX)
        return ladle__raise(LADLE_ERR_SHAPE, f,
                            "batch %lld, in %lld and out %lld: the batch must be >= 1 and "
                            "the features at least the grid's %d and %d",
                            (long long)batch, (long long)in, (long long)out, sx[1], sy[1]);
    return LADLE_OK;
}

/* Explicit layouts on P_w: worker (i, [b,] j) holds [batch block b,
 * feature block] where the feature block follows coordinate `dim` (the
 * last: input features; 0: output features). */
static ladle_status worker_layout(const ladle_partition *p_w, int64_t batch, int64_t features,
                                  int dim, ladle_layout **l)
{
    ladle_status st = LADLE_OK;
    int size = ladle_partition_size(p_w), c[3], nd = ladle_partition_ndim(p_w);
    const int *shape = ladle_partition_shape(p_w);
    int64_t *off = ladle__calloc((size_t)size * 2, sizeof(int64_t));
    int64_t *ext = ladle__calloc((size_t)size * 2, sizeof(int64_t));
    int64_t global[2] = {batch, features};
    int reps = nd == 3 ? shape[1] : 1;
    LADLE_CHECK(off && ext, LADLE_ERR_ALLOC, "out of memory");
    for (int r = 0; r < size; r++) {
        ladle_partition_coords_of(p_w, r, c);
        int b = nd == 3 ? c[1] : 0;
        off[2 * r] = ladle__balanced_start(batch, reps, b);
        ext[2 * r] = ladle__balanced_size(batch, reps, b);
        off[2 * r + 1] = ladle__balanced_start(features, shape[dim], c[dim]);
        ext[2 * r + 1] = ladle__balanced_size(features, shape[dim], c[dim]);
    }
    LADLE_CALL(ladle__layout_create_explicit(p_w, 2, global, off, ext, l));
fail:
    ladle__free(off);
    ladle__free(ext);
    return st;
}

ladle_status ladle_dist_linear_create(const ladle_partition *p_x, const ladle_partition *p_w,
                                      const ladle_partition *p_y, int64_t batch,
                                      int64_t in_features, int64_t out_features, int bias,
                                      ladle_dtype dtype, ladle_device device, uint64_t seed,
                                      unsigned flags, ladle_op **out)
{
    const char *f = __func__;
    ladle_status st = LADLE_OK, local;
    ladle_op *op = NULL;
    dlinear *v = NULL;
    ladle_layout *lx = NULL, *ly = NULL, *lxb = NULL, *lyp = NULL;
    MPI_Comm comm = MPI_COMM_NULL;
    LADLE_NOT_NULL(out);
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(p_w);
    LADLE_NOT_NULL(p_y);
    const ladle_partition *parts[3] = {p_x, p_w, p_y};
    local = validate(p_x, p_w, p_y, batch, in_features, out_features, dtype, flags, f);
    int64_t args[7] = {batch, in_features, out_features, bias != 0, (int64_t)dtype,
                       (int64_t)flags, (int64_t)seed};
    LADLE_CALL(ladle__dist_begin(3, parts, device, local,
                                 ladle__dist_hash(LADLE_HASH_INIT, 3, parts, 7, args), &comm, f));

    v = ladle__calloc(1, sizeof *v);
    local = v ? LADLE_OK : ladle__raise(LADLE_ERR_ALLOC, f, "out of memory");
    if (local == LADLE_OK) {
        v->batch = batch;
        v->in = in_features;
        v->out = out_features;
        v->bias = bias != 0;
        v->row = v->col = -1;
        const int *sw = ladle_partition_shape(p_w), *cw = ladle_partition_coords(p_w);
        int three = ladle_partition_ndim(p_w) == 3, last = three ? 2 : 1;
        v->reps = three ? sw[1] : 1;
        if (cw != NULL) {
            v->row = cw[0];
            v->col = cw[last];
            v->rep = three ? cw[1] : 0;
            v->batch_len = ladle__balanced_size(batch, v->reps, v->rep);
            v->in_off = ladle__balanced_start(in_features, sw[last], v->col);
            v->in_len = ladle__balanced_size(in_features, sw[last], v->col);
            v->out_off = ladle__balanced_start(out_features, sw[0], v->row);
            v->out_len = ladle__balanced_size(out_features, sw[0], v->row);
        }
        int64_t xg[2] = {batch, in_features}, yg[2] = {batch, out_features};
        local = ladle_layout_create_balanced(p_x, 2, xg, &lx);
        if (local == LADLE_OK)
            local = ladle_layout_create_balanced(p_y, 2, yg, &ly);
        if (local == LADLE_OK)
            local = worker_layout(p_w, batch, in_features, three ? 2 : 1, &lxb);
        if (local == LADLE_OK)
            local = worker_layout(p_w, batch, out_features, 0, &lyp);
    }
    LADLE_CALL(ladle__dist_step(comm, local, f));
    /* the primitives agree among their own members; the steps in between
     * tell everyone else */
    LADLE_CALL(ladle__dist_step(
        comm, ladle__pair_create_layouts(lx, lxb, dtype, device, flags, 0, &v->bcast_x, f), f));
    LADLE_CALL(ladle__dist_step(comm,
                                ladle__pair_create_layouts(lyp, ly, dtype, device,
                                                           flags | LADLE_TRANSPOSE_SRC, 1,
                                                           &v->reduce_y, f),
                                f));

    local = LADLE_OK;
    int member = v->row >= 0;
    int64_t xs[2] = {member ? v->batch_len : 0, member ? v->in_len : 0};
    int64_t ys[2] = {member ? v->batch_len : 0, member ? v->out_len : 0};
    int64_t w0[2] = {0, 0}, b0[1] = {0};
    if (member)
        local = ladle_linear_create(2, xs, v->out_len, v->bias && v->col == 0, dtype, device, seed,
                                    &v->local);
    if (local == LADLE_OK)
        local = ladle__dist_tensor(dtype, device, 2, xs, &v->xb);
    if (local == LADLE_OK)
        local = ladle__dist_tensor(dtype, device, 2, ys, &v->dyp);
    if (local == LADLE_OK)
        local = ladle__dist_tensor(dtype, device, 2, ys, &v->yp);
    if (local == LADLE_OK)
        local = ladle__dist_tensor(dtype, device, 2, xs, &v->dxp);
    if (local == LADLE_OK)
        local = ladle__dist_tensor(dtype, device, 2, w0, &v->none[0]);
    if (local == LADLE_OK)
        local = ladle__dist_tensor(dtype, device, 1, b0, &v->none[1]);
    LADLE_CALL(ladle__dist_step(comm, local, f));
    /* a batch-split grid holds its blocks once per batch block: the
     * gradients are summed over the replicas (one group per block) */
    if (v->reps > 1) {
        int size = ladle_partition_size(p_w), c[3];
        const int *sw = ladle_partition_shape(p_w);
        for (int i = 0; local == LADLE_OK && i < 1 + (bias != 0); i++) {
            int *gid = v->gid[i] = ladle__calloc((size_t)size, sizeof(int));
            int64_t *cnt = v->cnt[i] = ladle__calloc((size_t)size, sizeof(int64_t));
            if (gid == NULL || cnt == NULL) {
                local = ladle__raise(LADLE_ERR_ALLOC, f, "out of memory");
                break;
            }
            for (int r = 0; r < size; r++) {
                ladle_partition_coords_of(p_w, r, c);
                int64_t ol = ladle__balanced_size(out_features, sw[0], c[0]);
                int64_t il = ladle__balanced_size(in_features, sw[2], c[2]);
                int has = i == 0 || c[2] == 0;
                gid[r] = has ? c[0] * sw[2] + c[2] : size * sw[0] * sw[2] + r;
                cnt[r] = !has ? 0 : i == 0 ? ol * il : ol;
            }
            local = ladle__dist_step(
                comm,
                ladle__all_sum_reduce_groups(p_w, gid, cnt, dtype, device, flags, &v->sync[i]), f);
            if (local == LADLE_OK) {
                ladle_tensor *g = v->local && i < ladle_op_num_params(v->local)
                                      ? ladle_op_grad(v->local, i)
                                      : v->none[i];
                int64_t n = ladle_tensor_numel(g);
                local = ladle_tensor_wrap(dtype, device, 1, &n, NULL, g->data, &v->flat[i]);
            }
        }
        LADLE_CALL(ladle__dist_step(comm, local, f));
    }
    if (local == LADLE_OK) {
        int64_t lxs[2], lys[2];
        ladle_layout_box(lx, LADLE_SELF, NULL, lxs);
        ladle_layout_box(ly, LADLE_SELF, NULL, lys);
        local = ladle__layer_new(&dlinear_vt, dtype, device, 2, lxs, 2, lys, 0, &op, __func__);
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
        op->weighted = 1;
        op->linear = !bias;
        op->fan_in = (double)in_features;
        op->fan_out = (double)out_features;
        /* the block of the global initialisation, not the block's own */
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
    dl_free(v);
    ladle_layout_destroy(&lx);
    ladle_layout_destroy(&ly);
    ladle_layout_destroy(&lxb);
    ladle_layout_destroy(&lyp);
    return st;
}
