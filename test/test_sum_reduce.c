/* SumReduce: the broadcast matrix read backwards (sources are the big
 * partition, destinations the owners), exact sums, and bad input. */
#include "pair_cases.h"

static ladle_op *make(const pair_case *c, ladle_dtype dt) { return pair_op(c, dt, 1); }

START_TEST(adjoint_matrix) { lt_adjoint_cases(N_PAIR_CASES, pair_make_case, 200); }
END_TEST

/* y on each destination is exactly the sum of its sources' x; dx on each
 * source is exactly its destination's dy. */
static void check_exact(const pair_case *c, const char *dt, const pair_pass *p)
{
    int ok = p->i < 0 || pair_holds_sum(c, p->yv, p->n, p->i);
    LT_ASSERT(ok, "%s (%s): y on destination %d is not the sum of its sources", c->name,
              dt, p->i);
    ok = ok && (p->j < 0 || pair_holds_block(p->dxv, p->n, p->owner));
    LT_ASSERT(ok, "%s (%s): dx on source %d is not destination %d's dy", c->name, dt, p->j,
              p->owner);
}

START_TEST(exact_values) { pair_exact_values(1, check_exact); }
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
    LT_DESTROY(&x, &y, &y2);
    ladle_op_destroy(&op);
    LT_DESTROY_PARTS(&px, &py);
}
END_TEST

START_TEST(bad_input)
{
    LT_NEED_RANKS(3);
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
    LT_DESTROY(&x, &big);
    ladle_op_destroy(&op);
    LT_DESTROY_PARTS(&a, &b, &c, &d);
}
END_TEST

LT_SUITE("sum_reduce", "sum_reduce", LT_CHECK_TIMEOUT, adjoint_matrix, exact_values,
         deterministic_sums, bad_input)
