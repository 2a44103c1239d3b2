/*
 * Memory accounting (ladle/memory.h): the tracker's figures, and the scope
 * that tells an allocation its kind. Each counted block carries a
 * ladle__mem_acct in its allocator's header, so its free finds the tracker
 * and kind it was counted under whichever thread frees it.
 */
#include <stdlib.h>

#include "src/core/internal.h"

struct ladle_memory_tracker {
    size_t current[LADLE_MEM_KINDS];
    size_t peak[LADLE_MEM_KINDS];
    size_t total, peak_total;
};

/* Per thread, as the allocator is: which tracker counts, and the kind the
 * creation under way allocates (0: none named, OTHER; else kind + 1). */
static _Thread_local ladle_memory_tracker *thread_tracker;
static _Thread_local int thread_kind;

/* The kind rides in the top 4 bits of the byte count: no block ladle
 * allocates reaches 2^60 bytes (LADLE_MAX_BYTES). */
#define KIND_SHIFT 60
#define BYTES_MASK (((uint64_t)1 << KIND_SHIFT) - 1)

const char *ladle_memory_kind_name(ladle_memory_kind kind)
{
    static const char *const names[LADLE_MEM_KINDS] = {
        "params", "grads", "optim", "activations", "gather", "workspace", "comm", "other"};
    return (unsigned)kind < LADLE_MEM_KINDS ? names[kind] : "unknown";
}

int ladle__mem_kind_begin(ladle_memory_kind kind)
{
    int prev = thread_kind;
    thread_kind = (int)kind + 1;
    return prev;
}

void ladle__mem_kind_end(int prev) { thread_kind = prev; }

void ladle__mem_count(ladle__mem_acct *a, size_t bytes, int host_object)
{
    ladle_memory_tracker *t = thread_tracker;
    a->tracker = NULL;
    a->bytes_kind = 0;
    if (t == NULL || (uint64_t)bytes > BYTES_MASK)
        return;
    int k = host_object || thread_kind == 0 ? LADLE_MEM_OTHER : thread_kind - 1;
    a->tracker = t;
    a->bytes_kind = (uint64_t)bytes | (uint64_t)k << KIND_SHIFT;
    t->current[k] += bytes;
    if (t->current[k] > t->peak[k])
        t->peak[k] = t->current[k];
    t->total += bytes;
    if (t->total > t->peak_total)
        t->peak_total = t->total;
}

void ladle__mem_uncount(const ladle__mem_acct *a)
{
    ladle_memory_tracker *t = a->tracker;
    if (t == NULL)
        return;
    size_t bytes = (size_t)(a->bytes_kind & BYTES_MASK);
    int k = (int)(a->bytes_kind >> KIND_SHIFT);
    t->current[k] -= bytes;
    t->total -= bytes;
}

ladle_status ladle_memory_tracker_create(ladle_memory_tracker **t)
{
    if (t == NULL)
        return ladle__raise(LADLE_ERR_NULL, __func__, "t is NULL");
    /* the C library's, not ladle__calloc: the tracker is not in its own figures */
    ladle_memory_tracker *n = calloc(1, sizeof *n);
    if (n == NULL)
        return ladle__raise(LADLE_ERR_ALLOC, __func__, "out of memory");
    *t = n;
    return LADLE_OK;
}

ladle_status ladle_memory_tracker_destroy(ladle_memory_tracker **t)
{
    if (t == NULL || *t == NULL)
        return LADLE_OK;
    if ((*t)->total > 0)
        return ladle__raise(
            LADLE_ERR_STATE, __func__,
            "the tracker still counts %zu bytes: free what it counted first", (*t)->total);
    if (thread_tracker == *t)
        return ladle__raise(
            LADLE_ERR_STATE, __func__,
            "the tracker is this thread's: call ladle_memory_track(NULL) first");
    free(*t);
    *t = NULL;
    return LADLE_OK;
}

ladle_status ladle_memory_track(ladle_memory_tracker *t)
{
    thread_tracker = t;
    return LADLE_OK;
}

ladle_memory_tracker *ladle_memory_tracking(void) { return thread_tracker; }

void ladle_memory_stats_init(ladle_memory_stats *s) { (void)LADLE_DESC_START(s); }

ladle_status ladle_memory_report(const ladle_memory_tracker *t, ladle_memory_stats *s)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(t);
    LADLE_NOT_NULL(s);
    LADLE_CHECK_SIZE(s);
    for (int k = 0; k < LADLE_MEM_KINDS; k++) {
        s->current[k] = t->current[k];
        s->peak[k] = t->peak[k];
    }
    s->total = t->total;
    s->peak_total = t->peak_total;
fail:
    return st;
}

ladle_status ladle_memory_reset_peak(ladle_memory_tracker *t)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(t);
    for (int k = 0; k < LADLE_MEM_KINDS; k++)
        t->peak[k] = t->current[k];
    t->peak_total = t->total;
fail:
    return st;
}

ladle_status ladle_memory_stats_max(ladle_memory_stats *s, ladle_comm comm_in)
{
    LADLE_COMM_IN(comm, comm_in);
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(s);
    LADLE_CHECK_SIZE(s);
    enum { N = 2 * LADLE_MEM_KINDS + 2 };
    unsigned long long v[N];
    for (int k = 0; k < LADLE_MEM_KINDS; k++) {
        v[k] = s->current[k];
        v[LADLE_MEM_KINDS + k] = s->peak[k];
    }
    v[N - 2] = s->total;
    v[N - 1] = s->peak_total;
    LADLE_MPI(ladle__allreduce(MPI_IN_PLACE, v, N, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm));
    for (int k = 0; k < LADLE_MEM_KINDS; k++) {
        s->current[k] = (size_t)v[k];
        s->peak[k] = (size_t)v[LADLE_MEM_KINDS + k];
    }
    s->total = (size_t)v[N - 2];
    s->peak_total = (size_t)v[N - 1];
fail:
    return st;
}
