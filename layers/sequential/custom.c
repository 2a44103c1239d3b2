/*
 * Custom ops: a layer whose forward, adjoint (or backward) and weight
 * gradient are the caller's callbacks (ladle/custom.h). Everything around
 * the callbacks -- argument checks, contexts, parameters, the agreement of
 * the ranks -- is the machinery every built-in layer uses, so the adjoint
 * and gradient tests, containers and checkpoints take a custom op as they
 * take a built-in one.
 */
#include <stdio.h>
#include <string.h>

#include "layers/sequential/layer_impl.h"
#include "src/op/make.h"

/* A callback's reason for failing (ladle_custom_fail), read by the call
 * that ran it. Per thread, like the error message, and for the same reason:
 * it answers "why did my call fail" for the calling thread only, so ladle
 * keeps no global mutable state. */
#define REASON_CAP 900
static _Thread_local char reason[REASON_CAP];

int ladle_custom_fail(const char *msg)
{
    if (msg == NULL)
        reason[0] = '\0';
    else
        snprintf(reason, sizeof reason, "%s", msg);
    return 1;
}

typedef struct custom {
    ladle_op_vtable vt; /* this op's own, so that messages carry the user's name */
    char name[96];
    int linear;
    int (*forward)(void *user, const ladle_tensor *x, ladle_tensor *y, void *saved);
    int (*adjoint)(void *user, const ladle_tensor *dy, ladle_tensor *dx, void *saved);
    int (*backward_weight)(void *user, const ladle_tensor *dy, void *saved);
    size_t saved_bytes;
    void *scratch; /* the saved state of a nonlinear op's context-free forwards */
    int nparams;
    ladle_tensor *const *params;
    ladle_tensor *const *grads;
    const char *const *names;
    int owner; /* this rank writes the parameters to checkpoints */
    void *user;
    void (*destroy)(void *user);
    int armed; /* created: destroy is the op's to call */
} custom;

void ladle_custom_desc_init(ladle_custom_desc *d)
{
    if (!LADLE_DESC_START(d))
        return;
    d->dtype = LADLE_F64;
    d->device = LADLE_CPU;
}

/* The outcome of one callback: LADLE_ERR_CALLBACK with its reason when it
 * returned nonzero. On a distributed op the members then agree: the lowest
 * failing rank's message goes to every member, so all of them fail alike. */
static ladle_status settle(ladle_op *op, int rc, const char *which, const char *func)
{
    const custom *c = op->impl;
    ladle_status st = LADLE_OK;
    char text[1024];
    int me = 0, size = 1, mine, top = 0;
    if (rc != 0)
        st = ladle__raise(LADLE_ERR_CALLBACK, func,
                          "the %s callback of the custom op '%s' returned %d%s%s", which,
                          c->name, rc, reason[0] ? ": " : " (it gave no reason)", reason);
    reason[0] = '\0';
    if (op->comm == MPI_COMM_NULL)
        return st;
    LADLE_MPI(MPI_Comm_rank(op->comm, &me));
    LADLE_MPI(MPI_Comm_size(op->comm, &size));
    mine = rc != 0 ? size - me : 0;
    LADLE_MPI(ladle__allreduce(&mine, &top, 1, MPI_INT, MPI_MAX, op->comm));
    if (top == 0)
        return LADLE_OK;
    snprintf(text, sizeof text, "%s", me == size - top ? ladle_error_message() : "");
    {
        MPI_Request req;
        LADLE_MPI(MPI_Ibcast(text, (int)sizeof text, MPI_CHAR, size - top, op->comm, &req));
        LADLE_MPI(ladle__wait(&req));
    }
    if (rc == 0)
        st = ladle__raise(LADLE_ERR_CALLBACK, func,
                          "the %s callback of the custom op '%s' failed on another rank: %s",
                          which, c->name, text);
    return st;
fail:
    return st;
}

/* The scratch a call hands its callback (ladle/custom.h says when). */
static void *saved_of(const ladle_op *op, ladle_ctx *ctx)
{
    const custom *c = op->impl;
    if (c->saved_bytes == 0)
        return NULL;
    if (ctx != NULL)
        return ctx->impl;
    return c->linear ? NULL : c->scratch;
}

static ladle_status custom_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                   ladle_tensor *y, int64_t n)
{
    custom *c = op->impl;
    (void)n;
    reason[0] = '\0';
    int rc = c->forward(c->user, x, y, saved_of(op, ctx));
    return settle(op, rc, "forward", ctx ? "ladle_layer_forward" : "ladle_op_forward");
}

static ladle_status custom_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                    ladle_tensor *dx, int64_t n)
{
    custom *c = op->impl;
    (void)n;
    if (dx == NULL) /* the input gradient is not wanted */
        return LADLE_OK;
    reason[0] = '\0';
    int rc = c->adjoint(c->user, dy, dx, saved_of(op, ctx));
    return settle(op, rc, c->linear ? "adjoint" : "backward",
                  ctx ? "ladle_layer_backward" : "ladle_op_adjoint");
}

static ladle_status custom_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                           int64_t n)
{
    custom *c = op->impl;
    (void)n;
    reason[0] = '\0';
    int rc = c->backward_weight(c->user, dy, saved_of(op, ctx));
    return settle(op, rc, "backward_weight", "ladle_layer_backward_weight");
}

static ladle_status custom_ctx_init(const ladle_op *op, ladle_ctx *ctx)
{
    const custom *c = op->impl;
    if (c->saved_bytes == 0)
        return LADLE_OK;
    ctx->impl = ladle__calloc(1, c->saved_bytes);
    return ctx->impl ? LADLE_OK : ladle__raise(LADLE_ERR_ALLOC, "ladle_ctx_create",
                                               "out of memory");
}

static int custom_num_params(const ladle_op *op) { return ((const custom *)op->impl)->nparams; }

static ladle_tensor *custom_param_at(const ladle_op *op, int i, int grad, const char **name)
{
    const custom *c = op->impl;
    if (name)
        *name = c->names[i];
    return grad ? c->grads[i] : c->params[i];
}

/* A distributed op's parameters are whole on every rank; its first rank
 * writes them. */
static void custom_param_info(const ladle_op *op, int i, ladle__pinfo *info)
{
    const custom *c = op->impl;
    const ladle_tensor *t = c->params[i];
    info->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++)
        info->global[d] = t->shape[d];
    info->owner = c->owner;
}

static void custom_free(custom *c)
{
    if (c == NULL)
        return;
    if (c->armed && c->destroy)
        c->destroy(c->user);
    ladle__free(c->scratch);
    ladle__free(c);
}

static void custom_destroy(ladle_op *op) { custom_free(op->impl); }

static const ladle_op_vtable custom_vt = {
    .kind = LADLE_OP_CUSTOM,
    .name = "custom",
    .destroy = custom_destroy,
    .layer_forward = custom_forward,
    .layer_backward = custom_backward,
    .layer_backward_weight = custom_backward_weight,
    .ctx_init = custom_ctx_init,
    .ctx_fini = ladle__layer_ctx_free_impl,
    .num_params = custom_num_params,
    .param_at = custom_param_at,
};

static ladle_status check_params(const ladle_custom_desc *d, const char *f)
{
    if (d->num_params < 0)
        return ladle__raise(LADLE_ERR_ARG, f, "num_params is %d", d->num_params);
    if (d->num_params == 0)
        return LADLE_OK;
    if (d->params == NULL || d->grads == NULL || d->param_names == NULL)
        return ladle__raise(LADLE_ERR_NULL, f,
                            "%d parameters but params, grads or param_names is NULL",
                            d->num_params);
    if (d->backward_weight == NULL)
        return ladle__raise(LADLE_ERR_NULL, f,
                            "backward_weight is NULL, but the op has %d parameters",
                            d->num_params);
    for (int i = 0; i < d->num_params; i++) {
        const ladle_tensor *p = d->params[i], *g = d->grads[i];
        const char *nm = d->param_names[i];
        if (p == NULL || g == NULL || nm == NULL)
            return ladle__raise(LADLE_ERR_NULL, f, "parameter %d, its gradient or its name is NULL",
                                i);
        for (int j = 0; j < i; j++)
            if (strcmp(nm, d->param_names[j]) == 0)
                return ladle__raise(LADLE_ERR_ARG, f, "parameters %d and %d are both named '%s'",
                                    j, i, nm);
        for (int k = 0; k < 2; k++) {
            const ladle_tensor *t = k ? g : p;
            const char *role = k ? "the gradient of parameter" : "parameter";
            if (t->dtype != d->dtype)
                return ladle__raise(LADLE_ERR_DTYPE, f, "%s '%s' is %s, the op %s", role, nm,
                                    ladle_dtype_name(t->dtype), ladle_dtype_name(d->dtype));
            if (t->device != d->device)
                return ladle__raise(LADLE_ERR_DEVICE, f, "%s '%s' is on %s, the op on %s", role,
                                    nm, ladle_device_name(t->device),
                                    ladle_device_name(d->device));
            if (!ladle_tensor_is_contiguous(t))
                return ladle__raise(LADLE_ERR_ARG, f, "%s '%s' is not contiguous", role, nm);
        }
        int same = p->ndim == g->ndim;
        for (int k = 0; same && k < p->ndim; k++)
            same = p->shape[k] == g->shape[k];
        if (!same)
            return ladle__raise(LADLE_ERR_SHAPE, f, "the gradient of '%s' has another shape",
                                nm);
    }
    return LADLE_OK;
}

/* A shape given beside a layout must be this rank's box of it. */
static ladle_status check_beside(const char *f, const char *role, const ladle_layout *l,
                                 int ndim, const int64_t *shape)
{
    char a[160], b[160];
    int64_t box[LADLE_MAX_NDIM];
    if (ndim == 0 && shape == NULL)
        return LADLE_OK;
    int n = ladle_layout_ndim(l), same = ndim == n && shape != NULL;
    ladle_layout_box(l, LADLE_SELF, NULL, box);
    for (int k = 0; same && k < n; k++)
        same = shape[k] == box[k];
    if (!same)
        return ladle__raise(LADLE_ERR_SHAPE, f,
                            "%s_shape %s disagrees with this rank's box %s of %s_layout "
                            "(leave it unset with a layout)",
                            role, shape ? ladle__fmt_shape64(a, sizeof a, ndim, shape) : "NULL",
                            ladle__fmt_shape64(b, sizeof b, n, box), role);
    return LADLE_OK;
}

/* The checks of the descriptor that every rank makes alone. */
static ladle_status validate(const ladle_custom_desc *d, int dist, const char *f)
{
    ladle_status st = LADLE_OK;
    int64_t numel;
    if (d->forward == NULL)
        return ladle__raise(LADLE_ERR_NULL, f, "the forward callback is NULL");
    if (d->adjoint == NULL)
        return ladle__raise(LADLE_ERR_NULL, f, "the %s callback is NULL",
                            d->linear ? "adjoint" : "adjoint (the backward)");
    if (!ladle__is_real(d->dtype))
        return ladle__raise(LADLE_ERR_DTYPE, f, "dtype %s is not f32 or f64",
                            ladle_dtype_name(d->dtype));
    if (dist) {
        LADLE_CALL(check_beside(f, "x", d->x_layout, d->x_ndim, d->x_shape));
        LADLE_CALL(check_beside(f, "y", d->y_layout, d->y_ndim, d->y_shape));
    } else {
        LADLE_CALL(ladle__check_shape(f, d->x_ndim, d->x_shape, &numel));
        LADLE_CALL(ladle__check_shape(f, d->y_ndim, d->y_shape, &numel));
    }
    if (d->batched) {
        int xn = dist ? ladle_layout_ndim(d->x_layout) : d->x_ndim;
        int yn = dist ? ladle_layout_ndim(d->y_layout) : d->y_ndim;
        if (xn < 1 || yn < 1)
            return ladle__raise(LADLE_ERR_ARG, f,
                                "a batched op needs a batch dimension in x and y (x has %d "
                                "dimensions, y %d)", xn, yn);
    }
    LADLE_CALL(check_params(d, f));
fail:
    return st;
}

/* The impl from d, not yet armed (a failed creation leaves user alone). */
static ladle_status make_impl(const ladle_custom_desc *d, custom **out, const char *f)
{
    custom *c = ladle__calloc(1, sizeof *c);
    if (c == NULL)
        return ladle__raise(LADLE_ERR_ALLOC, f, "out of memory");
    snprintf(c->name, sizeof c->name, "%s", d->name ? d->name : "custom");
    c->vt = custom_vt;
    c->vt.name = c->name;
    if (d->x_layout != NULL)
        c->vt.param_info = custom_param_info;
    c->linear = d->linear != 0;
    c->forward = d->forward;
    c->adjoint = d->adjoint;
    c->backward_weight = d->backward_weight;
    c->saved_bytes = d->saved_bytes;
    c->nparams = d->num_params;
    c->params = d->params;
    c->grads = d->grads;
    c->names = d->param_names;
    c->owner = 1;
    c->user = d->user;
    c->destroy = d->destroy;
    if (!c->linear && c->saved_bytes > 0) {
        c->scratch = ladle__calloc(1, c->saved_bytes);
        if (c->scratch == NULL) {
            custom_free(c);
            return ladle__raise(LADLE_ERR_ALLOC, f, "out of memory");
        }
    }
    *out = c;
    return LADLE_OK;
}

static uint64_t desc_hash(const ladle_custom_desc *d)
{
    int64_t v[4] = {(int64_t)d->dtype, d->linear != 0, d->num_params, d->batched != 0};
    uint64_t h = ladle__hash(LADLE_HASH_INIT, v, sizeof v);
    h = ladle__layout_hash(h, d->x_layout);
    return ladle__layout_hash(h, d->y_layout);
}

static ladle_status create_dist(const ladle_custom_desc *d, ladle_status local, ladle_op **out)
{
    const char *f = "ladle_custom_create";
    ladle_status st = LADLE_OK;
    ladle__make m = {f, d->dtype, d->device, 0, MPI_COMM_NULL, NULL, NULL};
    ladle_op *op = NULL;
    custom *c = NULL;
    const ladle_partition *parts[2] = {ladle_layout_partition(d->x_layout),
                                       ladle_layout_partition(d->y_layout)};
    LADLE_CALL(ladle__make_open(&m, 2, parts, local, desc_hash(d)));
    m.lx = ladle__layout_retain(d->x_layout);
    m.ly = ladle__layout_retain(d->y_layout);
    local = make_impl(d, &c, f);
    if (local == LADLE_OK && m.comm != MPI_COMM_NULL) {
        int me = 0;
        MPI_Comm_rank(m.comm, &me);
        c->owner = me == 0;
    } else if (local == LADLE_OK) {
        c->owner = 0;
    }
    local = ladle__make_layer(&m, local, &c->vt, c, NULL, &op);
    if (local == LADLE_OK) {
        c = NULL;
        op->linear = d->linear != 0;
        op->batched = d->batched != 0;
    }
    st = ladle__make_end(&m, &op, local, out);
    if (st == LADLE_OK)
        ((custom *)(*out)->impl)->armed = 1;
fail:
    custom_free(c);
    ladle__make_close(&m);
    return st;
}

ladle_status ladle_custom_create(const ladle_custom_desc *d, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    custom *c = NULL;
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(out);
    LADLE_CHECK(d->size == sizeof *d, LADLE_ERR_ARG,
                "d->size is %zu, not this library's sizeof(ladle_custom_desc) %zu: set it "
                "with ladle_custom_desc_init (a program built against another ladle?)",
                d->size, sizeof *d);
    int dist = d->x_layout != NULL || d->y_layout != NULL;
    LADLE_CHECK(!dist || (d->x_layout != NULL && d->y_layout != NULL), LADLE_ERR_ARG,
                "%s_layout is NULL but %s_layout is not: give both layouts (a distributed "
                "op) or neither (a rank-local op over x_shape and y_shape)",
                d->x_layout ? "y" : "x", d->x_layout ? "x" : "y");
    if (dist)
        return create_dist(d, validate(d, 1, __func__), out);
    LADLE_CALL(validate(d, 0, __func__));
    LADLE_CALL(make_impl(d, &c, __func__));
    LADLE_CALL(ladle__layer_new(&c->vt, d->dtype, d->device, d->x_ndim, d->x_shape, d->y_ndim,
                                d->y_shape, d->batched != 0, &op, __func__));
    op->impl = c;
    c->armed = 1;
    c = NULL;
    op->linear = d->linear != 0;
    *out = op;
    return LADLE_OK;
fail:
    custom_free(c);
    return st;
}
