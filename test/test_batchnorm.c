/* Batch norm: values and running statistics by hand, the kernels against a
 * naive evaluation, training and evaluation gradients by finite
 * differences, options, bad input. */
#include <math.h>
#include <string.h>

#include "harness.h"

START_TEST(values_and_running_statistics)
{
    int64_t xs[4] = {3, 2, 2, 3}; /* 3 samples, 2 channels, 2x3 planes: m = 18 */
    ladle_batchnorm_desc d;
    ladle_batchnorm_desc_init(&d, 2);
    ladle_op *op = NULL;
    LT_OK(ladle_batchnorm_create(&d, 4, xs, LADLE_F64, lt_device(), &op));
    ladle_tensor_fill(ladle_op_param(op, 0), 1.5); /* gamma */
    ladle_tensor_fill(ladle_op_param(op, 1), -0.25); /* beta */
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    LT_OK(ladle_tensor_fill_random(x, 7, 0));
    for (int i = 0; i < 36; i++)
        lt_set(x, i, 3 * lt_get(x, i) + (i / 6 % 2 ? 5 : -2)); /* channel offsets */
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_ctx_create(op, &ctx));
    LT_OK(ladle_layer_forward(op, ctx, x, y));
    double mean[2] = {0, 0}, var[2] = {0, 0};
    for (int i = 0; i < 36; i++)
        mean[i / 6 % 2] += lt_get(x, i) / 18;
    for (int i = 0; i < 36; i++) {
        double dd = lt_get(x, i) - mean[i / 6 % 2];
        var[i / 6 % 2] += dd * dd / 18;
    }
    int ok = 1;
    for (int i = 0; i < 36; i++) {
        int c = i / 6 % 2;
        double want = 1.5 * (lt_get(x, i) - mean[c]) / sqrt(var[c] + 1e-5) - 0.25;
        ok &= fabs(lt_get(y, i) - want) < 1e-13;
    }
    LT_ASSERT(ok, "normalised output");
    /* running: 0.9 * 0 + 0.1 * mean, 0.9 * 1 + 0.1 * var * 18 / 17 (unbiased) */
    ladle_tensor *rm = NULL, *rv = NULL;
    LT_OK(ladle_batchnorm_running_stats(op, &rm, &rv));
    LT_ASSERT(rm != NULL && rv != NULL && rm != rv && ladle_tensor_numel(rm) == 2 &&
                  ladle_tensor_numel(rv) == 2,
              "one running statistic per channel");
    for (int c = 0; c < 2; c++)
        ok &= fabs(lt_get(rm, c) - 0.1 * mean[c]) < 1e-15 &&
              fabs(lt_get(rv, c) - (0.9 + 0.1 * var[c] * 18 / 17)) < 1e-14;
    LT_ASSERT(ok, "running statistics");
    /* evaluation uses the running statistics and leaves them alone */
    LT_OK(ladle_layer_set_training(op, 0));
    LT_OK(ladle_layer_forward(op, NULL, x, y));
    for (int i = 0; i < 36; i++) {
        int c = i / 6 % 2;
        double want = 1.5 * (lt_get(x, i) - lt_get(rm, c)) / sqrt(lt_get(rv, c) + 1e-5) - 0.25;
        ok &= fabs(lt_get(y, i) - want) < 1e-13;
    }
    LT_ASSERT(ok && fabs(lt_get(rm, 0) - 0.1 * mean[0]) < 1e-15, "evaluation");
    ladle_ctx_destroy(&ctx);
    ladle_op_destroy(&op);

    /* momentum < 0: a cumulative average over the batches seen */
    d.momentum = -1;
    LT_OK(ladle_batchnorm_create(&d, 4, xs, LADLE_F64, lt_device(), &op));
    LT_OK(ladle_layer_forward(op, NULL, x, y));
    LT_OK(ladle_layer_forward(op, NULL, x, y));
    rm = NULL;
    LT_OK(ladle_batchnorm_running_stats(op, &rm, NULL));
    LT_ASSERT(fabs(lt_get(rm, 1) - mean[1]) < 1e-14, "cumulative mean %g vs %g", lt_get(rm, 1),
              mean[1]);
    ladle_op_destroy(&op);

    /* the accessor refuses what is not a batch norm, and leaves the outputs */
    LT_FAILS(ladle_batchnorm_running_stats(NULL, &rm, &rv), LADLE_ERR_NULL);
    int64_t ls[2] = {3, 2};
    LT_OK(ladle_linear_create(LT_LINEAR(ls[1], 4, 1, 0), 2, ls, LADLE_F64, lt_device(), 1,
                              &op));
    ladle_tensor *keep = rm;
    ladle_status st = ladle_batchnorm_running_stats(op, &rm, &rv);
    LT_ASSERT(st == LADLE_ERR_ARG && rm == keep && ladle_op_kind_of(op) == LADLE_OP_LINEAR &&
                  strstr(ladle_error_message(), "not a batch norm") != NULL,
              "a linear layer: %s (%s)", ladle_status_name(st), ladle_error_message());
    ladle_error_clear();
    ladle_op_destroy(&op);
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&y);
}
END_TEST

/* The kernels against the formulas evaluated here in double, on random
 * shapes (rows of 1 to 600 values, batch 1 included), f32 and f64, with
 * backward_weight before and after backward. */
START_TEST(against_naive)
{
    uint64_t rng = 12345;
    for (int trial = 0; trial < 24; trial++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        ladle_dtype dt = trial % 2 ? LADLE_F64 : LADLE_F32;
        int ndim = 2 + (int)(rng >> 33) % 4;
        int64_t xs[5] = {1 + (int64_t)(rng >> 40) % 4, 1 + (int64_t)(rng >> 45) % 5, 1, 1, 1};
        int64_t inner = 1;
        for (int i = 2; i < ndim; i++) {
            xs[i] = 1 + (int64_t)(rng >> (20 + 5 * i)) % (ndim == 3 ? 600 : ndim == 4 ? 25 : 9);
            inner *= xs[i];
        }
        if (xs[0] * inner < 2)
            xs[0] = 2;
        int64_t c = xs[1], m = xs[0] * inner, total = m * c;
        ladle_batchnorm_desc d;
        ladle_batchnorm_desc_init(&d, c);
        ladle_op *op = NULL;
        LT_OK(ladle_batchnorm_create(&d, ndim, xs, dt, lt_device(), &op));
        ladle_tensor_fill_random(ladle_op_param(op, 0), 2, (uint64_t)trial);
        ladle_tensor_fill_random(ladle_op_param(op, 1), 2, (uint64_t)trial + 100);
        ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
        ladle_tensor *dy = lt_op_tensor(op, 1), *dx = lt_op_tensor(op, 0);
        ladle_tensor_fill_random(x, 1, (uint64_t)trial + 200);
        ladle_tensor_fill_random(dy, 1, (uint64_t)trial + 300);
        double *xv = lt_values(x);
        for (int64_t i = 0; i < total; i++) /* an offset per channel */
            xv[i] += (double)(i / inner % c) - 1.5;
        lt_store(x, xv);
        free(xv);
        xv = lt_values(x); /* as the dtype holds them */
        ladle_ctx *ctx = NULL;
        LT_OK(ladle_ctx_create(op, &ctx));
        LT_OK(ladle_layer_forward(op, ctx, x, y));
        int weight_first = trial % 3 == 0;
        if (weight_first)
            LT_OK(ladle_layer_backward_weight(op, ctx, dy));
        LT_OK(ladle_layer_backward(op, ctx, dy, dx));
        if (!weight_first)
            LT_OK(ladle_layer_backward_weight(op, ctx, dy));
        double tol = dt == LADLE_F32 ? 2e-5 : 1e-12, worst = 0;
        double *yv = lt_values(y), *dyv = lt_values(dy), *dxv = lt_values(dx);
        for (int64_t ch = 0; ch < c; ch++) {
            double mu = 0, var = 0, sdy = 0, sdyx = 0;
            double g = lt_get(ladle_op_param(op, 0), ch), b = lt_get(ladle_op_param(op, 1), ch);
            for (int64_t sm = 0; sm < xs[0]; sm++)
                for (int64_t i = 0; i < inner; i++)
                    mu += xv[(sm * c + ch) * inner + i] / (double)m;
            for (int64_t sm = 0; sm < xs[0]; sm++)
                for (int64_t i = 0; i < inner; i++) {
                    double dd = xv[(sm * c + ch) * inner + i] - mu;
                    var += dd * dd / (double)m;
                }
            double is = 1 / sqrt(var + 1e-5);
            for (int64_t sm = 0; sm < xs[0]; sm++)
                for (int64_t i = 0; i < inner; i++) {
                    int64_t at = (sm * c + ch) * inner + i;
                    sdy += dyv[at];
                    sdyx += dyv[at] * (xv[at] - mu) * is;
                }
            for (int64_t sm = 0; sm < xs[0]; sm++)
                for (int64_t i = 0; i < inner; i++) {
                    int64_t at = (sm * c + ch) * inner + i;
                    double xh = (xv[at] - mu) * is;
                    double ey = g * xh + b;
                    double edx =
                        g * is / (double)m * ((double)m * dyv[at] - sdy - xh * sdyx);
                    double e1 = fabs(yv[at] - ey) / (1 + fabs(ey));
                    double e2 = fabs(dxv[at] - edx) / (1 + fabs(edx));
                    worst = fmax(worst, fmax(e1, e2));
                }
            double e3 = fabs(lt_get(ladle_op_grad(op, 0), ch) - sdyx) / (1 + fabs(sdyx) + sqrt((double)m));
            double e4 = fabs(lt_get(ladle_op_grad(op, 1), ch) - sdy) / (1 + fabs(sdy) + sqrt((double)m));
            worst = fmax(worst, fmax(e3, e4));
        }
        free(xv), free(yv), free(dyv), free(dxv);
        LT_ASSERT(worst < tol, "trial %d %s shape %lldx%lldx%lld: error %.2e", trial,
                  ladle_dtype_name(dt), (long long)xs[0], (long long)c, (long long)inner, worst);
        ladle_ctx_destroy(&ctx);
        LT_DESTROY(&x, &y, &dx, &dy);
        ladle_op_destroy(&op);
    }
}
END_TEST

/* The statistics of values far from zero, in rows long enough to span
 * many vector blocks, over several samples: x = offset + a small spread,
 * so a sum of squares taken without subtracting a mean (a one-pass kernel
 * done naively) would lose every digit in f32. The normalised values and the running
 * variance against the two-pass formulas in double on the same values. */
START_TEST(statistics_far_from_zero)
{
    for (int f64 = 0; f64 < 2; f64++) {
        ladle_dtype dt = f64 ? LADLE_F64 : LADLE_F32;
        double offset = f64 ? 1e8 : 1e3, spread = 0.1;
        int64_t xs[3] = {3, 2, 2013}, c = 2, inner = 2013, m = 3 * 2013;
        ladle_batchnorm_desc d;
        ladle_batchnorm_desc_init(&d, c);
        d.momentum = 1.0; /* the running variance is the batch's, unbiased */
        ladle_op *op = NULL;
        LT_OK(ladle_batchnorm_create(&d, 3, xs, dt, lt_device(), &op));
        ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
        ladle_tensor_fill_random(x, 1, 77 + (uint64_t)f64);
        double *xv = lt_values(x);
        for (int64_t i = 0; i < 3 * c * inner; i++) /* channel 1 a second offset */
            xv[i] = offset * (1 + (double)(i / inner % c)) + spread * xv[i];
        lt_store(x, xv);
        free(xv);
        ladle_ctx *ctx = NULL;
        LT_OK(ladle_ctx_create(op, &ctx));
        LT_OK(ladle_layer_forward(op, ctx, x, y));
        double worst = 0, wvar = 0, *yv = lt_values(y);
        xv = lt_values(x); /* as the dtype holds them */
        for (int64_t ch = 0; ch < c; ch++) {
            /* the reference shifted by the channel's first value, so its
             * own sums do not round away the spread */
            double x0 = xv[ch * inner], mu = 0, var = 0;
            for (int64_t sm = 0; sm < 3; sm++)
                for (int64_t i = 0; i < inner; i++)
                    mu += xv[(sm * c + ch) * inner + i] - x0;
            mu = x0 + mu / (double)m;
            for (int64_t sm = 0; sm < 3; sm++)
                for (int64_t i = 0; i < inner; i++) {
                    double dd = xv[(sm * c + ch) * inner + i] - mu;
                    var += dd * dd;
                }
            ladle_tensor *rvar = NULL;
            LT_OK(ladle_batchnorm_running_stats(op, NULL, &rvar));
            double rv = lt_get(rvar, ch);
            wvar = fmax(wvar, fabs(rv - var / (double)(m - 1)) / (var / (double)(m - 1)));
            var /= (double)m;
            for (int64_t sm = 0; sm < 3; sm++)
                for (int64_t i = 0; i < inner; i++) {
                    int64_t at = (sm * c + ch) * inner + i;
                    double want = (xv[at] - mu) / sqrt(var + 1e-5);
                    worst = fmax(worst, fabs(yv[at] - want));
                }
        }
        free(xv), free(yv);
        /* the variance to a few units of the dtype's rounding; the
         * normalised values to the affine pass's own rounding, y = a x + k
         * in the dtype with |k| = |mean| / std up to 4e4 in f32 */
        LT_ASSERT(worst < (f64 ? 1e-6 : 1e-2) && wvar < (f64 ? 1e-12 : 1e-6),
                  "%s: normalised values off by %.2e, variance by %.2e",
                  ladle_dtype_name(dt), worst, wvar);
        ladle_ctx_destroy(&ctx);
        ladle_tensor_destroy(&x);
        ladle_tensor_destroy(&y);
        ladle_op_destroy(&op);
    }
}
END_TEST

START_TEST(gradients)
{
    int64_t shapes[3][5] = {{6, 3}, {4, 2, 5}, {2, 3, 2, 2, 3}};
    int ndims[3] = {2, 3, 5};
    for (int k = 0; k < 3; k++)
        for (int affine = 0; affine < 2; affine++)
            for (int training = 0; training < 2; training++) {
                ladle_batchnorm_desc d;
                ladle_batchnorm_desc_init(&d, shapes[k][1]);
                d.affine = affine;
                ladle_op *op = NULL;
                LT_OK(ladle_batchnorm_create(&d, ndims[k], shapes[k], LADLE_F64, lt_device(), &op));
                if (affine) {
                    ladle_tensor_fill_random(ladle_op_param(op, 0), 3, 0);
                    ladle_tensor_fill_random(ladle_op_param(op, 1), 3, 1);
                }
                ladle_tensor *rvar = NULL;
                LT_OK(ladle_batchnorm_running_stats(op, NULL, &rvar));
                ladle_tensor_fill(rvar, 0.7);
                LT_OK(ladle_layer_set_training(op, training));
                ladle_gradient_result r;
                LT_OK(ladle_gradient_test(op, 11, 200, &r));
                int ok = r.input_error < 1e-6;
                for (int p = 0; p < r.nparams; p++)
                    ok &= r.param_error[p] < 1e-6;
                LT_ASSERT(ok, "bn %dd affine %d training %d: %.1e %.1e %.1e", ndims[k] - 2,
                          affine, training, r.input_error, r.param_error[0], r.param_error[1]);
                ladle_op_destroy(&op);
            }
}
END_TEST

START_TEST(bad_input)
{
    int64_t xs[2] = {1, 3}, xs4[4] = {2, 3, 1, 1};
    ladle_batchnorm_desc d;
    ladle_batchnorm_desc_init(&d, 4);
    ladle_op *op = NULL;
    LT_FAILS(ladle_batchnorm_create(&d, 2, xs, LADLE_F32, lt_device(), &op), LADLE_ERR_SHAPE);
    ladle_batchnorm_desc_init(&d, 3);
    d.eps = 0;
    LT_FAILS(ladle_batchnorm_create(&d, 2, xs, LADLE_F32, lt_device(), &op), LADLE_ERR_ARG);
    ladle_batchnorm_desc_init(&d, 3);
    LT_FAILS(ladle_batchnorm_create(&d, 1, xs, LADLE_F32, lt_device(), &op), LADLE_ERR_SHAPE);
    /* one value per channel cannot be normalised in training */
    LT_OK(ladle_batchnorm_create(&d, 2, xs, LADLE_F32, lt_device(), &op));
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    LT_FAILS(ladle_layer_forward(op, NULL, x, y), LADLE_ERR_SHAPE);
    LT_OK(ladle_layer_set_training(op, 0));
    LT_OK(ladle_layer_forward(op, NULL, x, y));
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&y);
    ladle_op_destroy(&op);
    LT_OK(ladle_batchnorm_create(&d, 4, xs4, LADLE_F64, lt_device(), &op)); /* 2 values: fine */
    ladle_op_destroy(&op);
    /* the distributed fields: defaults; one rank reads no sync or group
     * size, but a bad sync value or an unknown flag is refused */
    LT_ASSERT(d.sync == LADLE_BN_SYNC_GLOBAL && d.group_size == 0 && d.flags == 0,
              "_init sets sync global, no group size and no flags");
    d.sync = LADLE_BN_SYNC_GROUP, d.group_size = 3, d.flags = LADLE_CHECKED;
    LT_OK(ladle_batchnorm_create(&d, 4, xs4, LADLE_F64, lt_device(), &op));
    ladle_op_destroy(&op);
    d.sync = (ladle_bn_sync)3;
    LT_FAILS(ladle_batchnorm_create(&d, 4, xs4, LADLE_F64, lt_device(), &op),
             LADLE_ERR_ARG);
    d.sync = LADLE_BN_SYNC_LOCAL, d.flags = 0x100;
    LT_FAILS(ladle_batchnorm_create(&d, 4, xs4, LADLE_F64, lt_device(), &op),
             LADLE_ERR_ARG);
    LT_ASSERT(op == NULL, "a failed create set the op");
}
END_TEST

LT_SUITE("batchnorm", "batchnorm", LT_CHECK_TIMEOUT, values_and_running_statistics,
         against_naive, statistics_far_from_zero, gradients, bad_input)
