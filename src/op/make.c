/*
 * The steps every layer's creation takes over its ranks (see make.h): the
 * union communicator, the agreements, the layer op taking its parts.
 */
#include <limits.h>

#include "src/op/make.h"

ladle_status ladle__make_begin(int np, const ladle_partition *const *ps,
                               ladle_device device, ladle_status local, uint64_t hash,
                               MPI_Comm *comm, const char *func)
{
    ladle_status st = LADLE_OK;
    int *to_comm = NULL;
    const ladle_backend *be = NULL;
    *comm = MPI_COMM_NULL;
    if (local == LADLE_OK)
        local = ladle__backend_get(device, func, &be);
    hash = ladle__hash(hash, &device, sizeof device);
    for (int k = 1; k < np; k++)
        LADLE_CHECK(ladle__partitions_compatible(ps[0], ps[k]), LADLE_ERR_PARTITION,
                    "the partitions were made from different parent communicators");
    LADLE_CALL(ladle__op_comm_list(np, ps, comm, &to_comm));
    st = local;
    if (*comm != MPI_COMM_NULL)
        st = ladle__agree(*comm, local, hash, func);
fail:
    ladle__free(to_comm);
    return st;
}

ladle_status ladle__make_step(MPI_Comm comm, ladle_status st, const char *func)
{
    if (comm == MPI_COMM_NULL)
        return st;
    return ladle__agree(comm, st, 0, func);
}

ladle_status ladle__agree_code(MPI_Comm comm, ladle_status local, const char *func)
{
    /* the largest code and, negated, the smallest of the failing ranks' */
    long long in[2] = {(long long)local, local != LADLE_OK ? -(long long)local : LLONG_MIN};
    long long out[2];
    if (comm == MPI_COMM_NULL)
        return local;
    int rc = ladle__allreduce(in, out, 2, MPI_LONG_LONG, MPI_MAX, comm);
    if (rc != MPI_SUCCESS)
        return ladle__raise_mpi(rc, func, "MPI_Allreduce");
    if (local != LADLE_OK || out[0] == LADLE_OK)
        return local;
    ladle_status code = out[0] == -out[1] ? (ladle_status)out[0] : LADLE_ERR_REMOTE;
    return ladle__raise(code, func,
                        "the call failed on another rank (%s); see that rank's message",
                        ladle_status_name((ladle_status)out[0]));
}

ladle_status ladle__make_check_kind(ladle_dtype dtype, unsigned flags, const char *func)
{
    if (!ladle__is_real(dtype))
        return ladle__raise(LADLE_ERR_DTYPE, func, "dtype %s is not f32 or f64",
                            ladle_dtype_name(dtype));
    if (flags & ~(unsigned)LADLE_CHECKED)
        return ladle__raise(LADLE_ERR_ARG, func, "unknown flags 0x%x", flags);
    return LADLE_OK;
}

uint64_t ladle__make_hash(uint64_t h, int np, const ladle_partition *const *ps, int nv,
                          const int64_t *values)
{
    for (int k = 0; k < np; k++)
        if (ps[k] != NULL)
            h = ladle__partition_hash(h, ps[k]);
    return ladle__hash(h, values, sizeof(int64_t) * (size_t)nv);
}

ladle_status ladle__make_open(ladle__make *m, int np, const ladle_partition *const *ps,
                              ladle_status local, uint64_t hash)
{
    m->comm = MPI_COMM_NULL;
    m->lx = m->ly = NULL;
    return ladle__make_begin(np, ps, m->device, local, hash, &m->comm, m->func);
}

ladle_status ladle__make_layer(ladle__make *m, ladle_status local,
                               const ladle_op_vtable *vt, void *impl, const int64_t *xs,
                               ladle_op **pop)
{
    int64_t lxs[LADLE_MAX_NDIM], lys[LADLE_MAX_NDIM];
    ladle_op *op = NULL;
    if (local != LADLE_OK)
        return local;
    ladle_layout_box(m->lx, LADLE_SELF, NULL, lxs);
    ladle_layout_box(m->ly, LADLE_SELF, NULL, lys);
    local = ladle__layer_new(vt, m->dtype, m->device, ladle_layout_ndim(m->lx),
                             xs ? xs : lxs, ladle_layout_ndim(m->ly), lys, 0, &op, m->func);
    if (local != LADLE_OK)
        return local;
    op->impl = impl;
    op->comm = m->comm;
    op->active = m->comm != MPI_COMM_NULL;
    m->comm = MPI_COMM_NULL;
    op->flags = ladle__op_flags_from_env(m->flags);
    op->x_layout = ladle__layout_retain(m->lx);
    op->y_layout = ladle__layout_retain(m->ly);
    *pop = op;
    return LADLE_OK;
}

void ladle__make_close(ladle__make *m)
{
    if (m->comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->comm);
    ladle_layout_destroy(&m->lx);
    ladle_layout_destroy(&m->ly);
}

ladle_status ladle__make_end(ladle__make *m, ladle_op **op, ladle_status local,
                             ladle_op **out)
{
    ladle_status st = ladle__make_step(*op ? (*op)->comm : m->comm, local, m->func);
    if (st == LADLE_OK) {
        *out = *op;
        *op = NULL;
    }
    ladle_op_destroy(op);
    ladle__make_close(m);
    return st;
}

ladle_status ladle__make_alloc_ok(const ladle__make *m, int ok)
{
    return ok ? LADLE_OK : ladle__raise(LADLE_ERR_ALLOC, m->func, "out of memory");
}
