/* The pipeline executor: one schedule's actions run in order on each worker,
 * with per-microbatch slots planned at creation (see ladle/pipeline.h).
 *
 * A worker is a partition; its ranks run the same list, so a stage may be a
 * chain of distributed layers. A stage boundary is a repartition between the
 * two stages' layouts on disjoint partitions: every rank of the sending
 * replica sends each rank of the receiving one the intersection of their
 * boxes, and the backward sends the adjoint, the input gradient, back along
 * the recorded route. The boxes of every stage replica are shared once at
 * creation, so each rank plans its own messages. Sends are nonblocking and
 * receives wait, as the validator assumes. A slot's output must stay until
 * its weight gradient anyway, so it is sent from where it lies (or from its
 * staging copy); input gradients get buffers per microbatch, so no send ever
 * has to finish before the step ends. */
#include <string.h>

#include "layers/distributed/dist.h"
#include "layers/sequential/loss_impl.h"
#include "pipeline/pipeline_impl.h"

static void free_route(route *r, int m)
{
    for (int k = 0; r && k < m; k++) {
        ladle__free(r[k].p);
        ladle_sched_destroy(&r[k].sched);
    }
    ladle__free(r);
}

/* The most staging any of m routes' schedules needs, in bytes. */
static ladle_status route_staging(const route *r, int m, ladle_dtype dt, size_t *bytes)
{
    int64_t most = 0;
    for (int k = 0; r && k < m; k++) {
        int64_t e = ladle_sched_workspace_elems(r[k].sched);
        most = e > most ? e : most;
    }
    if (!ladle__bytes_ok(most, ladle_dtype_size(dt), bytes))
        return ladle__raise(LADLE_ERR_SHAPE, "ladle_pipeline_create",
                            "the staging of a stage boundary (%lld elements) is too large",
                            (long long)most);
    return LADLE_OK;
}

static void free_slot(const ladle_backend *be, slot *s, int n)
{
    ladle_tensor_destroy(&s->x);
    ladle_tensor_destroy(&s->tgt);
    for (int i = 0; i < n; i++) {
        if (s->y)
            ladle_tensor_destroy(&s->y[i]);
        if (s->dy)
            ladle_tensor_destroy(&s->dy[i]);
        if (s->ctx)
            ladle_ctx_destroy(&s->ctx[i]);
    }
    ladle_ctx_destroy(&s->lctx);
    ladle__free(s->y), ladle__free(s->dy), ladle__free(s->ctx);
    be->fn->free(be, s->xin), be->fn->free(be, s->yout), be->fn->free(be, s->dyin);
}

static void free_held(const ladle_backend *be, held *h, int m, int own)
{
    for (int i = 0; h->slots && i < h->nslots; i++)
        free_slot(be, &h->slots[i], h->n);
    for (int k = 0; k < m; k++) {
        if (h->dxbuf)
            ladle_tensor_destroy(&h->dxbuf[k]);
        if (h->dxpack)
            be->fn->free(be, h->dxpack[k]);
    }
    for (int i = 0; own && h->layers && i < h->n; i++)
        ladle_op_destroy(&h->layers[i]);
    free_route(h->fsend, m), free_route(h->frecv, m);
    free_route(h->bsend, m), free_route(h->brecv, m);
    ladle_optimizer_destroy(&h->opt);
    ladle_op_destroy(&h->reduce);
    ladle_partition_destroy(&h->p_rep);
    ladle_tensor_destroy(&h->gbuf);
    ladle__free(h->slots), ladle__free(h->slot_of), ladle__free(h->dxbuf);
    ladle__free(h->dxpack), ladle__free(h->layers);
}

static void free_pipeline(ladle_pipeline *pl, int own)
{
    if (pl == NULL)
        return;
    /* buffers exist only once the device is known */
    const ladle_backend *be = pl->be ? pl->be : ladle__backend(LADLE_CPU);
    for (int i = 0; pl->held && i < pl->nheld; i++)
        free_held(be, &pl->held[i], pl->m, own);
    if (own)
        ladle_op_destroy(&pl->loss);
    ladle_tensor_destroy(&pl->lossval);
    ladle_tensor_destroy(&pl->dloss);
    ladle_pipe_schedule_destroy(&pl->sched);
    ladle_partition_destroy(&pl->p_all);
    if (pl->comm != MPI_COMM_NULL)
        MPI_Comm_free(&pl->comm);
    ladle__free(pl->held), ladle__free(pl->by_stage), ladle__free(pl->events);
    ladle__free(pl);
}

/* A copy of the schedule. */
static ladle_status copy_schedule(const ladle_pipe_schedule *s, ladle_pipe_schedule **out)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(ladle__pipe_alloc(s->workers, s->stages, s->replicas, s->placement, s->m, out));
    for (int w = 0; w < s->workers; w++)
        for (int i = 0; i < s->len[w]; i++)
            LADLE_CALL(ladle_pipe_schedule_append(*out, w, s->acts[w][i]));
fail:
    return st;
}

/* Whether action a opens (1) or closes (-1) a slot of stage j on worker w. */
static int slot_effect(const ladle_pipe_schedule *s, int w, int j, ladle_pipe_action a)
{
    if ((a.stage == j && (a.kind == LADLE_PIPE_RECV_F || a.kind == LADLE_PIPE_F)) ||
        (a.stage == j - 1 && a.kind == LADLE_PIPE_F && ladle__pipe_owner(s, j, a.mb) == w))
        return 1;
    return a.stage == j && a.kind == LADLE_PIPE_W ? -1 : 0;
}

/* The most microbatches of stage j open at once on worker w: a slot opens
 * when the stage's input is posted or made here and closes after W. The
 * executor posts the receives that directly follow an action before running
 * it (so their data can arrive meanwhile); the count follows that order. */
static int slots_needed(const ladle_pipe_schedule *s, int w, int j)
{
    int open = 0, most = 0, n = s->len[w];
    char *is_open = ladle__calloc((size_t)s->m, 1), *posted = ladle__calloc((size_t)n + 1, 1);
    if (is_open == NULL || posted == NULL) {
        ladle__free(is_open), ladle__free(posted);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        for (int e = i; e < n; e++) {
            /* action i itself, after the receives that follow it */
            if (e > i && s->acts[w][e].kind != LADLE_PIPE_RECV_F &&
                s->acts[w][e].kind != LADLE_PIPE_RECV_B)
                break;
            if (e == i || posted[e])
                continue;
            posted[e] = 1;
            ladle_pipe_action a = s->acts[w][e];
            if (slot_effect(s, w, j, a) > 0 && !is_open[a.mb]) {
                is_open[a.mb] = 1;
                most = ++open > most ? open : most;
            }
        }
        ladle_pipe_action a = s->acts[w][i];
        int eff = slot_effect(s, w, j, a);
        if (eff > 0 && !is_open[a.mb]) {
            is_open[a.mb] = 1;
            most = ++open > most ? open : most;
        } else if (eff < 0 && is_open[a.mb]) {
            is_open[a.mb] = 0;
            open--;
        }
    }
    ladle__free(is_open), ladle__free(posted);
    return most;
}

/* This rank's checks: the held stages are those the schedule places on its
 * worker, their chains fit, multi-rank stages start and end with
 * distributed layers, and the loss sits with the last stage. */
static ladle_status check_held(const ladle_pipe_schedule *s, int w, int wsize, int nheld,
                               const ladle_pipe_stage held[], const ladle_op *loss)
{
    ladle_status st = LADLE_OK;
    int want = 0, last_here = 0;
    for (int j = 0; j < s->stages; j++)
        for (int q = 0; q < s->replicas[j]; q++)
            if (s->placement[s->rep_first[j] + q] == w) {
                want++;
                last_here |= j == s->stages - 1;
                int found = 0;
                for (int h = 0; h < nheld; h++)
                    found += held[h].stage == j;
                LADLE_CHECK(found == 1, LADLE_ERR_ARG,
                            "worker %d holds stage %d in the schedule, but passed it %d times",
                            w, j, found);
                LADLE_CHECK(wsize == 1 || j == 0 || ladle__pipe_owner(s, j - 1, q) != w,
                            LADLE_ERR_UNSUPPORTED,
                            "worker %d (%d ranks) holds consecutive stages %d and %d: only "
                            "one-rank workers hand over locally",
                            w, wsize, j - 1, j);
            }
    LADLE_CHECK(nheld == want, LADLE_ERR_ARG,
                "worker %d passed %d stages; the schedule places %d on it", w, nheld, want);
    for (int h = 0; h < nheld; h++) {
        const ladle_pipe_stage *g = &held[h];
        LADLE_CHECK(g->n >= 1 && g->layers != NULL, LADLE_ERR_ARG, "stage %d has no layers",
                    g->stage);
        for (int i = 0; i < g->n; i++) {
            const ladle_op *op = g->layers[i];
            LADLE_CHECK(op != NULL && op->layer, LADLE_ERR_ARG,
                        "layer %d of stage %d is not a layer", i, g->stage);
            LADLE_CHECK(op->dtype == g->layers[0]->dtype, LADLE_ERR_DTYPE,
                        "layer %d of stage %d is %s, layer 0 %s", i, g->stage,
                        ladle_dtype_name(op->dtype), ladle_dtype_name(g->layers[0]->dtype));
            const ladle_op *first = held[0].layers[0];
            LADLE_CHECK(op->be->device == first->be->device, LADLE_ERR_DEVICE,
                        "layer %d (%s) of stage %d is on %s but layer 0 (%s) of stage %d is "
                        "on %s: a worker's stages live on one device",
                        i, op->vt->name, g->stage, ladle_device_name(op->be->device),
                        first->vt->name, held[0].stage, ladle_device_name(first->be->device));
            if (i == 0)
                continue;
            const ladle_op *p = g->layers[i - 1];
            int same = p->y_ndim == op->x_ndim;
            for (int d = 0; same && d < p->y_ndim; d++)
                same = p->y_shape[d] == op->x_shape[d];
            LADLE_CHECK(same, LADLE_ERR_SHAPE,
                        "stage %d: layer %d's output is not layer %d's input on this rank",
                        g->stage, i - 1, i);
        }
        LADLE_CHECK(g->stage == 0 || !g->layers[0]->x_ids, LADLE_ERR_ARG,
                    "stage %d starts with a layer that takes token ids (%s): only stage 0 "
                    "may, as the ids are the batch, not a stage's output",
                    g->stage, g->layers[0]->vt->name);
        LADLE_CHECK(wsize == 1 || (g->layers[0]->x_layout && g->layers[g->n - 1]->y_layout),
                    LADLE_ERR_ARG,
                    "stage %d runs on %d ranks: its first and last layers must be "
                    "distributed (their layouts place its input and output)",
                    g->stage, wsize);
    }
    LADLE_CHECK(last_here == (loss != NULL), LADLE_ERR_ARG,
                last_here ? "worker %d holds the last stage but passed no loss"
                          : "worker %d passed a loss but does not hold the last stage",
                w);
    LADLE_CHECK(loss == NULL || wsize == 1 || loss->x_layout != NULL, LADLE_ERR_ARG,
                "the last stage runs on %d ranks: its loss must be distributed", wsize);
    if (nheld > 0) {
        const ladle_backend *be = held[0].layers[0]->be;
        LADLE_CHECK(loss == NULL || loss->be->device == be->device, LADLE_ERR_DEVICE,
                    "the loss is on %s but the stages on %s",
                    ladle_device_name(loss ? loss->be->device : be->device),
                    ladle_device_name(be->device));
    }
fail:
    return st;
}

/* ---- slots, the target, reductions ------------------------------------- */

/* The last stage's target block: its dtype, this rank's box in the
 * microbatch's target, and the loss's reduction. */
static ladle_status plan_target(ladle_pipeline *pl, held *h, ladle_dtype *tdt)
{
    ladle_status st = LADLE_OK;
    int red, nd;
    int64_t shape[LADLE_MAX_NDIM], xoff[LADLE_MAX_NDIM], xsh[LADLE_MAX_NDIM];
    pl->loss_local = pl->loss;
    if (pl->loss->x_layout != NULL)
        LADLE_CALL(ladle__dist_loss_local(pl->loss, &pl->loss_local));
    if (pl->loss_local == NULL) { /* a rank of the worker outside the loss's partition */
        *tdt = LADLE_F64;
        h->tgt_nd = 0;
        return LADLE_OK;
    }
    LADLE_CALL(ladle__loss_target(pl->loss_local, tdt, &nd, shape, &red));
    pl->mean = red == LADLE_REDUCE_MEAN;
    ladle__pipe_own_box(pl->loss, 0, xoff, xsh);
    /* the target's dimensions are the input's, without the classes for labels */
    int classify = nd < pl->loss->x_ndim;
    h->tgt_nd = nd;
    int whole = 1;
    for (int d = 0, e = 0; d < pl->loss->x_ndim; d++) {
        if (classify && d == 1)
            continue;
        int64_t glob = pl->loss->x_layout ? ladle_layout_global_shape(pl->loss->x_layout)[d]
                                          : pl->loss->x_shape[d];
        h->tgt_off[e] = xoff[d];
        h->tgt_shape[e] = shape[e];
        pl->tgt_glob[e] = glob;
        whole &= xoff[d] == 0 && shape[e] == glob;
        e++;
    }
    pl->tgt_mb_rows = pl->tgt_glob[0];
    h->tgt_view = whole;
    /* one rank per replica of the last stage counts its losses */
    pl->loss_counts = pl->loss->x_layout == NULL ||
                      ladle_partition_rank(ladle_layout_partition(pl->loss->x_layout)) == 0;
fail:
    return st;
}

static ladle_status plan_slot(ladle_pipeline *pl, held *h, const ladle_pipe_stage *g, slot *sl,
                              int last)
{
    ladle_status st = LADLE_OK;
    ladle_dtype dt = g->layers[0]->dtype;
    ladle_device dev = pl->be->device;
    const ladle_op *first = g->layers[0];
    sl->mb = -1;
    sl->y = ladle__calloc((size_t)g->n, sizeof(ladle_tensor *));
    sl->dy = ladle__calloc((size_t)g->n, sizeof(ladle_tensor *));
    sl->ctx = ladle__calloc((size_t)g->n, sizeof(ladle_ctx *));
    LADLE_CHECK(sl->y && sl->dy && sl->ctx, LADLE_ERR_ALLOC, "out of memory");
    for (int l = 0; l < g->n; l++) {
        const ladle_op *op = g->layers[l];
        LADLE_CALL(ladle_tensor_create(dt, dev, op->y_ndim, op->y_shape, &sl->y[l]));
        LADLE_CALL(ladle_tensor_create(dt, dev, op->y_ndim, op->y_shape, &sl->dy[l]));
        LADLE_CALL(ladle_ctx_create(op, &sl->ctx[l]));
    }
    /* views of the caller's batch point at a placeholder until each step;
     * a stage 0 that starts with an embedding reads i64 ids */
    void *placeholder = sl->y[0]->data;
    ladle_dtype xdt = first->x_ids ? LADLE_I64 : dt;
    if (h->x_view)
        LADLE_CALL(ladle_tensor_wrap(xdt, dev, first->x_ndim, first->x_shape, NULL,
                                     placeholder, &sl->x));
    else
        LADLE_CALL(ladle_tensor_create(xdt, dev, first->x_ndim, first->x_shape, &sl->x));
    /* the boundaries' staging, on the layers' device: any microbatch's
     * route may use the slot */
    size_t in = 0, out = 0, din = 0;
    LADLE_CALL(route_staging(h->frecv, pl->sched->m, dt, &in));
    LADLE_CALL(route_staging(h->fsend, pl->sched->m, g->layers[g->n - 1]->dtype, &out));
    LADLE_CALL(route_staging(h->brecv, pl->sched->m, g->layers[g->n - 1]->dtype, &din));
    LADLE_CALL(pl->be->fn->alloc(pl->be, in, &sl->xin));
    LADLE_CALL(pl->be->fn->alloc(pl->be, out, &sl->yout));
    LADLE_CALL(pl->be->fn->alloc(pl->be, din, &sl->dyin));
    if (last && pl->loss_local != NULL) {
        ladle_dtype tdt;
        int tnd, red;
        int64_t tshape[LADLE_MAX_NDIM];
        LADLE_CALL(ladle__loss_target(pl->loss_local, &tdt, &tnd, tshape, &red));
        if (h->tgt_view)
            LADLE_CALL(ladle_tensor_wrap(tdt, dev, tnd, tshape, NULL, placeholder, &sl->tgt));
        else
            LADLE_CALL(ladle_tensor_create(tdt, dev, tnd, tshape, &sl->tgt));
    }
    if (last)
        LADLE_CALL(ladle_ctx_create(pl->loss, &sl->lctx));
fail:
    return st;
}

/* Plan one held stage: its slots, input-gradient buffers and optimizer. */
static ladle_status plan_held(ladle_pipeline *pl, held *h, const ladle_pipe_stage *g,
                              const ladle_optimizer_desc *opt)
{
    ladle_status st = LADLE_OK;
    const ladle_pipe_schedule *s = pl->sched;
    int j = g->stage, m = s->m, last = j == s->stages - 1;
    ladle_dtype dt = g->layers[0]->dtype;
    const ladle_op *first = g->layers[0];
    h->nslots = slots_needed(s, pl->worker, j);
    LADLE_CHECK(h->nslots >= 0, LADLE_ERR_ALLOC, "out of memory");
    h->slots = ladle__calloc((size_t)h->nslots + 1, sizeof(slot));
    h->slot_of = ladle__calloc((size_t)m, sizeof(int));
    h->dxbuf = ladle__calloc((size_t)m, sizeof(ladle_tensor *));
    h->dxpack = ladle__calloc((size_t)m, sizeof(void *));
    LADLE_CHECK(h->slots && h->slot_of && h->dxbuf && h->dxpack, LADLE_ERR_ALLOC,
                "out of memory");
    /* stage 0 reads the caller's batch in place when this rank's box is a
     * whole microbatch */
    int whole = 1;
    for (int d = 0; d < first->x_ndim; d++)
        whole &= h->in_off[d] == 0 &&
                 h->in_shape[d] == (first->x_layout ? ladle_layout_global_shape(first->x_layout)[d]
                                                    : first->x_shape[d]);
    h->x_view = j == 0 && whole;
    for (int d = 0; j == 0 && d < first->x_ndim; d++) {
        pl->x_glob[d] = first->x_layout ? ladle_layout_global_shape(first->x_layout)[d]
                                        : first->x_shape[d];
        pl->x_mb_rows = pl->x_glob[0];
    }
    for (int k = 0; k < m; k++) {
        h->slot_of[k] = -1;
        if (h->bsend[k].n > 0) {
            LADLE_CALL(ladle_tensor_create(dt, pl->be->device, first->x_ndim,
                                           first->x_shape, &h->dxbuf[k]));
            size_t bytes = 0;
            LADLE_CALL(route_staging(&h->bsend[k], 1, dt, &bytes));
            LADLE_CALL(pl->be->fn->alloc(pl->be, bytes, &h->dxpack[k]));
        } else if (j > 0 && ladle__pipe_owner(s, j - 1, k) != pl->worker &&
                   ladle__pipe_owner(s, j, k) == pl->worker) {
            /* nothing of this rank's box goes anywhere: the gradient still
             * needs somewhere to land */
            LADLE_CALL(ladle_tensor_create(dt, pl->be->device, first->x_ndim,
                                           first->x_shape, &h->dxbuf[k]));
        }
    }
    if (last) {
        ladle_dtype tdt;
        LADLE_CALL(plan_target(pl, h, &tdt));
    }
    for (int i = 0; i < h->nslots; i++)
        LADLE_CALL(plan_slot(pl, h, g, &h->slots[i], last));
    LADLE_CALL(ladle_optimizer_create(opt, &h->opt));
    for (int l = 0; l < g->n; l++)
        LADLE_CALL(ladle_optimizer_add_op(h->opt, g->layers[l]));
fail:
    return st;
}

/* The replicas of every replicated stage sum their gradients position by
 * position (rank i of every replica): one all-sum-reduce over the union of
 * the replicas with a group per position. Made by every pipeline rank in
 * stage order (unions are collective over their members). */
static ladle_status plan_reductions(ladle_pipeline *pl, ladle_partition *const *workers)
{
    ladle_status st = LADLE_OK;
    const ladle_pipe_schedule *s = pl->sched;
    int *gid = NULL;
    int64_t *counts = NULL;
    for (int j = 0; j < s->stages; j++) {
        if (s->replicas[j] == 1)
            continue;
        ladle_partition *u = NULL;
        int e0 = s->rep_first[j];
        LADLE_CALL(ladle_partition_create_union(workers[s->placement[e0]],
                                                workers[s->placement[e0 + 1]], &u));
        for (int q = 2; q < s->replicas[j]; q++) {
            ladle_partition *v = NULL;
            st = ladle_partition_create_union(u, workers[s->placement[e0 + q]], &v);
            ladle_partition_destroy(&u);
            LADLE_CALL(st);
            u = v;
        }
        held *h = pl->by_stage[j];
        if (h == NULL) {
            ladle_partition_destroy(&u);
            continue;
        }
        h->p_rep = u;
        int64_t total = 0;
        for (int l = 0; l < h->n; l++)
            for (int i = 0; i < ladle_op_num_params(h->layers[l]); i++)
                total += ladle_tensor_numel(ladle_op_grad(h->layers[l], i));
        gid = ladle__calloc((size_t)u->size, sizeof(int));
        counts = ladle__calloc((size_t)u->size, sizeof(int64_t));
        LADLE_CHECK(gid && counts, LADLE_ERR_ALLOC, "out of memory");
        /* the union lists replica 0's ranks, then replica 1's, ...: the
         * position is the rank within its replica */
        for (int r = 0, q = 0, at = 0; r < u->size; r++) {
            int size = workers[s->placement[e0 + q]]->size;
            gid[r] = r - at;
            if (r - at + 1 == size)
                at += size, q++;
        }
        LADLE_MPI(MPI_Allgather(&total, 1, MPI_INT64_T, counts, 1, MPI_INT64_T,
                                ladle_comm_mpi(ladle_partition_comm(u))));
        ladle_dtype dt = h->layers[0]->dtype;
        ladle_device dev = pl->be->device;
        LADLE_CALL(ladle__all_sum_reduce_groups(u, gid, counts, dt, dev, 0, &h->reduce));
        LADLE_CALL(ladle_tensor_create(dt, dev, 1, &total, &h->gbuf));
        ladle__free(gid), ladle__free(counts);
        gid = NULL, counts = NULL;
    }
fail:
    ladle__free(gid), ladle__free(counts);
    return st;
}

/* ---- creation ------------------------------------------------------------ */

/* The union of every worker's ranks: the pipeline's communicator. */
static ladle_status make_union(int W, ladle_partition *const *workers, ladle_partition **out)
{
    ladle_status st = LADLE_OK;
    ladle_partition *u = NULL;
    LADLE_CALL(ladle_partition_create_union(workers[0], workers[0], &u));
    for (int w = 1; w < W; w++) {
        ladle_partition *v = NULL;
        st = ladle_partition_create_union(u, workers[w], &v);
        ladle_partition_destroy(&u);
        LADLE_CALL(st);
        u = v;
    }
    *out = u;
fail:
    return st;
}

static ladle_status create(int W, ladle_partition *const *workers,
                           const ladle_pipe_schedule *sched, int nheld,
                           const ladle_pipe_stage held_in[], ladle_op *loss,
                           const ladle_optimizer_desc *opt, ladle_pipeline **out)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle_pipeline *pl = NULL;
    int agreed = 0;
    int64_t *table = NULL;
    ladle_pipe_report rep;
    memset(&rep, 0, sizeof rep);
    pl = ladle__calloc(1, sizeof *pl);
    LADLE_CHECK(pl != NULL, LADLE_ERR_ALLOC, "out of memory");
    pl->comm = MPI_COMM_NULL;
    pl->worker = pl->wrank = -1;
    LADLE_CALL(make_union(W, workers, &pl->p_all));
    if (!ladle_partition_active(pl->p_all)) {
        *out = pl;
        return LADLE_OK;
    }
    pl->active = 1;
    pl->m = sched->m;
    int memberships = 0;
    for (int w = 0; w < W; w++)
        if (ladle_partition_active(workers[w])) {
            memberships++;
            pl->worker = w;
            pl->wrank = ladle_partition_rank(workers[w]);
        }
    LADLE_MPI(MPI_Comm_dup(ladle_comm_mpi(ladle_partition_comm(pl->p_all)), &pl->comm));
    LADLE_MPI(MPI_Comm_set_errhandler(pl->comm, MPI_ERRORS_RETURN));
    /* the checks every rank can make alone, then agreement */
    if (memberships != 1)
        local = ladle__raise(LADLE_ERR_PARTITION, __func__,
                             "this rank belongs to %d workers (one is allowed)", memberships);
    if (local == LADLE_OK && W != sched->workers)
        local = ladle__raise(LADLE_ERR_PARTITION, __func__,
                             "the schedule has %d workers, %d were given", sched->workers, W);
    if (local == LADLE_OK)
        local = ladle_pipe_schedule_validate(sched, &rep);
    if (local == LADLE_OK && !rep.ok)
        local = ladle__raise(LADLE_ERR_ARG, __func__, "%s", rep.message);
    if (local == LADLE_OK && 2 * (int64_t)sched->stages * sched->m >= ladle__tag_ub(pl->comm))
        local = ladle__raise(LADLE_ERR_ARG, __func__,
                             "%d stages x %d microbatches need more message tags than MPI has",
                             sched->stages, sched->m);
    if (local == LADLE_OK)
        local = check_held(sched, pl->worker, workers[pl->worker]->size, nheld, held_in, loss);
    if (local == LADLE_OK)
        local = copy_schedule(sched, &pl->sched);
    LADLE_CALL(ladle__agree(pl->comm, local, 0, __func__));
    /* from here a failure on one rank meets the others' final agreement */
    agreed = 1;
    pl->loss = loss;
    pl->nheld = nheld;
    pl->held = ladle__calloc((size_t)nheld + 1, sizeof(held));
    pl->by_stage = ladle__calloc((size_t)pl->sched->stages, sizeof(held *));
    LADLE_CHECK(pl->held && pl->by_stage, LADLE_ERR_ALLOC, "out of memory");
    for (int h = 0; h < nheld; h++) {
        held *hd = &pl->held[h];
        int j = held_in[h].stage;
        pl->by_stage[j] = hd;
        hd->stage = j;
        hd->n = held_in[h].n;
        hd->layers = ladle__calloc((size_t)hd->n, sizeof(ladle_op *));
        LADLE_CHECK(hd->layers != NULL, LADLE_ERR_ALLOC, "out of memory");
        memcpy(hd->layers, held_in[h].layers, sizeof(ladle_op *) * (size_t)hd->n);
        for (int q = 0; q < pl->sched->replicas[j]; q++)
            if (pl->sched->placement[pl->sched->rep_first[j] + q] == pl->worker)
                hd->replica = q;
    }
    /* the held layers' device (a rank holding none moves no tensors) */
    pl->be = nheld ? held_in[0].layers[0]->be : ladle__backend(LADLE_CPU);
    LADLE_CALL(ladle__pipe_share_boxes(pl, workers, nheld, held_in, &table));
    LADLE_CALL(ladle__pipe_check_boundaries(pl->sched, workers, table));
    for (int h = 0; h < nheld; h++)
        LADLE_CALL(ladle__pipe_plan_routes(pl, workers, table, &pl->held[h]));
    int64_t one = 1;
    ladle_dtype dt = nheld ? held_in[0].layers[0]->dtype : LADLE_F64;
    LADLE_CALL(ladle_tensor_create(dt, pl->be->device, 0, &one, &pl->lossval));
    LADLE_CALL(ladle_tensor_create(dt, pl->be->device, 0, &one, &pl->dloss));
    LADLE_CALL(ladle_tensor_fill(pl->dloss, 1.0));
    for (int h = 0; h < nheld; h++)
        LADLE_CALL(plan_held(pl, &pl->held[h], &held_in[h], opt));
    LADLE_CALL(plan_reductions(pl, workers));
    /* every worker scales its gradients as the loss's reduction says */
    LADLE_MPI(ladle__allreduce(MPI_IN_PLACE, &pl->mean, 1, MPI_INT, MPI_MAX, pl->comm));
    int n = 0;
    for (int i = 0; i < pl->sched->len[pl->worker]; i++)
        n += pl->sched->acts[pl->worker][i].kind <= LADLE_PIPE_W ||
             pl->sched->acts[pl->worker][i].kind >= LADLE_PIPE_REDUCE;
    pl->events = ladle__calloc((size_t)n + 1, sizeof(ladle_pipe_event));
    LADLE_CHECK(pl->events != NULL, LADLE_ERR_ALLOC, "out of memory");
    pl->cap_events = n;
    /* the timeline's gather (ladle_pipeline_events) counts bytes in an int */
    int bytes = 0;
    LADLE_CALL(ladle__mpi_count(__func__, "the timeline's bytes of every worker",
                                (int64_t)n * (int64_t)sizeof(ladle_pipe_event) * W, &bytes));
    LADLE_CALL(ladle__agree(pl->comm, LADLE_OK, 0, __func__));
    ladle_pipe_report_destroy(&rep);
    ladle__free(table);
    *out = pl;
    return LADLE_OK;
fail:
    ladle_pipe_report_destroy(&rep);
    ladle__free(table);
    if (agreed)
        ladle__agree(pl->comm, st, 0, __func__);
    free_pipeline(pl, 0);
    return st;
}

void ladle_pipeline_desc_init(ladle_pipeline_desc *d, const ladle_pipe_schedule *sched,
                              const ladle_optimizer_desc *opt)
{
    if (!LADLE_DESC_START(d))
        return;
    d->sched = sched;
    d->opt = opt;
}

ladle_status ladle_pipeline_create_workers(const ladle_pipeline_desc *d, int nworkers,
                                           ladle_partition *const workers[], int nheld,
                                           const ladle_pipe_stage held[], ladle_op *loss,
                                           ladle_pipeline **out)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d); /* before reading a field */
    LADLE_NOT_NULL(workers);
    LADLE_NOT_NULL(d->sched);
    LADLE_NOT_NULL(d->opt);
    LADLE_NOT_NULL(out);
    LADLE_CHECK(nheld == 0 || held != NULL, LADLE_ERR_NULL, "held is NULL");
    LADLE_CHECK(nworkers >= 1, LADLE_ERR_ARG, "%d workers", nworkers);
    for (int w = 0; w < nworkers; w++)
        LADLE_CHECK(workers[w] != NULL, LADLE_ERR_NULL, "worker %d's partition is NULL", w);
    LADLE_CALL(create(nworkers, workers, d->sched, nheld, held, loss, d->opt, out));
fail:
    return st;
}

ladle_status ladle_pipeline_create(const ladle_partition *p_pipe, const ladle_pipe_schedule *sched,
                                   int nheld, const ladle_pipe_stage held[], ladle_op *loss,
                                   const ladle_optimizer_desc *opt, ladle_pipeline **out)
{
    ladle_status st = LADLE_OK;
    ladle_partition **workers = NULL;
    int W = 0;
    LADLE_NOT_NULL(p_pipe);
    LADLE_NOT_NULL(sched);
    LADLE_NOT_NULL(opt);
    LADLE_NOT_NULL(out);
    LADLE_CHECK(nheld == 0 || held != NULL, LADLE_ERR_NULL, "held is NULL");
    if (!ladle_partition_active(p_pipe)) {
        ladle_pipeline *pl = ladle__calloc(1, sizeof *pl);
        LADLE_CHECK(pl != NULL, LADLE_ERR_ALLOC, "out of memory");
        pl->comm = MPI_COMM_NULL;
        pl->worker = pl->wrank = -1;
        *out = pl;
        return LADLE_OK;
    }
    /* one worker per rank of p_pipe; a wrong count fails in create() on
     * every rank alike */
    W = ladle_partition_size(p_pipe);
    LADLE_CALL(
        ladle__agree(ladle_comm_mpi(ladle_partition_comm(p_pipe)),
                     ladle_partition_ndim(p_pipe) == 1 && W == sched->workers
                         ? LADLE_OK
                         : ladle__raise(LADLE_ERR_PARTITION, __func__,
                                        "the schedule has %d workers, p_pipe %d ranks "
                                        "in %d dimensions",
                                        sched->workers, W, ladle_partition_ndim(p_pipe)),
                     0, __func__));
    workers = ladle__calloc((size_t)W, sizeof(ladle_partition *));
    LADLE_CHECK(workers != NULL, LADLE_ERR_ALLOC, "out of memory");
    for (int w = 0; w < W; w++) {
        int one = 1;
        LADLE_CALL(ladle_partition_create_subset(p_pipe, 1, &one, &w, &workers[w]));
    }
    LADLE_CALL(create(W, workers, sched, nheld, held, loss, opt, out));
fail:
    for (int w = 0; workers && w < W; w++)
        ladle_partition_destroy(&workers[w]);
    ladle__free(workers);
    return st;
}

ladle_status ladle_pipeline_destroy(ladle_pipeline **pl)
{
    if (pl == NULL || *pl == NULL)
        return LADLE_OK;
    free_pipeline(*pl, 1);
    *pl = NULL;
    return LADLE_OK;
}
