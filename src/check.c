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

ladle_status ladle_adjoint_test(ladle_op *op, uint64_t seed, ladle_adjoint_result *r)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle_tensor *x = NULL, *y = NULL, *fx = NULL, *fty = NULL;
    double dots[2] = {0.0, 0.0}, sums[2] = {0.0, 0.0};
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
    LADLE_CALL(ladle_tensor_dot(fx, y, &dots[0]));
    LADLE_CALL(ladle_tensor_dot(x, fty, &dots[1]));
    LADLE_MPI(ladle__allreduce(dots, sums, 2, MPI_DOUBLE, MPI_SUM, op->comm));
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
