/* Group norm, sequential and distributed: values and gradients against
 * loops written here from the definition (PyTorch's GroupNorm), finite
 * differences in f64, groups of one channel and of all of them, affine on
 * and off, 0 to 3 spatial dimensions, smaller batches; the distributed
 * layer against the sequential one on the gathered tensors for splits of
 * the batch, the spatial dimensions and the channels at group boundaries;
 * bad input on both. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* The reference: n x c x inner values in groups of c / groups channels, in
 * double. y; for dy the backward dx, written as the chain rule summed over
 * every pair of the group's elements (an O(M^2) loop sharing nothing with
 * the layer's closed form):
 *   dx_k = sum_j dy_j gamma_j d(xhat_j)/d(x_k),
 *   d(xhat_j)/d(x_k) = s ((j == k) - 1/M - xhat_j xhat_k / M),
 * and dgamma = sum dy xhat, dbeta = sum dy per channel (c each). */
typedef struct gn_ref {
    int64_t n, c, groups, inner;
    double eps;
    const double *gamma, *beta; /* NULL: not affine */
} gn_ref;

static void reference(const gn_ref *r, const double *x, const double *dy, double *y,
                      double *dx, double *dgamma, double *dbeta)
{
    int64_t cg = r->c / r->groups, m = cg * r->inner;
    double *xh = malloc(sizeof(double) * (size_t)m);
    for (int64_t ch = 0; ch < r->c; ch++)
        dgamma[ch] = dbeta[ch] = 0;
    for (int64_t sm = 0; sm < r->n; sm++)
        for (int64_t g = 0; g < r->groups; g++) {
            int64_t base = (sm * r->c + g * cg) * r->inner;
            const double *xg = x + base, *dg = dy + base;
            double mu = 0, var = 0;
            for (int64_t j = 0; j < m; j++)
                mu += xg[j];
            mu /= (double)m;
            for (int64_t j = 0; j < m; j++)
                var += (xg[j] - mu) * (xg[j] - mu);
            double s = 1 / sqrt(var / (double)m + r->eps);
            for (int64_t j = 0; j < m; j++) {
                int64_t ch = g * cg + j / r->inner;
                xh[j] = (xg[j] - mu) * s;
                y[base + j] =
                    xh[j] * (r->gamma ? r->gamma[ch] : 1) + (r->beta ? r->beta[ch] : 0);
                dgamma[ch] += dg[j] * xh[j];
                dbeta[ch] += dg[j];
            }
            for (int64_t k = 0; k < m; k++) {
                double acc = 0;
                for (int64_t j = 0; j < m; j++) {
                    double gj = dg[j] * (r->gamma ? r->gamma[g * cg + j / r->inner] : 1);
                    acc +=
                        gj * s * ((j == k) - 1.0 / (double)m - xh[j] * xh[k] / (double)m);
                }
                dx[base + k] = acc;
            }
        }
    free(xh);
}

static void ref_pass(const void *arg, const double *x, const double *dy, double *y,
                     double *dx, double *const *grads)
{
    const gn_ref *r = arg;
    double *dg = calloc((size_t)r->c, sizeof(double)),
           *db = calloc((size_t)r->c, sizeof(double));
    reference(r, x, dy, y, dx, dg, db);
    if (r->gamma) {
        memcpy(grads[0], dg, sizeof(double) * (size_t)r->c);
        memcpy(grads[1], db, sizeof(double) * (size_t)r->c);
    }
    free(dg), free(db);
}

typedef struct shape {
    int ndim;
    int64_t x[5];
} shape;

/* 0 to 3 spatial dimensions */
static const shape shapes[] = {
    {2, {3, 12}}, {3, {2, 6, 5}}, {4, {2, 4, 3, 4}}, {5, {2, 6, 2, 3, 2}}, {3, {4, 6, 1}},
};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])

static ladle_status make(int64_t groups, int affine, int ndim, const int64_t *xs,
                         ladle_dtype dt, ladle_op **op)
{
    ladle_groupnorm_desc d;
    ladle_groupnorm_desc_init(&d, groups, xs[1]);
    d.affine = affine;
    d.eps = 1e-3;
    return ladle_groupnorm_create(&d, ndim, xs, dt, lt_device(), op);
}

/* lt_layer_pass on a batch of n <= xs[0] against the reference, x with an
 * offset and a scale per group so that the groups differ. */
static double run_against_reference(const shape *s, int64_t groups, int affine, int64_t n,
                                    uint64_t seed)
{
    ladle_op *op = NULL;
    LT_OK(make(groups, affine, s->ndim, s->x, LADLE_F64, &op));
    int64_t cs[5], total = 1, inner = 1;
    memcpy(cs, s->x, sizeof cs);
    cs[0] = n;
    for (int i = 0; i < s->ndim; i++)
        total *= cs[i];
    for (int i = 2; i < s->ndim; i++)
        inner *= cs[i];
    ladle_tensor *x = lt_tensor(LADLE_F64, s->ndim, cs),
                 *y = lt_tensor(LADLE_F64, s->ndim, cs);
    ladle_tensor *dy = lt_tensor(LADLE_F64, s->ndim, cs),
                 *dx = lt_tensor(LADLE_F64, s->ndim, cs);
    LT_OK(ladle_tensor_fill_random(x, seed, 0));
    LT_OK(ladle_tensor_fill_random(dy, seed, 1));
    double *hx = lt_values(x);
    int64_t glen = s->x[1] / groups * inner;
    for (int64_t i = 0; i < total; i++)
        hx[i] = (1 + (double)(i / glen % 3)) * hx[i] + (double)(i / glen % 5) - 2;
    lt_store(x, hx);
    free(hx);
    gn_ref r = {n, s->x[1], groups, inner, 1e-3, NULL, NULL};
    double *hg = NULL, *hb = NULL;
    if (affine) {
        LT_OK(ladle_tensor_fill_random(ladle_op_param(op, 0), seed, 2));
        LT_OK(ladle_tensor_fill_random(ladle_op_param(op, 1), seed, 3));
        r.gamma = hg = lt_values(ladle_op_param(op, 0));
        r.beta = hb = lt_values(ladle_op_param(op, 1));
    }
    double worst = lt_layer_pass(op, x, y, dy, dx, ref_pass, &r);
    free(hg), free(hb);
    LT_DESTROY(&x, &y, &dy, &dx);
    ladle_op_destroy(&op);
    return worst;
}

/* the group counts of a shape: 1, all channels, and one between */
static int group_counts(int64_t c, int64_t *g)
{
    int k = 0;
    g[k++] = 1;
    for (int64_t d = 2; d < c; d++)
        if (c % d == 0) {
            g[k++] = d;
            break;
        }
    if (c > 1)
        g[k++] = c;
    return k;
}

START_TEST(values_against_loops)
{
    for (int s = 0; s < NSHAPES; s++) {
        int64_t g[3];
        int ng = group_counts(shapes[s].x[1], g);
        for (int k = 0; k < ng; k++)
            for (int affine = 0; affine < 2; affine++)
                for (int64_t n = shapes[s].x[0]; n >= shapes[s].x[0] - 1; n--) {
                    double e = run_against_reference(&shapes[s], g[k], affine, n,
                                                     (uint64_t)(10 * s + k));
                    LT_ASSERT(e < 1e-12, "shape %d groups %lld affine %d batch %lld: %.2e",
                              s, (long long)g[k], affine, (long long)n, e);
                }
    }
}
END_TEST

START_TEST(gradients_by_finite_differences)
{
    for (int s = 0; s < NSHAPES; s++) {
        int64_t g[3];
        int ng = group_counts(shapes[s].x[1], g);
        int64_t inner = 1;
        for (int i = 2; i < shapes[s].ndim; i++)
            inner *= shapes[s].x[i];
        for (int k = 0; k < ng; k++)
            for (int affine = 0; affine < 2; affine++) {
                /* a group of one value normalises to 0 whatever x: every
                 * gradient but beta's is 0, and the relative errors 0 / 0
                 * (the values test covers it) */
                if (shapes[s].x[1] / g[k] * inner == 1)
                    continue;
                ladle_op *op = NULL;
                LT_OK(make(g[k], affine, shapes[s].ndim, shapes[s].x, LADLE_F64, &op));
                for (int p = 0; p < ladle_op_num_params(op); p++)
                    LT_OK(ladle_tensor_fill_random(ladle_op_param(op, p), 9, (uint64_t)p));
                ladle_gradient_result r;
                LT_OK(ladle_gradient_test(op, (uint64_t)(100 + s), 200, &r));
                LT_ASSERT(r.input_error < 1e-6 && r.max_param_error < 1e-6 &&
                              r.nparams == 2 * affine,
                          "shape %d groups %lld affine %d: x %.1e params %.1e", s,
                          (long long)g[k], affine, r.input_error, r.max_param_error);
                ladle_op_destroy(&op);
            }
    }
}
END_TEST

/* f32 against the f64 layer on the same values, and a ctx's state its own */
START_TEST(f32_and_contexts)
{
    const shape *s = &shapes[2];
    ladle_op *ops[2] = {NULL, NULL};
    LT_OK(make(2, 1, s->ndim, s->x, LADLE_F64, &ops[0]));
    LT_OK(make(2, 1, s->ndim, s->x, LADLE_F32, &ops[1]));
    ladle_tensor *t[2][4];
    ladle_ctx *ctx[2];
    lt_twin_run(ops, s->ndim, s->x, 7, NULL, NULL, t, ctx);
    double worst = 0;
    for (int k = 1; k < 4; k++) {
        double *a = lt_values(t[0][k]), *b = lt_values(t[1][k]);
        for (int64_t i = 0; i < ladle_tensor_numel(t[0][k]); i++)
            worst = fmax(worst, fabs(a[i] - b[i]) / (1 + fabs(a[i])));
        free(a), free(b);
    }
    LT_ASSERT(worst < 1e-4, "f32 against f64: %.2e", worst);
    lt_twin_free(ops, t, ctx);

    ladle_op *op = NULL;
    int64_t xs[3] = {2, 4, 5};
    LT_OK(make(2, 1, 3, xs, LADLE_F64, &op));
    lt_ctx_pair p;
    int same = lt_ctx_pair_run(op, xs, 1, &p);
    LT_ASSERT(same, "a ctx's backward is its own forward's");
    lt_ctx_pair_free(&p);
    LT_ASSERT(ladle_op_kind_of(op) == LADLE_OP_GROUPNORM, "kind");
    lt_layer_empty_batch(op, 3, (int64_t[]){0, 4, 5});
    ladle_op_destroy(&op);
}
END_TEST

START_TEST(bad_input)
{
    ladle_groupnorm_desc d;
    ladle_op *op = NULL;
    int64_t xs[4] = {2, 6, 3, 3};
    ladle_groupnorm_desc_init(&d, 4, 6);
    LT_FAILS(ladle_groupnorm_create(&d, 4, xs, LADLE_F64, lt_device(), &op), LADLE_ERR_ARG);
    ladle_groupnorm_desc_init(&d, 0, 6);
    LT_FAILS(ladle_groupnorm_create(&d, 4, xs, LADLE_F64, lt_device(), &op), LADLE_ERR_ARG);
    ladle_groupnorm_desc_init(&d, -3, 6);
    LT_FAILS(ladle_groupnorm_create(&d, 4, xs, LADLE_F64, lt_device(), &op), LADLE_ERR_ARG);
    double eps[3] = {0, -1e-5, NAN};
    for (int i = 0; i < 3; i++) {
        ladle_groupnorm_desc_init(&d, 3, 6);
        d.eps = eps[i];
        LT_FAILS(ladle_groupnorm_create(&d, 4, xs, LADLE_F64, lt_device(), &op),
                 LADLE_ERR_ARG);
    }
    ladle_groupnorm_desc_init(&d, 3, 6);
    d.eps = INFINITY;
    LT_FAILS(ladle_groupnorm_create(&d, 4, xs, LADLE_F64, lt_device(), &op), LADLE_ERR_ARG);
    ladle_groupnorm_desc_init(&d, 3, 6);
    d.flags = 0x100;
    LT_FAILS(ladle_groupnorm_create(&d, 4, xs, LADLE_F64, lt_device(), &op), LADLE_ERR_ARG);
    ladle_groupnorm_desc_init(&d, 3, 6);
    d.size = 3;
    LT_FAILS(ladle_groupnorm_create(&d, 4, xs, LADLE_F64, lt_device(), &op), LADLE_ERR_ARG);
    ladle_groupnorm_desc_init(&d, 3, 5); /* channels differ from x's */
    LT_FAILS(ladle_groupnorm_create(&d, 4, xs, LADLE_F64, lt_device(), &op),
             LADLE_ERR_SHAPE);
    ladle_groupnorm_desc_init(&d, 3, 6);
    int64_t six[6] = {2, 6, 2, 2, 2, 2}, empty[3] = {2, 6, 0};
    LT_FAILS(ladle_groupnorm_create(&d, 6, six, LADLE_F64, lt_device(), &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_groupnorm_create(&d, 1, xs, LADLE_F64, lt_device(), &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_groupnorm_create(&d, 3, empty, LADLE_F64, lt_device(), &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_groupnorm_create(&d, 4, xs, LADLE_I64, lt_device(), &op),
             LADLE_ERR_DTYPE);
    LT_FAILS(ladle_groupnorm_create(NULL, 4, xs, LADLE_F64, lt_device(), &op),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_groupnorm_create(&d, 4, NULL, LADLE_F64, lt_device(), &op),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_groupnorm_create(&d, 4, xs, LADLE_F64, lt_device(), NULL),
             LADLE_ERR_NULL);
    LT_ASSERT(op == NULL, "no op after a refusal");
    ladle_groupnorm_desc_init(NULL, 1, 1); /* does nothing */
}
END_TEST

/* Distributed: grids over x of as many dimensions, channel splits at group
 * boundaries (groups below) and uneven blocks included. */
typedef struct dcase {
    int ndim;
    int grid[5];
    int64_t x[5];
    int64_t groups;
} dcase;

static const dcase dcases[] = {
    {2, {1, 1}, {4, 6}, 3},
    {2, {2, 1}, {5, 6}, 2},
    {3, {1, 1, 2}, {2, 4, 7}, 2},
    {3, {1, 2, 1}, {2, 4, 5}, 2},
    {4, {1, 1, 2, 2}, {2, 6, 5, 3}, 3},
    {4, {2, 1, 1, 2}, {3, 4, 3, 5}, 1},
    {3, {1, 1, 3}, {2, 6, 8}, 6},
    {4, {1, 2, 1, 2}, {2, 6, 3, 4}, 2},
    {5, {1, 1, 2, 1, 2}, {2, 4, 3, 2, 5}, 2},
    {4, {2, 1, 3, 1}, {3, 4, 7, 2}, 2},
    {3, {1, 3, 2}, {2, 6, 5}, 6},
    {4, {1, 1, 2, 3}, {2, 2, 4, 7}, 1},
};
#define NDCASES (int)(sizeof dcases / sizeof dcases[0])

START_TEST(distributed_equivalence)
{
    for (int k = 0; k < NDCASES; k++) {
        const dcase *c = &dcases[k];
        if (lt_ranks_of(c->ndim, c->grid) > lt_size)
            continue;
        ladle_partition *p = lt_partition(c->ndim, c->grid, 0);
        for (int t = 0; t < 3; t++) {
            ladle_dtype dt = t == 2 ? LADLE_F32 : LADLE_F64;
            ladle_groupnorm_desc d;
            ladle_groupnorm_desc_init(&d, c->groups, c->x[1]);
            d.affine = t != 1;
            ladle_op *dist = NULL, *seq = NULL;
            LT_OK(ladle_dist_groupnorm_create(&d, p, c->x, dt, lt_device(), &dist));
            LT_OK(ladle_groupnorm_create(&d, c->ndim, c->x, dt, lt_device(), &seq));
            lt_share_params(dist, seq, 9 + (uint64_t)k);
            char what[80];
            snprintf(what, sizeof what, "case %d (%s, affine %d)", k,
                     t == 2 ? "f32" : "f64", d.affine);
            lt_equivalent(dist, seq, 50 + (uint64_t)k, t == 2 ? 1e-4 : 1e-12, what);
            LT_ASSERT(ladle_op_kind_of(dist) == LADLE_OP_DIST_GROUPNORM, "%s: kind", what);
            ladle_op_destroy(&dist);
            ladle_op_destroy(&seq);
        }
        ladle_partition_destroy(&p);
    }
}
END_TEST

START_TEST(distributed_bad_input)
{
    ladle_groupnorm_desc d;
    ladle_op *op = NULL;
    int grid1[3] = {1, 1, 1};
    ladle_partition *p1 = lt_partition(3, grid1, 0);
    int64_t xs[3] = {2, 6, 4};
    ladle_groupnorm_desc_init(&d, 4, 6);
    LT_FAILS(ladle_dist_groupnorm_create(&d, p1, xs, LADLE_F64, lt_device(), &op),
             LADLE_ERR_ARG);
    ladle_groupnorm_desc_init(&d, 3, 6);
    d.eps = -1;
    LT_FAILS(ladle_dist_groupnorm_create(&d, p1, xs, LADLE_F64, lt_device(), &op),
             LADLE_ERR_ARG);
    ladle_groupnorm_desc_init(&d, 3, 6);
    LT_FAILS(ladle_dist_groupnorm_create(NULL, p1, xs, LADLE_F64, lt_device(), &op),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_dist_groupnorm_create(&d, p1, xs, LADLE_I64, lt_device(), &op),
             LADLE_ERR_DTYPE);
    ladle_partition_destroy(&p1);
    if (lt_size >= 2) {
        /* 6 channels in 3 groups of 2 over 2 blocks of 3: a group split */
        int grid[3] = {1, 2, 1};
        ladle_partition *p = lt_partition(3, grid, 0);
        ladle_groupnorm_desc_init(&d, 3, 6);
        LT_FAILS_SAYING(ladle_dist_groupnorm_create(&d, p, xs, LADLE_F64, lt_device(), &op),
                        LADLE_ERR_PARTITION, "whole groups");
        int64_t small[3] = {2, 1, 4}; /* fewer channels than blocks */
        ladle_groupnorm_desc_init(&d, 1, 1);
        LT_FAILS(ladle_dist_groupnorm_create(&d, p, small, LADLE_F64, lt_device(), &op),
                 LADLE_ERR_SHAPE);
        ladle_partition_destroy(&p);
    }
    LT_ASSERT(op == NULL, "no op after a refusal");
}
END_TEST

LT_SUITE("groupnorm", "core", 600, values_against_loops, gradients_by_finite_differences,
         f32_and_contexts, bad_input, distributed_equivalence, distributed_bad_input)
