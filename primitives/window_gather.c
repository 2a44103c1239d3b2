/*
 * The gather of overlapping windows (see primitives_impl.h): the box
 * exchange of repartition from a decomposition to a layout whose boxes may
 * overlap. Forward copies every piece; the adjoint zeroes dx and adds the
 * pieces back into their owners, in the fixed order of the exchange, so
 * that an index read by several windows gets the sum of their cells.
 */
#include "primitives/primitives_impl.h"
#include "src/comm/exchange.h"
#include "src/core/tags.h"

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
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle_op *op = NULL;
    int *to_comm = NULL;
    MPI_Comm comm = MPI_COMM_NULL;
    uint64_t h = LADLE_HASH_INIT;
    const char *f = __func__;
    LADLE_NOT_NULL(out);
    LADLE_NOT_NULL(lx);
    LADLE_NOT_NULL(lw);
    LADLE_CHECK(ladle__partitions_compatible(lx->p, lw->p), LADLE_ERR_PARTITION,
                "the partitions of x and the windows were made from different parents");
    if (!ladle__is_real(dtype))
        local = ladle__raise(LADLE_ERR_DTYPE, f, "dtype %s is not f32 or f64",
                             ladle_dtype_name(dtype));
    else if (flags & ~LADLE_CHECKED)
        local = ladle__raise(LADLE_ERR_ARG, f, "unknown flags 0x%x", flags);
    if (local == LADLE_OK)
        local = check_layouts(lx, lw, f);
    if (local == LADLE_OK)
        local = ladle__op_new(&wg_vt, dtype, device, flags, lx, lw, &op, f);
    LADLE_CALL(ladle__op_comm(lx->p, lw->p, &comm, &to_comm));
    if (local == LADLE_OK && comm != MPI_COMM_NULL) {
        ladle_exchange_opts copy = {1, LADLE_BOX_COPY, 0, LADLE_TAG_REPARTITION};
        ladle_exchange_opts add = {1, LADLE_BOX_ADD, 0, LADLE_TAG_REPARTITION};
        ladle_ref X = ladle_ref_make(LADLE_BUF_X, 0), Y = ladle_ref_make(LADLE_BUF_Y, 0);
        ladle_side fx = ladle__side_own(lx, X), tw = ladle__side_own(lw, Y);
        ladle_side fw = ladle__side_own(lw, X), tx = ladle__side_own(lx, Y);
        ladle__plan_exchange(op->fwd, &fx, &tw, to_comm, copy);
        ladle__plan_exchange(op->adj, &fw, &tx, to_comm, add);
    }
    if (local == LADLE_OK) {
        h = ladle__layout_hash(h, lx);
        h = ladle__layout_hash(h, lw);
        h = ladle__hash(h, &dtype, sizeof dtype);
        h = ladle__hash(h, &device, sizeof device);
        h = ladle__hash(h, &flags, sizeof flags);
    }
    st = ladle__op_finish(&op, &comm, local, h, out, f);
fail:
    if (comm != MPI_COMM_NULL)
        MPI_Comm_free(&comm);
    ladle_op_destroy(&op);
    ladle__free(to_comm);
    return st;
}
