/*
 * Spatially partitioned transposed convolution (see ladle/distributed.h):
 * the adjoint of the spatially partitioned convolution C from C_out to
 * C_in channels over y's global extents (layers/distributed/dist_conv.c,
 * y = L S H P u there). With C = L S H P,
 *
 *   forward          y   = C* x = P* H* S* L* x (+ bias)
 *   backward         dx  = C dy
 *   backward_weight  dW += L's weight gradient at input S H P dy and
 *                          output gradient x;  db = sums of dy
 *
 * so x is split as C's output and y as C's input (in balance over p_x),
 * the forward's halo exchange is C's adjoint one (each halo added back into
 * its owner's block) and the backward's is C's own. The weight is C's,
 * replicated over p_x with its gradient sums; the bias is the layer's own,
 * replicated too, its gradient summed over p_x by
 * ladle_layer_sync_gradients. The weight pass needs C's saved input, the
 * box S H P dy: the backward's run of C keeps it in the ctx (C's ctx), and
 * a weight pass without that backward runs C into a scratch output first.
 */
#include <string.h>

#include "layers/distributed/dist.h"
#include "layers/sequential/conv_transpose_impl.h"

typedef struct dtconv {
    /* local: C; param[1], grad[1]: the bias (zero volume outside p_x), its
     * sum over p_x in sync[1] */
    ladle__dist_base base;
    ladle_tensor *scratch; /* C's output (x's block) for a lone weight pass */
    int64_t co, pout;      /* y's channels and positions per channel here */
} dtconv;

static const ladle__part dtc_parts[] = {
    LADLE__PART_DIST_BASE(dtconv), LADLE__PART_TENSOR(dtconv, scratch), LADLE__PARTS_END};

static ladle_status dtc_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    dtconv *v = op->impl;
    ladle_op *c = v->base.local;
    if (ctx != NULL) /* the ctx's saved box is for the next backward's dy */
        ((ladle__dist_ctx *)ctx->impl)->ready = 0;
    LADLE_CALL(c->vt->layer_backward(c, NULL, x, y, n));
    if (v->base.nparams > 1 && y->numel > 0)
        LADLE_CALL(op->be->fn->bias_add(op->be, op->dtype, y->shape[0], v->co, v->pout,
                                        v->base.param[1]->data, y->data));
fail:
    return st;
}

static ladle_status dtc_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                 ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    dtconv *v = op->impl;
    ladle_op *c = v->base.local;
    if (dx == NULL)
        return LADLE_OK;
    if (ctx == NULL) /* the adjoint of a layer without bias */
        return c->vt->layer_forward(c, NULL, dy, dx, n);
    ladle__dist_ctx *dc = ctx->impl;
    LADLE_CALL(c->vt->layer_forward(c, dc->local, dy, dx, n));
    dc->ready = 1;
fail:
    return st;
}

static ladle_status dtc_backward_weight(ladle_op *op, ladle_ctx *ctx,
                                        const ladle_tensor *dy, int64_t n)
{
    ladle_status st = LADLE_OK;
    dtconv *v = op->impl;
    ladle_op *c = v->base.local;
    ladle__dist_ctx *dc = ctx->impl;
    if (!dc->ready) {
        LADLE_CALL(c->vt->layer_forward(c, dc->local, dy, v->scratch, n));
        dc->ready = 1;
    }
    LADLE_CALL(c->vt->layer_backward_weight(c, dc->local, ctx->x, n));
    if (v->base.nparams > 1 && dy->numel > 0)
        LADLE_CALL(op->be->fn->bias_grad(op->be, op->dtype, dy->shape[0], v->co, v->pout,
                                         dy->data, v->base.grad[1]->data));
fail:
    return st;
}

static ladle_status dtc_sync_grads(ladle_op *op)
{
    ladle_status st = LADLE_OK;
    dtconv *v = op->impl;
    LADLE_CALL(ladle_layer_sync_gradients(v->base.local));
    LADLE_CALL(ladle__dist_sync_grads(op));
fail:
    return st;
}

static void dtc_param_info(const ladle_op *op, int i, ladle__pinfo *info)
{
    const dtconv *v = op->impl;
    if (i == 0) { /* C's weight, replicated over p_x */
        ladle__param_info(v->base.local, 0, info);
        return;
    }
    info->ndim = 1;
    info->global[0] = op->y_layout ? ladle_layout_global_shape(op->y_layout)[1] : 0;
    info->owner = ladle_partition_rank(ladle_layout_partition(op->x_layout)) == 0;
    ladle__dist_sync_info(v->base.sync[1], v->base.gid[1], v->base.cnt[1], info);
}

static void dtc_param_bound(ladle_op *op, int i)
{
    dtconv *v = op->impl;
    ladle_op *c = v->base.local;
    ladle__dist_param_bound(op, i);
    if (i == 0 && c->vt->param_bound) /* the tensor moved is C's own */
        c->vt->param_bound(c, 0);
}

static void dtc_destroy(ladle_op *op) { ladle__parts_free(op->impl, dtc_parts, NULL); }

static const ladle_op_vtable dtc_vt = {
    .kind = LADLE_OP_DIST_CONV_TRANSPOSE,
    .name = "distributed transposed convolution",
    .destroy = dtc_destroy,
    .layer_forward = dtc_forward,
    .layer_backward = dtc_backward,
    .layer_backward_weight = dtc_backward_weight,
    .ctx_init = ladle__dist_ctx_init,
    .ctx_held = ladle__dist_ctx_held,
    .ctx_fini = ladle__dist_ctx_fini,
    .num_params = ladle__dist_num_params,
    .param_at = ladle__dist_param_at,
    .set_training = ladle__dist_set_training,
    .param_info = dtc_param_info,
    .sync_grads = dtc_sync_grads,
    .param_bound = dtc_param_bound,
};

/* The bias (C_out on members of p_x), the scratch output and y's block
 * extents. Local. */
static ladle_status allocate(ladle__make *m, dtconv *v, const ladle_conv_transpose_desc *d,
                             const ladle_partition *p_x)
{
    ladle_status st = LADLE_OK;
    int nd = ladle_layout_ndim(m->lx);
    int64_t xb[LADLE_MAX_NDIM], yb[LADLE_MAX_NDIM];
    int64_t bs = ladle_partition_active(p_x) ? d->out_channels : 0;
    ladle_layout_box(m->lx, LADLE_SELF, NULL, xb);
    ladle_layout_box(m->ly, LADLE_SELF, NULL, yb);
    v->co = yb[1];
    v->pout = 1;
    for (int i = 2; i < nd; i++)
        v->pout *= yb[i];
    v->base.nparams = d->bias ? 2 : 1;
    LADLE_CALL(ladle__dist_tensor(m->dtype, m->device, nd, xb, &v->scratch));
    if (d->bias) {
        LADLE_CALL(ladle__dist_param(m->dtype, m->device, 1, &bs, &v->base.param[1]));
        LADLE_CALL(ladle__dist_grad(m->dtype, m->device, 1, &bs, &v->base.grad[1]));
    }
fail:
    return st;
}

/* The bias gradient's sum over p_x: one group, C_out elements a rank. */
static ladle_status plan_bias_sync(ladle__make *m, dtconv *v, int64_t co,
                                   const ladle_partition *p_x)
{
    ladle_status st = LADLE_OK;
    ladle__dist_base *b = &v->base;
    int size = ladle_partition_size(p_x);
    b->gid[1] = ladle__calloc((size_t)size, sizeof(int));
    b->cnt[1] = ladle__calloc((size_t)size, sizeof(int64_t));
    LADLE_CALL(ladle__make_step(m->comm, ladle__make_alloc_ok(m, b->gid[1] && b->cnt[1]),
                                m->func));
    for (int r = 0; r < size; r++)
        b->cnt[1][r] = co;
    LADLE_CALL(
        ladle__make_step(m->comm,
                         ladle__all_sum_reduce_groups(p_x, b->gid[1], b->cnt[1], m->dtype,
                                                      m->device, m->flags, &b->sync[1]),
                         m->func));
    LADLE_CALL(ladle__make_step(m->comm, ladle__dist_sync_view(m, b, 1), m->func));
fail:
    return st;
}

/* C, then the layer over C's layouts exchanged. Collective over p_x. */
static ladle_status build(ladle__make *m, dtconv *v, const ladle_conv_transpose_desc *d,
                          const ladle_conv_desc *cd, const ladle_partition *p_x,
                          const int64_t *ys, uint64_t seed, int *taken, ladle_op **out)
{
    ladle_status st = LADLE_OK, local;
    ladle_op *op = NULL;
    LADLE_CALL(ladle__make_step(
        m->comm,
        ladle_dist_conv_create(cd, p_x, ys, m->dtype, m->device, seed, &v->base.local),
        m->func));
    m->lx = ladle__layout_retain(ladle_op_y_layout(v->base.local));
    m->ly = ladle__layout_retain(ladle_op_x_layout(v->base.local));
    LADLE_CALL(ladle__make_step(m->comm, allocate(m, v, d, p_x), m->func));
    if (d->bias)
        LADLE_CALL(plan_bias_sync(m, v, d->out_channels, p_x));
    local = ladle__make_layer(m, LADLE_OK, &dtc_vt, v, NULL, &op);
    *taken = local == LADLE_OK; /* the op frees v from here on */
    if (local == LADLE_OK) {
        int64_t kv = 1;
        for (int i = 0; i < d->nd; i++)
            kv *= d->kernel[i];
        op->weighted = 1;
        op->linear = !d->bias;
        op->fan_in = (double)(cd->in_channels / cd->groups * kv); /* C_out / groups K... */
        op->fan_out = (double)(d->in_channels * kv);
        local = ladle_layer_init(op, LADLE_INIT_DEFAULT, seed);
    }
    return ladle__make_end(m, &op, local, out);
fail:
    return st;
}

ladle_status ladle_dist_conv_transpose_create(const ladle_conv_transpose_desc *d,
                                              const ladle_partition *p_x,
                                              const int64_t x_shape[], ladle_dtype dtype,
                                              ladle_device device, uint64_t seed,
                                              ladle_op **out)
{
    ladle_status st = LADLE_OK;
    const char *f = __func__;
    const ladle_partition *parts[1] = {p_x};
    ladle_conv_desc cd;
    int64_t ys[5] = {0};
    dtconv *v = NULL;
    int taken = 0;
    ladle__make m = {f, dtype, device, 0, MPI_COMM_NULL, NULL, NULL};
    memset(&cd, 0, sizeof cd);
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    ladle_status pre = ladle__window_layer_check(d->nd, d->flags, dtype, x_shape, f);
    if (pre == LADLE_OK)
        pre = ladle__conv_transpose_plan(d, x_shape, LADLE_CHECKED | LADLE_OVERLAP_HALO, f,
                                         &cd, ys);
    for (int i = 0; pre == LADLE_OK && i < d->nd; i++)
        if (d->output_padding[i] >= (d->stride[i] ? d->stride[i] : 1))
            pre = ladle__raise(LADLE_ERR_UNSUPPORTED, f,
                               "spatial dimension %d: an output padding of %lld, not below "
                               "the stride %lld, is not supported on a partition (the "
                               "sequential layer takes it)",
                               i, (long long)d->output_padding[i], (long long)d->stride[i]);
    cd.flags = d->flags;
    int64_t args[28] = {d->nd,   d->in_channels, d->out_channels,   d->groups,
                        d->bias, (int64_t)dtype, (int64_t)d->flags, (int64_t)seed};
    for (int i = 0; i < 3; i++) {
        args[8 + i] = d->kernel[i];
        args[11 + i] = d->stride[i];
        args[14 + i] = d->padding[i];
        args[17 + i] = d->dilation[i];
        args[20 + i] = d->output_padding[i];
    }
    for (int i = 0; i < 2 + d->nd && i < 5 && d->nd >= 1 && d->nd <= 3; i++)
        args[23 + i] = x_shape[i];
    m.flags = d->flags & ~(unsigned)LADLE_OVERLAP_HALO;
    LADLE_CALL(ladle__make_open(&m, 1, parts, pre,
                                ladle__make_hash(LADLE_HASH_INIT, 1, parts, 28, args)));
    v = ladle__calloc(1, sizeof *v);
    LADLE_CALL(ladle__make_step(m.comm, ladle__make_alloc_ok(&m, v != NULL), f));
    st = build(&m, v, d, &cd, p_x, ys, seed, &taken, out);
fail:
    if (!taken)
        ladle__parts_free(v, dtc_parts, NULL);
    ladle__make_close(&m);
    return st;
}
