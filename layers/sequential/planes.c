/* The layers of planes: one dispatch to the kernels (see planes_impl.h). */
#include "layers/sequential/layer_impl.h"
#include "layers/sequential/planes_impl.h"

ladle_status ladle__planes_forward(const ladle_op *op, const ladle__planes *p,
                                   int64_t planes, const void *x, void *y, void *saved)
{
    const ladle_backend *be = op->be;
    if (p->kind == LADLE__PLANES_ADAPTIVE_MAX)
        return be->fn->adaptive_max_forward(be, op->dtype, &p->g.adaptive, planes, x, y,
                                            saved);
    if (p->kind == LADLE__PLANES_ADAPTIVE)
        return be->fn->adaptive_pool_forward(be, op->dtype, &p->g.adaptive, planes, x, y);
    return be->fn->interp_forward(be, op->dtype, &p->g.interp, planes, x, y);
}

ladle_status ladle__planes_backward(const ladle_op *op, const ladle__planes *p,
                                    int64_t planes, const void *dy, void *dx,
                                    const void *saved)
{
    const ladle_backend *be = op->be;
    if (p->kind == LADLE__PLANES_ADAPTIVE_MAX)
        return be->fn->adaptive_max_backward(be, op->dtype, &p->g.adaptive, planes, dy,
                                             saved, dx);
    if (p->kind == LADLE__PLANES_ADAPTIVE)
        return be->fn->adaptive_pool_backward(be, op->dtype, &p->g.adaptive, planes, dy,
                                              dx);
    return be->fn->interp_backward(be, op->dtype, &p->g.interp, planes, dy, dx);
}

ladle_status ladle__planes_check_backend(const ladle_op *op, ladle__planes_kind kind,
                                         const char *func)
{
    const ladle_backend_table *fn = op->be->fn;
    static const char *const what[] = {[LADLE__PLANES_ADAPTIVE] = "adaptive pooling",
                                       [LADLE__PLANES_INTERP] = "interpolation",
                                       [LADLE__PLANES_ADAPTIVE_MAX] =
                                           "adaptive max pooling"};
    int has = kind == LADLE__PLANES_ADAPTIVE
                  ? fn->adaptive_pool_forward && fn->adaptive_pool_backward
              : kind == LADLE__PLANES_INTERP
                  ? fn->interp_forward && fn->interp_backward
                  : fn->adaptive_max_forward && fn->adaptive_max_backward;
    if (has)
        return LADLE_OK;
    return ladle__raise(LADLE_ERR_DEVICE, func, "the %s backend has no %s kernels",
                        fn->name, what[kind]);
}

void ladle__planes_boxes(ladle__planes *p, int64_t *box[4])
{
    int adaptive = p->kind != LADLE__PLANES_INTERP;
    box[0] = adaptive ? p->g.adaptive.x_off : p->g.interp.x_off;
    box[1] = adaptive ? p->g.adaptive.x_n : p->g.interp.x_n;
    box[2] = adaptive ? p->g.adaptive.y_off : p->g.interp.y_off;
    box[3] = adaptive ? p->g.adaptive.y_n : p->g.interp.y_n;
}

void ladle__planes_span(const ladle__planes *p, int a, int64_t lo, int64_t hi,
                        int64_t *x_lo, int64_t *x_hi)
{
    if (p->kind != LADLE__PLANES_INTERP) {
        const ladle_adaptive_geom *g = &p->g.adaptive;
        int64_t b, e;
        ladle__adaptive_window(g->in[a], g->out[a], lo, x_lo, &e);
        ladle__adaptive_window(g->in[a], g->out[a], hi, &b, &e);
        *x_hi = e - 1;
    } else {
        int64_t t[2];
        double w[2];
        ladle__interp_taps(&p->g.interp, a, lo, t, w);
        *x_lo = t[0];
        ladle__interp_taps(&p->g.interp, a, hi, t, w);
        *x_hi = t[1];
    }
}

typedef struct planes_layer {
    ladle__planes p;
    int64_t channels;
} planes_layer;

static ladle_status pl_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    const planes_layer *v = op->impl;
    return ladle__planes_forward(op, &v->p, n * v->channels, x->data, y->data,
                                 ctx ? ctx->buf : NULL);
}

static ladle_status pl_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    const planes_layer *v = op->impl;
    if (dx == NULL)
        return LADLE_OK;
    return ladle__planes_backward(op, &v->p, n * v->channels, dy->data, dx->data,
                                  ctx ? ctx->buf : NULL);
}

/* By kind: the kernels are the layer, so only the name differs. */
static const ladle_op_vtable planes_vt[] = {
    [LADLE__PLANES_ADAPTIVE] = {.kind = LADLE_OP_ADAPTIVE_POOL,
                                .name = "adaptive average pooling",
                                .destroy = ladle__layer_free_impl,
                                .layer_forward = pl_forward,
                                .layer_backward = pl_backward},
    [LADLE__PLANES_INTERP] = {.kind = LADLE_OP_INTERPOLATE,
                              .name = "interpolate",
                              .destroy = ladle__layer_free_impl,
                              .layer_forward = pl_forward,
                              .layer_backward = pl_backward},
    [LADLE__PLANES_ADAPTIVE_MAX] = {.kind = LADLE_OP_ADAPTIVE_MAX_POOL,
                                    .name = "adaptive max pooling",
                                    .destroy = ladle__layer_free_impl,
                                    .layer_forward = pl_forward,
                                    .layer_backward = pl_backward},
};

ladle_status ladle__planes_layer(const ladle__planes *p, ladle_dtype dtype,
                                 ladle_device device, int ndim, const int64_t *xs,
                                 const int64_t *ys, ladle_op **out, const char *func)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    planes_layer *v = ladle__calloc(1, sizeof *v);
    if (v == NULL)
        return ladle__raise(LADLE_ERR_ALLOC, func, "out of memory");
    v->p = *p;
    v->channels = xs[1];
    LADLE_CALL(ladle__layer_new(&planes_vt[p->kind], dtype, device, ndim, xs, ndim, ys, 1,
                                &op, func));
    op->impl = v;
    v = NULL;
    op->linear = ladle__planes_linear(p->kind);
    if (!op->linear) /* the max's winners, an int64 per output */
        op->ctx_bytes = (size_t)op->y_numel * sizeof(int64_t);
    LADLE_CALL(ladle__planes_check_backend(op, p->kind, func));
    *out = op;
    op = NULL;
fail:
    ladle_op_destroy(&op);
    ladle__free(v);
    return st;
}
