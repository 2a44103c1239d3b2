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

/* The memory that the wrappers of one network share for their scratch
 * (their inner ctx's saved state and their inner y): a segment's scratch
 * is live only from its forward or rerun to the end of its backward, and
 * those never overlap, so the largest serves them all. It records whose
 * forward it holds, since any member's forward overwrites the others'. */
typedef struct rc_pool {
    int refs;
    const ladle_backend *be;
    void *mem; /* NULL while the pool is one wrapper's alone */
    size_t bytes;
    const void *owner; /* the wrapper whose forward the memory holds */
    const ladle_ctx *held;
    uint64_t held_gen;
} rc_pool;

typedef struct recompute {
    ladle_op *inner;
    ladle_ctx *scratch; /* the inner ctx of every forward and recomputation */
    ladle_tensor *y;    /* the inner y of a recomputation */
    int nleaf;
    ladle_op **leaf; /* every op under inner (inner too), in walk order */
    int nbuf;
    ladle_tensor **buf, **keep; /* the leaves' buffers and room for a copy */
    uint64_t *cur;              /* the leaves' steps while a rerun runs */
    rc_pool *pool;
    size_t saved_bytes; /* the scratch's saved state, as a pool lays it out */
    size_t saved_held;  /* the same, as ladle_ctx_bytes_held counts it */
} recompute;

/* A wrapper's ctx: the steps its forward saw, and the forward whose weight
 * pass its backward already did (gen + 1; 0: none). */
typedef struct rc_ctx {
    uint64_t weights_done;
    uint64_t steps[];
} rc_ctx;

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
    ctx->impl = ladle__calloc(1, sizeof(rc_ctx) + (size_t)rc_of(op)->nleaf * sizeof(uint64_t));
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
    return sizeof(rc_ctx) + (size_t)rc_of(ctx->op)->nleaf * sizeof(uint64_t);
}

static int holds(const recompute *r, const ladle_ctx *ctx)
{
    return r->pool->owner == r && r->pool->held == ctx && r->pool->held_gen == ctx->gen;
}

static void hold(recompute *r, const ladle_ctx *ctx)
{
    r->pool->owner = ctx ? r : NULL;
    r->pool->held = ctx;
    r->pool->held_gen = ctx ? ctx->gen : 0;
}

static ladle_status rc_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    recompute *r = rc_of(op);
    (void)n;
    hold(r, NULL);
    if (ctx == NULL)
        return ladle_layer_forward(r->inner, NULL, x, y);
    rc_ctx *c = ctx->impl;
    uint64_t *steps = c->steps;
    c->weights_done = 0;
    for (int i = 0; i < r->nleaf; i++)
        steps[i] = r->leaf[i]->step;
    LADLE_CALL(ladle_layer_forward(r->inner, r->scratch, x, y));
    /* until the next forward the scratch holds this one's state, over x
     * and y that the caller keeps: a backward right after needs no rerun */
    hold(r, ctx);
fail:
    return st;
}

/* The forward of ctx's microbatch again, into the scratch, with the steps
 * it saw, in its mode, and the buffers as they are now afterwards. */
static ladle_status rerun(ladle_op *op, ladle_ctx *ctx)
{
    ladle_status st = LADLE_OK, st2;
    recompute *r = rc_of(op);
    const uint64_t *steps = ((const rc_ctx *)ctx->impl)->steps;
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
    hold(r, st == LADLE_OK ? ctx : NULL);
    return st;
}

/* With a shared scratch the weight pass runs here too, while the scratch
 * holds this microbatch: a container runs its parts' weight passes after
 * all their backwards, by which time the other members of the pool have
 * taken the memory, and every weight pass would pay a second rerun and
 * inner backward. The gradients then sum in the order of the backwards. */
static ladle_status rc_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    recompute *r = rc_of(op);
    rc_ctx *c = ctx->impl;
    (void)n;
    if (!holds(r, ctx))
        LADLE_CALL(rerun(op, ctx));
    LADLE_CALL(ladle_layer_backward(r->inner, r->scratch, dy, dx));
    if (r->pool->refs > 1) {
        LADLE_CALL(ladle_layer_backward_weight(r->inner, r->scratch, dy));
        c->weights_done = ctx->gen + 1;
    }
fail:
    return st;
}

static ladle_status rc_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       int64_t n)
{
    ladle_status st = LADLE_OK;
    recompute *r = rc_of(op);
    rc_ctx *c = ctx->impl;
    (void)n;
    if (c->weights_done == ctx->gen + 1)
        return LADLE_OK;
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

static void pool_release(rc_pool *p)
{
    if (p == NULL || --p->refs > 0)
        return;
    if (p->mem)
        p->be->fn->free(p->be, p->mem);
    ladle__free(p);
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
    pool_release(r->pool);
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
static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* A new scratch ctx for r's inner layer whose saved state comes from a
 * (or, with a->base NULL, its own allocations, counted in a). */
static ladle_status scratch_in(recompute *r, ladle__ctx_arena *a, ladle_ctx **out)
{
    for (int i = 0; i < r->nleaf; i++)
        r->leaf[i]->ctx_arena = a;
    ladle_status st = ladle_ctx_create(r->inner, out);
    for (int i = 0; i < r->nleaf; i++)
        r->leaf[i]->ctx_arena = NULL;
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
    r->pool = ladle__calloc(1, sizeof *r->pool);
    LADLE_CHECK(r->leaf && r->cur && r->buf && r->keep && r->pool, LADLE_ERR_ALLOC,
                "out of memory");
    r->pool->refs = 1;
    r->pool->be = f->be;
    r->nleaf = r->nbuf = 0;
    walk(r, r->inner);
    for (int b = 0; b < r->nbuf; b++) {
        const ladle_tensor *t = r->buf[b];
        LADLE_CALL(ladle_tensor_create(t->dtype, t->device, t->ndim, t->shape, &r->keep[b]));
    }
    ladle__ctx_arena count = {0};
    LADLE_CALL(scratch_in(r, &count, &r->scratch));
    r->saved_bytes = count.used;
    r->saved_held = count.held;
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

static size_t y_bytes(const recompute *r)
{
    return (size_t)r->inner->y_numel *
           ladle_dtype_size(r->inner->dtype);
}

/* What r holds that no other wrapper shares. */
static size_t own_bytes(const recompute *r)
{
    size_t n = ladle_ctx_bytes_held(r->scratch);
    if (r->pool->mem)
        n -= r->saved_held;
    else
        n += y_bytes(r);
    for (int b = 0; b < r->nbuf; b++)
        n += (size_t)r->keep[b]->numel * ladle_dtype_size(r->keep[b]->dtype);
    return n;
}

size_t ladle_recompute_scratch_bytes(const ladle_op *op)
{
    if (op == NULL || op->vt->kind != LADLE_OP_RECOMPUTE)
        return 0;
    const recompute *r = rc_of(op);
    return own_bytes(r) + (r->pool->mem ? r->pool->bytes : 0);
}

ladle_op *ladle_recompute_inner(const ladle_op *op)
{
    return op && op->vt->kind == LADLE_OP_RECOMPUTE ? rc_of(op)->inner : NULL;
}

/* The wrappers under op, op included, into out[n...] when out is not NULL;
 * not those inside a wrapper, whose scratch is live while the outer one
 * reruns. Returns the new count. */
static int find_wrappers(ladle_op *op, ladle_op **out, int n)
{
    if (op->vt->kind == LADLE_OP_RECOMPUTE) {
        if (out)
            out[n] = op;
        return n + 1;
    }
    for (int i = 0, k = sub_count(op); i < k; i++)
        n = find_wrappers(sub_at(op, i), out, n);
    return n;
}

static ladle_status collect(int n, ladle_op *const ops[], int *count, ladle_op ***out)
{
    ladle_status st = LADLE_OK;
    LADLE_CHECK(n >= 0 && (n == 0 || ops != NULL), LADLE_ERR_NULL, "ops is NULL (n %d)", n);
    int k = 0;
    for (int i = 0; i < n; i++) {
        LADLE_CHECK(ops[i] != NULL, LADLE_ERR_NULL, "ops[%d] is NULL", i);
        k = find_wrappers(ops[i], NULL, k);
    }
    *out = ladle__calloc((size_t)k + 1, sizeof **out);
    LADLE_CHECK(*out != NULL, LADLE_ERR_ALLOC, "out of memory");
    *count = 0;
    for (int i = 0; i < n; i++)
        *count = find_wrappers(ops[i], *out, *count);
fail:
    return st;
}

/* Move r's saved state and inner y into pool p. Either all of it moves or
 * r stays as it was. */
static ladle_status join(recompute *r, rc_pool *p)
{
    ladle_status st = LADLE_OK;
    ladle_ctx *scratch = NULL;
    ladle_tensor *y = NULL;
    ladle__ctx_arena a = {.base = p->mem, .size = p->bytes};
    const ladle_op *f = r->inner;
    LADLE_CALL(scratch_in(r, &a, &scratch));
    LADLE_CALL(ladle_tensor_wrap(f->dtype, f->be->device, f->y_ndim, f->y_shape, NULL,
                                 (char *)p->mem + align64(r->saved_bytes), &y));
    ladle_ctx_destroy(&r->scratch);
    ladle_tensor_destroy(&r->y);
    r->scratch = scratch;
    r->y = y;
    pool_release(r->pool);
    r->pool = p;
    p->refs++;
    return LADLE_OK;
fail:
    ladle_ctx_destroy(&scratch);
    ladle_tensor_destroy(&y);
    return st;
}

ladle_status ladle_recompute_share(int n, ladle_op *const ops[])
{
    ladle_status st = LADLE_OK;
    ladle_op **w = NULL;
    rc_pool *p = NULL;
    int k = 0;
    LADLE_CALL(collect(n, ops, &k, &w));
    if (k < 2)
        goto fail; /* nothing to share */
    p = ladle__calloc(1, sizeof *p);
    LADLE_CHECK(p != NULL, LADLE_ERR_ALLOC, "out of memory");
    p->be = w[0]->be;
    for (int i = 0; i < k; i++) {
        const recompute *r = rc_of(w[i]);
        LADLE_CHECK(w[i]->be == p->be, LADLE_ERR_DEVICE,
                    "wrapper %d is on %s, wrapper 0 on %s: one scratch serves one device", i,
                    ladle_device_name(w[i]->be->device), ladle_device_name(p->be->device));
        size_t need = align64(r->saved_bytes) + align64(y_bytes(r));
        p->bytes = need > p->bytes ? need : p->bytes;
    }
    LADLE_CALL(ladle__alloc_as(p->be, LADLE_MEM_ACTIVATIONS, p->bytes, &p->mem));
    for (int i = 0; i < k; i++)
        if (rc_of(w[i])->pool != p) /* a wrapper listed twice joins once */
            LADLE_CALL(join(rc_of(w[i]), p));
fail:
    if (p && p->refs == 0) {
        p->refs = 1;
        pool_release(p);
    }
    ladle__free(w);
    return st;
}

size_t ladle_recompute_total_bytes(int n, ladle_op *const ops[])
{
    ladle_op **w = NULL;
    int k = 0;
    size_t total = 0;
    if (collect(n, ops, &k, &w) != LADLE_OK)
        return 0;
    for (int i = 0; i < k; i++) {
        const recompute *r = rc_of(w[i]);
        int first = 1; /* the first member of its pool in the list */
        for (int j = 0; j < i && first; j++)
            first = rc_of(w[j])->pool != r->pool;
        total += own_bytes(r) + (first && r->pool->mem ? r->pool->bytes : 0);
    }
    ladle__free(w);
    return total;
}
