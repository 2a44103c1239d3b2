/* Broadcast a 7x11 block from a 1x3 grid to a 2x3 grid; check the adjoint. */
#include <ladle.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    ladle_partition *p_x, *p_y; /* 1x3 on ranks 0-2, 2x3 on ranks 0-5 */
    ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 2, (int[]){1, 3}, NULL, &p_x);
    ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 2, (int[]){2, 3}, NULL, &p_y);
    ladle_op *F; /* y = F x; planned once, executed many times */
    ladle_broadcast_desc d; /* a block of 7 x 11 on every rank */
    ladle_broadcast_desc_init(&d, 2, (int64_t[]){7, 11});
    if (ladle_broadcast_create(&d, p_x, p_y, LADLE_F64, LADLE_CPU, &F)) {
        fprintf(stderr, "%s\n", ladle_error_message()); /* the same on every rank */
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int nd;
    int64_t shape[LADLE_MAX_NDIM];
    ladle_tensor *x, *y;
    ladle_op_x_shape(F, &nd, shape);
    ladle_tensor_create(LADLE_F64, LADLE_CPU, nd, shape, &x);
    ladle_op_y_shape(F, &nd, shape);
    ladle_tensor_create(LADLE_F64, LADLE_CPU, nd, shape, &y);
    ladle_tensor_fill(x, 1.0 + ladle_partition_rank(p_x)); /* zero-volume off P_x */
    ladle_op_forward(F, x, y);                             /* column j of P_y gets x_j */
    ladle_adjoint_result r; /* |<Fx,y> - <x,F*y>| / max(...) */
    ladle_adjoint_test(F, 42, &r);
    if (ladle_partition_rank(p_y) == 0)
        printf("y[0] = %g, adjoint mismatch %.1e\n", ((double *)ladle_tensor_data(y))[0],
               r.mismatch);
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&y);
    ladle_op_destroy(&F);
    ladle_partition_destroy(&p_x);
    ladle_partition_destroy(&p_y);
    MPI_Finalize();
    return 0;
}
