/*
 * Losses. Regression losses compare an input with a target of its shape;
 * classification losses take logits (cross entropy) or log-probabilities
 * (NLL) of shape N x C x S... and i64 labels of shape N x S.... Sums are
 * accumulated in double. The backward recomputes what it needs from the
 * saved input and target:
 *   MSE              d/dx = 2 (x - t)
 *   L1               d/dx = sign(x - t)
 *   BCE with logits  d/dx = sigmoid(x) - t
 *   cross entropy    d/dx_c = softmax(x)_c - q_c,  q = (1 - e) onehot + e / C
 *   NLL              d/dx_c = -[c == label]
 * each times dloss, divided by the count for mean. Classification losses
 * may weigh the classes (w) and ignore one label, as PyTorch does: the
 * per-sample loss becomes (1 - e) w_t (-log p_t) + e / C sum_c w_c
 * (-log p_c), an ignored sample's loss and gradient are 0, and the mean
 * divides by the sum of w_t over the samples not ignored, a sum that
 * depends on the labels and so is taken at each forward (the label scan
 * that checks their range) and kept in the ctx for the backward. The layer
 * checks and plans; the loss slots compute.
 */
#include <math.h>
#include <string.h>

#include "layers/sequential/loss_impl.h"
#include "layers/sequential/layer_impl.h"

typedef struct loss {
    ladle_loss_kind kind;
    ladle_reduction reduction;
    double smoothing;
    int classify;
    int64_t classes, inner; /* C and the product of S... (classification) */
    double count;           /* the mean's divisor when set (distributed losses) */
    double *weight;         /* C class weights (host), or NULL */
    double *weight_dev;     /* the same in device memory, where the host cannot touch it */
    int64_t ignore_index;
    int ignore;             /* labels equal to ignore_index count for nothing */
    int weighted;           /* weights or ignore: the mean divides by the labels' weight */
    int deferred;           /* a distributed block of a weighted mean: divide by 1, the
                             * distributed loss divides by the global weight */
} loss;

/* The mean's divisor depends on the labels. */
static int label_divisor(const loss *l)
{
    return l->weighted && l->reduction == LADLE_REDUCE_MEAN;
}

static ladle_loss_plan desc_of(const ladle_op *op, int64_t numel);

/* Checks the labels' range, and for a weighted loss sums the labels'
 * weights into *wsum (1 otherwise). */
static ladle_status check_labels(const ladle_op *op, const ladle_tensor *t, double *wsum,
                                 const char *func)
{
    const loss *l = op->impl;
    int64_t bad = -1, c = 0;
    ladle_status st;
    *wsum = 1;
    if (l->weighted) {
        ladle_loss_plan d = desc_of(op, 0);
        st = op->be->fn->loss_weight_sum(op->be, &d, t->numel, t->data, wsum, &bad);
    } else {
        st = op->be->fn->find_outside(op->be, t->numel, t->data, 0, l->classes - 1, &bad);
    }
    if (st == LADLE_OK && bad >= 0)
        st = ladle__tensor_get_i64(t, bad, &c);
    if (st != LADLE_OK)
        return st;
    if (bad >= 0 && l->ignore)
        return ladle__raise(LADLE_ERR_ARG, func,
                            "label %lld at %lld is outside 0..%lld and is not the ignored "
                            "%lld",
                            (long long)c, (long long)bad, (long long)(l->classes - 1),
                            (long long)l->ignore_index);
    if (bad >= 0)
        return ladle__raise(LADLE_ERR_ARG, func, "label %lld at %lld is outside 0..%lld",
                            (long long)c, (long long)bad, (long long)(l->classes - 1));
    return LADLE_OK;
}

static ladle_status check_inputs(const ladle_op *op, const ladle_tensor *x,
                                 const ladle_tensor *t, int64_t *n, double *wsum,
                                 const char *func)
{
    const loss *l = op->impl;
    char a[128];
    if (x == NULL || t == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "%s is NULL", x ? "target" : "input");
    if (x->dtype != op->dtype)
        return ladle__raise(LADLE_ERR_DTYPE, func, "input is %s, the loss %s",
                            ladle_dtype_name(x->dtype), ladle_dtype_name(op->dtype));
    if (x->device != op->be->device || t->device != op->be->device)
        return ladle__raise(LADLE_ERR_DEVICE, func,
                            "the input is on %s and the target on %s: the loss runs on %s",
                            ladle_device_name(x->device), ladle_device_name(t->device),
                            ladle_device_name(op->be->device));
    int ok = x->ndim == op->x_ndim && x->shape[0] <= op->x_shape[0];
    for (int d = 1; ok && d < x->ndim; d++)
        ok = x->shape[d] == op->x_shape[d];
    if (!ok || !ladle_tensor_is_contiguous(x))
        return ladle__raise(LADLE_ERR_SHAPE, func, "input shape %s does not fit the loss",
                            ladle__fmt_shape64(a, sizeof a, x->ndim, x->shape));
    *n = x->shape[0];
    ladle_dtype want = l->classify ? LADLE_I64 : op->dtype;
    if (t->dtype != want)
        return ladle__raise(LADLE_ERR_DTYPE, func, "target is %s, expected %s",
                            ladle_dtype_name(t->dtype), ladle_dtype_name(want));
    /* the target's shape: the input's, without dimension 1 for labels */
    ok = t->ndim == x->ndim - l->classify && ladle_tensor_is_contiguous(t);
    for (int d = 0, e = 0; ok && d < x->ndim; d++) {
        if (l->classify && d == 1)
            continue;
        ok = t->shape[e++] == x->shape[d];
    }
    if (!ok)
        return ladle__raise(LADLE_ERR_SHAPE, func, "target shape %s does not fit the input",
                            ladle__fmt_shape64(a, sizeof a, t->ndim, t->shape));
    *wsum = 1;
    if (l->classify)
        return check_labels(op, t, wsum, func);
    return LADLE_OK;
}

static ladle_status check_loss_tensor(const ladle_op *op, const ladle_tensor *v, int64_t n,
                                      const char *role, const char *func)
{
    const loss *l = op->impl;
    if (v == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "%s is NULL", role);
    if (v->dtype != op->dtype)
        return ladle__raise(LADLE_ERR_DTYPE, func, "%s is %s, the loss %s", role,
                            ladle_dtype_name(v->dtype), ladle_dtype_name(op->dtype));
    if (v->device != op->be->device)
        return ladle__raise(LADLE_ERR_DEVICE, func, "%s is on %s: the loss runs on %s", role,
                            ladle_device_name(v->device), ladle_device_name(op->be->device));
    if (l->reduction != LADLE_REDUCE_NONE) {
        if (v->numel != 1)
            return ladle__raise(LADLE_ERR_SHAPE, func, "%s must hold one value", role);
        return LADLE_OK;
    }
    int ok = v->ndim == op->y_ndim && ladle_tensor_is_contiguous(v);
    for (int d = 0; ok && d < v->ndim; d++)
        ok = v->shape[d] == (d == 0 ? n : op->y_shape[d]);
    if (!ok)
        return ladle__raise(LADLE_ERR_SHAPE, func, "%s has the wrong shape for reduction none",
                            role);
    return LADLE_OK;
}

static const char *kind_name(ladle_loss_kind kind)
{
    static const char *names[] = {"MSE", "L1", "cross-entropy", "NLL", "BCE-with-logits"};
    return kind >= LADLE_LOSS_MSE && kind <= LADLE_LOSS_BCE_WITH_LOGITS ? names[kind] : "?";
}

/* The loss's view for its slots, for an input of numel elements. */
static ladle_loss_plan desc_of(const ladle_op *op, int64_t numel)
{
    const loss *l = op->impl;
    ladle_loss_plan d = {.kind = l->kind,
                         .reduction = l->reduction,
                         .smoothing = l->smoothing,
                         .classes = l->classes,
                         .inner = l->inner,
                         .numel = numel,
                         .weight = l->weight,
                         .ignore_index = l->ignore_index,
                         .ignore = l->ignore,
                         .weight_dev = l->weight_dev};
    d.divisor = l->reduction != LADLE_REDUCE_MEAN ? 1.0
                : l->count > 0                    ? l->count
                : l->classify                     ? (double)(numel / l->classes)
                                                  : (double)numel;
    return d;
}

/* LADLE_ERR_NUMERIC when a value of the loss's output is not finite. */
static ladle_status check_finite(const ladle_op *op, const ladle_tensor *out, double wsum,
                                 const char *func)
{
    ladle_status st = LADLE_OK;
    const loss *l = op->impl;
    int64_t bad = -1;
    double v = 0;
    LADLE_CALL(op->be->fn->find_non_finite(op->be, op->dtype, out->numel, out->data, &bad));
    if (bad < 0)
        return LADLE_OK;
    LADLE_CALL(ladle_tensor_get(out, bad, &v));
    if (label_divisor(l) && !l->deferred && wsum == 0)
        return ladle__raise(LADLE_ERR_NUMERIC, func,
                            "the %s loss is %g: every sample is ignored or weighs 0, so "
                            "its mean is 0/0",
                            kind_name(l->kind), v);
    if (l->reduction == LADLE_REDUCE_NONE)
        return ladle__raise(LADLE_ERR_NUMERIC, func,
                            "the %s loss of element %lld is %g: an input is not finite or "
                            "its terms overflow %s",
                            kind_name(l->kind), (long long)bad, v, ladle_dtype_name(op->dtype));
    return ladle__raise(LADLE_ERR_NUMERIC, func,
                        "the %s loss is %g: an input is not finite or its terms overflow %s",
                        kind_name(l->kind), v, ladle_dtype_name(op->dtype));
fail:
    return st;
}

/* The forward of a sequential loss; *wsum gets the labels' weight (1
 * without weights). */
static ladle_status forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *input,
                            const ladle_tensor *target, ladle_tensor *out, double *wsum,
                            const char *func)
{
    ladle_status st = LADLE_OK;
    const loss *l = op->impl;
    int64_t n = 0;
    LADLE_CHECK(op->vt->kind == LADLE_OP_LOSS, LADLE_ERR_ARG, "the %s op is not a loss",
                op->vt->name);
    LADLE_CHECK(ctx == NULL || ctx->op == op, LADLE_ERR_ARG, "the ctx belongs to another op");
    LADLE_CALL(check_inputs(op, input, target, &n, wsum, func));
    LADLE_CALL(check_loss_tensor(op, out, n, "loss", func));
    ladle_loss_plan d = desc_of(op, input->numel);
    if (label_divisor(l))
        d.divisor = l->deferred ? 1.0 : *wsum;
    LADLE_CALL(op->be->fn->loss_forward(op->be, op->dtype, &d, input->data, target->data,
                                        out->data));
    if (ctx) {
        ctx->x = input;
        ctx->target = target;
        ctx->batch = n;
        ctx->divisor = d.divisor;
        ctx->ready = 1;
    }
    /* an infinite input (or one whose loss overflows) makes the value
     * non-finite: reported as such, not passed off as a loss */
    st = check_finite(op, out, *wsum, func);
fail:
    return st;
}

ladle_status ladle_loss_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *input,
                                const ladle_tensor *target, ladle_tensor *out)
{
    ladle_status st = LADLE_OK;
    double wsum = 0;
    LADLE_NOT_NULL(op);
    if (op->vt->loss_forward)
        return op->vt->loss_forward(op, ctx, input, target, out);
    st = forward(op, ctx, input, target, out, &wsum, __func__);
fail:
    return st;
}

ladle_status ladle_loss_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dloss,
                                 ladle_tensor *dinput)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(op);
    if (op->vt->loss_backward)
        return op->vt->loss_backward(op, ctx, dloss, dinput);
    LADLE_NOT_NULL(ctx);
    LADLE_CHECK(ctx->op == op, LADLE_ERR_ARG, "the ctx belongs to another op");
    LADLE_CHECK(ctx->ready, LADLE_ERR_STATE, "no forward has run with this ctx");
    LADLE_CALL(check_loss_tensor(op, dloss, ctx->batch, "dloss", __func__));
    LADLE_NOT_NULL(dinput);
    const ladle_tensor *x = ctx->x, *t = ctx->target;
    int same = dinput->ndim == x->ndim;
    for (int d = 0; same && d < x->ndim; d++)
        same = dinput->shape[d] == x->shape[d];
    LADLE_CHECK(dinput->dtype == op->dtype, LADLE_ERR_DTYPE, "dinput is %s, the loss %s",
                ladle_dtype_name(dinput->dtype), ladle_dtype_name(op->dtype));
    LADLE_CHECK(dinput->device == op->be->device, LADLE_ERR_DEVICE,
                "dinput is on %s: the loss runs on %s", ladle_device_name(dinput->device),
                ladle_device_name(op->be->device));
    LADLE_CHECK(same && ladle_tensor_is_contiguous(dinput), LADLE_ERR_SHAPE,
                "dinput must be contiguous and have the input's shape");
    ladle_loss_plan d = desc_of(op, x->numel);
    if (label_divisor(op->impl))
        d.divisor = ctx->divisor;
    LADLE_CALL(op->be->fn->loss_backward(op->be, op->dtype, &d, x->data, t->data, dloss->data,
                                         dinput->data));
fail:
    return st;
}

static const ladle__part loss_parts[] = {LADLE__PART_HOST(loss, weight),
                                         LADLE__PART_DEVICE(loss, weight_dev), LADLE__PARTS_END};

static void loss_destroy(ladle_op *op) { ladle__parts_free(op->impl, loss_parts, op->be); }

/* The class weights copied to a device whose kernels cannot read host
 * memory, once (the host copy stays for the copy to read). */
static ladle_status weights_to_device(ladle_op *op)
{
    loss *l = op->impl;
    if (l->weight == NULL || op->be->host_access)
        return LADLE_OK;
    size_t bytes = (size_t)l->classes * sizeof *l->weight;
    void *dev = NULL;
    ladle_status st = op->be->fn->alloc(op->be, bytes, &dev);
    if (st != LADLE_OK)
        return st;
    l->weight_dev = dev;
    return op->be->fn->to_device(op->be, bytes, l->weight, dev);
}

static const ladle_op_vtable loss_vt = {.kind = LADLE_OP_LOSS, .name = "loss",
                                        .destroy = loss_destroy};

ladle_status ladle__loss_set_divisor(ladle_op *op, double count)
{
    if (op == NULL || op->vt != &loss_vt)
        return ladle__raise(LADLE_ERR_ARG, "ladle__loss_set_divisor", "not a loss");
    loss *l = op->impl;
    if (label_divisor(l))
        l->deferred = 1;
    else
        l->count = count;
    return LADLE_OK;
}

int ladle__loss_label_divisor(const ladle_op *op)
{
    return op != NULL && op->vt == &loss_vt && label_divisor(op->impl);
}

ladle_status ladle__loss_forward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *input,
                                        const ladle_tensor *target, ladle_tensor *out,
                                        double *wsum)
{
    if (op == NULL || op->vt != &loss_vt)
        return ladle__raise(LADLE_ERR_ARG, "ladle_loss_forward", "not a loss");
    return forward(op, ctx, input, target, out, wsum, "ladle_loss_forward");
}

void ladle__loss_ctx_divisor(ladle_ctx *ctx, double divisor)
{
    if (ctx != NULL)
        ctx->divisor = divisor;
}

ladle_status ladle__loss_target(const ladle_op *op, ladle_dtype *dtype, int *ndim,
                                int64_t shape[], int *reduction)
{
    if (op == NULL || op->vt != &loss_vt)
        return ladle__raise(LADLE_ERR_ARG, "ladle__loss_target", "not a loss");
    const loss *l = op->impl;
    *dtype = l->classify ? LADLE_I64 : op->dtype;
    *ndim = 0;
    for (int d = 0; d < op->x_ndim; d++)
        if (!(l->classify && d == 1))
            shape[(*ndim)++] = op->x_shape[d];
    *reduction = (int)l->reduction;
    return LADLE_OK;
}

void ladle_loss_desc_init(ladle_loss_desc *d, ladle_loss_kind kind, ladle_reduction reduction)
{
    if (!LADLE_DESC_START(d))
        return;
    d->kind = kind;
    d->reduction = reduction;
    d->ignore_index = LADLE_LOSS_NO_IGNORE;
}

/* The descriptor's checks (every rank of a distributed loss makes them
 * alike). */
ladle_status ladle__loss_check_desc(const ladle_loss_desc *d, const char *func)
{
    if (d == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "d is NULL");
    if (d->size != sizeof *d)
        return ladle__raise(LADLE_ERR_ARG, func,
                            "d->size is %zu, not this library's sizeof(ladle_loss_desc) %zu: "
                            "set it with ladle_loss_desc_init",
                            d->size, sizeof *d);
    if (!(d->kind >= LADLE_LOSS_MSE && d->kind <= LADLE_LOSS_BCE_WITH_LOGITS))
        return ladle__raise(LADLE_ERR_ARG, func, "unknown loss %d", (int)d->kind);
    if (!(d->reduction >= LADLE_REDUCE_MEAN && d->reduction <= LADLE_REDUCE_NONE))
        return ladle__raise(LADLE_ERR_ARG, func, "unknown reduction %d", (int)d->reduction);
    int classify = d->kind == LADLE_LOSS_CROSS_ENTROPY || d->kind == LADLE_LOSS_NLL;
    if (!(d->label_smoothing >= 0 && d->label_smoothing <= 1 &&
          (d->label_smoothing == 0 || d->kind == LADLE_LOSS_CROSS_ENTROPY)))
        return ladle__raise(LADLE_ERR_ARG, func,
                            "label smoothing %g needs cross entropy and [0, 1]",
                            d->label_smoothing);
    if (!classify && (d->weights != NULL || d->num_weights != 0 ||
                      d->ignore_index != LADLE_LOSS_NO_IGNORE))
        return ladle__raise(LADLE_ERR_ARG, func,
                            "class weights and ignore_index need cross entropy or NLL");
    if ((d->weights == NULL) != (d->num_weights == 0))
        return ladle__raise(LADLE_ERR_ARG, func, "weights %s but num_weights is %lld",
                            d->weights ? "given" : "NULL", (long long)d->num_weights);
    for (int64_t k = 0; d->weights != NULL && k < d->num_weights; k++)
        if (!isfinite(d->weights[k]))
            return ladle__raise(LADLE_ERR_ARG, func, "class weight %lld is %g",
                                (long long)k, d->weights[k]);
    /* the distributed losses' flags; on one rank they change nothing */
    if (d->flags & ~(unsigned)LADLE_CHECKED)
        return ladle__raise(LADLE_ERR_ARG, func, "unknown flags 0x%x", d->flags);
    return LADLE_OK;
}

ladle_status ladle_loss_create(const ladle_loss_desc *d, int ndim,
                               const int64_t input_shape[], ladle_dtype dtype,
                               ladle_device device, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    loss *l = NULL;
    int64_t y_shape[LADLE_MAX_NDIM];
    int y_ndim = 0;
    LADLE_NOT_NULL(out);
    LADLE_CALL(ladle__loss_check_desc(d, __func__));
    int classify = d->kind == LADLE_LOSS_CROSS_ENTROPY || d->kind == LADLE_LOSS_NLL;
    LADLE_CALL(ladle__layer_check_args(__func__, dtype, ndim, input_shape, classify ? 2 : 1));
    LADLE_CHECK(!classify || input_shape[1] >= 1, LADLE_ERR_SHAPE, "no classes");
    LADLE_CHECK(d->weights == NULL || d->num_weights == input_shape[1], LADLE_ERR_SHAPE,
                "%lld class weights for %lld classes", (long long)d->num_weights,
                (long long)(classify ? input_shape[1] : 0));
    l = ladle__calloc(1, sizeof *l);
    LADLE_CHECK(l != NULL, LADLE_ERR_ALLOC, "out of memory");
    l->kind = d->kind;
    l->reduction = d->reduction;
    l->smoothing = d->label_smoothing;
    l->classify = classify;
    l->classes = classify ? input_shape[1] : 1;
    l->inner = 1;
    for (int dim = 2; classify && dim < ndim; dim++)
        l->inner *= input_shape[dim];
    l->ignore = d->ignore_index != LADLE_LOSS_NO_IGNORE;
    l->ignore_index = d->ignore_index;
    l->weighted = l->ignore || d->weights != NULL;
    if (d->weights != NULL) {
        l->weight = ladle__calloc((size_t)d->num_weights, sizeof *l->weight);
        LADLE_CHECK(l->weight != NULL, LADLE_ERR_ALLOC, "out of memory");
        memcpy(l->weight, d->weights, (size_t)d->num_weights * sizeof *l->weight);
    }
    if (d->reduction == LADLE_REDUCE_NONE)
        for (int dim = 0; dim < ndim; dim++)
            if (!(classify && dim == 1))
                y_shape[y_ndim++] = input_shape[dim];
    LADLE_CALL(ladle__layer_new(&loss_vt, dtype, device, ndim, input_shape, y_ndim, y_shape, 1, &op,
                                __func__));
    op->impl = l;
    l = NULL;
    LADLE_CHECK(!((loss *)op->impl)->weighted || op->be->fn->loss_weight_sum != NULL,
                LADLE_ERR_DEVICE,
                "the %s backend has no kernels for class weights or ignore_index",
                op->be->fn->name);
    LADLE_CALL(weights_to_device(op));
    *out = op;
    return LADLE_OK;
fail:
    ladle__parts_free(l, loss_parts, NULL);
    ladle_op_destroy(&op);
    return st;
}

/* 0.1's name (include/ladle/deprecated.h). */
ladle_status ladle_loss_create_ex(const ladle_loss_desc *d, int ndim,
                                  const int64_t input_shape[], ladle_dtype dtype,
                                  ladle_device device, ladle_op **out)
{
    return ladle_loss_create(d, ndim, input_shape, dtype, device, out);
}
