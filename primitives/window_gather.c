/*
 * The gather of overlapping windows (see primitives_impl.h): the box
 * exchange of repartition from a decomposition to a layout whose boxes may
 * overlap. Forward copies every piece; the adjoint zeroes dx and adds the
 * pieces back into their owners, in the fixed order of the exchange, so
 * that an index read by several windows gets the sum of their cells.
 */
#include "primitives/primitives_impl.h"

static ladle_status wg_adjoint(ladle_op *op, const ladle_tensor *dy, ladle_tensor *dx)
{
    ladle_status st = LADLE_OK;
    if (dx->numel > 0)
        LADLE_CALL(op->be->fn->fill(op->be, op->dtype, dx->numel, 0.0, dx->data));
    st = ladle_sched_run(op->adj, dy->data, dx->data, op->ws);
fail:
    return st;
}

/* Internal to the layers: the repartition family, by what it moves. */
static const ladle_op_vtable wg_vt = {
    .kind = LADLE_OP_REPARTITION,
    .name = "window gather",
    .adjoint = wg_adjoint,
};

static ladle_status check_layouts(const ladle_layout *x, const ladle_layout *w, const char *f)
{
    if (x->ndim != w->ndim)
        return ladle__raise(LADLE_ERR_SHAPE, f, "x has %d dimensions and the windows %d",
                            x->ndim, w->ndim);
    for (int d = 0; d < x->ndim; d++)
        if (x->global[d] != w->global[d])
            return ladle__raise(LADLE_ERR_SHAPE, f, "the global extents %lld and %lld of "
                                "dimension %d differ", (long long)x->global[d],
                                (long long)w->global[d], d);
    if (!x->decomposition)
        return ladle__raise(LADLE_ERR_ARG, f, "the x layout is not a decomposition");
    return LADLE_OK;
}

ladle_status ladle__window_gather_create(const ladle_layout *lx, const ladle_layout *lw,
                                         ladle_dtype dtype, ladle_device device, unsigned flags,
                                         ladle_op **out)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(out);
    LADLE_NOT_NULL(lx);
    LADLE_NOT_NULL(lw);
    st = ladle__box_exchange_create(&wg_vt, lx, lw, LADLE_BOX_ADD, check_layouts, dtype,
                                    device, flags, out, __func__);
fail:
    return st;
}
