/*
 * Repartition (transpose): move a tensor from one decomposition to another.
 * Every rank of P_x sends each rank of P_y the intersection of their boxes;
 * pieces that are contiguous in the tensor go straight from and into it,
 * others are packed into planned workspace. A rank in both partitions copies
 * its own piece locally. The adjoint is the same exchange from y back to x.
 */
#include "src/comm/exchange.h"
#include "src/core/tags.h"
#include "src/op/op_impl.h"

static const ladle_op_vtable repartition_vt = {.kind = LADLE_OP_REPARTITION,
                                               .name = "repartition"};

static ladle_status check_layouts(const ladle_layout *x, const ladle_layout *y)
{
    char a[128], b[128];
    if (x->ndim != y->ndim)
        return ladle__raise(LADLE_ERR_SHAPE, "ladle_repartition_create",
                            "x has %d dimensions and y %d", x->ndim, y->ndim);
    for (int d = 0; d < x->ndim; d++)
        if (x->global[d] != y->global[d])
            return ladle__raise(LADLE_ERR_SHAPE, "ladle_repartition_create",
                                "the global shapes %s and %s differ",
                                ladle__fmt_shape64(a, sizeof a, x->ndim, x->global),
                                ladle__fmt_shape64(b, sizeof b, y->ndim, y->global));
    if (!x->decomposition || !y->decomposition)
        return ladle__raise(LADLE_ERR_ARG, "ladle_repartition_create",
                            "the %s layout is not a decomposition (its boxes do not tile "
                            "the global shape)",
                            x->decomposition ? "y" : "x");
    return LADLE_OK;
}

ladle_status ladle_repartition_create(const ladle_layout *x, const ladle_layout *y,
                                      ladle_dtype dtype, ladle_device device, unsigned flags,
                                      ladle_op **out)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle_op *op = NULL;
    int *to_comm = NULL;
    MPI_Comm comm = MPI_COMM_NULL;
    uint64_t h = LADLE_HASH_INIT;

    LADLE_NOT_NULL(out);
    LADLE_NOT_NULL(x);
    LADLE_NOT_NULL(y);
    LADLE_CHECK(ladle__partitions_compatible(x->p, y->p), LADLE_ERR_PARTITION,
                "the partitions of x and y were made from different parent communicators");
    if (!ladle__is_real(dtype))
        local = ladle__raise(LADLE_ERR_DTYPE, __func__, "dtype %s is not f32 or f64",
                             ladle_dtype_name(dtype));
    else if (flags & ~LADLE_CHECKED)
        local = ladle__raise(LADLE_ERR_ARG, __func__, "unknown flags 0x%x", flags);
    if (local == LADLE_OK)
        local = check_layouts(x, y);
    if (local == LADLE_OK)
        local = ladle__op_new(&repartition_vt, dtype, device, flags, x, y, &op, __func__);
    LADLE_CALL(ladle__op_comm(x->p, y->p, &comm, &to_comm));
    if (local == LADLE_OK && comm != MPI_COMM_NULL) {
        ladle_exchange_opts o = {1, LADLE_BOX_COPY, 0, LADLE_TAG_REPARTITION};
        ladle_ref X = ladle_ref_make(LADLE_BUF_X, 0), Y = ladle_ref_make(LADLE_BUF_Y, 0);
        ladle_side fx = ladle__side_own(x, X), ty = ladle__side_own(y, Y);
        ladle_side fy = ladle__side_own(y, X), tx = ladle__side_own(x, Y);
        ladle__plan_exchange(op->fwd, &fx, &ty, to_comm, o);
        ladle__plan_exchange(op->adj, &fy, &tx, to_comm, o);
    }
    if (local == LADLE_OK) {
        h = ladle__layout_hash(h, x);
        h = ladle__layout_hash(h, y);
        h = ladle__hash(h, &dtype, sizeof dtype);
        h = ladle__hash(h, &device, sizeof device);
        h = ladle__hash(h, &flags, sizeof flags);
    }
    st = ladle__op_finish(&op, &comm, local, h, out, __func__);
fail:
    if (comm != MPI_COMM_NULL)
        MPI_Comm_free(&comm);
    ladle_op_destroy(&op);
    ladle__free(to_comm);
    return st;
}
