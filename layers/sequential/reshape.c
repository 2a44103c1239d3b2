/* Reshape and flatten: the same elements in a new shape; F is a copy (or
 * nothing, in place) and F* the copy back. */
#include "src/op/op_impl.h"

static ladle_status reshape_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                    ladle_tensor *y, int64_t n)
{
    (void)ctx, (void)n;
    return op->be->fn->copy(op->be, op->dtype, y->numel, x->data, y->data); /* in place: none */
}

static ladle_status reshape_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                     ladle_tensor *dx, int64_t n)
{
    (void)ctx, (void)n;
    if (dx != NULL)
        return op->be->fn->copy(op->be, op->dtype, dx->numel, dy->data, dx->data);
    return LADLE_OK;
}

static const ladle_op_vtable reshape_vt = {
    .kind = LADLE_OP_RESHAPE,
    .name = "reshape",
    .layer_forward = reshape_forward,
    .layer_backward = reshape_backward,
};

ladle_status ladle_reshape_create(int ndim_in, const int64_t in_shape[], int ndim_out,
                                  const int64_t out_shape[], ladle_dtype dtype, ladle_device device,
                                  ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    int64_t vin = 0, vout = 0;
    char a[128], b[128];
    LADLE_NOT_NULL(out);
    LADLE_CALL(ladle__layer_check_args(__func__, dtype, ndim_in, in_shape, 1));
    LADLE_CALL(ladle__layer_check_args(__func__, dtype, ndim_out, out_shape, 1));
    ladle__check_shape(__func__, ndim_in, in_shape, &vin);
    ladle__check_shape(__func__, ndim_out, out_shape, &vout);
    LADLE_CHECK(vin == vout, LADLE_ERR_SHAPE, "cannot reshape %s (%lld elements) to %s (%lld)",
                ladle__fmt_shape64(a, sizeof a, ndim_in, in_shape), (long long)vin,
                ladle__fmt_shape64(b, sizeof b, ndim_out, out_shape), (long long)vout);
    /* a reshape that keeps dimension 0 takes any smaller batch; one that
     * moves it (N x T x V to N T x V) takes exactly in_shape */
    LADLE_CALL(ladle__layer_new(&reshape_vt, dtype, device, ndim_in, in_shape, ndim_out, out_shape,
                                in_shape[0] == out_shape[0], &op, __func__));
    op->linear = 1;
    op->in_place = 1;
    *out = op;
fail:
    return st;
}

ladle_status ladle_flatten_create(int ndim, const int64_t shape[], ladle_dtype dtype,
                                  ladle_device device, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    int64_t flat[2] = {0, 1};
    LADLE_CHECK(ndim >= 1 && shape != NULL, shape ? LADLE_ERR_SHAPE : LADLE_ERR_NULL,
                "flatten needs at least one dimension");
    LADLE_CALL(ladle__layer_check_args("ladle_flatten_create", dtype, ndim, shape, 1));
    flat[0] = shape[0];
    for (int d = 1; d < ndim; d++)
        flat[1] *= shape[d];
    LADLE_CALL(ladle_reshape_create(ndim, shape, 2, flat, dtype, device, out));
fail:
    return st;
}
