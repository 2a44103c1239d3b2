/* Distributed global average pooling against the sequential layer on the
 * gathered tensors (y and dx), its dot-product test, values derived by
 * hand, and bad configurations refused on every rank. */
#include <math.h>
#include <stdio.h>

#include "harness.h"

/* Where y lives: the ranks of p_x's first spatial tile, the last ranks of
 * the world, or the first ranks (p_y shared with other tiles of p_x). */
enum { Y_FIRST_TILE, Y_LAST, Y_FIRST };

static ladle_partition *make_py(const int *gx, int ndim, int where)
{
    int gy[2] = {gx[0], gx[1]}, ranks[64], k = 0, tile = 1;
    for (int d = 2; d < ndim; d++)
        tile *= gx[d];
    for (int b = 0; b < gx[0]; b++)
        for (int c = 0; c < gx[1]; c++, k++)
            ranks[k] = where == Y_FIRST_TILE ? (b * gx[1] + c) * tile
                       : where == Y_LAST     ? lt_size - gx[0] * gx[1] + k
                                             : k;
    return lt_partition_ranks(2, gy, ranks);
}

static void gp_case(int ndim, const int *gx, const int64_t *xs, int where, ladle_dtype dt,
                    const char *what)
{
    int n = 1;
    for (int d = 0; d < ndim; d++)
        n *= gx[d];
    if (n > lt_size || gx[0] * gx[1] > lt_size)
        return;
    ladle_partition *px = lt_partition(ndim, gx, 0), *py = make_py(gx, ndim, where);
    ladle_op *dist = NULL, *seq = NULL;
    LT_OK(ladle_dist_global_avg_pool_create(px, xs, py, dt, lt_device(), 0, &dist));
    LT_OK(ladle_global_avg_pool_create(ndim, xs, dt, lt_device(), &seq));
    LT_ASSERT(ladle_op_kind_of(dist) == LADLE_OP_DIST_GLOBAL_POOL, "%s: kind", what);
    lt_equivalent(dist, seq, 70 + (uint64_t)ndim, dt == LADLE_F64 ? 1e-13 : 1e-5, what);
    lt_adjoint_ok(dist, 90 + (uint64_t)n, what);
    ladle_op_destroy(&dist), ladle_op_destroy(&seq);
    ladle_partition_destroy(&px), ladle_partition_destroy(&py);
}

START_TEST(equivalence)
{
    struct {
        int ndim, gx[5];
        int64_t xs[5];
    } cases[] = {
        {4, {1, 1, 1, 1}, {3, 2, 4, 5}},    {4, {2, 1, 1, 1}, {5, 3, 4, 3}},
        {4, {1, 1, 2, 1}, {2, 3, 5, 4}},    {4, {1, 1, 1, 2}, {2, 3, 4, 7}},
        {4, {1, 1, 2, 2}, {3, 2, 5, 5}},    {4, {1, 1, 3, 2}, {2, 3, 7, 4}},
        {4, {1, 2, 1, 1}, {2, 5, 3, 3}},    {4, {1, 2, 2, 1}, {3, 4, 6, 2}},
        {4, {2, 1, 1, 3}, {4, 2, 3, 8}},    {4, {2, 3, 1, 1}, {3, 4, 2, 2}},
        {3, {1, 1, 3}, {2, 3, 10}},         {3, {2, 1, 2}, {3, 2, 5}},
        {5, {1, 1, 2, 1, 2}, {2, 2, 3, 2, 5}}, {5, {1, 2, 1, 3, 1}, {2, 3, 2, 4, 3}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int where = Y_FIRST_TILE; where <= Y_FIRST; where++)
            for (int t = 0; t < 2; t++) {
                char what[64];
                snprintf(what, sizeof what, "case %zu, y at %d, %s", k, where, t ? "f32" : "f64");
                gp_case(cases[k].ndim, cases[k].gx, cases[k].xs, where,
                        t ? LADLE_F32 : LADLE_F64, what);
            }
}
END_TEST

/* x[n, c, i, j] = 100 n + 10 c + (global spatial index i * W + j): the mean
 * over the plane is 100 n + 10 c + (H W - 1) / 2; dy = 1 gives dx = 1 / (H W)
 * everywhere. */
START_TEST(by_hand)
{
    int gx[4] = {1, 1, 2, 2};
    if (lt_size < 4)
        gx[2] = gx[3] = 1;
    int64_t xs[4] = {2, 3, 5, 3};
    ladle_partition *px = lt_partition(4, gx, 0), *py = make_py(gx, 4, Y_FIRST_TILE);
    ladle_op *op = NULL;
    LT_OK(ladle_dist_global_avg_pool_create(px, xs, py, LADLE_F64, lt_device(), 0, &op));
    int64_t off[4], box[4], yoff[2], ybox[2];
    LT_OK(ladle_layout_box(ladle_op_x_layout(op), LADLE_SELF, off, box));
    LT_OK(ladle_layout_box(ladle_op_y_layout(op), LADLE_SELF, yoff, ybox));
    ladle_tensor *x = lt_tensor(LADLE_F64, 4, box), *dx = lt_tensor(LADLE_F64, 4, box);
    ladle_tensor *y = lt_tensor(LADLE_F64, 2, ybox), *dy = lt_tensor(LADLE_F64, 2, ybox);
    int64_t i = 0;
    for (int64_t a = 0; a < box[0]; a++)
        for (int64_t b = 0; b < box[1]; b++)
            for (int64_t r = 0; r < box[2]; r++)
                for (int64_t c = 0; c < box[3]; c++)
                    lt_set(x, i++, 100.0 * (double)(off[0] + a) + 10.0 * (double)(off[1] + b) +
                                       (double)((off[2] + r) * xs[3] + off[3] + c));
    LT_OK(ladle_tensor_fill(dy, 1.0));
    LT_OK(ladle_layer_forward(op, NULL, x, y));
    LT_OK(ladle_op_adjoint(op, dy, dx));
    double err = 0;
    for (int64_t a = 0; a < ybox[0]; a++)
        for (int64_t b = 0; b < ybox[1]; b++) {
            double want = 100.0 * (double)(yoff[0] + a) + 10.0 * (double)(yoff[1] + b) + 7.0;
            err = fmax(err, fabs(lt_get(y, a * ybox[1] + b) - want));
        }
    for (int64_t k = 0; k < ladle_tensor_numel(dx); k++)
        err = fmax(err, fabs(lt_get(dx, k) - 1.0 / 15.0));
    LT_ASSERT(err <= 1e-13, "by hand: error %.3e", err);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&dx);
    ladle_tensor_destroy(&y), ladle_tensor_destroy(&dy);
    ladle_op_destroy(&op);
    ladle_partition_destroy(&px), ladle_partition_destroy(&py);
}
END_TEST

START_TEST(bad_input)
{
    int gx[4] = {1, 1, 1, 1}, gy[2] = {1, 1}, g2[2] = {1, 2};
    int64_t xs[4] = {2, 3, 4, 4}, small[4] = {2, 3, 1, 4}, neg[4] = {2, -3, 4, 4};
    int64_t huge[4] = {INT64_MAX / 2, 4, 1 << 20, 1 << 20};
    ladle_partition *px = lt_partition(4, gx, 0), *py = lt_partition(2, gy, 0);
    ladle_op *op = NULL;
    ladle_device dev = lt_device();
    LT_FAILS(ladle_dist_global_avg_pool_create(NULL, xs, py, LADLE_F64, dev, 0, &op),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_dist_global_avg_pool_create(px, NULL, py, LADLE_F64, dev, 0, &op),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_dist_global_avg_pool_create(px, xs, py, LADLE_F64, dev, 0, NULL),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_dist_global_avg_pool_create(px, xs, py, LADLE_I64, dev, 0, &op),
             LADLE_ERR_DTYPE);
    LT_FAILS(ladle_dist_global_avg_pool_create(px, xs, py, LADLE_F64, dev, 0x80, &op),
             LADLE_ERR_ARG);
    /* x has p_x's ndim: 3 to 5 */
    LT_FAILS(ladle_dist_global_avg_pool_create(py, xs, py, LADLE_F64, dev, 0, &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_dist_global_avg_pool_create(px, neg, py, LADLE_F64, dev, 0, &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_dist_global_avg_pool_create(px, huge, py, LADLE_F64, dev, 0, &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_dist_global_avg_pool_create(px, xs, px, LADLE_F64, dev, 0, &op),
             LADLE_ERR_PARTITION);
    if (lt_size >= 2) {
        /* p_y's extents must be p_x's first two */
        ladle_partition *py2 = lt_partition(2, g2, 0);
        LT_FAILS(ladle_dist_global_avg_pool_create(px, xs, py2, LADLE_F64, dev, 0, &op),
                 LADLE_ERR_PARTITION);
        ladle_partition_destroy(&py2);
        /* a spatial extent smaller than its split */
        int gs[4] = {1, 1, 2, 1};
        ladle_partition *ps = lt_partition(4, gs, 0);
        LT_FAILS(ladle_dist_global_avg_pool_create(ps, small, py, LADLE_F64, dev, 0, &op),
                 LADLE_ERR_SHAPE);
        ladle_partition_destroy(&ps);
    }
    LT_ASSERT(op == NULL, "the handle stays untouched");
    ladle_partition_destroy(&px), ladle_partition_destroy(&py);
}
END_TEST

LT_SUITE("dist_gpool", "dist_gpool", 0, equivalence, by_hand, bad_input)
