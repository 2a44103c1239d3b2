/*
 * ladle/partition.h - Cartesian grids of MPI processes.
 *
 * A partition arranges some ranks of a parent communicator in a Cartesian
 * grid. Partition rank r is ranks[r] of the list it was made from (rank order
 * as given) and its coordinates are the row-major unravelling of r. Every
 * rank of the parent holds the partition object, so every rank knows the
 * grid's shape and members; ranks that are not members are *inactive* for
 * operations on it and pass zero-volume tensors. Members talk on a private
 * communicator (never the caller's) whose error handler is
 * MPI_ERRORS_RETURN.
 *
 * Partitions are reference counted internally: layouts and operators keep
 * what they use alive, so handles may be destroyed in any order.
 */
#ifndef LADLE_PARTITION_H
#define LADLE_PARTITION_H

#include <mpi.h>

#include "comm.h"
#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ladle_partition ladle_partition;

/* The MPI whose mpi.h this translation unit is compiled with, in the form
 * of ladle_mpi_library(). ladle_partition_create (a macro over
 * ladle_partition_create_mpi) hands it to the library, which refuses an MPI
 * of another family than its own build's with LADLE_ERR_MPI instead of
 * misreading the caller's communicator. */
#define LADLE_MPI_STR_(x) #x
#define LADLE_MPI_XSTR_(x) LADLE_MPI_STR_(x)
#if defined(MPICH_VERSION)
#define LADLE_MPI_HEADER "MPICH " MPICH_VERSION
#elif defined(OPEN_MPI) && defined(OMPI_MAJOR_VERSION)
#define LADLE_MPI_HEADER                                                                   \
    "Open MPI " LADLE_MPI_XSTR_(OMPI_MAJOR_VERSION) "." LADLE_MPI_XSTR_(                  \
        OMPI_MINOR_VERSION) "." LADLE_MPI_XSTR_(OMPI_RELEASE_VERSION)
#elif defined(I_MPI_VERSION)
#define LADLE_MPI_HEADER "Intel(R) MPI " I_MPI_VERSION
#else
#define LADLE_MPI_HEADER                                                                   \
    "unknown MPI " LADLE_MPI_XSTR_(MPI_VERSION) "." LADLE_MPI_XSTR_(MPI_SUBVERSION)
#endif

/* A step along one dimension of a grid: towards lower or higher
 * coordinates. */
typedef enum ladle_direction { LADLE_DIR_LOWER = -1, LADLE_DIR_HIGHER = 1 } ladle_direction;

/* Create a partition of shape shape[0] x ... x shape[ndim-1] over ranks of
 * parent (ladle_comm_of(MPI_COMM_WORLD), or any communicator: docs/api.md).
 * ranks lists prod(shape) distinct ranks of parent in partition-rank
 * order; NULL means ranks 0 .. prod(shape)-1. ndim may be 0 (one rank).
 * Collective over parent: every rank of parent calls it with the same
 * arguments (disagreement is detected and reported on every rank).
 * This is where ladle first meets MPI, so it checks, before any message,
 * that MPI is usable as ladle.h says: initialised and not finalised, and
 * called from the main thread unless the thread level is
 * MPI_THREAD_SERIALIZED or above. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (bad
 * ndim or extents, a shape of more than 2^30 ranks), LADLE_ERR_STATE (MPI
 * not initialised, or finalised), LADLE_ERR_UNSUPPORTED (a thread other than
 * MPI's main thread at MPI_THREAD_SINGLE or MPI_THREAD_FUNNELED),
 * LADLE_ERR_PARTITION (rank out of range, duplicated, or more ranks than
 * parent has: checked before the rank list is allocated), LADLE_ERR_MPI
 * (an MPI call failed, or the MPI of the process or of the caller's mpi.h
 * is not the one libladle was built with: see ladle_mpi_library; this is
 * checked first, on each rank alone, and its message has no rank),
 * LADLE_ERR_ALLOC. (In C and C++ this name is the macro below.) */
LADLE_API ladle_status ladle_partition_create(ladle_comm parent, int ndim,
                                              const int shape[], const int ranks[],
                                              ladle_partition **p);

/* ladle_partition_create for a caller that names the mpi.h it was compiled
 * with (caller_mpi: its LADLE_MPI_HEADER; NULL: unknown). In C and C++,
 * ladle_partition_create(...) expands to this call with the caller's
 * LADLE_MPI_HEADER, so a program compiled against another MPI's mpi.h
 * than libladle's gets LADLE_ERR_MPI naming both, before its communicator
 * is touched. Collective over parent, as ladle_partition_create. The same
 * codes as ladle_partition_create. */
LADLE_API ladle_status ladle_partition_create_mpi(const char *caller_mpi, ladle_comm parent,
                                                  int ndim, const int shape[],
                                                  const int ranks[], ladle_partition **p);
/* variadic, so that an argument with commas ((int[]){2, 3}) stays one */
#define ladle_partition_create(...) ladle_partition_create_mpi(LADLE_MPI_HEADER, __VA_ARGS__)

/* A new partition over some members of base: ranks[] are partition ranks of
 * base (NULL: base ranks 0 .. prod(shape)-1). Both share base's parent, so
 * operators may combine them. Collective over the members of base; other
 * ranks may call it and get the (inactive) object without communicating.
 * Returns the codes of ladle_partition_create. */
LADLE_API ladle_status ladle_partition_create_subset(const ladle_partition *base, int ndim,
                                                     const int shape[], const int ranks[],
                                                     ladle_partition **p);

/* The Cartesian sub-grid through this rank: the members of p whose
 * coordinates equal this rank's on every dimension d with remain[d] == 0.
 * The result has the dimensions with remain[d] != 0, in order. Each member of
 * p gets its own sub-grid (as MPI_Cart_sub); ranks outside p get an inactive
 * object whose shape is still known. Collective over the members of p.
 * Returns LADLE_ERR_NULL, LADLE_ERR_MPI, LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_partition_create_sub(const ladle_partition *p,
                                                  const int remain[],
                                                  ladle_partition **sub);

/* The one-dimensional partition over the members of a followed by the members
 * of b that are not in a, in that order. a and b must share a parent.
 * Collective over the members of either; other ranks get an inactive object.
 * Returns LADLE_ERR_NULL, LADLE_ERR_PARTITION, LADLE_ERR_MPI, LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_partition_create_union(const ladle_partition *a,
                                                    const ladle_partition *b,
                                                    ladle_partition **u);

/* Release the caller's handle and set *p to NULL; the object is freed when no
 * layout or operator uses it any more. Accepts NULL. Local; collective over
 * the members of p when it frees the object (MPI_Comm_free of the members'
 * private communicator), and over the ranks of parent when the last
 * partition made from one ladle_partition_create goes (its duplicate of
 * parent is freed too). It waits for no other rank (MPI_Comm_free only marks
 * a communicator for release), but MPI counts MPI_Comm_free as collective,
 * so every rank should release its handles in the same order. */
LADLE_API ladle_status ladle_partition_destroy(ladle_partition **p);

/* The accessors below are local: every rank answers from its own copy. */

/* 1 if the calling rank is a member, else 0 (also for p == NULL). Local. */
LADLE_API int ladle_partition_active(const ladle_partition *p);
/* Number of grid dimensions; the extents (ndim entries, valid while p lives).
 * Local. */
LADLE_API int ladle_partition_ndim(const ladle_partition *p);
LADLE_API const int *ladle_partition_shape(const ladle_partition *p);
/* Number of members. Local. */
LADLE_API int ladle_partition_size(const ladle_partition *p);
/* The calling rank's partition rank, or -1 when inactive. Local. */
LADLE_API int ladle_partition_rank(const ladle_partition *p);
/* The calling rank's coordinates (ndim entries), or NULL when inactive.
 * Local. */
LADLE_API const int *ladle_partition_coords(const ladle_partition *p);
/* Coordinates of partition rank r, and the partition rank at coords.
 * Local. Return LADLE_ERR_NULL or LADLE_ERR_ARG for out-of-range input. */
LADLE_API ladle_status ladle_partition_coords_of(const ladle_partition *p, int rank,
                                                 int coords[]);
LADLE_API ladle_status ladle_partition_rank_of(const ladle_partition *p, const int coords[],
                                               int *rank);
/* Partition rank of the neighbour of partition rank `rank` one step along
 * dimension dim in direction dir, or -1 at the boundary (grids are not
 * periodic) and for arguments out of range (dir neither of the two).
 * Local. */
LADLE_API int ladle_partition_neighbor(const ladle_partition *p, int rank, int dim,
                                       ladle_direction dir);
/* The rank in the parent communicator of partition rank r, or -1. Local. */
LADLE_API int ladle_partition_parent_rank(const ladle_partition *p, int r);
/* The private communicator of the members (rank = partition rank), or
 * MPI_COMM_NULL's when inactive or p is NULL: ladle_comm_mpi() of it is an
 * MPI_Comm. Borrowed: do not free it. Local. */
LADLE_API ladle_comm ladle_partition_comm(const ladle_partition *p);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_PARTITION_H */
