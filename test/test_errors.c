/* Bad input that cuts across the primitives: NULL handles, ranks that
 * disagree, partitions from unrelated communicators, checked ops. */
#include "harness.h"

START_TEST(null_handles)
{
    int64_t shape[1] = {2};
    ladle_tensor *t = lt_tensor(LADLE_F64, 1, shape);
    LT_FAILS(ladle_op_forward(NULL, t, t), LADLE_ERR_NULL);
    LT_FAILS(ladle_op_adjoint(NULL, t, t), LADLE_ERR_NULL);
    LT_OK(ladle_op_destroy(NULL));
    ladle_op *op = NULL;
    LT_OK(ladle_op_destroy(&op));
    LT_OK(ladle_partition_destroy(NULL));
    LT_OK(ladle_layout_destroy(NULL));
    LT_ASSERT(ladle_op_x_layout(NULL) == NULL && ladle_op_active(NULL) == 0 &&
                  ladle_partition_active(NULL) == 0 && ladle_layout_ndim(NULL) == 0,
              "NULL-safe accessors");
    int nd;
    int64_t sh[4];
    LT_FAILS(ladle_op_x_shape(NULL, &nd, sh), LADLE_ERR_NULL);
    ladle_adjoint_result r;
    LT_FAILS(ladle_adjoint_test(NULL, 1, &r), LADLE_ERR_NULL);
    LT_FAILS(ladle_halo_exchange_begin(NULL, t), LADLE_ERR_NULL);
    ladle_tensor_destroy(&t);
}
END_TEST

/* Ranks that pass different arguments to a collective create fail
 * together with LADLE_ERR_ARG instead of hanging or planning nonsense. */
START_TEST(ranks_disagree)
{
    if (lt_size < 2)
        return;
    int s[1] = {lt_size};
    ladle_partition *p = lt_partition(1, s, 0);
    ladle_op *op = NULL;
    int64_t mine[1] = {lt_rank == 0 ? 5 : 6};
    int axes[1] = {0};
    ladle_status st = ladle_all_sum_reduce_create(p, 1, axes, 1, mine, LADLE_F64, 0, &op);
    LT_ASSERT(st == LADLE_ERR_ARG && op == NULL, "%s", ladle_status_name(st));
    ladle_error_clear();
    /* a failure on one rank only (here: an unknown dtype on rank 0) is
     * reported on the others as LADLE_ERR_REMOTE */
    int64_t n[1] = {4};
    st = ladle_all_sum_reduce_create(p, 1, axes, 1, n,
                                     lt_rank == 0 ? (ladle_dtype)9 : LADLE_F64, 0, &op);
    LT_ASSERT(st == (lt_rank == 0 ? LADLE_ERR_DTYPE : LADLE_ERR_REMOTE), "%s",
              ladle_status_name(st));
    ladle_error_clear();
    ladle_partition_destroy(&p);
}
END_TEST

START_TEST(unrelated_parents)
{
    if (lt_size < 2)
        return;
    /* the same processes in another order: not the same parent */
    MPI_Comm reversed;
    MPI_Comm_split(MPI_COMM_WORLD, 0, lt_size - lt_rank, &reversed);
    int one[1] = {1};
    ladle_partition *a = lt_partition(1, one, 0), *b = NULL, *u = NULL;
    LT_OK(ladle_partition_create(reversed, 1, one, NULL, &b));
    ladle_op *op = NULL;
    int64_t n[1] = {3};
    LT_FAILS(ladle_broadcast_create(a, b, 1, n, LADLE_F64, 0, &op), LADLE_ERR_PARTITION);
    LT_FAILS(ladle_partition_create_union(a, b, &u), LADLE_ERR_PARTITION);
    ladle_partition_destroy(&a);
    ladle_partition_destroy(&b);
    MPI_Comm_free(&reversed);
}
END_TEST

START_TEST(not_a_halo_exchange)
{
    int s[1] = {1};
    ladle_partition *p = lt_partition(1, s, 0);
    ladle_op *op = NULL;
    int64_t n[1] = {3};
    LT_OK(ladle_broadcast_create(p, p, 1, n, LADLE_F64, 0, &op));
    ladle_tensor *t = lt_op_tensor(op, 0);
    ladle_halo_geometry g;
    LT_FAILS(ladle_halo_exchange_begin(op, t), LADLE_ERR_ARG);
    LT_FAILS(ladle_halo_exchange_geometry(op, &g), LADLE_ERR_ARG);
    LT_ASSERT(ladle_halo_exchange_bulk_layout(op) == NULL, "no bulk layout");
    ladle_tensor_destroy(&t);
    ladle_op_destroy(&op);
    ladle_partition_destroy(&p);
}
END_TEST

START_TEST(op_outlives_its_inputs)
{
    /* partitions and layouts may be destroyed before the op that uses them */
    int s[1] = {lt_size};
    ladle_partition *p = lt_partition(1, s, 0);
    ladle_layout *x = NULL;
    int64_t global[1] = {10};
    LT_OK(ladle_layout_create_balanced(p, 1, global, &x));
    ladle_op *op = NULL;
    LT_OK(ladle_repartition_create(x, x, LADLE_F64, 0, &op));
    ladle_layout_destroy(&x);
    ladle_partition_destroy(&p);
    lt_adjoint_ok(op, 3, "repartition after its inputs are gone");
    LT_ASSERT(ladle_layout_ndim(ladle_op_x_layout(op)) == 1, "layout alive");
    ladle_op_destroy(&op);
}
END_TEST

Suite *errors_suite(void)
{
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, null_handles);
    tcase_add_test(tc, ranks_disagree);
    tcase_add_test(tc, unrelated_parents);
    tcase_add_test(tc, not_a_halo_exchange);
    tcase_add_test(tc, op_outlives_its_inputs);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv) { return lt_main(argc, argv, errors_suite); }
