/* Test harness for Check under MPI; see harness.h. */
#include "harness.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int lt_rank = 0, lt_size = 1;

/* MPICH's blocking collectives busy-poll, which costs milliseconds per call
 * when ranks outnumber cores; poll a nonblocking one and yield instead. */
static void polite_allreduce_min(const int *in, int *out)
{
    MPI_Request req;
    MPI_Status status;
    int done = 0;
    MPI_Iallreduce(in, out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req);
    for (;;) {
        MPI_Test(&req, &done, &status);
        if (done)
            return;
        sched_yield();
    }
}

void lt_assert_all(int ok, const char *file, int line, const char *expr, const char *fmt,
                   ...)
{
    int all = 0;
    polite_allreduce_min(&ok, &all);
    if (all)
        return;
    if (!ok) {
        char detail[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
        fprintf(stderr, "[rank %d of %d] %s:%d: assertion '%s' failed: %s\n", lt_rank,
                lt_size, file, line, expr, detail);
        fflush(stderr);
    }
    ck_abort_msg("%s:%d: '%s' failed on some rank (see stderr)", file, line, expr);
}

ladle_partition *lt_partition_ranks(int ndim, const int *shape, const int *ranks)
{
    ladle_partition *p = NULL;
    LT_OK(ladle_partition_create(MPI_COMM_WORLD, ndim, shape, ranks, &p));
    return p;
}

ladle_partition *lt_partition(int ndim, const int *shape, int first)
{
    int n = 1, ranks[4096];
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    for (int r = 0; r < n && r < 4096; r++)
        ranks[r] = first + r;
    return lt_partition_ranks(ndim, shape, ranks);
}

ladle_tensor *lt_tensor(ladle_dtype dtype, int ndim, const int64_t *shape)
{
    ladle_tensor *t = NULL;
    LT_OK(ladle_tensor_create(dtype, ndim, shape, &t));
    return t;
}

ladle_tensor *lt_op_tensor(const ladle_op *op, int which)
{
    int ndim = 0;
    int64_t shape[LADLE_MAX_NDIM];
    if (which)
        ladle_op_y_shape(op, &ndim, shape);
    else
        ladle_op_x_shape(op, &ndim, shape);
    return lt_tensor(ladle_op_dtype(op), ndim, shape);
}

double lt_get(const ladle_tensor *t, int64_t i)
{
    if (ladle_tensor_dtype(t) == LADLE_F32)
        return ((const float *)ladle_tensor_data(t))[i];
    return ((const double *)ladle_tensor_data(t))[i];
}

void lt_set(ladle_tensor *t, int64_t i, double v)
{
    if (ladle_tensor_dtype(t) == LADLE_F32)
        ((float *)ladle_tensor_data(t))[i] = (float)v;
    else
        ((double *)ladle_tensor_data(t))[i] = v;
}

void lt_adjoint_ok(ladle_op *op, uint64_t seed, const char *what)
{
    ladle_adjoint_result r = {0, 0, 0};
    LT_OK(ladle_adjoint_test(op, seed, &r));
    double tol = ladle_adjoint_tolerance(ladle_op_dtype(op));
    /* a vacuous test (all zeros) proves nothing: demand a non-zero product
     * wherever the op moves any data */
    int nonzero = !ladle_op_active(op) || r.fx_y != 0.0;
    LT_ASSERT(r.mismatch <= tol && nonzero,
              "%s (%s): mismatch %.3e (tolerance %.1e), <Fx,y> = %.17g, <x,F*y> = %.17g",
              what, ladle_dtype_name(ladle_op_dtype(op)), r.mismatch, tol, r.fx_y, r.x_fty);
}

int lt_main(int argc, char **argv, Suite *(*make_suite)(void))
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &lt_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &lt_size);
    SRunner *sr = srunner_create(make_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, lt_rank == 0 ? CK_NORMAL : CK_SILENT);
    int failed = srunner_ntests_failed(sr), any = 0;
    srunner_free(sr);
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any ? EXIT_FAILURE : EXIT_SUCCESS;
}
