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
 * each times dloss, divided by the count for mean.
 */
#include <math.h>
#include <string.h>

#include "src/op/op_impl.h"
#include "layers/loss_impl.h"

typedef struct loss {
    ladle_loss_kind kind;
    ladle_reduction reduction;
    double smoothing;
    int classify;
    int64_t classes, inner; /* C and the product of S... (classification) */
    double count;           /* the mean's divisor when set (distributed losses) */
} loss;

static double get(const ladle_tensor *t, int64_t i)
{
    return t->dtype == LADLE_F32 ? ((const float *)t->data)[i] : ((const double *)t->data)[i];
}

static void put(ladle_tensor *t, int64_t i, double v)
{
    if (t->dtype == LADLE_F32)
        ((float *)t->data)[i] = (float)v;
    else
        ((double *)t->data)[i] = v;
}

/* The loss of element (regression) or of sample (n, s) (classification). */
static double regression_term(ladle_loss_kind kind, double x, double t)
{
    switch (kind) {
    case LADLE_LOSS_MSE:
        return (x - t) * (x - t);
    case LADLE_LOSS_L1:
        return fabs(x - t);
    default: /* BCE with logits, stable for any x */
        return fmax(x, 0.0) - x * t + log1p(exp(-fabs(x)));
    }
}

static double regression_grad(ladle_loss_kind kind, double x, double t)
{
    switch (kind) {
    case LADLE_LOSS_MSE:
        return 2 * (x - t);
    case LADLE_LOSS_L1:
        return (x > t) - (x < t);
    default:
        return (x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x))) - t;
    }
}

/* log-sum-exp of the C logits of one sample, stride inner apart */
static double lse(const ladle_tensor *x, int64_t base, int64_t c, int64_t inner)
{
    double mx = -INFINITY, s = 0;
    for (int64_t k = 0; k < c; k++)
        mx = fmax(mx, get(x, base + k * inner));
    for (int64_t k = 0; k < c; k++)
        s += exp(get(x, base + k * inner) - mx);
    return mx + log(s);
}

static double class_term(const loss *l, const ladle_tensor *x, int64_t base, int64_t label)
{
    int64_t c = l->classes, inner = l->inner;
    if (l->kind == LADLE_LOSS_NLL)
        return -get(x, base + label * inner);
    double z = lse(x, base, c, inner), sum = 0;
    for (int64_t k = 0; k < c; k++) {
        double q = (k == label ? 1 - l->smoothing : 0) + l->smoothing / (double)c;
        if (q != 0)
            sum += q * (get(x, base + k * inner) - z);
    }
    return -sum;
}

static ladle_status check_inputs(const ladle_op *op, const ladle_tensor *x,
                                 const ladle_tensor *t, int64_t *n, const char *func)
{
    const loss *l = op->impl;
    char a[128];
    if (x == NULL || t == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "%s is NULL", x ? "target" : "input");
    if (x->dtype != op->dtype)
        return ladle__raise(LADLE_ERR_DTYPE, func, "input is %s, the loss %s",
                            ladle_dtype_name(x->dtype), ladle_dtype_name(op->dtype));
    if (x->device != LADLE_CPU || t->device != LADLE_CPU)
        return ladle__raise(LADLE_ERR_DEVICE, func,
                            "the input is on %s and the target on %s: the loss runs on cpu",
                            ladle_device_name(x->device), ladle_device_name(t->device));
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
    if (l->classify)
        for (int64_t i = 0; i < t->numel; i++) {
            int64_t c = ((const int64_t *)t->data)[i];
            if (c < 0 || c >= l->classes)
                return ladle__raise(LADLE_ERR_ARG, func,
                                    "label %lld at %lld is outside 0..%lld", (long long)c,
                                    (long long)i, (long long)(l->classes - 1));
        }
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
    if (v->device != LADLE_CPU)
        return ladle__raise(LADLE_ERR_DEVICE, func, "%s is on %s: the loss runs on cpu",
                            role, ladle_device_name(v->device));
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

static double divisor(const ladle_op *op, const ladle_tensor *x)
{
    const loss *l = op->impl;
    if (l->reduction != LADLE_REDUCE_MEAN)
        return 1.0;
    if (l->count > 0)
        return l->count;
    return l->classify ? (double)(x->numel / l->classes) : (double)x->numel;
}

static const char *kind_name(ladle_loss_kind kind)
{
    static const char *names[] = {"MSE", "L1", "cross-entropy", "NLL", "BCE-with-logits"};
    return kind >= LADLE_LOSS_MSE && kind <= LADLE_LOSS_BCE_WITH_LOGITS ? names[kind] : "?";
}

/* The loss into out: every term for reduction none, else the mean or sum. */
static void evaluate(const ladle_op *op, const ladle_tensor *input,
                     const ladle_tensor *target, ladle_tensor *out)
{
    const loss *l = op->impl;
    double total = 0;
    if (l->classify) {
        int64_t samples = input->numel / l->classes;
        for (int64_t s = 0; s < samples; s++) {
            int64_t base = (s / l->inner) * l->classes * l->inner + s % l->inner;
            double v = class_term(l, input, base, ((const int64_t *)target->data)[s]);
            if (l->reduction == LADLE_REDUCE_NONE)
                put(out, s, v);
            total += v;
        }
    } else {
        for (int64_t i = 0; i < input->numel; i++) {
            double v = regression_term(l->kind, get(input, i), get(target, i));
            if (l->reduction == LADLE_REDUCE_NONE)
                put(out, i, v);
            total += v;
        }
    }
    if (l->reduction != LADLE_REDUCE_NONE)
        put(out, 0, total / divisor(op, input));
}

/* The first value of out (as stored, in its dtype) that is not finite, or
 * -1. */
static int64_t first_non_finite(const ladle_tensor *out)
{
    for (int64_t i = 0; i < out->numel; i++)
        if (!isfinite(get(out, i)))
            return i;
    return -1;
}

/* LADLE_ERR_NUMERIC when a value of the loss's output is not finite. */
static ladle_status check_finite(const ladle_op *op, const ladle_tensor *out,
                                 const char *func)
{
    const loss *l = op->impl;
    int64_t bad = first_non_finite(out);
    if (bad < 0)
        return LADLE_OK;
    if (l->reduction == LADLE_REDUCE_NONE)
        return ladle__raise(LADLE_ERR_NUMERIC, func,
                            "the %s loss of element %lld is %g: an input is not finite or "
                            "its terms overflow %s",
                            kind_name(l->kind), (long long)bad, get(out, bad),
                            ladle_dtype_name(op->dtype));
    return ladle__raise(LADLE_ERR_NUMERIC, func,
                        "the %s loss is %g: an input is not finite or its terms overflow %s",
                        kind_name(l->kind), get(out, 0), ladle_dtype_name(op->dtype));
}

ladle_status ladle_loss_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *input,
                                const ladle_tensor *target, ladle_tensor *out)
{
    ladle_status st = LADLE_OK;
    int64_t n = 0;
    LADLE_NOT_NULL(op);
    if (op->vt->loss_forward)
        return op->vt->loss_forward(op, ctx, input, target, out);
    LADLE_CHECK(op->vt->name != NULL && strcmp(op->vt->name, "loss") == 0, LADLE_ERR_ARG,
                "the %s op is not a loss", op->vt->name);
    LADLE_CHECK(ctx == NULL || ctx->op == op, LADLE_ERR_ARG, "the ctx belongs to another op");
    LADLE_CALL(check_inputs(op, input, target, &n, __func__));
    LADLE_CALL(check_loss_tensor(op, out, n, "loss", __func__));
    evaluate(op, input, target, out);
    if (ctx) {
        ctx->x = input;
        ctx->target = target;
        ctx->batch = n;
        ctx->ready = 1;
    }
    /* an infinite input (or one whose loss overflows) makes the value
     * non-finite: reported as such, not passed off as a loss */
    st = check_finite(op, out, __func__);
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
    LADLE_CHECK(dinput->device == LADLE_CPU, LADLE_ERR_DEVICE,
                "dinput is on %s: the loss runs on cpu", ladle_device_name(dinput->device));
    LADLE_CHECK(same && ladle_tensor_is_contiguous(dinput), LADLE_ERR_SHAPE,
                "dinput must be contiguous and have the input's shape");
    const loss *l = op->impl;
    double scale = l->reduction == LADLE_REDUCE_NONE ? 1.0 : get(dloss, 0) / divisor(op, x);
    if (!l->classify) {
        for (int64_t i = 0; i < x->numel; i++) {
            double g = l->reduction == LADLE_REDUCE_NONE ? get(dloss, i) : scale;
            put(dinput, i, g * regression_grad(l->kind, get(x, i), get(t, i)));
        }
        return LADLE_OK;
    }
    int64_t samples = x->numel / l->classes, c = l->classes, inner = l->inner;
    for (int64_t s = 0; s < samples; s++) {
        int64_t base = (s / inner) * c * inner + s % inner;
        int64_t label = ((const int64_t *)t->data)[s];
        double g = l->reduction == LADLE_REDUCE_NONE ? get(dloss, s) : scale;
        double z = l->kind == LADLE_LOSS_CROSS_ENTROPY ? lse(x, base, c, inner) : 0;
        for (int64_t k = 0; k < c; k++) {
            int64_t i = base + k * inner;
            double v;
            if (l->kind == LADLE_LOSS_NLL)
                v = k == label ? -1.0 : 0.0;
            else
                v = exp(get(x, i) - z) - ((k == label ? 1 - l->smoothing : 0) +
                                          l->smoothing / (double)c);
            put(dinput, i, g * v);
        }
    }
fail:
    return st;
}

static void loss_destroy(ladle_op *op) { ladle__free(op->impl); }

static const ladle_op_vtable loss_vt = {.name = "loss", .destroy = loss_destroy};

ladle_status ladle__loss_set_divisor(ladle_op *op, double count)
{
    if (op == NULL || op->vt != &loss_vt)
        return ladle__raise(LADLE_ERR_ARG, "ladle__loss_set_divisor", "not a loss");
    ((loss *)op->impl)->count = count;
    return LADLE_OK;
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

ladle_status ladle_loss_create(ladle_loss_kind kind, ladle_reduction reduction,
                               double label_smoothing, int ndim, const int64_t input_shape[],
                               ladle_dtype dtype, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    loss *l = NULL;
    int64_t y_shape[LADLE_MAX_NDIM];
    int y_ndim = 0;
    LADLE_NOT_NULL(out);
    LADLE_CHECK(kind >= LADLE_LOSS_MSE && kind <= LADLE_LOSS_BCE_WITH_LOGITS, LADLE_ERR_ARG,
                "unknown loss %d", (int)kind);
    LADLE_CHECK(reduction >= LADLE_REDUCE_MEAN && reduction <= LADLE_REDUCE_NONE,
                LADLE_ERR_ARG, "unknown reduction %d", (int)reduction);
    int classify = kind == LADLE_LOSS_CROSS_ENTROPY || kind == LADLE_LOSS_NLL;
    LADLE_CALL(ladle__layer_check_args(__func__, dtype, ndim, input_shape, classify ? 2 : 1));
    LADLE_CHECK(label_smoothing >= 0 && label_smoothing <= 1 &&
                    (label_smoothing == 0 || kind == LADLE_LOSS_CROSS_ENTROPY),
                LADLE_ERR_ARG, "label smoothing %g needs cross entropy and [0, 1]",
                label_smoothing);
    LADLE_CHECK(!classify || input_shape[1] >= 1, LADLE_ERR_SHAPE, "no classes");
    l = ladle__calloc(1, sizeof *l);
    LADLE_CHECK(l != NULL, LADLE_ERR_ALLOC, "out of memory");
    l->kind = kind;
    l->reduction = reduction;
    l->smoothing = label_smoothing;
    l->classify = classify;
    l->classes = classify ? input_shape[1] : 1;
    l->inner = 1;
    for (int d = 2; classify && d < ndim; d++)
        l->inner *= input_shape[d];
    if (reduction == LADLE_REDUCE_NONE)
        for (int d = 0; d < ndim; d++)
            if (!(classify && d == 1))
                y_shape[y_ndim++] = input_shape[d];
    LADLE_CALL(ladle__layer_new(&loss_vt, dtype, ndim, input_shape, y_ndim, y_shape, 1, &op));
    op->impl = l;
    *out = op;
    return LADLE_OK;
fail:
    ladle__free(l);
    ladle_op_destroy(&op);
    return st;
}
