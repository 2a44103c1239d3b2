/*
 * The steps every primitive's creation shares after its own checks and
 * plans: what the members agree on, and the end that hands the op over and
 * frees the rest (see primitives_impl.h).
 */
#include "primitives/primitives_impl.h"

uint64_t ladle__prim_hash(uint64_t h, ladle_dtype dtype, ladle_device device,
                          unsigned flags)
{
    h = ladle__hash(h, &dtype, sizeof dtype);
    h = ladle__hash(h, &device, sizeof device);
    return ladle__hash(h, &flags, sizeof flags);
}

ladle_status ladle__prim_finish(ladle_status st, ladle_op **op, MPI_Comm *comm,
                                int **to_comm, ladle_status local, uint64_t h,
                                ladle_op **out, const char *func)
{
    if (st == LADLE_OK)
        st = ladle__op_finish(op, comm, local, h, out, func);
    if (*comm != MPI_COMM_NULL)
        MPI_Comm_free(comm);
    ladle_op_destroy(op);
    ladle__free(*to_comm);
    *to_comm = NULL;
    return st;
}
