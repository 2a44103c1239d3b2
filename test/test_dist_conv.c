/* Spatially partitioned convolution and pooling against the sequential
 * layers on the gathered tensors: 1-3d, batch and spatial splits, stride,
 * padding, dilation, groups, ranks without output; the dot-product test;
 * bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layers/distributed/dist_conv_impl.h" /* how many boxes a rank computes */

typedef struct ccase {
    int nd;
    int grid[5];  /* p_x */
    int64_t x[5]; /* global x */
    int64_t co, k, s, p, d, groups;
} ccase;

static const ccase cases[] = {
    {2, {1, 1, 1, 1}, {2, 3, 9, 8}, 4, 3, 1, 1, 1, 1},
    {2, {1, 1, 2, 1}, {2, 3, 9, 8}, 4, 3, 1, 1, 1, 1},
    {2, {1, 1, 1, 2}, {1, 2, 7, 11}, 3, 5, 1, 2, 1, 1},
    {2, {1, 1, 2, 2}, {2, 4, 10, 9}, 6, 3, 2, 1, 1, 2},
    {2, {2, 1, 1, 2}, {3, 3, 8, 8}, 2, 3, 1, 0, 2, 1},
    {1, {1, 1, 3}, {2, 2, 17}, 3, 4, 2, 1, 1, 1},
    {2, {1, 1, 3, 1}, {1, 1, 12, 6}, 2, 5, 1, 2, 1, 1},
    {2, {1, 1, 2, 3}, {2, 2, 11, 13}, 3, 3, 1, 1, 2, 1},
    {3, {1, 1, 2, 1, 2}, {1, 2, 6, 5, 7}, 2, 3, 1, 1, 1, 1},
    {2, {2, 1, 2, 2}, {2, 2, 9, 9}, 3, 3, 1, 1, 1, 1},
    {2, {1, 1, 4, 1}, {1, 1, 5, 5}, 1, 3, 2, 0, 1, 1}, /* ranks without output */
    {2, {1, 1, 3, 4}, {1, 2, 14, 15}, 2, 3, 1, 1, 1, 1},
    /* the batch split alone: the sequential layer on each rank's block */
    {2, {2, 1, 1, 1}, {3, 3, 9, 8}, 4, 3, 2, 1, 1, 1},
    {1, {3, 1, 1}, {2, 2, 11}, 3, 3, 2, 1, 1, 1}, /* a rank with no rows */
    {3, {2, 1, 1, 1, 1}, {2, 2, 5, 6, 4}, 2, 3, 1, 1, 1, 1},
    {2, {4, 1, 1, 1}, {5, 2, 7, 7}, 3, 2, 2, 0, 1, 1},
    {2, {2, 1, 1, 1}, {4, 2, 11, 9}, 3, 5, 3, 2, 1, 1},
    /* spatial splits that move nothing: the windows of each output block
     * read exactly the rank's block (kernel = stride, no padding, blocks a
     * multiple of the stride), so the layer runs the sequential one on the
     * block; then a near miss (5-row blocks of a stride-2 window) */
    {2, {1, 1, 2, 2}, {2, 3, 8, 8}, 2, 2, 2, 0, 1, 1},
    {2, {1, 1, 2, 1}, {2, 3, 12, 6}, 2, 1, 1, 0, 1, 1},
    {1, {1, 1, 3}, {2, 2, 18}, 3, 3, 3, 0, 1, 1},
    {2, {1, 1, 2, 1}, {2, 2, 10, 4}, 2, 2, 2, 0, 1, 1},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static void conv_desc(const ccase *c, ladle_conv_desc *d, int bias)
{
    ladle_conv_desc_init(d, c->nd, c->x[1], c->co, c->k);
    for (int i = 0; i < c->nd; i++) {
        d->stride[i] = c->s;
        d->padding[i] = c->p;
        d->dilation[i] = c->d;
    }
    d->groups = c->groups;
    d->bias = bias;
}

START_TEST(conv_equivalence)
{
    for (int k = 0; k < NCASES; k++) {
        const ccase *c = &cases[k];
        if (lt_ranks_of(2 + c->nd, c->grid) > lt_size)
            continue;
        ladle_partition *p = lt_partition(2 + c->nd, c->grid, 0);
        for (int t = 0; t < 2; t++) {
            ladle_dtype dt = t ? LADLE_F32 : LADLE_F64;
            ladle_conv_desc d;
            conv_desc(c, &d, 1);
            ladle_op *dist = NULL, *seq = NULL;
            LT_OK(ladle_dist_conv_create(&d, p, c->x, dt, lt_device(), 11 + (uint64_t)k,
                                         &dist));
            LT_OK(ladle_conv_create(&d, c->x, dt, lt_device(), 11 + (uint64_t)k, &seq));
            char what[64];
            snprintf(what, sizeof what, "conv case %d (%s)", k, t ? "f32" : "f64");
            lt_equivalent(dist, seq, 100 + (uint64_t)k, t ? 1e-4 : 1e-10, what);
            LT_DESTROY_OPS(&dist, &seq);
        }
        ladle_partition_destroy(&p);
    }
}
END_TEST

START_TEST(pool_equivalence)
{
    for (int k = 0; k < NCASES; k++) {
        const ccase *c = &cases[k];
        if (lt_ranks_of(2 + c->nd, c->grid) > lt_size || 2 * c->p > c->k)
            continue;
        ladle_partition *p = lt_partition(2 + c->nd, c->grid, 0);
        /* max, then average with each ceil mode and count_include_pad */
        for (int v = 0; v < 5; v++) {
            int kind = v == 0 ? LADLE_POOL_MAX : LADLE_POOL_AVG;
            if (kind == LADLE_POOL_AVG && c->d != 1)
                continue;
            ladle_pool_desc d;
            ladle_pool_desc_init(&d, (ladle_pool_kind)kind, c->nd, c->k);
            for (int i = 0; i < c->nd; i++) {
                d.stride[i] = c->s;
                d.padding[i] = c->p;
                d.dilation[i] = c->d;
            }
            d.ceil_mode = kind == LADLE_POOL_MAX ? k % 2 : (v - 1) / 2;
            d.count_include_pad = kind == LADLE_POOL_AVG ? (v - 1) % 2 : 1;
            ladle_op *dist = NULL, *seq = NULL;
            LT_OK(ladle_dist_pool_create(&d, p, c->x, LADLE_F64, lt_device(), &dist));
            LT_OK(ladle_pool_create(&d, c->x, LADLE_F64, lt_device(), &seq));
            char what[80];
            snprintf(what, sizeof what, "%s pool case %d (ceil %d, count_include_pad %d)",
                     kind ? "avg" : "max", k, d.ceil_mode, d.count_include_pad);
            lt_equivalent(dist, seq, 200 + (uint64_t)k, 1e-12, what);
            if (kind == LADLE_POOL_AVG)
                lt_adjoint_ok(dist, 300 + (uint64_t)k, what);
            LT_DESTROY_OPS(&dist, &seq);
        }
        ladle_partition_destroy(&p);
    }
}
END_TEST

/* Average pooling whose windows have divisors of their own, on uneven
 * tiles: count_include_pad 0 and ceil mode, 1-3 spatial dimensions, in f64
 * and f32, and the dot-product test. */
START_TEST(avg_pool_divisors)
{
    static const struct {
        int nd, grid[5];
        int64_t x[5], k, s, p;
    } pc[] = {
        {1, {1, 1, 2}, {2, 2, 11}, 3, 2, 1},
        {2, {1, 1, 2, 2}, {2, 2, 11, 10}, 3, 2, 1},
        {2, {2, 1, 1, 2}, {3, 2, 9, 13}, 4, 3, 2},
        {2, {1, 1, 3, 1}, {1, 3, 10, 7}, 2, 2, 1},
        {3, {1, 1, 2, 1, 2}, {2, 1, 7, 6, 9}, 3, 2, 1},
        {2, {1, 1, 4, 1}, {1, 2, 14, 5}, 3, 3, 1},
        {2, {2, 1, 1, 1}, {3, 2, 9, 10}, 3, 2, 1},
        {1, {3, 1, 1}, {4, 2, 12}, 4, 3, 2},
    };
    for (size_t k = 0; k < sizeof pc / sizeof pc[0]; k++) {
        int n = 1;
        for (int i = 0; i < 2 + pc[k].nd; i++)
            n *= pc[k].grid[i];
        if (n > lt_size)
            continue;
        ladle_partition *p = lt_partition(2 + pc[k].nd, pc[k].grid, 0);
        for (int v = 0; v < 6; v++) {
            ladle_dtype dt = v >= 3 ? LADLE_F32 : LADLE_F64;
            ladle_pool_desc d;
            ladle_pool_desc_init(&d, LADLE_POOL_AVG, pc[k].nd, pc[k].k);
            for (int i = 0; i < pc[k].nd; i++) {
                d.stride[i] = pc[k].s;
                d.padding[i] = pc[k].p;
            }
            d.ceil_mode = v % 3 != 0;
            d.count_include_pad = v % 3 == 1;
            ladle_op *dist = NULL, *seq = NULL;
            LT_OK(ladle_dist_pool_create(&d, p, pc[k].x, dt, lt_device(), &dist));
            LT_OK(ladle_pool_create(&d, pc[k].x, dt, lt_device(), &seq));
            char what[80];
            snprintf(what, sizeof what, "avg pool %zu (%s, ceil %d, count_include_pad %d)",
                     k, dt == LADLE_F32 ? "f32" : "f64", d.ceil_mode, d.count_include_pad);
            lt_equivalent(dist, seq, 400 + (uint64_t)k, dt == LADLE_F32 ? 1e-5 : 1e-12,
                          what);
            lt_adjoint_ok(dist, 500 + (uint64_t)k, what);
            LT_DESTROY_OPS(&dist, &seq);
        }
        ladle_partition_destroy(&p);
    }
}
END_TEST

START_TEST(adjoint)
{
    for (int k = 0; k < NCASES; k++) {
        const ccase *c = &cases[k];
        if (lt_ranks_of(2 + c->nd, c->grid) > lt_size)
            continue;
        ladle_partition *p = lt_partition(2 + c->nd, c->grid, 0);
        ladle_conv_desc d;
        conv_desc(c, &d, 0);
        ladle_op *op = NULL;
        LT_OK(ladle_dist_conv_create(&d, p, c->x, LADLE_F64, lt_device(), 5, &op));
        lt_adjoint_ok(op, 300 + (uint64_t)k, "distributed convolution without bias");
        ladle_op_destroy(&op);
        ladle_partition_destroy(&p);
    }
}
END_TEST

/* The sum over every rank of the boxes op computes with the overlap, and
 * of the ranks that cut their block (a shell around the interior). */
static void overlap_count(const ladle_op *op, int *boxes, int *shells)
{
    int mine[2] = {ladle__dist_conv_parts(op),
                   ladle__dist_conv_parts(op) > ladle__dist_conv_interior_parts(op)},
        all[2];
    MPI_Allreduce(mine, all, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    *boxes += all[0];
    *shells += all[1];
}

/* The last four cases: the first three run the sequential layer on every
 * rank's block (no exchange, no padded copies), the near miss does not;
 * each against the sequential layer, with the dot-product test. */
START_TEST(direct_when_nothing_moves)
{
    for (int k = NCASES - 4; k < NCASES; k++) {
        const ccase *c = &cases[k];
        if (lt_ranks_of(2 + c->nd, c->grid) > lt_size)
            continue;
        int want = k < NCASES - 1;
        ladle_partition *p = lt_partition(2 + c->nd, c->grid, 0);
        ladle_conv_desc cd;
        conv_desc(c, &cd, 0);
        ladle_pool_desc pd;
        ladle_pool_desc_init(&pd, LADLE_POOL_AVG, c->nd, c->k);
        for (int i = 0; i < c->nd; i++)
            pd.stride[i] = c->s;
        pd.count_include_pad = 0;
        ladle_op *dist[2] = {NULL, NULL}, *seq[2] = {NULL, NULL};
        LT_OK(ladle_dist_conv_create(&cd, p, c->x, LADLE_F64, lt_device(), 5, &dist[0]));
        LT_OK(ladle_conv_create(&cd, c->x, LADLE_F64, lt_device(), 5, &seq[0]));
        LT_OK(ladle_dist_pool_create(&pd, p, c->x, LADLE_F64, lt_device(), &dist[1]));
        LT_OK(ladle_pool_create(&pd, c->x, LADLE_F64, lt_device(), &seq[1]));
        for (int j = 0; j < 2; j++) {
            char what[64];
            snprintf(what, sizeof what, "%s case %d", j ? "avg pool" : "conv", k);
            LT_ASSERT(!ladle_op_active(dist[j]) || ladle__dist_conv_direct(dist[j]) == want,
                      "%s: direct %d, expected %d", what, ladle__dist_conv_direct(dist[j]),
                      want);
            lt_equivalent(dist[j], seq[j], 1000 + (uint64_t)k, 1e-12, what);
            lt_adjoint_ok(dist[j], 1100 + (uint64_t)k, what);
            LT_DESTROY_OPS(&dist[j], &seq[j]);
        }
        ladle_partition_destroy(&p);
    }
}
END_TEST

/* LADLE_OVERLAP_HALO: the cases above, convolution (with and without a
 * bias, f64 and f32) and max and average pooling, against the sequential
 * layers, and the dot-product test; the overlap must run on the ranks of
 * spatially split cases with an interior. */
START_TEST(overlap_equivalence)
{
    int boxes = 0, shells = 0, split_cases = 0;
    for (int k = 0; k < NCASES; k++) {
        const ccase *c = &cases[k];
        if (lt_ranks_of(2 + c->nd, c->grid) > lt_size)
            continue;
        ladle_partition *p = lt_partition(2 + c->nd, c->grid, 0);
        for (int i = 2; i < 2 + c->nd; i++)
            split_cases += c->grid[i] > 1 && lt_rank == 0;
        for (int t = 0; t < 2; t++) {
            ladle_dtype dt = t ? LADLE_F32 : LADLE_F64;
            ladle_conv_desc d;
            conv_desc(c, &d, t); /* f64 without a bias: linear, for the adjoint */
            ladle_op *dist = NULL, *seq = NULL;
            d.flags = LADLE_OVERLAP_HALO; /* the sequential twin ignores it */
            LT_OK(ladle_dist_conv_create(&d, p, c->x, dt, lt_device(), 31 + (uint64_t)k,
                                         &dist));
            LT_OK(ladle_conv_create(&d, c->x, dt, lt_device(), 31 + (uint64_t)k, &seq));
            overlap_count(dist, &boxes, &shells);
            char what[64];
            snprintf(what, sizeof what, "overlapped conv case %d (%s)", k,
                     t ? "f32" : "f64");
            lt_equivalent(dist, seq, 600 + (uint64_t)k, t ? 1e-4 : 1e-10, what);
            if (!t)
                lt_adjoint_ok(dist, 700 + (uint64_t)k, what);
            LT_DESTROY_OPS(&dist, &seq);
        }
        for (int v = 0; v < 2 && 2 * c->p <= c->k; v++) {
            ladle_pool_desc d;
            ladle_pool_desc_init(&d, v ? LADLE_POOL_AVG : LADLE_POOL_MAX, c->nd, c->k);
            for (int i = 0; i < c->nd; i++) {
                d.stride[i] = c->s;
                d.padding[i] = c->p;
                d.dilation[i] = v ? 1 : c->d;
            }
            d.count_include_pad = k % 2; /* the rescaled windows too */
            ladle_op *dist = NULL, *seq = NULL;
            d.flags = LADLE_OVERLAP_HALO; /* the sequential twin ignores it */
            LT_OK(ladle_dist_pool_create(&d, p, c->x, LADLE_F64, lt_device(), &dist));
            LT_OK(ladle_pool_create(&d, c->x, LADLE_F64, lt_device(), &seq));
            overlap_count(dist, &boxes, &shells);
            char what[64];
            snprintf(what, sizeof what, "overlapped %s pool case %d", v ? "avg" : "max", k);
            lt_equivalent(dist, seq, 800 + (uint64_t)k, 1e-12, what);
            if (v)
                lt_adjoint_ok(dist, 900 + (uint64_t)k, what);
            LT_DESTROY_OPS(&dist, &seq);
        }
        ladle_partition_destroy(&p);
    }
    MPI_Bcast(&split_cases, 1, MPI_INT, 0, MPI_COMM_WORLD);
    LT_ASSERT(split_cases == 0 || (boxes > 0 && shells > 0),
              "%d spatially split cases, but %d boxes and %d cut blocks", split_cases,
              boxes, shells);
}
END_TEST

/* On 2 row tiles (ranks 0 and 1 of the partition *p), the overlapped
 * convolution k3 p1 of x's channels to co and its sequential twin, made from
 * one seed (so with the same weights), in f64. */
static void row_tiles_conv(const int64_t *xs, int64_t co, uint64_t seed,
                           ladle_partition **p, ladle_conv_desc *d, ladle_op **dist,
                           ladle_op **seq)
{
    int grid[4] = {1, 1, 2, 1};
    *p = lt_partition(4, grid, 0);
    ladle_conv_desc_init(d, 2, xs[1], co, 3);
    d->padding[0] = d->padding[1] = 1;
    d->flags = LADLE_OVERLAP_HALO;
    LT_OK(ladle_dist_conv_create(d, *p, xs, LADLE_F64, lt_device(), seed, dist));
    LT_OK(ladle_conv_create(d, xs, LADLE_F64, lt_device(), seed, seq));
}

/* op's boxes on this rank: the interior's runs, and all of them. */
static void expect_boxes(const ladle_op *op, int runs, int parts, const char *what)
{
    int r = ladle__dist_conv_interior_parts(op), n = ladle__dist_conv_parts(op);
    LT_ASSERT(r == runs && n == parts, "%s: %d runs of %d boxes (want %d of %d)", what, r,
              n, runs, parts);
}

/* The interior in runs of samples (the exchange's progress called between
 * them): 9 samples on 2 row tiles make runs of 2, 2, 2 and 3. A
 * convolution with a bias (a shell on both tiles), and max and average
 * pooling k3 s2 p1 over 8 rows, whose first tile has no window reading the
 * halo (its runs read and write y and dy in place) and whose second has a
 * shell: each against the sequential layer, and the dot-product test where
 * the layer is linear. */
START_TEST(overlap_runs)
{
    LT_NEED_RANKS(2);
    int64_t xs[4] = {9, 2, 8, 7};
    ladle_partition *p = NULL;
    ladle_conv_desc cd;
    ladle_op *dist = NULL, *seq = NULL;
    row_tiles_conv(xs, 3, 5, &p, &cd, &dist, &seq);
    expect_boxes(dist, lt_rank < 2 ? 4 : 0, lt_rank < 2 ? 5 : 0, "convolution");
    lt_equivalent(dist, seq, 1001, 1e-10, "convolution in runs");
    LT_DESTROY_OPS(&dist, &seq);
    for (int v = 0; v < 2; v++) {
        ladle_pool_desc d;
        ladle_pool_desc_init(&d, v ? LADLE_POOL_AVG : LADLE_POOL_MAX, 2, 3);
        d.stride[0] = d.stride[1] = 2;
        d.padding[0] = d.padding[1] = 1;
        d.flags = LADLE_OVERLAP_HALO;
        LT_OK(ladle_dist_pool_create(&d, p, xs, LADLE_F64, lt_device(), &dist));
        LT_OK(ladle_pool_create(&d, xs, LADLE_F64, lt_device(), &seq));
        /* the first tile's windows never read the halo: no shell there */
        expect_boxes(dist, lt_rank < 2 ? 4 : 0,
                     lt_rank == 0   ? 4
                     : lt_rank == 1 ? 5
                                    : 0,
                     "pooling");
        lt_equivalent(dist, seq, 1002 + (uint64_t)v, 1e-12,
                      v ? "avg pool in runs" : "max pool in runs");
        if (v)
            lt_adjoint_ok(dist, 1004, "avg pool in runs");
        LT_DESTROY_OPS(&dist, &seq);
    }
    cd.bias = 0; /* linear: the adjoint */
    cd.flags = LADLE_OVERLAP_HALO;
    LT_OK(ladle_dist_conv_create(&cd, p, xs, LADLE_F64, lt_device(), 6, &dist));
    lt_adjoint_ok(dist, 1005, "convolution in runs");
    ladle_op_destroy(&dist);
    ladle_partition_destroy(&p);
}
END_TEST

/* The overlapped layer's boxes follow its weights when the caller moves
 * them (ladle_op_bind_param), and a layer the overlap cannot serve (another
 * padding mode) runs without it. */
START_TEST(overlap_bound_weights)
{
    LT_NEED_RANKS(2);
    int64_t xs[4] = {2, 3, 12, 7};
    ladle_partition *p = NULL;
    ladle_conv_desc d;
    ladle_op *dist = NULL, *seq = NULL;
    row_tiles_conv(xs, 4, 3, &p, &d, &dist, &seq);
    /* the interior (2 samples: one run), and the slab by the other tile */
    expect_boxes(dist, lt_rank < 2 ? 1 : 0, lt_rank < 2 ? 2 : 0, "2 row tiles");
    /* new weights: the old ones doubled, in memory of the caller's */
    ladle_tensor *w = ladle_op_param(dist, 0), *sw = ladle_op_param(seq, 0);
    int64_t n = ladle_tensor_numel(w);
    double *buf = malloc((size_t)(n + 1) * sizeof *buf);
    double *gbuf = calloc((size_t)(n + 1), sizeof *gbuf);
    if (lt_device() == LADLE_CPU) { /* ranks outside p hold no weights */
        LT_ASSERT(buf != NULL && gbuf != NULL, "out of memory");
        /* LT_OK is collective: only p's ranks make these calls */
        ladle_status st = LADLE_OK;
        if (n > 0) {
            st = ladle_tensor_read(w, buf);
            for (int64_t i = 0; i < n; i++)
                buf[i] *= 2;
            if (st == LADLE_OK)
                st = ladle_op_bind_param(dist, 0, buf, gbuf);
            if (st == LADLE_OK)
                st = ladle_tensor_write(sw, buf);
        }
        LT_ASSERT(st == LADLE_OK, "binding doubled weights: %s: %s", ladle_status_name(st),
                  ladle_error_message());
        lt_equivalent(dist, seq, 41, 1e-10, "overlapped conv with bound weights");
    }
    ladle_op_destroy(&dist);
    free(buf);
    free(gbuf);
    /* reflect padding: filled from the halo's cells, so no overlap */
    d.padding_mode = LADLE_PAD_REFLECT;
    LT_OK(ladle_dist_conv_create(&d, p, xs, LADLE_F64, lt_device(), 3, &dist));
    LT_ASSERT(ladle__dist_conv_parts(dist) == 0, "%d boxes with reflect padding",
              ladle__dist_conv_parts(dist));
    LT_DESTROY_OPS(&dist, &seq);
    /* the flag belongs to these layers only */
    int g2[2] = {1, 1};
    ladle_partition *q = lt_partition(2, g2, 0);
    LT_FAILS_SAYING(
        ladle_dist_linear_create(LT_LINEAR(3, 3, 1, LADLE_OVERLAP_HALO),
                                 &(ladle_dist_partitions){.x = q, .w = q, .y = q},
                                 (int64_t[]){2, 3}, LADLE_F64, lt_device(), 1, &dist),
        LADLE_ERR_ARG, "unknown flags");
    ladle_partition_destroy(&q);
    /* a pooling's flags are its descriptor's: a bit it does not know is
     * refused by the distributed and the sequential layer */
    ladle_pool_desc pd;
    ladle_pool_desc_init(&pd, LADLE_POOL_MAX, 2, 2);
    pd.flags = 0x100;
    LT_FAILS_SAYING(ladle_dist_pool_create(&pd, p, xs, LADLE_F64, lt_device(), &dist),
                    LADLE_ERR_ARG, "unknown flags 0x100");
    LT_FAILS_SAYING(ladle_pool_create(&pd, xs, LADLE_F64, lt_device(), &dist),
                    LADLE_ERR_ARG, "unknown flags 0x100");
    ladle_partition_destroy(&p);
}
END_TEST

/* Weight grids: p_w = Pco x Pci x S, p_x its ranks with co = 0, p_y its
 * ranks with ci = 0 (as DistDL lays them out). */
START_TEST(grid_equivalence)
{
    struct {
        int nd, pco, pci, s[3];
        int64_t x[5], co, k, st, p, d;
        int bias;
    } cases[] = {
        {2, 2, 1, {1, 1}, {2, 3, 7, 6}, 5, 3, 1, 1, 1, 1},
        {2, 1, 2, {1, 1}, {2, 5, 6, 7}, 3, 3, 1, 1, 1, 1},
        {2, 2, 2, {1, 1}, {2, 5, 8, 6}, 7, 3, 2, 1, 1, 1},
        {2, 2, 1, {2, 1}, {1, 3, 9, 7}, 4, 3, 1, 1, 1, 1},
        {2, 1, 2, {1, 2}, {2, 4, 6, 9}, 3, 5, 1, 2, 1, 1},
        {1, 2, 2, {2}, {2, 4, 13}, 5, 3, 2, 1, 2, 1},
        {2, 2, 2, {2, 1}, {1, 4, 10, 7}, 6, 3, 1, 1, 1, 0},
        {3, 1, 2, {1, 2, 1}, {1, 3, 5, 6, 4}, 2, 3, 1, 1, 1, 1},
        {2, 3, 2, {2, 1}, {1, 5, 8, 5}, 7, 3, 1, 1, 1, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int nd = 2 + cases[k].nd, tiles = 1;
        for (int a = 0; a < cases[k].nd; a++)
            tiles *= cases[k].s[a];
        int nw = cases[k].pco * cases[k].pci * tiles;
        if (nw > lt_size)
            continue;
        int gw[5] = {cases[k].pco, cases[k].pci}, gx[5] = {1, cases[k].pci},
            gy[5] = {1, cases[k].pco};
        for (int a = 0; a < cases[k].nd; a++)
            gw[2 + a] = gx[2 + a] = gy[2 + a] = cases[k].s[a];
        int rx[64], ry[64];
        for (int j = 0; j < cases[k].pci; j++)
            for (int t = 0; t < tiles; t++)
                rx[j * tiles + t] = (0 * cases[k].pci + j) * tiles + t;
        for (int i = 0; i < cases[k].pco; i++)
            for (int t = 0; t < tiles; t++)
                ry[i * tiles + t] = (i * cases[k].pci + 0) * tiles + t;
        ladle_partition *pw = lt_partition(nd, gw, 0), *px = lt_partition_ranks(nd, gx, rx),
                        *py = lt_partition_ranks(nd, gy, ry);
        ladle_conv_desc d;
        ladle_conv_desc_init(&d, cases[k].nd, cases[k].x[1], cases[k].co, cases[k].k);
        for (int a = 0; a < cases[k].nd; a++) {
            d.stride[a] = cases[k].st;
            d.padding[a] = cases[k].p;
            d.dilation[a] = cases[k].d;
        }
        d.bias = cases[k].bias;
        for (int t = 0; t < 2; t++) {
            ladle_dtype dt = t ? LADLE_F32 : LADLE_F64;
            ladle_op *dist = NULL, *seq = NULL;
            LT_OK(ladle_dist_conv_grid_create(
                &d, &(ladle_dist_partitions){.x = px, .w = pw, .y = py}, cases[k].x, dt,
                lt_device(), 60 + k, &dist));
            LT_OK(ladle_conv_create(&d, cases[k].x, dt, lt_device(), 60 + k, &seq));
            char what[64];
            snprintf(what, sizeof what, "grid conv case %zu (%s)", k, t ? "f32" : "f64");
            lt_equivalent(dist, seq, 400 + k, t ? 1e-4 : 1e-10, what);
            if (!cases[k].bias && !t)
                lt_adjoint_ok(dist, 500 + k, what);
            ladle_op_destroy(&dist), ladle_op_destroy(&seq);
        }
        /* the other padding modes (f64): reflect and replicate fill the
         * global edges after the exchange, circular wraps it around */
        ladle_padding_mode modes[3] = {LADLE_PAD_REFLECT, LADLE_PAD_REPLICATE,
                                       LADLE_PAD_CIRCULAR};
        for (int q = 0; q < 3; q++) {
            ladle_conv_desc dm = d;
            dm.padding_mode = modes[q];
            ladle_op *dist = NULL, *seq = NULL;
            LT_OK(ladle_dist_conv_grid_create(
                &dm, &(ladle_dist_partitions){.x = px, .w = pw, .y = py}, cases[k].x,
                LADLE_F64, lt_device(), 70 + k, &dist));
            LT_OK(ladle_conv_create(&dm, cases[k].x, LADLE_F64, lt_device(), 70 + k, &seq));
            char what[64];
            snprintf(what, sizeof what, "grid conv case %zu, padding mode %d", k,
                     (int)modes[q]);
            lt_equivalent(dist, seq, 450 + k, 1e-10, what);
            if (!cases[k].bias)
                lt_adjoint_ok(dist, 550 + k, what);
            ladle_op_destroy(&dist), ladle_op_destroy(&seq);
        }
        ladle_partition_destroy(&pw), ladle_partition_destroy(&px),
            ladle_partition_destroy(&py);
    }
}
END_TEST

/* Padding the weight grid cannot do, refused alike on every rank: reflect
 * reading more cells than an edge block holds, a padding that does not fit
 * the extent, 'same', an unknown mode. */
START_TEST(grid_padding_refused)
{
    LT_NEED_RANKS(2);
    int g[4] = {1, 1, 2, 1};
    ladle_partition *p = lt_partition(4, g, 0);
    int64_t xs[4] = {1, 3, 4, 5};
    ladle_conv_desc d;
    ladle_conv_desc_init(&d, 2, 3, 2, 5);
    d.padding[0] = d.padding[1] = 2;
    d.padding_mode = LADLE_PAD_REFLECT;
    ladle_op *op = NULL;
    ladle_dist_partitions ps = {.x = p, .w = p, .y = p};
    LT_FAILS_SAYING(
        ladle_dist_conv_grid_create(&d, &ps, xs, LADLE_F64, lt_device(), 1, &op),
        LADLE_ERR_UNSUPPORTED, "reads 3 cells of the edge blocks");
    d.padding[0] = d.padding[1] = 1; /* fits: blocks of 2 hold the 2 cells read */
    LT_OK(ladle_dist_conv_grid_create(&d, &ps, xs, LADLE_F64, lt_device(), 1, &op));
    ladle_op_destroy(&op);
    ladle_conv_desc_init(&d, 2, 3, 2, 1);
    d.padding[1] = 5; /* reflect padding must stay below the extent */
    d.padding_mode = LADLE_PAD_REFLECT;
    LT_FAILS_SAYING(
        ladle_dist_conv_grid_create(&d, &ps, xs, LADLE_F64, lt_device(), 1, &op),
        LADLE_ERR_ARG, "does not fit spatial dimension 1");
    ladle_conv_desc_init(&d, 2, 3, 2, 3);
    d.same = 1;
    LT_FAILS_SAYING(
        ladle_dist_conv_grid_create(&d, &ps, xs, LADLE_F64, lt_device(), 1, &op),
        LADLE_ERR_UNSUPPORTED, "not 'same'");
    d.same = 0;
    d.padding_mode = (ladle_padding_mode)77;
    LT_FAILS_SAYING(
        ladle_dist_conv_grid_create(&d, &ps, xs, LADLE_F64, lt_device(), 1, &op),
        LADLE_ERR_ARG, "unknown padding mode 77");
    LT_ASSERT(op == NULL, "the handle stays NULL");
    ladle_partition_destroy(&p);
}
END_TEST

/* Padding modes and 'same' (the desc's padding_mode and same): kernel, padding per spatial
 * dimension (ignored with same). */
typedef struct pcase {
    int nd;
    int grid[5];
    int64_t x[5];
    int64_t co, k[3], p[3], s, d;
    int mode, same;
} pcase;

static const pcase pcases[] = {
    {2, {1, 1, 2, 1}, {2, 3, 9, 8}, 4, {3, 3}, {1, 1}, 1, 1, LADLE_PAD_REFLECT, 0},
    {2, {1, 1, 1, 2}, {1, 2, 7, 11}, 3, {5, 3}, {2, 1}, 1, 1, LADLE_PAD_REPLICATE, 0},
    {2, {1, 1, 2, 2}, {2, 2, 10, 9}, 3, {3, 3}, {1, 1}, 2, 1, LADLE_PAD_REFLECT, 0},
    {2, {2, 1, 1, 1}, {3, 2, 6, 7}, 2, {3, 3}, {1, 2}, 1, 1, LADLE_PAD_CIRCULAR, 0},
    {2, {1, 1, 3, 1}, {2, 2, 9, 7}, 2, {3, 3}, {0, 1}, 1, 1, LADLE_PAD_CIRCULAR, 0},
    {2, {1, 1, 3, 1}, {1, 1, 12, 6}, 2, {5, 5}, {2, 2}, 1, 1, LADLE_PAD_REFLECT, 0},
    {2, {1, 1, 2, 2}, {2, 2, 10, 9}, 3, {4, 4}, {0, 0}, 1, 1, LADLE_PAD_ZEROS, 1},
    {2, {1, 1, 3, 1}, {1, 2, 11, 6}, 2, {4, 2}, {0, 0}, 1, 1, LADLE_PAD_ZEROS, 1},
    {2, {1, 1, 2, 2}, {2, 2, 10, 9}, 2, {4, 4}, {0, 0}, 1, 1, LADLE_PAD_REFLECT, 1},
    {1, {1, 1, 3}, {2, 2, 13}, 3, {2}, {0}, 1, 3, LADLE_PAD_REPLICATE, 1},
    {3, {1, 1, 2, 1, 2}, {1, 2, 6, 5, 7}, 2, {2, 3, 2}, {0}, 1, 1, LADLE_PAD_REFLECT, 1},
    {2, {1, 1, 4, 1}, {1, 1, 8, 5}, 1, {3, 3}, {1, 1}, 2, 1, LADLE_PAD_REPLICATE, 0},
    {2, {2, 1, 1, 1}, {2, 2, 7, 8}, 2, {2, 2}, {0, 0}, 1, 1, LADLE_PAD_CIRCULAR, 1},
    {2, {3, 1, 1, 1}, {4, 2, 7, 8}, 2, {4, 4}, {0, 0}, 1, 1, LADLE_PAD_REFLECT, 1},
    {2, {2, 1, 1, 1}, {3, 2, 9, 8}, 3, {3, 5}, {1, 2}, 2, 1, LADLE_PAD_REPLICATE, 0},
};
#define NPCASES (int)(sizeof pcases / sizeof pcases[0])

/* dist: the distributed layer with d.flags = flags, else the sequential one. */
static void pcase_make(const pcase *c, int bias, ladle_dtype dt, int dist, unsigned flags,
                       ladle_partition *p, uint64_t seed, ladle_op **op)
{
    ladle_conv_desc d;
    ladle_conv_desc_init(&d, c->nd, c->x[1], c->co, 1);
    for (int i = 0; i < c->nd; i++) {
        d.kernel[i] = c->k[i];
        d.padding[i] = c->same ? 0 : c->p[i];
        d.stride[i] = c->same ? 1 : c->s;
        d.dilation[i] = c->d;
    }
    d.bias = bias;
    d.padding_mode = (ladle_padding_mode)c->mode;
    d.same = c->same;
    d.flags = dist ? flags : 0;
    if (dist)
        LT_OK(ladle_dist_conv_create(&d, p, c->x, dt, lt_device(), seed, op));
    else
        LT_OK(ladle_conv_create(&d, c->x, dt, lt_device(), seed, op));
}

/* Each case's layer against the sequential one on the gathered tensors (y,
 * dx, weight and bias gradients; f64 to tol, f32 to 1e-4) and, without
 * bias, the dot-product test; with overlap, a third pass with
 * LADLE_OVERLAP_HALO that must fall back to the plain layer (no parts). */
static void pcases_run(const pcase *cases, int ncases, const char *label, uint64_t seed,
                       double tol, int overlap)
{
    for (int k = 0; k < ncases; k++) {
        const pcase *c = &cases[k];
        int n = 1;
        for (int i = 0; i < 2 + c->nd; i++)
            n *= c->grid[i];
        if (n > lt_size)
            continue;
        ladle_partition *p = lt_partition(2 + c->nd, c->grid, 0);
        for (int t = 0; t < 2 + overlap; t++) {
            ladle_dtype dt = t == 1 ? LADLE_F32 : LADLE_F64;
            unsigned flags = t == 2 ? LADLE_OVERLAP_HALO : 0;
            ladle_op *dist = NULL, *seq = NULL;
            pcase_make(c, 1, dt, 1, flags, p, seed + (uint64_t)k, &dist);
            pcase_make(c, 1, dt, 0, 0, p, seed + (uint64_t)k, &seq);
            char what[80];
            snprintf(what, sizeof what, "%s case %d (%s%s)", label, k,
                     t == 1 ? "f32" : "f64", flags ? ", overlap" : "");
            lt_equivalent(dist, seq, seed + 100 + (uint64_t)k, t == 1 ? 1e-4 : tol, what);
            int parts = ladle__dist_conv_parts(dist);
            LT_ASSERT(!flags || parts == 0,
                      "%s: %d overlapped parts, the plain layer expected", what, parts);
            LT_DESTROY_OPS(&dist, &seq);
        }
        ladle_op *op = NULL;
        pcase_make(c, 0, LADLE_F64, 1, 0, p, 5, &op);
        lt_adjoint_ok(op, seed + 200 + (uint64_t)k, label);
        ladle_op_destroy(&op);
        ladle_partition_destroy(&p);
    }
}

START_TEST(padding_options) { pcases_run(pcases, NPCASES, "padding", 21, 1e-10, 0); }
END_TEST

/* Circular padding on split dimensions: the periodic halo exchange wraps
 * around from whichever ranks own the cells. One split dimension, two
 * (corners), a halo wider than the blocks and one as wide as the extent,
 * stride, dilation, 'same' with an even kernel, 3-d, a batch split, five
 * ranks on one dimension. */
static const pcase ccases[] = {
    {2, {1, 1, 2, 1}, {2, 3, 9, 8}, 4, {3, 3}, {1, 1}, 1, 1, LADLE_PAD_CIRCULAR, 0},
    {2, {1, 1, 2, 3}, {2, 2, 7, 8}, 3, {3, 3}, {1, 1}, 1, 1, LADLE_PAD_CIRCULAR, 0},
    {1, {1, 1, 4}, {2, 2, 5}, 2, {5}, {2}, 1, 1, LADLE_PAD_CIRCULAR, 0},
    {1, {1, 1, 3}, {1, 2, 4}, 2, {9}, {4}, 1, 1, LADLE_PAD_CIRCULAR, 0},
    {2, {1, 1, 2, 2}, {2, 2, 10, 9}, 3, {3, 3}, {1, 1}, 2, 1, LADLE_PAD_CIRCULAR, 0},
    {2, {1, 1, 2, 2}, {1, 2, 8, 9}, 2, {3, 3}, {2, 2}, 1, 2, LADLE_PAD_CIRCULAR, 0},
    {2, {1, 1, 3, 1}, {1, 2, 11, 6}, 2, {4, 2}, {0, 0}, 1, 1, LADLE_PAD_CIRCULAR, 1},
    {3,
     {1, 1, 2, 1, 2},
     {1, 2, 6, 5, 7},
     2,
     {3, 3, 3},
     {1, 1, 1},
     1,
     1,
     LADLE_PAD_CIRCULAR,
     0},
    {2, {2, 1, 1, 2}, {3, 2, 6, 7}, 2, {3, 3}, {1, 2}, 1, 1, LADLE_PAD_CIRCULAR, 0},
    {2, {1, 1, 5, 1}, {1, 1, 6, 5}, 1, {3, 3}, {1, 1}, 1, 1, LADLE_PAD_CIRCULAR, 0},
};
#define NCCASES (int)(sizeof ccases / sizeof ccases[0])

/* f64 to 1e-12; LADLE_OVERLAP_HALO runs the plain layer. */
START_TEST(circular_split) { pcases_run(ccases, NCCASES, "circular", 31, 1e-12, 1); }
END_TEST

START_TEST(padding_bad_input)
{
    ladle_conv_desc d;
    ladle_op *op = NULL;
    int g1[4] = {1, 1, 1, 1};
    int64_t xs[4] = {2, 3, 3, 8};
    ladle_partition *p = lt_partition(4, g1, 0);
    ladle_conv_desc_init(&d, 2, 3, 2, 3);
    d.padding_mode = (ladle_padding_mode)-1;
    LT_FAILS(ladle_dist_conv_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_ARG);
    d.padding_mode = LADLE_PAD_REFLECT;
    d.padding[0] = 3; /* reflect below the extent 3 */
    LT_FAILS(ladle_dist_conv_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_ARG);
    ladle_partition_destroy(&p);
    if (lt_size >= 2) {
        int g2[4] = {1, 1, 2, 1};
        p = lt_partition(4, g2, 0);
        d.padding[0] = 2; /* fits 3 cells, but the blocks of 1 cannot reflect 2 */
        LT_FAILS_SAYING(ladle_dist_conv_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op),
                        LADLE_ERR_UNSUPPORTED, "edge blocks");
        /* circular wraps a split dimension of blocks of 1 and 2 cells (once
         * refused): the layer is the sequential one on the gathered tensors;
         * wider than the extent it is refused */
        d.padding_mode = LADLE_PAD_CIRCULAR;
        d.padding[0] = 1;
        ladle_op *seq = NULL;
        LT_OK(ladle_dist_conv_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op));
        LT_OK(ladle_conv_create(&d, xs, LADLE_F64, lt_device(), 1, &seq));
        lt_equivalent(op, seq, 77, 1e-12, "circular on blocks of 1 and 2 cells");
        LT_DESTROY_OPS(&op, &seq);
        d.padding[0] = 4;
        LT_FAILS_SAYING(ladle_dist_conv_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op),
                        LADLE_ERR_ARG, "circular: at most the extent");
        d.padding_mode = LADLE_PAD_ZEROS;
        d.same = 1;
        d.stride[1] = 2;
        LT_FAILS(ladle_dist_conv_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op),
                 LADLE_ERR_ARG);
        ladle_partition_destroy(&p);
    }
    LT_ASSERT(op == NULL, "no op on failure");
}
END_TEST

/* The 0.1 name (deprecated): ladle_dist_conv_create_ex with ladle_conv_opts
 * and flags gives the layer of the desc's fields, bit for bit. */
START_TEST(deprecated_dist_conv_ex)
{
    int grid[4] = {1, 1, lt_size >= 2 ? 2 : 1, 1};
    int64_t xs[4] = {2, 3, 8, 6};
    ladle_partition *p = lt_partition(4, grid, 0);
    ladle_conv_desc d;
    ladle_conv_desc_init(&d, 2, 3, 4, 3);
    d.padding[0] = d.padding[1] = 1;
    ladle_op *old = NULL, *now = NULL;
    LT_DEPRECATED_BEGIN
    ladle_conv_opts o;
    ladle_conv_opts_init(&o);
    o.padding_mode = LADLE_PAD_REPLICATE;
    LT_OK(ladle_dist_conv_create_ex(&d, &o, p, xs, LADLE_F64, lt_device(), 4, LADLE_CHECKED,
                                    &old));
    LT_FAILS(
        ladle_dist_conv_create_ex(&d, &o, p, xs, LADLE_F64, lt_device(), 4, 0x100, &now),
        LADLE_ERR_ARG);
    LT_DEPRECATED_END
    LT_ASSERT(now == NULL, "no op on failure");
    d.padding_mode = LADLE_PAD_REPLICATE;
    d.flags = LADLE_CHECKED;
    LT_OK(ladle_dist_conv_create(&d, p, xs, LADLE_F64, lt_device(), 4, &now));
    lt_same_layer(old, now, 51, "dist_conv_create_ex and the desc's options");
    LT_DESTROY_OPS(&old, &now);
    ladle_partition_destroy(&p);
}
END_TEST

START_TEST(bad_input)
{
    int g1[4] = {1, 1, 1, 1};
    ladle_partition *p = lt_partition(4, g1, 0);
    ladle_conv_desc d;
    ladle_op *op = NULL;
    int64_t xs[4] = {2, 3, 8, 8};
    ladle_conv_desc_init(&d, 2, 4, 5, 3); /* 4 channels, x has 3 */
    LT_FAILS(ladle_dist_conv_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_SHAPE);
    ladle_conv_desc_init(&d, 2, 3, 5, 11); /* kernel larger than the input */
    LT_FAILS(ladle_dist_conv_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_SHAPE);
    int64_t xs3[5] = {2, 3, 8, 8, 8};     /* x_shape has nd + 2 entries */
    ladle_conv_desc_init(&d, 3, 3, 5, 3); /* a 3-d layer on a 4-d grid */
    LT_FAILS(ladle_dist_conv_create(&d, p, xs3, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_PARTITION);
    ladle_pool_desc pd;
    ladle_pool_desc_init(&pd, LADLE_POOL_AVG, 2, 2);
    pd.kind = (ladle_pool_kind)5;
    LT_FAILS(ladle_dist_pool_create(&pd, p, xs, LADLE_F64, lt_device(), &op),
             LADLE_ERR_ARG);
    if (lt_size >= 2) {
        int g2[4] = {1, 2, 1, 1};
        ladle_partition *pc = lt_partition(4, g2, 0);
        ladle_conv_desc_init(&d, 2, 3, 5, 3); /* channels split: not spatial */
        LT_FAILS(ladle_dist_conv_create(&d, pc, xs, LADLE_F64, lt_device(), 1, &op),
                 LADLE_ERR_PARTITION);
        ladle_partition_destroy(&pc);
    }
    ladle_partition_destroy(&p);
}
END_TEST

LT_SUITE("dist_conv", "dist_conv", 0, conv_equivalence, pool_equivalence,
         direct_when_nothing_moves, avg_pool_divisors, adjoint, grid_equivalence,
         grid_padding_refused, bad_input, padding_options, circular_split,
         padding_bad_input, deprecated_dist_conv_ex, overlap_equivalence, overlap_runs,
         overlap_bound_weights)
