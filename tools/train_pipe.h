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

/* The stages and the schedule: the planner cuts the layers by their
 * profiled costs (with replicas for the hybrid, one worker per stage
 * otherwise). Every rank computes the same plan from the same costs. 0, or
 * the exit status with the reason printed. */
static int pipe_schedule(const opts *o, int nl, const pipe_inputs *in, int *first,
                         ladle_pipe_schedule **out)
{
    const double *f = in->f, *b = in->b, *w = in->w;
    ladle_pipe_plan plan;
    /* the plan models the boundaries' receives and the replicas'
     * all-reduce, spread over the step's microbatches */
    ladle_pipe_plan_desc po;
    ladle_pipe_plan_desc_init(&po, nl, f, b, w);
    po.cut = in->cut;
    po.reduce = in->red;
    po.reduce_latency = in->lat;
    po.microbatches = o->microbatches;
    int hybrid = o->pipe_style == LADLE_PIPE_HYBRID;
    int v = o->pipe_style == LADLE_PIPE_INTERLEAVED ? o->pipe_chunks : 1;
    int S = o->pipe_stages ? o->pipe_stages : hybrid ? 0 : world * v;
    ladle_status st;
    if (hybrid && o->pipe_nrep > 0) {
        int cut[PIPE_MAX_LAYERS + 1], rep[PIPE_MAX_REPLICAS];
        /* the given replicas: the stages cut as the plain planner would */
        po.min_stages = po.max_stages = o->pipe_nrep;
        st = ladle_pipe_plan_create(&po, o->pipe_nrep, &plan);
        po.min_stages = po.max_stages = 0;
        for (int j = 0; st == LADLE_OK && j <= plan.stages; j++)
            cut[j] = plan.first[j];
        for (int j = 0; j < o->pipe_nrep; j++)
            rep[j] = (int)o->pipe_rep[j];
        if (st == LADLE_OK)
            st = ladle_pipe_plan_explicit(&po, o->pipe_nrep, cut, rep, &plan);
    } else if (hybrid) {
        po.min_stages = S ? S : 2;
        po.max_stages = S;
        st = ladle_pipe_plan_create(&po, world, &plan);
    } else {
        po.min_stages = po.max_stages = S;
        st = ladle_pipe_plan_create(&po, S, &plan);
    }
    if (st != LADLE_OK) {
        if (me == 0)
            fprintf(stderr, "%s: planning the stages: %s\n", tool, ladle_error_message());
        return 2;
    }
    double sf[64], sb[64], sw[64], send[64], red[64];
    for (int j = 0; j < plan.stages; j++) {
        first[j] = plan.first[j];
        sf[j] = sb[j] = sw[j] = red[j] = 0;
        for (int i = plan.first[j]; i < plan.first[j + 1]; i++)
            sf[j] += f[i], sb[j] += b[i], sw[j] += w[i], red[j] += in->red[i];
        /* the simulator's boundary and all-reduce, as the plan models them */
        send[j] = j + 1 < plan.stages ? in->cut[plan.first[j + 1] - 1] : 0;
        int r = hybrid ? plan.replicas[j] : 1;
        red[j] = r > 1 ? 2.0 * (r - 1) / r * red[j] + 2.0 * (r - 1) * in->lat : 0;
    }
    first[plan.stages] = nl;
    ladle_pipe_costs c = {sf, sb, sw, send, red, NULL, NULL};
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
    ladle_pipe_sim sim;
    if (me == 0 && ladle_pipe_simulate(s, &c, NULL, &sim) == LADLE_OK) {
        printf("pipeline %s: %d stages on %d workers (layers",
               ladle_pipe_style_name(o->pipe_style), plan.stages,
               ladle_pipe_schedule_workers(s));
        for (int j = 0; j <= plan.stages; j++)
            printf(" %d", first[j]);
        printf("; replicas");
        for (int j = 0; j < plan.stages; j++)
            printf(" %d", ladle_pipe_schedule_replicas(s, j));
        printf("), %d microbatches: predicted %.2f ms per step, bubble %.0f%%\n",
               o->microbatches, 1e3 * sim.makespan, 100 * sim.bubble);
        ladle_pipe_sim_destroy(&sim);
    }
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
    int S = ladle_pipe_schedule_stages(ps.s);
    int64_t per_epoch = info.size / o->batch;
    if (o->steps && o->steps < per_epoch)
        per_epoch = o->steps;
    ladle_lr_schedule lrs;
    ladle_lr_schedule_init(&lrs, o->constant_lr ? LADLE_LR_CONSTANT : LADLE_LR_COSINE,
                           o->lr);
    lrs.total_steps = (int64_t)o->epochs * per_epoch;
    int progress =
        o->progress ? o->progress : (int)(per_epoch / 10 > 0 ? per_epoch / 10 : 1);
    int worker = ladle_pipeline_worker(ps.pl);
    watch wt = {0};
    wt.floor_ = log((double)info.classes);
    ladle_status broken = LADLE_OK;
    double t_start = MPI_Wtime(), busy = 0;
    int64_t steps_done = 0;
    ladle_batch_desc bd; /* every rank reads the whole batch */
    ladle_batch_desc_init(&bd, o->seed, o->batch);
    for (int e = 0; e < o->epochs && rc == 0; e++) {
        double sum = 0, t_epoch = MPI_Wtime();
        for (int64_t s = 0; s < per_epoch; s++) {
            double loss_v = 0, t0 = MPI_Wtime();
            if (broken == LADLE_OK)
                broken = pipe_step(&ps, &bd, ladle_lr_at(&lrs, e * per_epoch + s), S, e, s,
                                   &loss_v);
            watch_post(&wt, e, s, broken, worker >= 0, loss_v);
            if (watch_settle(&wt, 1)) {
                rc = 1;
                break;
            }
            if (broken != LADLE_OK)
                continue;
            busy += MPI_Wtime() - t0;
            sum += loss_v;
            steps_done++;
            int show =
                me == 0 && !o->quiet && ((s + 1) % progress == 0 || s + 1 == per_epoch);
            if (show && !diverged(&wt, loss_v)) {
                double el = MPI_Wtime() - t_epoch, rate = (double)(s + 1) * o->batch / el;
                printf("epoch %d step %lld/%lld  loss %.4f  %.0f images/s  %.2f ms/step\n",
                       e + 1, (long long)(s + 1), (long long)per_epoch,
                       sum / (double)(s + 1), rate, 1e3 * el / (double)(s + 1));
                fflush(stdout);
            }
        }
        if (watch_settle(&wt, 0) || rc) {
            rc = 1;
            break;
        }
        pipe_gather(ps.s, ps.pl, ps.first, ps.full);
        double acc = 0;
        st = me == 0 ? pipe_accuracy(ps.full, ps.nfull, ps.test, 500, o->test_limit, o->dtype, &acc)
                     : LADLE_OK;
        if (tool_failed(tool, st, "evaluating on the test set")) {
            rc = 1;
            break;
        }
        if (me == 0) {
            printf("epoch %d: train loss %.4f, test accuracy %.2f%%\n", e + 1,
                   sum / (double)per_epoch, 100 * acc);
            fflush(stdout);
        }
    }
    if (rc == 0 && me == 0)
        printf("done: %.2f ms per step over %lld steps, %.1f s in all\n",
               1e3 * busy / (double)steps_done, (long long)steps_done,
               MPI_Wtime() - t_start);
    if (rc == 0 && o->timeline)
        rc = pipe_timeline(o, &ps);
out:
    pipe_state_free(&ps);
    return rc;
}

#endif /* LADLE_TOOLS_TRAIN_PIPE_H */
