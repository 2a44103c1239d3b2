/* Linear: values against loops written here, finite differences, the
 * adjoint without bias, smaller batches, initialisation, bad input. */
#include <math.h>

#include "harness.h"

static void grad_ok(ladle_op *op, const char *what)
{
    ladle_gradient_result r;
    LT_OK(ladle_gradient_test(op, 7, 200, &r));
    int ok = r.input_error < 1e-6 && r.max_param_error < 1e-6;
    for (int p = 0; p < r.nparams && p < 4; p++) /* what the accessor reports */
        ok &= ladle_gradient_result_param_error(&r, p) < 1e-6;
    ok &= isnan(ladle_gradient_result_param_error(&r, r.nparams)) &&
          isnan(ladle_gradient_result_param_error(&r, -1));
    LT_ASSERT(ok, "%s: input %.2e, params %.2e %.2e", what, r.input_error,
              ladle_gradient_result_param_error(&r, 0), ladle_gradient_result_param_error(&r, 1));
}

START_TEST(values_against_loops)
{
    /* x: 3 x 2 x 5, W: 4 x 5, b: 4 */
    int64_t xs[3] = {3, 2, 5};
    ladle_op *op = NULL;
    LT_OK(ladle_linear_create(LT_LINEAR(xs[2], 4, 1, 0), 3, xs, LADLE_F64, lt_device(), 11,
                              &op));
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    LT_OK(ladle_tensor_fill_random(x, 3, 0));
    LT_OK(ladle_op_forward(op, x, y));
    const ladle_tensor *w = ladle_op_param(op, 0), *b = ladle_op_param(op, 1);
    int ok = 1;
    for (int r = 0; r < 6; r++)
        for (int o = 0; o < 4; o++) {
            double s = lt_get(b, o);
            for (int i = 0; i < 5; i++)
                s += lt_get(x, r * 5 + i) * lt_get(w, o * 5 + i);
            ok &= fabs(lt_get(y, r * 4 + o) - s) < 1e-14;
        }
    LT_ASSERT(ok, "y = x W^T + b");
    /* default init: U(-1/sqrt(5), 1/sqrt(5)) for both */
    double bound = 1 / sqrt(5.0), wmax = 0, bmax = 0;
    for (int i = 0; i < 20; i++)
        wmax = fmax(wmax, fabs(lt_get(w, i)));
    for (int i = 0; i < 4; i++)
        bmax = fmax(bmax, fabs(lt_get(b, i)));
    LT_ASSERT(wmax <= bound && wmax > 0.5 * bound && bmax <= bound, "init bounds");
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&y);
    ladle_op_destroy(&op);
}
END_TEST

START_TEST(gradients)
{
    int64_t a[2] = {4, 7}, c[4] = {2, 3, 2, 6}, d[1] = {5};
    ladle_op *op = NULL;
    LT_OK(ladle_linear_create(LT_LINEAR(a[1], 3, 1, 0), 2, a, LADLE_F64, lt_device(), 1,
                              &op));
    grad_ok(op, "4x7 -> 4x3 with bias");
    ladle_op_destroy(&op);
    LT_OK(ladle_linear_create(LT_LINEAR(c[3], 5, 0, 0), 4, c, LADLE_F64, lt_device(), 2,
                              &op));
    grad_ok(op, "2x3x2x6 -> 2x3x2x5");
    lt_adjoint_ok(op, 3, "linear without bias");
    ladle_op_destroy(&op);
    LT_OK(ladle_linear_create(LT_LINEAR(d[0], 2, 1, 0), 1, d, LADLE_F64, lt_device(), 3,
                              &op));
    grad_ok(op, "a single vector");
    ladle_op_destroy(&op);
    /* f32 adjoint */
    LT_OK(ladle_linear_create(LT_LINEAR(a[1], 9, 0, 0), 2, a, LADLE_F32, lt_device(), 4,
                              &op));
    lt_adjoint_ok(op, 4, "linear f32");
    ladle_op_destroy(&op);
}
END_TEST

/* A smaller batch computes the same rows as the full one. */
START_TEST(smaller_batch)
{
    int64_t xs[2] = {5, 3}, small[2] = {2, 3}, ys[2] = {2, 4};
    ladle_op *op = NULL;
    LT_OK(ladle_linear_create(LT_LINEAR(xs[1], 4, 1, 0), 2, xs, LADLE_F32, lt_device(), 5,
                              &op));
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    ladle_tensor *x2 = lt_tensor(LADLE_F32, 2, small), *y2 = lt_tensor(LADLE_F32, 2, ys);
    LT_OK(ladle_tensor_fill_random(x, 1, 0));
    for (int i = 0; i < 6; i++)
        lt_set(x2, i, lt_get(x, i));
    LT_OK(ladle_op_forward(op, x, y));
    LT_OK(ladle_op_forward(op, x2, y2));
    int ok = 1;
    for (int i = 0; i < 8; i++)
        ok &= lt_get(y, i) == lt_get(y2, i);
    LT_ASSERT(ok, "batch 2 of 5");
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_ctx_create(op, &ctx));
    LT_FAILS(ladle_layer_backward(op, ctx, y2, x2), LADLE_ERR_STATE);
    LT_OK(ladle_layer_forward(op, ctx, x2, y2));
    LT_FAILS(ladle_layer_backward(op, ctx, y, x), LADLE_ERR_SHAPE); /* batch 5 != 2 */
    LT_OK(ladle_layer_backward(op, ctx, y2, x2));
    LT_OK(ladle_layer_backward(op, ctx, y2, NULL));
    ladle_ctx_destroy(&ctx);
    LT_DESTROY(&x, &y, &x2, &y2);
    ladle_op_destroy(&op);
}
END_TEST

START_TEST(bad_input)
{
    int64_t xs[2] = {4, 3}, big[2] = {5, 3}, wrong[2] = {4, 2};
    ladle_op *op = NULL, *other = NULL;
    LT_FAILS(ladle_linear_create(LT_LINEAR(xs[1], 0, 1, 0), 2, xs, LADLE_F64, lt_device(),
                                 1, &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_linear_create(LT_LINEAR(xs[1], 2, 1, 0), 0, xs, LADLE_F64, lt_device(),
                                 1, &op),
             LADLE_ERR_SHAPE);
    /* the descriptor: its size, in_features against x, the flags */
    ladle_linear_desc d;
    ladle_linear_desc_init(&d, 3, 2);
    LT_ASSERT(d.size == sizeof d && d.in_features == 3 && d.out_features == 2 &&
                  d.bias == 1 && d.flags == 0,
              "ladle_linear_desc_init's defaults");
    ladle_linear_desc_init(NULL, 3, 2); /* accepted */
    LT_FAILS(ladle_linear_create(NULL, 2, xs, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_NULL);
    d.size = 4;
    LT_FAILS_SAYING(ladle_linear_create(&d, 2, xs, LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "descriptor size 4");
    ladle_linear_desc_init(&d, 4, 2);
    LT_FAILS_SAYING(ladle_linear_create(&d, 2, xs, LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_SHAPE, "in_features 4");
    ladle_linear_desc_init(&d, 3, 2);
    d.flags = 0x100;
    LT_FAILS_SAYING(ladle_linear_create(&d, 2, xs, LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "unknown flags 0x100");
    d.flags =
        LADLE_CHECKED | LADLE_TP_ROW; /* the distributed twins': nothing on one rank */
    LT_OK(ladle_linear_create(&d, 2, xs, LADLE_F64, lt_device(), 1, &op));
    ladle_op_destroy(&op);
    LT_FAILS(ladle_linear_create(LT_LINEAR(xs[1], 2, 1, 0), 2, xs, LADLE_I64, lt_device(),
                                 1, &op),
             LADLE_ERR_DTYPE);
    LT_FAILS(ladle_linear_create(LT_LINEAR(xs[1], 2, 1, 0), 2, xs, LADLE_F64, lt_device(),
                                 1, NULL),
             LADLE_ERR_NULL);
    LT_OK(ladle_linear_create(LT_LINEAR(xs[1], 2, 1, 0), 2, xs, LADLE_F64, lt_device(), 1,
                              &op));
    LT_OK(ladle_linear_create(LT_LINEAR(xs[1], 2, 1, 0), 2, xs, LADLE_F64, lt_device(), 1,
                              &other));
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    ladle_tensor *xb = lt_tensor(LADLE_F64, 2, big), *xw = lt_tensor(LADLE_F64, 2, wrong);
    ladle_tensor *xf = lt_tensor(LADLE_F32, 2, xs);
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_ctx_create(other, &ctx));
    LT_FAILS(ladle_layer_forward(op, NULL, xb, y), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_layer_forward(op, NULL, xw, y), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_layer_forward(op, NULL, xf, y), LADLE_ERR_DTYPE);
    LT_FAILS(ladle_layer_forward(op, ctx, x, y), LADLE_ERR_ARG);
    LT_FAILS(ladle_layer_forward(op, NULL, x, NULL), LADLE_ERR_NULL);
    LT_FAILS(ladle_op_adjoint(op, y, x), LADLE_ERR_UNSUPPORTED); /* has a bias */
    LT_FAILS(ladle_ctx_create(NULL, &ctx), LADLE_ERR_NULL);
    LT_ASSERT(ladle_op_num_params(op) == 2 && ladle_op_param(op, 2) == NULL, "params");
    ladle_ctx_destroy(&ctx);
    LT_DESTROY(&x, &y, &xb, &xw, &xf);
    ladle_op_destroy(&op);
    ladle_op_destroy(&other);
}
END_TEST

/* A layer that makes NaN passes neither checker: two NaN inner products
 * would otherwise give a "mismatch" of 0, and fmax would drop a NaN error. */
START_TEST(checkers_refuse_nan)
{
    int64_t xs[2] = {3, 5};
    ladle_op *op = NULL;
    LT_OK(ladle_linear_create(LT_LINEAR(xs[1], 4, 0, 0), 2, xs, LADLE_F64, lt_device(), 11,
                              &op));
    lt_set(ladle_op_param(op, 0), 2, NAN);
    ladle_adjoint_result a = {0, 0, 0};
    LT_FAILS(ladle_adjoint_test(op, 3, &a), LADLE_ERR_NUMERIC);
    LT_ASSERT(isnan(a.mismatch), "mismatch %g", a.mismatch);
    ladle_gradient_result g;
    LT_FAILS(ladle_gradient_test(op, 7, 50, &g), LADLE_ERR_NUMERIC);
    LT_ASSERT(isnan(g.input_error) || isnan(g.max_param_error), "errors %g %g", g.input_error,
              g.max_param_error);
    lt_set(ladle_op_param(op, 0), 2, 0.5); /* finite again: both pass */
    LT_OK(ladle_adjoint_test(op, 3, &a));
    LT_OK(ladle_gradient_test(op, 7, 50, &g));
    ladle_op_destroy(&op);
}
END_TEST

LT_SUITE("linear", "linear", LT_CHECK_TIMEOUT, checkers_refuse_nan, values_against_loops,
         gradients, smaller_batch, bad_input)
