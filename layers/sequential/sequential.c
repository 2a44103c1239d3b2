/*
 * The sequential container: a chain of layers that is itself a layer. Its
 * ctx holds a ctx per layer, the intermediate activations (the inputs of
 * layers 1..n-1) and the intermediate gradients, all sized for the largest
 * batch; smaller batches use the same memory under a smaller leading
 * extent.
 */
#include <string.h>

#include "src/op/make.h"
#include "layers/sequential/seq_impl.h"
#include "src/op/op_impl.h"

typedef struct sequential {
    int n;
    ladle_op **layers;
    ladle_ctx *scratch; /* activations for calls without a ctx, planned once */
    int planning_scratch; /* the scratch's ctx is being made: no ctxs of the parts */
} sequential;

typedef struct seq_ctx {
    ladle_ctx **ctxs;
    ladle_tensor **act;  /* act[i]: the output of layer i (i < n - 1) */
    ladle_tensor **grad; /* grad[i]: the gradient of act[i] */
    int grads_ready;
} seq_ctx;

/* Point a planned buffer at a batch of n (dimension 0) without allocating. */
static void set_batch(ladle_tensor *t, int64_t n)
{
    if (t->ndim == 0 || t->shape[0] == n)
        return;
    t->numel = t->numel / (t->shape[0] ? t->shape[0] : 1) * n;
    t->shape[0] = n;
}

static ladle_status seq_ctx_init(const ladle_op *op, ladle_ctx *ctx)
{
    ladle_status st = LADLE_OK;
    const sequential *q = op->impl;
    seq_ctx *c = ladle__calloc(1, sizeof *c);
    LADLE_CHECK(c != NULL, LADLE_ERR_ALLOC, "out of memory");
    ctx->impl = c;
    c->ctxs = ladle__calloc((size_t)q->n, sizeof *c->ctxs);
    c->act = ladle__calloc((size_t)q->n, sizeof *c->act);
    c->grad = ladle__calloc((size_t)q->n, sizeof *c->grad);
    LADLE_CHECK(c->ctxs && c->act && c->grad, LADLE_ERR_ALLOC, "out of memory");
    for (int i = 0; i < q->n; i++) {
        /* calls without a ctx pass none to the parts */
        if (!q->planning_scratch)
            LADLE_CALL(ladle_ctx_create(q->layers[i], &c->ctxs[i]));
        if (i == q->n - 1)
            continue;
        const ladle_op *l = q->layers[i];
        LADLE_CALL(ladle__ctx_tensor(op, l->y_ndim, l->y_shape, &c->act[i]));
        LADLE_CALL(ladle__ctx_tensor(op, l->y_ndim, l->y_shape, &c->grad[i]));
    }
fail:
    return st;
}

static void seq_ctx_fini(ladle_ctx *ctx)
{
    seq_ctx *c = ctx->impl;
    const sequential *q = ctx->op->impl;
    if (c == NULL)
        return;
    for (int i = 0; i < q->n; i++) {
        if (c->ctxs)
            ladle_ctx_destroy(&c->ctxs[i]);
        if (c->act)
            ladle_tensor_destroy(&c->act[i]);
        if (c->grad)
            ladle_tensor_destroy(&c->grad[i]);
    }
    ladle__free(c->ctxs);
    ladle__free(c->act);
    ladle__free(c->grad);
    ladle__free(c);
    ctx->impl = NULL;
}

static size_t seq_ctx_held(const ladle_ctx *ctx)
{
    const seq_ctx *c = ctx->impl;
    const sequential *q = ctx->op->impl;
    size_t n = 0;
    for (int i = 0; i < q->n; i++) {
        n += ladle_ctx_bytes_held(c->ctxs[i]);
        for (int k = 0; k < 2 && i < q->n - 1; k++) {
            const ladle_tensor *t = k ? c->grad[i] : c->act[i];
            n += (size_t)t->numel * ladle_dtype_size(t->dtype);
        }
    }
    return n;
}

static ladle_status seq_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    const sequential *q = op->impl;
    const ladle_tensor *in = x;
    /* without a ctx the activations still need somewhere to live */
    seq_ctx *c = ctx ? ctx->impl : q->scratch->impl;
    c->grads_ready = 0;
    for (int i = 0; i < q->n; i++) {
        ladle_tensor *out = i == q->n - 1 ? y : c->act[i];
        if (out != y && op->batched) /* a distributed chain runs its blocks whole */
            set_batch(out, n);
        LADLE_CALL(ladle_layer_forward(q->layers[i], ctx ? c->ctxs[i] : NULL, in, out));
        in = out;
    }
fail:
    return st;
}

static ladle_status seq_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                 ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    const sequential *q = op->impl;
    /* without a ctx this is the adjoint of a chain of linear layers */
    seq_ctx *c = ctx ? ctx->impl : q->scratch->impl;
    const ladle_tensor *g = dy;
    for (int i = q->n - 1; i >= 0; i--) {
        ladle_tensor *out = i == 0 ? dx : c->grad[i - 1];
        if (i > 0 && op->batched)
            set_batch(out, n);
        if (ctx != NULL)
            LADLE_CALL(ladle_layer_backward(q->layers[i], c->ctxs[i], g, out));
        else if (out != NULL)
            LADLE_CALL(ladle_op_adjoint(q->layers[i], g, out));
        g = out;
    }
    c->grads_ready = ctx != NULL;
fail:
    return st;
}

static ladle_status seq_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                        int64_t n)
{
    ladle_status st = LADLE_OK;
    const sequential *q = op->impl;
    seq_ctx *c = ctx->impl;
    (void)n;
    LADLE_CHECK(c->grads_ready || q->n == 1, LADLE_ERR_STATE,
                "backward_weight of a sequential container needs its backward first");
    for (int i = 0; i < q->n; i++)
        LADLE_CALL(ladle_layer_backward_weight(q->layers[i], c->ctxs[i],
                                               i == q->n - 1 ? dy : c->grad[i]));
fail:
    return st;
}

static int seq_num_params(const ladle_op *op)
{
    const sequential *q = op->impl;
    int total = 0;
    for (int i = 0; i < q->n; i++)
        total += ladle_op_num_params(q->layers[i]);
    return total;
}

static void seq_set_training(ladle_op *op, int training)
{
    const sequential *q = op->impl;
    for (int i = 0; i < q->n; i++)
        ladle_layer_set_training(q->layers[i], training);
}

/* Parameter i of the chain: its layer and the layer's own index. */
static const ladle_op *seq_locate(const ladle_op *op, int *i)
{
    const sequential *q = op->impl;
    for (int k = 0; k < q->n; k++) {
        int np = ladle_op_num_params(q->layers[k]);
        if (*i < np)
            return q->layers[k];
        *i -= np;
    }
    return NULL;
}

static ladle_tensor *seq_param_at(const ladle_op *op, int i, int grad, const char **name)
{
    const ladle_op *l = seq_locate(op, &i);
    if (l == NULL)
        return NULL;
    if (name)
        *name = ladle_op_param_name(l, i);
    return grad ? ladle_op_grad(l, i) : ladle_op_param(l, i);
}

/* The layer's own account of its parameter (a shard, copies to sum), so
 * a graph's buckets and checkpoints see a distributed layer through the
 * container as they would see it alone. */
static void seq_param_info(const ladle_op *op, int i, ladle__pinfo *info)
{
    const ladle_op *l = seq_locate(op, &i);
    if (l)
        ladle__param_info(l, i, info);
    else
        memset(info, 0, sizeof *info);
}

static void seq_param_bound(ladle_op *op, int i)
{
    ladle_op *l = (ladle_op *)seq_locate(op, &i);
    if (l && l->vt->param_bound)
        l->vt->param_bound(l, i);
}

/* Every layer's sums of replicated gradients, in order. */
static ladle_status seq_sync_grads(ladle_op *op)
{
    ladle_status st = LADLE_OK;
    const sequential *q = op->impl;
    for (int i = 0; i < q->n; i++)
        LADLE_CALL(ladle_layer_sync_gradients(q->layers[i]));
fail:
    return st;
}

static void seq_destroy(ladle_op *op)
{
    sequential *q = op->impl;
    if (q == NULL)
        return;
    ladle_ctx_destroy(&q->scratch);
    for (int i = 0; i < q->n; i++)
        ladle_op_destroy(&q->layers[i]);
    ladle__free(q->layers);
    ladle__free(q);
}

static int seq_num_parts(const ladle_op *op) { return ((const sequential *)op->impl)->n; }

static ladle_op *seq_part_at(const ladle_op *op, int i)
{
    const sequential *q = op->impl;
    return i >= 0 && i < q->n ? q->layers[i] : NULL;
}

static const ladle_op_vtable sequential_vt = {
    .kind = LADLE_OP_SEQUENTIAL,
    .name = "sequential",
    .num_parts = seq_num_parts,
    .part_at = seq_part_at,
    .destroy = seq_destroy,
    .layer_forward = seq_forward,
    .layer_backward = seq_backward,
    .layer_backward_weight = seq_backward_weight,
    .ctx_init = seq_ctx_init,
    .ctx_fini = seq_ctx_fini,
    .ctx_held = seq_ctx_held,
    .num_params = seq_num_params,
    .param_at = seq_param_at,
    .set_training = seq_set_training,
    .param_info = seq_param_info,
    .param_bound = seq_param_bound,
    .sync_grads = seq_sync_grads,
};

size_t ladle__seq_scratch_bytes(const ladle_op *op)
{
    if (op == NULL || op->vt != &sequential_vt)
        return 0;
    const sequential *q = op->impl;
    size_t total = 0, es = ladle_dtype_size(op->dtype);
    for (int i = 0; i + 1 < q->n; i++) {
        size_t b = (size_t)q->layers[i]->y_numel * es;
        total += 2 * ((b + 63) & ~(size_t)63); /* act[i] and grad[i] */
    }
    return total;
}

ladle_status ladle__seq_scratch_move(ladle_op *op, void *mem, size_t bytes)
{
    ladle_status st = LADLE_OK;
    LADLE_CHECK(op != NULL && op->vt == &sequential_vt, LADLE_ERR_ARG,
                "not a sequential op");
    sequential *q = op->impl;
    ladle__ctx_arena a = {.base = mem, .size = bytes};
    ladle_ctx *fresh = NULL;
    op->ctx_arena = &a;
    q->planning_scratch = 1;
    st = ladle_ctx_create(op, &fresh);
    q->planning_scratch = 0;
    op->ctx_arena = NULL;
    if (st != LADLE_OK) {
        ladle_ctx_destroy(&fresh);
        goto fail;
    }
    ladle_ctx_destroy(&q->scratch);
    q->scratch = fresh;
fail:
    return st;
}


static ladle_status check_chain(int n, ladle_op *const layers[])
{
    const char *f = "ladle_sequential_create";
    char a[128], b[128];
    for (int i = 0; i < n; i++) {
        const ladle_op *l = layers[i];
        if (l == NULL)
            return ladle__raise(LADLE_ERR_NULL, f, "layer %d is NULL", i);
        if (!l->layer || l->vt->layer_forward == NULL)
            return ladle__raise(LADLE_ERR_ARG, f, "op %d (%s) is not a layer", i, l->vt->name);
        if (l->dtype != layers[0]->dtype)
            return ladle__raise(LADLE_ERR_DTYPE, f, "layer %d is %s, layer 0 is %s", i,
                                ladle_dtype_name(l->dtype), ladle_dtype_name(layers[0]->dtype));
        if (l->be->device != layers[0]->be->device)
            return ladle__raise(LADLE_ERR_DEVICE, f,
                                "layer %d (%s) is on %s but layer 0 (%s) is on %s: a container's "
                                "layers live on one device",
                                i, l->vt->name, ladle_device_name(l->be->device),
                                layers[0]->vt->name, ladle_device_name(layers[0]->be->device));
        int dist = l->x_layout != NULL || l->y_layout != NULL;
        if (!l->batched && !dist)
            return ladle__raise(LADLE_ERR_ARG, f, "layer %d (%s) has no batch dimension", i,
                                l->vt->name);
        if (!l->active)
            return ladle__raise(LADLE_ERR_ARG, f,
                                "layer %d (%s) does not run on this rank: a chain of "
                                "distributed layers lives on ranks that run all of them",
                                i, l->vt->name);
        for (int j = 0; j < i; j++)
            if (layers[j] == l)
                return ladle__raise(LADLE_ERR_ARG, f, "layer %d appears twice", i);
        if (i == 0)
            continue;
        const ladle_op *p = layers[i - 1];
        int same = p->y_ndim == l->x_ndim;
        for (int d = 0; same && d < l->x_ndim; d++)
            same = p->y_shape[d] == l->x_shape[d];
        if (!same)
            return ladle__raise(LADLE_ERR_SHAPE, f, "layer %d gives %s but layer %d takes %s",
                                i - 1, ladle__fmt_shape64(a, sizeof a, p->y_ndim, p->y_shape), i,
                                ladle__fmt_shape64(b, sizeof b, l->x_ndim, l->x_shape));
    }
    return LADLE_OK;
}

/* The chain's ranks agree on the verdict when it holds distributed
 * layers (over the first one's communicator, whose ranks all make the
 * chain), so a chain refused on one of them is refused on all. */
static ladle_status agree_chain(int n, ladle_op *const layers[], ladle_status st)
{
    for (int i = 0; layers != NULL && i < n; i++) {
        MPI_Comm c = ladle__layer_comm(layers[i]);
        if (c != MPI_COMM_NULL)
            return ladle__agree_code(c, st, "ladle_sequential_create");
    }
    return st;
}

ladle_status ladle_sequential_create(int n, ladle_op *const layers[], ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    sequential *q = NULL;
    LADLE_NOT_NULL(out);
    LADLE_CHECK(n >= 1 && layers != NULL, n < 1 ? LADLE_ERR_ARG : LADLE_ERR_NULL,
                "a sequential container needs at least one layer");
    LADLE_CALL(agree_chain(n, layers, check_chain(n, layers)));
    q = ladle__calloc(1, sizeof *q);
    LADLE_CHECK(q != NULL, LADLE_ERR_ALLOC, "out of memory");
    q->layers = ladle__calloc((size_t)n, sizeof *q->layers);
    LADLE_CHECK(q->layers != NULL, LADLE_ERR_ALLOC, "out of memory");
    const ladle_op *first = layers[0], *last = layers[n - 1];
    int batched = 1;
    for (int i = 0; i < n; i++)
        batched &= layers[i]->batched;
    LADLE_CALL(ladle__layer_new(&sequential_vt, first->dtype, first->be->device,
                                first->x_ndim, first->x_shape, last->y_ndim, last->y_shape,
                                batched, &op, __func__));
    /* a chain of distributed layers: its x is the first one's block of
     * its layout, its y the last one's */
    if (first->x_layout)
        op->x_layout = ladle__layout_retain(first->x_layout);
    if (last->y_layout)
        op->y_layout = ladle__layout_retain(last->y_layout);
    memcpy(q->layers, layers, sizeof(ladle_op *) * (size_t)n);
    q->n = n;
    op->impl = q;
    op->linear = 1;
    for (int i = 0; i < n; i++)
        op->linear &= layers[i]->linear;
    op->x_ids = first->x_ids; /* a chain that starts with an embedding takes ids */
    q->planning_scratch = 1;
    st = ladle_ctx_create(op, &q->scratch);
    q->planning_scratch = 0;
    if (st != LADLE_OK) { /* hand the layers back before destroying */
        q->n = 0;
        ladle_op_destroy(&op);
        return st;
    }
    *out = op;
    return LADLE_OK;
fail:
    if (q != NULL)
        ladle__free(q->layers);
    ladle__free(q);
    return st;
}

int ladle_sequential_size(const ladle_op *op)
{
    return op && op->vt == &sequential_vt ? seq_num_parts(op) : 0;
}

ladle_op *ladle_sequential_layer(const ladle_op *op, int i)
{
    return op && op->vt == &sequential_vt ? seq_part_at(op, i) : NULL;
}
