/* Distributed losses and flatten against their sequential twins on the
 * gathered tensors; the loss value on every rank; a bad input on one rank
 * failing every rank. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* the loss of the whole batch on every rank, and each block's gradient;
 * with ignore_index, the samples of batch row 0 and every third sample are
 * ignored */
static void loss_case_desc(const ladle_loss_desc *d, int ndim, const int *grid,
                           const int64_t *xs, ladle_dtype dt, const char *what)
{
    ladle_loss_kind kind = d->kind;
    ladle_reduction red = d->reduction;
    int classify = kind == LADLE_LOSS_CROSS_ENTROPY || kind == LADLE_LOSS_NLL;
    int64_t per_row = 1;
    for (int k = 2; k < ndim; k++)
        per_row *= xs[k];
    ladle_partition *p = lt_partition(ndim, grid, 0);
    ladle_op *dist = NULL, *seq = NULL;
    LT_OK(ladle_dist_loss_create(d, p, xs, dt, lt_device(), &dist));
    LT_OK(ladle_loss_create(d, ndim, xs, dt, lt_device(), &seq));
    /* global input and target */
    int64_t ts[LADLE_MAX_NDIM];
    int tn = 0;
    for (int d = 0; d < ndim; d++)
        if (!(classify && d == 1))
            ts[tn++] = xs[d];
    ladle_tensor *X = lt_tensor(dt, ndim, xs), *T = lt_tensor(classify ? LADLE_I64 : dt, tn, ts);
    ladle_tensor *dX = lt_tensor(dt, ndim, xs);
    LT_OK(ladle_tensor_fill_random(X, 4, 1));
    for (int64_t i = 0; i < ladle_tensor_numel(T); i++) {
        int skip = d->ignore_index != LADLE_LOSS_NO_IGNORE && (i < per_row || i % 3 == 1);
        if (classify)
            lt_set(T, i, skip ? (double)d->ignore_index : (double)((i * 7 + 3) % xs[1]));
        else
            lt_set(T, i, kind == LADLE_LOSS_BCE_WITH_LOGITS ? (double)(i % 2) : sin((double)i));
    }
    /* local blocks */
    int64_t off[LADLE_MAX_NDIM], box[LADLE_MAX_NDIM], toff[LADLE_MAX_NDIM], tbox[LADLE_MAX_NDIM];
    LT_OK(ladle_layout_box(ladle_op_x_layout(dist), LADLE_SELF, off, box));
    tn = 0;
    for (int d = 0; d < ndim; d++)
        if (!(classify && d == 1)) {
            toff[tn] = off[d];
            tbox[tn++] = box[d];
        }
    ladle_tensor *x = lt_tensor(dt, ndim, box), *t = lt_tensor(classify ? LADLE_I64 : dt, tn, tbox);
    ladle_tensor *dx = lt_tensor(dt, ndim, box);
    lt_box_extract(X, off, x);
    lt_box_extract(T, toff, t); /* labels too: small integers pass through doubles exactly */
    int none = red == LADLE_REDUCE_NONE;
    ladle_tensor *L = none ? lt_tensor(dt, tn, ts) : lt_tensor(dt, 0, NULL);
    ladle_tensor *l = none ? lt_tensor(dt, tn, tbox) : lt_tensor(dt, 0, NULL);
    ladle_tensor *dL = none ? lt_tensor(dt, tn, ts) : lt_tensor(dt, 0, NULL);
    ladle_tensor *dl = none ? lt_tensor(dt, tn, tbox) : lt_tensor(dt, 0, NULL);
    if (none) {
        LT_OK(ladle_tensor_fill_random(dL, 4, 9));
        lt_box_extract(dL, toff, dl);
    } else {
        LT_OK(ladle_tensor_fill(dL, 0.7));
        LT_OK(ladle_tensor_fill(dl, 0.7));
    }
    ladle_ctx *cd = NULL, *cs = NULL;
    LT_OK(ladle_ctx_create(dist, &cd));
    LT_OK(ladle_ctx_create(seq, &cs));
    LT_OK(ladle_loss_forward(dist, cd, x, t, l));
    LT_OK(ladle_loss_forward(seq, cs, X, T, L));
    LT_OK(ladle_loss_backward(dist, cd, dl, dx));
    LT_OK(ladle_loss_backward(seq, cs, dL, dX));
    double tol = dt == LADLE_F32 ? 1e-5 : 1e-12;
    double el = !ladle_partition_active(p) ? 0
                : none ? lt_box_error(L, toff, l)
                       : fabs(lt_get(l, 0) - lt_get(L, 0)) / (1 + fabs(lt_get(L, 0)));
    double ex = lt_box_error(dX, off, dx);
    LT_ASSERT(el <= tol && ex <= tol, "%s: loss %.2e, dinput %.2e", what, el, ex);
    ladle_ctx_destroy(&cd), ladle_ctx_destroy(&cs);
    ladle_tensor_destroy(&X), ladle_tensor_destroy(&T), ladle_tensor_destroy(&dX);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&t), ladle_tensor_destroy(&dx);
    ladle_tensor_destroy(&L), ladle_tensor_destroy(&l), ladle_tensor_destroy(&dl);
    ladle_tensor_destroy(&dL);
    ladle_op_destroy(&dist), ladle_op_destroy(&seq);
    ladle_partition_destroy(&p);
}

static void loss_case(ladle_loss_kind kind, ladle_reduction red, int ndim, const int *grid,
                      const int64_t *xs, ladle_dtype dt, const char *what)
{
    ladle_loss_desc d;
    ladle_loss_desc_init(&d, kind, red);
    d.label_smoothing = kind == LADLE_LOSS_CROSS_ENTROPY ? 0.1 : 0.0;
    loss_case_desc(&d, ndim, grid, xs, dt, what);
}

/* Class weights and ignore_index: the mean divides by the global weight of
 * the labels, a block wholly ignored included (4 x 1: rank 0's one row). */
START_TEST(weighted_losses)
{
    int g1[2] = {1, 1}, g2[2] = {2, 1}, g3[2] = {3, 1}, g41[2] = {4, 1};
    int g4[4] = {2, 1, 2, 1};
    int64_t x2[2] = {7, 5}, x41[2] = {4, 5}, x4[4] = {3, 4, 5, 2};
    double w5[5] = {0.5, 2, 1.5, 0.25, 3}, w4[4] = {1.25, 0.5, 2, 0.75};
    ladle_loss_desc d;
    for (int t = 0; t < 2; t++) {
        ladle_dtype dt = t ? LADLE_F32 : LADLE_F64;
        for (int r = 0; r <= LADLE_REDUCE_NONE; r++) {
            ladle_loss_desc_init(&d, LADLE_LOSS_CROSS_ENTROPY, (ladle_reduction)r);
            d.weights = w5, d.num_weights = 5, d.ignore_index = -100;
            d.label_smoothing = 0.2;
            loss_case_desc(&d, 2, g1, x2, dt, "weighted ce 1 rank");
            if (lt_size >= 2)
                loss_case_desc(&d, 2, g2, x2, dt, "weighted ce 2x1");
            if (lt_size >= 3) {
                d.kind = LADLE_LOSS_NLL, d.label_smoothing = 0, d.ignore_index = 3;
                loss_case_desc(&d, 2, g3, x2, dt, "weighted nll 3x1, ignore class 3");
            }
            if (lt_size >= 4) {
                ladle_loss_desc_init(&d, LADLE_LOSS_CROSS_ENTROPY, (ladle_reduction)r);
                d.ignore_index = -1;
                loss_case_desc(&d, 2, g41, x41, dt, "ce 4x1 ignore, rank 0 all ignored");
                d.weights = w4, d.num_weights = 4, d.ignore_index = -100;
                loss_case_desc(&d, 4, g4, x4, dt, "weighted ce 4-d spatial");
            }
        }
    }
}
END_TEST

/* Every sample ignored: the mean is 0/0 on every rank alike; a bad label
 * on one rank and bad options fail every rank. */
START_TEST(all_ignored)
{
    int g[2] = {lt_size >= 2 ? 2 : 1, 1};
    int64_t xs[2] = {4, 3}, one[1] = {1};
    ladle_partition *p = lt_partition(2, g, 0);
    ladle_op *op = NULL;
    ladle_loss_desc d;
    ladle_loss_desc_init(&d, LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN);
    d.ignore_index = -100;
    LT_OK(ladle_dist_loss_create(&d, p, xs, LADLE_F64, lt_device(), &op));
    int64_t box[2];
    LT_OK(ladle_layout_box(ladle_op_x_layout(op), LADLE_SELF, NULL, box));
    ladle_tensor *x = lt_tensor(LADLE_F64, 2, box), *t = lt_tensor(LADLE_I64, 1, box);
    ladle_tensor *l = lt_tensor(LADLE_F64, 0, one);
    LT_OK(ladle_tensor_fill(x, 0.5));
    for (int64_t i = 0; i < box[0]; i++)
        lt_set(t, i, -100);
    ladle_status st = ladle_loss_forward(op, NULL, x, t, l);
    int active = ladle_partition_active(p);
    LT_ASSERT(st == (active ? LADLE_ERR_NUMERIC : LADLE_OK) && (!active || isnan(lt_get(l, 0))),
              "all ignored: %s", ladle_status_name(st));
    ladle_error_clear();
    /* a label out of range on the last member fails every member */
    if (active && ladle_partition_rank(p) == g[0] - 1)
        lt_set(t, 0, 3);
    st = ladle_loss_forward(op, NULL, x, t, l);
    ladle_status want = !active                                      ? LADLE_OK
                        : ladle_partition_rank(p) == g[0] - 1 ? LADLE_ERR_ARG
                                                                     : LADLE_ERR_REMOTE;
    LT_ASSERT(st == want, "a bad label: %s", ladle_status_name(st));
    ladle_error_clear();
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&t), ladle_tensor_destroy(&l);
    ladle_op_destroy(&op);
    /* bad options refused alike on every rank: 2 weights for 3 classes,
     * ignore_index on MSE */
    double w[2] = {1, 2};
    d.weights = w, d.num_weights = 2;
    LT_FAILS(ladle_dist_loss_create(&d, p, xs, LADLE_F64, lt_device(), &op),
             LADLE_ERR_SHAPE);
    ladle_loss_desc_init(&d, LADLE_LOSS_MSE, LADLE_REDUCE_MEAN);
    d.ignore_index = 0;
    LT_FAILS(ladle_dist_loss_create(&d, p, xs, LADLE_F64, lt_device(), &op), LADLE_ERR_ARG);
    ladle_partition_destroy(&p);
}
END_TEST

START_TEST(losses)
{
    int g1[2] = {1, 1}, g2[2] = {2, 1}, g3[2] = {3, 1}, g22[2] = {2, 2};
    int g4[4] = {2, 1, 2, 1};
    int64_t x2[2] = {7, 5}, x4[4] = {3, 4, 5, 2};
    for (int t = 0; t < 2; t++) {
        ladle_dtype dt = t ? LADLE_F32 : LADLE_F64;
        loss_case(LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN, 2, g1, x2, dt, "ce 1 rank");
        if (lt_size >= 2)
            loss_case(LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN, 2, g2, x2, dt, "ce 2x1");
        if (lt_size >= 3) {
            loss_case(LADLE_LOSS_NLL, LADLE_REDUCE_SUM, 2, g3, x2, dt, "nll 3x1 sum");
            loss_case(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 2, g3, x2, dt, "mse 3x1");
        }
        if (lt_size >= 4) {
            loss_case(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 2, g22, x2, dt, "mse 2x2");
            loss_case(LADLE_LOSS_L1, LADLE_REDUCE_SUM, 2, g22, x2, dt, "l1 2x2");
            loss_case(LADLE_LOSS_BCE_WITH_LOGITS, LADLE_REDUCE_MEAN, 2, g22, x2, dt, "bce 2x2");
            loss_case(LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN, 4, g4, x4, dt,
                      "ce 4-d spatial");
        }
    }
}
END_TEST

START_TEST(loss_failure_everywhere)
{
    if (lt_size < 2)
        return;
    int g2[2] = {2, 1};
    int64_t xs[2] = {4, 3};
    ladle_partition *p = lt_partition(2, g2, 0);
    ladle_op *op = NULL;
    LT_OK(ladle_dist_loss_create(LT_LOSS(LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN, 0, 0),
                                 p, xs, LADLE_F64, lt_device(), &op));
    int64_t box[2];
    LT_OK(ladle_layout_box(ladle_op_x_layout(op), LADLE_SELF, NULL, box));
    int64_t one[1] = {1};
    ladle_tensor *x = lt_tensor(LADLE_F64, 2, box), *t = lt_tensor(LADLE_I64, 1, box);
    ladle_tensor *l = lt_tensor(LADLE_F64, 0, one);
    LT_OK(ladle_tensor_fill(x, 0.5));
    for (int64_t i = 0; i < box[0]; i++)
        lt_set(t, i, lt_rank == 1 ? 9 : 0); /* 9: out of range */
    ladle_status st = ladle_loss_forward(op, NULL, x, t, l);
    ladle_status want = lt_rank == 1 ? LADLE_ERR_ARG : lt_rank == 0 ? LADLE_ERR_REMOTE : LADLE_OK;
    LT_ASSERT(st == want, "a bad label on rank 1: %s", ladle_status_name(st));
    ladle_error_clear();
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&t), ladle_tensor_destroy(&l);
    ladle_op_destroy(&op);
    ladle_partition_destroy(&p);
}
END_TEST

/* Runs a distributed loss's forward and backward on this rank's block of a
 * cross entropy (labels i % C); *v gets the loss values, then dinput
 * (malloc'd, *n of them). */
static void loss_run(ladle_op *op, int64_t classes, ladle_reduction red, double **v,
                     int64_t *n)
{
    int64_t box[2], one[1] = {1};
    LT_OK(ladle_layout_box(ladle_op_x_layout(op), LADLE_SELF, NULL, box));
    int none = red == LADLE_REDUCE_NONE;
    ladle_tensor *x = lt_tensor(LADLE_F64, 2, box), *t = lt_tensor(LADLE_I64, 1, box);
    ladle_tensor *dx = lt_tensor(LADLE_F64, 2, box);
    ladle_tensor *l = none ? lt_tensor(LADLE_F64, 1, box) : lt_tensor(LADLE_F64, 0, one);
    ladle_tensor *dl = none ? lt_tensor(LADLE_F64, 1, box) : lt_tensor(LADLE_F64, 0, one);
    LT_OK(ladle_tensor_fill_random(x, 5, 1));
    LT_OK(ladle_tensor_fill(dl, 0.7));
    for (int64_t i = 0; i < box[0]; i++)
        lt_set(t, i, (double)(i % classes));
    ladle_ctx *c = NULL;
    LT_OK(ladle_ctx_create(op, &c));
    LT_OK(ladle_loss_forward(op, c, x, t, l));
    LT_OK(ladle_loss_backward(op, c, dl, dx));
    int64_t nl = ladle_tensor_numel(l), nx = ladle_tensor_numel(dx);
    double *vl = lt_values(l), *vx = lt_values(dx);
    *n = nl + nx;
    *v = malloc(sizeof(double) * (size_t)(*n + 1));
    memcpy(*v, vl, sizeof(double) * (size_t)nl);
    memcpy(*v + nl, vx, sizeof(double) * (size_t)nx);
    free(vl), free(vx);
    ladle_ctx_destroy(&c);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&t), ladle_tensor_destroy(&dx);
    ladle_tensor_destroy(&l), ladle_tensor_destroy(&dl);
}

/* The name of 0.1: ladle_dist_loss_create_ex (flags apart, ndim checked
 * against p_x) gives ladle_dist_loss_create's loss bit for bit; the flags
 * are the descriptor's now. */
START_TEST(deprecated_dist_loss_ex)
{
    int g[2] = {lt_size >= 2 ? 2 : 1, 1};
    int64_t xs[2] = {7, 3};
    double w[3] = {0.5, 2, 1};
    ladle_partition *p = lt_partition(2, g, 0);
    for (int k = 0; k < 3; k++) {
        ladle_reduction red = k == 2 ? LADLE_REDUCE_NONE : LADLE_REDUCE_MEAN;
        ladle_loss_desc d;
        ladle_loss_desc_init(&d, LADLE_LOSS_CROSS_ENTROPY, red);
        d.label_smoothing = k == 2 ? 0.1 : 0;
        if (k == 1)
            d.weights = w, d.num_weights = 3, d.ignore_index = 2;
        ladle_op *old = NULL, *op = NULL;
        LT_DEPRECATED_BEGIN
        LT_OK(ladle_dist_loss_create_ex(&d, p, 2, xs, LADLE_F64, lt_device(), LADLE_CHECKED,
                                        &old));
        LT_DEPRECATED_END
        d.flags = LADLE_CHECKED;
        LT_OK(ladle_dist_loss_create(&d, p, xs, LADLE_F64, lt_device(), &op));
        double *a = NULL, *b = NULL;
        int64_t na = 0, nb = 0;
        loss_run(old, xs[1], red, &a, &na);
        loss_run(op, xs[1], red, &b, &nb);
        LT_ASSERT(na == nb && memcmp(a, b, sizeof(double) * (size_t)na) == 0,
                  "case %d: dist_loss_create_ex differs from ladle_dist_loss_create", k);
        free(a), free(b);
        ladle_op_destroy(&old), ladle_op_destroy(&op);
    }
    ladle_loss_desc d;
    ladle_loss_desc_init(&d, LADLE_LOSS_MSE, LADLE_REDUCE_SUM);
    ladle_op *op = NULL;
    LT_DEPRECATED_BEGIN
    LT_FAILS(ladle_dist_loss_create_ex(&d, p, 3, xs, LADLE_F64, lt_device(), 0, &op),
             LADLE_ERR_PARTITION);
    LT_FAILS(ladle_dist_loss_create_ex(&d, p, 2, xs, LADLE_F64, lt_device(), 0x100, &op),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_dist_loss_create_ex(NULL, p, 2, xs, LADLE_F64, lt_device(), 0, &op),
             LADLE_ERR_NULL);
    LT_DEPRECATED_END
    /* the new call takes its flags from the descriptor, and refuses unknown bits */
    d.flags = 0x100;
    LT_FAILS(ladle_dist_loss_create(&d, p, xs, LADLE_F64, lt_device(), &op), LADLE_ERR_ARG);
    d.flags = 0;
    d.size = 0;
    LT_FAILS(ladle_dist_loss_create(&d, p, xs, LADLE_F64, lt_device(), &op), LADLE_ERR_ARG);
    LT_ASSERT(op == NULL, "no op on failure");
    ladle_partition_destroy(&p);
}
END_TEST

START_TEST(flatten)
{
    struct {
        int gx[4], gy[2];
        int64_t xs[4];
    } cases[] = {
        {{1, 1, 1, 1}, {1, 1}, {3, 2, 4, 5}}, {{1, 1, 2, 1}, {1, 1}, {3, 2, 4, 5}},
        {{2, 1, 1, 2}, {2, 1}, {5, 2, 3, 4}}, {{1, 1, 2, 2}, {2, 1}, {4, 3, 4, 4}},
        {{2, 1, 2, 1}, {2, 2}, {4, 2, 5, 3}}, {{1, 2, 1, 1}, {1, 3}, {2, 4, 3, 3}},
        {{3, 1, 2, 2}, {3, 1}, {7, 2, 5, 4}}, {{2, 1, 2, 3}, {2, 2}, {6, 3, 6, 7}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int nx = cases[k].gx[0] * cases[k].gx[1] * cases[k].gx[2] * cases[k].gx[3];
        int ny = cases[k].gy[0] * cases[k].gy[1];
        if (nx > lt_size || ny > lt_size)
            continue;
        ladle_partition *px = lt_partition(4, cases[k].gx, 0), *py = lt_partition(2, cases[k].gy, 0);
        ladle_op *dist = NULL, *seq = NULL;
        LT_OK(ladle_dist_flatten_create(px, cases[k].xs, py, LADLE_F64, lt_device(), 0,
                                        &dist));
        LT_OK(ladle_flatten_create(4, cases[k].xs, LADLE_F64, lt_device(), &seq));
        char what[48];
        snprintf(what, sizeof what, "flatten case %zu", k);
        lt_equivalent(dist, seq, 30 + k, 0.0, what);
        lt_adjoint_ok(dist, 40 + k, what);
        ladle_op_destroy(&dist), ladle_op_destroy(&seq);
        ladle_partition_destroy(&px), ladle_partition_destroy(&py);
    }
}
END_TEST

LT_SUITE("dist_misc", "dist_misc", 0, losses, loss_failure_everywhere, weighted_losses,
         all_ignored, deprecated_dist_loss_ex, flatten)
