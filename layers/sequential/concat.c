/* Concatenation along one dimension and its backward (the split). Each
 * input is a box of the output, so both directions are box copies. */
#include "src/core/backend.h"

/* Check the n parts against the whole along dim; returns the total extent. */
static ladle_status check_parts(const char *func, int n, const ladle_tensor *const parts[],
                                int dim, const ladle_tensor *whole)
{
    int64_t total = 0;
    if (n < 1 || parts == NULL || whole == NULL)
        return ladle__raise(n < 1 ? LADLE_ERR_ARG : LADLE_ERR_NULL, func,
                            "need at least one part and the whole tensor");
    if (dim < 0 || dim >= whole->ndim)
        return ladle__raise(LADLE_ERR_ARG, func, "dimension %d is outside 0..%d", dim,
                            whole->ndim - 1);
    if (!ladle__is_real(whole->dtype) || !ladle_tensor_is_contiguous(whole))
        return ladle__raise(LADLE_ERR_ARG, func, "the whole tensor must be contiguous f32/f64");
    for (int k = 0; k < n; k++) {
        const ladle_tensor *p = parts[k];
        if (p == NULL)
            return ladle__raise(LADLE_ERR_NULL, func, "part %d is NULL", k);
        if (p->dtype != whole->dtype)
            return ladle__raise(LADLE_ERR_DTYPE, func, "part %d is %s, the whole %s", k,
                                ladle_dtype_name(p->dtype), ladle_dtype_name(whole->dtype));
        if (p->device != whole->device)
            return ladle__raise(LADLE_ERR_DEVICE, func, "part %d is on %s, the whole on %s", k,
                                ladle_device_name(p->device),
                                ladle_device_name(whole->device));
        int ok = p->ndim == whole->ndim && ladle_tensor_is_contiguous(p);
        for (int d = 0; ok && d < p->ndim; d++)
            ok = d == dim || p->shape[d] == whole->shape[d];
        if (!ok)
            return ladle__raise(LADLE_ERR_SHAPE, func,
                                "part %d does not match the whole outside dimension %d", k,
                                dim);
        /* compared before it is added: the sum never overflows */
        if (p->shape[dim] > whole->shape[dim] - total)
            return ladle__raise(LADLE_ERR_SHAPE, func,
                                "the parts pass the whole's extent %lld along dimension %d "
                                "at part %d",
                                (long long)whole->shape[dim], dim, k);
        total += p->shape[dim];
    }
    if (total != whole->shape[dim])
        return ladle__raise(LADLE_ERR_SHAPE, func,
                            "the parts add up to %lld along dimension %d, the whole has %lld",
                            (long long)total, dim, (long long)whole->shape[dim]);
    return LADLE_OK;
}

/* Copy part k to or from its box in whole (to_whole: part -> whole). */
static ladle_status move(const ladle_backend *be, const ladle_tensor *part,
                         const ladle_tensor *whole, int dim, int64_t at, int to_whole)
{
    size_t es = ladle_dtype_size(whole->dtype);
    char *w = (char *)whole->data + (size_t)(at * whole->strides[dim]) * es;
    if (part->numel == 0)
        return LADLE_OK;
    if (to_whole)
        return be->fn->copy_box(be, whole->dtype, LADLE_BOX_COPY, part->ndim, part->shape,
                                part->data, part->strides, w, whole->strides);
    return be->fn->copy_box(be, whole->dtype, LADLE_BOX_COPY, part->ndim, part->shape, w,
                            whole->strides, part->data, part->strides);
}

/* Both directions: the checks (raised for func), then every part to or
 * from its box in whole, the boxes following each other along dim. */
static ladle_status move_all(const char *func, int n, const ladle_tensor *const parts[],
                             int dim, const ladle_tensor *whole, int to_whole)
{
    ladle_status st = LADLE_OK;
    int64_t at = 0;
    const ladle_backend *be;
    LADLE_CALL(check_parts(func, n, parts, dim, whole));
    LADLE_CALL(ladle__backend_get(whole->device, func, &be));
    for (int k = 0; k < n; k++) {
        LADLE_CALL(move(be, parts[k], whole, dim, at, to_whole));
        at += parts[k]->shape[dim];
    }
fail:
    return st;
}

ladle_status ladle_concat(int n, const ladle_tensor *const xs[], int dim, ladle_tensor *y)
{
    return move_all(__func__, n, xs, dim, y, 1);
}

ladle_status ladle_concat_backward(const ladle_tensor *dy, int dim, int n,
                                   ladle_tensor *const dxs[])
{
    return move_all(__func__, n, (const ladle_tensor *const *)dxs, dim, dy, 0);
}
