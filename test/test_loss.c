/* Losses: values derived by hand, finite differences for every kind and
 * reduction, label smoothing, smaller batches, bad input. */
#include <math.h>
#include <stdio.h>

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

static void check_gradient(ladle_loss_kind kind, ladle_reduction red, double smooth, int ndim,
                           const int64_t *shape, const char *what)
{
    ladle_op *op = NULL;
    LT_OK(ladle_loss_create(kind, red, smooth, ndim, shape, LADLE_F64, lt_device(), &op));
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
    LT_ASSERT(worst < 1e-6, "%s: worst gradient error %.2e", what, worst);
    ladle_ctx_destroy(&ctx);
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&dx);
    ladle_tensor_destroy(&t);
    ladle_tensor_destroy(&out);
    ladle_tensor_destroy(&dl);
    ladle_tensor_destroy(&w);
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
    LT_OK(ladle_loss_create(LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN, 0, 2, s, LADLE_F64,
                            lt_device(), &op));
    LT_OK(ladle_loss_forward(op, NULL, x, label, out));
    LT_ASSERT(fabs(lt_get(out, 0) - (lse - 3)) < 1e-15, "CE %.17g", lt_get(out, 0));
    ladle_op_destroy(&op);
    /* smoothing 0.3 over 3 classes: q = (0.1, 0.1, 0.8) */
    LT_OK(ladle_loss_create(LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_SUM, 0.3, 2, s, LADLE_F64,
                            lt_device(), &op));
    LT_OK(ladle_loss_forward(op, NULL, x, label, out));
    double want = -(0.1 * (1 - lse) + 0.1 * (2 - lse) + 0.8 * (3 - lse));
    LT_ASSERT(fabs(lt_get(out, 0) - want) < 1e-14, "smoothed CE");
    ladle_op_destroy(&op);
    /* MSE and L1 against t = (1, 1, 1): (0 + 1 + 4) / 3 and (0 + 1 + 2) / 3 */
    LT_OK(ladle_tensor_fill(t, 1));
    LT_OK(
        ladle_loss_create(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 2, s, LADLE_F64, lt_device(), &op));
    LT_OK(ladle_loss_forward(op, NULL, x, t, out));
    LT_ASSERT(fabs(lt_get(out, 0) - 5.0 / 3) < 1e-15, "MSE");
    ladle_op_destroy(&op);
    LT_OK(ladle_loss_create(LADLE_LOSS_L1, LADLE_REDUCE_SUM, 0, 2, s, LADLE_F64, lt_device(), &op));
    LT_OK(ladle_loss_forward(op, NULL, x, t, out));
    LT_ASSERT(lt_get(out, 0) == 3.0, "L1");
    ladle_op_destroy(&op);
    /* BCE with logits at x = 0 is log 2 whatever the target */
    LT_OK(ladle_tensor_fill(x, 0));
    LT_OK(ladle_loss_create(LADLE_LOSS_BCE_WITH_LOGITS, LADLE_REDUCE_MEAN, 0, 2, s, LADLE_F64,
                            lt_device(), &op));
    LT_OK(ladle_loss_forward(op, NULL, x, t, out));
    LT_ASSERT(fabs(lt_get(out, 0) - log(2.0)) < 1e-15, "BCE");
    /* large logits stay finite */
    lt_set(x, 0, 1000);
    lt_set(x, 1, -1000);
    LT_OK(ladle_loss_forward(op, NULL, x, t, out));
    LT_ASSERT(isfinite(lt_get(out, 0)), "BCE at +-1000");
    ladle_op_destroy(&op);
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&out);
    ladle_tensor_destroy(&label);
    ladle_tensor_destroy(&t);
}
END_TEST

START_TEST(bad_input)
{
    int64_t s[2] = {2, 3}, l2[1] = {2}, l3[1] = {3};
    ladle_op *op = NULL;
    LT_OK(ladle_loss_create(LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN, 0, 2, s, LADLE_F32,
                            lt_device(), &op));
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
    LT_FAILS(ladle_loss_create(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0.1, 2, s, LADLE_F32, lt_device(),
                               &op),
             LADLE_ERR_ARG);
    LT_FAILS(
        ladle_loss_create(LADLE_LOSS_NLL, LADLE_REDUCE_MEAN, 0, 1, s, LADLE_F32, lt_device(), &op),
        LADLE_ERR_SHAPE);
    LT_FAILS(ladle_loss_create((ladle_loss_kind)7, LADLE_REDUCE_MEAN, 0, 2, s, LADLE_F32,
                               lt_device(), &op),
             LADLE_ERR_ARG);
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&out);
    ladle_tensor_destroy(&lab);
    ladle_tensor_destroy(&lab3);
    ladle_tensor_destroy(&fl);
}
END_TEST

Suite *loss_suite(void)
{
    Suite *s = suite_create("loss");
    TCase *tc = tcase_create("loss");
    tcase_add_test(tc, gradients);
    tcase_add_test(tc, values);
    tcase_add_test(tc, bad_input);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv) { return lt_main(argc, argv, loss_suite); }
