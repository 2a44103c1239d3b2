/* Shared pieces of the distributed layers (see dist.h). */
#include <limits.h>
#include <string.h>

#include "layers/distributed/dist.h"

ladle_status ladle__dist_halo(ladle__make *m, const ladle_window *w, ladle_op **halo,
                              ladle_halo_geometry *g)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(ladle__make_step(
        m->comm, ladle_halo_exchange_create(m->lx, w, m->dtype, m->device, m->flags, halo),
        m->func));
    ladle_halo_exchange_geometry(*halo, g);
fail:
    return st;
}

ladle_status ladle__dist_halo_in(const ladle_op *op, ladle_op *halo,
                                 const ladle_halo_geometry *g, const ladle_tensor *x,
                                 ladle_tensor *padded)
{
    ladle_status st = LADLE_OK;
    int64_t zero[LADLE_MAX_NDIM] = {0};
    LADLE_CALL(ladle__dist_box_copy(op, LADLE_BOX_COPY, x->ndim, g->bulk_shape, x, zero,
                                    padded, g->bulk_offset));
    LADLE_CALL(ladle_op_forward(halo, padded, padded));
fail:
    return st;
}

ladle_status ladle__dist_halo_out(const ladle_op *op, ladle_op *halo,
                                  const ladle_halo_geometry *g, ladle_tensor *gpadded,
                                  ladle_tensor *dx)
{
    ladle_status st = LADLE_OK;
    int64_t zero[LADLE_MAX_NDIM] = {0};
    LADLE_CALL(ladle_op_adjoint(halo, gpadded, gpadded));
    LADLE_CALL(ladle__dist_box_copy(op, LADLE_BOX_COPY, dx->ndim, g->bulk_shape, gpadded,
                                    g->bulk_offset, dx, zero));
fail:
    return st;
}

ladle_status ladle__dist_tensor(ladle_dtype dtype, ladle_device device, int ndim,
                                const int64_t *shape, ladle_tensor **t)
{
    return ladle_tensor_create(dtype, device, ndim, shape, t);
}

ladle_status ladle__dist_param(ladle_dtype dtype, ladle_device device, int ndim,
                               const int64_t *shape, ladle_tensor **t)
{
    return ladle__tensor_create_as(LADLE_MEM_PARAMS, dtype, device, ndim, shape, t);
}

ladle_status ladle__dist_grad(ladle_dtype dtype, ladle_device device, int ndim,
                              const int64_t *shape, ladle_tensor **t)
{
    return ladle__tensor_create_as(LADLE_MEM_GRADS, dtype, device, ndim, shape, t);
}

ladle_status ladle__dist_open_xy(ladle__make *m, const ladle_partition *p_x,
                                 const ladle_partition *p_y, int ndim,
                                 const int64_t *x_shape, ladle_status local)
{
    const ladle_partition *parts[2] = {p_x, p_y};
    int64_t args[8] = {ndim, (int64_t)m->dtype, (int64_t)m->flags};
    for (int d = 0; local == LADLE_OK && d < ndim && d < 5; d++)
        args[3 + d] = x_shape[d];
    return ladle__make_open(m, 2, parts, local,
                            ladle__make_hash(LADLE_HASH_INIT, 2, parts, 8, args));
}

ladle_status ladle__dist_make_linear(ladle__make *m, ladle_status local,
                                     const ladle_op_vtable *vt, void *impl, int *taken,
                                     ladle_op **out)
{
    ladle_op *op = NULL;
    local = ladle__make_layer(m, local, vt, impl, NULL, &op);
    *taken = local == LADLE_OK;
    if (local == LADLE_OK)
        op->linear = 1;
    return ladle__make_end(m, &op, local, out);
}

void ladle__dist_coords(const ladle_partition *p, int *coords)
{
    const int *c = ladle_partition_coords(p);
    for (int d = 0; d < ladle_partition_ndim(p); d++)
        coords[d] = c ? c[d] : -1;
}

ladle_status ladle__dist_box_copy(const ladle_op *op, ladle_box_mode mode, int nd,
                                  const int64_t *ext, const ladle_tensor *src,
                                  const int64_t *soff, ladle_tensor *dst,
                                  const int64_t *doff)
{
    int64_t ss[LADLE_MAX_NDIM], ds[LADLE_MAX_NDIM], so = 0, dof = 0, vol = 1;
    size_t es = ladle_dtype_size(op->dtype);
    for (int d = nd - 1; d >= 0; d--) {
        ss[d] = d == nd - 1 ? 1 : ss[d + 1] * src->shape[d + 1];
        ds[d] = d == nd - 1 ? 1 : ds[d + 1] * dst->shape[d + 1];
        vol *= ext[d];
    }
    if (vol == 0)
        return LADLE_OK;
    for (int d = 0; d < nd; d++) {
        so += soff[d] * ss[d];
        dof += doff[d] * ds[d];
    }
    return op->be->fn->copy_box(op->be, op->dtype, mode, nd, ext,
                                (const char *)src->data + (size_t)so * es, ss,
                                (char *)dst->data + (size_t)dof * es, ds);
}

void ladle__dist_base_free(ladle__dist_base *b)
{
    if (b == NULL)
        return;
    ladle_op_destroy(&b->local);
    for (int i = 0; i < LADLE_MAX_PARAMS; i++) {
        if (b->grad[i] != b->param[i])
            ladle_tensor_destroy(&b->grad[i]);
        ladle_tensor_destroy(&b->param[i]);
        ladle_tensor_destroy(&b->view[i]);
        ladle_op_destroy(&b->sync[i]);
        ladle__free(b->gid[i]);
        ladle__free(b->cnt[i]);
    }
}

void ladle__dist_base_part(void *member, const ladle_backend *be)
{
    (void)be;
    ladle__dist_base_free(member);
}

ladle_status ladle__dist_local_backward(const ladle__dist_base *b, const ladle__dist_ctx *c,
                                        const ladle_tensor *dy, ladle_tensor *dx)
{
    if (b->local == NULL)
        return LADLE_OK;
    if (c == NULL)
        return ladle_op_adjoint(b->local, dy, dx);
    return ladle_layer_backward(b->local, c->local, dy, dx);
}

ladle_status ladle__dist_ctx_fill(const ladle_op *op, ladle__dist_ctx *c)
{
    ladle_status st = LADLE_OK;
    const ladle__dist_base *b = op->impl;
    for (int k = 0; k < b->nsaved; k++) {
        const ladle_tensor *like = b->saved_like[k];
        LADLE_CALL(ladle__dist_tensor(op->dtype, op->be->device, like->ndim, like->shape,
                                      &c->saved[k]));
        if (b->saved_from[k])
            LADLE_CALL(ladle_tensor_copy(c->saved[k], b->saved_from[k]));
    }
    if (b->local)
        LADLE_CALL(ladle_ctx_create(b->local, &c->local));
fail:
    return st;
}

void ladle__dist_ctx_empty(ladle__dist_ctx *c)
{
    ladle_ctx_destroy(&c->local);
    for (int k = 0; k < 2; k++)
        ladle_tensor_destroy(&c->saved[k]);
}

ladle_status ladle__dist_ctx_init(const ladle_op *op, ladle_ctx *ctx)
{
    ladle_status st = LADLE_OK;
    ladle__dist_ctx *c = ladle__calloc(1, sizeof *c);
    LADLE_CHECK(c != NULL, LADLE_ERR_ALLOC, "out of memory");
    ctx->impl = c;
    LADLE_CALL(ladle__dist_ctx_fill(op, c));
fail:
    return st;
}

size_t ladle__dist_ctx_held(const ladle_ctx *ctx)
{
    const ladle__dist_ctx *c = ctx->impl;
    size_t n = ladle_ctx_bytes_held(c->local);
    for (int k = 0; k < 2; k++)
        if (c->saved[k])
            n += (size_t)c->saved[k]->numel * ladle_dtype_size(c->saved[k]->dtype);
    return n;
}

void ladle__dist_ctx_fini(ladle_ctx *ctx)
{
    ladle__dist_ctx *c = ctx->impl;
    if (c == NULL)
        return;
    ladle__dist_ctx_empty(c);
    ladle__free(c);
    ctx->impl = NULL;
}

ladle_status ladle__dist_loss_no_layer(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                       ladle_tensor *y, int64_t n)
{
    (void)ctx, (void)x, (void)y, (void)n;
    return ladle__raise(LADLE_ERR_ARG, "ladle_layer_forward",
                        "the %s op is a loss: use ladle_loss_forward", op->vt->name);
}

uint64_t ladle__dist_loss_hash(uint64_t h, const ladle_loss_desc *d, ladle_status local)
{
    h = ladle__hash(h, &d->label_smoothing, sizeof d->label_smoothing);
    if (local == LADLE_OK && d->weights != NULL)
        h = ladle__hash(h, d->weights, (size_t)d->num_weights * sizeof *d->weights);
    return h;
}

int ladle__dist_num_params(const ladle_op *op)
{
    return ((const ladle__dist_base *)op->impl)->nparams;
}

ladle_tensor *ladle__dist_param_at(const ladle_op *op, int i, int grad, const char **name)
{
    const ladle__dist_base *b = op->impl;
    if (name)
        *name = i == 0 ? "weight" : "bias";
    if (b->local && i < ladle_op_num_params(b->local))
        return grad ? ladle_op_grad(b->local, i) : ladle_op_param(b->local, i);
    return grad ? b->grad[i] : b->param[i];
}

void ladle__dist_set_training(ladle_op *op, int training)
{
    const ladle__dist_base *b = op->impl;
    if (b->local)
        ladle_layer_set_training(b->local, training);
}

void ladle__dist_param_bound(ladle_op *op, int i)
{
    ladle__dist_base *b = op->impl;
    const ladle_tensor *g = ladle_op_grad(op, i);
    if (i < LADLE_MAX_PARAMS && b->view[i] != NULL && g != NULL)
        b->view[i]->data = g->data; /* same bytes, as ladle__dist_sync_view made it */
}

ladle_status ladle__dist_sync_grads(ladle_op *op)
{
    ladle_status st = LADLE_OK;
    ladle__dist_base *b = op->impl;
    for (int i = 0; i < LADLE_MAX_PARAMS; i++)
        if (b->sync[i])
            LADLE_CALL(ladle_op_forward(b->sync[i], b->view[i], b->view[i]));
fail:
    return st;
}

void ladle__dist_channel_param_info(const ladle_op *op, const ladle__dist_base *base,
                                    int64_t c_off, ladle__pinfo *info)
{
    const ladle_layout *l = op->x_layout;
    info->ndim = 1;
    info->global[0] = ladle_layout_global_shape(l)[1];
    info->offset[0] = c_off;
    const int *coords = ladle_partition_coords(ladle_layout_partition(l));
    int owner = coords != NULL;
    for (int d = 0; coords && d < ladle_layout_ndim(l); d++)
        if (d != 1 && coords[d] != 0)
            owner = 0;
    info->owner = owner;
    ladle__dist_sync_info(base->sync[0], base->gid[0], base->cnt[0], info);
}

ladle_status ladle__dist_channel_sync_plan(ladle__make *m, ladle__dist_base *base,
                                           const ladle_partition *p_x, int **cid,
                                           int64_t **counts)
{
    ladle_status st = LADLE_OK;
    int64_t box[LADLE_MAX_NDIM];
    for (int r = 0; r < ladle_partition_size(p_x); r++) {
        ladle_layout_box(m->lx, r, NULL, box);
        (*counts)[r] = box[1];
    }
    LADLE_CALL(
        ladle__make_step(m->comm,
                         ladle__all_sum_reduce_groups(p_x, *cid, *counts, m->dtype,
                                                      m->device, m->flags, &base->sync[0]),
                         m->func));
    base->gid[0] = *cid;
    base->cnt[0] = *counts;
    *cid = NULL;
    *counts = NULL;
fail:
    return st;
}

ladle_status ladle__dist_channel_sync(ladle__dist_base *base, int n)
{
    ladle_status st = LADLE_OK;
    for (int i = 0; i < n; i++)
        LADLE_CALL(ladle_op_forward(base->sync[0], base->grad[i], base->grad[i]));
fail:
    return st;
}

int ladle__dist_channel_member(const ladle_op *op)
{
    return ladle_partition_active(ladle_layout_partition(op->x_layout));
}

int ladle__dist_groups_alloc(ladle__dist_groups *g, int size)
{
    g->gid = ladle__calloc((size_t)size, sizeof(int));
    g->cid = ladle__calloc((size_t)size, sizeof(int));
    g->counts = ladle__calloc((size_t)size, sizeof(int64_t));
    return g->gid && g->cid && g->counts;
}

void ladle__dist_groups_free(ladle__dist_groups *g)
{
    ladle__free(g->gid);
    ladle__free(g->cid);
    ladle__free(g->counts);
    g->gid = g->cid = NULL;
    g->counts = NULL;
}

ladle_status ladle__dist_channel_params(ladle__make *m, ladle__dist_base *base, int64_t cs)
{
    ladle_status st = LADLE_OK;
    for (int i = 0; i < 2; i++) {
        LADLE_CALL(ladle__dist_param(m->dtype, m->device, 1, &cs, &base->param[i]));
        LADLE_CALL(ladle__dist_grad(m->dtype, m->device, 1, &cs, &base->grad[i]));
    }
    LADLE_CALL(ladle_tensor_fill(base->param[0], 1.0));
fail:
    return st;
}

ladle_status ladle__dist_channel_create(const ladle__dist_channel_kind *k, const void *d,
                                        unsigned flags, const ladle_partition *p_x,
                                        const int64_t *x_shape, ladle_dtype dtype,
                                        ladle_device device, void *arg, ladle_op **out,
                                        const char *func)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle__make m = {func, dtype, device, flags, MPI_COMM_NULL, NULL, NULL};
    ladle_op *op = NULL;
    void *v = NULL;
    ladle__dist_groups g = {NULL, NULL, NULL};
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    const ladle_partition *parts[1] = {p_x};
    int ndim = ladle_partition_ndim(p_x);
    local = k->validate(d, p_x, ndim, x_shape, dtype, arg, func);
    LADLE_CALL(ladle__make_open(&m, 1, parts, local,
                                k->hash(d, parts, ndim, x_shape, dtype, arg)));
    v = ladle__calloc(1, k->impl_size);
    local = ladle__make_alloc_ok(
        &m, ladle__dist_groups_alloc(&g, ladle_partition_size(p_x)) && v);
    if (local == LADLE_OK)
        local = k->plan(&m, v, d, p_x, ndim, x_shape, arg, &g);
    LADLE_CALL(ladle__make_step(m.comm, local, func));
    LADLE_CALL(k->reductions(&m, v, p_x, &g));
    local = k->allocate(&m, v);
    if (local == LADLE_OK)
        m.ly = ladle__layout_retain(m.lx);
    local = ladle__make_layer(&m, local, k->vt, v, NULL, &op);
    if (local == LADLE_OK) {
        void *taken = v;
        v = NULL;
        local = k->attach(op, taken);
    }
    st = ladle__make_end(&m, &op, local, out);
fail:
    ladle_op_destroy(&op);
    ladle__make_close(&m);
    ladle__parts_free(v, k->parts, NULL);
    ladle__dist_groups_free(&g);
    return st;
}

void ladle__dist_sync_info(const ladle_op *sync, const int *gid, const int64_t *counts,
                           ladle__pinfo *info)
{
    info->sync = (ladle_op *)sync;
    info->sync_p = sync ? ladle_layout_partition(ladle_op_x_layout(sync)) : NULL;
    info->sync_gid = gid;
    info->sync_counts = counts;
}

ladle_status ladle__dist_sync_view(ladle__make *m, ladle__dist_base *b, int i)
{
    ladle_status st = LADLE_OK;
    const ladle_op *s = b->sync[i];
    ladle_tensor *g = NULL;
    /* the parameter as the layer reports it, before the op exists */
    if (b->local && i < ladle_op_num_params(b->local))
        g = ladle_op_grad(b->local, i);
    else
        g = b->grad[i];
    LADLE_CHECK(g != NULL && s->x_numel == ladle_tensor_numel(g), LADLE_ERR_INTERNAL,
                "the sum of parameter %d's copies does not fit its gradient", i);
    LADLE_CALL(ladle_tensor_wrap(m->dtype, m->device, s->x_ndim, s->x_shape, NULL, g->data,
                                 &b->view[i]));
fail:
    return st;
}

ladle_status ladle__dist_replicas(ladle__make *m, ladle__dist_base *b, int np,
                                  const ladle_partition *p, ladle__dist_group_fn group,
                                  const void *arg)
{
    ladle_status st = LADLE_OK;
    const char *f = m->func;
    int size = ladle_partition_size(p);
    for (int i = 0; i < np; i++) {
        b->gid[i] = ladle__calloc((size_t)size, sizeof(int));
        b->cnt[i] = ladle__calloc((size_t)size, sizeof(int64_t));
        LADLE_CALL(
            ladle__make_step(m->comm, ladle__make_alloc_ok(m, b->gid[i] && b->cnt[i]), f));
        for (int r = 0; r < size; r++)
            group(arg, i, r, &b->gid[i][r], &b->cnt[i][r]);
        LADLE_CALL(
            ladle__make_step(m->comm,
                             ladle__all_sum_reduce_groups(p, b->gid[i], b->cnt[i], m->dtype,
                                                          m->device, m->flags, &b->sync[i]),
                             f));
        LADLE_CALL(ladle__make_step(m->comm, ladle__dist_sync_view(m, b, i), f));
    }
fail:
    return st;
}

ladle_status ladle__dist_grid_end(ladle__make *m, const ladle_op_vtable *vt, void *impl,
                                  const int64_t *xs, int bias, double fan_in,
                                  double fan_out, uint64_t seed, int *taken, ladle_op **out)
{
    ladle_op *op = NULL;
    ladle_status local = ladle__make_layer(m, LADLE_OK, vt, impl, xs, &op);
    *taken = local == LADLE_OK;
    if (local == LADLE_OK) {
        op->weighted = 1;
        op->linear = !bias;
        op->fan_in = fan_in;
        op->fan_out = fan_out;
        local = ladle_layer_init(op, LADLE_INIT_DEFAULT, seed);
    }
    return ladle__make_end(m, &op, local, out);
}

static const ladle__part grid_parts[] = {LADLE__PART_OP(ladle__dist_grid, bcast),
                                         LADLE__PART_OP(ladle__dist_grid, reduce),
                                         LADLE__PART_TENSOR(ladle__dist_grid, xb),
                                         LADLE__PART_TENSOR(ladle__dist_grid, dyp),
                                         LADLE__PART_TENSOR(ladle__dist_grid, yp),
                                         LADLE__PART_TENSOR(ladle__dist_grid, dxp),
                                         LADLE__PARTS_END};

void ladle__dist_grid_free(ladle__dist_grid *g)
{
    ladle__parts_release(g, grid_parts, NULL);
}

void ladle__dist_grid_part(void *member, const ladle_backend *be)
{
    (void)be;
    ladle__dist_grid_free(member);
}

ladle_status ladle__dist_grid_forward(ladle__dist_base *b, ladle__dist_grid *g,
                                      ladle__dist_ctx *c, const ladle_tensor *x,
                                      ladle_tensor *y)
{
    ladle_status st = LADLE_OK;
    ladle_tensor *xb = c ? c->saved[0] : g->xb;
    LADLE_CALL(ladle_op_forward(g->bcast, x, xb));
    if (b->local)
        LADLE_CALL(ladle_layer_forward(b->local, c ? c->local : NULL, xb, g->yp));
    LADLE_CALL(ladle_op_forward(g->reduce, g->yp, y));
    if (c)
        c->ready = 0;
fail:
    return st;
}

/* dy spread onto the workers by R*: once per ctx and dy (into the ctx), or
 * into the grid's own tensor for a ctx-less adjoint. */
static ladle_status grid_spread(ladle__dist_grid *g, ladle__dist_ctx *c,
                                const ladle_tensor *dy, ladle_tensor **dyp)
{
    ladle_status st = LADLE_OK;
    *dyp = c ? c->saved[1] : g->dyp;
    if (c == NULL || !c->ready) {
        LADLE_CALL(ladle_op_adjoint(g->reduce, dy, *dyp));
        if (c)
            c->ready = 1;
    }
fail:
    return st;
}

ladle_status ladle__dist_grid_backward(ladle__dist_base *b, ladle__dist_grid *g,
                                       ladle__dist_ctx *c, const ladle_tensor *dy,
                                       ladle_tensor *dx)
{
    ladle_status st = LADLE_OK;
    ladle_tensor *dyp;
    LADLE_CALL(grid_spread(g, c, dy, &dyp));
    LADLE_CALL(ladle__dist_local_backward(b, c, dyp, g->dxp));
    LADLE_CALL(ladle_op_adjoint(g->bcast, g->dxp, dx));
fail:
    return st;
}

ladle_status ladle__dist_grid_backward_weight(ladle__dist_base *b, ladle__dist_grid *g,
                                              ladle__dist_ctx *c, const ladle_tensor *dy)
{
    ladle_status st = LADLE_OK;
    ladle_tensor *dyp;
    LADLE_CALL(grid_spread(g, c, dy, &dyp));
    if (b->local)
        LADLE_CALL(ladle_layer_backward_weight(b->local, c->local, dyp));
fail:
    return st;
}

void ladle__dist_hold(ladle_op *op, const ladle_op *inner)
{
    if (op == NULL || inner == NULL)
        return;
    for (int k = 0; k < LADLE_MEM_KINDS; k++)
        op->held[k] += inner->held[k];
    int comm = inner->fwd != NULL || inner->adj != NULL;
    if (!inner->ws_caller)
        op->held[comm ? LADLE_MEM_COMM : LADLE_MEM_WORKSPACE] += inner->ws_bytes;
}
