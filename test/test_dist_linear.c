/* Distributed linear layers against the sequential layer on the gathered
 * tensors, over many grids and rank placements; the dot-product test
 * without bias; bad configurations. */
#include <stdio.h>

#include "harness.h"

typedef struct lcase {
    int pin, pout;
    int64_t batch, in, out;
    int bias;
    int placement; /* 0: P_x row 0 and P_y column 0 of P_w; 1: P_x and P_y on
                      ranks after P_w (disjoint); 2: P_x and P_y on the last ranks */
} lcase;

static const lcase cases[] = {
    {1, 1, 3, 5, 4, 1, 0},  {1, 2, 4, 6, 7, 1, 0},  {2, 1, 4, 7, 3, 1, 0},
    {2, 2, 5, 9, 7, 1, 0},  {2, 2, 1, 4, 4, 0, 1},  {3, 2, 3, 11, 5, 1, 2},
    {2, 3, 2, 5, 10, 1, 0}, {3, 3, 4, 13, 8, 1, 0}, {4, 3, 3, 9, 17, 1, 2},
    {1, 4, 2, 3, 9, 0, 1},  {4, 1, 6, 8, 2, 1, 1},  {2, 4, 3, 7, 12, 1, 0},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static int needs(const lcase *c)
{
    int w = c->pin * c->pout;
    return c->placement == 1 ? w + c->pin + c->pout : w;
}

/* The three partitions of a case on MPI_COMM_WORLD. */
static void partitions(const lcase *c, ladle_partition **px, ladle_partition **pw,
                       ladle_partition **py)
{
    int w = c->pin * c->pout, rx[64], ry[64];
    int sx[2] = {1, c->pin}, sw[2] = {c->pout, c->pin}, sy[2] = {1, c->pout};
    for (int j = 0; j < c->pin; j++)
        rx[j] = c->placement == 0 ? j : c->placement == 1 ? w + j : lt_size - 1 - j;
    for (int i = 0; i < c->pout; i++)
        ry[i] = c->placement == 0   ? i * c->pin
                : c->placement == 1 ? w + c->pin + i
                                    : lt_size - c->pout + i;
    *pw = lt_partition(2, sw, 0);
    *px = lt_partition_ranks(2, sx, rx);
    *py = lt_partition_ranks(2, sy, ry);
}

static ladle_op *make(const lcase *c, ladle_dtype dt, int bias, uint64_t seed)
{
    ladle_partition *px, *pw, *py;
    ladle_op *op = NULL;
    partitions(c, &px, &pw, &py);
    LT_OK(ladle_dist_linear_create(LT_LINEAR(c->in, c->out, bias, 0),
                                   &(ladle_dist_partitions){.x = px, .w = pw, .y = py},
                                   (int64_t[]){c->batch, c->in}, dt, lt_device(), seed,
                                   &op));
    LT_DESTROY_PARTS(&px, &pw, &py);
    return op;
}

/* Batch-split (data-parallel) grids: p_x D x Pin, p_w Pout x D x Pin,
 * p_y D x Pout, the weight blocks replicated over the batch blocks. */
typedef struct dcase {
    int reps, pin, pout;
    int64_t batch, in, out;
} dcase;

static const dcase dcases[] = {
    {2, 1, 1, 5, 4, 3}, {2, 2, 1, 4, 5, 3}, {3, 1, 2, 7, 3, 5}, {2, 2, 2, 6, 7, 5},
    {4, 1, 1, 9, 6, 2}, {3, 2, 2, 8, 5, 6}, {2, 3, 2, 5, 9, 4},
};

START_TEST(data_parallel)
{
    for (size_t k = 0; k < sizeof dcases / sizeof dcases[0]; k++) {
        const dcase *c = &dcases[k];
        int nw = c->reps * c->pin * c->pout, rx[64], ry[64];
        if (nw > lt_size)
            continue;
        int sw[3] = {c->pout, c->reps, c->pin}, sx[2] = {c->reps, c->pin},
            sy[2] = {c->reps, c->pout};
        for (int b = 0; b < c->reps; b++) {
            for (int j = 0; j < c->pin; j++)
                rx[b * c->pin + j] = (0 * c->reps + b) * c->pin + j;
            for (int i = 0; i < c->pout; i++)
                ry[b * c->pout + i] = (i * c->reps + b) * c->pin;
        }
        ladle_partition *pw = lt_partition(3, sw, 0), *px = lt_partition_ranks(2, sx, rx),
                        *py = lt_partition_ranks(2, sy, ry);
        for (int t = 0; t < 2; t++) {
            ladle_dtype dt = t ? LADLE_F32 : LADLE_F64;
            ladle_op *dist = NULL, *seq = NULL;
            LT_OK(ladle_dist_linear_create(
                LT_LINEAR(c->in, c->out, 1, 0),
                &(ladle_dist_partitions){.x = px, .w = pw, .y = py},
                (int64_t[]){c->batch, c->in}, dt, lt_device(), 70 + (uint64_t)k, &dist));
            LT_OK(ladle_linear_create(LT_LINEAR(c->in, c->out, 1, 0), 2,
                                      (int64_t[]){c->batch, c->in}, dt, lt_device(),
                                      70 + (uint64_t)k, &seq));
            char what[96];
            snprintf(what, sizeof what, "linear %dx%dx%d grid (%s)", c->pout, c->reps, c->pin,
                     t ? "f32" : "f64");
            lt_equivalent(dist, seq, 17 + (uint64_t)k, t ? 1e-4 : 1e-10, what);
            LT_DESTROY_OPS(&dist, &seq);
        }
        ladle_partition_destroy(&pw), ladle_partition_destroy(&px), ladle_partition_destroy(&py);
    }
}
END_TEST

START_TEST(equivalence)
{
    for (int k = 0; k < NCASES; k++) {
        const lcase *c = &cases[k];
        if (needs(c) > lt_size)
            continue;
        for (int t = 0; t < 2; t++) {
            ladle_dtype dt = t ? LADLE_F32 : LADLE_F64;
            char what[96];
            snprintf(what, sizeof what, "linear %dx%d grid, %lldx%lld -> %lld (%s, placement %d)",
                     c->pout, c->pin, (long long)c->batch, (long long)c->in, (long long)c->out,
                     t ? "f32" : "f64", c->placement);
            ladle_op *dist = make(c, dt, c->bias, 40 + (uint64_t)k), *seq = NULL;
            LT_OK(ladle_linear_create(LT_LINEAR(c->in, c->out, c->bias, 0), 2,
                                      (int64_t[]){c->batch, c->in}, dt, lt_device(),
                                      40 + (uint64_t)k, &seq));
            lt_equivalent(dist, seq, 7 + (uint64_t)k, t ? 1e-4 : 1e-10, what);
            LT_DESTROY_OPS(&dist, &seq);
        }
    }
}
END_TEST

/* Two layers chained: the second's p_x is the first's p_y. */
START_TEST(chained)
{
    LT_NEED_RANKS(4);
    int sw[2] = {2, 2}, s12[2] = {1, 2};
    ladle_partition *pw = lt_partition(2, sw, 0);
    ladle_partition *px = lt_partition_ranks(2, s12, (int[]){0, 1});
    ladle_partition *py = lt_partition_ranks(2, s12, (int[]){0, 2});
    ladle_partition *pz = lt_partition_ranks(2, s12, (int[]){1, 3});
    ladle_op *a = NULL, *b = NULL, *sa = NULL, *sb = NULL;
    LT_OK(ladle_dist_linear_create(LT_LINEAR(6, 5, 1, 0),
                                   &(ladle_dist_partitions){.x = px, .w = pw, .y = py},
                                   (int64_t[]){3, 6}, LADLE_F64, lt_device(), 1, &a));
    LT_OK(ladle_dist_linear_create(LT_LINEAR(5, 4, 1, 0),
                                   &(ladle_dist_partitions){.x = py, .w = pw, .y = pz},
                                   (int64_t[]){3, 5}, LADLE_F64, lt_device(), 2, &b));
    LT_OK(ladle_linear_create(LT_LINEAR(6, 5, 1, 0), 2, (int64_t[]){3, 6}, LADLE_F64,
                              lt_device(), 1, &sa));
    LT_OK(ladle_linear_create(LT_LINEAR(5, 4, 1, 0), 2, (int64_t[]){3, 5}, LADLE_F64,
                              lt_device(), 2, &sb));
    ladle_tensor *X = lt_op_tensor(sa, 0), *H = lt_op_tensor(sa, 1), *Z = lt_op_tensor(sb, 1);
    ladle_tensor *x = lt_op_tensor(a, 0), *h = lt_op_tensor(a, 1), *z = lt_op_tensor(b, 1);
    int64_t xo[2], zo[2];
    LT_OK(ladle_tensor_fill_random(X, 5, 1));
    LT_OK(ladle_layout_box(ladle_op_x_layout(a), LADLE_SELF, xo, NULL));
    LT_OK(ladle_layout_box(ladle_op_y_layout(b), LADLE_SELF, zo, NULL));
    lt_box_extract(X, xo, x);
    LT_OK(ladle_op_forward(a, x, h)); /* h is b's x as it stands: no repartition */
    LT_OK(ladle_op_forward(b, h, z));
    LT_OK(ladle_op_forward(sa, X, H));
    LT_OK(ladle_op_forward(sb, H, Z));
    double e = lt_box_error(Z, zo, z);
    LT_ASSERT(e < 1e-12, "chained layers differ by %.2e", e);
    ladle_tensor_destroy(&X), ladle_tensor_destroy(&H), ladle_tensor_destroy(&Z);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&h), ladle_tensor_destroy(&z);
    ladle_op_destroy(&a), ladle_op_destroy(&b), ladle_op_destroy(&sa), ladle_op_destroy(&sb);
    ladle_partition_destroy(&pw), ladle_partition_destroy(&px);
    ladle_partition_destroy(&py), ladle_partition_destroy(&pz);
}
END_TEST

START_TEST(adjoint)
{
    for (int k = 0; k < NCASES; k++) {
        const lcase *c = &cases[k];
        if (needs(c) > lt_size)
            continue;
        ladle_op *op = make(c, LADLE_F64, 0, 3);
        lt_adjoint_ok(op, 60 + (uint64_t)k, "distributed linear without bias");
        ladle_op_destroy(&op);
    }
}
END_TEST

START_TEST(bad_input)
{
    int s11[2] = {1, 1}, s12[2] = {1, 2}, s21[2] = {2, 1};
    ladle_partition *p1 = lt_partition(2, s11, 0), *p12 = NULL, *p21 = NULL;
    ladle_op *op = NULL;
    LT_FAILS(ladle_dist_linear_create(LT_LINEAR(3, 3, 1, 0),
                                      &(ladle_dist_partitions){.x = p1, .w = p1, .y = p1},
                                      (int64_t[]){0, 3}, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_dist_linear_create(LT_LINEAR(3, 3, 1, 0),
                                      &(ladle_dist_partitions){.x = p1, .w = p1, .y = p1},
                                      (int64_t[]){2, 3}, LADLE_I64, lt_device(), 1, &op),
             LADLE_ERR_DTYPE);
    LT_FAILS(ladle_dist_linear_create(LT_LINEAR(3, 3, 1, 0),
                                      &(ladle_dist_partitions){.x = NULL, .w = p1, .y = p1},
                                      (int64_t[]){2, 3}, LADLE_F64, lt_device(), 1, &op),
             LADLE_ERR_NULL);
    if (lt_size >= 2) {
        p12 = lt_partition(2, s12, 0);
        p21 = lt_partition(2, s21, 0);
        /* p_w must be Pout x Pin, p_x 1 x Pin */
        LT_FAILS(
            ladle_dist_linear_create(LT_LINEAR(3, 3, 1, 0),
                                     &(ladle_dist_partitions){.x = p12, .w = p21, .y = p1},
                                     (int64_t[]){2, 3}, LADLE_F64, lt_device(), 1, &op),
            LADLE_ERR_PARTITION);
        LT_FAILS(
            ladle_dist_linear_create(LT_LINEAR(3, 3, 1, 0),
                                     &(ladle_dist_partitions){.x = p21, .w = p21, .y = p1},
                                     (int64_t[]){2, 3}, LADLE_F64, lt_device(), 1, &op),
            LADLE_ERR_PARTITION);
        /* fewer features than grid columns */
        LT_FAILS(
            ladle_dist_linear_create(LT_LINEAR(1, 3, 1, 0),
                                     &(ladle_dist_partitions){.x = p12, .w = p12, .y = p1},
                                     (int64_t[]){2, 1}, LADLE_F64, lt_device(), 1, &op),
            LADLE_ERR_SHAPE);
        /* ranks that disagree on the arguments all fail */
        ladle_status st0 = ladle_dist_linear_create(
            LT_LINEAR(3 + (lt_rank == 1), 3, 1, 0),
            &(ladle_dist_partitions){.x = p12, .w = p12, .y = p1},
            (int64_t[]){2, 3 + (lt_rank == 1)}, LADLE_F64, lt_device(), 1, &op);
        LT_ASSERT(st0 == (lt_rank <= 1 ? LADLE_ERR_ARG : LADLE_OK), "disagreeing ranks: %s",
                  ladle_status_name(st0));
        ladle_error_clear();
        ladle_op_destroy(&op);
        /* a wrong tensor in a checked call fails every rank */
        LT_OK(
            ladle_dist_linear_create(LT_LINEAR(4, 3, 1, LADLE_CHECKED),
                                     &(ladle_dist_partitions){.x = p12, .w = p12, .y = p1},
                                     (int64_t[]){2, 4}, LADLE_F64, lt_device(), 1, &op));
        ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1), *bad = NULL;
        bad = lt_tensor(LADLE_F64, 2, (int64_t[]){2, 7});
        ladle_status st = ladle_layer_forward(op, NULL, lt_rank == 0 ? bad : x, y);
        LT_ASSERT(lt_rank > 1 || st == (lt_rank == 0 ? LADLE_ERR_SHAPE : LADLE_ERR_REMOTE),
                  "checked forward: %s", ladle_status_name(st));
        ladle_error_clear();
        ladle_tensor_destroy(&x), ladle_tensor_destroy(&y), ladle_tensor_destroy(&bad);
        ladle_op_destroy(&op);
    }
    LT_DESTROY_PARTS(&p1, &p12, &p21);
}
END_TEST

LT_SUITE("dist_linear", "dist_linear", 0, equivalence, chained, data_parallel, adjoint,
         bad_input)
