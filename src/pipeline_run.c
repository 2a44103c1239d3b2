/* The pipeline executor's step: each worker runs its schedule's actions in
 * order (see pipeline.c for how the buffers are planned), and the timeline
 * of the last step. */
#include <string.h>

#include "pipeline_impl.h"

/* ---- one step ----------------------------------------------------------- */

static int tag_of(const ladle_pipeline *pl, int stage, int mb, int backward)
{
    return 2 * (stage * pl->m + mb) + backward;
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
    LADLE_MPI(ladle__wait(&sl->sent));
    sl->mb = -1;
    h->slot_of[k] = -1;
fail:
    return st;
}

static ladle_status do_forward(ladle_pipeline *pl, held *h, int k, const ladle_tensor *x,
                               const ladle_tensor *target)
{
    ladle_status st = LADLE_OK;
    const ladle_pipe_schedule *s = pl->sched;
    int j = h->stage;
    slot *sl = slot_for(h, k);
    LADLE_CHECK(sl != NULL, LADLE_ERR_INTERNAL, "no slot for microbatch %d of stage %d", k, j);
    if (j == 0)
        LADLE_CALL(ladle_tensor_set_data(sl->x, (char *)x->data + k * pl->x_mb_bytes));
    for (int l = 0; l < h->n; l++)
        LADLE_CALL(ladle_layer_forward(h->layers[l], sl->ctx[l], l ? sl->y[l - 1] : sl->x,
                                       sl->y[l]));
    ladle_tensor *out = sl->y[h->n - 1];
    if (j == s->stages - 1) {
        LADLE_CALL(ladle_tensor_set_data(sl->tgt, (char *)target->data + k * pl->tgt_mb_bytes));
        LADLE_CALL(ladle_loss_forward(pl->loss, sl->lctx, out, sl->tgt, pl->lossval));
        const void *v = pl->lossval->data;
        pl->loss_sum += pl->lossval->dtype == LADLE_F32 ? *(const float *)v : *(const double *)v;
    } else if (ladle__pipe_owner(s, j + 1, k) == pl->worker) {
        /* the next stage is here: its input is made now */
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
    if (j > 0)
        dx = ladle__pipe_owner(s, j - 1, k) == pl->worker
                 ? pl->by_stage[j - 1]->slots[pl->by_stage[j - 1]->slot_of[k]].dy[pl->by_stage[j - 1]->n - 1]
                 : h->dxbuf[k];
    for (int l = h->n - 1; l >= 0; l--)
        LADLE_CALL(ladle_layer_backward(h->layers[l], sl->ctx[l], sl->dy[l],
                                        l ? sl->dy[l - 1] : dx));
fail:
    return st;
}

static ladle_status do_weights(ladle_pipeline *pl, held *h, int k)
{
    ladle_status st = LADLE_OK;
    slot *sl = &h->slots[h->slot_of[k]];
    for (int l = 0; l < h->n; l++)
        LADLE_CALL(ladle_layer_backward_weight(h->layers[l], sl->ctx[l], sl->dy[l]));
    LADLE_CALL(release(h, k));
fail:
    return st;
}

/* Copy the stage's gradients into its buffer (pack) or back. */
static void pack(held *h, int back)
{
    size_t es = ladle_dtype_size(h->gbuf->dtype), at = 0;
    char *buf = h->gbuf->data;
    for (int l = 0; l < h->n; l++)
        for (int i = 0; i < ladle_op_num_params(h->layers[l]); i++) {
            ladle_tensor *g = ladle_op_grad(h->layers[l], i);
            size_t bytes = (size_t)g->numel * es;
            if (back)
                memcpy(g->data, buf + at, bytes);
            else
                memcpy(buf + at, g->data, bytes);
            at += bytes;
        }
}

static ladle_status do_step(ladle_pipeline *pl, held *h)
{
    ladle_status st = LADLE_OK;
    double scale = pl->mean ? 1.0 / pl->m : 1.0;
    for (int l = 0; l < h->n; l++)
        for (int i = 0; scale != 1.0 && i < ladle_op_num_params(h->layers[l]); i++) {
            ladle_tensor *g = ladle_op_grad(h->layers[l], i);
            for (int64_t e = 0; e < g->numel; e++)
                if (g->dtype == LADLE_F32)
                    ((float *)g->data)[e] *= (float)scale;
                else
                    ((double *)g->data)[e] *= scale;
        }
    LADLE_CALL(ladle_optimizer_step(h->opt));
    for (int l = 0; l < h->n; l++)
        LADLE_CALL(ladle_op_zero_grad(h->layers[l]));
fail:
    return st;
}

static ladle_status run_action(ladle_pipeline *pl, ladle_pipe_action a, const ladle_tensor *x,
                               const ladle_tensor *target)
{
    ladle_status st = LADLE_OK;
    const ladle_pipe_schedule *s = pl->sched;
    held *h = pl->by_stage[a.stage];
    int j = a.stage, k = a.mb;
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Datatype type = h->layers[0]->dtype == LADLE_F32 ? MPI_FLOAT : MPI_DOUBLE;
    switch (a.kind) {
    case LADLE_PIPE_F:
        return do_forward(pl, h, k, x, target);
    case LADLE_PIPE_B:
        return do_backward(pl, h, k);
    case LADLE_PIPE_W:
        return do_weights(pl, h, k);
    case LADLE_PIPE_SEND_F: {
        ladle_tensor *y = h->slots[h->slot_of[k]].y[h->n - 1];
        LADLE_MPI(MPI_Isend(y->data, (int)y->numel, type, ladle__pipe_owner(s, j + 1, k),
                            tag_of(pl, j + 1, k, 0), pl->comm, &h->slots[h->slot_of[k]].sent));
        break;
    }
    case LADLE_PIPE_SEND_B:
        LADLE_MPI(MPI_Isend(h->dxbuf[k]->data, (int)h->dxbuf[k]->numel, type,
                            ladle__pipe_owner(s, j - 1, k), tag_of(pl, j - 1, k, 1), pl->comm,
                            &h->dxsent[k]));
        break;
    case LADLE_PIPE_RECV_F: {
        slot *sl = slot_for(h, k);
        LADLE_CHECK(sl != NULL, LADLE_ERR_INTERNAL, "no slot for microbatch %d", k);
        LADLE_MPI(MPI_Irecv(sl->x->data, (int)sl->x->numel, type, ladle__pipe_owner(s, j - 1, k),
                            tag_of(pl, j, k, 0), pl->comm, &req));
        LADLE_MPI(ladle__wait(&req));
        break;
    }
    case LADLE_PIPE_RECV_B: {
        ladle_tensor *dy = h->slots[h->slot_of[k]].dy[h->n - 1];
        LADLE_MPI(MPI_Irecv(dy->data, (int)dy->numel, type, ladle__pipe_owner(s, j + 1, k),
                            tag_of(pl, j, k, 1), pl->comm, &req));
        LADLE_MPI(ladle__wait(&req));
        break;
    }
    case LADLE_PIPE_REDUCE:
        pack(h, 0);
        LADLE_CALL(ladle_op_forward(h->reduce, h->gbuf, h->gbuf));
        pack(h, 1);
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
            LADLE_CHECK(x->dtype == a->dtype, LADLE_ERR_DTYPE, "x is %s, the stage %s",
                        ladle_dtype_name(x->dtype), ladle_dtype_name(a->dtype));
            LADLE_CHECK(ladle_tensor_is_contiguous(x) &&
                            x->numel * (int64_t)ladle_dtype_size(x->dtype) ==
                                s->m * pl->x_mb_bytes,
                        LADLE_ERR_SHAPE,
                        "x holds %lld elements; %d microbatches of %lld are needed",
                        (long long)x->numel, s->m, (long long)a->x_numel);
        }
        if (hd->stage == s->stages - 1) {
            LADLE_CHECK(target != NULL, LADLE_ERR_NULL, "target is NULL on a worker of the last stage");
            LADLE_CHECK(target->dtype == hd->slots[0].tgt->dtype, LADLE_ERR_DTYPE,
                        "target is %s, the loss takes %s", ladle_dtype_name(target->dtype),
                        ladle_dtype_name(hd->slots[0].tgt->dtype));
            LADLE_CHECK(ladle_tensor_is_contiguous(target) &&
                            target->numel * (int64_t)ladle_dtype_size(target->dtype) ==
                                s->m * pl->tgt_mb_bytes,
                        LADLE_ERR_SHAPE, "target holds %lld elements, not %d microbatches' worth",
                        (long long)target->numel, s->m);
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
    /* a bad argument on one worker must not leave the others waiting */
    LADLE_CALL(ladle__agree(pl->comm, check_step_inputs(pl, x, target), 0, __func__));
    LADLE_MPI(MPI_Barrier(pl->comm));
    pl->t0 = MPI_Wtime();
    pl->loss_sum = 0;
    pl->nevents = 0;
    const ladle_pipe_schedule *s = pl->sched;
    for (int i = 0; i < s->len[pl->worker]; i++) {
        ladle_pipe_action a = s->acts[pl->worker][i];
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
            LADLE_MPI(ladle__wait(&pl->held[h].dxsent[k]));
    double sum = pl->loss_sum;
    LADLE_MPI(ladle__allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, pl->comm));
    /* every replica of the last stage adds its own microbatches once */
    if (loss)
        *loss = pl->mean ? sum / s->m : sum;
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
    *n = 0;
    *events = NULL;
    if (!pl->active)
        return LADLE_OK;
    MPI_Comm_size(pl->comm, &size);
    int mine = pl->nevents * (int)sizeof(ladle_pipe_event), total = 0;
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
    if (pl->worker == 0) {
        *n = total / (int)sizeof(ladle_pipe_event);
        *events = all;
        all = NULL;
    }
fail:
    ladle__free(counts), ladle__free(displs), ladle__free(all);
    return st;
}

void ladle_pipe_events_free(ladle_pipe_event *events) { ladle__free(events); }

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
