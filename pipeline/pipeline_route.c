/* Stage boundaries of the pipeline executor: every stage replica's boxes,
 * shared once at creation, and the messages (pieces) each rank plans from
 * them (see pipeline.c). */
#include <string.h>

#include "pipeline/pipeline_impl.h"
#include "src/core/tags.h"

#define BOX_E 32 /* per rank: in offset, in shape, out offset, out shape */
#define BOX_H 19 /* per stage replica: in ndim, out ndim, dtype, global shapes */

static int64_t numel_of(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    return n;
}

/* ---- the boxes of every stage replica ------------------------------------ */

/* This rank's box of an op's input (x) or output: its layout's box, or the
 * whole local tensor for a sequential layer. */
void ladle__pipe_own_box(const ladle_op *op, int out, int64_t *off, int64_t *shape)
{
    const ladle_layout *l = out ? op->y_layout : op->x_layout;
    int nd = out ? op->y_ndim : op->x_ndim;
    if (l != NULL) {
        ladle_layout_box(l, LADLE_SELF, off, shape);
        return;
    }
    for (int d = 0; d < nd; d++) {
        off[d] = 0;
        shape[d] = out ? op->y_shape[d] : op->x_shape[d];
    }
}

static int64_t table_at(const ladle_pipe_schedule *s, ladle_partition *const *workers, int e)
{
    int64_t at = 0;
    for (int f = 0; f < e; f++)
        at += BOX_H + (int64_t)BOX_E * workers[s->placement[f]]->size;
    return at;
}

/* Every rank writes its own boxes, the maximum fills the table everywhere. */
ladle_status ladle__pipe_share_boxes(ladle_pipeline *pl, ladle_partition *const *workers, int nheld,
                                const ladle_pipe_stage held[], int64_t **out)
{
    ladle_status st = LADLE_OK;
    const ladle_pipe_schedule *s = pl->sched;
    int nrep = s->rep_first[s->stages];
    int64_t size = table_at(s, workers, nrep);
    int64_t *t = ladle__calloc((size_t)size + 1, sizeof(int64_t));
    LADLE_CHECK(t != NULL, LADLE_ERR_ALLOC, "out of memory");
    for (int64_t i = 0; i < size; i++)
        t[i] = -1;
    for (int h = 0; h < nheld; h++) {
        int j = held[h].stage, e = s->rep_first[j] + pl->held[h].replica;
        const ladle_op *a = held[h].layers[0], *b = held[h].layers[held[h].n - 1];
        int64_t *head = t + table_at(s, workers, e), *mine = head + BOX_H + BOX_E * pl->wrank;
        head[0] = a->x_ndim, head[1] = b->y_ndim, head[2] = a->dtype;
        for (int d = 0; d < LADLE_MAX_NDIM; d++) {
            head[3 + d] = d < a->x_ndim ? (a->x_layout ? ladle_layout_global_shape(a->x_layout)[d]
                                                       : a->x_shape[d])
                                        : 0;
            head[11 + d] = d < b->y_ndim ? (b->y_layout ? ladle_layout_global_shape(b->y_layout)[d]
                                                        : b->y_shape[d])
                                         : 0;
        }
        ladle__pipe_own_box(a, 0, mine, mine + 8);
        ladle__pipe_own_box(b, 1, mine + 16, mine + 24);
        memcpy(pl->held[h].in_off, mine, sizeof(int64_t) * LADLE_MAX_NDIM);
        memcpy(pl->held[h].in_shape, mine + 8, sizeof(int64_t) * LADLE_MAX_NDIM);
        memcpy(pl->held[h].out_off, mine + 16, sizeof(int64_t) * LADLE_MAX_NDIM);
        memcpy(pl->held[h].out_shape, mine + 24, sizeof(int64_t) * LADLE_MAX_NDIM);
        pl->held[h].in_nd = a->x_ndim;
        pl->held[h].out_nd = b->y_ndim;
    }
    int count = 0;
    LADLE_CALL(ladle__mpi_count(__func__, "the table of stage replicas' boxes", size, &count));
    LADLE_MPI(ladle__allreduce(MPI_IN_PLACE, t, count, MPI_INT64_T, MPI_MAX, pl->comm));
    *out = t;
    t = NULL;
fail:
    ladle__free(t);
    return st;
}

/* Stage boundaries: stage j's output and stage j+1's input have the same
 * global shape and dtype on every replica. */
ladle_status ladle__pipe_check_boundaries(const ladle_pipe_schedule *s,
                                     ladle_partition *const *workers, const int64_t *t)
{
    ladle_status st = LADLE_OK;
    char a[128], b[128];
    for (int j = 0; j + 1 < s->stages; j++)
        for (int q = 0; q < s->replicas[j]; q++)
            for (int r = 0; r < s->replicas[j + 1]; r++) {
                const int64_t *x = t + table_at(s, workers, s->rep_first[j] + q);
                const int64_t *y = t + table_at(s, workers, s->rep_first[j + 1] + r);
                int same = x[1] == y[0] && x[2] == y[2];
                for (int d = 0; same && d < x[1]; d++)
                    same = x[11 + d] == y[3 + d];
                LADLE_CHECK(same, LADLE_ERR_SHAPE,
                            "stage %d gives %s (%s), stage %d takes %s (%s)", j,
                            ladle__fmt_shape64(a, sizeof a, (int)x[1], x + 11),
                            ladle_dtype_name((ladle_dtype)x[2]), j + 1,
                            ladle__fmt_shape64(b, sizeof b, (int)y[0], y + 3),
                            ladle_dtype_name((ladle_dtype)y[2]));
            }
fail:
    return st;
}

/* The rank of p (the pipeline's communicator) of a root rank, or -1. */
static int rank_of_root(const ladle_partition *p, int root_rank)
{
    for (int r = 0; r < p->size; r++)
        if (p->ranks[r] == root_rank)
            return r;
    return -1;
}

/* The pieces between this rank's box (off, shape; local coordinates for the
 * pieces) and the boxes of the ranks of worker w in the table (the input
 * boxes, other_out 0, or the output boxes), and the schedule that sends
 * (send 1) or receives them with tag. */
static ladle_status make_route(ladle_pipeline *pl, ladle_partition *const *workers,
                               const int64_t *t, int e, int other_out, int nd,
                               const int64_t *off, const int64_t *shape, ladle_dtype dt,
                               int send, int tag, route *r)
{
    ladle_status st = LADLE_OK;
    const ladle_partition *pw = workers[pl->sched->placement[e]];
    const int64_t *base = t + table_at(pl->sched, workers, e) + BOX_H;
    r->p = ladle__calloc((size_t)pw->size + 1, sizeof(piece));
    LADLE_CHECK(r->p != NULL, LADLE_ERR_ALLOC, "out of memory");
    int64_t at = 0, mine = numel_of(nd, shape);
    for (int i = 0; i < pw->size; i++) {
        const int64_t *o = base + BOX_E * i + (other_out ? 16 : 0), *sh = o + 8;
        piece pc;
        int64_t count = 1;
        for (int d = 0; d < nd; d++) {
            int64_t lo = off[d] > o[d] ? off[d] : o[d];
            int64_t hi = off[d] + shape[d] < o[d] + sh[d] ? off[d] + shape[d] : o[d] + sh[d];
            pc.lo[d] = lo - off[d];
            pc.ext[d] = hi > lo ? hi - lo : 0;
            count *= pc.ext[d];
        }
        if (count == 0)
            continue;
        int fits = 0; /* post() sends a piece as one message */
        LADLE_CALL(ladle__mpi_count("ladle_pipeline_create", "a stage boundary's piece", count,
                                    &fits));
        pc.peer = rank_of_root(pl->p_all, pw->ranks[i]);
        pc.count = count;
        pc.at = at;
        at += count;
        r->p[r->n++] = pc;
    }
    r->whole = r->n == 1 && r->p[0].count == mine;
    /* X is the tensor sent, Y the tensor received into, WS the staging */
    LADLE_CALL(ladle_sched_create(dt, &r->sched));
    ladle_sched *s = r->sched;
    ladle_ref ws = ladle_sched_workspace(s, r->whole ? 0 : at);
    int64_t zero[LADLE_MAX_NDIM] = {0};
    for (int i = 0; i < r->n; i++) {
        const piece *pc = &r->p[i];
        ladle_ref stage = ladle_ref_at(ws, pc->at);
        if (r->whole) {
            if (send)
                ladle_sched_send(s, ladle_ref_make(LADLE_BUF_X, 0), pc->count, pc->peer, tag);
            else
                ladle_sched_recv(s, ladle_ref_make(LADLE_BUF_Y, 0), pc->count, pc->peer, tag);
            continue;
        }
        ladle_box box = ladle_box_in(nd, shape, pc->lo, pc->ext);
        ladle_box flat = ladle_box_in(nd, pc->ext, zero, pc->ext);
        if (send) {
            int c = ladle_sched_box(s, LADLE_BOX_COPY, ladle_ref_make(LADLE_BUF_X, 0), &box,
                                    stage, &flat);
            ladle_sched_dep(s, c, ladle_sched_send(s, stage, pc->count, pc->peer, tag));
        } else {
            int m = ladle_sched_recv(s, stage, pc->count, pc->peer, tag);
            ladle_sched_dep(s, m,
                            ladle_sched_box(s, LADLE_BOX_COPY, stage, &flat,
                                            ladle_ref_make(LADLE_BUF_Y, 0), &box));
        }
    }
    LADLE_CALL(ladle_sched_finalize(s, pl->comm, pl->be));
fail:
    return st;
}

/* The four routes of every microbatch this rank's stage h handles. */
ladle_status ladle__pipe_plan_routes(ladle_pipeline *pl, ladle_partition *const *workers,
                                const int64_t *t, held *h)
{
    ladle_status st = LADLE_OK;
    const ladle_pipe_schedule *s = pl->sched;
    int j = h->stage, m = s->m;
    h->fsend = ladle__calloc((size_t)m, sizeof(route));
    h->frecv = ladle__calloc((size_t)m, sizeof(route));
    h->bsend = ladle__calloc((size_t)m, sizeof(route));
    h->brecv = ladle__calloc((size_t)m, sizeof(route));
    LADLE_CHECK(h->fsend && h->frecv && h->bsend && h->brecv, LADLE_ERR_ALLOC, "out of memory");
    ladle_dtype din = h->layers[0]->dtype, dout = h->layers[h->n - 1]->dtype;
    for (int k = 0; k < m; k++) {
        if (ladle__pipe_owner(s, j, k) != pl->worker)
            continue;
        if (j + 1 < s->stages && ladle__pipe_owner(s, j + 1, k) != pl->worker) {
            int e = s->rep_first[j + 1] + k % s->replicas[j + 1];
            LADLE_CALL(make_route(pl, workers, t, e, 0, h->out_nd, h->out_off, h->out_shape, dout,
                                  1, ladle__tag_pipe(j + 1, m, k, 0), &h->fsend[k]));
            LADLE_CALL(make_route(pl, workers, t, e, 0, h->out_nd, h->out_off, h->out_shape, dout,
                                  0, ladle__tag_pipe(j, m, k, 1), &h->brecv[k]));
        }
        if (j > 0 && ladle__pipe_owner(s, j - 1, k) != pl->worker) {
            int e = s->rep_first[j - 1] + k % s->replicas[j - 1];
            LADLE_CALL(make_route(pl, workers, t, e, 1, h->in_nd, h->in_off, h->in_shape, din, 0,
                                  ladle__tag_pipe(j, m, k, 0), &h->frecv[k]));
            LADLE_CALL(make_route(pl, workers, t, e, 1, h->in_nd, h->in_off, h->in_shape, din, 1,
                                  ladle__tag_pipe(j - 1, m, k, 1), &h->bsend[k]));
        }
    }
fail:
    return st;
}
