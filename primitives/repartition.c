/*
 * Repartition (transpose): move a tensor from one decomposition to another.
 * Every rank of P_x sends each rank of P_y the intersection of their boxes;
 * pieces that are contiguous in the tensor go straight from and into it,
 * others are packed into planned workspace. A rank in both partitions copies
 * its own piece locally. The adjoint is the same exchange from y back to x.
 */
#include "primitives/primitives_impl.h"
#include "src/core/tags.h"
#include "src/op/make.h"

static const ladle_op_vtable repartition_vt = {.kind = LADLE_OP_REPARTITION,
                                               .name = "repartition"};

static ladle_status check_layouts(const ladle_layout *x, const ladle_layout *y,
                                  const char *f)
{
    char a[128], b[128];
    if (x->ndim != y->ndim)
        return ladle__raise(LADLE_ERR_SHAPE, f, "x has %d dimensions and y %d", x->ndim,
                            y->ndim);
    for (int d = 0; d < x->ndim; d++)
        if (x->global[d] != y->global[d])
            return ladle__raise(LADLE_ERR_SHAPE, f, "the global shapes %s and %s differ",
                                ladle__fmt_shape64(a, sizeof a, x->ndim, x->global),
                                ladle__fmt_shape64(b, sizeof b, y->ndim, y->global));
    if (!x->decomposition || !y->decomposition)
        return ladle__raise(LADLE_ERR_ARG, f,
                            "the %s layout is not a decomposition (its boxes do not tile "
                            "the global shape)",
                            x->decomposition ? "y" : "x");
    return LADLE_OK;
}

ladle_status ladle__box_exchange_create(const ladle_op_vtable *vt, const ladle_layout *x,
                                        const ladle_layout *y, ladle_box_mode adj,
                                        ladle__layouts_check check, ladle_dtype dtype,
                                        ladle_device device, unsigned flags, ladle_op **out,
                                        const char *func)
{
    ladle_op *op = NULL;
    int *to_comm = NULL;
    MPI_Comm comm = MPI_COMM_NULL;
    uint64_t h = LADLE_HASH_INIT;

    /* a global fact, so every rank returns here alike before any message */
    if (!ladle__partitions_compatible(x->p, y->p))
        return ladle__raise(LADLE_ERR_PARTITION, func,
                            "the partitions of x and y were made from different parent "
                            "communicators");
    ladle_status local = ladle__make_check_kind(dtype, flags, func);
    if (local == LADLE_OK)
        local = check(x, y, func);
    if (local == LADLE_OK)
        local = ladle__op_new(vt, dtype, device, flags, x, y, &op, func);
    ladle_status st = ladle__op_comm(x->p, y->p, &comm, &to_comm);
    if (st == LADLE_OK && local == LADLE_OK && comm != MPI_COMM_NULL) {
        ladle_exchange_opts fwd = {1, LADLE_BOX_COPY, 0, LADLE_TAG_REPARTITION};
        ladle_exchange_opts back = {1, adj, 0, LADLE_TAG_REPARTITION};
        ladle_ref X = ladle_ref_make(LADLE_BUF_X, 0), Y = ladle_ref_make(LADLE_BUF_Y, 0);
        ladle_side fx = ladle__side_own(x, X), ty = ladle__side_own(y, Y);
        ladle_side fy = ladle__side_own(y, X), tx = ladle__side_own(x, Y);
        ladle__plan_exchange(op->fwd, &fx, &ty, to_comm, fwd);
        ladle__plan_exchange(op->adj, &fy, &tx, to_comm, back);
    }
    if (local == LADLE_OK) {
        h = ladle__layout_hash(h, x);
        h = ladle__layout_hash(h, y);
        h = ladle__prim_hash(h, dtype, device, flags);
    }
    return ladle__prim_finish(st, &op, &comm, &to_comm, local, h, out, func);
}

ladle_status ladle_repartition_create(const ladle_layout *x, const ladle_layout *y,
                                      ladle_dtype dtype, ladle_device device,
                                      unsigned flags, ladle_op **out)
{
    ladle_status st = LADLE_OK;

    LADLE_NOT_NULL(out);
    LADLE_NOT_NULL(x);
    LADLE_NOT_NULL(y);
    st = ladle__box_exchange_create(&repartition_vt, x, y, LADLE_BOX_COPY, check_layouts,
                                    dtype, device, flags, out, __func__);
fail:
    return st;
}
