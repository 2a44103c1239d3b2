/* Distributed batch norm: global statistics against the sequential layer
 * on the whole batch (outputs, gradients, running statistics) for splits of
 * every dimension, unequal blocks included; local and group statistics
 * against the sequential layer on each rank's or group's part; evaluation;
 * bad input. */
#include <math.h>
#include <stdio.h>

#include "harness.h"

typedef struct bcase {
    int ndim;
    int grid[5];
    int64_t x[5];
} bcase;

static const bcase cases[] = {
    {2, {1, 1}, {6, 3}},           {2, {2, 1}, {7, 3}},
    {2, {2, 2}, {5, 5}},           {4, {1, 1, 2, 1}, {2, 3, 5, 4}},
    {4, {2, 1, 1, 2}, {3, 2, 4, 5}}, {4, {1, 2, 2, 1}, {2, 5, 4, 3}},
    {3, {3, 1, 1}, {7, 2, 3}},     {4, {2, 1, 2, 2}, {3, 3, 4, 5}},
    {5, {1, 1, 2, 1, 2}, {2, 2, 3, 2, 5}}, {4, {3, 2, 1, 2}, {4, 4, 2, 6}},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

START_TEST(global_equivalence)
{
    for (int k = 0; k < NCASES; k++) {
        const bcase *c = &cases[k];
        if (lt_ranks_of(c->ndim, c->grid) > lt_size)
            continue;
        ladle_partition *p = lt_partition(c->ndim, c->grid, 0);
        for (int t = 0; t < 2; t++) {
            ladle_dtype dt = t ? LADLE_F32 : LADLE_F64;
            ladle_batchnorm_desc d;
            ladle_batchnorm_desc_init(&d, c->x[1]);
            ladle_op *dist = NULL, *seq = NULL;
            LT_OK(ladle_dist_batchnorm_create(&d, p, c->x, dt, lt_device(), &dist));
            LT_OK(ladle_batchnorm_create(&d, c->ndim, c->x, dt, lt_device(), &seq));
            lt_share_params(dist, seq, 9 + (uint64_t)k);
            char what[64];
            snprintf(what, sizeof what, "global bn case %d (%s)", k, t ? "f32" : "f64");
            lt_equivalent(dist, seq, 50 + (uint64_t)k, t ? 1e-4 : 1e-10, what);
            /* the running statistics too */
            int64_t off[LADLE_MAX_NDIM];
            LT_OK(ladle_layout_box(ladle_op_x_layout(dist), LADLE_SELF, off, NULL));
            int64_t coff[1] = {off[1]};
            ladle_tensor *sm = NULL, *sv = NULL, *dm = NULL, *dv = NULL;
            LT_OK(ladle_batchnorm_running_stats(seq, &sm, &sv));
            LT_OK(ladle_batchnorm_running_stats(dist, &dm, &dv));
            LT_ASSERT(ladle_op_kind_of(dist) == LADLE_OP_DIST_BATCHNORM &&
                          ladle_op_kind_of(seq) == LADLE_OP_BATCHNORM,
                      "%s: kinds", what);
            /* a rank without channels gets no statistics */
            double em = 0, ev = 0;
            int64_t cshape[LADLE_MAX_NDIM];
            LT_OK(ladle_layout_box(ladle_op_x_layout(dist), LADLE_SELF, NULL, cshape));
            int none = cshape[1] == 0;
            LT_ASSERT(none == (dm == NULL) && none == (dv == NULL),
                      "%s: statistics where this rank holds channels", what);
            if (!none) {
                em = lt_box_error(sm, coff, dm);
                ev = lt_box_error(sv, coff, dv);
            }
            LT_ASSERT(em <= (t ? 1e-5 : 1e-12) && ev <= (t ? 1e-5 : 1e-12),
                      "%s: running mean %.2e, var %.2e", what, em, ev);
            /* evaluation: the running statistics, no messages */
            LT_OK(ladle_layer_set_training(dist, 0));
            LT_OK(ladle_layer_set_training(seq, 0));
            snprintf(what, sizeof what, "global bn case %d evaluation (%s)", k, t ? "f32" : "f64");
            lt_equivalent(dist, seq, 70 + (uint64_t)k, t ? 1e-4 : 1e-10, what);
            ladle_op_destroy(&dist);
            ladle_op_destroy(&seq);
        }
        ladle_partition_destroy(&p);
    }
}
END_TEST

/* Groups of g ranks along a batch-only split: group k's statistics are the
 * sequential layer's on its contiguous part of the batch. */
START_TEST(group_and_local)
{
    for (int parts = 1; parts <= 4 && parts <= lt_size; parts++)
        for (int g = 1; g <= parts; g++) {
            if (parts % g != 0)
                continue;
            int grid[4] = {parts, 1, 1, 1};
            int64_t xs[4] = {2 * parts + 1, 3, 4, 3}; /* unequal blocks */
            ladle_partition *p = lt_partition(4, grid, 0);
            ladle_batchnorm_desc d;
            ladle_batchnorm_desc_init(&d, 3);
            ladle_op *dist = NULL;
            ladle_bn_sync mode = g == 1 ? LADLE_BN_SYNC_LOCAL
                                 : g == parts ? LADLE_BN_SYNC_GLOBAL
                                              : LADLE_BN_SYNC_GROUP;
            d.sync = mode;
            d.group_size = g;
            LT_OK(ladle_dist_batchnorm_create(&d, p, xs, LADLE_F64, lt_device(), &dist));
            /* my group's batch range */
            int me = ladle_partition_rank(p);
            int64_t lo = 0, hi = 0;
            if (me >= 0) {
                int first = me / g * g;
                for (int r = 0; r < parts; r++) {
                    int64_t len = xs[0] / parts + (r < xs[0] % parts);
                    if (r < first)
                        lo += len;
                    if (r < first + g)
                        hi += len;
                }
            }
            ladle_tensor *X = lt_tensor(LADLE_F64, 4, xs);
            LT_OK(ladle_tensor_fill_random(X, 3, 1));
            ladle_tensor *x = lt_op_tensor(dist, 0), *y = lt_op_tensor(dist, 1);
            int64_t off[4];
            LT_OK(ladle_layout_box(ladle_op_x_layout(dist), LADLE_SELF, off, NULL));
            lt_box_extract(X, off, x);
            LT_OK(ladle_op_forward(dist, x, y));
            double err = 0;
            if (me >= 0) {
                int64_t gs[4] = {hi - lo, 3, 4, 3}, goff[4] = {lo, 0, 0, 0};
                /* local calls only: the assertions below are collective */
                ladle_op *seq = NULL;
                ladle_tensor *GX = NULL, *GY = NULL;
                if (ladle_batchnorm_create(&d, 4, gs, LADLE_F64, lt_device(), &seq) ||
                    ladle_tensor_create(LADLE_F64, lt_device(), 4, gs, &GX) ||
                    ladle_tensor_create(LADLE_F64, lt_device(), 4, gs, &GY))
                    err = INFINITY;
                else {
                    lt_box_extract(X, goff, GX);
                    int64_t inoff[4] = {off[0] - lo, 0, 0, 0};
                    err = ladle_op_forward(seq, GX, GY) ? INFINITY : lt_box_error(GY, inoff, y);
                }
                ladle_tensor_destroy(&GX), ladle_tensor_destroy(&GY);
                ladle_op_destroy(&seq);
            }
            LT_ASSERT(err < 1e-12, "bn over %d ranks in groups of %d: %.2e", parts, g, err);
            ladle_tensor_destroy(&X), ladle_tensor_destroy(&x), ladle_tensor_destroy(&y);
            ladle_op_destroy(&dist);
            ladle_partition_destroy(&p);
        }
}
END_TEST

START_TEST(bad_input)
{
    int g2[2] = {1, 1};
    ladle_partition *p = lt_partition(2, g2, 0);
    ladle_batchnorm_desc d;
    ladle_batchnorm_desc_init(&d, 3);
    ladle_op *op = NULL;
    int64_t xs[2] = {4, 3}, xw[2] = {4, 5};
    LT_FAILS(ladle_dist_batchnorm_create(&d, p, xw, LADLE_F64, lt_device(), &op),
             LADLE_ERR_SHAPE);
    /* x has as many dimensions as p_x: a 1-D p_x is no batch norm's */
    int g1[1] = {1};
    ladle_partition *p1 = lt_partition(1, g1, 0);
    LT_FAILS(ladle_dist_batchnorm_create(&d, p1, xs, LADLE_F64, lt_device(), &op),
             LADLE_ERR_PARTITION);
    ladle_partition_destroy(&p1);
    /* the descriptor's distributed fields: defaults, then bad values */
    LT_ASSERT(d.sync == LADLE_BN_SYNC_GLOBAL && d.group_size == 0 && d.flags == 0,
              "_init sets sync global, no group size and no flags");
    d.flags = 0x100;
    LT_FAILS(ladle_dist_batchnorm_create(&d, p, xs, LADLE_F64, lt_device(), &op),
             LADLE_ERR_ARG);
    d.flags = 0;
    d.sync = (ladle_bn_sync)7;
    LT_FAILS(ladle_dist_batchnorm_create(&d, p, xs, LADLE_F64, lt_device(), &op),
             LADLE_ERR_ARG);
    d.sync = LADLE_BN_SYNC_GLOBAL;
    d.size = 0;
    LT_FAILS(ladle_dist_batchnorm_create(&d, p, xs, LADLE_F64, lt_device(), &op),
             LADLE_ERR_ARG);
    d.size = sizeof d;
    if (lt_size >= 3) {
        int g3[2] = {3, 1};
        ladle_partition *p3 = lt_partition(2, g3, 0);
        d.sync = LADLE_BN_SYNC_GROUP;
        d.group_size = 2;
        LT_FAILS(ladle_dist_batchnorm_create(&d, p3, xs, LADLE_F64, lt_device(), &op),
                 LADLE_ERR_ARG);
        ladle_partition_destroy(&p3);
        d.sync = LADLE_BN_SYNC_GLOBAL;
        d.group_size = 0;
    }
    LT_ASSERT(op == NULL, "no op on failure");
    d.flags = LADLE_CHECKED;
    LT_OK(ladle_dist_batchnorm_create(&d, p, xs, LADLE_F64, lt_device(), &op));
    ladle_op_destroy(&op);
    ladle_partition_destroy(&p);
}
END_TEST

LT_SUITE("dist_bn", "dist_bn", 0, global_equivalence, group_and_local, bad_input)
