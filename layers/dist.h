/*
 * What the distributed layers share: the union communicator and the
 * agreement steps of their creation, zero-volume stand-ins, and composite
 * contexts.
 */
#ifndef LADLE_DIST_H
#define LADLE_DIST_H

#include "primitives/primitives_impl.h"
#include "src/core/backend.h"

/* Start creating a distributed layer on device over the union of np
 * partitions: *comm becomes the private communicator of the union's members
 * (MPI_COMM_NULL elsewhere) and the members agree on `local` (this rank's
 * verdict on the arguments, to which the check that ladle has the device's
 * backend is added) and on `hash` (the arguments every rank must pass
 * alike; the device is folded in). Collective over the members. */
ladle_status ladle__dist_begin(int np, const ladle_partition *const *ps, ladle_device device,
                               ladle_status local, uint64_t hash, MPI_Comm *comm, const char *func);

/* After each collective step of a creation: every member learns whether any
 * failed, so all of them skip the rest together. */
ladle_status ladle__dist_step(MPI_Comm comm, ladle_status st, const char *func);

/* A tensor of dtype and shape on device (zero volume when any extent is 0). */
ladle_status ladle__dist_tensor(ladle_dtype dtype, ladle_device device, int ndim,
                                const int64_t *shape, ladle_tensor **t);

/* Fold a partition (shape and members) and a few integers into a hash. */
uint64_t ladle__dist_hash(uint64_t h, int np, const ladle_partition *const *ps, int nv,
                          const int64_t *values);

/* Copy (or add, mode) the box of extent ext at offset soff of the
 * contiguous src to offset doff of the contiguous dst, on op's backend. */
ladle_status ladle__dist_box_copy(const ladle_op *op, ladle_box_mode mode, int nd,
                                  const int64_t *ext, const ladle_tensor *src,
                                  const int64_t *soff, ladle_tensor *dst, const int64_t *doff);

/* This rank's coordinates in p (all -1 outside it). */
void ladle__dist_coords(const ladle_partition *p, int *coords);

#endif /* LADLE_DIST_H */
