/*
 * Schedules: plan a dependency graph of steps once, execute it many times.
 *
 * Messages on a device that MPI may not touch are staged, and staged
 * messages travel in chunks (LADLE_STAGING_CHUNK bytes, 1 MiB unless the
 * environment says otherwise; the same on every rank), each its own MPI
 * message under the message's tag, so that copying one chunk overlaps
 * moving another:
 *   - a send queues the copy of every chunk to the host, each followed by
 *     an event, and posts each chunk's MPI_Isend once its event has passed;
 *   - a receive posts one MPI_Irecv per chunk and queues each chunk's copy
 *     to the device as it lands; the step is done when every chunk has.
 * On a device whose slots return before their work is done (be->async),
 * the host never waits for the whole queue in a call: a send waits for its
 * own chunks' events (those ready when a call starts are all posted before
 * start returns, chunk by chunk as each passes, so that no peer waits on a
 * send nobody will post), and the copies out of the receive staging are
 * waited for (an event) only when the next call is about to reuse it. Where MPI
 * reads an asynchronous device's memory itself (mpi_access), a call first
 * waits for the queue (MPI must not race the kernels before it), and each
 * send waits for an event recorded when it became ready.
 */
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
    int chunk0, nchunks; /* SEND/RECV: its chunks (and request slots) */
    int left;            /* SEND/RECV: chunks not yet complete in this call */
    size_t stage;        /* SEND/RECV: byte offset of its staging (when staged) */
    int ndeps;
    int out_begin, nout;
} step;

/* One MPI message of a step: the whole message, or a piece of a staged one. */
typedef struct chunk {
    int step;
    int64_t off, count; /* elements, within the step's message */
    void *event;        /* sends on an async device: passed when the data may go */
} chunk;

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
    chunk *chunks; /* nreqs of them: request r is chunk r */
    int nreqs, nmessages;
    MPI_Request *reqs;
    int *done_idx;
    MPI_Status *statuses;
    int *unposted; /* sends' chunks waiting for their event, in queue order */
    int uhead, utail;
    int pending, completed, in_flight;
    ladle_wait_policy wait;
    const ladle_backend *be;
    int async;     /* be->async: slots return before their work is done */
    char *base[3];
    char *staging; /* host memory of be, when MPI may not touch be's */
    size_t staging_bytes;
    int64_t chunk_elems; /* the most elements of a staged chunk */
    int staged_recvs;    /* chunks of this call copied to the device */
    void *recv_done;     /* async: passed when those copies are done */
    int recv_pending;    /* recv_done was recorded and not yet waited for */
};

static void abandon(ladle_sched *s);

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
    if (s->in_flight && ladle__mpi_usable()) /* started and never finished */
        abandon(s);
    ladle__free(s->steps);
    ladle__free(s->pairs);
    ladle__free(s->edges);
    ladle__free(s->out);
    ladle__free(s->remaining);
    ladle__free(s->queue);
    for (int i = 0; s->chunks != NULL && i < s->nreqs; i++)
        ladle__be_event_destroy(s->be, s->chunks[i].event);
    ladle__free(s->chunks);
    ladle__free(s->reqs);
    ladle__free(s->done_idx);
    ladle__free(s->statuses);
    ladle__free(s->unposted);
    if (s->recv_done != NULL)
        ladle__be_event_destroy(s->be, s->recv_done);
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
    void *p = ladle__realloc(*arr, (size_t)ncap * elem);
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

/* The staged chunk size in elements: LADLE_STAGING_CHUNK bytes (at least
 * 64, 1 MiB when unset). */
static int64_t staging_chunk(size_t esize)
{
    const char *v = getenv("LADLE_STAGING_CHUNK");
    long long bytes = 1 << 20;
    if (v != NULL && v[0] != '\0') {
        char *end = NULL;
        long long b = strtoll(v, &end, 10);
        if (end != v && *end == '\0' && b >= 64 && b <= (1LL << 40))
            bytes = b;
    }
    int64_t n = (int64_t)bytes / (int64_t)esize;
    return n > 0 ? n : 1;
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

/* Cut the messages into chunks (staged ones by the chunk size, others
 * whole), one request slot each, with an event for each send chunk on an
 * async device. */
static ladle_status plan_chunks(ladle_sched *s, int staged)
{
    ladle_status st = LADLE_OK;
    int total = 0;
    s->chunk_elems = staged ? staging_chunk(s->esize) : LADLE_MAX_ELEMS;
    for (int i = 0; i < s->nsteps; i++) {
        step *t = &s->steps[i];
        if (t->kind != STEP_SEND && t->kind != STEP_RECV)
            continue;
        int64_t n = t->count > 0 ? (t->count + s->chunk_elems - 1) / s->chunk_elems : 1;
        LADLE_CHECK(n <= INT32_MAX - total, LADLE_ERR_SHAPE, "too many message chunks");
        t->chunk0 = total;
        t->nchunks = (int)n;
        total += (int)n;
        s->nmessages++;
    }
    s->nreqs = total;
    s->chunks = ladle__calloc((size_t)total, sizeof(chunk));
    s->reqs = ladle__calloc((size_t)total, sizeof(MPI_Request));
    s->done_idx = ladle__calloc((size_t)total, sizeof(int));
    s->statuses = ladle__calloc((size_t)total, sizeof(MPI_Status));
    s->unposted = ladle__calloc((size_t)total, sizeof(int));
    LADLE_CHECK(s->chunks && s->reqs && s->done_idx && s->statuses && s->unposted,
                LADLE_ERR_ALLOC, "out of memory");
    for (int i = 0; i < s->nsteps; i++) {
        step *t = &s->steps[i];
        for (int k = 0; (t->kind == STEP_SEND || t->kind == STEP_RECV) && k < t->nchunks; k++) {
            chunk *c = &s->chunks[t->chunk0 + k];
            c->step = i;
            c->off = k * s->chunk_elems;
            c->count = t->count - c->off < s->chunk_elems ? t->count - c->off : s->chunk_elems;
            s->reqs[t->chunk0 + k] = MPI_REQUEST_NULL;
            if (s->async && t->kind == STEP_SEND)
                LADLE_CALL(ladle__be_event_create(s->be, &c->event));
        }
    }
    if (s->async && staged)
        LADLE_CALL(ladle__be_event_create(s->be, &s->recv_done));
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
    s->async = be->async;
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
    LADLE_CALL(plan_chunks(s, !be->mpi_access));
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
int ladle_sched_messages(const ladle_sched *s) { return s ? s->nmessages : 0; }
int64_t ladle_sched_workspace_elems(const ladle_sched *s) { return s ? s->ws_elems : 0; }
size_t ladle_sched_staging_bytes(const ladle_sched *s) { return s ? s->staging_bytes : 0; }
int64_t ladle_sched_staging_chunk(const ladle_sched *s)
{
    /* also on a rank without messages: it must agree with those that have */
    return s != NULL && s->be != NULL && !s->be->mpi_access ? s->chunk_elems : 0;
}
int ladle_sched_in_flight(const ladle_sched *s) { return s && s->in_flight; }

static char *ptr(ladle_sched *s, ladle_ref r)
{
    return s->base[r.buf] + (size_t)r.off * s->esize;
}

static void complete(ladle_sched *s, int id);

/* A chunk has finished. A staged receive's chunk goes to the device
 * (queued before every step that depends on its message); a message whose
 * chunks are all in lets its dependents run. */
static ladle_status landed(ladle_sched *s, int k)
{
    ladle_status st = LADLE_OK;
    const chunk *c = &s->chunks[k];
    step *t = &s->steps[c->step];
    if (s->staging != NULL && t->kind == STEP_RECV) {
        size_t off = (size_t)c->off * s->esize;
        LADLE_CALL(s->be->fn->to_device(s->be, (size_t)c->count * s->esize,
                                        s->staging + t->stage + off, ptr(s, t->c) + off));
        s->staged_recvs++;
    }
    if (--t->left == 0)
        complete(s, c->step);
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

static ladle_status isend(ladle_sched *s, int k)
{
    ladle_status st = LADLE_OK;
    const chunk *c = &s->chunks[k];
    const step *t = &s->steps[c->step];
    char *buf = s->staging != NULL ? s->staging + t->stage : ptr(s, t->a);
    LADLE_MPI(MPI_Isend(buf + (size_t)c->off * s->esize, (int)c->count, s->mpitype, t->peer,
                        t->tag, s->comm, &s->reqs[k]));
    s->pending++;
fail:
    return st;
}

/* A send is ready: its data goes to the host first when staged. On an
 * async device each chunk is posted once its event has passed (post_sends);
 * elsewhere the copy has finished on return, and the chunks go now. */
static ladle_status send(ladle_sched *s, step *t)
{
    ladle_status st = LADLE_OK;
    for (int j = 0; j < t->nchunks; j++) {
        int k = t->chunk0 + j;
        const chunk *c = &s->chunks[k];
        if (s->staging != NULL) {
            size_t off = (size_t)c->off * s->esize;
            LADLE_CALL(s->be->fn->to_host(s->be, (size_t)c->count * s->esize,
                                          ptr(s, t->a) + off, s->staging + t->stage + off));
        }
        if (s->async) {
            LADLE_CALL(ladle__be_event_record(s->be, c->event));
            s->unposted[s->utail++] = k;
        } else {
            LADLE_CALL(isend(s, k));
        }
    }
fail:
    return st;
}

/* Post the send chunks whose events have passed, oldest first; with wait,
 * wait for the oldest one (its copy is queued: it always finishes). */
static ladle_status post_sends(ladle_sched *s, int wait)
{
    ladle_status st = LADLE_OK;
    while (s->uhead < s->utail) {
        int k = s->unposted[s->uhead], done = 0;
        if (wait) {
            LADLE_CALL(ladle__be_event_sync(s->be, s->chunks[k].event));
            done = 1;
            wait = 0;
        } else {
            LADLE_CALL(ladle__be_event_query(s->be, s->chunks[k].event, &done));
        }
        if (!done)
            break;
        LADLE_CALL(isend(s, k));
        s->uhead++;
    }
fail:
    return st;
}

/* Run every ready step: local work now, messages posted. */
static ladle_status drain(ladle_sched *s)
{
    ladle_status st = LADLE_OK;
    while (s->qhead < s->qtail) {
        int id = s->queue[s->qhead++];
        step *t = &s->steps[id];
        switch (t->kind) {
        case STEP_SEND:
            LADLE_CALL(send(s, t));
            break;
        case STEP_RECV:
            for (int j = 0; j < t->nchunks; j++) {
                const chunk *c = &s->chunks[t->chunk0 + j];
                char *buf = s->staging != NULL ? s->staging + t->stage : ptr(s, t->c);
                LADLE_MPI(MPI_Irecv(buf + (size_t)c->off * s->esize, (int)c->count,
                                    s->mpitype, t->peer, t->tag, s->comm,
                                    &s->reqs[t->chunk0 + j]));
                s->pending++;
            }
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
    if (s->uhead < s->utail)
        LADLE_CALL(post_sends(s, 0));
fail:
    return st;
}

/* A call that failed midway leaves messages posted into buffers the caller
 * may free next: cancel what can be cancelled and wait for every request, so
 * that MPI holds none of them when the call returns. A send already matched
 * completes once its peer receives it (the peer got it, or is failing in
 * step); the call's status stays the first failure's. */
static void abandon(ladle_sched *s)
{
    for (int r = 0; r < s->nreqs; r++) {
        if (s->reqs[r] == MPI_REQUEST_NULL)
            continue;
        MPI_Cancel(&s->reqs[r]);
        MPI_Wait(&s->reqs[r], MPI_STATUS_IGNORE);
    }
    s->pending = 0;
    s->uhead = s->utail = 0;
    s->in_flight = 0;
}

ladle_status ladle_sched_start(ladle_sched *s, const void *x, void *y, void *ws)
{
    ladle_status st = LADLE_OK;
    LADLE_CHECK(!s->in_flight, LADLE_ERR_STATE, "the previous call has not finished");
    LADLE_CHECK(s->be != NULL, LADLE_ERR_STATE, "the schedule is not finalised");
    if (s->recv_pending) {
        /* the last call's copies out of the receive staging come first */
        LADLE_CALL(ladle__be_event_sync(s->be, s->recv_done));
        s->recv_pending = 0;
    }
    if (s->async && s->staging == NULL && s->nreqs > 0)
        /* MPI is about to read and write device memory that queued kernels
         * may still be using */
        LADLE_CALL(s->be->fn->synchronize(s->be));
    s->staged_recvs = 0;
    s->base[LADLE_BUF_X] = (char *)x;
    s->base[LADLE_BUF_Y] = (char *)y;
    s->base[LADLE_BUF_WS] = (char *)ws;
    s->qhead = s->qtail = 0;
    s->uhead = s->utail = 0;
    s->pending = s->completed = 0;
    for (int i = 0; i < s->nsteps; i++)
        s->steps[i].left = s->steps[i].nchunks;
    /* receives first, so no message arrives unexpected */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < s->nsteps; i++) {
            s->remaining[i] = s->steps[i].ndeps;
            if (s->steps[i].ndeps == 0 && (s->steps[i].kind == STEP_RECV) == (pass == 0))
                s->queue[s->qtail++] = i;
        }
    s->in_flight = 1;
    LADLE_CALL(drain(s));
    /* Every send ready now is posted before start returns, waiting for its
     * copies if need be (they only wait for queued kernels, never for MPI):
     * a caller may next wait on another schedule whose peer needs these
     * sends (a pipeline does), and only finish and progress of this one
     * would post them later. */
    while (s->uhead < s->utail)
        LADLE_CALL(post_sends(s, 1));
fail:
    if (st != LADLE_OK && s->in_flight)
        abandon(s);
    return st;
}

/* Take in the requests that completed: count of them in done_idx. */
static ladle_status take(ladle_sched *s, int count)
{
    ladle_status st = LADLE_OK;
    for (int k = 0; k < count; k++) {
        s->pending--;
        int c = s->done_idx[k];
        if (s->steps[s->chunks[c].step].kind == STEP_RECV)
            LADLE_CALL(landed(s, c));
        else if (--s->steps[s->chunks[c].step].left == 0)
            complete(s, s->chunks[c].step);
    }
    LADLE_CALL(drain(s));
fail:
    return st;
}

ladle_status ladle_sched_finish(ladle_sched *s)
{
    ladle_status st = LADLE_OK;
    LADLE_CHECK(s->in_flight, LADLE_ERR_STATE, "no call is in flight");
    double since = 0.0;
    while (s->pending > 0 || s->uhead < s->utail) {
        int count = 0;
        /* MPI may block only when no send waits for its data: a send held
         * back here could be what a peer's receive, and so ours, waits for */
        if (s->wait == LADLE_WAIT_SPIN && s->uhead == s->utail)
            LADLE_MPI(MPI_Waitsome(s->nreqs, s->reqs, &count, s->done_idx, s->statuses));
        else if (s->pending > 0)
            LADLE_MPI(MPI_Testsome(s->nreqs, s->reqs, &count, s->done_idx, s->statuses));
        LADLE_CHECK(count != MPI_UNDEFINED, LADLE_ERR_INTERNAL,
                    "no active request while %d are pending", s->pending);
        if (count == 0) {
            if (s->uhead < s->utail)
                LADLE_CALL(post_sends(s, 1));
            else
                ladle__poll_pause(s->wait, &since);
            continue;
        }
        since = 0.0;
        LADLE_CALL(take(s, count));
    }
    LADLE_CHECK(s->completed == s->nsteps, LADLE_ERR_INTERNAL,
                "schedule stalled after %d of %d steps", s->completed, s->nsteps);
    /* the next call's receives reuse the staging: the copies out of it
     * must be done first (waited for then on an async device, now
     * elsewhere) */
    if (s->staged_recvs > 0 && s->async) {
        LADLE_CALL(ladle__be_event_record(s->be, s->recv_done));
        s->recv_pending = 1;
    } else if (s->staged_recvs > 0) {
        LADLE_CALL(s->be->fn->synchronize(s->be));
    }
fail:
    if (st != LADLE_OK)
        abandon(s);
    s->in_flight = 0;
    return st;
}

ladle_status ladle_sched_progress(ladle_sched *s, int *done)
{
    ladle_status st = LADLE_OK;
    *done = 0;
    LADLE_CHECK(s->in_flight, LADLE_ERR_STATE, "no call is in flight");
    if (s->uhead < s->utail)
        LADLE_CALL(post_sends(s, 0));
    if (s->pending > 0) {
        int count = 0;
        LADLE_MPI(MPI_Testsome(s->nreqs, s->reqs, &count, s->done_idx, s->statuses));
        if (count != MPI_UNDEFINED)
            LADLE_CALL(take(s, count));
    }
    *done = s->pending == 0 && s->uhead == s->utail;
fail:
    if (st != LADLE_OK)
        abandon(s);
    return st;
}

ladle_status ladle_sched_run(ladle_sched *s, const void *x, void *y, void *ws)
{
    ladle_status st = ladle_sched_start(s, x, y, ws);
    return st != LADLE_OK ? st : ladle_sched_finish(s);
}
