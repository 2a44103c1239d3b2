/* The dot-product (adjoint) test for any operator. */
#include <math.h>

#include "op_impl.h"

double ladle_adjoint_tolerance(ladle_dtype dtype)
{
    return dtype == LADLE_F32 ? 1e-5 : 1e-13;
}

static ladle_status make(const ladle_op *op, int which, ladle_tensor **t)
{
    return ladle_tensor_create(op->dtype, which ? op->y_ndim : op->x_ndim,
                               which ? op->y_shape : op->x_shape, t);
}

/* Add (hi, lo) pairs from every rank in rank order, carrying rounding
 * errors, so every rank gets the same, nearly exact total. */
static ladle_status global_sum2(MPI_Comm comm, const double mine[4], double total[2])
{
    ladle_status st = LADLE_OK;
    int size = 0;
    double *all = NULL;
    LADLE_MPI(MPI_Comm_size(comm, &size));
    all = ladle__calloc((size_t)size * 4, sizeof(double));
    LADLE_CHECK(all != NULL, LADLE_ERR_ALLOC, "out of memory");
    {
        MPI_Request req;
        LADLE_MPI(MPI_Iallgather(mine, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, comm, &req));
        LADLE_MPI(ladle__wait(&req));
    }
    for (int k = 0; k < 2; k++) {
        double s = 0.0, c = 0.0;
        for (int r = 0; r < size; r++)
            for (int h = 0; h < 2; h++) {
                double p = all[4 * r + 2 * k + h];
                double t = s + p, z = t - s;
                c += (s - (t - z)) + (p - z);
                s = t;
            }
        total[k] = s + c;
    }
fail:
    ladle__free(all);
    return st;
}

/* The compensated local inner product of two contiguous tensors. */
static void local_dot2(const ladle_op *op, const ladle_tensor *a, const ladle_tensor *b,
                       double out[2])
{
    out[0] = out[1] = 0.0;
    if (a->numel > 0)
        op->be->dot2(op->dtype, a->numel, a->data, b->data, out);
}

ladle_status ladle_adjoint_test(ladle_op *op, uint64_t seed, ladle_adjoint_result *r)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle_tensor *x = NULL, *y = NULL, *fx = NULL, *fty = NULL;
    double dots[4], sums[2] = {0.0, 0.0};
    int me = 0;

    LADLE_NOT_NULL(op);
    LADLE_NOT_NULL(r);
    r->fx_y = r->x_fty = r->mismatch = 0.0;
    if (op->comm == MPI_COMM_NULL)
        return LADLE_OK;
    MPI_Comm_rank(op->comm, &me);
    /* every rank allocates, then all agree, so a failure cannot strand peers */
    local = make(op, 0, &x);
    if (local == LADLE_OK)
        local = make(op, 1, &y);
    if (local == LADLE_OK)
        local = make(op, 1, &fx);
    if (local == LADLE_OK)
        local = make(op, 0, &fty);
    LADLE_CALL(ladle__agree(op->comm, local, 0, __func__));
    LADLE_CALL(ladle_tensor_fill_random(x, seed, 2 * (uint64_t)me));
    LADLE_CALL(ladle_tensor_fill_random(y, seed, 2 * (uint64_t)me + 1));
    LADLE_CALL(ladle_op_forward(op, x, fx));
    LADLE_CALL(ladle_op_adjoint(op, y, fty));
    local_dot2(op, fx, y, &dots[0]);
    local_dot2(op, x, fty, &dots[2]);
    LADLE_CALL(global_sum2(op->comm, dots, sums));
    r->fx_y = sums[0];
    r->x_fty = sums[1];
    double scale = fmax(fabs(sums[0]), fabs(sums[1]));
    r->mismatch = scale > 0.0 ? fabs(sums[0] - sums[1]) / scale : 0.0;
fail:
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&y);
    ladle_tensor_destroy(&fx);
    ladle_tensor_destroy(&fty);
    return st;
}
