/*
 * Losses on the CPU. Every term and sum is computed in double, whatever the
 * dtype; the classification losses walk a sample's C classes stride inner
 * apart.
 */
#include <math.h>

#include "src/backends/cpu/cpu.h"

static double get(ladle_dtype dtype, const void *p, int64_t i)
{
    return dtype == LADLE_F32 ? ((const float *)p)[i] : ((const double *)p)[i];
}

static void put(ladle_dtype dtype, void *p, int64_t i, double v)
{
    if (dtype == LADLE_F32)
        ((float *)p)[i] = (float)v;
    else
        ((double *)p)[i] = v;
}

/* The loss of one element (regression). */
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
static double lse(ladle_dtype dt, const void *x, int64_t base, int64_t c, int64_t inner)
{
    double mx = -INFINITY, s = 0;
    for (int64_t k = 0; k < c; k++)
        mx = fmax(mx, get(dt, x, base + k * inner));
    for (int64_t k = 0; k < c; k++)
        s += exp(get(dt, x, base + k * inner) - mx);
    return mx + log(s);
}

/* The loss of one sample (classification). */
static double class_term(const ladle_loss_desc *l, ladle_dtype dt, const void *x, int64_t base,
                         int64_t label)
{
    int64_t c = l->classes, inner = l->inner;
    if (l->kind == LADLE_LOSS_NLL)
        return -get(dt, x, base + label * inner);
    double z = lse(dt, x, base, c, inner), sum = 0;
    for (int64_t k = 0; k < c; k++) {
        double q = (k == label ? 1 - l->smoothing : 0) + l->smoothing / (double)c;
        if (q != 0)
            sum += q * (get(dt, x, base + k * inner) - z);
    }
    return -sum;
}

static int classify(const ladle_loss_desc *l)
{
    return l->kind == LADLE_LOSS_CROSS_ENTROPY || l->kind == LADLE_LOSS_NLL;
}

ladle_status ladle__cpu_loss_forward(const ladle_backend *be, ladle_dtype dtype,
                                    const ladle_loss_desc *l, const void *x,
                                    const void *target, void *out)
{
    (void)be;
    double total = 0;
    int none = l->reduction == LADLE_REDUCE_NONE;
    if (classify(l)) {
        const int64_t *labels = target;
        int64_t samples = l->numel / l->classes;
        for (int64_t s = 0; s < samples; s++) {
            int64_t base = (s / l->inner) * l->classes * l->inner + s % l->inner;
            double v = class_term(l, dtype, x, base, labels[s]);
            if (none)
                put(dtype, out, s, v);
            total += v;
        }
    } else {
        for (int64_t i = 0; i < l->numel; i++) {
            double v = regression_term(l->kind, get(dtype, x, i), get(dtype, target, i));
            if (none)
                put(dtype, out, i, v);
            total += v;
        }
    }
    if (!none)
        put(dtype, out, 0, total / l->divisor);
    return LADLE_OK;
}

ladle_status ladle__cpu_loss_backward(const ladle_backend *be, ladle_dtype dtype,
                                     const ladle_loss_desc *l, const void *x,
                                     const void *target, const void *dloss, void *dx)
{
    (void)be;
    int none = l->reduction == LADLE_REDUCE_NONE;
    double scale = none ? 1.0 : get(dtype, dloss, 0) / l->divisor;
    if (!classify(l)) {
        for (int64_t i = 0; i < l->numel; i++) {
            double g = none ? get(dtype, dloss, i) : scale;
            put(dtype, dx, i,
                g * regression_grad(l->kind, get(dtype, x, i), get(dtype, target, i)));
        }
        return LADLE_OK;
    }
    const int64_t *labels = target;
    int64_t samples = l->numel / l->classes, c = l->classes, inner = l->inner;
    for (int64_t s = 0; s < samples; s++) {
        int64_t base = (s / inner) * c * inner + s % inner;
        int64_t label = labels[s];
        double g = none ? get(dtype, dloss, s) : scale;
        double z = l->kind == LADLE_LOSS_CROSS_ENTROPY ? lse(dtype, x, base, c, inner) : 0;
        for (int64_t k = 0; k < c; k++) {
            int64_t i = base + k * inner;
            double v;
            if (l->kind == LADLE_LOSS_NLL)
                v = k == label ? -1.0 : 0.0;
            else
                v = exp(get(dtype, x, i) - z) -
                    ((k == label ? 1 - l->smoothing : 0) + l->smoothing / (double)c);
            put(dtype, dx, i, g * v);
        }
    }
    return LADLE_OK;
}

ladle_status ladle__cpu_find_outside(const ladle_backend *be, int64_t n, const int64_t *v,
                                    int64_t lo, int64_t hi, int64_t *first)
{
    (void)be;
    *first = -1;
    for (int64_t i = 0; i < n; i++)
        if (v[i] < lo || v[i] > hi) {
            *first = i;
            break;
        }
    return LADLE_OK;
}

ladle_status ladle__cpu_find_non_finite(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                       const void *x, int64_t *first)
{
    (void)be;
    *first = -1;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(get(dtype, x, i))) {
            *first = i;
            break;
        }
    return LADLE_OK;
}
