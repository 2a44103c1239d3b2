/*
 * ladle-train's pipeline mode: LeNet-5 cut into stages that run on the
 * ranks as a pipeline (GPipe, 1F1B, ZB-H1, interleaved, or the replicated
 * hybrid the planner chooses from the layers' profiled costs). Tool code,
 * included by ladle-train.c after train.h.
 */
#ifndef LADLE_TOOLS_TRAIN_PIPE_H
#define LADLE_TOOLS_TRAIN_PIPE_H

#include "train.h"

#define PIPE_MAX_LAYERS 16

/* LeNet-5's description for the data, in batches of `batch`. */
static void pipe_desc(const opts *o, const ladle_dataset_info *info, int64_t batch,
                      ladle_lenet_desc *d)
{
    ladle_lenet_desc_init(d);
    d->batch = batch;
    d->image = info->rows;
    d->classes = info->classes;
    d->batchnorm = o->bn;
    d->dtype = o->dtype;
    d->device = o->device;
    d->seed = o->seed;
}

/* What the planner is given: each layer's forward, input-gradient and
 * weight-gradient seconds on one microbatch, and what surrounds them (a
 * boundary's receive after each layer, its parameters' all-reduce between
 * two replicas, a ring step's latency). */
typedef struct pipe_inputs {
    double f[PIPE_MAX_LAYERS], b[PIPE_MAX_LAYERS], w[PIPE_MAX_LAYERS];
    double cut[PIPE_MAX_LAYERS], red[PIPE_MAX_LAYERS], lat;
} pipe_inputs;

/* The planner's inputs (rank 0 times the layers, ranks 0 and 1 the
 * messages; every rank gets them): 0, or 1 with the reason printed. */
static int pipe_profile(const opts *o, const ladle_dataset_info *info, int64_t mb,
                        pipe_inputs *in, int *nl)
{
    double *f = in->f, *b = in->b, *w = in->w;
    ladle_lenet_desc d;
    pipe_desc(o, info, mb, &d);
    ladle_op *layers[PIPE_MAX_LAYERS], *loss = NULL;
    *nl = 0;
    ladle_status st = ladle_lenet_layers(&d, PIPE_MAX_LAYERS, layers, nl, &loss);
    if (st == LADLE_OK && me == 0)
        st = ladle_pipe_profile(*nl, layers, 9, f, b, w);
    /* a device this build or machine lacks refuses the run (2) */
    int failed = tool_failed(tool, st, "profiling LeNet-5's layers");
    int rc = failed ? st == LADLE_ERR_DEVICE ? 2 : 1 : 0;
    if (!failed) { /* the messages, timed by every rank together */
        st = ladle_pipe_profile_comm(ladle_comm_of(MPI_COMM_WORLD), *nl, layers, 9, in->cut,
                                     in->red, &in->lat);
        rc = tool_failed(tool, st, "timing the pipeline's messages");
    }
    for (int i = 0; i < *nl; i++)
        ladle_op_destroy(&layers[i]);
    ladle_op_destroy(&loss);
    if (rc != 0)
        return rc;
    MPI_Bcast(f, *nl, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(b, *nl, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(w, *nl, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return 0;
}

/* Send t (on `owner`, on the run's device) into u (on rank 0, on the CPU):
 * read whole through t's device into host memory, moved, written into u. */
static void pipe_move(ladle_tensor *u, const ladle_tensor *t, int owner)
{
    ladle_status st = LADLE_OK;
    const ladle_tensor *sized = me == owner ? t : u;
    int bytes = sized ? (int)(ladle_tensor_numel(sized) *
                              (int64_t)ladle_dtype_size(ladle_tensor_dtype(sized)))
                      : 0;
    if (me != owner && me != 0)
        return;
    void *host = malloc((size_t)bytes + 1);
    if (host == NULL)
        fail("gathering the parameters");
    if (me == owner)
        st = ladle_tensor_read(t, host);
    if (st == LADLE_OK && me == owner && owner != 0)
        MPI_Send(host, bytes, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
    else if (st == LADLE_OK && me == 0 && owner != 0)
        MPI_Recv(host, bytes, MPI_BYTE, owner, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (st == LADLE_OK && me == 0)
        st = ladle_tensor_write(u, host);
    free(host);
    if (st != LADLE_OK)
        fail("gathering the parameters");
}

/* Copy every parameter (and batch norm's running statistics) of the
 * pipeline's stages into the whole network `full` on rank 0, from replica 0
 * of each stage (replicas hold the same parameters; their running
 * statistics saw different microbatches, and replica 0's are kept). */
static void pipe_gather(const ladle_pipe_schedule *s, ladle_pipeline *pl, const int *first,
                        ladle_op **full)
{
    for (int j = 0; j < ladle_pipe_schedule_stages(s); j++) {
        int owner = ladle_pipe_schedule_worker(s, j, 0), n = 0;
        ladle_op *const *mine = owner == me ? ladle_pipeline_layers(pl, j, &n) : NULL;
        for (int i = first[j]; i < first[j + 1]; i++) {
            const ladle_op *src = mine ? mine[i - first[j]] : NULL;
            for (int q = 0; q < ladle_op_num_params(full[i]); q++)
                pipe_move(ladle_op_param(full[i], q), src ? ladle_op_param(src, q) : NULL,
                          owner);
            if (ladle_op_kind_of(full[i]) == LADLE_OP_BATCHNORM) {
                ladle_tensor *mean, *var, *src_mean = NULL, *src_var = NULL;
                ladle_batchnorm_running_stats(full[i], &mean, &var);
                if (src)
                    ladle_batchnorm_running_stats(src, &src_mean, &src_var);
                pipe_move(mean, src_mean, owner);
                pipe_move(var, src_var, owner);
            }
        }
    }
}

/* Test accuracy of the whole network (rank 0 alone, batches of eb) on the
 * first limit test images (all when limit is 0). */
static ladle_status pipe_accuracy(ladle_op **full, int nl, const ladle_dataset *test,
                                  int64_t eb, int64_t limit, ladle_dtype dt, double *acc)
{
    int64_t xs[4] = {eb, 1, ladle_dataset_rows(test), ladle_dataset_cols(test)}, ls = eb;
    ladle_tensor *act[PIPE_MAX_LAYERS + 1] = {NULL}, *labels = NULL;
    ladle_status st = ladle_tensor_create(dt, LADLE_CPU, 4, xs, &act[0]);
    if (st == LADLE_OK)
        st = ladle_tensor_create(LADLE_I64, LADLE_CPU, 1, &ls, &labels);
    for (int i = 0; i < nl && st == LADLE_OK; i++) {
        int nd;
        int64_t ys[LADLE_MAX_NDIM];
        ladle_op_y_shape(full[i], &nd, ys);
        st = ladle_tensor_create(dt, LADLE_CPU, nd, ys, &act[i + 1]);
        if (st == LADLE_OK)
            st = ladle_layer_set_training(full[i], 0);
    }
    int64_t n = ladle_dataset_size(test), right = 0;
    if (limit > 0 && limit < n)
        n = limit;
    for (int64_t s = 0; s * eb < n && st == LADLE_OK; s++) {
        ladle_batch_desc bd; /* the test set in order, batch after batch */
        ladle_batch_desc_init(&bd, 0, eb);
        st = ladle_dataset_batch(test, &bd, 0, s, act[0], labels);
        for (int i = 0; i < nl && st == LADLE_OK; i++)
            st = ladle_op_forward(full[i], act[i], act[i + 1]);
        if (st != LADLE_OK)
            break;
        const int64_t *l = ladle_tensor_data(labels);
        int64_t classes = ladle_tensor_shape(act[nl])[1];
        for (int64_t r = 0; r < eb; r++) {
            if (l[r] < 0 || s * eb + r >= n) /* padding, or beyond the limit */
                continue;
            int64_t best = 0;
            double bv = -INFINITY;
            for (int64_t c = 0; c < classes; c++) {
                int64_t at = r * classes + c;
                double v = dt == LADLE_F32
                               ? ((const float *)ladle_tensor_data(act[nl]))[at]
                               : ((const double *)ladle_tensor_data(act[nl]))[at];
                if (v > bv)
                    bv = v, best = c;
            }
            right += best == l[r];
        }
    }
    for (int i = 0; i <= nl; i++)
        ladle_tensor_destroy(&act[i]);
    ladle_tensor_destroy(&labels);
    *acc = (double)right / (double)n;
    return st;
}

/* The planner's cut of the nl layers by their profiled costs in: the
 * given replicas, or the hybrid's free choice over the ranks, or S stages
 * of one worker each (S, where 0, world times the chunks). The plan models
 * the boundaries' receives and the replicas' all-reduce, spread over the
 * step's microbatches. */
static ladle_status plan_stages(const opts *o, int nl, const pipe_inputs *in, int hybrid,
                                int S, ladle_pipe_plan *plan)
{
    ladle_pipe_plan_desc po;
    ladle_pipe_plan_desc_init(&po, nl, in->f, in->b, in->w);
    po.cut = in->cut;
    po.reduce = in->red;
    po.reduce_latency = in->lat;
    po.microbatches = o->microbatches;
    ladle_status st;
    if (hybrid && o->pipe_nrep > 0) {
        int cut[PIPE_MAX_LAYERS + 1], rep[PIPE_MAX_REPLICAS];
        /* the given replicas: the stages cut as the plain planner would */
        po.min_stages = po.max_stages = o->pipe_nrep;
        st = ladle_pipe_plan_create(&po, o->pipe_nrep, plan);
        po.min_stages = po.max_stages = 0;
        for (int j = 0; st == LADLE_OK && j <= plan->stages; j++)
            cut[j] = plan->first[j];
        for (int j = 0; j < o->pipe_nrep; j++)
            rep[j] = (int)o->pipe_rep[j];
        if (st == LADLE_OK)
            st = ladle_pipe_plan_explicit(&po, o->pipe_nrep, cut, rep, plan);
    } else if (hybrid) {
        po.min_stages = S ? S : 2;
        po.max_stages = S;
        st = ladle_pipe_plan_create(&po, world, plan);
    } else {
        po.min_stages = po.max_stages = S;
        st = ladle_pipe_plan_create(&po, S, plan);
    }
    return st;
}

/* The stages' costs as the simulator takes them. */
typedef struct stage_costs {
    double f[64], b[64], w[64], send[64], red[64];
} stage_costs;

/* The costs of plan's stages (summed over their layers), with the
 * simulator's boundary and all-reduce as the plan models them; first[]
 * the stages' first layers, first[stages] = nl. */
static void sum_stages(const ladle_pipe_plan *plan, int hybrid, int nl, const pipe_inputs *in,
                       int *first, stage_costs *sc)
{
    for (int j = 0; j < plan->stages; j++) {
        first[j] = plan->first[j];
        sc->f[j] = sc->b[j] = sc->w[j] = sc->red[j] = 0;
        for (int i = plan->first[j]; i < plan->first[j + 1]; i++)
            sc->f[j] += in->f[i], sc->b[j] += in->b[i], sc->w[j] += in->w[i],
                sc->red[j] += in->red[i];
        /* the simulator's boundary and all-reduce, as the plan models them */
        sc->send[j] = j + 1 < plan->stages ? in->cut[plan->first[j + 1] - 1] : 0;
        int r = hybrid ? plan->replicas[j] : 1;
        sc->red[j] = r > 1 ? 2.0 * (r - 1) / r * sc->red[j] + 2.0 * (r - 1) * in->lat : 0;
    }
    first[plan->stages] = nl;
}

/* Rank 0: the schedule's layout and what the simulator predicts of it. */
static void print_prediction(const opts *o, const ladle_pipe_schedule *s,
                             const ladle_pipe_costs *c, int stages, const int *first)
{
    ladle_pipe_sim sim;
    if (me == 0 && ladle_pipe_simulate(s, c, NULL, &sim) == LADLE_OK) {
        printf("pipeline %s: %d stages on %d workers (layers",
               ladle_pipe_style_name(o->pipe_style), stages, ladle_pipe_schedule_workers(s));
        for (int j = 0; j <= stages; j++)
            printf(" %d", first[j]);
        printf("; replicas");
        for (int j = 0; j < stages; j++)
            printf(" %d", ladle_pipe_schedule_replicas(s, j));
        printf("), %d microbatches: predicted %.2f ms per step, bubble %.0f%%\n",
               o->microbatches, 1e3 * sim.makespan, 100 * sim.bubble);
        ladle_pipe_sim_destroy(&sim);
    }
}

/* The stages and the schedule: the planner cuts the layers by their
 * profiled costs (with replicas for the hybrid, one worker per stage
 * otherwise). Every rank computes the same plan from the same costs. 0, or
 * the exit status with the reason printed. */
static int pipe_schedule(const opts *o, int nl, const pipe_inputs *in, int *first,
                         ladle_pipe_schedule **out)
{
    ladle_pipe_plan plan;
    int hybrid = o->pipe_style == LADLE_PIPE_HYBRID;
    int v = o->pipe_style == LADLE_PIPE_INTERLEAVED ? o->pipe_chunks
            : o->pipe_style == LADLE_PIPE_ZBV       ? 2 /* the V: two stages per rank */
                                                    : 1;
    int S = o->pipe_stages ? o->pipe_stages : hybrid ? 0 : world * v;
    ladle_status st = plan_stages(o, nl, in, hybrid, S, &plan);
    if (st != LADLE_OK) {
        if (me == 0)
            fprintf(stderr, "%s: planning the stages: %s\n", tool, ladle_error_message());
        return 2;
    }
    stage_costs sc;
    sum_stages(&plan, hybrid, nl, in, first, &sc);
    ladle_pipe_costs c = {sc.f, sc.b, sc.w, sc.send, sc.red, NULL, NULL};
    ladle_pipe_schedule *s = NULL;
    st = ladle_pipe_schedule_generate(o->pipe_style, plan.stages,
                                      hybrid ? plan.replicas : NULL, v, o->microbatches, &c,
                                      &s);
    if (st != LADLE_OK || ladle_pipe_schedule_workers(s) > world) {
        if (me == 0 && st != LADLE_OK)
            fprintf(stderr, "%s: generating the schedule: %s\n", tool,
                    ladle_error_message());
        else if (me == 0)
            fprintf(stderr, "%s: the pipeline needs %d ranks; there are %d\n", tool,
                    ladle_pipe_schedule_workers(s), world);
        ladle_pipe_schedule_destroy(&s);
        return 2;
    }
    print_prediction(o, s, &c, plan.stages, first);
    *out = s;
    return 0;
}

/* What a pipeline run holds. */
typedef struct pipe_state {
    ladle_pipe_schedule *s;
    ladle_partition *p;
    ladle_pipeline *pl;
    ladle_op *all[PIPE_MAX_LAYERS], *loss, *kept[PIPE_MAX_LAYERS];
    int n, nkept, first[PIPE_MAX_LAYERS + 1];
    ladle_op *full[PIPE_MAX_LAYERS], *full_loss; /* the whole network, to score it */
    int nfull;
    ladle_dataset *train, *test;
    ladle_tensor *x, *labels;
} pipe_state;

static void pipe_state_free(pipe_state *ps)
{
    for (int i = 0; i < ps->n; i++)
        ladle_op_destroy(&ps->all[i]);
    for (int i = 0; i < ps->nfull; i++)
        ladle_op_destroy(&ps->full[i]);
    ladle_op_destroy(&ps->full_loss);
    ladle_tensor_destroy(&ps->x), ladle_tensor_destroy(&ps->labels);
    ladle_dataset_destroy(&ps->train), ladle_dataset_destroy(&ps->test);
    if (ps->pl) { /* the pipeline owns its layers and loss once made */
        ladle_pipeline_destroy(&ps->pl);
    } else {
        for (int i = 0; i < ps->nkept; i++)
            ladle_op_destroy(&ps->kept[i]);
        ladle_op_destroy(&ps->loss);
    }
    ladle_partition_destroy(&ps->p);
    ladle_pipe_schedule_destroy(&ps->s);
}

/* Build every layer, keep this rank's stages' and make the pipeline. */
static ladle_status pipe_build(const opts *o, const ladle_dataset_info *info,
                               pipe_state *ps)
{
    int W = ladle_pipe_schedule_workers(ps->s), S = ladle_pipe_schedule_stages(ps->s);
    int shape[1] = {W}, nheld = 0, last = 0;
    ladle_lenet_desc d;
    pipe_desc(o, info, o->batch / o->microbatches, &d);
    ladle_status st =
        ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 1, shape, NULL, &ps->p);
    if (st == LADLE_OK)
        st = ladle_lenet_layers(&d, PIPE_MAX_LAYERS, ps->all, &ps->n, &ps->loss);
    if (st != LADLE_OK)
        return st;
    int worker = ladle_partition_active(ps->p) ? ladle_partition_rank(ps->p) : -1;
    ladle_pipe_stage held[PIPE_MAX_LAYERS];
    for (int j = 0; worker >= 0 && j < S; j++)
        for (int q = 0; q < ladle_pipe_schedule_replicas(ps->s, j); q++)
            if (ladle_pipe_schedule_worker(ps->s, j, q) == worker) {
                held[nheld].stage = j;
                held[nheld].n = ps->first[j + 1] - ps->first[j];
                held[nheld].layers = &ps->kept[ps->nkept];
                for (int i = ps->first[j]; i < ps->first[j + 1]; i++) {
                    ps->kept[ps->nkept++] = ps->all[i];
                    ps->all[i] = NULL;
                }
                last |= j == S - 1;
                nheld++;
            }
    if (!last)
        ladle_op_destroy(&ps->loss);
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, o->adam ? LADLE_OPT_ADAM : LADLE_OPT_SGD, o->lr);
    if (!o->adam)
        od.momentum = o->momentum;
    od.weight_decay = o->weight_decay;
    st = ladle_pipeline_create(ps->p, ps->s, nheld, held, ps->loss, &od, &ps->pl);
    if (st != LADLE_OK)
        return st;
    /* the whole network on rank 0's CPU, for the test accuracy */
    d.batch = 500;
    d.device = LADLE_CPU;
    return ladle_lenet_layers(&d, PIPE_MAX_LAYERS, ps->full, &ps->nfull, &ps->full_loss);
}

/* The data sets (whole images, Fashion-MNIST's mean and spread) and the
 * batch tensors: the status. */
static ladle_status pipe_load(const opts *o, const ladle_dataset_info *info, pipe_state *ps)
{
    ladle_dataset_desc norm;
    ladle_dataset_desc_init(&norm);
    norm.mean = 0.2860, norm.std = 0.3530;
    ladle_status st = ladle_dataset_load_dir(o->data, "train", &norm, &ps->train);
    if (st == LADLE_OK)
        st = ladle_dataset_load_dir(o->data, "t10k", &norm, &ps->test);
    int64_t xs[4] = {o->batch, 1, info->rows, info->cols}, nb = o->batch;
    if (st == LADLE_OK)
        st = ladle_tensor_create(o->dtype, o->device, 4, xs, &ps->x);
    if (st == LADLE_OK)
        st = ladle_tensor_create(LADLE_I64, o->device, 1, &nb, &ps->labels);
    return st;
}

/* Step s of epoch e at learning rate lr on the S stages (every rank reads
 * the whole batch): the status, the loss in *loss. */
static ladle_status pipe_step(pipe_state *ps, const ladle_batch_desc *bd, double lr, int S,
                              int e, int64_t s, double *loss)
{
    if (ladle_dataset_batch(ps->train, bd, e, s, ps->x, ps->labels))
        fail("reading a batch");
    for (int j = 0; j < S; j++)
        if (ladle_pipeline_optimizer(ps->pl, j))
            ladle_optimizer_set_lr(ladle_pipeline_optimizer(ps->pl, j), lr);
    return ladle_pipeline_step(ps->pl, ps->x, ps->labels, loss);
}

/* The measured timeline of the last step, drawn by rank 0: 0, or 1 with
 * the reason printed. */
static int pipe_timeline(const opts *o, pipe_state *ps)
{
    int ne = 0, W = ladle_pipe_schedule_workers(ps->s), rc = 0;
    ladle_pipe_event *ev = NULL;
    if (tool_failed(tool, ladle_pipeline_gather_events(ps->pl, &ne, &ev),
                    "gathering the timeline"))
        return 1;
    if (me == 0) {
        char title[160], why[CLI_WHY];
        snprintf(title, sizeof title, "LeNet-5, %s on %d ranks, last step: bubble %.0f%%",
                 ladle_pipe_style_name(o->pipe_style), W,
                 100 * ladle_pipe_events_bubble(W, ne, ev));
        FILE *fp = cli_fopen(tool, o->timeline, "w");
        if (fp == NULL) {
            rc = 1;
        } else {
            ladle_status st = ladle_pipe_write_svg(fp, title, W, ne, ev);
            if (cli_close_ok(fp, o->timeline, why) || st != LADLE_OK) {
                fprintf(stderr, "%s: %s\n", tool, st ? ladle_error_message() : why);
                rc = 1;
            }
        }
    }
    ladle_pipe_events_destroy(&ev);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return rc;
}

/* The training loop's state over the epochs. */
typedef struct pipe_loop {
    int S, progress, worker;
    int64_t per_epoch, steps_done;
    ladle_lr_schedule lrs;
    ladle_batch_desc bd; /* every rank reads the whole batch */
    watch wt;
    ladle_status broken; /* the first failed step's status: no step after it */
    double busy;         /* seconds in the steps */
} pipe_loop;

/* The loop over the options: steps per epoch, learning rates, progress. */
static void pipe_loop_init(const opts *o, const ladle_dataset_info *info, const pipe_state *ps,
                           pipe_loop *L)
{
    L->S = ladle_pipe_schedule_stages(ps->s);
    L->per_epoch = info->size / o->batch;
    if (o->steps && o->steps < L->per_epoch)
        L->per_epoch = o->steps;
    ladle_lr_schedule_init(&L->lrs, o->constant_lr ? LADLE_LR_CONSTANT : LADLE_LR_COSINE,
                           o->lr);
    L->lrs.total_steps = (int64_t)o->epochs * L->per_epoch;
    L->progress =
        o->progress ? o->progress : (int)(L->per_epoch / 10 > 0 ? L->per_epoch / 10 : 1);
    L->worker = ladle_pipeline_worker(ps->pl);
    L->wt.floor_ = log((double)info->classes);
    ladle_batch_desc_init(&L->bd, o->seed, o->batch);
}

/* The steps of epoch e, their losses summed into *sum, with progress on
 * rank 0: 0, or 1 where the watch says stop. */
static int pipe_epoch(const opts *o, pipe_state *ps, pipe_loop *L, int e, double *sum)
{
    double t_epoch = MPI_Wtime();
    for (int64_t s = 0; s < L->per_epoch; s++) {
        double loss_v = 0, t0 = MPI_Wtime();
        if (L->broken == LADLE_OK)
            L->broken = pipe_step(ps, &L->bd, ladle_lr_at(&L->lrs, e * L->per_epoch + s), L->S,
                                  e, s, &loss_v);
        watch_post(&L->wt, e, s, L->broken, L->worker >= 0, loss_v);
        if (watch_settle(&L->wt, 1))
            return 1;
        if (L->broken != LADLE_OK)
            continue;
        L->busy += MPI_Wtime() - t0;
        *sum += loss_v;
        L->steps_done++;
        int show =
            me == 0 && !o->quiet && ((s + 1) % L->progress == 0 || s + 1 == L->per_epoch);
        if (show && !diverged(&L->wt, loss_v)) {
            double el = MPI_Wtime() - t_epoch, rate = (double)(s + 1) * o->batch / el;
            printf("epoch %d step %lld/%lld  loss %.4f  %.0f images/s  %.2f ms/step\n",
                   e + 1, (long long)(s + 1), (long long)L->per_epoch,
                   *sum / (double)(s + 1), rate, 1e3 * el / (double)(s + 1));
            fflush(stdout);
        }
    }
    return 0;
}

/* After epoch e: the whole network gathered on rank 0 and scored on the
 * test set, with the epoch's mean loss: 0, or 1 with the reason printed. */
static int pipe_evaluate(const opts *o, pipe_state *ps, int e, double sum, int64_t per_epoch)
{
    pipe_gather(ps->s, ps->pl, ps->first, ps->full);
    double acc = 0;
    ladle_status st = me == 0 ? pipe_accuracy(ps->full, ps->nfull, ps->test, 500,
                                              o->test_limit, o->dtype, &acc)
                              : LADLE_OK;
    if (tool_failed(tool, st, "evaluating on the test set"))
        return 1;
    if (me == 0) {
        printf("epoch %d: train loss %.4f, test accuracy %.2f%%\n", e + 1,
               sum / (double)per_epoch, 100 * acc);
        fflush(stdout);
    }
    return 0;
}

static int pipe_run(const opts *o)
{
    pipe_state ps = {0};
    ladle_dataset_info info, tinfo;
    pipe_inputs in;
    int nl = 0, rc;
    const char *out_opt[1] = {"--timeline"}, *out_path[1] = {o->timeline};
    if (tool_outputs_ok(tool, 1, out_opt, out_path))
        return 2;
    if ((rc = probe_data(o, &info, &tinfo)) != 0 ||
        (rc = pipe_profile(o, &info, o->batch / o->microbatches, &in, &nl)) != 0 ||
        (rc = pipe_schedule(o, nl, &in, ps.first, &ps.s)) != 0)
        goto out;
    ladle_status st = pipe_build(o, &info, &ps);
    if (st == LADLE_OK)
        st = pipe_load(o, &info, &ps);
    if (tool_failed(tool, st, "building the pipeline")) {
        rc = 1;
        goto out;
    }
    pipe_loop L = {0};
    pipe_loop_init(o, &info, &ps, &L);
    double t_start = MPI_Wtime();
    for (int e = 0; e < o->epochs && rc == 0; e++) {
        double sum = 0;
        rc = pipe_epoch(o, &ps, &L, e, &sum);
        if (watch_settle(&L.wt, 0) || rc) {
            rc = 1;
            break;
        }
        if ((rc = pipe_evaluate(o, &ps, e, sum, L.per_epoch)) != 0)
            break;
    }
    if (rc == 0 && me == 0)
        printf("done: %.2f ms per step over %lld steps, %.1f s in all\n",
               1e3 * L.busy / (double)L.steps_done, (long long)L.steps_done,
               MPI_Wtime() - t_start);
    if (rc == 0 && o->timeline)
        rc = pipe_timeline(o, &ps);
out:
    pipe_state_free(&ps);
    return rc;
}

#endif /* LADLE_TOOLS_TRAIN_PIPE_H */
