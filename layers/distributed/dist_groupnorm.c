/*
 * Distributed group normalisation (see ladle/distributed.h). x is split
 * over p_x; the batch and spatial dimensions freely, the channels only at
 * group boundaries, so a group lives on the ranks that share its batch and
 * channel blocks (its peers). The passes are the sequential layer's
 * (layers/sequential/gn_impl.h) with one reduction hook: each per-group
 * sum goes into this rank's slot of a buffer of `peers` slots, one
 * all-sum-reduce over the peers fills every slot (the others hold zeros,
 * so the sums are exact), and each peer adds the slots in slot order. All
 * peers then hold bitwise the same statistics, in an order fixed by the
 * partition. gamma and beta are replicated over the ranks that share a
 * channel block; backward_weight adds the rank's own sums and
 * ladle_layer_sync_gradients sums them over those ranks.
 */
#include <string.h>

#include "layers/distributed/dist.h"
#include "layers/sequential/gn_impl.h"

typedef struct dgn {
    /* param/grad: gamma and beta; sync[0]: the sum of both gradients over
     * the ranks of a channel block */
    ladle__dist_base base;
    ladle__gn gn;
    int64_t c_off, cg;   /* this rank's first channel, the channels of a group */
    int peers, slot;     /* the group's ranks and this rank's slot */
    int64_t width;       /* doubles per slot: 2 n groups */
    ladle_op *red;       /* the all-sum-reduce over the peers (NULL alone) */
    ladle_tensor *slots; /* peers x width doubles */
    double *hslots;      /* their host side */
} dgn;

static void gn_part(void *member, const ladle_backend *be) { ladle__gn_free(member, be); }

static const ladle__part dgn_parts[] = {
    LADLE__PART(dgn, gn, gn_part),  LADLE__PART_DIST_BASE(dgn),    LADLE__PART_OP(dgn, red),
    LADLE__PART_TENSOR(dgn, slots), LADLE__PART_HOST(dgn, hslots), LADLE__PARTS_END};

static int member(const ladle_op *op)
{
    return ladle_partition_active(ladle_layout_partition(op->x_layout));
}

static ladle_status reduce(ladle_op *op, int64_t count, double *vals)
{
    ladle_status st = LADLE_OK;
    dgn *v = op->impl;
    double *s = v->hslots;
    size_t bytes = sizeof(double) * (size_t)(v->peers * v->width);
    memset(s, 0, bytes);
    memcpy(s + v->slot * v->width, vals, sizeof(double) * (size_t)count);
    LADLE_CALL(ladle__bn_send(op->be, bytes, s, v->slots->data));
    LADLE_CALL(ladle_op_forward(v->red, v->slots, v->slots));
    LADLE_CALL(ladle__bn_fetch(op->be, bytes, v->slots->data, s));
    for (int64_t i = 0; i < count; i++) {
        double acc = s[i];
        for (int k = 1; k < v->peers; k++)
            acc += s[k * v->width + i];
        vals[i] = acc;
    }
fail:
    return st;
}

static ladle_status dgn_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                ladle_tensor *y, int64_t nb)
{
    dgn *v = op->impl;
    (void)nb;
    if (!member(op))
        return LADLE_OK;
    return ladle__gn_forward(op, &v->gn, v->base.param, x->data, y->data, v->gn.nmax,
                             ctx ? ctx->impl : NULL);
}

static ladle_status dgn_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                 ladle_tensor *dx, int64_t nb)
{
    dgn *v = op->impl;
    (void)nb;
    if (dx == NULL || !member(op))
        return LADLE_OK;
    return ladle__gn_backward(op, &v->gn, v->base.param, ctx->x->data, dy->data, dx->data,
                              v->gn.nmax, ctx->impl);
}

static ladle_status dgn_backward_weight(ladle_op *op, ladle_ctx *ctx,
                                        const ladle_tensor *dy, int64_t nb)
{
    dgn *v = op->impl;
    (void)nb;
    if (!member(op))
        return LADLE_OK;
    return ladle__gn_backward_weight(op, &v->gn, v->base.grad, ctx->x->data, dy->data,
                                     v->gn.nmax, ctx->impl);
}

static ladle_status dgn_sync(ladle_op *op)
{
    dgn *v = op->impl;
    return ladle__dist_channel_sync(&v->base, v->gn.affine ? 2 : 0);
}

static void dgn_param_info(const ladle_op *op, int i, ladle__pinfo *info)
{
    const dgn *v = op->impl;
    (void)i;
    ladle__dist_channel_param_info(op, &v->base, v->c_off, info);
}

static void dgn_destroy(ladle_op *op) { ladle__parts_free(op->impl, dgn_parts, op->be); }

static ladle_status dgn_ctx_init(const ladle_op *op, ladle_ctx *ctx)
{
    const dgn *v = op->impl;
    return ladle__gn_ctx_init(&v->gn, ctx);
}

static void dgn_ctx_fini(ladle_ctx *ctx)
{
    ladle__free(ctx->impl);
    ctx->impl = NULL;
}

static const ladle_op_vtable dgn_vt = {
    .kind = LADLE_OP_DIST_GROUPNORM,
    .name = "distributed group norm",
    .destroy = dgn_destroy,
    .layer_forward = dgn_forward,
    .layer_backward = dgn_backward,
    .layer_backward_weight = dgn_backward_weight,
    .ctx_init = dgn_ctx_init,
    .ctx_fini = dgn_ctx_fini,
    .num_params = ladle__dist_num_params,
    .param_at = ladle__dist_param_at,
    .param_info = dgn_param_info,
    .sync_grads = dgn_sync,
};

/* The checks every rank makes alike: the descriptor, the grid against x,
 * and channel blocks that hold whole groups. */
static ladle_status validate(const ladle_groupnorm_desc *d, const ladle_partition *p_x,
                             int ndim, const int64_t *x_shape, ladle_dtype dtype,
                             const char *f)
{
    ladle_status local = ladle__layer_check_args(f, dtype, ndim, x_shape, 2);
    const int *shape = ladle_partition_shape(p_x);
    if (local == LADLE_OK)
        local = ladle__gn_check(d, ndim, x_shape, f);
    if (local != LADLE_OK)
        return local;
    for (int i = 0; i < ndim; i++)
        if (x_shape[i] < shape[i])
            return ladle__raise(LADLE_ERR_SHAPE, f,
                                "x extent %lld in dimension %d is below the grid's %d",
                                (long long)x_shape[i], i, shape[i]);
    /* balanced blocks: the first c mod p get one channel more */
    int64_t c = x_shape[1], p = shape[1], cg = c / d->num_groups;
    for (int more = 0; more < 2; more++) {
        int64_t ext = c / p + more;
        if ((!more || c % p != 0) && ext % cg != 0) /* a block size that occurs */
            return ladle__raise(
                LADLE_ERR_PARTITION, f,
                "a channel block of %lld channels splits a group of %lld "
                "(%lld channels over %lld blocks, %lld groups): the channel "
                "blocks must hold whole groups",
                (long long)ext, (long long)cg, (long long)c, (long long)p,
                (long long)d->num_groups);
    }
    return LADLE_OK;
}

/* x's layout, this rank's block and the groups: gid, the peers of a group
 * (the ranks sharing batch and channel blocks); cid, the ranks sharing a
 * channel block; the slot of this rank among its peers. Local. */
static ladle_status plan(ladle__make *m, dgn *v, const ladle_groupnorm_desc *d,
                         const ladle_partition *p_x, int ndim, const int64_t *x_shape,
                         int *gid, int *cid)
{
    ladle_status st = LADLE_OK;
    int size = ladle_partition_size(p_x), c[LADLE_MAX_NDIM];
    const int *shape = ladle_partition_shape(p_x);
    int *seen = NULL;
    int64_t off[LADLE_MAX_NDIM], box[LADLE_MAX_NDIM];
    LADLE_CALL(ladle_layout_create_balanced(p_x, ndim, x_shape, &m->lx));
    seen = ladle__calloc((size_t)(shape[0] * shape[1]), sizeof(int));
    LADLE_MAKE_CHECK(m, seen != NULL, LADLE_ERR_ALLOC, "out of memory");
    for (int r = 0; r < size; r++) {
        ladle_partition_coords_of(p_x, r, c);
        gid[r] = c[0] * shape[1] + c[1];
        cid[r] = c[1];
        int k = seen[gid[r]]++;
        if (r == ladle_partition_rank(p_x))
            v->slot = k;
    }
    v->peers = size / (shape[0] * shape[1]);
    ladle_layout_box(m->lx, LADLE_SELF, off, box);
    ladle__gn *g = &v->gn;
    g->c = box[1];
    v->cg = x_shape[1] / d->num_groups;
    g->groups = box[1] / v->cg;
    g->nmax = box[0];
    g->inner = 1;
    int64_t global_inner = 1;
    for (int i = 2; i < ndim; i++) {
        g->inner *= box[i];
        global_inner *= x_shape[i];
    }
    g->count = (double)(x_shape[1] / d->num_groups * global_inner);
    g->eps = d->eps;
    g->affine = d->affine != 0;
    g->reduce = v->peers > 1 ? reduce : NULL;
    v->c_off = off[1];
    v->width = 2 * g->nmax * g->groups;
    v->base.nparams = g->affine ? 2 : 0;
fail:
    ladle__free(seen);
    return st;
}

/* The peers' reduction (doubles, whatever the dtype) and the sum of gamma's
 * and beta's gradients over a channel block's ranks, which takes cid and
 * counts (then NULL). */
static ladle_status plan_reductions(ladle__make *m, dgn *v, const ladle_partition *p_x,
                                    const int *gid, int **cid, int64_t **counts)
{
    ladle_status st = LADLE_OK;
    const char *f = m->func;
    int size = ladle_partition_size(p_x);
    int64_t box[LADLE_MAX_NDIM];
    if (v->peers > 1) {
        for (int r = 0; r < size; r++) {
            ladle_layout_box(m->lx, r, NULL, box);
            (*counts)[r] = (int64_t)v->peers * 2 * box[0] * (box[1] / v->cg);
        }
        LADLE_CALL(
            ladle__make_step(m->comm,
                             ladle__all_sum_reduce_groups(p_x, gid, *counts, LADLE_F64,
                                                          m->device, m->flags, &v->red),
                             f));
    }
    if (v->gn.affine)
        st = ladle__dist_channel_sync_plan(m, &v->base, p_x, cid, counts);
fail:
    return st;
}

/* gamma (1) and beta (0) with their gradients, the slots. Local. */
static ladle_status allocate(ladle__make *m, dgn *v)
{
    ladle_status st = LADLE_OK;
    int64_t cs = v->gn.c, sl = (int64_t)v->peers * v->width;
    for (int i = 0; i < 2; i++) {
        LADLE_CALL(ladle__dist_param(m->dtype, m->device, 1, &cs, &v->base.param[i]));
        LADLE_CALL(ladle__dist_grad(m->dtype, m->device, 1, &cs, &v->base.grad[i]));
    }
    LADLE_CALL(ladle_tensor_fill(v->base.param[0], 1.0));
    LADLE_CALL(ladle__dist_tensor(LADLE_F64, m->device, 1, &sl, &v->slots));
    v->hslots = ladle__calloc((size_t)sl + 1, sizeof(double));
    LADLE_MAKE_CHECK(m, v->hslots != NULL, LADLE_ERR_ALLOC, "out of memory");
fail:
    return st;
}

static uint64_t args_hash(const ladle_groupnorm_desc *d,
                          const ladle_partition *const *parts, int ndim,
                          const int64_t *x_shape, ladle_dtype dtype)
{
    int64_t args[10] = {ndim, d->num_groups, (int64_t)dtype, (int64_t)d->flags, d->affine};
    for (int i = 0; i < ndim && i < 5; i++)
        args[5 + i] = x_shape[i];
    uint64_t h = ladle__make_hash(LADLE_HASH_INIT, 1, parts, 10, args);
    return ladle__hash(h, &d->eps, sizeof d->eps);
}

ladle_status ladle_dist_groupnorm_create(const ladle_groupnorm_desc *d,
                                         const ladle_partition *p_x,
                                         const int64_t x_shape[], ladle_dtype dtype,
                                         ladle_device device, ladle_op **out)
{
    const char *f = __func__;
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle__make m = {f, dtype, device, 0, MPI_COMM_NULL, NULL, NULL};
    ladle_op *op = NULL;
    dgn *v = NULL;
    int *gid = NULL, *cid = NULL;
    int64_t *counts = NULL;
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    const ladle_partition *parts[1] = {p_x};
    int size = ladle_partition_size(p_x), ndim = ladle_partition_ndim(p_x);
    local = validate(d, p_x, ndim, x_shape, dtype, f);
    m.flags = d->flags;
    LADLE_CALL(
        ladle__make_open(&m, 1, parts, local, args_hash(d, parts, ndim, x_shape, dtype)));

    v = ladle__calloc(1, sizeof *v);
    gid = ladle__calloc((size_t)size, sizeof(int));
    cid = ladle__calloc((size_t)size, sizeof(int));
    counts = ladle__calloc((size_t)size, sizeof(int64_t));
    local = ladle__make_alloc_ok(&m, v && gid && cid && counts);
    if (local == LADLE_OK)
        local = plan(&m, v, d, p_x, ndim, x_shape, gid, cid);
    LADLE_CALL(ladle__make_step(m.comm, local, f));
    LADLE_CALL(plan_reductions(&m, v, p_x, gid, &cid, &counts));
    local = allocate(&m, v);
    if (local == LADLE_OK)
        m.ly = ladle__layout_retain(m.lx);
    local = ladle__make_layer(&m, local, &dgn_vt, v, NULL, &op);
    if (local == LADLE_OK) {
        local = ladle__gn_alloc(op, &v->gn);
        v = NULL;
    }
    st = ladle__make_end(&m, &op, local, out);
fail:
    ladle_op_destroy(&op);
    ladle__make_close(&m);
    ladle__parts_free(v, dgn_parts, NULL);
    ladle__free(gid);
    ladle__free(cid);
    ladle__free(counts);
    return st;
}
