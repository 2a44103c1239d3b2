/* Activations, softmax, dropout, reshape, add and concat. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void grad_ok(ladle_op *op, const char *what)
{
    ladle_gradient_result r;
    LT_OK(ladle_gradient_test(op, 5, 300, &r));
    LT_ASSERT(r.input_error < 1e-6, "%s: input gradient error %.2e", what, r.input_error);
}

static double reference(ladle_activation k, double x)
{
    switch (k) {
    case LADLE_RELU:
        return x > 0 ? x : 0;
    case LADLE_LEAKY_RELU:
        return x > 0 ? x : 0.2 * x;
    case LADLE_SIGMOID:
        return 1 / (1 + exp(-x));
    case LADLE_TANH:
        return (exp(2 * x) - 1) / (exp(2 * x) + 1);
    case LADLE_GELU:
        return x * 0.5 * erfc(-x / sqrt(2.0));
    case LADLE_GELU_TANH: /* PyTorch's approximate='tanh' */
        return 0.5 * x * (1 + tanh(sqrt(2 / acos(-1.0)) * (x + 0.044715 * x * x * x)));
    }
    return 0;
}

START_TEST(activations)
{
    int64_t shape[3] = {3, 4, 5};
    for (int k = LADLE_RELU; k <= LADLE_GELU_TANH; k++) {
        ladle_op *op = NULL;
        LT_OK(ladle_activation_create((ladle_activation)k, 0.2, 3, shape, LADLE_F64, lt_device(),
                                      &op));
        ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
        LT_OK(ladle_tensor_fill_random(x, 9, (uint64_t)k));
        for (int i = 0; i < 60; i++)
            lt_set(x, i, 4 * lt_get(x, i)); /* spread to [-4, 4) */
        LT_OK(ladle_op_forward(op, x, y));
        int ok = 1;
        for (int i = 0; i < 60; i++)
            ok &= fabs(lt_get(y, i) - reference((ladle_activation)k, lt_get(x, i))) < 1e-14;
        LT_ASSERT(ok, "activation %d values", k);
        grad_ok(op, "activation");
        /* in place where the backward reads y */
        if (k != LADLE_GELU && k != LADLE_GELU_TANH) {
            ladle_ctx *ctx = NULL;
            ladle_tensor *dy = lt_op_tensor(op, 1), *dx = lt_op_tensor(op, 0);
            LT_OK(ladle_ctx_create(op, &ctx));
            LT_OK(ladle_tensor_fill_random(dy, 1, 1));
            LT_OK(ladle_layer_forward(op, ctx, x, y));
            LT_OK(ladle_layer_backward(op, ctx, dy, dx));
            LT_OK(ladle_layer_forward(op, ctx, x, x));
            LT_OK(ladle_layer_backward(op, ctx, dy, dy));
            for (int i = 0; i < 60; i++)
                ok &= lt_get(x, i) == lt_get(y, i) && lt_get(dy, i) == lt_get(dx, i);
            LT_ASSERT(ok, "activation %d in place", k);
            ladle_ctx_destroy(&ctx);
            ladle_tensor_destroy(&dy);
            ladle_tensor_destroy(&dx);
        } else {
            LT_FAILS(ladle_op_forward(op, x, x), LADLE_ERR_ARG);
        }
        ladle_tensor_destroy(&x);
        ladle_tensor_destroy(&y);
        ladle_op_destroy(&op);
    }
    ladle_op *op = NULL;
    LT_FAILS(ladle_activation_create((ladle_activation)9, 0, 3, shape, LADLE_F64, lt_device(), &op),
             LADLE_ERR_ARG);
}
END_TEST

/* One f32 activation over n points x0 + step i (+ wobble sin i, off the
 * grid), forward and backward with dy = 1: x as f32 holds it, y and dx, as
 * doubles (free them). */
static void act_run(ladle_activation k, ladle_dtype dt, int64_t n, double x0, double step,
                    double wobble, double **xv, double **yv, double **dxv)
{
    ladle_op *op = NULL;
    LT_OK(ladle_activation_create(k, 0.2, 1, &n, dt, lt_device(), &op));
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    ladle_tensor *dy = lt_op_tensor(op, 1), *dx = lt_op_tensor(op, 0);
    double *v = lt_values(x);
    for (int64_t i = 0; i < n; i++)
        v[i] = x0 + step * (double)i + wobble * sin((double)i);
    lt_store(x, v);
    free(v);
    LT_OK(ladle_tensor_fill(dy, 1.0));
    ladle_ctx *ctx = lt_forward_backward(op, x, y, dy, dx);
    *xv = lt_values(x), *yv = lt_values(y), *dxv = lt_values(dx);
    ladle_ctx_destroy(&ctx);
    LT_DESTROY(&x, &y, &dx, &dy);
    ladle_op_destroy(&op);
}

/* f32 uses vectorisable approximations: they must stay at f32 precision
 * over the whole range, tails included. */
START_TEST(f32_accuracy)
{
    int64_t n = 20001;
    for (int k = LADLE_RELU; k <= LADLE_GELU_TANH; k++) {
        double *xv, *yv, *dxv;
        act_run((ladle_activation)k, LADLE_F32, n, -100.0, 0.01, 0.0, &xv, &yv,
                &dxv); /* -100 .. 100 */
        double worst = 0, worst_d = 0;
        for (int64_t i = 0; i < n; i++) {
            double v = xv[i], want = reference((ladle_activation)k, v);
            worst = fmax(worst, fabs(yv[i] - want) / fmax(1e-3, fabs(want)));
            double h = 1e-4, num = (reference((ladle_activation)k, v + h) -
                                    reference((ladle_activation)k, v - h)) / (2 * h);
            /* 1 - y^2 in f32 loses a few ulps of 1 near y = 1; floor at 1e-2 */
            if (fabs(v) > 1e-3) /* away from ReLU's kink */
                worst_d = fmax(worst_d, fabs(dxv[i] - num) / fmax(1e-2, fabs(num)));
        }
        free(xv), free(yv), free(dxv);
        LT_ASSERT(worst < 2e-6 && worst_d < 1e-4,
                  "activation %d: value error %.1e, derivative "
                  "error %.1e",
                  k, worst, worst_d);
    }
}
END_TEST

/* f64 sigmoid, tanh and GELU (tanh) run on fastmath.h's double exponential
 * and tanh: to a few ulps of the C library's, relatively, from -700 to 700
 * (tanh's small arguments included), tails included
 * (no floor under the reference; the GELU (tanh) reference is v sigmoid(2 w)
 * by the C library, since 1 + tanh(w) cancels in the lower tail), and the
 * derivative against the formulas by the C library. */
START_TEST(f64_exp_activations)
{
    int64_t n = 140001;
    const double eps = 0x1p-52;
    ladle_activation ks[3] = {LADLE_SIGMOID, LADLE_TANH, LADLE_GELU_TANH};
    for (int j = 0; j < 3; j++) {
        double *xv, *yv, *dxv;
        act_run(ks[j], LADLE_F64, n, -700.0, 0.01, 0.003, &xv, &yv, &dxv);
        double worst = 0, worst_d = 0;
        for (int64_t i = 0; i < n; i++) {
            double v = xv[i], want, dwant, dscale, arg, sg;
            if (ks[j] == LADLE_SIGMOID) {
                sg = want = v >= 0 ? 1 / (1 + exp(-v)) : exp(v) / (1 + exp(v));
                dscale = dwant = want * (1 - want);
                arg = 0; /* x itself is exact */
            } else if (ks[j] == LADLE_TANH) {
                want = tanh(v);
                sg = fabs(want);
                dscale = dwant = 1 - want * want;
                arg = 0;
            } else {
                double c = sqrt(2 / acos(-1.0)), a = 0.044715, w = c * (v + a * v * v * v);
                sg = w >= 0 ? 1 / (1 + exp(-2 * w)) : exp(2 * w) / (1 + exp(2 * w));
                want = v * sg;
                double t = 2 * v * sg * (1 - sg) * c * (1 + 3 * a * v * v);
                dwant = sg + t;
                dscale = fabs(sg) + fabs(t); /* the sum's terms: it crosses 0 */
                arg = 2 * w;
            }
            /* a few ulps, plus the exponent's argument rounded in another
             * order here than in the layer (up to 3 ulps of it): e^arg
             * turns that into a relative 3 |arg| eps */
            double bound = 8 * eps + 3 * fabs(arg) * eps;
            if (fabs(want) > 1e-300)
                worst = fmax(worst, fabs(yv[i] - want) / fabs(want) / bound);
            /* the derivatives' s (1 - s), here and in the layer, carry s's
             * rounding into 1 - s: a relative eps / (1 - s) each, of the
             * sum's terms where they cancel (GELU (tanh)'s crosses 0) */
            double bound_d = 2 * bound + 2 * eps / fmax(fabs(1 - sg), 1e-300);
            worst_d = fmax(worst_d, fabs(dxv[i] - dwant) / fmax(dscale, 1e-280) / bound_d);
        }
        free(xv), free(yv), free(dxv);
        LT_ASSERT(worst <= 1 && worst_d <= 1,
                  "f64 activation %d: value error %.2f, derivative error %.2f of the bound",
                  (int)ks[j], worst, worst_d);
    }
    /* tanh near 0, relatively: sin(i) times 1e-300, 1e-8 and 0.1 */
    const double scales[3] = {1e-300, 1e-8, 0.1};
    for (int j = 0; j < 3; j++) {
        double *xv, *yv, *dxv, worst = 0;
        act_run(LADLE_TANH, LADLE_F64, 1001, 0.0, 0.0, scales[j], &xv, &yv, &dxv);
        for (int64_t i = 1; i < 1001; i++)
            worst = fmax(worst, fabs(yv[i] - tanh(xv[i])) / fabs(tanh(xv[i])));
        free(xv), free(yv), free(dxv);
        LT_ASSERT(worst <= 8 * eps, "f64 tanh at %g: relative error %.1e", scales[j],
                  worst);
    }
}
END_TEST

/* GELU's special values as the C library's formula gives them: NaN stays
 * NaN, +inf -> +inf, -inf -> -inf * 0 = NaN, signed zeros -> 0. */
static void gelu_specials(ladle_dtype dt)
{
    int64_t m = 5;
    ladle_op *op = NULL;
    LT_OK(ladle_activation_create(LADLE_GELU, 0, 1, &m, dt, lt_device(), &op));
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    double sv[5] = {NAN, INFINITY, -INFINITY, 0.0, -0.0};
    lt_store(x, sv);
    LT_OK(ladle_op_forward(op, x, y));
    double *yv = lt_values(y);
    LT_ASSERT(isnan(yv[0]) && yv[1] == INFINITY && isnan(yv[2]) && yv[3] == 0 && yv[4] == 0,
              "GELU %s of NaN, inf, -inf, 0, -0: %g %g %g %g %g", ladle_dtype_name(dt),
              yv[0], yv[1], yv[2], yv[3], yv[4]);
    free(yv);
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&y);
    ladle_op_destroy(&op);
}

/* f64 GELU, x Phi(x), on fastmath.h's double normal distribution, against
 * long double's erfcl and expl (64-bit mantissas: the reference's own
 * rounding, and that of its argument, which erfc's tail turns into a
 * relative 2 z^2 of it, stay below 1e-16 here), relatively with no floor,
 * from -40 (y below the smallest double) to 40, and the derivative Phi + x
 * phi against the larger of its terms (it crosses 0 near x = -0.75); a y
 * below the normal doubles may be 0 (the exponential's floor). The
 * fit of erfcx is within 8e-16 for |x| < 8.5 and 4.1e-15 beyond
 * (scripts/fit-erfcx.py); the exponential, the square's split and the
 * products add a few ulps. Then the special values, as the C library's
 * formula gives them. */
START_TEST(f64_gelu)
{
    int64_t n = 114287;
    const double eps = 0x1p-52;
    double *xv, *yv, *dxv, worst = 0, worst_d = 0;
    /* CUDA's kernel takes erfc(-x / sqrt 2) and e^{-x^2/2} with their
     * arguments rounded: a relative x^2 eps more in the tail */
    double cuda = lt_device() == LADLE_CUDA ? 2 : 0;
    act_run(LADLE_GELU, LADLE_F64, n, -40.0, 0.0007, 0.0003, &xv, &yv, &dxv);
    for (int64_t i = 0; i < n; i++) {
        long double v = xv[i], cdf = 0.5L * erfcl(-v / sqrtl(2.0L));
        long double pdf = expl(-0.5L * v * v) / sqrtl(2.0L * acosl(-1.0L));
        double bound = (fabs(xv[i]) < 8.5 ? 12 : 40) * eps + cuda * xv[i] * xv[i] * eps;
        double want = (double)(v * cdf);
        if (fabs(want) >= 0x1p-1022)
            worst = fmax(worst, fabs(yv[i] - want) / fabs(want) / bound);
        else /* a subnormal y (x < -37.5) may come out as 0 */
            worst = fmax(worst, fabs(yv[i]) > 0x1p-1022 ? INFINITY : 0.0);
        long double d = cdf + v * pdf, scale = fmaxl(fabsl(v * pdf), cdf);
        if (scale > 1e-300L)
            worst_d = fmax(worst_d, (double)(fabsl(dxv[i] - d) / scale) / bound);
    }
    free(xv), free(yv), free(dxv);
    LT_ASSERT(worst <= 1 && worst_d <= 1,
              "GELU f64: value error %.2f, derivative %.2f of the bound", worst, worst_d);
    gelu_specials(LADLE_F64);
}
END_TEST

/* The f32 GELU's lower tail, relatively: y = x Phi(x) down to x = -13
 * (y ~ -8e-38, still a normal float), with no floor under the reference.
 * The argument of its exponential (-x^2/2 on the CPU, of erfc's x/sqrt2 on
 * the GPU) rounds in f32 to a relative 2^-24, which the Gaussian turns into
 * a relative error of up to x^2 2^-24: the bound allows twice that on top of
 * a few ulps. The density in the derivative does the same. And the
 * special values as f64 gives them: NaN stays NaN, +inf -> +inf,
 * -inf -> -inf * 0 = NaN, signed zeros -> 0. */
START_TEST(gelu_f32_tail)
{
    int64_t n = 1300;
    double *xv, *yv, *dxv;
    act_run(LADLE_GELU, LADLE_F32, n, -13.0, 0.01, 0.003, &xv, &yv, &dxv); /* -13 .. 0 */
    double worst = 0, worst_d = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = xv[i], cdf = 0.5 * erfc(-v / sqrt(2.0));
        double pdf = exp(-0.5 * v * v) / sqrt(2 * acos(-1.0));
        double bound = 2e-6 + v * v * 0x1p-23, dbound = 1e-5 + v * v * 0x1p-23;
        worst = fmax(worst, fabs(yv[i] - v * cdf) / fabs(v * cdf) / bound);
        /* Phi + x pdf, both terms relatively exact: the sum cancels near
         * x = -1 (the derivative's zero), so its error is taken against the
         * larger term */
        double d = cdf + v * pdf;
        worst_d = fmax(worst_d, fabs(dxv[i] - d) / fmax(fabs(v * pdf), cdf) / dbound);
    }
    free(xv), free(yv), free(dxv);
    LT_ASSERT(worst <= 1 && worst_d <= 1,
              "GELU's f32 tail: value error %.2f, derivative %.2f "
              "of the bound",
              worst, worst_d);

    gelu_specials(LADLE_F32);
}
END_TEST

/* Leaky ReLU's slope: NAN is the default 0.01, any finite slope is
 * honoured (negative ones included: then the layer reads x and refuses to
 * work in place), an infinite one refused. */
START_TEST(leaky_slopes)
{
    int64_t shape[2] = {4, 15};
    const double slopes[5] = {NAN, -0.3, -2.0, 0.0, 1.5};
    for (int s = 0; s < 5; s++) {
        double a = isnan(slopes[s]) ? 0.01 : slopes[s];
        ladle_op *op = NULL;
        LT_OK(ladle_activation_create(LADLE_LEAKY_RELU, slopes[s], 2, shape, LADLE_F64,
                                      lt_device(), &op));
        ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
        ladle_tensor *dy = lt_op_tensor(op, 1), *dx = lt_op_tensor(op, 0);
        LT_OK(ladle_tensor_fill_random(x, 9, 3));
        LT_OK(ladle_tensor_fill_random(dy, 9, 4));
        ladle_ctx *ctx = lt_forward_backward(op, x, y, dy, dx);
        int ok = 1;
        for (int i = 0; i < 60; i++) {
            double v = lt_get(x, i), g = lt_get(dy, i);
            ok &= lt_get(y, i) == (v > 0 ? v : a * v);
            ok &= lt_get(dx, i) == (v > 0 ? g : a * g);
        }
        LT_ASSERT(ok, "leaky ReLU with slope %g: values or gradients", a);
        grad_ok(op, "leaky ReLU");
        if (a < 0)
            LT_FAILS(ladle_op_forward(op, x, x), LADLE_ERR_ARG);
        ladle_ctx_destroy(&ctx);
        LT_DESTROY(&x, &y, &dx, &dy);
        ladle_op_destroy(&op);
    }
    ladle_op *op = NULL;
    LT_FAILS(ladle_activation_create(LADLE_LEAKY_RELU, INFINITY, 2, shape, LADLE_F64,
                                     lt_device(), &op),
             LADLE_ERR_ARG);
    LT_ASSERT(op == NULL, "no op");
    LT_OK(ladle_activation_create(LADLE_RELU, INFINITY, 2, shape, LADLE_F64, lt_device(), &op));
    ladle_op_destroy(&op); /* the others ignore param */
}
END_TEST

START_TEST(softmax)
{
    int64_t shape[3] = {2, 5, 3};
    for (int lg = 0; lg < 2; lg++)
        for (int dim = -1; dim < 3; dim++) {
            ladle_op *op = NULL;
            ladle_softmax_kind kind = lg ? LADLE_LOG_SOFTMAX : LADLE_SOFTMAX;
            LT_OK(ladle_softmax_create(3, shape, dim, kind, LADLE_F64, lt_device(), &op));
            ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
            LT_OK(ladle_tensor_fill_random(x, 2, 0));
            lt_set(x, 0, 800); /* stable even for large logits */
            LT_OK(ladle_op_forward(op, x, y));
            int d = dim < 0 ? 2 : dim, ok = 1;
            int64_t stride = d == 2 ? 1 : d == 1 ? 3 : 15, len = shape[d];
            for (int64_t i = 0; i < 30; i++) {
                if ((i / stride) % len != 0)
                    continue; /* visit each row from its first element */
                double mx = -INFINITY, z = 0, total = 0;
                for (int64_t k = 0; k < len; k++)
                    mx = fmax(mx, lt_get(x, i + k * stride));
                for (int64_t k = 0; k < len; k++)
                    z += exp(lt_get(x, i + k * stride) - mx);
                for (int64_t k = 0; k < len; k++) {
                    double lp = lt_get(x, i + k * stride) - mx - log(z), p = exp(lp);
                    double got = lt_get(y, i + k * stride);
                    ok &= lg ? fabs(got - lp) < 1e-12 : fabs(got - p) < 1e-15;
                    total += lg ? exp(got) : got;
                }
                ok &= fabs(total - 1) < 1e-14;
            }
            LT_ASSERT(ok, "softmax log=%d dim=%d", lg, dim);
            lt_set(x, 0, 0.3);
            grad_ok(op, lg ? "log-softmax" : "softmax");
            ladle_tensor_destroy(&x);
            ladle_tensor_destroy(&y);
            ladle_op_destroy(&op);
        }
    ladle_op *op = NULL;
    LT_FAILS(ladle_softmax_create(3, shape, 3, LADLE_SOFTMAX, LADLE_F64, lt_device(), &op),
             LADLE_ERR_ARG);
    /* an unknown kind is refused, naming the value */
    ladle_status st =
        ladle_softmax_create(3, shape, 1, (ladle_softmax_kind)7, LADLE_F64, lt_device(), &op);
    LT_ASSERT(st == LADLE_ERR_ARG && op == NULL && strstr(ladle_error_message(), "kind 7"),
              "an unknown kind: %s (%s)", ladle_status_name(st), ladle_error_message());
    ladle_error_clear();
}
END_TEST

/* Softmax along the batch dimension takes a smaller batch like every
 * layer, normalising over the rows it has: values against loops, the
 * gradient against finite differences, at batch 3 of a planned 5. */
/* f32 softmax and log-softmax against the same formulas in double on the
 * f32 inputs: contiguous rows (the vectorised path; 1000 and 37 long, so
 * that the vectors' tails count) and a strided dimension (the general
 * loops); inputs over +-30 with some entries -inf, as an attention mask
 * gives (their softmax exactly 0). Values within a few f32 ulps; gradients
 * y (dy - sum dy y) and dy - p sum dy, within a few ulps of their terms. */
START_TEST(softmax_rows)
{
    static const int64_t shapes[3][3] = {{3, 1000, 1}, {5, 37, 1}, {2, 7, 3}};
    unsigned seed = 11;
    for (int f64 = 0; f64 < 2; f64++)
        for (int c = 0; c < 3; c++)
            for (int lg = 0; lg < 2; lg++) {
                /* f64: the reference's own rounding of x - mx - log z, up to 60
                 * here, is 60 2^-53 relative in p */
                double tol = f64 ? 1e-13 : 1e-6;
                const int64_t *sh = shapes[c];
                int dim = 1, n = (int)(sh[0] * sh[1] * sh[2]);
                ladle_op *op = NULL;
                LT_OK(ladle_softmax_create(3, sh, dim,
                                           lg ? LADLE_LOG_SOFTMAX : LADLE_SOFTMAX,
                                           f64 ? LADLE_F64 : LADLE_F32, lt_device(), &op));
                ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
                ladle_tensor *dy = lt_op_tensor(op, 1), *dx = lt_op_tensor(op, 0);
                double *xv = malloc(sizeof(double) * (size_t)n),
                       *gv = malloc(sizeof(double) * (size_t)n);
                for (int i = 0; i < n; i++) {
                    seed = seed * 1103515245u + 12345u;
                    xv[i] = 60.0 * ((double)(seed >> 8) / 16777216.0 - 0.5);
                    gv[i] = (double)((seed >> 4) % 1000) / 500.0 - 1.0;
                    if (i % 13 == 5)
                        xv[i] = -INFINITY;
                }
                lt_store(x, xv);
                lt_store(dy, gv);
                free(xv), free(gv);
                ladle_ctx *ctx = lt_forward_backward(op, x, y, dy, dx);
                double *X = lt_values(x), *Y = lt_values(y), *G = lt_values(dy),
                       *D = lt_values(dx);
                double worst = 0, worst_d = 0;
                int zeros = 1;
                int64_t len = sh[1], inner = sh[2];
                for (int64_t o = 0; o < sh[0]; o++)
                    for (int64_t in = 0; in < inner; in++) {
                        int64_t b = o * len * inner + in;
                        double mx = -INFINITY, z = 0, acc = 0;
                        for (int64_t k = 0; k < len; k++)
                            mx = fmax(mx, X[b + k * inner]);
                        for (int64_t k = 0; k < len; k++)
                            z += exp(X[b + k * inner] - mx);
                        for (int64_t k = 0; k < len; k++) {
                            int64_t i = b + k * inner;
                            double lp = X[i] - mx - log(z), p = exp(lp);
                            if (lg)
                                worst = fmax(worst, fabs(Y[i] - lp) / fmax(1.0, fabs(lp)));
                            else if (p > 1e-30)
                                worst = fmax(worst, fabs(Y[i] - p) / p);
                            if (X[i] == -INFINITY)
                                zeros &= lg ? Y[i] == -INFINITY : Y[i] == 0;
                            acc += lg ? G[i] : G[i] * Y[i];
                        }
                        for (int64_t k = 0; k < len; k++) {
                            int64_t i = b + k * inner;
                            double p = lg ? exp(Y[i]) : Y[i];
                            double want = lg ? G[i] - p * acc : Y[i] * (G[i] - acc);
                            double scale = lg ? fabs(G[i]) + p * fabs(acc)
                                              : fabs(Y[i]) * (fabs(G[i]) + fabs(acc));
                            if (scale > 0)
                                worst_d = fmax(worst_d, fabs(D[i] - want) / scale);
                            else
                                worst_d = fmax(worst_d, fabs(D[i]));
                        }
                    }
                free(X), free(Y), free(G), free(D);
                LT_ASSERT(worst < tol && worst_d < tol && zeros,
                          "%s %s of %lldx%lldx%lld: values %.1e, gradients %.1e, masked %s",
                          f64 ? "f64" : "f32", lg ? "log-softmax" : "softmax",
                          (long long)sh[0], (long long)sh[1], (long long)sh[2], worst,
                          worst_d, zeros ? "ok" : "not 0");
                ladle_ctx_destroy(&ctx);
                LT_DESTROY(&x, &y, &dx, &dy);
                ladle_op_destroy(&op);
            }
}
END_TEST

START_TEST(softmax_batch)
{
    int64_t shape[3] = {5, 3, 2}, small[3] = {3, 3, 2};
    for (int lg = 0; lg < 2; lg++) {
        ladle_op *op = NULL;
        ladle_softmax_kind kind = lg ? LADLE_LOG_SOFTMAX : LADLE_SOFTMAX;
        LT_OK(ladle_softmax_create(3, shape, 0, kind, LADLE_F64, lt_device(), &op));
        ladle_tensor *x = lt_tensor(LADLE_F64, 3, small), *y = lt_tensor(LADLE_F64, 3, small);
        ladle_tensor *dy = lt_tensor(LADLE_F64, 3, small), *dx = lt_tensor(LADLE_F64, 3, small);
        LT_OK(ladle_tensor_fill_random(x, 2, 5));
        LT_OK(ladle_tensor_fill_random(dy, 2, 6));
        ladle_ctx *ctx = lt_forward_backward(op, x, y, dy, dx);
        double worst = 0, worst_d = 0;
        for (int64_t j = 0; j < 6; j++) { /* each column: the 3 rows present */
            double mx = -INFINITY, z = 0;
            for (int64_t r = 0; r < 3; r++)
                mx = fmax(mx, lt_get(x, r * 6 + j));
            for (int64_t r = 0; r < 3; r++)
                z += exp(lt_get(x, r * 6 + j) - mx);
            for (int64_t r = 0; r < 3; r++) {
                double lp = lt_get(x, r * 6 + j) - mx - log(z);
                worst = fmax(worst, fabs(lt_get(y, r * 6 + j) - (lg ? lp : exp(lp))));
            }
        }
        ladle_tensor *yp = lt_tensor(LADLE_F64, 3, small);
        for (int64_t i = 0; i < 18; i++) { /* d/dx_i of sum dy y */
            double v = lt_get(x, i), h = 1e-6, lp = 0, lm = 0;
            lt_set(x, i, v + h);
            LT_OK(ladle_op_forward(op, x, yp));
            for (int64_t k = 0; k < 18; k++)
                lp += lt_get(dy, k) * lt_get(yp, k);
            lt_set(x, i, v - h);
            LT_OK(ladle_op_forward(op, x, yp));
            for (int64_t k = 0; k < 18; k++)
                lm += lt_get(dy, k) * lt_get(yp, k);
            lt_set(x, i, v);
            double fd = (lp - lm) / (2 * h);
            worst_d = fmax(worst_d, fabs(fd - lt_get(dx, i)) / fmax(1e-3, fabs(fd)));
        }
        LT_ASSERT(worst < 1e-14 && worst_d < 1e-6,
                  "softmax log=%d along a batch of 3: values %.1e, gradient %.1e", lg, worst,
                  worst_d);
        ladle_ctx_destroy(&ctx);
        ladle_tensor_destroy(&x), ladle_tensor_destroy(&y), ladle_tensor_destroy(&yp);
        ladle_tensor_destroy(&dx), ladle_tensor_destroy(&dy);
        ladle_op_destroy(&op);
    }
}
END_TEST

START_TEST(dropout)
{
    int64_t shape[2] = {100, 100};
    ladle_op *op = NULL;
    LT_OK(ladle_dropout_create(2, shape, 0.3, LADLE_F64, lt_device(), 42, &op));
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1), *y2 = lt_op_tensor(op, 1);
    LT_OK(ladle_tensor_fill(x, 1.0));
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_ctx_create(op, &ctx));
    LT_OK(ladle_layer_forward(op, ctx, x, y));
    int kept = 0, scaled = 1;
    for (int i = 0; i < 10000; i++) {
        kept += lt_get(y, i) != 0;
        scaled &= lt_get(y, i) == 0 || fabs(lt_get(y, i) - 1 / 0.7) < 1e-15;
    }
    LT_ASSERT(abs(kept - 7000) < 200 && scaled, "kept %d of 10000", kept);
    /* the step advanced: a new mask; replaying the step gives the same one */
    LT_OK(ladle_layer_forward(op, NULL, x, y2));
    int same = 1;
    for (int i = 0; i < 10000; i++)
        same &= lt_get(y, i) == lt_get(y2, i);
    LT_ASSERT(!same, "a new step draws a new mask");
    LT_OK(ladle_dropout_set_step(op, 0));
    LT_OK(ladle_layer_forward(op, NULL, x, y2));
    same = 1;
    for (int i = 0; i < 10000; i++)
        same &= lt_get(y, i) == lt_get(y2, i);
    LT_ASSERT(same, "the mask depends only on (seed, step, index)");
    /* the backward applies the forward's mask */
    ladle_tensor *dx = lt_op_tensor(op, 0);
    LT_OK(ladle_layer_backward(op, ctx, x, dx));
    same = 1;
    for (int i = 0; i < 10000; i++)
        same &= lt_get(dx, i) == lt_get(y, i);
    LT_ASSERT(same, "backward mask");
    grad_ok(op, "dropout");
    LT_OK(ladle_layer_set_training(op, 0));
    LT_OK(ladle_op_forward(op, x, y));
    same = 1;
    for (int i = 0; i < 10000; i++)
        same &= lt_get(y, i) == 1.0;
    LT_ASSERT(same, "evaluation is the identity");
    LT_FAILS(ladle_dropout_create(2, shape, 1.5, LADLE_F64, lt_device(), 1, &op), LADLE_ERR_ARG);
    ladle_ctx_destroy(&ctx);
    LT_DESTROY(&x, &y, &y2, &dx);
    ladle_op_destroy(&op);
}
END_TEST

START_TEST(reshape_add_concat)
{
    int64_t in[4] = {2, 3, 4, 5}, outs[3] = {2, 12, 5};
    ladle_op *op = NULL;
    LT_OK(ladle_reshape_create(4, in, 3, outs, LADLE_F64, lt_device(), &op));
    lt_adjoint_ok(op, 1, "reshape");
    grad_ok(op, "reshape");
    ladle_op_destroy(&op);
    LT_OK(ladle_flatten_create(4, in, LADLE_F32, lt_device(), &op));
    int nd;
    int64_t ys[4];
    ladle_op_y_shape(op, &nd, ys);
    LT_ASSERT(nd == 2 && ys[0] == 2 && ys[1] == 60, "flatten shape");
    ladle_op_destroy(&op);
    LT_FAILS(ladle_reshape_create(4, in, 3, (int64_t[]){2, 12, 6}, LADLE_F64, lt_device(), &op),
             LADLE_ERR_SHAPE);
    /* moving the batch: N x T x V to N T x V, the adjoint and the exact
     * shape only (a smaller batch would not know its rows) */
    LT_OK(ladle_reshape_create(4, in, 2, (int64_t[]){6, 20}, LADLE_F64, lt_device(), &op));
    lt_adjoint_ok(op, 2, "reshape moving the batch");
    {
        ladle_tensor *xs = lt_tensor(LADLE_F64, 4, (int64_t[]){1, 3, 4, 5});
        ladle_tensor *ys2 = lt_tensor(LADLE_F64, 2, (int64_t[]){3, 20});
        LT_FAILS(ladle_layer_forward(op, NULL, xs, ys2), LADLE_ERR_SHAPE);
        ladle_tensor_destroy(&xs);
        ladle_tensor_destroy(&ys2);
    }
    ladle_op_destroy(&op);

    int64_t s[2] = {2, 3};
    ladle_tensor *a = lt_tensor(LADLE_F64, 2, s), *b = lt_tensor(LADLE_F64, 2, s);
    ladle_tensor *c = lt_tensor(LADLE_F32, 2, s), *w = lt_tensor(LADLE_F64, 1, (int64_t[]){6});
    for (int i = 0; i < 6; i++)
        lt_set(a, i, i), lt_set(b, i, 10 * i);
    LT_OK(ladle_add(a, b, a));
    int ok = 1;
    for (int i = 0; i < 6; i++)
        ok &= lt_get(a, i) == 11 * i;
    LT_ASSERT(ok, "add in place");
    LT_FAILS(ladle_add(a, c, a), LADLE_ERR_DTYPE);
    LT_FAILS(ladle_add(a, w, a), LADLE_ERR_SHAPE);

    /* concat 2x1x2, 2x2x2, 2x3x2 along dimension 1 into 2x6x2, and back */
    ladle_tensor *p[3], *q[3];
    for (int k = 0; k < 3; k++) {
        int64_t ps[3] = {2, k + 1, 2};
        p[k] = lt_tensor(LADLE_F64, 3, ps);
        q[k] = lt_tensor(LADLE_F64, 3, ps);
        for (int64_t i = 0; i < ladle_tensor_numel(p[k]); i++)
            lt_set(p[k], i, 100 * k + i);
    }
    ladle_tensor *cat = lt_tensor(LADLE_F64, 3, (int64_t[]){2, 6, 2});
    LT_OK(ladle_concat(3, (const ladle_tensor *const *)p, 1, cat));
    /* element (n, ch, j): part k holds channels [k(k+1)/2, ...) */
    for (int n = 0; n < 2; n++)
        for (int ch = 0; ch < 6; ch++)
            for (int j = 0; j < 2; j++) {
                int k = ch < 1 ? 0 : ch < 3 ? 1 : 2, first = k * (k + 1) / 2;
                double want = 100 * k + (n * (k + 1) + (ch - first)) * 2 + j;
                ok &= lt_get(cat, (n * 6 + ch) * 2 + j) == want;
            }
    LT_ASSERT(ok, "concat along channels");
    LT_OK(ladle_concat_backward(cat, 1, 3, q));
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < ladle_tensor_numel(q[k]); i++)
            ok &= lt_get(q[k], i) == lt_get(p[k], i);
    LT_ASSERT(ok, "the split returns the parts");
    LT_FAILS(ladle_concat(2, (const ladle_tensor *const *)p, 1, cat), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_concat(3, (const ladle_tensor *const *)p, 5, cat), LADLE_ERR_ARG);
    for (int k = 0; k < 3; k++) {
        ladle_tensor_destroy(&p[k]);
        ladle_tensor_destroy(&q[k]);
    }
    LT_DESTROY(&cat, &a, &b, &c, &w);
}
END_TEST

LT_SUITE("activation", "activation", LT_CHECK_TIMEOUT, activations, f32_accuracy,
         gelu_f32_tail, f64_exp_activations, f64_gelu, leaky_slopes, softmax, softmax_rows,
         softmax_batch, dropout, reshape_add_concat)
