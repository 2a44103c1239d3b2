/*
 * The steps of a layer's creation over its ranks, shared by every layer
 * that spans a communicator (the distributed layers, the containers, the
 * custom op): the union communicator of its partitions, the agreement of
 * the members on the verdict and on the arguments every rank must pass
 * alike, and the layer op taking its parts. Written once so that a bad
 * call fails on every member alike instead of hanging some of them.
 */
#ifndef LADLE_OP_MAKE_H
#define LADLE_OP_MAKE_H

#include "src/core/backend.h"
#include "src/op/op_impl.h"

/* Start creating a distributed layer on device over the union of np
 * partitions: *comm becomes the private communicator of the union's members
 * (MPI_COMM_NULL elsewhere) and the members agree on `local` (this rank's
 * verdict on the arguments, to which the check that ladle has the device's
 * backend is added) and on `hash` (the arguments every rank must pass
 * alike; the device is folded in). Collective over the members. */
ladle_status ladle__make_begin(int np, const ladle_partition *const *ps,
                               ladle_device device, ladle_status local, uint64_t hash,
                               MPI_Comm *comm, const char *func);

/* After each collective step of a creation: every member learns whether any
 * failed, so all of them skip the rest together. */
ladle_status ladle__make_step(MPI_Comm comm, ladle_status st, const char *func);

/* One creation in progress: the call's common arguments, the union's
 * communicator and the layouts of x and y, owned here until
 * ladle__make_end (ly may be a second reference to lx). */
typedef struct ladle__make {
    const char *func;
    ladle_dtype dtype;
    ladle_device device;
    unsigned flags;
    MPI_Comm comm;
    ladle_layout *lx, *ly;
} ladle__make;

/* A call's checks agreed over comm so that every rank reports the same
 * status: local where it failed; on the other ranks the failing ranks'
 * code when they all failed alike (raised as "failed on another rank"),
 * else LADLE_ERR_REMOTE. Collective over comm (MPI_COMM_NULL: local). */
ladle_status ladle__agree_code(MPI_Comm comm, ladle_status local, const char *func);

/* LADLE_CHECK in a step of m's creation: raised for the public call. */
#define LADLE_MAKE_CHECK(m, cond, code, ...)                                               \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            st = ladle__raise((code), (m)->func, __VA_ARGS__);                             \
            goto fail;                                                                     \
        }                                                                                  \
    } while (0)

/* LADLE_OK when ok, else out of memory raised for m's call. Local. */
ladle_status ladle__make_alloc_ok(const ladle__make *m, int ok);

/* ladle__make_begin for m (whose func, dtype, device and flags are set). */
ladle_status ladle__make_open(ladle__make *m, int np, const ladle_partition *const *ps,
                              ladle_status local, uint64_t hash);

/* When local is LADLE_OK, the layer op over this rank's blocks (x of shape
 * xs, or lx's box when xs is NULL; y of ly's box) with m's communicator,
 * m's layouts (a reference each) and the flags. On success the op owns impl
 * (vt->destroy frees it), and the caller forgets it. Local: nothing
 * collective; returns local or the failure. */
ladle_status ladle__make_layer(ladle__make *m, ladle_status local,
                               const ladle_op_vtable *vt, void *impl, const int64_t *xs,
                               ladle_op **op);

/* The end of every creation: the members agree on local; on success *op
 * goes to *out, on failure it is destroyed (it may be NULL). Closes m.
 * Collective over the members. */
ladle_status ladle__make_end(ladle__make *m, ladle_op **op, ladle_status local,
                             ladle_op **out);

/* Free what m still holds (a creation's failure path; again is harmless). */
void ladle__make_close(ladle__make *m);

/* The first checks of most validations: a dtype of f32 or f64 and no flag
 * but LADLE_CHECKED. Local. */
ladle_status ladle__make_check_kind(ladle_dtype dtype, unsigned flags, const char *func);

/* Fold a partition (shape and members) and a few integers into a hash. */
uint64_t ladle__make_hash(uint64_t h, int np, const ladle_partition *const *ps, int nv,
                          const int64_t *values);

#endif /* LADLE_OP_MAKE_H */
