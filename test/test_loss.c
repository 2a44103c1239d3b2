/* Losses: values derived by hand, finite differences for every kind and
 * reduction, label smoothing, smaller batches, bad input; class weights and
 * ignore_index against loops written here, by hand and by finite
 * differences. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* L = sum w_i loss_i (none) or the scalar loss, at input x. */
static double evaluate(ladle_op *op, const ladle_tensor *x, const ladle_tensor *t,
                       ladle_tensor *out, const ladle_tensor *w)
{
    ladle_loss_forward(op, NULL, x, t, out);
    double s = 0;
    for (int64_t i = 0; i < ladle_tensor_numel(out); i++)
        s += lt_get(out, i) * (w ? lt_get(w, i) : 1.0);
    return s;
}

/* The loss's dx against central differences of evaluate, with dl a
 * random weight per element (reduction none, which evaluate applies too)
 * or 1: the worst relative error. */
static double gradient_error(ladle_op *op, ladle_reduction red, ladle_tensor *x,
                             const ladle_tensor *t, ladle_tensor *dx)
{
    int ynd;
    int64_t ys[LADLE_MAX_NDIM];
    ladle_op_y_shape(op, &ynd, ys);
    ladle_tensor *out = lt_tensor(LADLE_F64, ynd, ys), *w = NULL;
    ladle_tensor *dl = lt_tensor(LADLE_F64, ynd, ys);
    if (red == LADLE_REDUCE_NONE) {
        w = lt_tensor(LADLE_F64, ynd, ys);
        LT_OK(ladle_tensor_fill_random(w, 4, 2));
        LT_OK(ladle_tensor_copy(dl, w));
    } else {
        LT_OK(ladle_tensor_fill(dl, 1.0));
    }
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_ctx_create(op, &ctx));
    LT_OK(ladle_loss_forward(op, ctx, x, t, out));
    LT_OK(ladle_loss_backward(op, ctx, dl, dx));
    double worst = 0;
    for (int64_t i = 0; i < ladle_tensor_numel(x); i++) {
        double v = lt_get(x, i), h = 1e-6;
        lt_set(x, i, v + h);
        double lp = evaluate(op, x, t, out, w);
        lt_set(x, i, v - h);
        double lm = evaluate(op, x, t, out, w);
        lt_set(x, i, v);
        double fd = (lp - lm) / (2 * h), an = lt_get(dx, i);
        worst = fmax(worst, fabs(fd - an) / fmax(1e-3, fmax(fabs(fd), fabs(an))));
    }
    ladle_ctx_destroy(&ctx);
    LT_DESTROY(&out, &dl, &w);
    return worst;
}

static void check_gradient(ladle_loss_kind kind, ladle_reduction red, double smooth, int ndim,
                           const int64_t *shape, const char *what)
{
    ladle_op *op = NULL;
    LT_OK(ladle_loss_create(LT_LOSS(kind, red, smooth, 0), ndim, shape, LADLE_F64,
                            lt_device(), &op));
    int classify = kind == LADLE_LOSS_CROSS_ENTROPY || kind == LADLE_LOSS_NLL;
    ladle_tensor *x = lt_op_tensor(op, 0), *dx = lt_op_tensor(op, 0);
    int tnd = 0;
    int64_t ts[LADLE_MAX_NDIM];
    for (int d = 0; d < ndim; d++)
        if (!(classify && d == 1))
            ts[tnd++] = shape[d];
    ladle_tensor *t = lt_tensor(classify ? LADLE_I64 : LADLE_F64, tnd, ts);
    LT_OK(ladle_tensor_fill_random(x, 4, 0));
    if (classify) {
        for (int64_t i = 0; i < ladle_tensor_numel(t); i++)
            lt_set(t, i, (i * 7 + 3) % shape[1]);
    } else {
        LT_OK(ladle_tensor_fill_random(t, 4, 1));
        if (kind == LADLE_LOSS_BCE_WITH_LOGITS) /* targets in [0, 1] */
            for (int64_t i = 0; i < ladle_tensor_numel(t); i++)
                lt_set(t, i, 0.5 + 0.5 * lt_get(t, i));
    }
    double worst = gradient_error(op, red, x, t, dx);
    LT_ASSERT(worst < 1e-6, "%s: worst gradient error %.2e", what, worst);
    LT_DESTROY(&x, &dx, &t);
    ladle_op_destroy(&op);
}

START_TEST(gradients)
{
    int64_t flat[2] = {4, 5}, img[4] = {2, 3, 2, 2};
    const char *names[5] = {"mse", "l1", "cross-entropy", "nll", "bce"};
    char what[64];
    for (int k = 0; k <= LADLE_LOSS_BCE_WITH_LOGITS; k++)
        for (int r = 0; r <= LADLE_REDUCE_NONE; r++) {
            snprintf(what, sizeof what, "%s reduction %d", names[k], r);
            check_gradient((ladle_loss_kind)k, (ladle_reduction)r, 0, 2, flat, what);
            if (k == LADLE_LOSS_CROSS_ENTROPY || k == LADLE_LOSS_NLL)
                check_gradient((ladle_loss_kind)k, (ladle_reduction)r, 0, 4, img, what);
        }
    check_gradient(LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN, 0.1, 2, flat, "smoothed");
    check_gradient(LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_NONE, 0.3, 4, img, "smoothed 2-D");
}
END_TEST

/* Cross entropy over long rows of contiguous classes (the vectorised path:
 * 1000 and 37 classes), f32 and f64, without and with smoothing, a -inf
 * logit off the label (without smoothing): per-sample losses and gradients against loops
 * written here with the C library's exp and log. f64 within 1e-13
 * (relative to the loss, and to each gradient's terms), f32 within its
 * output's rounding. */
START_TEST(long_rows)
{
    static const int64_t shapes[2][2] = {{6, 1000}, {9, 37}};
    for (int f64 = 0; f64 < 2; f64++)
        for (int c = 0; c < 2; c++)
            for (int sm = 0; sm < 2; sm++) {
                int64_t n = shapes[c][0], k = shapes[c][1];
                double e = sm ? 0.1 : 0.0, tol = f64 ? 1e-13 : 2e-6,
                       tol_l = f64 ? 1e-9 : 1e-5;
                ladle_dtype dt = f64 ? LADLE_F64 : LADLE_F32;
                ladle_op *op = NULL;
                LT_OK(ladle_loss_create(
                    LT_LOSS(LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_NONE, e, 0), 2,
                    shapes[c], dt, lt_device(), &op));
                ladle_tensor *x = lt_op_tensor(op, 0), *dx = lt_op_tensor(op, 0);
                ladle_tensor *t = lt_tensor(LADLE_I64, 1, &n), *out = lt_tensor(dt, 1, &n);
                ladle_tensor *dl = lt_tensor(dt, 1, &n);
                LT_OK(ladle_tensor_fill_random(x, 5, 7));
                double *xv = lt_values(x);
                for (int64_t i = 0; i < n; i++) {
                    lt_set(t, i, (i * 13 + 5) % k);
                    if (!sm) /* smoothing would put weight on it: an infinite loss */
                        xv[i * k + (i * 13 + 6) % k] = -INFINITY; /* next to the label */
                    xv[i * k + (i * 5) % k] *= 8;                 /* a spread of sizes */
                }
                /* a confident row: its label 16 above the rest, so p - 1 at the label
                 * is about -k e^-16 and must not be the difference of two roundings
                 * (in f32, 1e-4 of it; in f64 the sum 1 + o rounds to 1e-16, 2e-10 of
                 * it at k = 37) */
                double top = -INFINITY;
                for (int64_t j = 0; j < k; j++)
                    top = fmax(top, xv[j]);
                xv[5 % k] = top + 16;
                lt_store(x, xv);
                free(xv);
                xv = lt_values(x); /* as the dtype holds them */
                for (int64_t i = 0; i < n; i++)
                    lt_set(dl, i, 0.5 + 0.25 * (double)i);
                ladle_ctx *ctx = NULL;
                LT_OK(ladle_ctx_create(op, &ctx));
                LT_OK(ladle_loss_forward(op, ctx, x, t, out));
                LT_OK(ladle_loss_backward(op, ctx, dl, dx));
                double *dv = lt_values(dx), worst = 0, worst_d = 0, worst_l = 0;
                for (int64_t i = 0; i < n; i++) {
                    const double *r = xv + i * k;
                    int64_t label = (i * 13 + 5) % k;
                    double mx = -INFINITY, z = 0, want = 0;
                    for (int64_t j = 0; j < k; j++)
                        mx = fmax(mx, r[j]);
                    for (int64_t j = 0; j < k; j++)
                        z += exp(r[j] - mx);
                    z = mx + log(z);
                    for (int64_t j = 0; j < k; j++) {
                        double q = (j == label ? 1 - e : 0) + e / (double)k;
                        if (q != 0)
                            want -= q * (r[j] - z);
                    }
                    worst =
                        fmax(worst, fabs(lt_get(out, i) - want) / fmax(1.0, fabs(want)));
                    double g = lt_get(dl, i);
                    for (int64_t j = 0; j < k; j++) {
                        double p = exp(r[j] - z),
                               q = (j == label ? 1 - e : 0) + e / (double)k;
                        double d = g * (p - q), scale = fabs(g) * (p + q);
                        worst_d = fmax(worst_d, scale > 0 ? fabs(dv[i * k + j] - d) / scale
                                                          : fabs(dv[i * k + j]));
                        if (i == 0 && j == label) { /* relative to the small difference */
                            double o = 0;           /* p - q = e (1 - 1/k) - o / (1 + o) */
                            for (int64_t m = 0; m < k; m++)
                                o += m == label ? 0 : exp(r[m] - r[label]);
                            d = g * (e * (1 - 1 / (double)k) - o / (1 + o));
                            worst_l = fabs(dv[j] - d) / fabs(d);
                        }
                    }
                }
                free(xv), free(dv);
                LT_ASSERT(worst < tol && worst_d < tol && worst_l < tol_l,
                          "%s cross entropy %lldx%lld smoothing %.1f: losses %.1e, "
                          "gradients %.1e, the confident label's %.1e",
                          f64 ? "f64" : "f32", (long long)n, (long long)k, e, worst,
                          worst_d, worst_l);
                ladle_ctx_destroy(&ctx);
                LT_DESTROY(&x, &dx, &t, &out, &dl);
                ladle_op_destroy(&op);
            }
}
END_TEST

/* Values worked out by hand. */
START_TEST(values)
{
    int64_t s[2] = {1, 3}, one[1] = {1};
    ladle_op *op = NULL;
    ladle_tensor *x = lt_tensor(LADLE_F64, 2, s), *out = lt_tensor(LADLE_F64, 0, NULL);
    ladle_tensor *label = lt_tensor(LADLE_I64, 1, one), *t = lt_tensor(LADLE_F64, 2, s);
    for (int i = 0; i < 3; i++)
        lt_set(x, i, i + 1); /* logits 1, 2, 3 */
    lt_set(label, 0, 2);
    /* cross entropy: log(e + e^2 + e^3) - 3 */
    double lse = log(exp(1.0) + exp(2.0) + exp(3.0));
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN, 0, 0), 2,
                            s, LADLE_F64, lt_device(), &op));
    LT_OK(ladle_loss_forward(op, NULL, x, label, out));
    LT_ASSERT(fabs(lt_get(out, 0) - (lse - 3)) < 1e-15, "CE %.17g", lt_get(out, 0));
    ladle_op_destroy(&op);
    /* smoothing 0.3 over 3 classes: q = (0.1, 0.1, 0.8) */
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_SUM, 0.3, 0), 2,
                            s, LADLE_F64, lt_device(), &op));
    LT_OK(ladle_loss_forward(op, NULL, x, label, out));
    double want = -(0.1 * (1 - lse) + 0.1 * (2 - lse) + 0.8 * (3 - lse));
    LT_ASSERT(fabs(lt_get(out, 0) - want) < 1e-14, "smoothed CE");
    ladle_op_destroy(&op);
    /* MSE and L1 against t = (1, 1, 1): (0 + 1 + 4) / 3 and (0 + 1 + 2) / 3 */
    LT_OK(ladle_tensor_fill(t, 1));
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 2, s,
                            LADLE_F64, lt_device(), &op));
    LT_OK(ladle_loss_forward(op, NULL, x, t, out));
    LT_ASSERT(fabs(lt_get(out, 0) - 5.0 / 3) < 1e-15, "MSE");
    ladle_op_destroy(&op);
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_L1, LADLE_REDUCE_SUM, 0, 0), 2, s, LADLE_F64,
                            lt_device(), &op));
    LT_OK(ladle_loss_forward(op, NULL, x, t, out));
    LT_ASSERT(lt_get(out, 0) == 3.0, "L1");
    ladle_op_destroy(&op);
    /* BCE with logits at x = 0 is log 2 whatever the target */
    LT_OK(ladle_tensor_fill(x, 0));
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_BCE_WITH_LOGITS, LADLE_REDUCE_MEAN, 0, 0), 2,
                            s, LADLE_F64, lt_device(), &op));
    LT_OK(ladle_loss_forward(op, NULL, x, t, out));
    LT_ASSERT(fabs(lt_get(out, 0) - log(2.0)) < 1e-15, "BCE");
    /* large logits stay finite */
    lt_set(x, 0, 1000);
    lt_set(x, 1, -1000);
    LT_OK(ladle_loss_forward(op, NULL, x, t, out));
    LT_ASSERT(isfinite(lt_get(out, 0)), "BCE at +-1000");
    ladle_op_destroy(&op);
    LT_DESTROY(&x, &out, &label, &t);
}
END_TEST

START_TEST(bad_input)
{
    int64_t s[2] = {2, 3}, l2[1] = {2}, l3[1] = {3};
    ladle_op *op = NULL;
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN, 0, 0), 2,
                            s, LADLE_F32, lt_device(), &op));
    ladle_tensor *x = lt_tensor(LADLE_F32, 2, s), *out = lt_tensor(LADLE_F32, 0, NULL);
    ladle_tensor *lab = lt_tensor(LADLE_I64, 1, l2), *lab3 = lt_tensor(LADLE_I64, 1, l3);
    ladle_tensor *fl = lt_tensor(LADLE_F32, 1, l2);
    lt_set(lab, 1, 3); /* out of range */
    LT_FAILS(ladle_loss_forward(op, NULL, x, lab, out), LADLE_ERR_ARG);
    lt_set(lab, 1, -1);
    LT_FAILS(ladle_loss_forward(op, NULL, x, lab, out), LADLE_ERR_ARG);
    lt_set(lab, 1, 1);
    LT_OK(ladle_loss_forward(op, NULL, x, lab, out));
    lt_set(x, 4, NAN); /* a NaN input is a non-finite loss, its value still written */
    LT_FAILS(ladle_loss_forward(op, NULL, x, lab, out), LADLE_ERR_NUMERIC);
    LT_ASSERT(isnan(lt_get(out, 0)), "the loss is %g", lt_get(out, 0));
    lt_set(x, 4, 0);
    LT_FAILS(ladle_loss_forward(op, NULL, x, lab3, out), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_loss_forward(op, NULL, x, fl, out), LADLE_ERR_DTYPE);
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_ctx_create(op, &ctx));
    LT_FAILS(ladle_loss_backward(op, ctx, out, x), LADLE_ERR_STATE);
    LT_FAILS(ladle_layer_forward(op, NULL, x, x), LADLE_ERR_ARG); /* not a plain layer */
    ladle_ctx_destroy(&ctx);
    ladle_op_destroy(&op);
    LT_FAILS(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0.1, 0), 2, s,
                               LADLE_F32, lt_device(), &op),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_loss_create(LT_LOSS(LADLE_LOSS_NLL, LADLE_REDUCE_MEAN, 0, 0), 1, s,
                               LADLE_F32, lt_device(), &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_loss_create(LT_LOSS((ladle_loss_kind)7, LADLE_REDUCE_MEAN, 0, 0), 2, s,
                               LADLE_F32, lt_device(), &op),
             LADLE_ERR_ARG);
    LT_DESTROY(&x, &out, &lab, &lab3, &fl);
}
END_TEST

/* ---- class weights and ignore_index ---- */

/* The labels of a weighted case: sample s gets (7 s + 3) mod C, every third
 * the ignored label (when there is one). */
static void weighted_labels(ladle_tensor *t, int64_t classes, int64_t ignore)
{
    for (int64_t i = 0; i < ladle_tensor_numel(t); i++)
        lt_set(t, i, ignore != LADLE_LOSS_NO_IGNORE && i % 3 == 1 ? (double)ignore
                                                                  : (double)((i * 7 + 3) % classes));
}

/* The reference, in loops: each sample's loss (PyTorch's formulas, see
 * ladle_loss_desc) into per[], and the mean's divisor. x is N x C x inner. */
static double reference(const ladle_loss_desc *d, const ladle_tensor *x, const ladle_tensor *t,
                        int64_t n, int64_t c, int64_t inner, double *per)
{
    double divisor = 0;
    for (int64_t s = 0; s < n * inner; s++) {
        int64_t label = (int64_t)lt_get(t, s), b = (s / inner) * c * inner + s % inner;
        per[s] = 0;
        if (label == d->ignore_index)
            continue;
        double w_t = d->weights ? d->weights[label] : 1.0, mx = -INFINITY, z = 0;
        divisor += w_t;
        if (d->kind == LADLE_LOSS_NLL) {
            per[s] = -w_t * lt_get(x, b + label * inner);
            continue;
        }
        for (int64_t k = 0; k < c; k++)
            mx = fmax(mx, lt_get(x, b + k * inner));
        for (int64_t k = 0; k < c; k++)
            z += exp(lt_get(x, b + k * inner) - mx);
        z = mx + log(z);
        double smooth = 0, e = d->label_smoothing;
        for (int64_t k = 0; k < c; k++)
            smooth += (d->weights ? d->weights[k] : 1.0) * -(lt_get(x, b + k * inner) - z);
        per[s] = (1 - e) * w_t * -(lt_get(x, b + label * inner) - z) + e / (double)c * smooth;
    }
    return divisor;
}

/* Every reduction of d's kind against the reference, then the gradient
 * against finite differences. */
static void weighted_case(ladle_loss_desc *d, int ndim, const int64_t *shape, const char *what)
{
    int64_t n = shape[0], c = shape[1], inner = 1, ts[LADLE_MAX_NDIM];
    int tnd = 0;
    for (int k = 0; k < ndim; k++)
        if (k != 1)
            ts[tnd++] = shape[k];
    for (int k = 2; k < ndim; k++)
        inner *= shape[k];
    ladle_tensor *x = lt_tensor(LADLE_F64, ndim, shape), *t = lt_tensor(LADLE_I64, tnd, ts);
    ladle_tensor *scalar = lt_tensor(LADLE_F64, 0, NULL), *each = lt_tensor(LADLE_F64, tnd, ts);
    LT_OK(ladle_tensor_fill_random(x, 4, 0));
    weighted_labels(t, c, d->ignore_index);
    double per[256], sum = 0;
    double divisor = reference(d, x, t, n, c, inner, per);
    for (int64_t s = 0; s < n * inner; s++)
        sum += per[s];
    double worst = 0;
    for (int r = 0; r <= LADLE_REDUCE_NONE; r++) {
        ladle_op *op = NULL;
        d->reduction = (ladle_reduction)r;
        LT_OK(ladle_loss_create(d, ndim, shape, LADLE_F64, lt_device(), &op));
        ladle_tensor *out = r == LADLE_REDUCE_NONE ? each : scalar;
        LT_OK(ladle_loss_forward(op, NULL, x, t, out));
        if (r == LADLE_REDUCE_NONE)
            for (int64_t s = 0; s < n * inner; s++)
                worst = fmax(worst, fabs(lt_get(out, s) - per[s]) / (1 + fabs(per[s])));
        else {
            double want = r == LADLE_REDUCE_MEAN ? sum / divisor : sum;
            worst = fmax(worst, fabs(lt_get(out, 0) - want) / (1 + fabs(want)));
        }
        ladle_op_destroy(&op);
    }
    LT_ASSERT(worst < 1e-14, "%s: values off by %.2e", what, worst);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&t);
    ladle_tensor_destroy(&scalar), ladle_tensor_destroy(&each);
}

/* Finite differences of the weighted loss at each reduction. */
static void weighted_gradient(ladle_loss_desc *d, int ndim, const int64_t *shape,
                              const char *what)
{
    int64_t ts[LADLE_MAX_NDIM];
    int tnd = 0;
    for (int k = 0; k < ndim; k++)
        if (k != 1)
            ts[tnd++] = shape[k];
    for (int r = 0; r <= LADLE_REDUCE_NONE; r++) {
        ladle_op *op = NULL;
        d->reduction = (ladle_reduction)r;
        LT_OK(ladle_loss_create(d, ndim, shape, LADLE_F64, lt_device(), &op));
        ladle_tensor *x = lt_op_tensor(op, 0), *dx = lt_op_tensor(op, 0);
        ladle_tensor *t = lt_tensor(LADLE_I64, tnd, ts);
        LT_OK(ladle_tensor_fill_random(x, 4, 3));
        weighted_labels(t, shape[1], d->ignore_index);
        double worst = gradient_error(op, (ladle_reduction)r, x, t, dx);
        LT_ASSERT(worst < 1e-6, "%s reduction %d: worst gradient error %.2e", what, r, worst);
        LT_DESTROY(&x, &dx, &t);
        ladle_op_destroy(&op);
    }
}

START_TEST(weighted)
{
    int64_t flat[2] = {7, 4}, img[4] = {3, 3, 2, 3};
    double w4[4] = {0.5, 2.0, 1.25, 0.75}, w3[3] = {1.5, 0.25, 3.0};
    ladle_loss_desc d;
    struct {
        ladle_loss_kind kind;
        double smoothing;
        int weights;
        int64_t ignore;
        const char *what;
    } cases[] = {
        {LADLE_LOSS_CROSS_ENTROPY, 0, 1, LADLE_LOSS_NO_IGNORE, "ce weights"},
        {LADLE_LOSS_CROSS_ENTROPY, 0, 0, -100, "ce ignore -100"},
        {LADLE_LOSS_CROSS_ENTROPY, 0, 1, 2, "ce weights, ignore class 2"},
        {LADLE_LOSS_CROSS_ENTROPY, 0.2, 1, -100, "ce smoothed, weights, ignore"},
        {LADLE_LOSS_CROSS_ENTROPY, 0.3, 0, 1, "ce smoothed, ignore class 1"},
        {LADLE_LOSS_NLL, 0, 1, -1, "nll weights, ignore -1"},
        {LADLE_LOSS_NLL, 0, 0, 0, "nll ignore class 0"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ladle_loss_desc_init(&d, cases[k].kind, LADLE_REDUCE_MEAN);
        d.label_smoothing = cases[k].smoothing;
        d.ignore_index = cases[k].ignore;
        d.weights = cases[k].weights ? w4 : NULL;
        d.num_weights = cases[k].weights ? 4 : 0;
        weighted_case(&d, 2, flat, cases[k].what);
        weighted_gradient(&d, 2, flat, cases[k].what);
        d.weights = cases[k].weights ? w3 : NULL;
        d.num_weights = cases[k].weights ? 3 : 0;
        weighted_case(&d, 4, img, cases[k].what);
        weighted_gradient(&d, 4, img, cases[k].what);
    }
}
END_TEST

/* Worked out by hand: logits (1, 2, 3) for two samples, weights (1, 4, 2),
 * labels 2 and ignored. */
START_TEST(weighted_by_hand)
{
    int64_t s[2] = {2, 3}, two[1] = {2};
    double w[3] = {1, 4, 2};
    ladle_op *op = NULL;
    ladle_tensor *x = lt_tensor(LADLE_F64, 2, s), *out = lt_tensor(LADLE_F64, 0, NULL);
    ladle_tensor *dx = lt_tensor(LADLE_F64, 2, s), *dl = lt_tensor(LADLE_F64, 0, NULL);
    ladle_tensor *label = lt_tensor(LADLE_I64, 1, two);
    for (int i = 0; i < 6; i++)
        lt_set(x, i, i % 3 + 1);
    lt_set(label, 0, 2);
    lt_set(label, 1, -100);
    double lse = log(exp(1.0) + exp(2.0) + exp(3.0));
    ladle_loss_desc d;
    ladle_loss_desc_init(&d, LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_SUM);
    d.weights = w, d.num_weights = 3, d.ignore_index = -100;
    /* sum: w_2 (lse - 3) = 2 (lse - 3); mean divides by w_2 = 2 */
    LT_OK(ladle_loss_create(&d, 2, s, LADLE_F64, lt_device(), &op));
    w[0] = w[1] = w[2] = NAN; /* copied at create: the caller's array is free */
    LT_OK(ladle_loss_forward(op, NULL, x, label, out));
    LT_ASSERT(fabs(lt_get(out, 0) - 2 * (lse - 3)) < 1e-15, "weighted sum %.17g",
              lt_get(out, 0));
    ladle_op_destroy(&op);
    w[0] = 1, w[1] = 4, w[2] = 2;
    d.reduction = LADLE_REDUCE_MEAN;
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_loss_create(&d, 2, s, LADLE_F64, lt_device(), &op));
    LT_OK(ladle_ctx_create(op, &ctx));
    LT_OK(ladle_loss_forward(op, ctx, x, label, out));
    LT_ASSERT(fabs(lt_get(out, 0) - (lse - 3)) < 1e-15, "weighted mean %.17g", lt_get(out, 0));
    /* the gradient of the mean: (softmax - onehot) w_2 / w_2 for the first
     * sample, 0 for the ignored one */
    LT_OK(ladle_tensor_fill(dl, 1.0));
    LT_OK(ladle_loss_backward(op, ctx, dl, dx));
    double worst = 0;
    for (int i = 0; i < 3; i++) {
        double want = exp(i + 1 - lse) - (i == 2);
        worst = fmax(worst, fabs(lt_get(dx, i) - want));
        worst = fmax(worst, fabs(lt_get(dx, 3 + i)));
    }
    LT_ASSERT(worst < 1e-15, "weighted mean's gradient off by %.2e", worst);
    /* every sample ignored: the mean is 0/0, NaN as in PyTorch */
    lt_set(label, 0, -100);
    LT_FAILS(ladle_loss_forward(op, NULL, x, label, out), LADLE_ERR_NUMERIC);
    LT_ASSERT(isnan(lt_get(out, 0)), "all ignored: the mean is %g", lt_get(out, 0));
    /* a label outside 0..C-1 that is not the ignored one */
    lt_set(label, 0, 3);
    LT_FAILS(ladle_loss_forward(op, NULL, x, label, out), LADLE_ERR_ARG);
    lt_set(label, 0, -1);
    LT_FAILS(ladle_loss_forward(op, NULL, x, label, out), LADLE_ERR_ARG);
    ladle_ctx_destroy(&ctx);
    ladle_op_destroy(&op);
    /* the sum of an all-ignored batch is 0 */
    d.reduction = LADLE_REDUCE_SUM;
    lt_set(label, 0, -100);
    LT_OK(ladle_loss_create(&d, 2, s, LADLE_F64, lt_device(), &op));
    LT_OK(ladle_loss_forward(op, NULL, x, label, out));
    LT_ASSERT(lt_get(out, 0) == 0.0, "all ignored: the sum is %g", lt_get(out, 0));
    ladle_op_destroy(&op);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&out), ladle_tensor_destroy(&label);
    ladle_tensor_destroy(&dx), ladle_tensor_destroy(&dl);
}
END_TEST

START_TEST(bad_options)
{
    int64_t s[2] = {2, 3};
    double w[3] = {1, 2, 3};
    ladle_op *op = NULL;
    ladle_loss_desc d;
    ladle_loss_desc_init(&d, LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN);
    d.weights = w, d.num_weights = 2; /* not C */
    LT_FAILS(ladle_loss_create(&d, 2, s, LADLE_F64, lt_device(), &op), LADLE_ERR_SHAPE);
    d.num_weights = 0; /* weights without a count */
    LT_FAILS(ladle_loss_create(&d, 2, s, LADLE_F64, lt_device(), &op), LADLE_ERR_ARG);
    d.num_weights = 3;
    w[1] = INFINITY;
    LT_FAILS(ladle_loss_create(&d, 2, s, LADLE_F64, lt_device(), &op), LADLE_ERR_ARG);
    w[1] = 2;
    d.size = 8;
    LT_FAILS(ladle_loss_create(&d, 2, s, LADLE_F64, lt_device(), &op), LADLE_ERR_ARG);
    LT_FAILS(ladle_loss_create(NULL, 2, s, LADLE_F64, lt_device(), &op), LADLE_ERR_NULL);
    ladle_loss_desc_init(&d, LADLE_LOSS_MSE, LADLE_REDUCE_MEAN);
    d.ignore_index = 0; /* regression takes neither option */
    LT_FAILS(ladle_loss_create(&d, 2, s, LADLE_F64, lt_device(), &op), LADLE_ERR_ARG);
    ladle_loss_desc_init(&d, LADLE_LOSS_BCE_WITH_LOGITS, LADLE_REDUCE_MEAN);
    d.weights = w, d.num_weights = 3;
    LT_FAILS(ladle_loss_create(&d, 2, s, LADLE_F64, lt_device(), &op), LADLE_ERR_ARG);
    /* the flags of the distributed loss are accepted, no other bit */
    ladle_loss_desc_init(&d, LADLE_LOSS_MSE, LADLE_REDUCE_MEAN);
    LT_ASSERT(d.size == sizeof d && d.flags == 0 && d.weights == NULL &&
                  d.ignore_index == LADLE_LOSS_NO_IGNORE && d.label_smoothing == 0,
              "_init sets size, no flags, no weights, no ignored label, no smoothing");
    d.flags = 0x100;
    LT_FAILS(ladle_loss_create(&d, 2, s, LADLE_F64, lt_device(), &op), LADLE_ERR_ARG);
    LT_ASSERT(op == NULL, "a failed create set the op");
    d.flags = LADLE_CHECKED;
    LT_OK(ladle_loss_create(&d, 2, s, LADLE_F64, lt_device(), &op));
    ladle_op_destroy(&op);
}
END_TEST

/* A loss's forward and backward on x (random from seed) and t: the loss
 * values then dinput, as host doubles (malloc'd, *n of them). */
static double *loss_values(ladle_op *op, int ndim, const int64_t *xs, const ladle_tensor *t,
                           int64_t *n)
{
    ladle_tensor *x = lt_tensor(LADLE_F64, ndim, xs), *dx = lt_tensor(LADLE_F64, ndim, xs);
    ladle_tensor *l = lt_op_tensor(op, 1),
                 *dl = lt_op_tensor(op, 1); /* y: the loss's shape */
    LT_OK(ladle_tensor_fill_random(x, 6, 2));
    LT_OK(ladle_tensor_fill(dl, 0.3));
    ladle_ctx *c = NULL;
    LT_OK(ladle_ctx_create(op, &c));
    LT_OK(ladle_loss_forward(op, c, x, t, l));
    LT_OK(ladle_loss_backward(op, c, dl, dx));
    double *vl = lt_values(l), *vx = lt_values(dx);
    int64_t nl = ladle_tensor_numel(l), nx = ladle_tensor_numel(dx);
    double *v = malloc(sizeof(double) * (size_t)(nl + nx + 1));
    memcpy(v, vl, sizeof(double) * (size_t)nl);
    memcpy(v + nl, vx, sizeof(double) * (size_t)nx);
    *n = nl + nx;
    free(vl), free(vx);
    ladle_ctx_destroy(&c);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&dx);
    ladle_tensor_destroy(&l), ladle_tensor_destroy(&dl);
    return v;
}

/* The name of 0.1: ladle_loss_create_ex gives ladle_loss_create's loss bit
 * for bit (values and gradients), and fails alike. */
START_TEST(deprecated_loss_create_ex)
{
    int64_t xs[3] = {4, 3, 2}, ts[2] = {4, 2};
    double w[3] = {0.5, 2, 1};
    ladle_tensor *labels = lt_tensor(LADLE_I64, 2, ts),
                 *target = lt_tensor(LADLE_F64, 3, xs);
    for (int64_t i = 0; i < 8; i++)
        lt_set(labels, i, (double)((i * 5 + 1) % 3));
    LT_OK(ladle_tensor_fill_random(target, 6, 3));
    for (int k = 0; k < 4; k++) {
        ladle_loss_desc d;
        ladle_loss_desc_init(&d, k == 0 ? LADLE_LOSS_MSE : LADLE_LOSS_CROSS_ENTROPY,
                             k == 2   ? LADLE_REDUCE_NONE
                             : k == 1 ? LADLE_REDUCE_SUM
                                      : LADLE_REDUCE_MEAN);
        d.label_smoothing = k == 1 || k == 2 ? 0.2 : 0;
        if (k == 3)
            d.weights = w, d.num_weights = 3, d.ignore_index = 1;
        ladle_op *old = NULL, *op = NULL;
        LT_DEPRECATED_BEGIN
        LT_OK(ladle_loss_create_ex(&d, 3, xs, LADLE_F64, lt_device(), &old));
        LT_DEPRECATED_END
        LT_OK(ladle_loss_create(&d, 3, xs, LADLE_F64, lt_device(), &op));
        const ladle_tensor *t = k == 0 ? target : labels;
        int64_t na = 0, nb = 0;
        double *a = loss_values(old, 3, xs, t, &na), *b = loss_values(op, 3, xs, t, &nb);
        LT_ASSERT(na == nb && memcmp(a, b, sizeof(double) * (size_t)na) == 0,
                  "case %d: loss_create_ex differs from ladle_loss_create", k);
        free(a), free(b);
        ladle_op_destroy(&old), ladle_op_destroy(&op);
    }
    ladle_loss_desc d;
    ladle_loss_desc_init(&d, LADLE_LOSS_NLL, LADLE_REDUCE_MEAN);
    ladle_op *op = NULL;
    LT_DEPRECATED_BEGIN
    LT_FAILS(ladle_loss_create_ex(&d, 1, xs, LADLE_F64, lt_device(), &op), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_loss_create_ex(NULL, 3, xs, LADLE_F64, lt_device(), &op),
             LADLE_ERR_NULL);
    d.flags = 0x100;
    LT_FAILS(ladle_loss_create_ex(&d, 3, xs, LADLE_F64, lt_device(), &op), LADLE_ERR_ARG);
    LT_DEPRECATED_END
    LT_ASSERT(op == NULL, "a failed create set the op");
    ladle_tensor_destroy(&labels), ladle_tensor_destroy(&target);
}
END_TEST

LT_SUITE("loss", "loss", LT_CHECK_TIMEOUT, gradients, values, long_rows, bad_input,
         weighted, weighted_by_hand, bad_options, deprecated_loss_create_ex)
