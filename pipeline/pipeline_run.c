/* The pipeline executor's step: each worker runs its schedule's actions in
 * order (see pipeline.c for how the buffers are planned), and the timeline
 * of the last step. */
#include <math.h>

#include "pipeline/pipeline_impl.h"
#include "src/core/tags.h"

/* ---- one step ----------------------------------------------------------- */

/* Start a route's schedule on tensor t (what it sends or receives into) and
 * its staging: the sends go out, the receives are posted. */
static ladle_status post(const route *r, ladle_tensor *t, void *staging)
{
    return ladle_sched_start(r->sched, t->data, t->data, staging);
}

/* Wait for a route's messages (a receive's pieces land in t). */
static ladle_status land(const route *r)
{
    return ladle_sched_in_flight(r->sched) ? ladle_sched_finish(r->sched) : LADLE_OK;
}

/* Move on every message of the worker's routes that can move without
 * waiting. MPI moves messages only inside MPI calls on TCP and for the
 * rendezvous of larger ones, so a boundary's message posted before an
 * action would otherwise travel only at the next action's turn; called
 * after each layer, as the halo exchange's overlap and the gradient
 * buckets do. */
static ladle_status advance(const ladle_pipeline *pl)
{
    ladle_status st = LADLE_OK;
    for (int i = 0; i < pl->nheld; i++) {
        const held *h = &pl->held[i];
        for (int k = 0; k < pl->sched->m; k++) {
            const route *r[4] = {&h->fsend[k], &h->frecv[k], &h->bsend[k], &h->brecv[k]};
            for (int q = 0; q < 4; q++) {
                int done;
                if (ladle_sched_in_flight(r[q]->sched)) /* (NULL: no messages) */
                    LADLE_CALL(ladle_sched_progress(r[q]->sched, &done));
            }
        }
    }
fail:
    return st;
}

/* The slot of microbatch k on held stage h, taking a free one if needed. */
static slot *slot_for(held *h, int k)
{
    if (h->slot_of[k] >= 0)
        return &h->slots[h->slot_of[k]];
    for (int i = 0; i < h->nslots; i++)
        if (h->slots[i].mb < 0) {
            h->slots[i].mb = k;
            h->slot_of[k] = i;
            return &h->slots[i];
        }
    return NULL; /* the plan counted every slot: never reached */
}

static ladle_status release(held *h, int k)
{
    ladle_status st = LADLE_OK;
    slot *sl = &h->slots[h->slot_of[k]];
    /* the next stage received this output before it could send the gradient
     * that preceded our W, so this wait returns at once */
    LADLE_CALL(land(&h->fsend[k]));
    sl->mb = -1;
    h->slot_of[k] = -1;
fail:
    return st;
}

/* Point (or copy) this rank's block of microbatch k of a caller's tensor:
 * `rows` global rows per microbatch, the block at (off, shape) of global
 * shape glob. */
static ladle_status take_block(const ladle_pipeline *pl, ladle_tensor *dst, int view,
                               const ladle_tensor *src, int k, int64_t rows, int nd,
                               const int64_t *off, const int64_t *shape)
{
    size_t es = ladle_dtype_size(src->dtype);
    if (view)
        return ladle_tensor_set_data(dst, (char *)src->data + (size_t)(k * rows) *
                                                                  (size_t)(src->numel / src->shape[0]) * es);
    /* the box of the caller's tensor, packed on its device */
    const ladle_backend *be = NULL;
    ladle_status st = ladle__backend_get(src->device, "ladle_pipeline_step", &be);
    if (st != LADLE_OK)
        return st;
    int64_t lo[LADLE_MAX_NDIM];
    for (int d = 0; d < nd; d++)
        lo[d] = off[d] + (d == 0 ? k * rows : 0);
    ladle_box b = ladle_box_in(nd, src->shape, lo, shape);
    return be->fn->pack(be, src->dtype, nd, b.ext, (const char *)src->data + (size_t)b.off * es,
                        b.str, dst->data);
}

static ladle_status do_forward(ladle_pipeline *pl, held *h, int k, const ladle_tensor *x,
                               const ladle_tensor *target)
{
    ladle_status st = LADLE_OK;
    const ladle_pipe_schedule *s = pl->sched;
    int j = h->stage;
    slot *sl = slot_for(h, k);
    LADLE_CHECK(sl != NULL, LADLE_ERR_INTERNAL, "no slot for microbatch %d of stage %d", k, j);
    if (j == 0 && sl->x->numel > 0)
        LADLE_CALL(take_block(pl, sl->x, h->x_view, x, k, pl->x_mb_rows, h->in_nd, h->in_off,
                              h->in_shape));
    for (int l = 0; l < h->n; l++) {
        LADLE_CALL(ladle_layer_forward(h->layers[l], sl->ctx[l], l ? sl->y[l - 1] : sl->x,
                                       sl->y[l]));
        LADLE_CALL(advance(pl));
    }
    ladle_tensor *out = sl->y[h->n - 1];
    if (j == s->stages - 1) {
        if (sl->tgt != NULL && sl->tgt->numel > 0)
            LADLE_CALL(take_block(pl, sl->tgt, h->tgt_view, target, k, pl->tgt_mb_rows, h->tgt_nd,
                                  h->tgt_off, h->tgt_shape));
        /* a non-finite loss must not stop this worker half way through the
         * schedule (the others would wait for it forever): it goes into the
         * sum, which ladle_pipeline_step judges once every worker agrees */
        st = ladle_loss_forward(pl->loss, sl->lctx, out, sl->tgt, pl->lossval);
        if (st == LADLE_ERR_NUMERIC) {
            ladle_error_clear();
            st = LADLE_OK;
        }
        LADLE_CALL(st);
        double v = 0;
        if (pl->loss_counts) {
            LADLE_CALL(ladle_tensor_get(pl->lossval, 0, &v));
            pl->loss_sum += v;
        }
    } else if (ladle__pipe_owner(s, j + 1, k) == pl->worker) {
        /* the next stage is here (a one-rank worker): its input is made now */
        slot *nx = slot_for(pl->by_stage[j + 1], k);
        LADLE_CHECK(nx != NULL, LADLE_ERR_INTERNAL, "no slot for stage %d", j + 1);
        LADLE_CALL(ladle_tensor_copy(nx->x, out));
    }
fail:
    return st;
}

static ladle_status do_backward(ladle_pipeline *pl, held *h, int k)
{
    ladle_status st = LADLE_OK;
    const ladle_pipe_schedule *s = pl->sched;
    int j = h->stage;
    slot *sl = &h->slots[h->slot_of[k]];
    if (j == s->stages - 1)
        LADLE_CALL(ladle_loss_backward(pl->loss, sl->lctx, pl->dloss, sl->dy[h->n - 1]));
    /* the input gradient goes straight to where the previous stage wants it */
    ladle_tensor *dx = NULL;
    if (j > 0) {
        held *prev = pl->by_stage[j - 1];
        dx = ladle__pipe_owner(s, j - 1, k) == pl->worker
                 ? prev->slots[prev->slot_of[k]].dy[prev->n - 1]
                 : h->dxbuf[k];
    }
    for (int l = h->n - 1; l >= 0; l--) {
        LADLE_CALL(ladle_layer_backward(h->layers[l], sl->ctx[l], sl->dy[l],
                                        l ? sl->dy[l - 1] : dx));
        LADLE_CALL(advance(pl));
    }
fail:
    return st;
}

static ladle_status do_weights(ladle_pipeline *pl, held *h, int k)
{
    ladle_status st = LADLE_OK;
    slot *sl = &h->slots[h->slot_of[k]];
    for (int l = 0; l < h->n; l++) {
        LADLE_CALL(ladle_layer_backward_weight(h->layers[l], sl->ctx[l], sl->dy[l]));
        LADLE_CALL(advance(pl));
    }
    LADLE_CALL(release(h, k));
fail:
    return st;
}

/* Copy the stage's gradients into its buffer (pack) or back. */
static ladle_status pack(const ladle_pipeline *pl, held *h, int back)
{
    ladle_status st = LADLE_OK;
    size_t es = ladle_dtype_size(h->gbuf->dtype), at = 0;
    char *buf = h->gbuf->data;
    for (int l = 0; l < h->n; l++)
        for (int i = 0; i < ladle_op_num_params(h->layers[l]); i++) {
            ladle_tensor *g = ladle_op_grad(h->layers[l], i);
            if (g->numel == 0)
                continue;
            if (back)
                LADLE_CALL(pl->be->fn->copy(pl->be, g->dtype, g->numel, buf + at, g->data));
            else
                LADLE_CALL(pl->be->fn->copy(pl->be, g->dtype, g->numel, g->data, buf + at));
            at += (size_t)g->numel * es;
        }
fail:
    return st;
}

static ladle_status do_step(ladle_pipeline *pl, held *h)
{
    ladle_status st = LADLE_OK;
    double scale = pl->mean ? 1.0 / pl->m : 1.0;
    for (int l = 0; l < h->n; l++) {
        /* the copies inside a distributed layer (data-parallel blocks,
         * tiles) first; a sequential layer has none */
        LADLE_CALL(ladle_layer_sync_gradients(h->layers[l]));
        for (int i = 0; scale != 1.0 && i < ladle_op_num_params(h->layers[l]); i++) {
            ladle_tensor *g = ladle_op_grad(h->layers[l], i);
            LADLE_CALL(ladle__tensor_scale(g, scale));
        }
    }
    LADLE_CALL(ladle_optimizer_step(h->opt));
    for (int l = 0; l < h->n; l++)
        LADLE_CALL(ladle_op_zero_grad(h->layers[l]));
fail:
    return st;
}

/* Post a receive's messages once (ahead of time or at its turn). */
static ladle_status post_recv(ladle_pipeline *pl, ladle_pipe_action a)
{
    ladle_status st = LADLE_OK;
    held *h = pl->by_stage[a.stage];
    int k = a.mb;
    if (a.kind == LADLE_PIPE_RECV_F) {
        slot *sl = slot_for(h, k);
        LADLE_CHECK(sl != NULL, LADLE_ERR_INTERNAL, "no slot for microbatch %d", k);
        if (!sl->in_posted)
            LADLE_CALL(post(&h->frecv[k], sl->x, sl->xin));
        sl->in_posted = 1;
    } else {
        if (h->slot_of[k] < 0)
            return LADLE_OK; /* before its forward (a hand-made list): posted at its turn */
        slot *sl = &h->slots[h->slot_of[k]];
        if (!sl->dy_posted)
            LADLE_CALL(post(&h->brecv[k], sl->dy[h->n - 1], sl->dyin));
        sl->dy_posted = 1;
    }
fail:
    return st;
}

static ladle_status run_action(ladle_pipeline *pl, ladle_pipe_action a, const ladle_tensor *x,
                               const ladle_tensor *target)
{
    ladle_status st = LADLE_OK;
    held *h = pl->by_stage[a.stage];
    int k = a.mb;
    switch (a.kind) {
    case LADLE_PIPE_F:
        return do_forward(pl, h, k, x, target);
    case LADLE_PIPE_B:
        return do_backward(pl, h, k);
    case LADLE_PIPE_W:
        return do_weights(pl, h, k);
    case LADLE_PIPE_SEND_F: {
        slot *sl = &h->slots[h->slot_of[k]];
        LADLE_CALL(post(&h->fsend[k], sl->y[h->n - 1], sl->yout));
        break;
    }
    case LADLE_PIPE_SEND_B:
        LADLE_CALL(post(&h->bsend[k], h->dxbuf[k], h->dxpack[k]));
        break;
    case LADLE_PIPE_RECV_F: {
        LADLE_CALL(post_recv(pl, a));
        slot *sl = &h->slots[h->slot_of[k]];
        sl->in_posted = 0;
        LADLE_CALL(land(&h->frecv[k]));
        break;
    }
    case LADLE_PIPE_RECV_B: {
        LADLE_CALL(post_recv(pl, a));
        slot *sl = &h->slots[h->slot_of[k]];
        sl->dy_posted = 0;
        LADLE_CALL(land(&h->brecv[k]));
        break;
    }
    case LADLE_PIPE_REDUCE:
        LADLE_CALL(pack(pl, h, 0));
        LADLE_CALL(ladle_op_forward(h->reduce, h->gbuf, h->gbuf));
        LADLE_CALL(pack(pl, h, 1));
        break;
    case LADLE_PIPE_STEP:
        return do_step(pl, h);
    default:
        break;
    }
fail:
    return st;
}

static ladle_status check_step_inputs(const ladle_pipeline *pl, const ladle_tensor *x,
                                      const ladle_tensor *target)
{
    ladle_status st = LADLE_OK;
    const ladle_pipe_schedule *s = pl->sched;
    for (int h = 0; h < pl->nheld; h++) {
        const held *hd = &pl->held[h];
        if (hd->stage == 0) {
            const ladle_op *a = hd->layers[0];
            LADLE_CHECK(x != NULL, LADLE_ERR_NULL, "x is NULL on a worker of stage 0");
            ladle_dtype xdt = a->x_ids ? LADLE_I64 : a->dtype; /* ids for an embedding */
            LADLE_CHECK(x->dtype == xdt, LADLE_ERR_DTYPE, "x is %s, the stage takes %s",
                        ladle_dtype_name(x->dtype), ladle_dtype_name(xdt));
            LADLE_CHECK(x->device == pl->be->device, LADLE_ERR_DEVICE,
                        "x is on %s but the stage on %s", ladle_device_name(x->device),
                        ladle_device_name(pl->be->device));
            int ok = ladle_tensor_is_contiguous(x) && x->ndim == hd->in_nd &&
                     x->shape[0] == s->m * pl->x_mb_rows;
            for (int d = 1; ok && d < x->ndim; d++)
                ok = x->shape[d] == pl->x_glob[d];
            LADLE_CHECK(ok, LADLE_ERR_SHAPE,
                        "x must hold the whole batch: %d microbatches of %lld rows of the "
                        "stage's input",
                        s->m, (long long)pl->x_mb_rows);
        }
        if (hd->stage == s->stages - 1 && hd->slots[0].tgt != NULL) {
            LADLE_CHECK(target != NULL, LADLE_ERR_NULL,
                        "target is NULL on a worker of the last stage");
            LADLE_CHECK(target->dtype == hd->slots[0].tgt->dtype, LADLE_ERR_DTYPE,
                        "target is %s, the loss takes %s", ladle_dtype_name(target->dtype),
                        ladle_dtype_name(hd->slots[0].tgt->dtype));
            LADLE_CHECK(target->device == pl->be->device, LADLE_ERR_DEVICE,
                        "target is on %s but the loss on %s", ladle_device_name(target->device),
                        ladle_device_name(pl->be->device));
            int ok = ladle_tensor_is_contiguous(target) && target->ndim == hd->tgt_nd &&
                     target->shape[0] == s->m * pl->tgt_mb_rows;
            for (int d = 1; ok && d < target->ndim; d++)
                ok = target->shape[d] == pl->tgt_glob[d];
            LADLE_CHECK(ok, LADLE_ERR_SHAPE,
                        "target must hold the whole batch's targets: %d microbatches of %lld "
                        "rows",
                        s->m, (long long)pl->tgt_mb_rows);
        }
    }
fail:
    return st;
}

ladle_status ladle_pipeline_step(ladle_pipeline *pl, const ladle_tensor *x,
                                 const ladle_tensor *target, double *loss)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(pl);
    if (!pl->active)
        return LADLE_OK;
    /* a bad argument on one rank must not leave the others waiting */
    LADLE_CALL(ladle__agree(pl->comm, check_step_inputs(pl, x, target), 0, __func__));
    LADLE_MPI(MPI_Barrier(pl->comm));
    pl->t0 = MPI_Wtime();
    pl->loss_sum = 0;
    pl->nevents = 0;
    const ladle_pipe_schedule *s = pl->sched;
    const ladle_pipe_action *list = s->acts[pl->worker];
    int n = s->len[pl->worker];
    for (int i = 0; i < n; i++) {
        ladle_pipe_action a = list[i];
        /* the receives right after this action are posted first, so their
         * data arrives while it runs (the slot count allows for it) */
        for (int e = i + 1; e < n && (list[e].kind == LADLE_PIPE_RECV_F ||
                                      list[e].kind == LADLE_PIPE_RECV_B);
             e++)
            LADLE_CALL(post_recv(pl, list[e]));
        double t = MPI_Wtime() - pl->t0;
        LADLE_CALL(run_action(pl, a, x, target));
        if (a.kind <= LADLE_PIPE_W || a.kind >= LADLE_PIPE_REDUCE) {
            ladle_pipe_event *e = &pl->events[pl->nevents++];
            e->worker = pl->worker;
            e->action = a;
            e->start = t;
            e->end = MPI_Wtime() - pl->t0;
        }
    }
    for (int h = 0; h < pl->nheld; h++)
        for (int k = 0; k < s->m; k++)
            LADLE_CALL(land(&pl->held[h].bsend[k]));
    double sum = pl->loss_sum;
    LADLE_MPI(ladle__allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, pl->comm));
    /* one rank per replica of the last stage adds its microbatches */
    if (loss)
        *loss = pl->mean ? sum / s->m : sum;
    /* the sum is the same on every worker: so is the verdict */
    LADLE_CHECK(isfinite(sum), LADLE_ERR_NUMERIC,
                "the loss is %g: a microbatch's loss is not finite, and the step has been "
                "taken with its gradients",
                pl->mean ? sum / s->m : sum);
fail:
    return st;
}

/* ---- events and accessors ----------------------------------------------- */

ladle_status ladle_pipeline_events(const ladle_pipeline *pl, int *n,
                                   const ladle_pipe_event **events)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(pl);
    LADLE_NOT_NULL(n);
    LADLE_NOT_NULL(events);
    *n = pl->nevents;
    *events = pl->events;
fail:
    return st;
}

ladle_status ladle_pipeline_gather_events(ladle_pipeline *pl, int *n, ladle_pipe_event **events)
{
    ladle_status st = LADLE_OK;
    int *counts = NULL, *displs = NULL, size = 0;
    ladle_pipe_event *all = NULL;
    LADLE_NOT_NULL(pl);
    LADLE_NOT_NULL(n);
    LADLE_NOT_NULL(events);
    if (!pl->active) {
        *n = 0;
        *events = NULL;
        return LADLE_OK;
    }
    MPI_Comm_size(pl->comm, &size);
    /* one rank per worker: its ranks ran the same list */
    int mine = pl->wrank == 0 ? pl->nevents * (int)sizeof(ladle_pipe_event) : 0, total = 0;
    counts = ladle__calloc((size_t)size, sizeof(int));
    displs = ladle__calloc((size_t)size, sizeof(int));
    LADLE_CHECK(counts && displs, LADLE_ERR_ALLOC, "out of memory");
    LADLE_MPI(MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, pl->comm));
    for (int r = 0; r < size; r++) {
        displs[r] = total;
        total += counts[r];
    }
    if (pl->worker == 0) {
        all = ladle__calloc((size_t)total / sizeof(ladle_pipe_event) + 1, sizeof(ladle_pipe_event));
        LADLE_CHECK(all != NULL, LADLE_ERR_ALLOC, "out of memory");
    }
    LADLE_MPI(MPI_Gatherv(pl->events, mine, MPI_BYTE, all, counts, displs, MPI_BYTE, 0,
                          pl->comm));
    /* written only on success */
    *n = pl->worker == 0 ? total / (int)sizeof(ladle_pipe_event) : 0;
    *events = all;
    all = NULL;
fail:
    ladle__free(counts), ladle__free(displs), ladle__free(all);
    return st;
}

ladle_status ladle_pipe_events_destroy(ladle_pipe_event **events)
{
    if (events != NULL) {
        ladle__free(*events);
        *events = NULL;
    }
    return LADLE_OK;
}

ladle_optimizer *ladle_pipeline_optimizer(const ladle_pipeline *pl, int stage)
{
    if (pl == NULL || !pl->active || stage < 0 || stage >= pl->sched->stages ||
        pl->by_stage[stage] == NULL)
        return NULL;
    return pl->by_stage[stage]->opt;
}

ladle_op *const *ladle_pipeline_layers(const ladle_pipeline *pl, int stage, int *n)
{
    if (n)
        *n = 0;
    if (pl == NULL || !pl->active || stage < 0 || stage >= pl->sched->stages ||
        pl->by_stage[stage] == NULL)
        return NULL;
    if (n)
        *n = pl->by_stage[stage]->n;
    return pl->by_stage[stage]->layers;
}

int ladle_pipeline_worker(const ladle_pipeline *pl) { return pl ? pl->worker : -1; }
