/*
 * Schedules: what one forward or adjoint call of an operator does on one
 * rank, planned once as a small dependency graph of steps (send, receive,
 * box copy/add/zero, elementwise add) and executed many times.
 *
 * Buffers are named, not pointed to: a step refers to the call's input (X),
 * output (Y) or the op's workspace (WS) plus an element offset, so one plan
 * serves every call. Execution posts each step as soon as its prerequisites
 * are done: receives first (they are planned first), local work as it
 * becomes possible, sends as their data is ready. Execution never
 * allocates: every array it touches is sized at finalisation.
 *
 * A schedule is finalised for one backend, and MPI sees only memory that
 * backend lets it see: on a device MPI may not touch (mpi_access 0), every
 * message is staged through a planned host buffer of the backend's own
 * (pinned where it has one): a send copies its data to the host first, a
 * receive copies it to the device when it lands, in chunks so that copies
 * and messages overlap (schedule.c says how). This is the only place where
 * messages meet device memory.
 */
#ifndef LADLE_SCHEDULE_H
#define LADLE_SCHEDULE_H

#include "src/core/backend.h"

typedef enum { LADLE_BUF_X = 0, LADLE_BUF_Y = 1, LADLE_BUF_WS = 2 } ladle_buf;

typedef struct ladle_ref {
    int buf;     /* ladle_buf */
    int64_t off; /* elements */
} ladle_ref;

static inline ladle_ref ladle_ref_make(int buf, int64_t off)
{
    ladle_ref r = {buf, off};
    return r;
}

static inline ladle_ref ladle_ref_at(ladle_ref r, int64_t delta)
{
    r.off += delta;
    return r;
}

typedef struct ladle_sched ladle_sched;

/* A box inside a local tensor: its extents, the element offset of its first
 * element, and the strides of the tensor. */
typedef struct ladle_box {
    int ndim;
    int64_t ext[LADLE_MAX_NDIM];
    int64_t str[LADLE_MAX_NDIM];
    int64_t off;
} ladle_box;

/* The box [lo, lo+ext) of a contiguous tensor of local shape `shape`. */
ladle_box ladle_box_in(int ndim, const int64_t *shape, const int64_t *lo,
                       const int64_t *ext);
int64_t ladle_box_volume(const ladle_box *b);
/* 1 if the box's elements are one contiguous run of the tensor. */
int ladle_box_is_contiguous(const ladle_box *b);

ladle_status ladle_sched_create(ladle_dtype dtype, ladle_sched **s);
void ladle_sched_destroy(ladle_sched **s);

/* Building. Each returns the new step's id, or -1 once any call has failed
 * (the failure is remembered and reported by ladle_sched_finalize). */
int ladle_sched_send(ladle_sched *s, ladle_ref src, int64_t count, int peer, int tag);
int ladle_sched_recv(ladle_sched *s, ladle_ref dst, int64_t count, int peer, int tag);
/* dst box (mode copy/add/zero) from src box; both boxes have the same
 * extents. For LADLE_BOX_ZERO src is ignored. */
int ladle_sched_box(ladle_sched *s, ladle_box_mode mode, ladle_ref src,
                    const ladle_box *src_box, ladle_ref dst, const ladle_box *dst_box);
/* A contiguous run as a box (a plain copy or add of count elements). */
int ladle_sched_copy(ladle_sched *s, ladle_box_mode mode, ladle_ref src, ladle_ref dst,
                     int64_t count);
/* c = a + b over count elements. */
int ladle_sched_add(ladle_sched *s, ladle_ref a, ladle_ref b, ladle_ref c, int64_t count);
/* `after` cannot start before `before` is done. Ignores ids < 0. */
void ladle_sched_dep(ladle_sched *s, int before, int after);
/* Reserve count workspace elements; returns their reference. */
ladle_ref ladle_sched_workspace(ladle_sched *s, int64_t count);

/* Freeze the graph, size the execution arrays and plan staging for be. */
ladle_status ladle_sched_finalize(ladle_sched *s, MPI_Comm comm, const ladle_backend *be);

int ladle_sched_steps(const ladle_sched *s);
size_t ladle_sched_esize(const ladle_sched *s);
int ladle_sched_messages(const ladle_sched *s);
int64_t ladle_sched_workspace_elems(const ladle_sched *s);
/* Bytes of host staging planned (0 where MPI may touch the device). */
size_t ladle_sched_staging_bytes(const ladle_sched *s);
/* Elements of a staged message's chunks (0 where nothing is staged): every
 * rank of a schedule must cut its messages alike, so ops agree on it. */
int64_t ladle_sched_staging_chunk(const ladle_sched *s);

/* Execute on (x, y, ws), memory of the finalising backend. start posts
 * everything that is ready and does the local work it can; finish waits
 * for the rest. run is both. x may equal y when the plan allows it. */
ladle_status ladle_sched_start(ladle_sched *s, const void *x, void *y, void *ws);
ladle_status ladle_sched_finish(ladle_sched *s);
ladle_status ladle_sched_run(ladle_sched *s, const void *x, void *y, void *ws);
/* Between start and finish: advance what has arrived without waiting;
 * *done becomes 1 when finish would not wait. */
ladle_status ladle_sched_progress(ladle_sched *s, int *done);
/* 1 between start and finish. */
int ladle_sched_in_flight(const ladle_sched *s);

#endif /* LADLE_SCHEDULE_H */
