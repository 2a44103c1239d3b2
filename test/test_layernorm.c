/* Layer norm and RMS norm: values and gradients against loops written
 * here, finite differences in f64, f32 against f64 on data far from zero,
 * smaller batches, forward without a ctx, bad input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* The reference: rows x len values, layer norm (rms 0) or RMS norm, with w
 * and b optional (NULL), in double: y, and for dy the backward dx and the
 * weight gradients gw, gb (len each, overwritten). The backward is derived
 * here from the chain rule written out per element pair (an O(len^2) loop,
 * so it shares nothing with the kernels' closed form):
 *   dx_k = sum_j dy_j w_j d(xhat_j)/d(x_k). */
static void reference(int rms, int64_t rows, int64_t len, double eps, const double *x,
                      const double *w, const double *b, const double *dy, double *y,
                      double *dx, double *gw, double *gb)
{
    for (int64_t j = 0; j < len; j++)
        gw[j] = gb[j] = 0;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * len, *gr = dy + r * len;
        double mu = 0, var = 0, ms = 0;
        for (int64_t j = 0; j < len; j++) {
            mu += xr[j] / (double)len;
            ms += xr[j] * xr[j] / (double)len;
        }
        for (int64_t j = 0; j < len; j++)
            var += (xr[j] - mu) * (xr[j] - mu) / (double)len;
        double s = rms ? 1 / sqrt(ms + eps) : 1 / sqrt(var + eps);
        double c = rms ? 0 : mu;
        for (int64_t j = 0; j < len; j++) {
            double xh = (xr[j] - c) * s;
            y[r * len + j] = xh * (w ? w[j] : 1) + (b ? b[j] : 0);
            gw[j] += gr[j] * xh;
            gb[j] += gr[j];
        }
        for (int64_t k = 0; k < len; k++) {
            double acc = 0;
            for (int64_t j = 0; j < len; j++) {
                /* d xhat_j / d x_k */
                double d;
                if (rms)
                    d = s * ((j == k) - xr[j] * xr[k] * s * s / (double)len);
                else
                    d = s * ((j == k) - 1.0 / (double)len -
                             (xr[j] - mu) * (xr[k] - mu) * s * s / (double)len);
                acc += gr[j] * (w ? w[j] : 1) * d;
            }
            dx[r * len + k] = acc;
        }
    }
}

typedef struct config {
    int rms, k, affine, bias;
    double eps;
} config;

static ladle_status make(const config *c, int ndim, const int64_t *xs, ladle_dtype dt,
                         ladle_op **op)
{
    if (c->rms) {
        ladle_rmsnorm_desc d;
        ladle_rmsnorm_desc_init(&d, c->k);
        d.eps = c->eps;
        d.elementwise_affine = c->affine;
        return ladle_rmsnorm_create(&d, ndim, xs, dt, lt_device(), op);
    }
    ladle_layernorm_desc d;
    ladle_layernorm_desc_init(&d, c->k);
    d.eps = c->eps;
    d.elementwise_affine = c->affine;
    d.bias = c->bias;
    return ladle_layernorm_create(&d, ndim, xs, dt, lt_device(), op);
}

/* lt_layer_pass's reference: rows x len values, the weight and bias hw,
 * hb (NULL when absent). */
typedef struct norm_ref {
    const config *c;
    int64_t rows, len;
    const double *hw, *hb;
    int nparams;
} norm_ref;

static void norm_reference(const void *arg, const double *x, const double *dy, double *y,
                           double *dx, double *const *grads)
{
    const norm_ref *r = arg;
    double *gw = malloc(sizeof(double) * (size_t)r->len),
           *gb = malloc(sizeof(double) * (size_t)r->len);
    reference(r->c->rms, r->rows, r->len, r->c->eps, x, r->hw, r->hb, dy, y, dx, gw, gb);
    for (int p = 0; p < r->nparams; p++)
        memcpy(grads[p], p == 0 ? gw : gb, sizeof(double) * (size_t)r->len);
    free(gw), free(gb);
}

/* lt_layer_pass for a batch of n (<= xs[0]) against the reference. */
static double run_against_reference(const config *c, int ndim, const int64_t *xs, int64_t n,
                                    ladle_dtype dt, uint64_t seed, double offset)
{
    ladle_op *op = NULL;
    LT_OK(make(c, ndim, xs, dt, &op));
    int64_t cs[LADLE_MAX_NDIM];
    memcpy(cs, xs, sizeof(int64_t) * (size_t)ndim);
    if (c->k < ndim)
        cs[0] = n;
    int64_t len = 1, total = 1;
    for (int d = 0; d < ndim; d++)
        total *= cs[d];
    for (int d = ndim - c->k; d < ndim; d++)
        len *= xs[d];
    ladle_tensor *x = lt_tensor(dt, ndim, cs), *y = lt_tensor(dt, ndim, cs);
    ladle_tensor *dy = lt_tensor(dt, ndim, cs), *dx = lt_tensor(dt, ndim, cs);
    LT_OK(ladle_tensor_fill_random(x, seed, 0));
    LT_OK(ladle_tensor_fill_random(dy, seed, 1));
    double *hx = lt_values(x);
    for (int64_t i = 0; i < total; i++) /* a different offset and scale per row */
        hx[i] = offset + (1 + (double)(i / len % 3)) * hx[i] + (double)(i / len % 5);
    lt_store(x, hx);
    free(hx);
    norm_ref r = {c, total / len, len, NULL, NULL, ladle_op_num_params(op)};
    double *hw = NULL, *hb = NULL;
    if (c->affine) {
        ladle_tensor *w = ladle_op_param(op, 0);
        LT_OK(ladle_tensor_fill_random(w, seed, 2));
        r.hw = hw = lt_values(w);
        if (ladle_op_num_params(op) > 1) {
            LT_OK(ladle_tensor_fill_random(ladle_op_param(op, 1), seed, 3));
            r.hb = hb = lt_values(ladle_op_param(op, 1));
        }
    }
    double worst = lt_layer_pass(op, x, y, dy, dx, norm_reference, &r);
    free(hw), free(hb);
    LT_DESTROY(&x, &y, &dy, &dx);
    ladle_op_destroy(&op);
    return worst;
}

START_TEST(values_against_loops)
{
    int64_t shapes[4][4] = {{3, 7}, {4, 3, 5}, {2, 3, 4, 5}, {5, 1, 33}};
    int ndims[4] = {2, 3, 4, 3};
    for (int s = 0; s < 4; s++)
        for (int k = 1; k <= ndims[s]; k++)
            for (int variant = 0; variant < 4; variant++) {
                config c = {.rms = variant == 3,
                            .k = k,
                            .affine = variant != 0,
                            .bias = variant == 2,
                            .eps = variant == 1 ? 0.3 : 1e-5};
                double e = run_against_reference(&c, ndims[s], shapes[s], shapes[s][0],
                                                 LADLE_F64, (uint64_t)(17 * s + k), 0.0);
                LT_ASSERT(e < 1e-12, "%s shape %d k %d variant %d: error %.2e",
                          c.rms ? "rms" : "ln", s, k, variant, e);
            }
    /* RMS norm without a weight */
    config c = {.rms = 1, .k = 2, .affine = 0, .eps = 1e-6};
    double e = run_against_reference(&c, 3, shapes[1], 4, LADLE_F64, 5, 0.0);
    LT_ASSERT(e < 1e-12, "rms, no weight: error %.2e", e);
}
END_TEST

START_TEST(smaller_batch)
{
    int64_t xs[3] = {6, 4, 9};
    for (int rms = 0; rms < 2; rms++)
        for (int64_t n = 1; n <= 6; n += 2) {
            config c = {.rms = rms, .k = 1, .affine = 1, .bias = 1, .eps = 1e-5};
            double e =
                run_against_reference(&c, 3, xs, n, LADLE_F64, (uint64_t)(40 + n), 0.0);
            LT_ASSERT(e < 1e-12, "%s batch %lld of 6: error %.2e", rms ? "rms" : "ln",
                      (long long)n, e);
        }
    /* a batch of 0 does nothing and fails nothing */
    ladle_layernorm_desc d;
    ladle_layernorm_desc_init(&d, 1);
    ladle_op *op = NULL;
    LT_OK(ladle_layernorm_create(&d, 3, xs, LADLE_F64, lt_device(), &op));
    lt_layer_empty_batch(op, 3, (const int64_t[]){0, 4, 9});
    ladle_op_destroy(&op);
}
END_TEST

START_TEST(gradients_by_finite_differences)
{
    int64_t shapes[3][4] = {{3, 6}, {2, 3, 4}, {2, 2, 3, 2}};
    int ndims[3] = {2, 3, 4};
    for (int s = 0; s < 3; s++)
        for (int k = 1; k <= ndims[s]; k++)
            for (int variant = 0; variant < 4; variant++) {
                config c = {.rms = variant >= 2,
                            .k = k,
                            .affine = variant != 0,
                            .bias = variant == 1,
                            .eps = 1e-5};
                ladle_op *op = NULL;
                LT_OK(make(&c, ndims[s], shapes[s], LADLE_F64, &op));
                for (int p = 0; p < ladle_op_num_params(op); p++)
                    LT_OK(ladle_tensor_fill_random(ladle_op_param(op, p), 9, (uint64_t)p));
                ladle_gradient_result r;
                LT_OK(ladle_gradient_test(op, (uint64_t)(100 + s), 200, &r));
                LT_ASSERT(r.input_error < 1e-6 && r.max_param_error < 1e-6 &&
                              r.nparams == ladle_op_num_params(op),
                          "%s shape %d k %d variant %d: x %.1e params %.1e",
                          c.rms ? "rms" : "ln", s, k, variant, r.input_error,
                          r.max_param_error);
                ladle_op_destroy(&op);
            }
}
END_TEST

/* f32 against f64 on data 1e4 + noise (std about 1): the statistics hold
 * to double accuracy in f32 (two passes summed in double), so every output
 * is its f64 twin rounded once, up to a few units of f32's epsilon
 * (1.19e-7). The f64 run gets the same f32-rounded input, so the input's
 * own rounding (about 5e-4 absolute at 1e4) is no part of the comparison. A
 * single-pass E[x^2] - E[x]^2 in f32 on this data is off by more than the
 * variance itself, which the check at the end shows. */
/* f32 against f64 on the same values (rows of len, around `offset` with
 * spread `spread`; the first `lead` values of each row spread by
 * lead_spread instead): y, dx per element against max(1, |value|), dw and db (sums of
 * `rows` terms of size about 1) against rows. The worst of them. */
typedef struct spread {
    double offset, spread, lead_spread;
    int64_t len, lead;
} spread;

static double spread_x(int64_t i, double v, const void *arg)
{
    const spread *p = arg;
    return p->offset + (i % p->len < p->lead ? p->lead_spread : p->spread) * v;
}

static double f32_against_f64(int rms, int ndim, const int64_t *xs, double offset,
                              double spread_by, int lead, double lead_spread)
{
    config c = {.rms = rms, .k = 1, .affine = 1, .bias = 1, .eps = 1e-5};
    ladle_op *ops[2] = {NULL, NULL};
    LT_OK(make(&c, ndim, xs, LADLE_F32, &ops[0]));
    LT_OK(make(&c, ndim, xs, LADLE_F64, &ops[1]));
    for (int p = 0; p < ladle_op_num_params(ops[0]); p++)
        LT_OK(ladle_tensor_fill_random(ladle_op_param(ops[0], p), 3, (uint64_t)p));
    int64_t total = 1, len = xs[ndim - 1];
    for (int d = 0; d < ndim; d++)
        total *= xs[d];
    spread sp = {offset, spread_by, lead_spread, len, lead};
    ladle_tensor *t[2][4];
    ladle_ctx *ctx[2] = {NULL, NULL};
    lt_twin_run(ops, ndim, xs, 21, spread_x, &sp, t, ctx);
    double worst = 0;
    for (int i = 1; i < 4; i += 2) {
        double *a = lt_values(t[0][i]), *b = lt_values(t[1][i]);
        for (int64_t e = 0; e < total; e++)
            worst = fmax(worst, fabs(a[e] - b[e]) / fmax(1, fabs(b[e])));
        free(a), free(b);
    }
    for (int p = 0; p < ladle_op_num_params(ops[0]); p++) {
        double *a = lt_values(ladle_op_grad(ops[0], p)), *b = lt_values(ladle_op_grad(ops[1], p));
        for (int64_t e = 0; e < len; e++)
            worst = fmax(worst, fabs(a[e] - b[e]) / (double)(total / len));
        free(a), free(b);
    }
    lt_twin_free(ops, t, ctx);
    return worst;
}

START_TEST(f32_far_from_zero)
{
    /* rows of 64; then rows of 1000 (not a multiple of the kernels' 32
     * lanes) whose first 32 values, from which f32 rows take the shift of
     * their one-pass statistics, lie far from the rest; then rows at 1e6
     * spread by 1 to 3 (a variance 1e12 below the mean's square: a one-pass
     * variance without the shift loses it even in double) */
    int64_t xs[3] = {4, 5, 64}, long_rows[2] = {3, 1000};
    for (int rms = 0; rms < 2; rms++) {
        const char *name = rms ? "rms" : "ln";
        double worst = f32_against_f64(rms, 3, xs, 1e4, 1.7, 0, 0);
        LT_ASSERT(worst < 4 * 1.19e-7, "%s f32 vs f64 at 1e4: %.2e (want < 4 eps)", name,
                  worst);
        double lead = f32_against_f64(rms, 2, long_rows, 1e4, 1.7, 32, 400);
        LT_ASSERT(lead < 4 * 1.19e-7, "%s f32 vs f64, first 32 apart: %.2e (want < 4 eps)",
                  name, lead);
        /* and against the loops, which share no sum with the kernels */
        config c = {.rms = rms, .k = 1, .affine = 1, .bias = 1, .eps = 1e-5};
        double far = run_against_reference(&c, 2, long_rows, 3, LADLE_F32, 61, 1e6);
        LT_ASSERT(far < 4 * 1.19e-7, "%s f32 at 1e6 against the loops: %.2e (want < 4 eps)",
                  name, far);
        if (lt_rank == 0 && getenv("LADLE_TEST_VERBOSE"))
            printf("%s: f32 against f64 at 1e4: %.2e, first 32 apart %.2e; against the "
                   "loops at 1e6 %.2e\n",
                   name, worst, lead, far);
    }
    /* the data is hard: a one-pass f32 variance of one row misses badly */
    float row[64], s = 0, s2 = 0;
    double mu = 0, var = 0;
    for (int i = 0; i < 64; i++) {
        row[i] = (float)(1e4 + 1.7 * sin(3.0 * i + 0.5));
        s += row[i];
        s2 += row[i] * row[i];
        mu += row[i] / 64.0;
    }
    for (int i = 0; i < 64; i++)
        var += (row[i] - mu) * (row[i] - mu) / 64.0;
    double naive = (double)(s2 / 64 - (s / 64) * (s / 64));
    LT_ASSERT(fabs(naive - var) > 0.1 * var, "naive f32 variance %g vs %g", naive, var);
}
END_TEST

START_TEST(contexts_and_parameters)
{
    int64_t xs[3] = {2, 3, 4};
    ladle_layernorm_desc d;
    ladle_layernorm_desc_init(&d, 2);
    LT_ASSERT(d.size == sizeof d && d.eps == 1e-5 && d.elementwise_affine && d.bias,
              "layer norm defaults");
    ladle_op *op = NULL;
    LT_OK(ladle_layernorm_create(&d, 3, xs, LADLE_F32, lt_device(), &op));
    LT_ASSERT(ladle_op_kind_of(op) == LADLE_OP_LAYERNORM && ladle_op_num_params(op) == 2 &&
                  strcmp(ladle_op_param_name(op, 0), "weight") == 0 &&
                  strcmp(ladle_op_param_name(op, 1), "bias") == 0 &&
                  ladle_tensor_ndim(ladle_op_param(op, 0)) == 2 &&
                  ladle_tensor_shape(ladle_op_param(op, 0))[0] == 3 &&
                  ladle_tensor_shape(ladle_op_param(op, 0))[1] == 4 &&
                  lt_get(ladle_op_param(op, 0), 5) == 1 &&
                  lt_get(ladle_op_param(op, 1), 5) == 0,
              "layer norm parameters: weight 1, bias 0 of the normalized shape");
    ladle_op_destroy(&op);
    ladle_rmsnorm_desc r;
    ladle_rmsnorm_desc_init(&r, 1);
    LT_ASSERT(r.size == sizeof r && r.eps == 1e-6 && r.elementwise_affine, "rms defaults");
    LT_OK(ladle_rmsnorm_create(&r, 3, xs, LADLE_F64, lt_device(), &op));
    LT_ASSERT(ladle_op_kind_of(op) == LADLE_OP_RMSNORM && ladle_op_num_params(op) == 1 &&
                  ladle_tensor_numel(ladle_op_param(op, 0)) == 4,
              "rms norm: one weight");
    /* two contexts in flight keep their own statistics */
    lt_ctx_pair p;
    int same = lt_ctx_pair_run(op, xs, 1, &p);
    /* caller memory on the CPU */
    if (lt_device() == LADLE_CPU)
        lt_ctx_in_caller_memory(op, &p, same);
    lt_ctx_pair_free(&p);
    ladle_op_destroy(&op);
}
END_TEST

/* Layer norm d and RMS norm r of f64 x of shape xs (3 dimensions) are
 * both refused as bad arguments (*op left as it is: NULL). */
static void both_refuse(const ladle_layernorm_desc *d, const ladle_rmsnorm_desc *r,
                        const int64_t *xs, ladle_op **op)
{
    LT_FAILS(ladle_layernorm_create(d, 3, xs, LADLE_F64, lt_device(), op), LADLE_ERR_ARG);
    LT_FAILS(ladle_rmsnorm_create(r, 3, xs, LADLE_F64, lt_device(), op), LADLE_ERR_ARG);
}

START_TEST(bad_input)
{
    int64_t xs[3] = {2, 3, 4}, bad[3] = {2, 3, 0}, neg[3] = {2, -3, 4};
    ladle_layernorm_desc d;
    ladle_rmsnorm_desc r;
    ladle_op *op = NULL;
    ladle_layernorm_desc_init(&d, 1);
    ladle_rmsnorm_desc_init(&r, 1);
    LT_FAILS(ladle_layernorm_create(NULL, 3, xs, LADLE_F32, lt_device(), &op),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_layernorm_create(&d, 3, NULL, LADLE_F32, lt_device(), &op),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_layernorm_create(&d, 3, xs, LADLE_F32, lt_device(), NULL),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_rmsnorm_create(NULL, 3, xs, LADLE_F32, lt_device(), &op),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_rmsnorm_create(&r, 3, xs, LADLE_F32, lt_device(), NULL), LADLE_ERR_NULL);
    double eps[4] = {0, -1e-5, NAN, INFINITY};
    for (int i = 0; i < 4; i++) {
        d.eps = r.eps = eps[i];
        both_refuse(&d, &r, xs, &op);
    }
    ladle_layernorm_desc_init(&d, 1);
    ladle_rmsnorm_desc_init(&r, 1);
    int ks[3] = {0, -1, 4};
    for (int i = 0; i < 3; i++) {
        d.normalized_ndim = r.normalized_ndim = ks[i];
        both_refuse(&d, &r, xs, &op);
    }
    ladle_layernorm_desc_init(&d, 1);
    ladle_rmsnorm_desc_init(&r, 1);
    d.size = 8;
    LT_FAILS(ladle_layernorm_create(&d, 3, xs, LADLE_F64, lt_device(), &op), LADLE_ERR_ARG);
    ladle_layernorm_desc_init(&d, 1);
    LT_FAILS(ladle_layernorm_create(&d, 3, bad, LADLE_F64, lt_device(), &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_layernorm_create(&d, 3, neg, LADLE_F64, lt_device(), &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_layernorm_create(&d, 0, xs, LADLE_F64, lt_device(), &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_layernorm_create(&d, 3, xs, LADLE_I64, lt_device(), &op),
             LADLE_ERR_DTYPE);
    LT_ASSERT(op == NULL, "no op on failure");
    /* calls: wrong shapes, a batch too large, dtypes, a dx without forward */
    LT_OK(ladle_layernorm_create(&d, 3, xs, LADLE_F64, lt_device(), &op));
    int64_t wrong[3] = {2, 3, 5}, big[3] = {3, 3, 4};
    ladle_tensor *x = lt_tensor(LADLE_F64, 3, xs), *y = lt_tensor(LADLE_F64, 3, xs);
    ladle_tensor *xw = lt_tensor(LADLE_F64, 3, wrong), *xb = lt_tensor(LADLE_F64, 3, big);
    ladle_tensor *x32 = lt_tensor(LADLE_F32, 3, xs);
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_ctx_create(op, &ctx));
    LT_FAILS(ladle_layer_backward(op, ctx, y, x), LADLE_ERR_STATE);
    lt_forward_refuses(op, ctx, x, y, xw, xb, x32);
    LT_OK(ladle_layer_forward(op, ctx, x, y));
    LT_FAILS(ladle_layer_backward(op, ctx, xw, x), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_op_adjoint(op, y, x), LADLE_ERR_UNSUPPORTED);
    ladle_ctx_destroy(&ctx);
    LT_DESTROY(&x, &y, &xw, &xb, &x32);
    ladle_op_destroy(&op);
}
END_TEST

static Suite *norm_suite(void)
{
    return lt_suite("layernorm", "layernorm", 120, NULL,
                    LT_TESTS(values_against_loops, smaller_batch,
                             gradients_by_finite_differences, f32_far_from_zero,
                             contexts_and_parameters, bad_input));
}

LT_MAIN(norm_suite)
