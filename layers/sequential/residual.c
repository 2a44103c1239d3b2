/*
 * The residual block y = x + f(x) (see ladle/layers.h): f's calls, then
 * the identity's share added. Its ctx is f's own ctx, held in ctx->impl.
 */
#include "src/op/make.h"
#include "src/op/op_impl.h"

static ladle_op *body(const ladle_op *op) { return op->impl; }

static ladle_status res_ctx_init(const ladle_op *op, ladle_ctx *ctx)
{
    ladle_ctx *inner = NULL;
    ladle_status st = ladle_ctx_create(body(op), &inner);
    ctx->impl = inner;
    return st;
}

static void res_ctx_fini(ladle_ctx *ctx)
{
    ladle_ctx *inner = ctx->impl;
    ladle_ctx_destroy(&inner);
    ctx->impl = NULL;
}

static size_t res_ctx_held(const ladle_ctx *ctx) { return ladle_ctx_bytes_held(ctx->impl); }

/* y = f(x) + x; the call's batch n may be below the created one. */
static ladle_status res_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    (void)n;
    LADLE_CALL(ladle_layer_forward(body(op), ctx ? ctx->impl : NULL, x, y));
    LADLE_CALL(ladle_add(y, x, y));
fail:
    return st;
}

/* dx = J_f^T dy + dy */
static ladle_status res_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                 ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    (void)n;
    if (dx == NULL)
        return LADLE_OK;
    if (ctx)
        LADLE_CALL(ladle_layer_backward(body(op), ctx->impl, dy, dx));
    else
        LADLE_CALL(ladle_op_adjoint(body(op), dy, dx));
    LADLE_CALL(ladle_add(dx, dy, dx));
fail:
    return st;
}

static ladle_status res_backward_weight(ladle_op *op, ladle_ctx *ctx,
                                        const ladle_tensor *dy, int64_t n)
{
    (void)n;
    return ladle_layer_backward_weight(body(op), ctx->impl, dy);
}

static int res_num_params(const ladle_op *op) { return ladle_op_num_params(body(op)); }

static ladle_tensor *res_param_at(const ladle_op *op, int i, int grad, const char **name)
{
    if (name)
        *name = ladle_op_param_name(body(op), i);
    return grad ? ladle_op_grad(body(op), i) : ladle_op_param(body(op), i);
}

static void res_set_training(ladle_op *op, int training)
{
    ladle_layer_set_training(body(op), training);
}

static void res_param_bound(ladle_op *op, int i)
{
    ladle_op *f = body(op);
    if (f->vt->param_bound)
        f->vt->param_bound(f, i);
}

static void res_param_info(const ladle_op *op, int i, ladle__pinfo *info)
{
    ladle__param_info(body(op), i, info);
}

static ladle_status res_sync_grads(ladle_op *op)
{
    return ladle_layer_sync_gradients(body(op));
}

static void res_destroy(ladle_op *op)
{
    ladle_op *f = body(op);
    ladle_op_destroy(&f);
    op->impl = NULL;
}

static int res_num_parts(const ladle_op *op) { return 1; }

static ladle_op *res_part_at(const ladle_op *op, int i) { return i == 0 ? body(op) : NULL; }

static const ladle_op_vtable residual_vt = {
    .kind = LADLE_OP_RESIDUAL,
    .name = "residual",
    .num_parts = res_num_parts,
    .part_at = res_part_at,
    .destroy = res_destroy,
    .layer_forward = res_forward,
    .layer_backward = res_backward,
    .layer_backward_weight = res_backward_weight,
    .ctx_init = res_ctx_init,
    .ctx_fini = res_ctx_fini,
    .ctx_held = res_ctx_held,
    .num_params = res_num_params,
    .param_at = res_param_at,
    .set_training = res_set_training,
    .param_bound = res_param_bound,
    .param_info = res_param_info,
    .sync_grads = res_sync_grads,
};

/* A distributed body's y must lie as its x does: the same global shape,
 * and on this rank the same box, so x + f(x) adds a rank's own blocks. */
static ladle_status same_blocks(const ladle_op *f)
{
    ladle_status st = LADLE_OK;
    int nd = ladle_layout_ndim(f->x_layout);
    int64_t xo[LADLE_MAX_NDIM], xs[LADLE_MAX_NDIM], yo[LADLE_MAX_NDIM], ys[LADLE_MAX_NDIM];
    char a[128], b[128];
    const int64_t *gx = ladle_layout_global_shape(f->x_layout),
                  *gy = ladle_layout_global_shape(f->y_layout);
    int same = nd == ladle_layout_ndim(f->y_layout);
    for (int d = 0; same && d < nd; d++)
        same = gx[d] == gy[d];
    LADLE_CHECK(same, LADLE_ERR_SHAPE,
                "the body takes a distributed %s but gives %s: x + f(x) needs one shape",
                ladle__fmt_shape64(a, sizeof a, nd, gx),
                ladle__fmt_shape64(b, sizeof b, ladle_layout_ndim(f->y_layout), gy));
    LADLE_CALL(ladle_layout_box(f->x_layout, LADLE_SELF, xo, xs));
    LADLE_CALL(ladle_layout_box(f->y_layout, LADLE_SELF, yo, ys));
    for (int d = 0; same && d < nd; d++)
        same = xo[d] == yo[d] && xs[d] == ys[d];
    LADLE_CHECK(same, LADLE_ERR_SHAPE,
                "the body's y lies on this rank at another box than its x: x + f(x) adds "
                "a rank's own blocks");
fail:
    return st;
}

/* This rank's verdict on the body. */
static ladle_status check_body(const ladle_op *f)
{
    ladle_status st = LADLE_OK;
    char a[128], b[128];
    LADLE_CHECK(f->layer && f->vt->layer_forward != NULL, LADLE_ERR_ARG,
                "the body (%s) is not a layer", f->vt->name);
    LADLE_CHECK(f->x_layout != NULL || f->batched, LADLE_ERR_ARG,
                "the body (%s) has no batch dimension", f->vt->name);
    LADLE_CHECK((f->x_layout == NULL) == (f->y_layout == NULL), LADLE_ERR_ARG,
                "the body (%s) has a layout for only one of x and y: x + f(x) needs both "
                "distributed alike (or neither)",
                f->vt->name);
    LADLE_CHECK(!f->x_ids, LADLE_ERR_ARG,
                "the body (%s) takes token ids: x + f(x) needs x of the layer's dtype",
                f->vt->name);
    int same = f->x_ndim == f->y_ndim;
    for (int d = 0; same && d < f->x_ndim; d++)
        same = f->x_shape[d] == f->y_shape[d];
    LADLE_CHECK(same, LADLE_ERR_SHAPE,
                "the body takes %s but gives %s: x + f(x) needs one shape",
                ladle__fmt_shape64(a, sizeof a, f->x_ndim, f->x_shape),
                ladle__fmt_shape64(b, sizeof b, f->y_ndim, f->y_shape));
    if (f->x_layout)
        LADLE_CALL(same_blocks(f));
fail:
    return st;
}

ladle_status ladle_residual_create(ladle_op **pbody, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    LADLE_NOT_NULL(pbody);
    LADLE_NOT_NULL(*pbody);
    LADLE_NOT_NULL(out);
    const ladle_op *f = *pbody;
    st = check_body(f);
    /* a distributed body's ranks agree, so a block refused on one of them
     * is refused on all */
    st = ladle__agree_code(ladle__layer_comm(f), st, __func__);
    LADLE_CALL(st);
    LADLE_CALL(ladle__layer_new(&residual_vt, f->dtype, f->be->device, f->x_ndim,
                                f->x_shape, f->y_ndim, f->y_shape, f->batched, &op,
                                __func__));
    if (f->x_layout) { /* y's block is x's: the add is this rank's alone */
        op->x_layout = ladle__layout_retain(f->x_layout);
        op->y_layout = ladle__layout_retain(f->y_layout);
    }
    op->impl = *pbody;
    op->linear = f->linear;
    op->training = f->training;
    *pbody = NULL;
    *out = op;
    return LADLE_OK;
fail:
    return st;
}

ladle_op *ladle_residual_body(const ladle_op *op)
{
    return op && op->vt->kind == LADLE_OP_RESIDUAL ? op->impl : NULL;
}
