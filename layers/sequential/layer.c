/* Shared pieces of the sequential layers' creates (see layer_impl.h). */
#include "layers/sequential/layer_impl.h"

ladle_status ladle__window_layer_check(int nd, unsigned flags, ladle_dtype dtype,
                                       const int64_t *x_shape, const char *func)
{
    if (nd < 1 || nd > 3)
        return ladle__raise(LADLE_ERR_ARG, func, "%d spatial dimensions (1 to 3)", nd);
    if ((flags & ~(unsigned)(LADLE_CHECKED | LADLE_OVERLAP_HALO)) != 0)
        return ladle__raise(LADLE_ERR_ARG, func, "unknown flags 0x%x", flags);
    return ladle__layer_check_args(func, dtype, 2 + nd, x_shape, 3);
}

ladle_status ladle__layer_same_shape(const ladle_op_vtable *vt, void *impl, ladle_dtype dtype,
                                     ladle_device device, int ndim, const int64_t *shape,
                                     ladle_op **out, const char *func)
{
    ladle_op *op = NULL;
    ladle_status st = ladle__layer_new(vt, dtype, device, ndim, shape, ndim, shape, 1, &op, func);
    if (st != LADLE_OK) {
        ladle__free(impl);
        return st;
    }
    op->impl = impl;
    *out = op;
    return LADLE_OK;
}

ladle_status ladle__layer_ids_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       ladle_tensor *dx, int64_t n)
{
    (void)op, (void)ctx, (void)dy, (void)dx, (void)n;
    return LADLE_OK;
}

void ladle__layer_free_impl(ladle_op *op) { ladle__free(op->impl); }
