/* Distributed interpolation against the sequential layer on the gathered
 * tensors (y and dx) on spatial, batch and channel splits at 1 to 6 ranks,
 * nearest and linear with and without align_corners, integer scales and
 * explicit sizes (up and down); the dot-product test; bad configurations
 * refused on every rank. Distributed adaptive average pooling, which
 * gathers its windows the same way, likewise. */
#include <stdio.h>

#include "harness.h"

static void di_case(const ladle_interp_desc *d, const int *grid, const int64_t *xs,
                    ladle_dtype dt, const char *what)
{
    int n = 1;
    for (int k = 0; k < 2 + d->nd; k++)
        n *= grid[k];
    if (n > lt_size)
        return;
    ladle_partition *p = lt_partition(2 + d->nd, grid, 0);
    ladle_op *dist = NULL, *seq = NULL;
    LT_OK(ladle_dist_interp_create(d, p, xs, dt, lt_device(), &dist));
    LT_OK(ladle_interp_create(d, xs, dt, lt_device(), &seq));
    LT_ASSERT(ladle_op_kind_of(dist) == LADLE_OP_DIST_INTERPOLATE, "%s: kind", what);
    lt_equivalent(dist, seq, 50 + (uint64_t)n, dt == LADLE_F64 ? 1e-13 : 1e-5, what);
    if (dt == LADLE_F64)
        lt_adjoint_ok(dist, 60 + (uint64_t)n, what);
    ladle_op_destroy(&dist), ladle_op_destroy(&seq);
    ladle_partition_destroy(&p);
}

START_TEST(equivalence)
{
    struct {
        int nd, grid[5];
        int64_t xs[5], size[3];
    } cases[] = {
        {2, {1, 1, 1, 1}, {2, 2, 4, 5}, {0, 0, 0}},
        {2, {1, 1, 2, 1}, {2, 2, 5, 4}, {0, 0, 0}},
        {2, {1, 1, 1, 2}, {1, 3, 4, 7}, {0, 0, 0}},
        {2, {1, 1, 2, 2}, {2, 1, 6, 5}, {0, 0, 0}},
        {2, {1, 1, 3, 2}, {1, 2, 7, 4}, {0, 0, 0}},
        {2, {2, 1, 1, 2}, {3, 2, 4, 6}, {0, 0, 0}},
        {2, {1, 2, 2, 1}, {2, 3, 5, 3}, {0, 0, 0}},
        {2, {1, 1, 2, 3}, {1, 2, 6, 9}, {11, 7, 0}},  /* explicit, up */
        {2, {1, 1, 2, 2}, {2, 2, 9, 8}, {4, 5, 0}},   /* explicit, down */
        {1, {1, 1, 3}, {2, 2, 8}, {0, 0, 0}},
        {1, {2, 1, 2}, {3, 2, 5}, {13, 0, 0}},
        {3, {1, 1, 2, 1, 2}, {1, 2, 3, 2, 4}, {0, 0, 0}},
        {3, {1, 1, 1, 3, 2}, {1, 1, 2, 5, 4}, {3, 7, 6}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int m = 0; m < 3; m++)
            for (int t = 0; t < 2; t++) {
                if (t == 1 && m != 1)
                    continue; /* f32 once per case */
                ladle_interp_desc d;
                ladle_interp_desc_init(&d, m ? LADLE_INTERP_LINEAR : LADLE_INTERP_NEAREST,
                                       cases[k].nd, 1 + (int64_t)(k % 3));
                d.align_corners = m == 2;
                for (int a = 0; a < cases[k].nd; a++)
                    d.out_size[a] = cases[k].size[a];
                char what[64];
                snprintf(what, sizeof what, "case %zu, mode %d, %s", k, m, t ? "f32" : "f64");
                di_case(&d, cases[k].grid, cases[k].xs, t ? LADLE_F32 : LADLE_F64, what);
            }
}
END_TEST

/* Adaptive average pooling: the distributed layer against the sequential
 * one on the gathered tensors, and the dot-product test, on uneven tiles
 * whose windows overlap the tile boundaries. */
START_TEST(adaptive)
{
    struct {
        int ndim, grid[5];
        int64_t xs[5], out[3];
    } cases[] = {
        {3, {1, 1, 2}, {2, 2, 11}, {4}},
        {3, {2, 1, 2}, {3, 2, 7}, {9}},
        {4, {1, 1, 2, 1}, {2, 2, 9, 5}, {4, 3}},
        {4, {1, 1, 2, 2}, {1, 2, 7, 10}, {3, 6}},
        {4, {1, 2, 1, 2}, {2, 3, 6, 5}, {6, 2}},
        {4, {1, 1, 3, 2}, {1, 1, 10, 7}, {5, 5}},
        {4, {1, 1, 4, 1}, {1, 2, 9, 4}, {2, 2}}, /* tiles without output */
        {5, {1, 1, 2, 1, 2}, {1, 2, 5, 4, 7}, {3, 2, 4}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int n = 1, nd = cases[k].ndim;
        for (int i = 0; i < nd; i++)
            n *= cases[k].grid[i];
        if (n > lt_size)
            continue;
        ladle_partition *p = lt_partition(nd, cases[k].grid, 0);
        for (int t = 0; t < 2; t++) {
            ladle_dtype dt = t ? LADLE_F32 : LADLE_F64;
            ladle_op *dist = NULL, *seq = NULL;
            LT_OK(ladle_dist_adaptive_avg_pool_create(p, cases[k].xs, cases[k].out, dt,
                                                      lt_device(), 0, &dist));
            LT_OK(ladle_adaptive_avg_pool_create(nd, cases[k].xs, cases[k].out, dt,
                                                 lt_device(), &seq));
            LT_ASSERT(ladle_op_kind_of(dist) == LADLE_OP_DIST_ADAPTIVE_POOL, "kind");
            char what[64];
            snprintf(what, sizeof what, "adaptive case %zu (%s)", k, t ? "f32" : "f64");
            lt_equivalent(dist, seq, 70 + (uint64_t)k, t ? 1e-5 : 1e-13, what);
            if (!t)
                lt_adjoint_ok(dist, 80 + (uint64_t)k, what);
            ladle_op_destroy(&dist), ladle_op_destroy(&seq);
        }
        ladle_partition_destroy(&p);
    }
    /* refused alike on every rank: a grid without a spatial dimension (x
     * has p_x's ndim), a zero size */
    int g2[2] = {1, 1}, g4[4] = {1, 1, 1, 1};
    int64_t xs[4] = {1, 1, 4, 4}, out[2] = {2, 2}, zero[2] = {2, 0};
    ladle_partition *p = lt_partition(2, g2, 0);
    ladle_op *op = NULL;
    LT_FAILS_SAYING(
        ladle_dist_adaptive_avg_pool_create(p, xs, out, LADLE_F64, lt_device(), 0, &op),
        LADLE_ERR_SHAPE, "x has 2 dimensions");
    ladle_partition_destroy(&p);
    p = lt_partition(4, g4, 0);
    LT_FAILS(
        ladle_dist_adaptive_avg_pool_create(p, xs, zero, LADLE_F64, lt_device(), 0, &op),
        LADLE_ERR_SHAPE);
    ladle_partition_destroy(&p);
}
END_TEST

START_TEST(bad_input)
{
    int g4[4] = {1, 1, 1, 1}, g3[3] = {1, 1, 1};
    int64_t xs[4] = {2, 2, 4, 4};
    ladle_partition *p = lt_partition(4, g4, 0), *p3 = lt_partition(3, g3, 0);
    ladle_op *op = NULL;
    ladle_device dev = lt_device();
    ladle_interp_desc d;
    ladle_interp_desc_init(&d, LADLE_INTERP_LINEAR, 2, 2);
    LT_FAILS(ladle_dist_interp_create(NULL, p, xs, LADLE_F64, dev, &op), LADLE_ERR_NULL);
    LT_FAILS(ladle_dist_interp_create(&d, NULL, xs, LADLE_F64, dev, &op), LADLE_ERR_NULL);
    LT_FAILS(ladle_dist_interp_create(&d, p, xs, LADLE_F64, dev, NULL), LADLE_ERR_NULL);
    LT_FAILS(ladle_dist_interp_create(&d, p, xs, LADLE_I64, dev, &op), LADLE_ERR_DTYPE);
    d.flags = 0x40;
    LT_FAILS_SAYING(ladle_dist_interp_create(&d, p, xs, LADLE_F64, dev, &op), LADLE_ERR_ARG,
                    "unknown flags 0x40");
    d.flags = 0;
    d.size = 4;
    LT_FAILS(ladle_dist_interp_create(&d, p, xs, LADLE_F64, dev, &op), LADLE_ERR_ARG);
    d.size = sizeof d;
    LT_FAILS(ladle_dist_interp_create(&d, p3, xs, LADLE_F64, dev, &op),
             LADLE_ERR_PARTITION);
    d.scale[1] = 0;
    LT_FAILS(ladle_dist_interp_create(&d, p, xs, LADLE_F64, dev, &op), LADLE_ERR_ARG);
    ladle_interp_desc_init(&d, LADLE_INTERP_LINEAR, 2, (int64_t)1 << 31);
    LT_FAILS(ladle_dist_interp_create(&d, p, xs, LADLE_F64, dev, &op), LADLE_ERR_SHAPE);
    LT_ASSERT(op == NULL, "the handle stays untouched");
    ladle_partition_destroy(&p), ladle_partition_destroy(&p3);
}
END_TEST

LT_SUITE("dist_interp", "dist_interp", 0, equivalence, bad_input, adaptive)
