/*
 * Activation recomputation (see ladle/layers.h): a layer whose ctx keeps
 * nothing of its inner layer's saved state. The forward runs the inner
 * layer on one scratch ctx planned at creation; the backward runs that
 * forward again from the ctx's x (borrowed: the layer contract keeps it
 * alive) and then the inner backward on the scratch. Backwards run one at a
 * time, so one scratch serves every microbatch.
 *
 * The recomputation must give the first forward's bits and leave no trace:
 * every op under the inner layer gets back the step its forward saw (the
 * dropout masks hash it), and the layers' buffers (batch norm's running
 * statistics) are copied aside before and restored after, so they are
 * updated once, by the first forward.
 *
 * It lives among the distributed layers, though any layer may be wrapped,
 * because finding the ops under a distributed layer reads the skeleton's
 * local layer (layers/distributed/dist.h).
 */
#include <string.h>

#include "layers/distributed/dist.h"
#include "src/op/make.h"
#include "src/op/op_impl.h"

typedef struct recompute {
    ladle_op *inner;
    ladle_ctx *scratch; /* the inner ctx of every forward and recomputation */
    ladle_tensor *y;    /* the inner y of a recomputation */
    int nleaf;
    ladle_op **leaf; /* every op under inner (inner too), in walk order */
    int nbuf;
    ladle_tensor **buf, **keep; /* the leaves' buffers and room for a copy */
    uint64_t *cur;              /* the leaves' steps while a rerun runs */
    const ladle_ctx *held;      /* whose forward the scratch holds, and when */
    uint64_t held_gen;
} recompute;

static recompute *rc_of(const ladle_op *op) { return op->impl; }

/* The ops a layer is made of: a container's parts, a distributed
 * skeleton's local layer (its impl starts with a ladle__dist_base). */
static int sub_count(const ladle_op *op)
{
    if (op->vt->num_parts)
        return op->vt->num_parts(op);
    return op->vt->ctx_init == ladle__dist_ctx_init &&
           ((const ladle__dist_base *)op->impl)->local != NULL;
}

static ladle_op *sub_at(const ladle_op *op, int i)
{
    if (op->vt->num_parts)
        return op->vt->part_at(op, i);
    return ((const ladle__dist_base *)op->impl)->local;
}

/* Walk the tree under op: count leaves and buffers, and fill them when the
 * arrays are there. */
static void walk(recompute *r, ladle_op *op)
{
    if (r->leaf)
        r->leaf[r->nleaf] = op;
    r->nleaf++;
    int nb = op->vt->num_buffers ? op->vt->num_buffers(op) : 0;
    for (int b = 0; b < nb; b++) {
        ladle__pinfo info;
        if (r->buf)
            r->buf[r->nbuf] = op->vt->buffer_at(op, b, &info);
        r->nbuf++;
    }
    for (int i = 0, n = sub_count(op); i < n; i++)
        walk(r, sub_at(op, i));
}

static ladle_status rc_ctx_init(const ladle_op *op, ladle_ctx *ctx)
{
    ladle_status st = LADLE_OK;
    ctx->impl = ladle__calloc((size_t)rc_of(op)->nleaf, sizeof(uint64_t));
    LADLE_CHECK(ctx->impl != NULL, LADLE_ERR_ALLOC, "out of memory");
fail:
    return st;
}

static void rc_ctx_fini(ladle_ctx *ctx)
{
    ladle__free(ctx->impl);
    ctx->impl = NULL;
}

static size_t rc_ctx_held(const ladle_ctx *ctx)
{
    return (size_t)rc_of(ctx->op)->nleaf * sizeof(uint64_t);
}

static ladle_status rc_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    recompute *r = rc_of(op);
    (void)n;
    r->held = NULL;
    if (ctx == NULL)
        return ladle_layer_forward(r->inner, NULL, x, y);
    uint64_t *steps = ctx->impl;
    for (int i = 0; i < r->nleaf; i++)
        steps[i] = r->leaf[i]->step;
    LADLE_CALL(ladle_layer_forward(r->inner, r->scratch, x, y));
    /* until the next forward the scratch holds this one's state, over x
     * and y that the caller keeps: a backward right after needs no rerun */
    r->held = ctx;
    r->held_gen = ctx->gen;
fail:
    return st;
}

/* The forward of ctx's microbatch again, into the scratch, with the steps
 * it saw, in its mode, and the buffers as they are now afterwards. */
static ladle_status rerun(ladle_op *op, ladle_ctx *ctx)
{
    ladle_status st = LADLE_OK, st2;
    recompute *r = rc_of(op);
    const uint64_t *steps = ctx->impl;
    uint64_t *cur = r->cur;
    int train = op->training;
    for (int i = 0; i < r->nleaf; i++) {
        cur[i] = r->leaf[i]->step;
        r->leaf[i]->step = steps[i];
    }
    for (int b = 0; b < r->nbuf; b++)
        LADLE_CALL(ladle_tensor_copy(r->keep[b], r->buf[b]));
    if (ctx->training != train)
        LADLE_CALL(ladle_layer_set_training(r->inner, ctx->training));
    if (r->y->ndim > 0 && op->batched) {
        r->y->numel = r->y->numel / (r->y->shape[0] ? r->y->shape[0] : 1) * ctx->batch;
        r->y->shape[0] = ctx->batch;
    }
    st = ladle_layer_forward(r->inner, r->scratch, ctx->x, r->y);
fail:
    for (int i = 0; i < r->nleaf; i++)
        r->leaf[i]->step = cur[i];
    for (int b = 0; b < r->nbuf; b++)
        if ((st2 = ladle_tensor_copy(r->buf[b], r->keep[b])) != LADLE_OK && st == LADLE_OK)
            st = st2;
    if (ctx->training != train)
        ladle_layer_set_training(r->inner, train);
    if (st == LADLE_OK) {
        r->held = ctx;
        r->held_gen = ctx->gen;
    }
    return st;
}

static int holds(const recompute *r, const ladle_ctx *ctx)
{
    return r->held == ctx && r->held_gen == ctx->gen;
}

static ladle_status rc_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    recompute *r = rc_of(op);
    (void)n;
    if (!holds(r, ctx))
        LADLE_CALL(rerun(op, ctx));
    LADLE_CALL(ladle_layer_backward(r->inner, r->scratch, dy, dx));
fail:
    return st;
}

/* After another microbatch's calls took the scratch, the weight pass needs
 * the forward and the inner backward of this one again (a container's
 * weight pass reads the gradients its backward left). */
static ladle_status rc_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       int64_t n)
{
    ladle_status st = LADLE_OK;
    recompute *r = rc_of(op);
    (void)n;
    if (!holds(r, ctx)) {
        LADLE_CALL(rerun(op, ctx));
        LADLE_CALL(ladle_layer_backward(r->inner, r->scratch, dy, NULL));
    }
    LADLE_CALL(ladle_layer_backward_weight(r->inner, r->scratch, dy));
fail:
    return st;
}

static int rc_num_params(const ladle_op *op) { return ladle_op_num_params(rc_of(op)->inner); }

static ladle_tensor *rc_param_at(const ladle_op *op, int i, int grad, const char **name)
{
    const ladle_op *f = rc_of(op)->inner;
    if (name)
        *name = ladle_op_param_name(f, i);
    return grad ? ladle_op_grad(f, i) : ladle_op_param(f, i);
}

static void rc_set_training(ladle_op *op, int training)
{
    ladle_layer_set_training(rc_of(op)->inner, training);
}

static void rc_param_bound(ladle_op *op, int i)
{
    ladle_op *f = rc_of(op)->inner;
    if (f->vt->param_bound)
        f->vt->param_bound(f, i);
}

static void rc_param_info(const ladle_op *op, int i, ladle__pinfo *info)
{
    ladle__param_info(rc_of(op)->inner, i, info);
}

static ladle_status rc_sync_grads(ladle_op *op)
{
    return ladle_layer_sync_gradients(rc_of(op)->inner);
}

static void rc_destroy(ladle_op *op)
{
    recompute *r = rc_of(op);
    if (r == NULL)
        return;
    for (int b = 0; b < r->nbuf && r->keep; b++)
        ladle_tensor_destroy(&r->keep[b]);
    ladle_ctx_destroy(&r->scratch);
    ladle_tensor_destroy(&r->y);
    ladle_op_destroy(&r->inner);
    ladle__free(r->leaf);
    ladle__free(r->buf);
    ladle__free(r->keep);
    ladle__free(r->cur);
    ladle__free(r);
    op->impl = NULL;
}

static int rc_num_parts(const ladle_op *op) { return 1; }

static ladle_op *rc_part_at(const ladle_op *op, int i) { return i == 0 ? rc_of(op)->inner : NULL; }

static const ladle_op_vtable recompute_vt = {
    .kind = LADLE_OP_RECOMPUTE,
    .name = "recompute",
    .num_parts = rc_num_parts,
    .part_at = rc_part_at,
    .destroy = rc_destroy,
    .layer_forward = rc_forward,
    .layer_backward = rc_backward,
    .layer_backward_weight = rc_backward_weight,
    .ctx_init = rc_ctx_init,
    .ctx_fini = rc_ctx_fini,
    .ctx_held = rc_ctx_held,
    .num_params = rc_num_params,
    .param_at = rc_param_at,
    .set_training = rc_set_training,
    .param_bound = rc_param_bound,
    .param_info = rc_param_info,
    .sync_grads = rc_sync_grads,
};

/* This rank's verdict on the inner layer. */
static ladle_status check_inner(const ladle_op *f)
{
    ladle_status st = LADLE_OK;
    LADLE_CHECK(f->layer && f->vt->layer_forward != NULL, LADLE_ERR_ARG,
                "the inner op (%s) is not a layer", f->vt->name);
    LADLE_CHECK(f->vt->loss_forward == NULL && f->vt->kind != LADLE_OP_LOSS &&
                    f->vt->kind != LADLE_OP_DIST_LOSS && f->vt->kind != LADLE_OP_DIST_VOCAB_LOSS,
                LADLE_ERR_ARG, "the inner op (%s) is a loss: recompute the layers before it",
                f->vt->name);
    LADLE_CHECK(!f->linear || ladle_op_num_params(f) > 0 || f->vt->ctx_init != NULL ||
                    f->ctx_bytes > 0,
                LADLE_ERR_ARG, "the inner layer (%s) saves nothing: there is nothing to recompute",
                f->vt->name);
fail:
    return st;
}

/* The scratch ctx and y, the leaves, their buffers and the room to keep
 * them: everything a call needs, planned now. */
static ladle_status plan(recompute *r)
{
    ladle_status st = LADLE_OK;
    const ladle_op *f = r->inner;
    walk(r, r->inner);
    r->leaf = ladle__calloc((size_t)r->nleaf, sizeof *r->leaf);
    r->cur = ladle__calloc((size_t)r->nleaf, sizeof *r->cur);
    r->buf = ladle__calloc((size_t)r->nbuf + 1, sizeof *r->buf);
    r->keep = ladle__calloc((size_t)r->nbuf + 1, sizeof *r->keep);
    LADLE_CHECK(r->leaf && r->cur && r->buf && r->keep, LADLE_ERR_ALLOC, "out of memory");
    r->nleaf = r->nbuf = 0;
    walk(r, r->inner);
    for (int b = 0; b < r->nbuf; b++) {
        const ladle_tensor *t = r->buf[b];
        LADLE_CALL(ladle_tensor_create(t->dtype, t->device, t->ndim, t->shape, &r->keep[b]));
    }
    LADLE_CALL(ladle_ctx_create(f, &r->scratch));
    LADLE_CALL(ladle_tensor_create(f->dtype, f->be->device, f->y_ndim, f->y_shape, &r->y));
fail:
    return st;
}

ladle_status ladle_recompute_create(ladle_op **pinner, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    LADLE_NOT_NULL(pinner);
    LADLE_NOT_NULL(*pinner);
    LADLE_NOT_NULL(out);
    ladle_op *f = *pinner;
    /* a distributed inner layer's ranks agree, so all refuse alike */
    st = ladle__agree_code(ladle__layer_comm(f), check_inner(f), __func__);
    LADLE_CALL(st);
    LADLE_CALL(ladle__layer_new(&recompute_vt, f->dtype, f->be->device, f->x_ndim, f->x_shape,
                                f->y_ndim, f->y_shape, f->batched, &op, __func__));
    recompute *r = ladle__calloc(1, sizeof *r);
    LADLE_CHECK(r != NULL, LADLE_ERR_ALLOC, "out of memory");
    op->impl = r;
    r->inner = f;
    st = plan(r);
    if (st != LADLE_OK) {
        r->inner = NULL; /* it stays the caller's */
        goto fail;
    }
    if (f->x_layout) {
        op->x_layout = ladle__layout_retain(f->x_layout);
        op->y_layout = ladle__layout_retain(f->y_layout);
    }
    op->x_ids = f->x_ids;
    op->training = f->training;
    *pinner = NULL;
    *out = op;
    return LADLE_OK;
fail:
    ladle_op_destroy(&op);
    return st;
}

size_t ladle_recompute_scratch_bytes(const ladle_op *op)
{
    if (op == NULL || op->vt->kind != LADLE_OP_RECOMPUTE)
        return 0;
    const recompute *r = rc_of(op);
    size_t n = ladle_ctx_bytes_held(r->scratch) +
               (size_t)r->y->numel * ladle_dtype_size(r->y->dtype);
    for (int b = 0; b < r->nbuf; b++)
        n += (size_t)r->keep[b]->numel * ladle_dtype_size(r->keep[b]->dtype);
    return n;
}

ladle_op *ladle_recompute_inner(const ladle_op *op)
{
    return op && op->vt->kind == LADLE_OP_RECOMPUTE ? rc_of(op)->inner : NULL;
}
