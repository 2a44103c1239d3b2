/* SumReduce: the broadcast matrix read backwards (sources are the big
 * partition, destinations the owners), exact sums, and bad input. */
#include "pair_cases.h"

static ladle_op *make(const pair_case *c, ladle_dtype dt)
{
    ladle_partition *s, *b;
    ladle_op *op = NULL;
    case_partitions(c, &s, &b);
    /* x lives on big, y on small: the transposes follow their partitions */
    unsigned flags =
        (c->t_big ? LADLE_TRANSPOSE_SRC : 0) | (c->t_small ? LADLE_TRANSPOSE_DEST : 0);
    LT_OK(ladle_sum_reduce_create(LT_BCAST(c->ndim, c->block, flags), b, s, dt, lt_device(),
                                  &op));
    ladle_partition_destroy(&s);
    ladle_partition_destroy(&b);
    return op;
}

START_TEST(adjoint_matrix)
{
    for (int k = 0; k < N_PAIR_CASES; k++) {
        const pair_case *c = &pair_cases[k];
        if (case_needs(c) > lt_size || block_volume(c) == 0)
            continue;
        for (int t = 0; t < 2; t++) {
            ladle_op *op = make(c, t ? LADLE_F32 : LADLE_F64);
            lt_adjoint_ok(op, 200 + (uint64_t)k, c->name);
            ladle_op_destroy(&op);
        }
    }
}
END_TEST

/* y on each destination is exactly the sum of its sources' x; dx on each
 * source is exactly its destination's dy. */
START_TEST(exact_values)
{
    for (int k = 0; k < N_PAIR_CASES; k++) {
        const pair_case *c = &pair_cases[k];
        if (case_needs(c) > lt_size)
            continue;
        for (int t = 0; t < 2; t++) {
            ladle_op *op = make(c, t ? LADLE_F32 : LADLE_F64);
            ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
            ladle_tensor *dy = lt_op_tensor(op, 1), *dx = lt_op_tensor(op, 0);
            int i = small_rank_of_me(c), j = big_rank_of_me(c);
            int64_t n = block_volume(c);
            int64_t nv = n;
            nv = ladle_tensor_numel(x) > nv ? ladle_tensor_numel(x) : nv;
            nv = ladle_tensor_numel(dy) > nv ? ladle_tensor_numel(dy) : nv;
            double *v = calloc((size_t)nv + 1, sizeof *v);
            for (int64_t e = 0; j >= 0 && e < n; e++)
                v[e] = receiver_value(j, e);
            if (j >= 0)
                lt_store(x, v);
            for (int64_t e = 0; i >= 0 && e < n; e++)
                v[e] = owner_value(i, e);
            if (i >= 0)
                lt_store(dy, v);
            free(v);
            LT_OK(ladle_op_forward(op, x, y));
            LT_OK(ladle_op_adjoint(op, dy, dx));
            double *yv = lt_values(y), *dxv = lt_values(dx);
            int ok = 1, owner = j >= 0 ? reference_owner(c, j) : -1;
            for (int64_t e = 0; i >= 0 && e < n && ok; e++) {
                double want = 0;
                for (int q = 0; q < prod(c->bd, c->bshape); q++)
                    if (reference_owner(c, q) == i)
                        want += receiver_value(q, e);
                ok &= yv[e] == want;
            }
            LT_ASSERT(ok, "%s (%s): y on destination %d is not the sum of its sources",
                      c->name, t ? "f32" : "f64", i);
            for (int64_t e = 0; j >= 0 && e < n; e++)
                ok &= dxv[e] == owner_value(owner, e);
            LT_ASSERT(ok, "%s (%s): dx on source %d is not destination %d's dy", c->name,
                      t ? "f32" : "f64", j, owner);
            free(yv), free(dxv);
            ladle_tensor_destroy(&x);
            ladle_tensor_destroy(&y);
            ladle_tensor_destroy(&dx);
            ladle_tensor_destroy(&dy);
            ladle_op_destroy(&op);
        }
    }
}
END_TEST

/* The order of a sum never depends on timing: the same inputs give the
 * same bits on repeated calls. */
START_TEST(deterministic_sums)
{
    int need = lt_size < 5 ? lt_size : 5;
    int s1[1] = {1}, sn[1] = {need};
    ladle_partition *px = lt_partition(1, sn, 0), *py = lt_partition(1, s1, 0);
    ladle_op *op = NULL;
    int64_t n = 40000;
    LT_OK(ladle_sum_reduce_create(LT_BCAST(1, &n, 0), px, py, LADLE_F32, lt_device(), &op));
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1),
                 *y2 = lt_op_tensor(op, 1);
    LT_OK(ladle_tensor_fill_random(x, 5, (uint64_t)lt_rank));
    LT_OK(ladle_op_forward(op, x, y));
    int same = 1;
    double *a = lt_values(y);
    for (int rep = 0; rep < 3; rep++) {
        LT_OK(ladle_op_forward(op, x, y2));
        double *b = lt_values(y2);
        for (int64_t e = 0; e < ladle_tensor_numel(y); e++)
            same &= a[e] == b[e];
        free(b);
    }
    free(a);
    LT_ASSERT(same, "repeated sums differ");
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&y);
    ladle_tensor_destroy(&y2);
    ladle_op_destroy(&op);
    ladle_partition_destroy(&px);
    ladle_partition_destroy(&py);
}
END_TEST

START_TEST(bad_input)
{
    if (lt_size < 3)
        return;
    int s13[2] = {1, 3}, s31[2] = {3, 1}, s3[1] = {3}, s113[3] = {1, 1, 3};
    ladle_partition *a = lt_partition(2, s13, 0), *b = lt_partition(2, s31, 0);
    ladle_partition *c = lt_partition(1, s3, 0), *d = lt_partition(3, s113, 0);
    ladle_op *op = NULL;
    int64_t shape[1] = {4};
    /* 3x1 -> 1x3 is illegal without a transpose, legal with either */
    LT_FAILS(
        ladle_sum_reduce_create(LT_BCAST(1, shape, 0), b, a, LADLE_F64, lt_device(), &op),
        LADLE_ERR_PARTITION);
    LT_OK(ladle_sum_reduce_create(LT_BCAST(1, shape, LADLE_TRANSPOSE_SRC), b, a, LADLE_F64,
                                  lt_device(), &op));
    ladle_op_destroy(&op);
    LT_OK(ladle_sum_reduce_create(LT_BCAST(1, shape, LADLE_TRANSPOSE_DEST), b, a, LADLE_F64,
                                  lt_device(), &op));
    ladle_op_destroy(&op);
    /* the destination may not have more dimensions than the source */
    LT_FAILS(
        ladle_sum_reduce_create(LT_BCAST(1, shape, 0), c, d, LADLE_F64, lt_device(), &op),
        LADLE_ERR_PARTITION);
    LT_FAILS(ladle_sum_reduce_create(LT_BCAST(1, shape, 0), b, NULL, LADLE_F64, lt_device(),
                                     &op),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_sum_reduce_create(LT_BCAST(1, shape, 0), b, b, (ladle_dtype)0,
                                     lt_device(), &op),
             LADLE_ERR_DTYPE);
    LT_ASSERT(op == NULL, "no op on failure");
    /* adjoint with tensors swapped (dy must have y's shape) */
    int64_t two[1] = {2};
    LT_OK(ladle_sum_reduce_create(LT_BCAST(1, two, 0), c, c, LADLE_F64, lt_device(), &op));
    ladle_tensor *x = lt_op_tensor(op, 0), *big = lt_tensor(LADLE_F64, 1, (int64_t[]){3});
    int member = lt_rank < 3;
    ladle_status st = ladle_op_adjoint(op, member ? big : x, x);
    LT_ASSERT(st == (member ? LADLE_ERR_SHAPE : LADLE_OK), "%s", ladle_status_name(st));
    st = ladle_op_forward(op, x, x);
    LT_ASSERT(st == (member ? LADLE_ERR_ARG : LADLE_OK), "in place refused: %s",
              ladle_status_name(st));
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&big);
    ladle_op_destroy(&op);
    ladle_partition_destroy(&a);
    ladle_partition_destroy(&b);
    ladle_partition_destroy(&c);
    ladle_partition_destroy(&d);
}
END_TEST

LT_SUITE("sum_reduce", "sum_reduce", LT_CHECK_TIMEOUT, adjoint_matrix, exact_values,
         deterministic_sums, bad_input)
