/* Schedules: plan a dependency graph of steps once, execute it many times. */
#include <stdlib.h>
#include <string.h>

#include "src/comm/schedule.h"

enum { STEP_SEND, STEP_RECV, STEP_BOX, STEP_ADD };

typedef struct step {
    int kind;
    int mode;
    ladle_ref a, b, c; /* SEND: a; RECV: c; BOX: a -> c; ADD: c = a + b */
    int64_t count;
    int pair; /* BOX: index of its box pair */
    int peer, tag;
    int req; /* SEND/RECV: request slot */
    size_t stage; /* SEND/RECV: byte offset of its staging (when staged) */
    int ndeps;
    int out_begin, nout;
} step;

/* A normalised pair of boxes with the same extents. */
typedef struct pair {
    int ndim;
    int64_t ext[LADLE_MAX_NDIM];
    int64_t sstr[LADLE_MAX_NDIM];
    int64_t dstr[LADLE_MAX_NDIM];
} pair;

struct ladle_sched {
    ladle_dtype dtype;
    size_t esize;
    MPI_Datatype mpitype;
    MPI_Comm comm;
    ladle_status error;

    step *steps;
    int nsteps, capsteps;
    pair *pairs;
    int npairs, cappairs;
    int (*edges)[2];
    int nedges, capedges;
    int *out;
    int64_t ws_elems;

    /* execution state, sized at finalisation */
    int *remaining;
    int *queue;
    int qhead, qtail;
    MPI_Request *reqs;
    int *req_step;
    int *done_idx;
    MPI_Status *statuses;
    int nreqs;
    int pending, completed, in_flight;
    ladle_wait_policy wait;
    const ladle_backend *be;
    char *base[3];
    char *staging; /* host memory of be, when MPI may not touch be's */
    size_t staging_bytes;
    int staged_recvs; /* receives of this call copied to the device */
};

ladle_box ladle_box_in(int ndim, const int64_t *shape, const int64_t *lo,
                       const int64_t *ext)
{
    ladle_box b;
    int64_t str[LADLE_MAX_NDIM];
    ladle__contiguous_strides(ndim, shape, str);
    b.ndim = ndim;
    b.off = 0;
    for (int d = 0; d < ndim; d++) {
        b.ext[d] = ext[d];
        b.str[d] = str[d];
        b.off += lo[d] * str[d];
    }
    return b;
}

int64_t ladle_box_volume(const ladle_box *b)
{
    int64_t v = 1;
    for (int d = 0; d < b->ndim; d++)
        v *= b->ext[d];
    return v;
}

int ladle_box_is_contiguous(const ladle_box *b)
{
    /* Skipping unit extents, the box must be full in every dimension inside
     * the outermost non-unit one. */
    int64_t run = 1;
    for (int d = b->ndim - 1; d >= 0; d--) {
        if (b->ext[d] == 1)
            continue;
        if (b->str[d] != run)
            return 0;
        run *= b->ext[d];
    }
    return 1;
}

ladle_status ladle_sched_create(ladle_dtype dtype, ladle_sched **out)
{
    ladle_sched *s = ladle__calloc(1, sizeof *s);
    if (s == NULL)
        return ladle__raise(LADLE_ERR_ALLOC, __func__, "out of memory");
    s->dtype = dtype;
    s->esize = ladle_dtype_size(dtype);
    s->mpitype = dtype == LADLE_F32 ? MPI_FLOAT : MPI_DOUBLE;
    s->comm = MPI_COMM_NULL;
    *out = s;
    return LADLE_OK;
}

void ladle_sched_destroy(ladle_sched **ps)
{
    if (ps == NULL || *ps == NULL)
        return;
    ladle_sched *s = *ps;
    ladle__free(s->steps);
    ladle__free(s->pairs);
    ladle__free(s->edges);
    ladle__free(s->out);
    ladle__free(s->remaining);
    ladle__free(s->queue);
    ladle__free(s->reqs);
    ladle__free(s->req_step);
    ladle__free(s->done_idx);
    ladle__free(s->statuses);
    if (s->staging != NULL)
        ladle__be_host_free(s->be, s->staging);
    ladle__free(s);
    *ps = NULL;
}

/* Grow an array to hold one more element; on failure remember the error. */
static int grow(ladle_sched *s, void **arr, int n, int *cap, size_t elem)
{
    if (s->error != LADLE_OK)
        return 0;
    if (n < *cap)
        return 1;
    int ncap = *cap ? 2 * *cap : 16;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (p == NULL) {
        s->error = ladle__raise(LADLE_ERR_ALLOC, "ladle_sched", "out of memory");
        return 0;
    }
    *arr = p;
    *cap = ncap;
    return 1;
}

static int new_step(ladle_sched *s, int kind)
{
    if (!grow(s, (void **)&s->steps, s->nsteps, &s->capsteps, sizeof(step)))
        return -1;
    step *t = &s->steps[s->nsteps];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->pair = -1;
    t->req = -1;
    return s->nsteps++;
}

static int message(ladle_sched *s, int kind, ladle_ref r, int64_t count, int peer, int tag)
{
    /* checked here, at plan time, so that drain's int casts are exact */
    int n = 0;
    if (s->error == LADLE_OK)
        s->error = ladle__mpi_count("ladle_sched", kind == STEP_SEND ? "a send" : "a receive",
                                    count, &n);
    int id = new_step(s, kind);
    if (id < 0)
        return -1;
    step *t = &s->steps[id];
    if (kind == STEP_SEND)
        t->a = r;
    else
        t->c = r;
    t->count = count;
    t->peer = peer;
    t->tag = tag;
    return id;
}

int ladle_sched_send(ladle_sched *s, ladle_ref src, int64_t count, int peer, int tag)
{
    return message(s, STEP_SEND, src, count, peer, tag);
}

int ladle_sched_recv(ladle_sched *s, ladle_ref dst, int64_t count, int peer, int tag)
{
    return message(s, STEP_RECV, dst, count, peer, tag);
}

/* Drop unit extents and merge dimensions that are contiguous on both sides,
 * so the kernel's inner loop runs as long as possible. */
static void normalise(pair *p)
{
    int n = 0;
    for (int d = 0; d < p->ndim; d++) {
        if (p->ext[d] == 1)
            continue;
        p->ext[n] = p->ext[d];
        p->sstr[n] = p->sstr[d];
        p->dstr[n] = p->dstr[d];
        n++;
    }
    int m = 0;
    for (int d = 0; d < n; d++) {
        if (m > 0 && p->sstr[m - 1] == p->ext[d] * p->sstr[d] &&
            p->dstr[m - 1] == p->ext[d] * p->dstr[d]) {
            p->ext[m - 1] *= p->ext[d];
            p->sstr[m - 1] = p->sstr[d];
            p->dstr[m - 1] = p->dstr[d];
            continue;
        }
        p->ext[m] = p->ext[d];
        p->sstr[m] = p->sstr[d];
        p->dstr[m] = p->dstr[d];
        m++;
    }
    if (m == 0) {
        m = 1;
        p->ext[0] = 1;
        p->sstr[0] = 1;
        p->dstr[0] = 1;
    }
    p->ndim = m;
}

int ladle_sched_box(ladle_sched *s, ladle_box_mode mode, ladle_ref src,
                    const ladle_box *src_box, ladle_ref dst, const ladle_box *dst_box)
{
    if (!grow(s, (void **)&s->pairs, s->npairs, &s->cappairs, sizeof(pair)))
        return -1;
    pair *p = &s->pairs[s->npairs];
    p->ndim = dst_box->ndim;
    for (int d = 0; d < p->ndim; d++) {
        p->ext[d] = dst_box->ext[d];
        p->dstr[d] = dst_box->str[d];
        p->sstr[d] = mode == LADLE_BOX_ZERO ? 0 : src_box->str[d];
    }
    normalise(p);
    int id = new_step(s, STEP_BOX);
    if (id < 0)
        return -1;
    step *t = &s->steps[id];
    t->mode = mode;
    t->a = ladle_ref_at(src, mode == LADLE_BOX_ZERO ? 0 : src_box->off);
    t->c = ladle_ref_at(dst, dst_box->off);
    t->pair = s->npairs++;
    return id;
}

int ladle_sched_copy(ladle_sched *s, ladle_box_mode mode, ladle_ref src, ladle_ref dst,
                     int64_t count)
{
    ladle_box b = {.ndim = 1, .ext = {count}, .str = {1}, .off = 0};
    return ladle_sched_box(s, mode, src, &b, dst, &b);
}

int ladle_sched_add(ladle_sched *s, ladle_ref a, ladle_ref b, ladle_ref c, int64_t count)
{
    int id = new_step(s, STEP_ADD);
    if (id < 0)
        return -1;
    step *t = &s->steps[id];
    t->a = a;
    t->b = b;
    t->c = c;
    t->count = count;
    return id;
}

void ladle_sched_dep(ladle_sched *s, int before, int after)
{
    if (before < 0 || after < 0 || before == after)
        return;
    if (!grow(s, (void **)&s->edges, s->nedges, &s->capedges, sizeof(int[2])))
        return;
    s->edges[s->nedges][0] = before;
    s->edges[s->nedges][1] = after;
    s->nedges++;
}

ladle_ref ladle_sched_workspace(ladle_sched *s, int64_t count)
{
    ladle_ref r = ladle_ref_make(LADLE_BUF_WS, s->ws_elems);
    /* keep every reservation 64-byte aligned */
    int64_t align = (int64_t)(64 / s->esize), total = 0;
    if (count < 0 || count > LADLE_MAX_ELEMS ||
        !ladle__add_ok(s->ws_elems, (count + align - 1) / align * align, &total) ||
        total > LADLE_MAX_ELEMS) {
        if (s->error == LADLE_OK)
            s->error = ladle__raise(LADLE_ERR_SHAPE, "ladle_sched",
                                    "the workspace passes 2^57 elements");
        return r;
    }
    s->ws_elems = total;
    return r;
}

/* Give every message a run of the staging buffer (64-byte aligned) and
 * allocate it, touched, from the backend's host memory. */
static ladle_status plan_staging(ladle_sched *s)
{
    ladle_status st = LADLE_OK;
    int64_t at = 0;
    for (int i = 0; i < s->nsteps; i++) {
        step *t = &s->steps[i];
        if (t->kind != STEP_SEND && t->kind != STEP_RECV)
            continue;
        size_t bytes = 0;
        LADLE_CHECK(ladle__bytes_ok(t->count, s->esize, &bytes) &&
                        ladle__add_ok(at, (int64_t)((bytes + 63) / 64 * 64), &at),
                    LADLE_ERR_SHAPE, "the staging buffer passes the address space");
        t->stage = (size_t)at - (bytes + 63) / 64 * 64;
    }
    s->staging_bytes = (size_t)at;
    if (at > 0)
        LADLE_CALL(ladle__be_host_alloc(s->be, (size_t)at, (void **)&s->staging));
fail:
    return st;
}

ladle_status ladle_sched_finalize(ladle_sched *s, MPI_Comm comm, const ladle_backend *be)
{
    ladle_status st = s->error;
    int n = s->nsteps;
    if (st != LADLE_OK)
        return st;
    s->comm = comm;
    s->be = be;
    s->wait = ladle__wait_policy();
    s->out = ladle__calloc((size_t)s->nedges, sizeof(int));
    s->remaining = ladle__calloc((size_t)n, sizeof(int));
    s->queue = ladle__calloc((size_t)n, sizeof(int));
    LADLE_CHECK(s->out && s->remaining && s->queue, LADLE_ERR_ALLOC, "out of memory");
    /* dependents in CSR form, ordered by edge creation */
    for (int e = 0; e < s->nedges; e++) {
        s->steps[s->edges[e][0]].nout++;
        s->steps[s->edges[e][1]].ndeps++;
    }
    int at = 0;
    for (int i = 0; i < n; i++) {
        s->steps[i].out_begin = at;
        at += s->steps[i].nout;
        s->steps[i].nout = 0;
    }
    for (int e = 0; e < s->nedges; e++) {
        step *b = &s->steps[s->edges[e][0]];
        s->out[b->out_begin + b->nout++] = s->edges[e][1];
    }
    for (int i = 0; i < n; i++)
        if (s->steps[i].kind == STEP_SEND || s->steps[i].kind == STEP_RECV)
            s->steps[i].req = s->nreqs++;
    s->reqs = ladle__calloc((size_t)s->nreqs, sizeof(MPI_Request));
    s->req_step = ladle__calloc((size_t)s->nreqs, sizeof(int));
    s->done_idx = ladle__calloc((size_t)s->nreqs, sizeof(int));
    s->statuses = ladle__calloc((size_t)s->nreqs, sizeof(MPI_Status));
    LADLE_CHECK(s->reqs && s->req_step && s->done_idx && s->statuses, LADLE_ERR_ALLOC,
                "out of memory");
    for (int i = 0; i < n; i++)
        if (s->steps[i].req >= 0)
            s->req_step[s->steps[i].req] = i;
    for (int r = 0; r < s->nreqs; r++)
        s->reqs[r] = MPI_REQUEST_NULL;
    if (!be->mpi_access)
        LADLE_CALL(plan_staging(s));
    ladle__free(s->edges);
    s->edges = NULL;
    s->capedges = 0;
fail:
    return st;
}

int ladle_sched_steps(const ladle_sched *s) { return s ? s->nsteps : 0; }
size_t ladle_sched_esize(const ladle_sched *s) { return s->esize; }
int ladle_sched_messages(const ladle_sched *s) { return s ? s->nreqs : 0; }
int64_t ladle_sched_workspace_elems(const ladle_sched *s) { return s ? s->ws_elems : 0; }
size_t ladle_sched_staging_bytes(const ladle_sched *s) { return s ? s->staging_bytes : 0; }
int ladle_sched_in_flight(const ladle_sched *s) { return s && s->in_flight; }

static char *ptr(ladle_sched *s, ladle_ref r)
{
    return s->base[r.buf] + (size_t)r.off * s->esize;
}

static void complete(ladle_sched *s, int id);

/* A message has finished: a staged receive goes to the device (queued
 * before every step that depends on it), then its dependents may run. */
static ladle_status landed(ladle_sched *s, int id)
{
    ladle_status st = LADLE_OK;
    const step *t = &s->steps[id];
    if (s->staging != NULL && t->kind == STEP_RECV) {
        LADLE_CALL(s->be->fn->to_device(s->be, (size_t)t->count * s->esize,
                                        s->staging + t->stage, ptr(s, t->c)));
        s->staged_recvs++;
    }
    complete(s, id);
fail:
    return st;
}

static void complete(ladle_sched *s, int id)
{
    const step *t = &s->steps[id];
    s->completed++;
    for (int k = 0; k < t->nout; k++) {
        int o = s->out[t->out_begin + k];
        if (--s->remaining[o] == 0)
            s->queue[s->qtail++] = o;
    }
}

/* Run every ready step: local work now, messages posted. */
static ladle_status drain(ladle_sched *s)
{
    ladle_status st = LADLE_OK;
    while (s->qhead < s->qtail) {
        int id = s->queue[s->qhead++];
        step *t = &s->steps[id];
        switch (t->kind) {
        case STEP_SEND: {
            char *buf = ptr(s, t->a);
            if (s->staging != NULL) { /* the data must be on the host before MPI reads it */
                buf = s->staging + t->stage;
                LADLE_CALL(s->be->fn->to_host(s->be, (size_t)t->count * s->esize, ptr(s, t->a),
                                              buf));
                LADLE_CALL(s->be->fn->synchronize(s->be));
            }
            LADLE_MPI(MPI_Isend(buf, (int)t->count, s->mpitype, t->peer, t->tag, s->comm,
                                &s->reqs[t->req]));
            s->pending++;
            break;
        }
        case STEP_RECV:
            LADLE_MPI(MPI_Irecv(s->staging != NULL ? s->staging + t->stage : ptr(s, t->c),
                                (int)t->count, s->mpitype, t->peer, t->tag, s->comm,
                                &s->reqs[t->req]));
            s->pending++;
            break;
        case STEP_BOX: {
            const pair *p = &s->pairs[t->pair];
            char *src = t->mode == LADLE_BOX_ZERO ? NULL : ptr(s, t->a);
            char *dst = ptr(s, t->c);
            /* an in-place call makes some copies no-ops */
            if (!(t->mode == LADLE_BOX_COPY && src == dst &&
                  memcmp(p->sstr, p->dstr, sizeof(int64_t) * (size_t)p->ndim) == 0))
                LADLE_CALL(s->be->fn->copy_box(s->be, s->dtype, (ladle_box_mode)t->mode,
                                               p->ndim, p->ext, src, p->sstr, dst, p->dstr));
            complete(s, id);
            break;
        }
        case STEP_ADD:
            LADLE_CALL(s->be->fn->add(s->be, s->dtype, t->count, ptr(s, t->a), ptr(s, t->b),
                                      ptr(s, t->c)));
            complete(s, id);
            break;
        }
    }
fail:
    return st;
}

ladle_status ladle_sched_start(ladle_sched *s, const void *x, void *y, void *ws)
{
    ladle_status st = LADLE_OK;
    LADLE_CHECK(!s->in_flight, LADLE_ERR_STATE, "the previous call has not finished");
    LADLE_CHECK(s->be != NULL, LADLE_ERR_STATE, "the schedule is not finalised");
    s->staged_recvs = 0;
    s->base[LADLE_BUF_X] = (char *)x;
    s->base[LADLE_BUF_Y] = (char *)y;
    s->base[LADLE_BUF_WS] = (char *)ws;
    s->qhead = s->qtail = 0;
    s->pending = s->completed = 0;
    /* receives first, so no message arrives unexpected */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < s->nsteps; i++) {
            s->remaining[i] = s->steps[i].ndeps;
            if (s->steps[i].ndeps == 0 && (s->steps[i].kind == STEP_RECV) == (pass == 0))
                s->queue[s->qtail++] = i;
        }
    s->in_flight = 1;
    LADLE_CALL(drain(s));
fail:
    return st;
}

ladle_status ladle_sched_finish(ladle_sched *s)
{
    ladle_status st = LADLE_OK;
    LADLE_CHECK(s->in_flight, LADLE_ERR_STATE, "no call is in flight");
    double since = 0.0;
    while (s->pending > 0) {
        int count = 0;
        if (s->wait == LADLE_WAIT_SPIN)
            LADLE_MPI(MPI_Waitsome(s->nreqs, s->reqs, &count, s->done_idx, s->statuses));
        else
            LADLE_MPI(MPI_Testsome(s->nreqs, s->reqs, &count, s->done_idx, s->statuses));
        LADLE_CHECK(count != MPI_UNDEFINED, LADLE_ERR_INTERNAL,
                    "no active request while %d are pending", s->pending);
        if (count == 0) {
            ladle__poll_pause(s->wait, &since);
            continue;
        }
        since = 0.0;
        for (int k = 0; k < count; k++) {
            s->pending--;
            LADLE_CALL(landed(s, s->req_step[s->done_idx[k]]));
        }
        LADLE_CALL(drain(s));
    }
    LADLE_CHECK(s->completed == s->nsteps, LADLE_ERR_INTERNAL,
                "schedule stalled after %d of %d steps", s->completed, s->nsteps);
    /* the next call's receives reuse the staging: the copies out of it
     * must be done first */
    if (s->staged_recvs > 0)
        LADLE_CALL(s->be->fn->synchronize(s->be));
fail:
    s->in_flight = 0;
    return st;
}

ladle_status ladle_sched_progress(ladle_sched *s, int *done)
{
    ladle_status st = LADLE_OK;
    *done = 0;
    LADLE_CHECK(s->in_flight, LADLE_ERR_STATE, "no call is in flight");
    if (s->pending > 0) {
        int count = 0;
        LADLE_MPI(MPI_Testsome(s->nreqs, s->reqs, &count, s->done_idx, s->statuses));
        for (int k = 0; count != MPI_UNDEFINED && k < count; k++) {
            s->pending--;
            LADLE_CALL(landed(s, s->req_step[s->done_idx[k]]));
        }
        LADLE_CALL(drain(s));
    }
    *done = s->pending == 0;
fail:
    return st;
}

ladle_status ladle_sched_run(ladle_sched *s, const void *x, void *y, void *ws)
{
    ladle_status st = ladle_sched_start(s, x, y, ws);
    if (st != LADLE_OK) {
        s->in_flight = 0;
        return st;
    }
    return ladle_sched_finish(s);
}
