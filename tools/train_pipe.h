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

/* Each layer's forward, input-gradient and weight-gradient seconds on one
 * microbatch (rank 0 measures, every rank gets them). */
static void pipe_profile(const opts *o, int64_t mb, double *f, double *b, double *w, int *nl)
{
    ladle_lenet_desc d;
    ladle_lenet_desc_init(&d);
    d.batch = mb;
    d.batchnorm = o->bn;
    d.dtype = o->dtype;
    ladle_op *layers[PIPE_MAX_LAYERS], *loss = NULL;
    if (ladle_lenet_layers(&d, PIPE_MAX_LAYERS, layers, nl, &loss))
        fail("building LeNet-5");
    if (me == 0 && ladle_pipe_profile(*nl, layers, 9, f, b, w))
        fail("profiling the layers");
    MPI_Bcast(f, *nl, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(b, *nl, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(w, *nl, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    for (int i = 0; i < *nl; i++)
        ladle_op_destroy(&layers[i]);
    ladle_op_destroy(&loss);
}

/* Send t (on `owner`) into u (on rank 0); a copy when they are the same rank. */
static void pipe_move(ladle_tensor *u, const ladle_tensor *t, int owner)
{
    if (owner == 0) {
        if (me == 0 && ladle_tensor_copy(u, t))
            fail("gathering the parameters");
        return;
    }
    if (me == owner)
        MPI_Send(ladle_tensor_data(t),
                 (int)(ladle_tensor_numel(t) * (int64_t)ladle_dtype_size(ladle_tensor_dtype(t))),
                 MPI_BYTE, 0, 7, MPI_COMM_WORLD);
    else if (me == 0)
        MPI_Recv(ladle_tensor_data(u),
                 (int)(ladle_tensor_numel(u) * (int64_t)ladle_dtype_size(ladle_tensor_dtype(u))),
                 MPI_BYTE, owner, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
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
                pipe_move(ladle_op_param(full[i], q), src ? ladle_op_param(src, q) : NULL, owner);
            if (strcmp(ladle_op_name(full[i]), "batchnorm") == 0) {
                pipe_move(ladle_batchnorm_running_mean(full[i]),
                          src ? ladle_batchnorm_running_mean(src) : NULL, owner);
                pipe_move(ladle_batchnorm_running_var(full[i]),
                          src ? ladle_batchnorm_running_var(src) : NULL, owner);
            }
        }
    }
}

/* Test accuracy of the whole network on rank 0 (inference, batches of eb). */
static double pipe_accuracy(ladle_op **full, int nl, const ladle_dataset *test, int64_t eb,
                            ladle_dtype dt)
{
    int64_t xs[4] = {eb, 1, ladle_dataset_rows(test), ladle_dataset_cols(test)}, ls = eb;
    ladle_tensor *act[PIPE_MAX_LAYERS + 1], *labels = NULL;
    if (ladle_tensor_create(dt, 4, xs, &act[0]) || ladle_tensor_create(LADLE_I64, 1, &ls, &labels))
        fail("evaluating");
    for (int i = 0; i < nl; i++) {
        int nd;
        int64_t ys[LADLE_MAX_NDIM];
        ladle_op_y_shape(full[i], &nd, ys);
        if (ladle_tensor_create(dt, nd, ys, &act[i + 1]) || ladle_layer_set_training(full[i], 0))
            fail("evaluating");
    }
    int64_t n = ladle_dataset_size(test), right = 0;
    for (int64_t s = 0; s * eb < n; s++) {
        if (ladle_dataset_batch(test, 0, 0, s, eb, 0, 0, 0, act[0], labels))
            fail("reading the test set");
        for (int i = 0; i < nl; i++)
            if (ladle_op_forward(full[i], act[i], act[i + 1]))
                fail("evaluating");
        const int64_t *l = ladle_tensor_data(labels);
        int64_t classes = ladle_tensor_shape(act[nl])[1];
        for (int64_t r = 0; r < eb; r++) {
            if (l[r] < 0)
                continue;
            int64_t best = 0;
            double bv = -1e300;
            for (int64_t c = 0; c < classes; c++) {
                double v = dt == LADLE_F32 ? ((const float *)ladle_tensor_data(act[nl]))[r * classes + c]
                                           : ((const double *)ladle_tensor_data(act[nl]))[r * classes + c];
                if (v > bv)
                    bv = v, best = c;
            }
            right += best == l[r];
        }
    }
    for (int i = 0; i <= nl; i++)
        ladle_tensor_destroy(&act[i]);
    ladle_tensor_destroy(&labels);
    return (double)right / (double)n;
}

/* The stages and the schedule: the planner cuts the layers by their
 * profiled costs (with replicas for the hybrid, one worker per stage
 * otherwise). */
static ladle_pipe_schedule *pipe_schedule(const opts *o, int nl, const double *f,
                                          const double *b, const double *w, int *first)
{
    ladle_pipe_plan plan;
    int hybrid = o->pipe_style == LADLE_PIPE_HYBRID;
    int v = o->pipe_style == LADLE_PIPE_INTERLEAVED ? o->pipe_chunks : 1;
    int S = o->pipe_stages ? o->pipe_stages : hybrid ? 0 : world * v;
    ladle_status st;
    if (hybrid && o->pipe_nrep > 0) {
        int cut[PIPE_MAX_LAYERS + 1];
        /* the given replicas: the stages cut as the plain planner would */
        st = ladle_pipe_plan_create_range(nl, f, b, w, NULL, 0, o->pipe_nrep, o->pipe_nrep,
                                          o->pipe_nrep, &plan);
        for (int j = 0; st == LADLE_OK && j <= plan.stages; j++)
            cut[j] = plan.first[j];
        if (st == LADLE_OK)
            st = ladle_pipe_plan_explicit(nl, f, b, w, o->pipe_nrep, cut, o->pipe_rep, &plan);
    } else if (hybrid) {
        st = ladle_pipe_plan_create_range(nl, f, b, w, NULL, 0, world, S ? S : 2, S, &plan);
    } else {
        st = ladle_pipe_plan_create_range(nl, f, b, w, NULL, 0, S, S, S, &plan);
    }
    if (st)
        fail("planning the stages");
    double sf[64], sb[64], sw[64];
    for (int j = 0; j < plan.stages; j++) {
        first[j] = plan.first[j];
        sf[j] = sb[j] = sw[j] = 0;
        for (int i = plan.first[j]; i < plan.first[j + 1]; i++)
            sf[j] += f[i], sb[j] += b[i], sw[j] += w[i];
    }
    first[plan.stages] = nl;
    ladle_pipe_costs c = {sf, sb, sw, NULL, NULL, NULL, NULL};
    ladle_pipe_schedule *s = NULL;
    if (ladle_pipe_schedule_generate(o->pipe_style, plan.stages, hybrid ? plan.replicas : NULL,
                                     v, o->microbatches, &c, &s))
        fail("generating the schedule");
    if (ladle_pipe_schedule_workers(s) > world) {
        if (me == 0)
            fprintf(stderr, "ladle-train: the pipeline needs %d ranks; there are %d\n",
                    ladle_pipe_schedule_workers(s), world);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    ladle_pipe_sim sim;
    if (me == 0 && ladle_pipe_simulate(s, &c, &sim) == LADLE_OK) {
        printf("pipeline %s: %d stages on %d workers (layers", ladle_pipe_style_name(o->pipe_style),
               plan.stages, ladle_pipe_schedule_workers(s));
        for (int j = 0; j <= plan.stages; j++)
            printf(" %d", first[j]);
        printf("; replicas");
        for (int j = 0; j < plan.stages; j++)
            printf(" %d", ladle_pipe_schedule_replicas(s, j));
        printf("), %d microbatches: predicted %.2f ms per step, bubble %.0f%%\n",
               o->microbatches, 1e3 * sim.makespan, 100 * sim.bubble);
        ladle_pipe_sim_free(&sim);
    }
    return s;
}

static void pipe_run(const opts *o)
{
    int64_t mb = o->batch / o->microbatches;
    if (mb * o->microbatches != o->batch) {
        if (me == 0)
            fprintf(stderr, "ladle-train: a batch of %lld does not split into %d microbatches\n",
                    (long long)o->batch, o->microbatches);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double f[PIPE_MAX_LAYERS], b[PIPE_MAX_LAYERS], w[PIPE_MAX_LAYERS];
    int nl = 0, first[PIPE_MAX_LAYERS + 1];
    pipe_profile(o, mb, f, b, w, &nl);
    ladle_pipe_schedule *s = pipe_schedule(o, nl, f, b, w, first);
    int W = ladle_pipe_schedule_workers(s), S = ladle_pipe_schedule_stages(s);
    int shape[1] = {W};
    ladle_partition *p = NULL;
    if (ladle_partition_create(MPI_COMM_WORLD, 1, shape, NULL, &p))
        fail("the pipeline's partition");
    int worker = ladle_partition_active(p) ? ladle_partition_rank(p) : -1;
    /* every rank builds the whole network and keeps its stages' layers */
    ladle_lenet_desc d;
    ladle_lenet_desc_init(&d);
    d.batch = mb;
    d.batchnorm = o->bn;
    d.dtype = o->dtype;
    d.seed = o->seed;
    ladle_op *all[PIPE_MAX_LAYERS], *loss = NULL, *kept[PIPE_MAX_LAYERS];
    int n = 0, nheld = 0, nkept = 0, last = 0;
    if (ladle_lenet_layers(&d, PIPE_MAX_LAYERS, all, &n, &loss))
        fail("building LeNet-5");
    ladle_pipe_stage held[PIPE_MAX_LAYERS];
    for (int j = 0; worker >= 0 && j < S; j++)
        for (int q = 0; q < ladle_pipe_schedule_replicas(s, j); q++)
            if (ladle_pipe_schedule_worker(s, j, q) == worker) {
                held[nheld].stage = j;
                held[nheld].n = first[j + 1] - first[j];
                held[nheld].layers = &kept[nkept];
                for (int i = first[j]; i < first[j + 1]; i++) {
                    kept[nkept++] = all[i];
                    all[i] = NULL;
                }
                last |= j == S - 1;
                nheld++;
            }
    for (int i = 0; i < n; i++)
        ladle_op_destroy(&all[i]);
    if (!last)
        ladle_op_destroy(&loss);
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, o->adam ? LADLE_OPT_ADAM : LADLE_OPT_SGD, o->lr);
    if (!o->adam)
        od.momentum = o->momentum;
    od.weight_decay = o->weight_decay;
    ladle_pipeline *pl = NULL;
    if (ladle_pipeline_create(p, s, nheld, held, loss, &od, &pl))
        fail("creating the pipeline");

    ladle_dataset *train = NULL, *test = NULL;
    if (ladle_dataset_load_dir(o->data, "train", 0, 0, 0, 0, 0.2860, 0.3530, &train) ||
        ladle_dataset_load_dir(o->data, "t10k", 0, 0, 0, 0, 0.2860, 0.3530, &test))
        fail("loading the data");
    int64_t xs[4] = {o->batch, 1, ladle_dataset_rows(train), ladle_dataset_cols(train)};
    int64_t per_epoch = ladle_dataset_size(train) / o->batch, nb = o->batch;
    if (o->steps && o->steps < per_epoch)
        per_epoch = o->steps;
    ladle_tensor *x = NULL, *labels = NULL;
    if (ladle_tensor_create(o->dtype, 4, xs, &x) || ladle_tensor_create(LADLE_I64, 1, &nb, &labels))
        fail("allocating the batch");
    ladle_lr_schedule lrs;
    ladle_lr_schedule_init(&lrs, o->cosine ? LADLE_LR_COSINE : LADLE_LR_CONSTANT, o->lr);
    lrs.total_steps = (int64_t)o->epochs * per_epoch;
    int progress = o->progress ? o->progress : (int)(per_epoch / 10 > 0 ? per_epoch / 10 : 1);
    /* the whole network on rank 0, for the test accuracy */
    ladle_op *full[PIPE_MAX_LAYERS], *full_loss = NULL;
    int nfull = 0;
    d.batch = 500;
    if (ladle_lenet_layers(&d, PIPE_MAX_LAYERS, full, &nfull, &full_loss))
        fail("building the evaluation network");
    double t_start = MPI_Wtime(), busy = 0;
    for (int e = 0; e < o->epochs; e++) {
        double sum = 0, t_epoch = MPI_Wtime();
        for (int64_t st = 0; st < per_epoch; st++) {
            if (ladle_dataset_batch(train, o->seed, e, st, o->batch, 0, 0, 0, x, labels))
                fail("reading a batch");
            for (int j = 0; j < S; j++)
                if (ladle_pipeline_optimizer(pl, j))
                    ladle_optimizer_set_lr(ladle_pipeline_optimizer(pl, j),
                                           ladle_lr_at(&lrs, e * per_epoch + st));
            double loss_v = 0, t0 = MPI_Wtime();
            if (ladle_pipeline_step(pl, x, labels, &loss_v))
                fail("a pipeline step");
            busy += MPI_Wtime() - t0;
            sum += loss_v;
            if (me == 0 && !o->quiet && ((st + 1) % progress == 0 || st + 1 == per_epoch)) {
                double el = MPI_Wtime() - t_epoch, rate = (double)(st + 1) * o->batch / el;
                printf("epoch %d step %lld/%lld  loss %.4f  %.0f images/s  %.2f ms/step\n", e + 1,
                       (long long)(st + 1), (long long)per_epoch, sum / (double)(st + 1), rate,
                       1e3 * el / (double)(st + 1));
                fflush(stdout);
            }
        }
        pipe_gather(s, pl, first, full);
        double acc = me == 0 ? pipe_accuracy(full, nfull, test, 500, o->dtype) : 0;
        if (me == 0) {
            printf("epoch %d: train loss %.4f, test accuracy %.2f%%\n", e + 1,
                   sum / (double)per_epoch, 100 * acc);
            fflush(stdout);
        }
    }
    if (me == 0)
        printf("%.2f ms per step over %lld steps, %.1f s in all\n",
               1e3 * busy / ((double)o->epochs * per_epoch), (long long)(o->epochs * per_epoch),
               MPI_Wtime() - t_start);
    if (o->timeline) {
        int ne = 0;
        ladle_pipe_event *ev = NULL;
        if (ladle_pipeline_gather_events(pl, &ne, &ev))
            fail("gathering the timeline");
        if (me == 0) {
            FILE *fp = fopen(o->timeline, "w");
            char title[160];
            snprintf(title, sizeof title, "LeNet-5, %s on %d ranks, last step: bubble %.0f%%",
                     ladle_pipe_style_name(o->pipe_style), W, 100 * ladle_pipe_events_bubble(W, ne, ev));
            if (fp == NULL || ladle_pipe_write_svg(fp, title, W, ne, ev))
                fprintf(stderr, "ladle-train: cannot write %s\n", o->timeline);
            if (fp)
                fclose(fp);
        }
        ladle_pipe_events_free(ev);
    }
    for (int i = 0; i < nfull; i++)
        ladle_op_destroy(&full[i]);
    ladle_op_destroy(&full_loss);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&labels);
    ladle_dataset_destroy(&train), ladle_dataset_destroy(&test);
    ladle_pipeline_destroy(&pl);
    ladle_partition_destroy(&p);
    ladle_pipe_schedule_destroy(&s);
}

#endif /* LADLE_TOOLS_TRAIN_PIPE_H */
