/* The pipeline executor: one schedule's actions run in order on each worker,
 * with per-microbatch slots planned at creation (see ladle/pipeline.h).
 *
 * A stage boundary is a send between two workers: the forward sends the
 * stage's output, the backward its adjoint, the input gradient, back along
 * the recorded route. Sends are nonblocking and receives wait, as the
 * validator assumes. A slot's output must stay until its weight gradient
 * anyway, so it is sent from where it lies; input gradients get one buffer
 * per microbatch, so no send ever has to finish before the step ends. */
#include <string.h>

#include "pipeline_impl.h"

static int64_t numel_of(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    return n;
}

static void free_slot(slot *s, int n)
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
}

static void free_held(held *h, int m, int own)
{
    for (int i = 0; h->slots && i < h->nslots; i++)
        free_slot(&h->slots[i], h->n);
    for (int k = 0; h->dxbuf && k < m; k++)
        ladle_tensor_destroy(&h->dxbuf[k]);
    for (int i = 0; own && h->layers && i < h->n; i++)
        ladle_op_destroy(&h->layers[i]);
    ladle_optimizer_destroy(&h->opt);
    ladle_op_destroy(&h->reduce);
    ladle_partition_destroy(&h->p_rep);
    ladle_tensor_destroy(&h->gbuf);
    ladle__free(h->slots), ladle__free(h->slot_of), ladle__free(h->dxbuf);
    ladle__free(h->dxsent), ladle__free(h->layers);
}

static void free_pipeline(ladle_pipeline *pl, int own)
{
    if (pl == NULL)
        return;
    for (int i = 0; pl->held && i < pl->nheld; i++)
        free_held(&pl->held[i], pl->m, own);
    if (own)
        ladle_op_destroy(&pl->loss);
    ladle_tensor_destroy(&pl->lossval);
    ladle_tensor_destroy(&pl->dloss);
    ladle_pipe_schedule_destroy(&pl->sched);
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

/* The most microbatches of stage j open at once on worker w: a slot opens
 * when the stage's input arrives (or is made here) and closes after W. */
static int slots_needed(const ladle_pipe_schedule *s, int w, int j)
{
    int open = 0, most = 0;
    char *is_open = ladle__calloc((size_t)s->m, 1);
    if (is_open == NULL)
        return -1;
    for (int i = 0; i < s->len[w]; i++) {
        ladle_pipe_action a = s->acts[w][i];
        int opens = (a.stage == j && (a.kind == LADLE_PIPE_RECV_F || a.kind == LADLE_PIPE_F)) ||
                    (a.stage == j - 1 && a.kind == LADLE_PIPE_F &&
                     ladle__pipe_owner(s, j, a.mb) == w);
        if (opens && !is_open[a.mb]) {
            is_open[a.mb] = 1;
            most = ++open > most ? open : most;
        } else if (a.stage == j && a.kind == LADLE_PIPE_W && is_open[a.mb]) {
            is_open[a.mb] = 0;
            open--;
        }
    }
    ladle__free(is_open);
    return most;
}

/* This rank's checks: the held stages are those the schedule places here,
 * their chains fit, and the loss sits with the last stage. */
static ladle_status check_held(const ladle_pipe_schedule *s, int w, int nheld,
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
            }
    LADLE_CHECK(nheld == want, LADLE_ERR_ARG,
                "worker %d passed %d stages; the schedule places %d on it", w, nheld, want);
    for (int h = 0; h < nheld; h++) {
        const ladle_pipe_stage *g = &held[h];
        LADLE_CHECK(g->n >= 1 && g->layers != NULL, LADLE_ERR_ARG, "stage %d has no layers",
                    g->stage);
        for (int i = 0; i < g->n; i++) {
            const ladle_op *op = g->layers[i];
            LADLE_CHECK(op != NULL && op->layer && op->x_layout == NULL, LADLE_ERR_ARG,
                        "layer %d of stage %d is not a sequential layer", i, g->stage);
            LADLE_CHECK(op->dtype == g->layers[0]->dtype, LADLE_ERR_DTYPE,
                        "layer %d of stage %d is %s, layer 0 %s", i, g->stage,
                        ladle_dtype_name(op->dtype), ladle_dtype_name(g->layers[0]->dtype));
            if (i == 0)
                continue;
            const ladle_op *p = g->layers[i - 1];
            int same = p->y_ndim == op->x_ndim;
            for (int d = 0; same && d < p->y_ndim; d++)
                same = p->y_shape[d] == op->x_shape[d];
            LADLE_CHECK(same, LADLE_ERR_SHAPE, "stage %d: layer %d's output is not layer %d's input",
                        g->stage, i - 1, i);
        }
    }
    LADLE_CHECK(last_here == (loss != NULL), LADLE_ERR_ARG,
                last_here ? "worker %d holds the last stage but passed no loss"
                          : "worker %d passed a loss but does not hold the last stage",
                w);
fail:
    return st;
}

/* Stage boundaries: stage j's output and stage j+1's input have the same
 * size and dtype on every replica. */
static ladle_status check_boundaries(ladle_pipeline *pl, int nheld, const ladle_pipe_stage held[],
                                     ladle_status local)
{
    ladle_status st = LADLE_OK;
    int S = pl->sched->stages;
    int64_t *lo = ladle__calloc((size_t)(4 * S), sizeof(int64_t));
    int64_t *hi = ladle__calloc((size_t)(4 * S), sizeof(int64_t));
    LADLE_CHECK(lo && hi, LADLE_ERR_ALLOC, "out of memory");
    for (int i = 0; i < 4 * S; i++)
        lo[i] = INT64_MAX, hi[i] = -1;
    for (int h = 0; local == LADLE_OK && h < nheld; h++) {
        const ladle_op *a = held[h].layers[0], *b = held[h].layers[held[h].n - 1];
        int j = held[h].stage;
        int64_t v[4] = {numel_of(a->x_ndim, a->x_shape), numel_of(b->y_ndim, b->y_shape),
                        a->dtype, a->x_shape[0]};
        for (int i = 0; i < 4; i++)
            lo[4 * j + i] = hi[4 * j + i] = v[i];
    }
    LADLE_MPI(ladle__allreduce(MPI_IN_PLACE, lo, 4 * S, MPI_INT64_T, MPI_MIN, pl->comm));
    LADLE_MPI(ladle__allreduce(MPI_IN_PLACE, hi, 4 * S, MPI_INT64_T, MPI_MAX, pl->comm));
    for (int j = 0; local == LADLE_OK && j < S; j++) {
        for (int i = 0; i < 4; i++)
            LADLE_CHECK(lo[4 * j + i] == hi[4 * j + i], LADLE_ERR_SHAPE,
                        "the replicas of stage %d differ in their %s", j,
                        i == 0 ? "input size" : i == 1 ? "output size" : i == 2 ? "dtype" : "batch");
        if (j + 1 < S) {
            LADLE_CHECK(hi[4 * j + 1] == hi[4 * (j + 1)], LADLE_ERR_SHAPE,
                        "stage %d gives %lld elements per microbatch, stage %d takes %lld", j,
                        (long long)hi[4 * j + 1], j + 1, (long long)hi[4 * (j + 1)]);
            LADLE_CHECK(hi[4 * j + 2] == hi[4 * (j + 1) + 2], LADLE_ERR_DTYPE,
                        "stages %d and %d have different dtypes", j, j + 1);
        }
    }
fail:
    ladle__free(lo), ladle__free(hi);
    return st;
}

/* Plan one held stage: its slots, input-gradient buffers, optimizer and
 * (for a replicated stage) the gradient reduction. */
static ladle_status plan_held(ladle_pipeline *pl, held *h, const ladle_pipe_stage *g,
                              const ladle_optimizer_desc *opt)
{
    ladle_status st = LADLE_OK;
    const ladle_pipe_schedule *s = pl->sched;
    int j = g->stage, m = s->m, last = j == s->stages - 1;
    ladle_dtype dt = g->layers[0]->dtype;
    h->stage = j;
    h->n = g->n;
    h->layers = ladle__calloc((size_t)g->n, sizeof(ladle_op *));
    LADLE_CHECK(h->layers != NULL, LADLE_ERR_ALLOC, "out of memory");
    memcpy(h->layers, g->layers, sizeof(ladle_op *) * (size_t)g->n);
    for (int q = 0; q < s->replicas[j]; q++)
        if (s->placement[s->rep_first[j] + q] == pl->worker)
            h->replica = q;
    h->nslots = slots_needed(s, pl->worker, j);
    LADLE_CHECK(h->nslots >= 0, LADLE_ERR_ALLOC, "out of memory");
    h->slots = ladle__calloc((size_t)h->nslots + 1, sizeof(slot));
    h->slot_of = ladle__calloc((size_t)m, sizeof(int));
    h->dxbuf = ladle__calloc((size_t)m, sizeof(ladle_tensor *));
    h->dxsent = ladle__calloc((size_t)m, sizeof(MPI_Request));
    LADLE_CHECK(h->slots && h->slot_of && h->dxbuf && h->dxsent, LADLE_ERR_ALLOC,
                "out of memory");
    const ladle_op *first = g->layers[0];
    for (int k = 0; k < m; k++) {
        h->slot_of[k] = -1;
        h->dxsent[k] = MPI_REQUEST_NULL;
        if (j > 0 && ladle__pipe_owner(s, j - 1, k) != pl->worker && ladle__pipe_owner(s, j, k) == pl->worker)
            LADLE_CALL(ladle_tensor_create(dt, first->x_ndim, first->x_shape, &h->dxbuf[k]));
    }
    for (int i = 0; i < h->nslots; i++) {
        slot *sl = &h->slots[i];
        sl->mb = -1;
        sl->sent = MPI_REQUEST_NULL;
        sl->y = ladle__calloc((size_t)g->n, sizeof(ladle_tensor *));
        sl->dy = ladle__calloc((size_t)g->n, sizeof(ladle_tensor *));
        sl->ctx = ladle__calloc((size_t)g->n, sizeof(ladle_ctx *));
        LADLE_CHECK(sl->y && sl->dy && sl->ctx, LADLE_ERR_ALLOC, "out of memory");
        for (int l = 0; l < g->n; l++) {
            const ladle_op *op = g->layers[l];
            LADLE_CALL(ladle_tensor_create(dt, op->y_ndim, op->y_shape, &sl->y[l]));
            LADLE_CALL(ladle_tensor_create(dt, op->y_ndim, op->y_shape, &sl->dy[l]));
            LADLE_CALL(ladle_ctx_create(op, &sl->ctx[l]));
        }
        /* views of the caller's batch point at a placeholder until each step */
        void *placeholder = sl->y[0]->data;
        if (j == 0)
            LADLE_CALL(ladle_tensor_wrap(dt, LADLE_CPU, first->x_ndim, first->x_shape, NULL,
                                         placeholder, &sl->x));
        else
            LADLE_CALL(ladle_tensor_create(dt, first->x_ndim, first->x_shape, &sl->x));
        if (last) {
            ladle_dtype tdt;
            int tnd, red;
            int64_t tshape[LADLE_MAX_NDIM];
            LADLE_CALL(ladle__loss_target(pl->loss, &tdt, &tnd, tshape, &red));
            LADLE_CALL(ladle_tensor_wrap(tdt, LADLE_CPU, tnd, tshape, NULL, placeholder, &sl->tgt));
            LADLE_CALL(ladle_ctx_create(pl->loss, &sl->lctx));
            pl->mean = red == LADLE_REDUCE_MEAN;
            pl->tgt_mb_bytes = numel_of(tnd, tshape) * (int64_t)ladle_dtype_size(tdt);
        }
    }
    if (j == 0)
        pl->x_mb_bytes = first->x_numel * (int64_t)ladle_dtype_size(dt);
    LADLE_CALL(ladle_optimizer_create(opt, &h->opt));
    for (int l = 0; l < g->n; l++)
        LADLE_CALL(ladle_optimizer_add_op(h->opt, g->layers[l]));
fail:
    return st;
}

/* The replica groups of every replicated stage, made on every worker in
 * stage order (creating a sub-partition is collective over the pipeline);
 * the members plan the reduction of their stage's packed gradients. */
static ladle_status plan_reductions(ladle_pipeline *pl, const ladle_partition *p_pipe)
{
    ladle_status st = LADLE_OK;
    const ladle_pipe_schedule *s = pl->sched;
    for (int j = 0; j < s->stages; j++) {
        if (s->replicas[j] == 1)
            continue;
        ladle_partition *p_rep = NULL;
        int r = s->replicas[j], axis = 0;
        LADLE_CALL(ladle_partition_create_subset(p_pipe, 1, &r, &s->placement[s->rep_first[j]],
                                                 &p_rep));
        held *h = pl->by_stage[j];
        if (h == NULL) {
            ladle_partition_destroy(&p_rep);
            continue;
        }
        h->p_rep = p_rep;
        int64_t total = 0;
        for (int l = 0; l < h->n; l++)
            for (int i = 0; i < ladle_op_num_params(h->layers[l]); i++)
                total += ladle_tensor_numel(ladle_op_grad(h->layers[l], i));
        ladle_dtype dt = h->layers[0]->dtype;
        LADLE_CALL(ladle_all_sum_reduce_create(p_rep, 1, &axis, 1, &total, dt, 0, &h->reduce));
        LADLE_CALL(ladle_tensor_create(dt, 1, &total, &h->gbuf));
    }
fail:
    return st;
}

ladle_status ladle_pipeline_create(const ladle_partition *p_pipe, const ladle_pipe_schedule *sched,
                                   int nheld, const ladle_pipe_stage held_in[], ladle_op *loss,
                                   const ladle_optimizer_desc *opt, ladle_pipeline **out)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle_pipeline *pl = NULL;
    int agreed = 0;
    ladle_pipe_report rep;
    memset(&rep, 0, sizeof rep);
    LADLE_NOT_NULL(p_pipe);
    LADLE_NOT_NULL(sched);
    LADLE_NOT_NULL(opt);
    LADLE_NOT_NULL(out);
    LADLE_CHECK(nheld == 0 || held_in != NULL, LADLE_ERR_NULL, "held is NULL");
    pl = ladle__calloc(1, sizeof *pl);
    LADLE_CHECK(pl != NULL, LADLE_ERR_ALLOC, "out of memory");
    pl->comm = MPI_COMM_NULL;
    pl->worker = -1;
    if (!ladle_partition_active(p_pipe)) {
        *out = pl;
        return LADLE_OK;
    }
    pl->active = 1;
    pl->worker = ladle_partition_rank(p_pipe);
    pl->m = sched->m;
    LADLE_MPI(MPI_Comm_dup(ladle_partition_comm(p_pipe), &pl->comm));
    LADLE_MPI(MPI_Comm_set_errhandler(pl->comm, MPI_ERRORS_RETURN));
    /* the checks every worker can make alone, then agreement */
    local = ladle_partition_ndim(p_pipe) == 1 && ladle_partition_size(p_pipe) == sched->workers
                ? LADLE_OK
                : ladle__raise(LADLE_ERR_PARTITION, __func__,
                               "the schedule has %d workers, p_pipe %d ranks in %d dimensions",
                               sched->workers, ladle_partition_size(p_pipe),
                               ladle_partition_ndim(p_pipe));
    if (local == LADLE_OK)
        local = ladle_pipe_schedule_validate(sched, &rep);
    if (local == LADLE_OK && !rep.ok)
        local = ladle__raise(LADLE_ERR_ARG, __func__, "%s", rep.message);
    if (local == LADLE_OK && 2 * (int64_t)sched->stages * sched->m >= ladle__tag_ub(pl->comm))
        local = ladle__raise(LADLE_ERR_ARG, __func__,
                             "%d stages x %d microbatches need more message tags than MPI has",
                             sched->stages, sched->m);
    if (local == LADLE_OK)
        local = check_held(sched, pl->worker, nheld, held_in, loss);
    if (local == LADLE_OK)
        local = copy_schedule(sched, &pl->sched);
    LADLE_CALL(ladle__agree(pl->comm, local, 0, __func__));
    /* from here a failure on one rank meets the others' final agreement */
    agreed = 1;
    LADLE_CALL(check_boundaries(pl, nheld, held_in, LADLE_OK));
    pl->loss = loss;
    pl->nheld = nheld;
    pl->held = ladle__calloc((size_t)nheld + 1, sizeof(held));
    pl->by_stage = ladle__calloc((size_t)pl->sched->stages, sizeof(held *));
    LADLE_CHECK(pl->held && pl->by_stage, LADLE_ERR_ALLOC, "out of memory");
    int64_t one = 1;
    ladle_dtype dt = nheld ? held_in[0].layers[0]->dtype : LADLE_F64;
    LADLE_CALL(ladle_tensor_create(dt, 0, &one, &pl->lossval));
    LADLE_CALL(ladle_tensor_create(dt, 0, &one, &pl->dloss));
    LADLE_CALL(ladle_tensor_fill(pl->dloss, 1.0));
    for (int h = 0; h < nheld; h++) {
        pl->by_stage[held_in[h].stage] = &pl->held[h];
        LADLE_CALL(plan_held(pl, &pl->held[h], &held_in[h], opt));
    }
    LADLE_CALL(plan_reductions(pl, p_pipe));
    /* every worker scales its gradients as the loss's reduction says */
    LADLE_MPI(ladle__allreduce(MPI_IN_PLACE, &pl->mean, 1, MPI_INT, MPI_MAX, pl->comm));
    int n = 0;
    for (int i = 0; i < pl->sched->len[pl->worker]; i++)
        n += pl->sched->acts[pl->worker][i].kind <= LADLE_PIPE_W ||
             pl->sched->acts[pl->worker][i].kind >= LADLE_PIPE_REDUCE;
    pl->events = ladle__calloc((size_t)n + 1, sizeof(ladle_pipe_event));
    LADLE_CHECK(pl->events != NULL, LADLE_ERR_ALLOC, "out of memory");
    pl->cap_events = n;
    LADLE_CALL(ladle__agree(pl->comm, LADLE_OK, 0, __func__));
    ladle_pipe_report_free(&rep);
    *out = pl;
    return LADLE_OK;
fail:
    ladle_pipe_report_free(&rep);
    if (agreed)
        ladle__agree(pl->comm, st, 0, __func__);
    free_pipeline(pl, 0);
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
