/*
 * The training loop of ladle-train and ladle-bn-study: LeNet-5 (a chain)
 * or a ResNet (a graph) on an IDX dataset over a layout, with progress lines, test accuracy, checkpoints,
 * and the checks that keep a run from reporting work it did not do: the
 * data checked against the model before anything is built, outputs probed
 * before the first step, a resumed checkpoint checked against the request,
 * and every step's outcome (a failure, a loss that diverged) agreed by all
 * ranks. Tool code, included by the two programs.
 */
#ifndef LADLE_TOOLS_TRAIN_H
#define LADLE_TOOLS_TRAIN_H

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_ckpt.h"
#include "train_opts.h"

/* A failure no rank can recover from in step with the others (a local call
 * that cannot fail once the run is set up): say it, and stop every rank. */
static void fail(const char *what)
{
    fprintf(stderr, "%s (rank %d): %s: %s\n", tool, me, what, ladle_error_message());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void clock_text(double s, char *buf, size_t n)
{
    int t = (int)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, n, "%d:%02d", t / 60, t % 60);
}

/* ---- the model: a chain (LeNet-5) or a graph (the ResNets) ------------- */

/* The calls of a training loop over either kind of network: exactly one
 * of net and graph is set. */
typedef struct model {
    ladle_network *net;
    ladle_graph *graph;
} model;

static ladle_status model_forward(model *m, const ladle_tensor *x, const ladle_tensor **y)
{
    if (m->net)
        return ladle_network_forward(m->net, x, y);
    const ladle_tensor *xs[1] = {x};
    return ladle_graph_forward(m->graph, 1, xs, y);
}

static ladle_status model_loss(model *m, const ladle_tensor *t, double *loss)
{
    if (m->net)
        return ladle_network_loss(m->net, t, loss);
    const ladle_tensor *ts[1] = {t};
    return ladle_graph_loss(m->graph, 1, ts, loss);
}

static ladle_status model_backward(model *m)
{
    return m->net ? ladle_network_backward(m->net, 1) : ladle_graph_backward(m->graph, 1);
}

static ladle_status model_zero_grad(model *m)
{
    return m->net ? ladle_network_zero_grad(m->net) : ladle_graph_zero_grad(m->graph);
}

static void model_set_training(model *m, int training)
{
    if (m->net)
        ladle_network_set_training(m->net, training);
    else
        ladle_graph_set_training(m->graph, training);
}

static ladle_status model_add_to(ladle_optimizer *opt, const model *m)
{
    return m->net ? ladle_optimizer_add_network(opt, m->net)
                  : ladle_optimizer_add_graph(opt, m->graph);
}

static ladle_status model_save(const char *path, const model *m, const ladle_optimizer *opt,
                               int nmeta, const int64_t *meta)
{
    return m->net ? ladle_checkpoint_save(path, ladle_comm_of(MPI_COMM_WORLD), m->net, opt,
                                          nmeta, meta)
                  : ladle_checkpoint_save_graph(path, ladle_comm_of(MPI_COMM_WORLD),
                                                m->graph, opt, nmeta, meta);
}

static ladle_status model_load(const char *path, model *m, ladle_optimizer *opt)
{
    return m->net ? ladle_checkpoint_load(path, ladle_comm_of(MPI_COMM_WORLD), m->net, opt,
                                          0, NULL, NULL)
                  : ladle_checkpoint_load_graph(path, ladle_comm_of(MPI_COMM_WORLD),
                                                m->graph, opt, 0, NULL, NULL);
}

/* The layouts of the images and of the logits (whose rows are the labels'). */
static const ladle_layout *model_x_layout(const model *m)
{
    return m->net ? ladle_op_x_layout(ladle_network_layer(m->net, 0))
                  : ladle_graph_value_layout(m->graph, 0);
}

static const ladle_layout *model_logits_layout(const model *m)
{
    if (m->net)
        return ladle_op_x_layout(ladle_network_loss_op(m->net));
    return ladle_op_y_layout(ladle_graph_layer(m->graph, ladle_graph_num_layers(m->graph) - 1));
}

static void model_destroy(model *m)
{
    ladle_network_destroy(&m->net);
    ladle_graph_destroy(&m->graph);
}

/* ---- the data, checked against the model ------------------------------- */

/* Rank 0 reads both sets' headers and labels; every rank gets what they
 * say, or exit status 2 with the reason printed. */
static int probe_data(const opts *o, ladle_dataset_info *train, ladle_dataset_info *test)
{
    ladle_status st = LADLE_OK;
    char why[CLI_WHY] = "";
    int64_t v[8] = {0};
    if (me == 0) {
        st = ladle_dataset_probe_dir(o->data, "train", train);
        if (st == LADLE_OK)
            st = ladle_dataset_probe_dir(o->data, "t10k", test);
        if (st != LADLE_OK)
            fprintf(stderr, "%s: the data: %s\n", tool, ladle_error_message());
        v[0] = train->size, v[1] = train->rows, v[2] = train->cols, v[3] = train->classes;
        v[4] = test->size, v[5] = test->rows, v[6] = test->cols, v[7] = test->classes;
    }
    int code = st;
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (code != LADLE_OK)
        return 2;
    MPI_Bcast(v, 8, MPI_INT64_T, 0, MPI_COMM_WORLD);
    *train = (ladle_dataset_info){v[0], v[1], v[2], v[3]};
    *test = (ladle_dataset_info){v[4], v[5], v[6], v[7]};
    if (train->size < 1 || test->size < 1)
        cli_fail(why,
                 "%s holds %lld training and %lld test samples: both sets must hold some",
                 o->data, (long long)train->size, (long long)test->size);
    else if (train->rows != train->cols || (o->model == MODEL_LENET && train->rows < 12))
        cli_fail(why, "%s takes square images%s; %s holds %lldx%lld", model_titles[o->model],
                 o->model == MODEL_LENET ? " of at least 12x12" : "", o->data,
                 (long long)train->rows, (long long)train->cols);
    else if (test->rows != train->rows || test->cols != train->cols)
        cli_fail(why, "the test images are %lldx%lld, the training images %lldx%lld",
                 (long long)test->rows, (long long)test->cols, (long long)train->rows,
                 (long long)train->cols);
    else if (train->classes < 2)
        cli_fail(why, "the training labels name %lld class%s; a classifier needs 2 or more",
                 (long long)train->classes, train->classes == 1 ? "" : "es");
    else if (test->classes > train->classes)
        cli_fail(why,
                 "the test labels reach %lld, beyond the %lld classes of the training set",
                 (long long)test->classes - 1, (long long)train->classes);
    else if (o->crop_pad > train->rows)
        cli_fail(why, "--crop-pad %d is more than the images' side (%lld)", o->crop_pad,
                 (long long)train->rows);
    else if (o->batch > train->size)
        cli_fail(why, "a batch of %lld is larger than the %lld training samples",
                 (long long)o->batch, (long long)train->size);
    if (why[0] && me == 0)
        fprintf(stderr, "%s: %s\n", tool, why);
    return why[0] ? 2 : 0;
}

/* This rank's input block (offset and shape in the global batch) and label
 * block (rows of the loss's input). */
typedef struct blocks {
    int64_t xoff[4], xbox[4];
    int64_t loff[2], lbox[2];
    int has_x, has_loss;
} blocks;

static void find_blocks(const model *m, blocks *b)
{
    const ladle_layout *lx = model_x_layout(m);
    const ladle_layout *ll = model_logits_layout(m);
    ladle_layout_box(lx, LADLE_SELF, b->xoff, b->xbox);
    ladle_layout_box(ll, LADLE_SELF, b->loff, b->lbox);
    b->has_x = ladle_layout_local_volume(lx, LADLE_SELF) > 0;
    b->has_loss = ladle_partition_active(ladle_layout_partition(ll));
}

/* Fill the label block of batch `step`. */
static void labels_of(const ladle_dataset *ds, uint64_t seed, int64_t epoch, int64_t step,
                      int64_t batch, const blocks *b, int64_t *host, ladle_tensor *t)
{
    for (int64_t i = 0; i < b->lbox[0]; i++)
        host[i] = ladle_dataset_label(
            ds, ladle_dataset_sample(ds, seed, epoch, step * batch + b->loff[0] + i));
    /* the tensor may be on a GPU: written whole, through its device */
    if (ladle_tensor_write(t, host))
        fail("writing the labels");
}

/* ---- every step's outcome, agreed ------------------------------------- */

/* Each step ends with a nonblocking all-reduce of {the step's status, the
 * lowest failing rank, the loss} that completes while the next step runs,
 * so the agreement costs no waiting; its verdict arrives one step late.
 * Every rank posts one per step, including a rank whose step failed (it
 * skips the work and posts until the verdict lands). */
typedef struct watch {
    MPI_Request req[2]; /* a ring: slot head is the oldest in flight */
    double val[2][3];   /* reduced in place: untouched while in flight */
    int64_t epoch[2], step[2];
    int head, n;
    int verdict;    /* 1 once a failure or divergence was reported */
    double base;    /* max(first loss, ln classes), once known */
    double floor_;  /* ln classes */
    char msg[1024]; /* this rank's failure, kept until it is reported */
} watch;

/* The divergence rule: a loss that is not finite or more than 100 times
 * the base (where no converging run goes). */
static int diverged(const watch *w, double loss)
{
    return !isfinite(loss) || (w->base > 0 && loss > 100 * w->base);
}

static void watch_post(watch *w, int64_t e, int64_t s, ladle_status st, int has_loss,
                       double loss)
{
    int k = (w->head + w->n++) % 2;
    w->epoch[k] = e;
    w->step[k] = s;
    w->val[k][0] = st;
    w->val[k][1] = st ? world - me : 0;
    w->val[k][2] = !has_loss || st ? -INFINITY : isfinite(loss) ? loss : INFINITY;
    if (st && w->msg[0] == '\0')
        snprintf(w->msg, sizeof w->msg, "%s (%s)", ladle_error_message(),
                 ladle_status_name(st));
    MPI_Iallreduce(MPI_IN_PLACE, w->val[k], 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD,
                   &w->req[k]);
}

/* Judge one agreed step; the first bad one is reported, once. */
static void watch_judge(watch *w, int k)
{
    const double *v = w->val[k];
    long long e = (long long)w->epoch[k] + 1, s = (long long)w->step[k] + 1;
    if (w->verdict)
        return;
    if (v[0] != 0) {
        w->verdict = 1;
        if (world - me == (int)v[1])
            fprintf(stderr, "%s: %s at epoch %lld, step %lld: %s\n", tool,
                    (int)v[0] == LADLE_ERR_NUMERIC ? "training diverged"
                                                   : "a training step failed",
                    e, s, w->msg);
        return;
    }
    if (v[2] == -INFINITY)
        return;
    if (w->base == 0)
        w->base = v[2] > w->floor_ ? v[2] : w->floor_;
    if (diverged(w, v[2])) {
        w->verdict = 1;
        if (me == 0)
            fprintf(stderr,
                    "%s: training diverged at epoch %lld, step %lld: the loss is %g, "
                    "beyond 100 x %.4g (try a lower --lr)\n",
                    tool, e, s, v[2], w->base);
    }
}

/* Complete the requests in flight but the newest `keep`, oldest first; 0
 * while every step went well, else 1 (the reason printed once). */
static int watch_settle(watch *w, int keep)
{
    while (w->n > keep) {
        int done = 0, k = w->head;
        while (!done) { /* MPI's waits busy-poll: give the core away */
            MPI_Test(&w->req[k], &done, MPI_STATUS_IGNORE);
            if (!done)
                sched_yield();
        }
        watch_judge(w, k);
        w->head = (k + 1) % 2;
        w->n--;
    }
    return w->verdict;
}

/* ---- checkpoints: what a resumed run must match ------------------------ */

/* The integers saved with each checkpoint: where the run stands and what
 * it was asked to do. */
enum {
    META_EPOCH,
    META_STEP,
    META_SEED,
    META_BN,
    META_DTYPE,
    META_BATCH,
    META_IMAGE,
    META_CLASSES,
    META_TRAIN_SIZE,
    META_ADAM,
    META_MODEL, /* after the first ten: a checkpoint of ten integers is LeNet-5's */
    META_N
};

static void meta_of(const opts *o, const ladle_dataset_info *train, int64_t epoch,
                    int64_t *m)
{
    m[META_EPOCH] = epoch;
    m[META_STEP] = 0;
    memcpy(&m[META_SEED], &o->seed, sizeof o->seed);
    m[META_BN] = o->bn;
    m[META_DTYPE] = o->dtype;
    m[META_BATCH] = o->batch;
    m[META_IMAGE] = train->rows;
    m[META_CLASSES] = train->classes;
    m[META_TRAIN_SIZE] = train->size;
    m[META_ADAM] = o->adam;
    m[META_MODEL] = o->model;
}

/* One integer of a run, as an option would say it. */
static void meta_text(int k, int64_t v, char *buf, size_t cap)
{
    uint64_t seed;
    switch (k) {
    case META_SEED:
        memcpy(&seed, &v, sizeof seed);
        snprintf(buf, cap, "--seed %llu", (unsigned long long)seed);
        break;
    case META_BN:
        snprintf(buf, cap, "%s", v ? "--bn" : "no batch norm");
        break;
    case META_DTYPE:
        snprintf(buf, cap, "--dtype %s", ladle_dtype_name((ladle_dtype)v));
        break;
    case META_BATCH:
        snprintf(buf, cap, "--batch %lld", (long long)v);
        break;
    case META_IMAGE:
        snprintf(buf, cap, "images of %lldx%lld", (long long)v, (long long)v);
        break;
    case META_CLASSES:
        snprintf(buf, cap, "%lld classes", (long long)v);
        break;
    case META_TRAIN_SIZE:
        snprintf(buf, cap, "%lld training samples", (long long)v);
        break;
    case META_MODEL:
        snprintf(buf, cap, "--model %s", v >= 0 && v < N_MODELS ? model_names[v] : "?");
        break;
    default:
        snprintf(buf, cap, "%s", v ? "--adam" : "SGD");
    }
}

/* What the checkpoint's integers say differs from this run's; empty when
 * they match (a checkpoint of the first format holds epoch, step, seed). */
static void meta_differences(const int64_t *got, int n, const int64_t *want, char *why)
{
    size_t at = 0;
    why[0] = '\0';
    for (int k = META_SEED; k < META_N && k < n && at < CLI_WHY; k++) {
        char a[64], b[64];
        if (got[k] == want[k])
            continue;
        meta_text(k, got[k], a, sizeof a);
        meta_text(k, want[k], b, sizeof b);
        at += (size_t)snprintf(why + at, CLI_WHY - at, "%s%s (this run: %s)", at ? ", " : "", a,
                               b);
    }
}

/* Check the checkpoint to resume from (path) against the run, then load
 * it: 0 and the epoch and step to start at, or the exit status with the
 * reason printed. The integers are read first, so a checkpoint of another
 * run is refused with what differs rather than with the first tensor that
 * does not fit. */
static int resume_from(const opts *o, const char *path, const ladle_dataset_info *train,
                       model *net, ladle_optimizer *opt, int64_t *epoch, int64_t *step)
{
    int64_t got[LADLE_CHECKPOINT_MAX_META] = {0}, want[META_N];
    int n = 0;
    char why[CLI_WHY];
    ladle_status st = ladle_checkpoint_read_meta(path, ladle_comm_of(MPI_COMM_WORLD),
                                                 LADLE_CHECKPOINT_MAX_META, got, &n);
    if (tool_failed(tool, st, "resuming from the checkpoint"))
        return 2;
    meta_of(o, train, 0, want);
    if (n != 3 && n != META_N - 1 && n != META_N) {
        if (me == 0)
            fprintf(stderr, "%s: %s was not written by %s (%d integers of state, not %d)\n",
                    tool, path, tool, n, META_N);
        return 2;
    }
    meta_differences(got, n, want, why);
    if (why[0]) {
        if (me == 0)
            fprintf(stderr, "%s: %s was written by another run: %s\n", tool, path, why);
        return 2;
    }
    if (got[META_EPOCH] < 0 || got[META_EPOCH] >= o->epochs || got[META_STEP] != 0) {
        if (me == 0)
            fprintf(stderr,
                    "%s: %s has finished epoch %lld, and %d %s asked for: nothing to "
                    "train (ask for more --epochs)\n",
                    tool, path, (long long)got[META_EPOCH], o->epochs,
                    o->epochs == 1 ? "was" : "were");
        return 2;
    }
    if (o->stop_after && o->stop_after <= got[META_EPOCH]) {
        if (me == 0)
            fprintf(stderr, "%s: --stop-after %d is not after the checkpoint's epoch %lld\n",
                    tool, o->stop_after, (long long)got[META_EPOCH]);
        return 2;
    }
    st = model_load(path, net, opt);
    if (tool_failed(tool, st, "resuming from the checkpoint"))
        return 2;
    *epoch = got[META_EPOCH];
    *step = got[META_STEP];
    if (me == 0)
        printf("resumed from %s after epoch %lld\n", path, (long long)*epoch);
    return 0;
}

/* ---- evaluation --------------------------------------------------------- */

/* Test accuracy over the whole test set (the last batch padded), on every
 * rank; a failing forward leaves *st set (agreed by the caller). */
static double accuracy(model *net, const ladle_dataset *test, int64_t n,
                       const opts *o, const blocks *b, ladle_tensor *x, double *scores,
                       int64_t *right, ladle_status *st)
{
    int64_t correct = 0;
    int64_t steps = (n + o->batch - 1) / o->batch;
    ladle_batch_desc tb; /* the test set in order (seed 0), this rank's rows */
    ladle_batch_desc_init(&tb, 0, o->batch);
    tb.offset = b->xoff[0];
    model_set_training(net, 0);
    for (int64_t s = 0; s < steps && *st == LADLE_OK; s++) {
        const ladle_tensor *y = NULL;
        if (b->has_x && ladle_dataset_batch(test, &tb, 0, s, x, NULL))
            fail("reading the test set");
        *st = model_forward(net, x, &y);
        if (*st != LADLE_OK || !b->has_loss)
            continue;
        /* the scores, read whole through y's device */
        *st = ladle_tensor_read(y, scores);
        if (*st != LADLE_OK)
            continue;
        int64_t classes = ladle_tensor_shape(y)[1];
        for (int64_t i = 0; i < b->lbox[0]; i++) {
            int64_t k = s * o->batch + b->loff[0] + i;
            if (k >= n)
                break;
            int64_t label = ladle_dataset_label(test, k), best = 0;
            double bv = -INFINITY;
            for (int64_t c = 0; c < classes; c++) {
                int64_t at = i * classes + c;
                double v = ladle_tensor_dtype(y) == LADLE_F32 ? ((const float *)scores)[at]
                                                              : scores[at];
                if (v > bv) {
                    bv = v;
                    best = c;
                }
            }
            correct += best == label;
        }
    }
    model_set_training(net, 1);
    MPI_Allreduce(MPI_IN_PLACE, &correct, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    *right = correct;
    return (double)correct / (double)n;
}

/* ---- the run ------------------------------------------------------------ */

/* What a run leaves behind for its caller. */
typedef struct run_result {
    double accuracy, ms_per_step, last_loss;
} run_result;

typedef struct run_state {
    model net;
    ladle_optimizer *opt;
    ladle_dataset *train, *test;
    ladle_tensor *x, *t;
    int64_t *labels; /* host copies of the batch's labels and scores */
    double *scores;
    blocks b;
    ckpt_plan ck; /* where checkpoints go, which one the run starts from */
} run_state;

/* The datasets a caller keeps across runs of the same layout (the study's
 * runs differ in batch and statistics only, so every rank's windows are the
 * same): train_run takes them from here and leaves them here. */
typedef struct data_cache {
    ladle_dataset *train, *test;
} data_cache;

static void run_state_free(run_state *r, data_cache *keep)
{
    free(r->labels);
    free(r->scores);
    ladle_tensor_destroy(&r->x);
    ladle_tensor_destroy(&r->t);
    ladle_optimizer_destroy(&r->opt);
    model_destroy(&r->net);
    if (keep) { /* the caller's from now on */
        keep->train = r->train;
        keep->test = r->test;
    } else {
        ladle_dataset_destroy(&r->train);
        ladle_dataset_destroy(&r->test);
    }
}

/* Sets the fields that LeNet-5's and the ResNets' descriptions share from
 * the options and the data: the batch, the images and classes, the
 * layout, batch norm's sync and group, dtype, device and seed. */
#define NET_DESC_FROM_OPTS(d, o, info)    \
    do {                                  \
        (d).batch = (o)->batch;           \
        (d).image = (info)->rows;         \
        (d).classes = (info)->classes;    \
        (d).bn_sync = (o)->bn_sync;       \
        (d).bn_group = (o)->bn_group;     \
        (d).data_ways = (o)->D;           \
        (d).spatial[0] = (o)->Ph;         \
        (d).spatial[1] = (o)->Pw;         \
        (d).dtype = (o)->dtype;           \
        (d).device = (o)->device;         \
        (d).seed = (o)->seed;             \
    } while (0)

/* The network o names for the data: 0, or the exit status 2. */
static int build_network(const opts *o, const ladle_dataset_info *info, run_state *r)
{
    if (o->model == MODEL_LENET) {
        ladle_lenet_desc d;
        ladle_lenet_desc_init(&d);
        NET_DESC_FROM_OPTS(d, o, info);
        d.batchnorm = o->bn;
        d.fc_ways = o->F;
        if (tool_failed(tool,
                        ladle_lenet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &r->net.net),
                        "building LeNet-5"))
            return 2;
    } else {
        static const ladle_resnet_kind kinds[N_MODELS] = {0, LADLE_RESNET20, LADLE_RESNET18,
                                                          LADLE_RESNET8};
        ladle_resnet_desc d;
        ladle_resnet_desc_init(&d, kinds[o->model]);
        if (o->model == MODEL_RESNET8)
            d.width = 16; /* the test model's width 4 is too thin to learn much */
        NET_DESC_FROM_OPTS(d, o, info);
        d.channel_ways = o->C;
        char what[64];
        snprintf(what, sizeof what, "building %s", model_titles[o->model]);
        if (tool_failed(
                tool, ladle_resnet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &r->net.graph),
                what))
            return 2;
    }
    return 0;
}

/* This rank's tile of every image (nothing off the layout), unless kept
 * from a run before or the rank has no input and no loss. */
static ladle_status load_tiles(const opts *o, run_state *r)
{
    ladle_status st = LADLE_OK;
    const blocks *b = &r->b;
    if ((b->has_x || b->has_loss) && r->train == NULL) {
        int64_t r0 = b->has_x ? b->xoff[2] : 0, rows = b->has_x ? b->xbox[2] : 1;
        int64_t c0 = b->has_x ? b->xoff[3] : 0, cols = b->has_x ? b->xbox[3] : 1;
        /* an augmented tile reads around (and, flipped, across) the image:
         * the training set is kept whole, the test set by tile */
        int whole = b->has_x && (o->crop_pad > 0 || o->flip);
        ladle_dataset_desc win; /* this rank's tile, Fashion-MNIST's mean and spread */
        ladle_dataset_desc_init(&win);
        win.row0 = r0, win.rows = rows, win.col0 = c0, win.cols = cols;
        win.mean = 0.2860, win.std = 0.3530;
        ladle_dataset_desc all = win; /* augmented: the whole image */
        all.row0 = all.rows = all.col0 = all.cols = 0;
        st = ladle_dataset_load_dir(o->data, "train", whole ? &all : &win, &r->train);
        if (st == LADLE_OK)
            st = ladle_dataset_load_dir(o->data, "t10k", &win, &r->test);
    }
    return st;
}

/* The optimizer over the network's parameters, the batch tensors and their
 * host copies: 0, or the exit status 1. */
static int make_optimizer_and_batch(const opts *o, const ladle_dataset_info *info,
                                    run_state *r)
{
    const blocks *b = &r->b;
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, o->adam ? LADLE_OPT_ADAM : LADLE_OPT_SGD, o->lr);
    if (!o->adam)
        od.momentum = o->momentum;
    od.weight_decay = o->weight_decay;
    ladle_status st = ladle_optimizer_create(&od, &r->opt);
    if (st == LADLE_OK)
        st = model_add_to(r->opt, &r->net);
    int64_t tz[1] = {b->has_loss ? b->lbox[0] : 0};
    if (st == LADLE_OK)
        st = ladle_tensor_create(o->dtype, o->device, 4, b->xbox, &r->x);
    if (st == LADLE_OK)
        st = ladle_tensor_create(LADLE_I64, o->device, 1, tz, &r->t);
    r->labels = calloc((size_t)tz[0] + 1, sizeof *r->labels);
    r->scores = calloc((size_t)(tz[0] * info->classes) + 1, sizeof *r->scores);
    if (st == LADLE_OK && (r->labels == NULL || r->scores == NULL))
        fail("allocating the host copies of a batch");
    return tool_failed(tool, st, "creating the optimizer and the batch") ? 1 : 0;
}

/* Build the network for the data, load this rank's windows of the data,
 * make the optimizer and the batch tensors: 0, or the exit status. */
static int setup(const opts *o, const ladle_dataset_info *info, run_state *r)
{
    int rc = build_network(o, info, r);
    if (rc != 0)
        return rc;
    find_blocks(&r->net, &r->b);
    if (tool_failed(tool, load_tiles(o, r), "loading the data"))
        return 1;
    return make_optimizer_and_batch(o, info, r);
}

/* One training step on this rank's blocks. */
static ladle_status train_step(const opts *o, run_state *r, const ladle_lr_schedule *sched,
                               int64_t e, int64_t s, int64_t per_epoch, double *loss)
{
    const blocks *b = &r->b;
    ladle_batch_desc bd;
    ladle_batch_desc_init(&bd, o->seed, o->batch);
    bd.offset = b->xoff[0];
    if (o->crop_pad > 0 || o->flip) { /* the training set loaded whole (setup) */
        bd.row_off = b->xoff[2], bd.col_off = b->xoff[3];
        bd.crop_pad = o->crop_pad, bd.flip = o->flip;
    }
    if (b->has_x && ladle_dataset_batch(r->train, &bd, e, s, r->x, NULL))
        fail("reading a batch");
    if (b->has_loss)
        labels_of(r->train, o->seed, e, s, o->batch, b, r->labels, r->t);
    ladle_status st = ladle_optimizer_set_lr(r->opt, ladle_lr_at(sched, e * per_epoch + s));
    if (st == LADLE_OK)
        st = model_zero_grad(&r->net);
    if (st == LADLE_OK)
        st = model_forward(&r->net, r->x, NULL);
    if (st == LADLE_OK)
        st = model_loss(&r->net, r->t, loss);
    if (st == LADLE_OK)
        st = model_backward(&r->net);
    if (st == LADLE_OK)
        st = ladle_optimizer_step(r->opt);
    return st;
}

/* The summary line (rank 0): 0, or 1 with the reason printed. */
static int write_summary(const opts *o, double acc, double ms, double last_loss)
{
    char why[CLI_WHY];
    FILE *f = cli_fopen(tool, o->summary, "a");
    if (f == NULL)
        return 1;
    fprintf(f,
            "ranks %d layout %dx%dx%d fc %d bn %d sync %d group %d epochs %d "
            "accuracy %.4f ms_per_step %.3f last_loss %.4f model %s channels %d\n",
            world, o->D, o->Ph, o->Pw, o->F, o->bn, (int)o->bn_sync, o->bn_group, o->epochs,
            acc, ms, last_loss, model_names[o->model], o->C);
    if (cli_close_ok(f, o->summary, why)) {
        fprintf(stderr, "%s: %s\n", tool, why);
        return 1;
    }
    return 0;
}

/* How a run goes: steps per epoch, every how many steps progress is shown,
 * the learning rate's schedule. */
typedef struct run_plan {
    int64_t per_epoch;
    int progress;
    ladle_lr_schedule sched;
} run_plan;

static void plan_run(const opts *o, const ladle_dataset_info *info, run_plan *p)
{
    p->per_epoch = info->size / o->batch;
    if (o->steps > 0 && o->steps < p->per_epoch)
        p->per_epoch = o->steps;
    p->progress =
        o->progress ? o->progress : (int)(p->per_epoch / 10 > 0 ? p->per_epoch / 10 : 1);
    ladle_lr_schedule_init(&p->sched, o->constant_lr ? LADLE_LR_CONSTANT : LADLE_LR_COSINE,
                           o->lr);
    p->sched.total_steps = (int64_t)o->epochs * p->per_epoch;
}

/* What is trained on what, and how long loading took (rank 0, not silent;
 * t0: when the run began). */
static void announce(const opts *o, const ladle_dataset_info *info, const run_plan *p,
                     double t0)
{
    if (me != 0 || o->silent)
        return;
    char last[32];
    if (o->model == MODEL_LENET)
        snprintf(last, sizeof last, "fc %d", o->F);
    else
        snprintf(last, sizeof last, "channels %d", o->C);
    printf("%s%s on %s (%lld images of %lldx%lld, %lld classes): %d ranks, layout %d "
           "(data) x %dx%d (spatial), %s; batch %lld, %s lr %g, %lld steps per epoch\n",
           model_titles[o->model], o->bn && o->model == MODEL_LENET ? " with batch norm" : "",
           o->data, (long long)info->size, (long long)info->rows, (long long)info->cols,
           (long long)info->classes, world, o->D, o->Ph, o->Pw, last, (long long)o->batch,
           o->adam ? "Adam" : "SGD", o->lr, (long long)p->per_epoch);
    if (layout_ranks(o) < world)
        printf("(ranks %d-%d take no part in this layout)\n", layout_ranks(o), world - 1);
    printf("data loaded in %.1f s\n", MPI_Wtime() - t0);
    fflush(stdout);
}

/* A run's training so far: the divergence watch, the first failure, the
 * last loss and test accuracy, the time and steps trained; and the epoch
 * under way: when it began, its losses' sum and count. */
typedef struct run_totals {
    watch w;
    ladle_status broken;
    double final_acc, last_loss, train_time;
    int64_t steps_done;
    double epoch_t0, sum;
    int64_t seen;
} run_totals;

/* The progress line after step s of epoch e (rank 0, not quiet, every
 * p->progress steps and at the epoch's end, not for a diverged loss). */
static void show_progress(const opts *o, const run_plan *p, const run_totals *t, int64_t e,
                          int64_t s, double loss)
{
    int show = !o->quiet && me == 0 && ((s + 1) % p->progress == 0 || s + 1 == p->per_epoch);
    if (!show || diverged(&t->w, loss))
        return;
    int64_t per_epoch = p->per_epoch, seen = t->seen;
    double el = MPI_Wtime() - t->epoch_t0, rate = (double)(seen * o->batch) / el;
    double left = (double)(per_epoch - s - 1) * el / (double)seen +
                  (double)(o->epochs - e - 1) * (double)per_epoch * el / (double)seen;
    char eta[32];
    clock_text(left, eta, sizeof eta);
    printf("epoch %lld/%d  step %lld/%lld  loss %.4f (mean %.4f)  %.0f images/s  "
           "eta %s\n",
           (long long)e + 1, o->epochs, (long long)s + 1, (long long)per_epoch, loss,
           t->sum / (double)seen, rate, eta);
    fflush(stdout);
}

/* The steps of epoch e from step s0: 0, or 1 where the watch stopped the
 * run (a failure or a divergence, reported). */
static int train_epoch(const opts *o, run_state *r, const run_plan *p, int64_t e, int64_t s0,
                       run_totals *t)
{
    for (int64_t s = s0; s < p->per_epoch; s++) {
        double loss = 0;
        if (t->broken == LADLE_OK)
            t->broken = train_step(o, r, &p->sched, e, s, p->per_epoch, &loss);
        watch_post(&t->w, e, s, t->broken, r->b.has_loss, loss);
        if (watch_settle(&t->w, 1))
            return 1;
        if (t->broken != LADLE_OK)
            continue;
        t->sum += loss;
        t->seen++;
        t->steps_done++;
        t->last_loss = loss;
        show_progress(o, p, t, e, s, loss);
    }
    return 0;
}

/* After epoch e's training (epoch_time seconds): the test accuracy, its
 * line, the checkpoint: 0, or 1 with the failure printed. */
static int score_epoch(const opts *o, const ladle_dataset_info *info,
                       const ladle_dataset_info *tinfo, run_state *r, int64_t e,
                       double epoch_time, run_totals *t)
{
    int64_t right = 0;
    int64_t scored = o->test_limit && o->test_limit < tinfo->size ? o->test_limit : tinfo->size;
    ladle_status st = LADLE_OK;
    t->final_acc = accuracy(&r->net, r->test, scored, o, &r->b, r->x, r->scores, &right, &st);
    if (tool_failed(tool, st, "evaluating on the test set"))
        return 1;
    if (me == 0 && !o->silent) {
        printf("epoch %lld: test accuracy %.2f%% (%lld/%lld), mean train loss %.4f, "
               "%.1f s\n",
               (long long)e + 1, 100 * t->final_acc, (long long)right, (long long)scored,
               t->seen ? t->sum / (double)t->seen : 0.0, epoch_time);
        fflush(stdout);
    }
    if (o->checkpoint) {
        int64_t meta[META_N];
        char path[CKPT_PATH_MAX];
        meta_of(o, info, e + 1, meta);
        ckpt_target(o, &r->ck, e + 1, path);
        st = model_save(path, &r->net, r->opt, META_N, meta);
        if (tool_failed(tool, st, "saving the checkpoint"))
            return 1;
        if (r->ck.dir && me == 0)
            ckpt_prune(o, e + 1);
    }
    return 0;
}

/* A run trained to its end: *res, the summary line and the last line
 * (rank 0): 0, or 1 where the summary could not be written. */
static int finish_run(const opts *o, const run_totals *t, run_result *res)
{
    int rc = 0;
    double per_step = t->steps_done ? t->train_time / (double)t->steps_done : 0;
    res->accuracy = t->final_acc;
    res->ms_per_step = 1e3 * per_step;
    res->last_loss = t->last_loss;
    if (me == 0 && o->summary)
        rc = write_summary(o, t->final_acc, 1e3 * per_step, t->last_loss);
    if (me == 0 && rc == 0 && !o->silent)
        printf("done: test accuracy %.2f%%, %.2f ms per step over %lld steps\n",
               100 * t->final_acc, 1e3 * per_step, (long long)t->steps_done);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return rc;
}

/* Train as o says: 0 when every asked-for epoch was trained and scored, the
 * exit status (1 or 2) otherwise, with the reason printed. *res gets the
 * final test accuracy and the mean step time (on every rank). keep (may be
 * NULL) carries the datasets from one run to the next of the same layout. */
static int train_run(const opts *op, run_result *res, data_cache *keep)
{
    opts o = *op;
    run_state r = {0};
    if (keep) {
        r.train = keep->train;
        r.test = keep->test;
    }
    ladle_dataset_info info, tinfo;
    const char *out_opt[1] = {"--summary"}, *out_path[1] = {o.summary};
    int rc = 0;
    if (tool_outputs_ok(tool, 1, out_opt, out_path))
        return 2;
    if ((rc = ckpt_prepare(&o, &r.ck)) != 0)
        return rc;
    double t0 = MPI_Wtime();
    if ((rc = probe_data(&o, &info, &tinfo)) != 0 || (rc = setup(&o, &info, &r)) != 0)
        goto out;
    run_plan plan;
    plan_run(&o, &info, &plan);
    int64_t start_epoch = 0, start_step = 0;
    if (r.ck.from[0] &&
        (rc = resume_from(&o, r.ck.from, &info, &r.net, r.opt, &start_epoch, &start_step)))
        goto out;
    announce(&o, &info, &plan, t0);

    run_totals t = {.broken = LADLE_OK};
    t.w.floor_ = log((double)info.classes);
    for (int64_t e = start_epoch; e < o.epochs && rc == 0; e++) {
        t.epoch_t0 = MPI_Wtime(), t.sum = 0, t.seen = 0;
        rc = train_epoch(&o, &r, &plan, e, e == start_epoch ? start_step : 0, &t);
        if (watch_settle(&t.w, 0) || rc) {
            rc = 1;
            break;
        }
        double epoch_time = MPI_Wtime() - t.epoch_t0;
        t.train_time += epoch_time;
        if ((rc = score_epoch(&o, &info, &tinfo, &r, e, epoch_time, &t)) != 0)
            break;
        if (o.stop_after && e + 1 >= o.stop_after) {
            if (me == 0)
                printf("stopping after epoch %lld as asked\n", (long long)e + 1);
            break;
        }
    }
    if (rc == 0)
        rc = finish_run(&o, &t, res);
out:
    run_state_free(&r, keep);
    return rc;
}

#endif /* LADLE_TOOLS_TRAIN_H */
