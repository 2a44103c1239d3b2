/* Elementwise addition for residual connections: y = a + b; the backward of
 * each input is dy itself, so it needs no call of its own. */
#include "src/core/backend.h"

static ladle_status check_same(const ladle_tensor *a, const ladle_tensor *b, const char *role)
{
    char sa[128], sb[128];
    if (a->dtype != b->dtype)
        return ladle__raise(LADLE_ERR_DTYPE, "ladle_add", "%s is %s, a is %s", role,
                            ladle_dtype_name(b->dtype), ladle_dtype_name(a->dtype));
    int same = a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim; d++)
        same = a->shape[d] == b->shape[d];
    if (!same)
        return ladle__raise(LADLE_ERR_SHAPE, "ladle_add", "%s has shape %s, a has %s", role,
                            ladle__fmt_shape64(sb, sizeof sb, b->ndim, b->shape),
                            ladle__fmt_shape64(sa, sizeof sa, a->ndim, a->shape));
    if (b->device != a->device)
        return ladle__raise(LADLE_ERR_DEVICE, "ladle_add", "%s is on %s, a on %s", role,
                            ladle_device_name(b->device), ladle_device_name(a->device));
    if (!ladle_tensor_is_contiguous(b))
        return ladle__raise(LADLE_ERR_ARG, "ladle_add", "%s is not contiguous", role);
    return LADLE_OK;
}

ladle_status ladle_add(const ladle_tensor *a, const ladle_tensor *b, ladle_tensor *y)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(a);
    LADLE_NOT_NULL(b);
    LADLE_NOT_NULL(y);
    LADLE_CHECK(ladle__is_real(a->dtype), LADLE_ERR_DTYPE, "dtype %s is not f32 or f64",
                ladle_dtype_name(a->dtype));
    LADLE_CALL(check_same(a, a, "a"));
    LADLE_CALL(check_same(a, b, "b"));
    LADLE_CALL(check_same(a, y, "y"));
    const ladle_backend *be;
    LADLE_CALL(ladle__backend_get(a->device, __func__, &be));
    LADLE_CALL(be->fn->add(be, a->dtype, a->numel, a->data, b->data, y->data));
fail:
    return st;
}
