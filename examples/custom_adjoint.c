/* Check your own operator's adjoint: y = A x for a 3x4 matrix A, and A^T. */
#include <ladle.h>
#include <stdio.h>

static const double A[3][4] = {{1, 2, 0, -1}, {0, 3, 1, 2}, {4, 0, -2, 1}};

static int forward(void *user, const ladle_tensor *x, ladle_tensor *y, void *saved)
{
    const double *in = ladle_tensor_data(x);
    double *out = ladle_tensor_data(y);
    for (int i = 0; i < 3; i++)
        out[i] = A[i][0] * in[0] + A[i][1] * in[1] + A[i][2] * in[2] + A[i][3] * in[3];
    return 0;
}

static int adjoint(void *user, const ladle_tensor *dy, ladle_tensor *dx, void *saved)
{
    const double *in = ladle_tensor_data(dy);
    double *out = ladle_tensor_data(dx);
    for (int j = 0; j < 4; j++)
        out[j] = A[0][j] * in[0] + A[1][j] * in[1] + A[2][j] * in[2];
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    ladle_custom_desc d;
    ladle_custom_desc_init(&d); /* f64 on the CPU */
    d.x_ndim = d.y_ndim = 1;
    d.x_shape = (int64_t[]){4};
    d.y_shape = (int64_t[]){3};
    d.linear = 1;
    d.forward = forward;
    d.adjoint = adjoint;
    ladle_op *F = NULL;
    ladle_adjoint_result r;
    int ok = ladle_custom_create(&d, &F) == LADLE_OK && ladle_adjoint_test(F, 42, &r) == LADLE_OK &&
             r.mismatch <= ladle_adjoint_tolerance(LADLE_F64);
    printf(ok ? "adjoint ok, mismatch %.1e\n" : "adjoint FAILED: %.1e %s\n", ok ? r.mismatch : 0.0,
           ladle_error_message());
    ladle_op_destroy(&F);
    MPI_Finalize();
    return ok ? 0 : 1;
}
