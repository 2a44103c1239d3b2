/* Shared pieces of the distributed layers (see dist.h). */
#include <string.h>

#include "layers/dist.h"

ladle_status ladle__dist_begin(int np, const ladle_partition *const *ps, ladle_device device,
                               ladle_status local, uint64_t hash, MPI_Comm *comm, const char *func)
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

ladle_status ladle__dist_step(MPI_Comm comm, ladle_status st, const char *func)
{
    if (comm == MPI_COMM_NULL)
        return st;
    return ladle__agree(comm, st, 0, func);
}

ladle_status ladle__dist_tensor(ladle_dtype dtype, ladle_device device, int ndim,
                                const int64_t *shape, ladle_tensor **t)
{
    return ladle_tensor_create_on(dtype, device, ndim, shape, t);
}

uint64_t ladle__dist_hash(uint64_t h, int np, const ladle_partition *const *ps, int nv,
                          const int64_t *values)
{
    for (int k = 0; k < np; k++)
        if (ps[k] != NULL)
            h = ladle__partition_hash(h, ps[k]);
    return ladle__hash(h, values, sizeof(int64_t) * (size_t)nv);
}

void ladle__dist_coords(const ladle_partition *p, int *coords)
{
    const int *c = ladle_partition_coords(p);
    for (int d = 0; d < ladle_partition_ndim(p); d++)
        coords[d] = c ? c[d] : -1;
}

ladle_status ladle__dist_box_copy(const ladle_op *op, ladle_box_mode mode, int nd,
                                  const int64_t *ext, const ladle_tensor *src,
                                  const int64_t *soff, ladle_tensor *dst, const int64_t *doff)
{
    int64_t ss[LADLE_MAX_NDIM], ds[LADLE_MAX_NDIM], so = 0, dof = 0, vol = 1;
    size_t es = ladle_dtype_size(op->dtype);
    for (int d = nd - 1; d >= 0; d--) {
        ss[d] = d == nd - 1 ? 1 : ss[d + 1] * src->shape[d + 1];
        ds[d] = d == nd - 1 ? 1 : ds[d + 1] * dst->shape[d + 1];
        vol *= ext[d];
    }
    if (vol == 0)
        return LADLE_OK;
    for (int d = 0; d < nd; d++) {
        so += soff[d] * ss[d];
        dof += doff[d] * ds[d];
    }
    return op->be->fn->copy_box(op->be, op->dtype, mode, nd, ext,
                                (const char *)src->data + (size_t)so * es, ss,
                                (char *)dst->data + (size_t)dof * es, ds);
}
