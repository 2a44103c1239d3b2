/*
 * Losses on the CPU. Every term and sum is computed in double, whatever the
 * dtype; the classification losses walk a sample's C classes stride inner
 * apart.
 */
#include <math.h>

#include "src/backends/cpu/cpu.h"
#include "src/backends/cpu/fastmath.h"
#include "src/backends/cpu/simd.h"

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

/* Contiguous classes (inner 1, the usual layout of logits): the maximum in
 * LL lanes of the dtype and the sum of exponentials in LL lanes of double,
 * vectorised (a running sum would stay scalar). The exponentials are
 * fastmath.h's: f32's in f32 at full vector width (a few ulps, 0 below
 * e^-87, as the softmax rows), f64's within an ulp of the C library's. The
 * general loops below call the C library once a logit (24 ns a logit for
 * forward + backward). */
#define LL 32
#define ROW_MAX(T, x, c, mx)                                                               \
    do {                                                                                   \
        T m_[LL];                                                                          \
        for (int l = 0; l < LL; l++)                                                       \
            m_[l] = (T)-INFINITY;                                                          \
        int64_t k_ = 0;                                                                    \
        for (; k_ + LL <= (c); k_ += LL)                                                   \
            for (int l = 0; l < LL; l++)                                                   \
                m_[l] = (x)[k_ + l] > m_[l] ? (x)[k_ + l] : m_[l]; /* NaN ignored */       \
        mx = (T)-INFINITY;                                                                 \
        for (int l = 0; l < LL; l++)                                                       \
            mx = m_[l] > mx ? m_[l] : mx;                                                  \
        for (; k_ < (c); k_++)                                                             \
            mx = (x)[k_] > mx ? (x)[k_] : mx;                                              \
    } while (0)

/* sum = the sum over the row of EXPD(x_k, mx), in LL lanes of double;
 * KEEP(k, v) is handed each exponential v (the backward keeps them in dx). */
#define ROW_EXP_SUM(T, EXPD, x, c, mx, KEEP, sum)                                          \
    do {                                                                                   \
        double s_[LL] = {0};                                                               \
        int64_t k_ = 0;                                                                    \
        for (; k_ + LL <= (c); k_ += LL)                                                   \
            for (int l = 0; l < LL; l++) {                                                 \
                T v_ = EXPD((x)[k_ + l], mx);                                              \
                KEEP(k_ + l, v_);                                                          \
                s_[l] += (double)v_;                                                       \
            }                                                                              \
        sum = 0;                                                                           \
        for (int l = 0; l < LL; l++)                                                       \
            sum += s_[l];                                                                  \
        for (; k_ < (c); k_++) {                                                           \
            T v_ = EXPD((x)[k_], mx);                                                      \
            KEEP(k_, v_);                                                                  \
            sum += (double)v_;                                                             \
        }                                                                                  \
    } while (0)
#define KEEP_NONE(k, v) ((void)0)
#define KEEP_IN_DX(k, v) (dx[k] = (v))

/* The log-sum-exp of a row. */
#define LOSS_ROW(T, EXPD, NAME)                                                            \
    LADLE_KERNEL static double NAME(const T *x, int64_t c)                                 \
    {                                                                                      \
        T mx;                                                                              \
        double sum;                                                                        \
        ROW_MAX(T, x, c, mx);                                                              \
        ROW_EXP_SUM(T, EXPD, x, c, mx, KEEP_NONE, sum);                                    \
        return (double)mx + log(sum);                                                      \
    }
LOSS_ROW(float, ladle_exp_diff_f32, lse_row_f32)
LOSS_ROW(double, ladle_exp_diff_f64, lse_row_f64)

/* Cross entropy's gradient over contiguous classes without class weights,
 * dx_k = g (p_k - q_k), p the softmax of the row and q the smoothed target
 * (target_q's expression: e / C, and 1 - e more at the label). One
 * exponential a logit: e^(x_k - max) goes into dx as it is summed, then dx
 * is scaled by g / sum in place (the row is in cache) and the label's q
 * taken off its own entry. Storing the exponentials in the dtype costs
 * nothing in the cancellation of p - 1 at the label: where the label is the
 * row's maximum its exponential is 1, exactly, and elsewhere p <= 1/2. */
#define CE_BACK_ROW(T, EXPD, NAME)                                                         \
    LADLE_KERNEL static void NAME(const T *x, int64_t c, int64_t label, double e,          \
                                  double g, T *dx)                                         \
    {                                                                                      \
        T mx;                                                                              \
        double sum;                                                                        \
        ROW_MAX(T, x, c, mx);                                                              \
        ROW_EXP_SUM(T, EXPD, x, c, mx, KEEP_IN_DX, sum);                                   \
        double ec = e / (double)c, gi = g / sum, gq = g * ec, el = (double)dx[label];      \
        for (int64_t k = 0; k < c; k++)                                                    \
            dx[k] = (T)((double)dx[k] * gi - gq);                                          \
        dx[label] = (T)(el * gi - g * (1 - e + ec));                                       \
    }
CE_BACK_ROW(float, ladle_exp_diff_f32, ce_back_row_f32)
CE_BACK_ROW(double, ladle_exp_diff_f64, ce_back_row_f64)

/* The vocabulary-parallel loss's slots (backend.h, revision 9). */
LADLE_KERNEL static void exp_rows_f32(int64_t rows, int64_t len, const float *x,
                                      const double *shift, const double *scale, float *y)
{
    for (int64_t r = 0; r < rows; r++) {
        double s = shift[r], a = scale[r];
        for (int64_t c = 0; c < len; c++)
            y[r * len + c] = (float)(a * (double)ladle_exp_shift_f32(x[r * len + c], s));
    }
}

LADLE_KERNEL static void exp_rows_f64(int64_t rows, int64_t len, const double *x,
                                      const double *shift, const double *scale, double *y)
{
    for (int64_t r = 0; r < rows; r++) {
        double s = shift[r], a = scale[r];
        for (int64_t c = 0; c < len; c++)
            y[r * len + c] = a * ladle_exp_f64(x[r * len + c] - s);
    }
}

ladle_status ladle__cpu_exp_rows(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                                 int64_t len, const void *x, const double *shift,
                                 const double *scale, void *y)
{
    (void)be;
    LADLE_CPU_TYPED(dtype == LADLE_F32, exp_rows, (rows, len, x, shift, scale, y));
    return LADLE_OK;
}

ladle_status ladle__cpu_lse_rows(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                                 int64_t len, const void *x, double *lse)
{
    (void)be;
    for (int64_t r = 0; r < rows; r++) {
        double z = dtype == LADLE_F32 ? lse_row_f32((const float *)x + r * len, len)
                                      : lse_row_f64((const double *)x + r * len, len);
        if (isnan(z)) { /* NaN, +inf, or a row of -inf (the vector loops' max skips NaN) */
            double mx = -INFINITY;
            for (int64_t c = 0; c < len && !isnan(z = get(dtype, x, r * len + c)); c++)
                mx = fmax(mx, z);
            z = isnan(z) || mx != -INFINITY ? NAN : mx;
        }
        lse[r] = z;
    }
    return LADLE_OK;
}

/* log-sum-exp of the C logits of one sample, stride inner apart */
static double lse(ladle_dtype dt, const void *x, int64_t base, int64_t c, int64_t inner)
{
    if (inner == 1)
        return dt == LADLE_F32 ? lse_row_f32((const float *)x + base, c)
                               : lse_row_f64((const double *)x + base, c);
    double mx = -INFINITY, s = 0;
    for (int64_t k = 0; k < c; k++)
        mx = fmax(mx, get(dt, x, base + k * inner));
    for (int64_t k = 0; k < c; k++)
        s += exp(get(dt, x, base + k * inner) - mx);
    return mx + log(s);
}

static int ignored(const ladle_loss_plan *l, int64_t label)
{
    return l->ignore && label == l->ignore_index;
}

static double class_w(const ladle_loss_plan *l, int64_t k)
{
    return l->weight ? l->weight[k] : 1.0;
}

/* The smoothed target's weight q_k of class k for a sample of label, and
 * (weights only) the sum of q over the classes, which is 1 without weights. */
static double target_q(const ladle_loss_plan *l, int64_t k, int64_t label)
{
    double e = l->smoothing, c = (double)l->classes;
    if (l->weight == NULL)
        return (k == label ? 1 - e : 0) + e / c;
    return (k == label ? (1 - e) * l->weight[label] : 0) + e * l->weight[k] / c;
}

static double target_q_sum(const ladle_loss_plan *l, int64_t label)
{
    if (l->weight == NULL)
        return 1.0;
    double w = 0;
    for (int64_t k = 0; k < l->classes; k++)
        w += l->weight[k];
    return (1 - l->smoothing) * l->weight[label] + l->smoothing * w / (double)l->classes;
}

/* The loss of one sample (classification). */
static double class_term(const ladle_loss_plan *l, ladle_dtype dt, const void *x, int64_t base,
                         int64_t label)
{
    int64_t c = l->classes, inner = l->inner;
    if (ignored(l, label))
        return 0.0;
    if (l->kind == LADLE_LOSS_NLL)
        return -class_w(l, label) * get(dt, x, base + label * inner);
    double z = lse(dt, x, base, c, inner), sum = 0;
    if (l->smoothing == 0 && l->weight == NULL) /* q is 1 at the label, else 0 */
        return -(get(dt, x, base + label * inner) - z);
    for (int64_t k = 0; k < c; k++) {
        double q = target_q(l, k, label);
        if (q != 0)
            sum += q * (get(dt, x, base + k * inner) - z);
    }
    return -sum;
}

static int classify(const ladle_loss_plan *l)
{
    return l->kind == LADLE_LOSS_CROSS_ENTROPY || l->kind == LADLE_LOSS_NLL;
}

ladle_status ladle__cpu_loss_forward(const ladle_backend *be, ladle_dtype dtype,
                                    const ladle_loss_plan *l, const void *x,
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
                                     const ladle_loss_plan *l, const void *x,
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
        if (ignored(l, label)) {
            for (int64_t k = 0; k < c; k++)
                put(dtype, dx, base + k * inner, 0.0);
            continue;
        }
        if (l->kind == LADLE_LOSS_CROSS_ENTROPY && l->weight == NULL && inner == 1) {
            if (dtype == LADLE_F32)
                ce_back_row_f32((const float *)x + base, c, label, l->smoothing, g,
                                (float *)dx + base);
            else
                ce_back_row_f64((const double *)x + base, c, label, l->smoothing, g,
                                (double *)dx + base);
            continue;
        }
        double z = l->kind == LADLE_LOSS_CROSS_ENTROPY ? lse(dtype, x, base, c, inner) : 0;
        double qs = l->kind == LADLE_LOSS_CROSS_ENTROPY ? target_q_sum(l, label) : 0;
        for (int64_t k = 0; k < c; k++) {
            int64_t i = base + k * inner;
            double v;
            if (l->kind == LADLE_LOSS_NLL)
                v = k == label ? -class_w(l, label) : 0.0;
            else if (l->weight == NULL)
                v = exp(get(dtype, x, i) - z) - target_q(l, k, label);
            else
                v = exp(get(dtype, x, i) - z) * qs - target_q(l, k, label);
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

ladle_status ladle__cpu_loss_weight_sum(const ladle_backend *be, const ladle_loss_plan *l,
                                        int64_t n, const int64_t *labels, double *sum,
                                        int64_t *first)
{
    (void)be;
    double w = 0;
    *first = -1;
    for (int64_t i = 0; i < n; i++) {
        if (ignored(l, labels[i]))
            continue;
        if (labels[i] < 0 || labels[i] >= l->classes) {
            *first = i;
            break;
        }
        w += class_w(l, labels[i]);
    }
    *sum = w;
    return LADLE_OK;
}
