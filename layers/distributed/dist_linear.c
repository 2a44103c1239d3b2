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

#include "layers/distributed/dist.h"
#include "primitives/pair.h"

typedef struct dlinear {
    /* local: the block's Linear on P_w members; param/grad: zero-volume
     * stand-ins for missing shards; sync: the replicas' gradient sums
     * (batch-split grids) */
    ladle__dist_base base;
    int64_t batch, in, out;
    int row, col;                   /* this rank's coordinates on P_w, or -1 */
    int rep, reps;                  /* its batch block (replica) and their number */
    int64_t batch_len;              /* the rows of its batch block */
    int64_t in_off, in_len;         /* its block of the input features */
    int64_t out_off, out_len;       /* and of the output features */
    int bias;
    ladle__dist_grid grid; /* B: P_x -> P_w, R: P_w -> P_y, their tensors on P_w */
} dlinear;

static const ladle__part dlinear_parts[] = {
    LADLE__PART_DIST_BASE(dlinear), LADLE__PART_DIST_GRID(dlinear), LADLE__PARTS_END};

static ladle_status dl_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    dlinear *v = op->impl;
    (void)n;
    return ladle__dist_grid_forward(&v->base, &v->grid, ctx ? ctx->impl : NULL, x, y);
}

static ladle_status dl_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    dlinear *v = op->impl;
    (void)n;
    if (dx == NULL)
        return LADLE_OK;
    return ladle__dist_grid_backward(&v->base, &v->grid, ctx ? ctx->impl : NULL, dy, dx);
}

static ladle_status dl_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       int64_t n)
{
    dlinear *v = op->impl;
    (void)n;
    return ladle__dist_grid_backward_weight(&v->base, &v->grid, ctx->impl, dy);
}

static void dl_param_info(const ladle_op *op, int i, ladle__pinfo *info)
{
    const dlinear *v = op->impl;
    const ladle__dist_base *b = &v->base;
    info->ndim = i == 0 ? 2 : 1;
    info->global[0] = v->out;
    info->global[1] = v->in;
    info->offset[0] = v->row >= 0 ? v->out_off : 0;
    info->offset[1] = v->row >= 0 ? v->in_off : 0;
    info->owner = b->local != NULL && i < ladle_op_num_params(b->local) && v->rep == 0;
    ladle__dist_sync_info(b->sync[i], b->gid[i], b->cnt[i], info);
}

static void dl_destroy(ladle_op *op) { ladle__parts_free(op->impl, dlinear_parts, NULL); }

static const ladle_op_vtable dlinear_vt = {
    .kind = LADLE_OP_DIST_LINEAR,
    .name = "distributed linear",
    .destroy = dl_destroy,
    .layer_forward = dl_forward,
    .layer_backward = dl_backward,
    .layer_backward_weight = dl_backward_weight,
    .param_info = dl_param_info,
    LADLE__DIST_BASE_SLOTS,
};

/* The checks every rank makes alike, from global facts only. */
static ladle_status validate(const ladle_partition *p_x, const ladle_partition *p_w,
                             const ladle_partition *p_y, int64_t batch, int64_t in,
                             int64_t out, ladle_dtype dtype, unsigned flags, const char *f)
{
    ladle_status st = ladle__make_check_kind(dtype, flags, f);
    if (st != LADLE_OK)
        return st;
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

/* This rank's blocks, x's and y's layouts on p_x and p_y, and the
 * workers' layouts of the broadcast x and the partial y on p_w. */
static ladle_status plan_blocks(ladle__make *m, dlinear *v, const ladle_partition *p_x,
                                const ladle_partition *p_w, const ladle_partition *p_y,
                                ladle_layout **lxb, ladle_layout **lyp)
{
    ladle_status st = LADLE_OK;
    int64_t batch = v->batch, in = v->in, out = v->out;
    const int *sw = ladle_partition_shape(p_w), *cw = ladle_partition_coords(p_w);
    int three = ladle_partition_ndim(p_w) == 3, last = three ? 2 : 1;
    v->row = v->col = -1;
    v->reps = three ? sw[1] : 1;
    if (cw != NULL) {
        v->row = cw[0];
        v->col = cw[last];
        v->rep = three ? cw[1] : 0;
        v->batch_len = ladle__balanced_size(batch, v->reps, v->rep);
        v->in_off = ladle__balanced_start(in, sw[last], v->col);
        v->in_len = ladle__balanced_size(in, sw[last], v->col);
        v->out_off = ladle__balanced_start(out, sw[0], v->row);
        v->out_len = ladle__balanced_size(out, sw[0], v->row);
    }
    int64_t xg[2] = {batch, in}, yg[2] = {batch, out};
    LADLE_CALL(ladle_layout_create_balanced(p_x, 2, xg, &m->lx));
    LADLE_CALL(ladle_layout_create_balanced(p_y, 2, yg, &m->ly));
    LADLE_CALL(worker_layout(p_w, batch, in, last, lxb));
    LADLE_CALL(worker_layout(p_w, batch, out, 0, lyp));
fail:
    return st;
}

/* B and R. The primitives agree among their own members; the steps in
 * between tell everyone else. */
static ladle_status plan_ops(ladle__make *m, dlinear *v, const ladle_layout *lxb,
                             const ladle_layout *lyp)
{
    ladle_status st = LADLE_OK;
    const char *f = m->func;
    LADLE_CALL(ladle__make_step(m->comm,
                                ladle__pair_create_layouts(m->lx, lxb, m->dtype, m->device,
                                                           m->flags, 0, &v->grid.bcast, f),
                                f));
    LADLE_CALL(ladle__make_step(m->comm,
                                ladle__pair_create_layouts(lyp, m->ly, m->dtype, m->device,
                                                           m->flags | LADLE_TRANSPOSE_SRC,
                                                           1, &v->grid.reduce, f),
                                f));
fail:
    return st;
}

/* The block's Linear on members (its bias on column 0), the buffers on P_w
 * and the stand-ins. Local. */
static ladle_status allocate(ladle__make *m, dlinear *v, uint64_t seed)
{
    ladle_status st = LADLE_OK;
    ladle_dtype dt = m->dtype;
    ladle_device dev = m->device;
    int member = v->row >= 0;
    int64_t xs[2] = {member ? v->batch_len : 0, member ? v->in_len : 0};
    int64_t ys[2] = {member ? v->batch_len : 0, member ? v->out_len : 0};
    int64_t w0[2] = {0, 0}, b0[1] = {0};
    if (member) {
        ladle_linear_desc ld;
        ladle_linear_desc_init(&ld, v->in_len, v->out_len);
        ld.bias = v->bias && v->col == 0;
        LADLE_CALL(ladle_linear_create(&ld, 2, xs, dt, dev, seed, &v->base.local));
    }
    LADLE_CALL(ladle__dist_tensor(dt, dev, 2, xs, &v->grid.xb));
    LADLE_CALL(ladle__dist_tensor(dt, dev, 2, ys, &v->grid.dyp));
    LADLE_CALL(ladle__dist_tensor(dt, dev, 2, ys, &v->grid.yp));
    LADLE_CALL(ladle__dist_tensor(dt, dev, 2, xs, &v->grid.dxp));
    LADLE_CALL(ladle__dist_param(dt, dev, 2, w0, &v->base.param[0]));
    LADLE_CALL(ladle__dist_param(dt, dev, 1, b0, &v->base.param[1]));
    v->base.grad[0] = v->base.param[0];
    v->base.grad[1] = v->base.param[1];
    v->base.nsaved = 2;
    v->base.saved_like[0] = v->grid.xb;
    v->base.saved_like[1] = v->grid.dyp;
fail:
    return st;
}

/* A batch-split grid holds its blocks once per batch block: the gradients
 * are summed over the replicas, one group per block (rank r of p_w). */
typedef struct groups {
    const ladle_partition *p_w;
    int64_t in, out;
} groups;

static void replica_group(const void *arg, int i, int r, int *gid, int64_t *count)
{
    const groups *g = arg;
    const int *sw = ladle_partition_shape(g->p_w);
    int size = ladle_partition_size(g->p_w), c[3];
    ladle_partition_coords_of(g->p_w, r, c);
    int64_t ol = ladle__balanced_size(g->out, sw[0], c[0]);
    int64_t il = ladle__balanced_size(g->in, sw[2], c[2]);
    int has = i == 0 || c[2] == 0;
    *gid = has ? c[0] * sw[2] + c[2] : size * sw[0] * sw[2] + r;
    *count = !has ? 0 : i == 0 ? ol * il : ol;
}

ladle_status ladle_dist_linear_create(const ladle_linear_desc *d,
                                      const ladle_dist_partitions *p,
                                      const int64_t x_shape[2], ladle_dtype dtype,
                                      ladle_device device, uint64_t seed, ladle_op **out)
{
    const char *f = __func__;
    ladle_status st = LADLE_OK, local;
    ladle__make m = {f, dtype, device, 0, MPI_COMM_NULL, NULL, NULL};
    dlinear *v = NULL;
    ladle_layout *lxb = NULL, *lyp = NULL;
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    LADLE_NOT_NULL(p);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    const ladle_partition *p_x = p->x, *p_w = p->w, *p_y = p->y;
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(p_w);
    LADLE_NOT_NULL(p_y);
    unsigned flags = d->flags;
    m.flags = flags;
    int64_t batch = x_shape[0], in_features = d->in_features,
            out_features = d->out_features;
    int bias = d->bias;
    const ladle_partition *parts[3] = {p_x, p_w, p_y};
    local = validate(p_x, p_w, p_y, batch, in_features, out_features, dtype, flags, f);
    if (local == LADLE_OK && x_shape[1] != in_features)
        local = ladle__raise(LADLE_ERR_SHAPE, f, "x's width %lld is not in_features %lld",
                             (long long)x_shape[1], (long long)in_features);
    int64_t args[7] = {batch, in_features, out_features, bias != 0, (int64_t)dtype,
                       (int64_t)flags, (int64_t)seed};
    LADLE_CALL(ladle__make_open(&m, 3, parts, local,
                                ladle__make_hash(LADLE_HASH_INIT, 3, parts, 7, args)));

    v = ladle__calloc(1, sizeof *v);
    local = v ? LADLE_OK : ladle__raise(LADLE_ERR_ALLOC, f, "out of memory");
    if (local == LADLE_OK) {
        v->batch = batch;
        v->in = in_features;
        v->out = out_features;
        v->bias = bias != 0;
        v->base.nparams = v->bias ? 2 : 1;
        local = plan_blocks(&m, v, p_x, p_w, p_y, &lxb, &lyp);
    }
    LADLE_CALL(ladle__make_step(m.comm, local, f));
    LADLE_CALL(plan_ops(&m, v, lxb, lyp));
    LADLE_CALL(ladle__make_step(m.comm, allocate(&m, v, seed), f));
    if (v->reps > 1) {
        groups g = {p_w, in_features, out_features};
        LADLE_CALL(ladle__dist_replicas(&m, &v->base, 1 + v->bias, p_w, replica_group, &g));
    }
    int taken = 0;
    st = ladle__dist_grid_end(&m, &dlinear_vt, v, NULL, bias, (double)in_features,
                              (double)out_features, seed, &taken, out);
    if (taken)
        v = NULL;
fail:
    ladle__make_close(&m);
    ladle__parts_free(v, dlinear_parts, NULL);
    ladle_layout_destroy(&lxb);
    ladle_layout_destroy(&lyp);
    return st;
}
