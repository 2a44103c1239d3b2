/* The layer calls: argument checks, contexts, parameters, initialisation. */
#include <math.h>
#include <string.h>

#include "src/op/op_impl.h"

ladle_status ladle__layer_check_args(const char *func, ladle_dtype dtype, int ndim,
                                     const int64_t *shape, int min_ndim)
{
    int64_t numel;
    if (!ladle__is_real(dtype))
        return ladle__raise(LADLE_ERR_DTYPE, func, "dtype %s is not f32 or f64",
                            ladle_dtype_name(dtype));
    if (ndim < min_ndim)
        return ladle__raise(LADLE_ERR_SHAPE, func, "the input needs at least %d dimensions, "
                            "not %d", min_ndim, ndim);
    return ladle__check_shape(func, ndim, shape, &numel);
}

static void layer_destroy_params(ladle_op *op)
{
    for (int i = 0; i < op->nparams; i++) {
        ladle_tensor_destroy(&op->params[i]);
        ladle_tensor_destroy(&op->grads[i]);
    }
}

ladle_status ladle__layer_check_bf16(const char *func, ladle_dtype dtype, ladle_device device,
                                     int ndim, const int64_t *shape, int min_ndim)
{
    if (dtype != LADLE_BF16)
        return ladle__layer_check_args(func, dtype, ndim, shape, min_ndim);
    const ladle_backend *be = NULL;
    ladle_status st = ladle__backend_get(device, func, &be);
    if (st != LADLE_OK)
        return st;
    if (be->fn->gemm_half == NULL)
        return ladle__raise(LADLE_ERR_DTYPE, func, "the %s device has no bf16 kernels",
                            ladle_device_name(device));
    return ladle__layer_check_args(func, LADLE_F32, ndim, shape, min_ndim);
}

ladle_status ladle__layer_new(const ladle_op_vtable *vt, ladle_dtype dtype, ladle_device device,
                              int x_ndim, const int64_t *x_shape, int y_ndim,
                              const int64_t *y_shape, int batched, ladle_op **out, const char *func)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    LADLE_CALL(ladle__op_alloc(vt, dtype, device, func, __func__, &op));
    op->layer = 1;
    op->batched = batched;
    op->training = 1;
    op->active = 1;
    op->x_ndim = x_ndim;
    op->y_ndim = y_ndim;
    op->x_numel = op->y_numel = 1;
    for (int d = 0; d < x_ndim; d++)
        op->x_numel *= (op->x_shape[d] = x_shape[d]);
    for (int d = 0; d < y_ndim; d++)
        op->y_numel *= (op->y_shape[d] = y_shape[d]);
    *out = op;
fail:
    return st;
}

ladle_status ladle__layer_add_param(ladle_op *op, const char *name, int ndim,
                                    const int64_t *shape, ladle_tensor **param)
{
    ladle_status st = LADLE_OK;
    int i = op->nparams;
    LADLE_CHECK(i < LADLE_MAX_PARAMS, LADLE_ERR_INTERNAL, "too many parameters");
    LADLE_CALL(ladle__tensor_create_as(LADLE_MEM_PARAMS, op->dtype, op->be->device, ndim,
                                       shape, &op->params[i]));
    /* a bf16 layer's gradients are f32: the optimizer and the all-reduce take them */
    ladle_dtype gt = op->dtype == LADLE_BF16 ? LADLE_F32 : op->dtype;
    LADLE_CALL(ladle__tensor_create_as(LADLE_MEM_GRADS, gt, op->be->device, ndim, shape,
                                       &op->grads[i]));
    op->param_names[i] = name;
    op->nparams++;
    if (param)
        *param = op->params[i];
    return LADLE_OK;
fail:
    ladle_tensor_destroy(&op->params[i]);
    ladle_tensor_destroy(&op->grads[i]);
    return st;
}

void ladle__param_info(const ladle_op *op, int i, ladle__pinfo *info)
{
    memset(info, 0, sizeof *info);
    if (op->vt->param_info) {
        op->vt->param_info(op, i, info);
        return;
    }
    const ladle_tensor *t = ladle_op_param(op, i);
    info->ndim = t ? t->ndim : 0;
    for (int d = 0; t && d < t->ndim; d++)
        info->global[d] = t->shape[d];
    info->owner = 1;
}

ladle_status ladle__init_tensor(ladle_tensor *t, ladle_init init, double fan_in,
                                double fan_out, uint64_t seed, uint64_t stream)
{
    ladle__pinfo whole;
    memset(&whole, 0, sizeof whole);
    whole.ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++)
        whole.global[d] = t->shape[d];
    return ladle__init_shard(t, &whole, init, fan_in, fan_out, seed, stream);
}

ladle_status ladle__init_shard(ladle_tensor *t, const ladle__pinfo *info, ladle_init init,
                               double fan_in, double fan_out, uint64_t seed, uint64_t stream)
{
    double bound = 0.0, sigma = 0.0;
    int gaussian = 0;
    switch (init) {
    case LADLE_INIT_DEFAULT:
        bound = fan_in > 0 ? 1.0 / sqrt(fan_in) : 0.0;
        break;
    case LADLE_INIT_KAIMING_UNIFORM:
        bound = fan_in > 0 ? sqrt(6.0 / fan_in) : 0.0;
        break;
    case LADLE_INIT_KAIMING_NORMAL:
        gaussian = 1;
        sigma = fan_in > 0 ? sqrt(2.0 / fan_in) : 0.0;
        break;
    case LADLE_INIT_XAVIER_UNIFORM:
        bound = sqrt(6.0 / (fan_in + fan_out));
        break;
    case LADLE_INIT_XAVIER_NORMAL:
        gaussian = 1;
        sigma = sqrt(2.0 / (fan_in + fan_out));
        break;
    case LADLE_INIT_ZEROS:
        break;
    default:
        return ladle__raise(LADLE_ERR_ARG, "ladle_layer_init", "unknown init %d", (int)init);
    }
    ladle_init_desc d = {.ndim = t->ndim,
                         .gaussian = gaussian,
                         .scale = gaussian ? sigma : bound,
                         .seed = seed,
                         .stream = stream};
    for (int k = 0; k < t->ndim; k++) {
        d.shape[k] = t->shape[k];
        d.strides[k] = t->strides[k];
        d.global[k] = info->global[k];
        d.offset[k] = info->offset[k];
    }
    const ladle_backend *be = NULL;
    ladle_status st = ladle__backend_get(t->device, "ladle_layer_init", &be);
    return st != LADLE_OK ? st : be->fn->fill_init(be, t->dtype, &d, t->data);
}

static ladle_status ctx_create(const ladle_op *op, ladle_ctx **out)
{
    ladle_status st = LADLE_OK;
    ladle_ctx *ctx = NULL;
    LADLE_NOT_NULL(op);
    LADLE_NOT_NULL(out);
    LADLE_CHECK(op->layer, LADLE_ERR_ARG, "the %s op is not a layer", op->vt->name);
    ctx = ladle__calloc(1, sizeof *ctx);
    LADLE_CHECK(ctx != NULL, LADLE_ERR_ALLOC, "out of memory");
    ctx->op = op;
    if (op->ctx_bytes > 0) {
        ladle__ctx_arena *a = op->ctx_arena;
        size_t need = (op->ctx_bytes + 63) & ~(size_t)63;
        if (a && a->base) {
            LADLE_CHECK(a->used + need <= a->size, LADLE_ERR_STATE,
                        "the %s layer's saved state does not fit its arena (%zu + %zu > %zu)",
                        op->vt->name, a->used, need, a->size);
            ctx->buf = a->base + a->used;
            ctx->buf_in_arena = 1;
        } else {
            LADLE_CALL(op->be->fn->alloc(op->be, op->ctx_bytes, &ctx->buf));
        }
        if (a) {
            a->used += need;
            a->held += op->ctx_bytes;
        }
    }
    if (op->vt->ctx_init)
        LADLE_CALL(op->vt->ctx_init(op, ctx));
    *out = ctx;
    return LADLE_OK;
fail:
    ladle_ctx_destroy(&ctx);
    return st;
}

ladle_status ladle__ctx_tensor(const ladle_op *op, int ndim, const int64_t *shape,
                               ladle_tensor **t)
{
    ladle_status st = LADLE_OK;
    ladle__ctx_arena *a = op->ctx_arena;
    ladle_device dev = op->be->device;
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    size_t bytes = (size_t)n * ladle_dtype_size(op->dtype), need = (bytes + 63) & ~(size_t)63;
    if (a && a->base) {
        LADLE_CHECK(a->used + need <= a->size, LADLE_ERR_STATE,
                    "a %s ctx's tensor does not fit its arena (%zu + %zu > %zu)", op->vt->name,
                    a->used, need, a->size);
        LADLE_CALL(ladle_tensor_wrap(op->dtype, dev, ndim, shape, NULL, a->base + a->used, t));
    } else {
        LADLE_CALL(ladle_tensor_create(op->dtype, dev, ndim, shape, t));
    }
    if (a) {
        a->used += need;
        a->held += bytes;
    }
fail:
    return st;
}

/* everything a context holds is activation memory, a container's layers'
 * contexts and intermediate values included */
ladle_status ladle_ctx_create(const ladle_op *op, ladle_ctx **out)
{
    int prev = ladle__mem_kind_begin(LADLE_MEM_ACTIVATIONS);
    ladle_status st = ctx_create(op, out);
    ladle__mem_kind_end(prev);
    return st;
}

size_t ladle_ctx_bytes_held(const ladle_ctx *ctx)
{
    if (ctx == NULL || ctx->op == NULL)
        return 0;
    size_t n = ctx->op->ctx_bytes;
    if (ctx->op->vt->ctx_held && ctx->impl)
        n += ctx->op->vt->ctx_held(ctx);
    return n;
}

/* The ctx at the start of caller memory, its saved state 64-byte aligned after it. */
static size_t ctx_header_bytes(void) { return (sizeof(struct ladle_ctx) + 63) & ~(size_t)63; }

size_t ladle_ctx_bytes(const ladle_op *op)
{
    if (op == NULL || !op->layer || op->vt->ctx_init != NULL)
        return 0;
    if (op->ctx_bytes > 0 && op->be->device != LADLE_CPU)
        return 0; /* its saved state is device memory */
    return ctx_header_bytes() + op->ctx_bytes;
}

ladle_status ladle_ctx_create_in(const ladle_op *op, void *mem, size_t bytes, ladle_ctx **out)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(op);
    LADLE_NOT_NULL(mem);
    LADLE_NOT_NULL(out);
    LADLE_CHECK(op->layer, LADLE_ERR_ARG, "the %s op is not a layer", op->vt->name);
    size_t need = ladle_ctx_bytes(op);
    LADLE_CHECK(need > 0, LADLE_ERR_UNSUPPORTED,
                "the contexts of the %s layer cannot live in caller memory (%s): use "
                "ladle_ctx_create", op->vt->name,
                op->vt->ctx_init ? "they hold more than one block"
                                 : "their saved state is device memory");
    LADLE_CHECK(bytes >= need, LADLE_ERR_ARG,
                "%zu bytes are too few for a context of the %s layer: it needs %zu "
                "(ladle_ctx_bytes)", bytes, op->vt->name, need);
    LADLE_CHECK((uintptr_t)mem % 64 == 0, LADLE_ERR_ARG, "mem %p is not 64-byte aligned", mem);
    memset(mem, 0, need);
    ladle_ctx *ctx = mem;
    ctx->op = op;
    ctx->in_caller_mem = 1;
    if (op->ctx_bytes > 0)
        ctx->buf = (char *)mem + ctx_header_bytes();
    *out = ctx;
fail:
    return st;
}

ladle_status ladle_ctx_destroy(ladle_ctx **ctx)
{
    if (ctx == NULL || *ctx == NULL)
        return LADLE_OK;
    if ((*ctx)->op->vt->ctx_fini)
        (*ctx)->op->vt->ctx_fini(*ctx);
    if ((*ctx)->in_caller_mem) {
        *ctx = NULL;
        return LADLE_OK;
    }
    const ladle_backend *be = (*ctx)->op->be;
    if ((*ctx)->buf && !(*ctx)->buf_in_arena)
        be->fn->free(be, (*ctx)->buf);
    ladle__free(*ctx);
    *ctx = NULL;
    return LADLE_OK;
}

/* Check one tensor of a layer call against an expected shape whose batch
 * (dimension 0, when batched) is n. */
static ladle_status check_one(const ladle_op *op, const ladle_tensor *t, const char *role,
                              int ndim, const int64_t *shape, int batched, int64_t n,
                              const char *func)
{
    char a[160], b[160];
    int64_t want[LADLE_MAX_NDIM];
    if (t == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "%s is NULL", role);
    ladle_dtype dtype = op->x_ids && strcmp(role, "x") == 0 ? LADLE_I64 : op->dtype;
    if (t->dtype != dtype)
        return ladle__raise(LADLE_ERR_DTYPE, func, "%s is %s but the %s layer takes %s", role,
                            ladle_dtype_name(t->dtype), op->vt->name, ladle_dtype_name(dtype));
    if (t->device != op->be->device)
        return ladle__raise(LADLE_ERR_DEVICE, func, "%s is on %s but the %s layer is on %s", role,
                            ladle_device_name(t->device), op->vt->name,
                            ladle_device_name(op->be->device));
    memcpy(want, shape, sizeof(int64_t) * (size_t)ndim);
    if (batched && ndim > 0)
        want[0] = n;
    int same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = t->shape[d] == want[d];
    if (!same)
        return ladle__raise(LADLE_ERR_SHAPE, func, "%s has shape %s; the %s layer expects %s",
                            role, ladle__fmt_shape64(a, sizeof a, t->ndim, t->shape),
                            op->vt->name, ladle__fmt_shape64(b, sizeof b, ndim, want));
    if (!ladle_tensor_is_contiguous(t))
        return ladle__raise(LADLE_ERR_ARG, func, "%s is not contiguous", role);
    return LADLE_OK;
}

/* The batch of a call from its input, checked against the largest one. */
static ladle_status batch_of(const ladle_op *op, const ladle_tensor *in, const char *role,
                             int64_t *n, const char *func)
{
    *n = op->batched && op->x_ndim > 0 ? op->x_shape[0] : 0;
    if (in == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "%s is NULL", role);
    if (op->batched && in->ndim > 0) {
        if (in->shape[0] > op->x_shape[0])
            return ladle__raise(LADLE_ERR_SHAPE, func, "a batch of %lld exceeds the layer's "
                                "%lld", (long long)in->shape[0], (long long)op->x_shape[0]);
        *n = in->shape[0];
    }
    return LADLE_OK;
}

static int overlap(const ladle_tensor *a, const ladle_tensor *b)
{
    if (a == NULL || b == NULL || a->numel == 0 || b->numel == 0)
        return 0;
    size_t ea = ladle_dtype_size(a->dtype), eb = ladle_dtype_size(b->dtype);
    const char *a0 = a->data, *b0 = b->data;
    return a0 < b0 + (size_t)b->numel * eb && b0 < a0 + (size_t)a->numel * ea;
}

static ladle_status check_layer(const ladle_op *op, const ladle_ctx *ctx, const char *func)
{
    if (op == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "op is NULL");
    if (!op->layer || op->vt->layer_forward == NULL)
        return ladle__raise(LADLE_ERR_ARG, func, "the %s op is not a layer", op->vt->name);
    if (ctx != NULL && ctx->op != op)
        return ladle__raise(LADLE_ERR_ARG, func, "the ctx belongs to another op");
    return LADLE_OK;
}

/* Distributed layers created with LADLE_CHECKED agree on a call's checks,
 * so a bad tensor on one rank fails every rank instead of leaving the
 * others waiting in a message. */
static ladle_status settle(const ladle_op *op, ladle_status st, const char *func)
{
    if (op->comm != MPI_COMM_NULL && (op->flags & LADLE_CHECKED)) {
        if (st == LADLE_OK) /* a device that has failed fails the call everywhere */
            st = ladle__be_health(op->be);
        return ladle__agree(op->comm, st, 0, func);
    }
    return st;
}

static ladle_status forward_checks(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                   ladle_tensor *y, int64_t *n, const char *func)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(batch_of(op, x, "x", n, func));
    LADLE_CALL(check_one(op, x, "x", op->x_ndim, op->x_shape, op->batched, *n, func));
    LADLE_CALL(check_one(op, y, "y", op->y_ndim, op->y_shape, op->batched, *n, func));
    LADLE_CHECK(!overlap(x, y) || (op->in_place && x->data == y->data), LADLE_ERR_ARG,
                "x and y overlap and the %s layer does not work in place", op->vt->name);
fail:
    return st;
}

ladle_status ladle_layer_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                 ladle_tensor *y)
{
    ladle_status st = LADLE_OK;
    int64_t n = 0;
    LADLE_CALL(check_layer(op, ctx, __func__));
    LADLE_CALL(settle(op, forward_checks(op, ctx, x, y, &n, __func__), __func__));
    if (ctx) {
        ctx->ready = 0;
        ctx->training = op->training;
        ctx->step = op->step;
        ctx->gen = ++op->gen;
    }
    LADLE_CALL(op->vt->layer_forward(op, ctx, x, y, n));
    if (ctx) {
        ctx->x = x;
        ctx->y = y;
        ctx->batch = n;
        ctx->ready = 1;
    }
fail:
    return st;
}

static ladle_status check_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                   const char *func)
{
    ladle_status st = LADLE_OK;
    LADLE_CHECK(ctx != NULL, LADLE_ERR_NULL, "ctx is NULL");
    LADLE_CHECK(ctx->ready, LADLE_ERR_STATE, "no forward has run with this ctx");
    LADLE_CALL(check_one(op, dy, "dy", op->y_ndim, op->y_shape, op->batched, ctx->batch,
                         func));
fail:
    return st;
}

static ladle_status backward_checks(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                    const ladle_tensor *dx, const char *func)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(check_backward(op, ctx, dy, func));
    LADLE_CHECK(dx == NULL || !op->x_ids, LADLE_ERR_ARG,
                "the %s layer has no gradient with respect to its integer input: pass dx NULL",
                op->vt->name);
    if (dx != NULL) {
        LADLE_CALL(check_one(op, dx, "dx", op->x_ndim, op->x_shape, op->batched, ctx->batch,
                             func));
        LADLE_CHECK(!overlap(dx, dy) || (op->in_place && dx->data == dy->data),
                    LADLE_ERR_ARG, "dx and dy overlap and the %s layer does not work in place",
                    op->vt->name);
    }
fail:
    return st;
}

ladle_status ladle_layer_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                  ladle_tensor *dx)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(check_layer(op, ctx, __func__));
    LADLE_CALL(settle(op, backward_checks(op, ctx, dy, dx, __func__), __func__));
    LADLE_CALL(op->vt->layer_backward(op, ctx, dy, dx, ctx->batch));
fail:
    return st;
}

ladle_status ladle_layer_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(check_layer(op, ctx, __func__));
    LADLE_CALL(settle(op, check_backward(op, ctx, dy, __func__), __func__));
    if (ladle_op_num_params(op) > 0 && op->vt->layer_backward_weight)
        LADLE_CALL(op->vt->layer_backward_weight(op, ctx, dy, ctx->batch));
fail:
    return st;
}

ladle_status ladle_layer_sync_gradients(ladle_op *op)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(op);
    LADLE_CHECK(op->layer, LADLE_ERR_ARG, "the %s op is not a layer", op->vt->name);
    if (op->vt->sync_grads)
        LADLE_CALL(op->vt->sync_grads(op));
fail:
    return st;
}

ladle_status ladle_op_param_shard(const ladle_op *op, int i, int *ndim, int64_t global_shape[],
                                  int64_t offset[], int *owner)
{
    ladle_status st = LADLE_OK;
    ladle__pinfo info;
    LADLE_NOT_NULL(op);
    LADLE_CHECK(i >= 0 && i < ladle_op_num_params(op), LADLE_ERR_ARG,
                "parameter %d of %d", i, ladle_op_num_params(op));
    ladle__param_info(op, i, &info);
    if (ndim)
        *ndim = info.ndim;
    for (int d = 0; d < info.ndim; d++) {
        if (global_shape)
            global_shape[d] = info.global[d];
        if (offset)
            offset[d] = info.offset[d];
    }
    if (owner)
        *owner = info.owner;
fail:
    return st;
}

int ladle_op_num_params(const ladle_op *op)
{
    if (op == NULL)
        return 0;
    return op->vt->num_params ? op->vt->num_params(op) : op->nparams;
}

static ladle_tensor *param_at(const ladle_op *op, int i, int grad, const char **name)
{
    if (op == NULL || i < 0 || i >= ladle_op_num_params(op))
        return NULL;
    if (op->vt->param_at)
        return op->vt->param_at(op, i, grad, name);
    if (name)
        *name = op->param_names[i];
    return grad ? op->grads[i] : op->params[i];
}

ladle_tensor *ladle_op_param(const ladle_op *op, int i) { return param_at(op, i, 0, NULL); }

ladle_status ladle_op_bind_param(ladle_op *op, int i, void *param, void *grad)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(op);
    LADLE_CHECK(op->layer, LADLE_ERR_ARG, "the %s op is not a layer", op->vt->name);
    LADLE_CHECK(op->vt->kind != LADLE_OP_CUSTOM, LADLE_ERR_UNSUPPORTED,
                "the parameters of the custom op '%s' are the caller's already", op->vt->name);
    int n = ladle_op_num_params(op);
    LADLE_CHECK(i >= 0 && i < n, LADLE_ERR_ARG, "parameter %d of the %s layer, which has %d", i,
                op->vt->name, n);
    ladle_tensor *p = param_at(op, i, 0, NULL), *g = param_at(op, i, 1, NULL);
    /* a zero-volume stand-in may be its own gradient: nothing to move */
    if (p->numel == 0)
        return LADLE_OK;
    LADLE_CALL(ladle__tensor_adopt(p, param, 0, __func__));
    if (grad)
        LADLE_CALL(ladle__tensor_adopt(g, grad, 0, __func__));
    LADLE_CHECK(grad == NULL || grad != param, LADLE_ERR_ARG,
                "param and grad are the same buffer");
    ladle__tensor_adopt(p, param, 1, __func__);
    if (grad)
        ladle__tensor_adopt(g, grad, 1, __func__);
    /* a container's parameter is its part's, which may view it */
    if (op->vt->param_bound)
        op->vt->param_bound(op, i);
fail:
    return st;
}

ladle_tensor *ladle_op_grad(const ladle_op *op, int i) { return param_at(op, i, 1, NULL); }

const char *ladle_op_param_name(const ladle_op *op, int i)
{
    const char *name = NULL;
    param_at(op, i, 0, &name);
    return name;
}

ladle_status ladle_op_zero_grad(ladle_op *op)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(op);
    for (int i = 0; i < ladle_op_num_params(op); i++)
        LADLE_CALL(ladle_tensor_fill(ladle_op_grad(op, i), 0.0));
fail:
    return st;
}

ladle_status ladle_layer_set_training(ladle_op *op, int training)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(op);
    LADLE_CHECK(op->layer, LADLE_ERR_ARG, "the %s op is not a layer", op->vt->name);
    op->training = training != 0;
    if (op->vt->set_training)
        op->vt->set_training(op, op->training);
fail:
    return st;
}

/* Called by ladle_op_destroy for layers. */
void ladle__layer_destroy(ladle_op *op) { layer_destroy_params(op); }

/* ladle_op_forward / ladle_op_adjoint on a layer. */
MPI_Comm ladle__layer_comm(const ladle_op *op)
{
    if (op == NULL)
        return MPI_COMM_NULL;
    if (op->comm != MPI_COMM_NULL)
        return op->comm;
    int n = op->vt->num_parts ? op->vt->num_parts(op) : 0;
    for (int i = 0; i < n; i++) {
        MPI_Comm c = ladle__layer_comm(op->vt->part_at(op, i));
        if (c != MPI_COMM_NULL)
            return c;
    }
    return MPI_COMM_NULL;
}

ladle_status ladle__layer_op_forward(ladle_op *op, const ladle_tensor *x, ladle_tensor *y)
{
    return ladle_layer_forward(op, NULL, x, y);
}

ladle_status ladle__layer_op_adjoint(ladle_op *op, const ladle_tensor *dy, ladle_tensor *dx)
{
    ladle_status st = LADLE_OK;
    int64_t n;
    LADLE_CHECK(op->linear, LADLE_ERR_UNSUPPORTED,
                "the %s layer is not linear in its input: use ladle_layer_backward",
                op->vt->name);
    LADLE_CALL(batch_of(op, dy, "dy", &n, __func__));
    LADLE_CALL(check_one(op, dy, "dy", op->y_ndim, op->y_shape, op->batched, n, __func__));
    LADLE_CALL(check_one(op, dx, "dx", op->x_ndim, op->x_shape, op->batched, n, __func__));
    LADLE_CHECK(!overlap(dx, dy) || (op->in_place && dx->data == dy->data), LADLE_ERR_ARG,
                "dx and dy overlap");
    LADLE_CALL(op->vt->layer_backward(op, NULL, dy, dx, n));
fail:
    return st;
}

ladle_status ladle_layer_init(ladle_op *op, ladle_init init, uint64_t seed)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(op);
    LADLE_CHECK(op->layer && op->weighted, LADLE_ERR_ARG,
                "the %s op has no weights to initialise", op->vt->name);
    ladle__pinfo info;
    ladle__param_info(op, 0, &info);
    LADLE_CALL(ladle__init_shard(ladle_op_param(op, 0), &info, init, op->fan_in, op->fan_out,
                                 seed, 0));
    if (ladle_op_num_params(op) > 1) {
        ladle__param_info(op, 1, &info);
        LADLE_CALL(ladle__init_shard(ladle_op_param(op, 1), &info, LADLE_INIT_DEFAULT,
                                     op->fan_in, op->fan_out, seed, 1));
    }
fail:
    return st;
}
