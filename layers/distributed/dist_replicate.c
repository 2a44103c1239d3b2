/*
 * Data parallelism for any layer (see ladle/distributed.h): a local layer
 * on every member of p, applied to that rank's own block, whose parameters
 * are copies of one set of weights:
 *
 *   y_r = L(w_r; x_r),   w_r = B w   (B: partition rank 0's w copied to all)
 *
 * The copy B is a broadcast, so the weights' gradient is its adjoint, the
 * sum-reduce of the copies' gradients: dw = sum over r of dw_r, which
 * every copy receives (an all-sum-reduce, run by sync_gradients or by a
 * network's buckets). The forward and the input gradient are the local
 * layer's, untouched. At creation B runs once, so the copies start equal
 * whatever each rank drew: rank 0's values win.
 */
#include <string.h>

#include "layers/distributed/dist.h"

typedef struct replicate {
    ladle__dist_base base; /* base.local: the wrapped layer */
    int root;              /* this rank is partition rank 0 (the checkpoint's writer) */
} replicate;

static const ladle__part replicate_parts[] = {LADLE__PART_DIST_BASE(replicate),
                                              LADLE__PARTS_END};

static void rp_destroy(ladle_op *op) { ladle__parts_free(op->impl, replicate_parts, NULL); }

static ladle_status rp_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    const replicate *v = op->impl;
    const ladle__dist_ctx *c = ctx ? ctx->impl : NULL;
    (void)n;
    return ladle_layer_forward(v->base.local, c ? c->local : NULL, x, y);
}

static ladle_status rp_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    const replicate *v = op->impl;
    const ladle__dist_ctx *c = ctx ? ctx->impl : NULL;
    (void)n;
    return ladle__dist_local_backward(&v->base, c, dy, dx);
}

static ladle_status rp_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       int64_t n)
{
    const replicate *v = op->impl;
    const ladle__dist_ctx *c = ctx->impl;
    (void)n;
    return ladle_layer_backward_weight(v->base.local, c->local, dy);
}

static ladle_tensor *rp_param_at(const ladle_op *op, int i, int grad, const char **name)
{
    const replicate *v = op->impl;
    if (name)
        *name = ladle_op_param_name(v->base.local, i);
    return grad ? ladle_op_grad(v->base.local, i) : ladle_op_param(v->base.local, i);
}

/* Whole tensors, one copy per rank, written by partition rank 0. */
static void rp_param_info(const ladle_op *op, int i, ladle__pinfo *info)
{
    const replicate *v = op->impl;
    const ladle_tensor *t = ladle_op_param(v->base.local, i);
    info->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) {
        info->global[d] = t->shape[d];
        info->offset[d] = 0;
    }
    info->owner = v->root;
    ladle__dist_sync_info(v->base.sync[i], v->base.gid[i], v->base.cnt[i], info);
}

static void rp_param_bound(ladle_op *op, int i)
{
    replicate *v = op->impl;
    ladle_op *local = v->base.local;
    if (local->vt->param_bound)
        local->vt->param_bound(local, i);
    ladle__dist_param_bound(op, i);
}

/* A local layer with a scratch workspace lends it to the copy: a graph then
 * shares one among all its layers, and the layer keeps the shared record of
 * what it holds (it claims the memory whenever it writes it). */
static void rp_ws_bound(ladle_op *op)
{
    replicate *v = op->impl;
    ladle__op_share_ws(v->base.local, op->ws, op->ws_tags);
}

/* The local layer's buffers (batch norm's running statistics): whole, and
 * written by rank 0 like the parameters. */
static int rp_num_buffers(const ladle_op *op)
{
    const ladle_op *local = ((const replicate *)op->impl)->base.local;
    return local->vt->num_buffers ? local->vt->num_buffers(local) : 0;
}

static ladle_tensor *rp_buffer_at(const ladle_op *op, int i, ladle__pinfo *info)
{
    const replicate *v = op->impl;
    const ladle_op *local = v->base.local;
    ladle_tensor *t = local->vt->buffer_at(local, i, info);
    info->owner = info->owner && v->root;
    return t;
}

static const ladle_op_vtable replicate_vt = {
    .kind = LADLE_OP_DIST_REPLICATE,
    .name = "replicated",
    .destroy = rp_destroy,
    .layer_forward = rp_forward,
    .layer_backward = rp_backward,
    .layer_backward_weight = rp_backward_weight,
    .ctx_init = ladle__dist_ctx_init,
    .ctx_held = ladle__dist_ctx_held,
    .ctx_fini = ladle__dist_ctx_fini,
    .num_params = ladle__dist_num_params,
    .param_at = rp_param_at,
    .set_training = ladle__dist_set_training,
    .param_info = rp_param_info,
    .sync_grads = ladle__dist_sync_grads,
    .num_buffers = rp_num_buffers,
    .buffer_at = rp_buffer_at,
    .param_bound = rp_param_bound,
    .ws_bound = rp_ws_bound,
};

/* Every member sums every parameter with every other: one group. */
static void one_group(const void *arg, int i, int r, int *gid, int64_t *count)
{
    const ladle_op *local = arg;
    (void)r;
    *gid = 0;
    *count = ladle_tensor_numel(ladle_op_param(local, i));
}

/* With layouts: this rank's boxes are the layer's x and y, and ly lies on
 * the ranks of lx (the same number of them, this rank among them: every
 * member checks itself, so the sets agree once the verdicts do). */
static ladle_status check_blocks(const ladle_op *layer, const ladle_layout *lx,
                                 const ladle_layout *ly, const char *f)
{
    char a[128], b[128];
    const ladle_layout *ls[2] = {lx, ly};
    const ladle_partition *px = ladle_layout_partition(lx),
                          *py = ladle_layout_partition(ly);
    if (ladle_partition_size(px) != ladle_partition_size(py) ||
        ladle_partition_coords(py) == NULL)
        return ladle__raise(
            LADLE_ERR_PARTITION, f,
            "y's layout lies on other ranks than x's (%d and %d ranks): the "
            "copies run on one set of ranks",
            ladle_partition_size(px), ladle_partition_size(py));
    for (int k = 0; k < 2; k++) {
        int nd = k ? layer->y_ndim : layer->x_ndim;
        const int64_t *want = k ? layer->y_shape : layer->x_shape;
        int64_t off[LADLE_MAX_NDIM], box[LADLE_MAX_NDIM];
        ladle_status st = ladle_layout_box(ls[k], LADLE_SELF, off, box);
        if (st != LADLE_OK)
            return st;
        int same = ladle_layout_ndim(ls[k]) == nd;
        for (int d = 0; same && d < nd; d++)
            same = box[d] == want[d];
        if (!same)
            return ladle__raise(
                LADLE_ERR_SHAPE, f,
                "this rank's block of %s's layout is %s but the %s layer "
                "takes %s",
                k ? "y" : "x",
                ladle__fmt_shape64(a, sizeof a, ladle_layout_ndim(ls[k]), box),
                layer->vt->name, ladle__fmt_shape64(b, sizeof b, nd, want));
    }
    return LADLE_OK;
}

/* Some parameter of the layer is already a copy summed over ranks (a
 * container holding replicated layers). */
static int has_copies(const ladle_op *layer)
{
    for (int i = 0; i < ladle_op_num_params(layer); i++) {
        ladle__pinfo info;
        ladle__param_info(layer, i, &info);
        if (info.sync != NULL)
            return 1;
    }
    return 0;
}

/* This rank's verdict on the arguments, from what every rank passes;
 * lx and ly (or NULL) the layouts the copy is given. */
static ladle_status validate(const ladle_op *layer, const ladle_layout *lx,
                             const ladle_layout *ly, unsigned flags, const char *f)
{
    if (flags & ~LADLE_CHECKED)
        return ladle__raise(LADLE_ERR_ARG, f, "flags 0x%x: only LADLE_CHECKED is known",
                            flags);
    if (!layer->layer)
        return ladle__raise(LADLE_ERR_ARG, f, "the %s op is not a layer", layer->vt->name);
    if (ladle_op_num_params(layer) > LADLE_MAX_PARAMS)
        return ladle__raise(LADLE_ERR_UNSUPPORTED, f,
                            "the %s layer has %d parameters; copies hold at most %d: "
                            "replicate its parts", layer->vt->name,
                            ladle_op_num_params(layer), LADLE_MAX_PARAMS);
    if (layer->x_layout || layer->y_layout || has_copies(layer) || layer->vt->loss_forward)
        return ladle__raise(LADLE_ERR_ARG, f,
                            "the %s layer is distributed or a loss: replicate sequential "
                            "layers only",
                            layer->vt->name);
    if (layer->vt->kind == LADLE_OP_CUSTOM)
        return ladle__raise(LADLE_ERR_ARG, f,
                            "a custom layer's parameters are its own: replicate ladle's "
                            "layers (or sum a custom layer's gradients yourself)");
    if (lx == NULL && ladle_op_num_params(layer) < 1)
        return ladle__raise(LADLE_ERR_ARG, f,
                            "the %s layer has no parameters: add it to the graph as it is",
                            layer->vt->name);
    for (int i = 0; i < ladle_op_num_params(layer); i++) {
        const ladle_tensor *t = ladle_op_param(layer, i);
        if (!ladle_tensor_is_contiguous(t))
            return ladle__raise(LADLE_ERR_ARG, f, "parameter %d of the %s layer is strided",
                                i, layer->vt->name);
    }
    return lx != NULL ? check_blocks(layer, lx, ly, f) : LADLE_OK;
}

/* What every member must pass alike: the layer's kind, dtype and
 * parameter shapes (the blocks it works on may differ). */
static uint64_t shape_hash(const ladle_partition *p, const ladle_op *layer, unsigned flags)
{
    int np = ladle_op_num_params(layer);
    int64_t args[4] = {(int64_t)layer->vt->kind, (int64_t)layer->dtype, (int64_t)flags, np};
    uint64_t h = ladle__make_hash(LADLE_HASH_INIT, 1, &p, 4, args);
    for (int i = 0; i < np && i < LADLE_MAX_PARAMS; i++) {
        const ladle_tensor *t = ladle_op_param(layer, i);
        h = ladle__hash(h, &t->ndim, sizeof t->ndim);
        h = ladle__hash(h, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    }
    return h;
}

/* B at creation: partition rank 0's parameters on every copy (the others
 * zeroed, then the copies summed). Collective over p. */
static ladle_status copy_root(const ladle__make *m, replicate *v)
{
    ladle_status st = LADLE_OK;
    ladle_tensor *view = NULL;
    for (int i = 0; i < v->base.nparams; i++) {
        ladle_tensor *t = ladle_op_param(v->base.local, i);
        const ladle_op *s = v->base.sync[i];
        if (!v->root)
            LADLE_CALL(ladle_tensor_fill(t, 0.0));
        LADLE_CALL(ladle_tensor_wrap(m->dtype, m->device, s->x_ndim, s->x_shape, NULL,
                                     t->data, &view));
        LADLE_CALL(ladle_op_forward(v->base.sync[i], view, view));
        ladle_tensor_destroy(&view);
    }
fail:
    ladle_tensor_destroy(&view);
    return st;
}

/* The arguments every member must pass alike: the layer's shapes, the
 * flags and the layouts. */
static uint64_t args_hash(const ladle_partition *p, const ladle_op *inner,
                          const ladle_layout *lx, const ladle_layout *ly, unsigned flags)
{
    uint64_t hash = shape_hash(p, inner, flags);
    for (int k = 0; lx != NULL && k < 2; k++) { /* every member passes the same layouts */
        const ladle_layout *l = k ? ly : lx;
        int nd = ladle_layout_ndim(l);
        hash = ladle__hash(hash, &nd, sizeof nd);
        hash =
            ladle__hash(hash, ladle_layout_global_shape(l), sizeof(int64_t) * (size_t)nd);
    }
    return hash;
}

/* What the copies' op takes from the layer: its kind of op, its fans and
 * mode, the layouts, and the layer's workspace when it is scratch. */
static void inherit(ladle_op *op, const ladle_op *inner, const ladle_layout *lx,
                    const ladle_layout *ly, unsigned flags)
{
    op->flags = ladle__op_flags_from_env(flags);
    op->linear = inner->linear;
    op->x_ids = inner->x_ids;
    op->weighted = inner->weighted;
    op->fan_in = inner->fan_in;
    op->fan_out = inner->fan_out;
    op->training = inner->training;
    if (lx != NULL) {
        op->x_layout = ladle__layout_retain(lx);
        op->y_layout = ladle__layout_retain(ly);
    }
    if (inner->ws_scratch && inner->ws_tags != NULL) {
        /* the copy's workspace is the layer's (still owned by it until a
         * container shares one) */
        op->ws_scratch = 1;
        op->ws_bytes = inner->ws_bytes;
        op->ws = inner->ws;
        op->ws_caller = 1;
        op->ws_tags = &op->ws_own_tags;
    }
}

/* The copies over p, and with lx and ly (or NULL) the layouts whose
 * boxes the copies take and give. */
static ladle_status make(const ladle_partition *p, const ladle_layout *lx,
                         const ladle_layout *ly, ladle_op **layer, unsigned flags,
                         ladle_op **out, const char *f)
{
    ladle_status st = LADLE_OK, local;
    ladle_op *op = NULL, *inner = NULL;
    replicate *v = NULL;
    ladle__make m = {f, LADLE_F32, LADLE_CPU, flags, MPI_COMM_NULL, NULL, NULL};
    LADLE_NOT_NULL(p);
    LADLE_NOT_NULL(layer);
    LADLE_NOT_NULL(*layer);
    LADLE_NOT_NULL(out);
    inner = *layer;
    m.dtype = inner->dtype;
    m.device = inner->be->device;
    LADLE_CHECK(ladle_partition_coords(p) != NULL, LADLE_ERR_PARTITION,
                "this rank is not a member of p: call it on p's members only");
    local = validate(inner, lx, ly, flags, f);
    LADLE_CALL(ladle__make_open(&m, 1, &p, local, args_hash(p, inner, lx, ly, flags)));

    v = ladle__calloc(1, sizeof *v);
    LADLE_CALL(ladle__make_step(m.comm, ladle__make_alloc_ok(&m, v != NULL), f));
    v->base.local = inner;
    v->base.nparams = ladle_op_num_params(inner);
    v->root = ladle_partition_rank(p) == 0;
    st = ladle__dist_replicas(&m, &v->base, v->base.nparams, p, one_group, inner);
    if (st != LADLE_OK) {
        v->base.local = NULL; /* still the caller's */
        goto fail;
    }
    LADLE_CALL(ladle__make_step(m.comm, copy_root(&m, v), f));

    local = ladle__layer_new(&replicate_vt, inner->dtype, inner->be->device, inner->x_ndim,
                             inner->x_shape, inner->y_ndim, inner->y_shape, inner->batched,
                             &op, f);
    if (local == LADLE_OK) {
        op->impl = v;
        op->comm = m.comm;
        m.comm = MPI_COMM_NULL;
        inherit(op, inner, lx, ly, flags);
    }
    st = ladle__make_step(op ? op->comm : m.comm, local, f);
    if (st != LADLE_OK) {
        if (op)
            op->impl = NULL;
        goto fail;
    }
    *layer = NULL;
    *out = op;
    ladle__make_close(&m);
    return LADLE_OK;
fail:
    if (v && v->base.local == inner)
        v->base.local = NULL; /* the caller keeps its layer on failure */
    ladle_op_destroy(&op);
    ladle__make_close(&m);
    ladle__parts_free(v, replicate_parts, NULL);
    return st;
}

ladle_status ladle_dist_replicate_create(const ladle_partition *p, ladle_op **layer,
                                         unsigned flags, ladle_op **out)
{
    return make(p, NULL, NULL, layer, flags, out, __func__);
}

ladle_status ladle_dist_replicate_create_on(const ladle_layout *x, const ladle_layout *y,
                                            ladle_op **layer, unsigned flags,
                                            ladle_op **out)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(x);
    LADLE_NOT_NULL(y);
    st = make(ladle_layout_partition(x), x, y, layer, flags, out, __func__);
fail:
    return st;
}
