/*
 * The training loop of ladle-train and ladle-bn-study: LeNet-5 on an IDX
 * dataset over a layout, with options, progress lines, test accuracy,
 * checkpoints. Tool code, included by the two programs.
 */
#ifndef LADLE_TOOLS_TRAIN_H
#define LADLE_TOOLS_TRAIN_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct opts {
    const char *data;
    int epochs, steps, progress, bn, bn_group, D, Ph, Pw, F, adam, cosine, quiet;
    int stop_after; /* leave after this many epochs (an interruption), 0: never */
    int64_t batch;
    double lr, momentum, weight_decay;
    ladle_bn_sync bn_sync;
    uint64_t seed;
    ladle_dtype dtype;
    const char *checkpoint;
    int resume;
    const char *summary; /* a file for one machine-readable line at the end */
    /* pipeline mode (pipe_style -1: off) */
    int pipe_style, pipe_stages, pipe_chunks, pipe_nrep, microbatches;
    int pipe_rep[64];
    const char *timeline;
} opts;

static int me, world;

static void usage(void)
{
    if (me != 0)
        return;
    printf("usage: mpiexec -n N ladle-train [options]\n"
           "Train LeNet-5 on Fashion-MNIST over a layout of the N ranks.\n\n"
           "layout (D x Ph x Pw ranks train; F <= Ph x Pw):\n"
           "  --data-ways D        split the batch D ways (1)\n"
           "  --spatial PhxPw      split each image into Ph x Pw tiles (1x1)\n"
           "  --fc-ways F          split the first two linear layers F ways (1)\n"
           "model and training:\n"
           "  --bn                 batch norm after each convolution\n"
           "  --bn-sync MODE       global | local | group (global)\n"
           "  --bn-group G         ranks per group with --bn-sync group (2)\n"
           "  --epochs E           (3)          --batch B     global batch (64)\n"
           "  --lr R               (0.03)       --momentum M  SGD momentum (0.9)\n"
           "  --adam               Adam instead of SGD (use --lr 0.001)\n"
           "  --constant-lr        no cosine decay of the rate over the run\n"
           "  --weight-decay W     (0)\n"
           "  --seed S             weights and data order (1)\n"
           "  --dtype f32|f64      (f32)\n"
           "  --steps K            at most K steps per epoch (all)\n"
           "data, output, state:\n"
           "  --data DIR           the IDX files (%s)\n"
           "  --progress K         a progress line every K steps (about 10 per epoch)\n"
           "  --quiet              no progress lines\n"
           "  --checkpoint PATH    save the training state after each epoch\n"
           "  --resume             start from the checkpoint at PATH\n"
           "  --stop-after E       leave after epoch E, as if interrupted (resume later)\n"
           "  --summary FILE       append one line of results to FILE\n"
           "pipeline (instead of the layout above; see docs/pipeline.md):\n"
           "  --pipeline S         gpipe | 1f1b | zbh1 | interleaved | hybrid\n"
           "  --stages N           stages (one per rank; hybrid: at least 2, planner's choice)\n"
           "  --chunks V           stages per rank for interleaved (2)\n"
           "  --replicas R0,R1,..  hybrid: replicas per stage (default: the planner's)\n"
           "  --microbatches M     microbatches per batch (4)\n"
           "  --timeline FILE      SVG of the last step's measured timeline\n",
           LADLE_FASHION_MNIST_DIR);
}

static int bad(const char *what, const char *value)
{
    if (me == 0)
        fprintf(stderr, "ladle-train: bad %s '%s' (see --help)\n", what, value ? value : "");
    return 2;
}

static int parse(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->data = LADLE_FASHION_MNIST_DIR;
    o->epochs = 3;
    o->batch = 64;
    o->lr = 0.03;
    o->cosine = 1;
    o->momentum = 0.9;
    o->D = o->Ph = o->Pw = o->F = 1;
    o->bn_group = 2;
    o->bn_sync = LADLE_BN_SYNC_GLOBAL;
    o->seed = 1;
    o->dtype = LADLE_F32;
    o->pipe_style = -1;
    o->pipe_chunks = 2;
    o->microbatches = 4;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t shape[LADLE_MAX_NDIM];
        int nd;
#define NEXT()                                                                           \
    do {                                                                                 \
        if (v == NULL)                                                                   \
            return bad(a, "(missing)");                                                  \
        i++;                                                                             \
    } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            return 1;
        } else if (!strcmp(a, "--bn")) {
            o->bn = 1;
        } else if (!strcmp(a, "--adam")) {
            o->adam = 1;
        } else if (!strcmp(a, "--constant-lr")) {
            o->cosine = 0;
        } else if (!strcmp(a, "--quiet")) {
            o->quiet = 1;
        } else if (!strcmp(a, "--resume")) {
            o->resume = 1;
        } else if (!strcmp(a, "--data")) {
            NEXT();
            o->data = v;
        } else if (!strcmp(a, "--checkpoint")) {
            NEXT();
            o->checkpoint = v;
        } else if (!strcmp(a, "--pipeline")) {
            NEXT();
            if ((o->pipe_style = ladle_pipe_style_parse(v)) < 0)
                return bad(a, v);
        } else if (!strcmp(a, "--timeline")) {
            NEXT();
            o->timeline = v;
        } else if (!strcmp(a, "--replicas")) {
            int64_t r[64];
            NEXT();
            if (cli_parse_ints(v, r, 64, &o->pipe_nrep) || o->pipe_nrep < 1)
                return bad(a, v);
            for (int k = 0; k < o->pipe_nrep; k++) {
                if (r[k] < 1)
                    return bad(a, v);
                o->pipe_rep[k] = (int)r[k];
            }
        } else if (!strcmp(a, "--summary")) {
            NEXT();
            o->summary = v;
        } else if (!strcmp(a, "--spatial")) {
            NEXT();
            if (cli_parse_shape(v, &nd, shape) || nd != 2 || shape[0] < 1 || shape[1] < 1)
                return bad(a, v);
            o->Ph = (int)shape[0];
            o->Pw = (int)shape[1];
        } else if (!strcmp(a, "--bn-sync")) {
            NEXT();
            if (!strcmp(v, "global"))
                o->bn_sync = LADLE_BN_SYNC_GLOBAL;
            else if (!strcmp(v, "local"))
                o->bn_sync = LADLE_BN_SYNC_LOCAL;
            else if (!strcmp(v, "group"))
                o->bn_sync = LADLE_BN_SYNC_GROUP;
            else
                return bad(a, v);
        } else if (!strcmp(a, "--dtype")) {
            NEXT();
            if (!strcmp(v, "f32"))
                o->dtype = LADLE_F32;
            else if (!strcmp(v, "f64"))
                o->dtype = LADLE_F64;
            else
                return bad(a, v);
        } else {
            /* the numeric options */
            char *end = NULL;
            NEXT();
            double x = strtod(v, &end);
            if (end == v || *end != '\0')
                return bad(a, v);
            if (!strcmp(a, "--epochs") && x >= 1)
                o->epochs = (int)x;
            else if (!strcmp(a, "--steps") && x >= 1)
                o->steps = (int)x;
            else if (!strcmp(a, "--stop-after") && x >= 1)
                o->stop_after = (int)x;
            else if (!strcmp(a, "--progress") && x >= 1)
                o->progress = (int)x;
            else if (!strcmp(a, "--batch") && x >= 1)
                o->batch = (int64_t)x;
            else if (!strcmp(a, "--lr") && x > 0)
                o->lr = x;
            else if (!strcmp(a, "--momentum") && x >= 0 && x < 1)
                o->momentum = x;
            else if (!strcmp(a, "--weight-decay") && x >= 0)
                o->weight_decay = x;
            else if (!strcmp(a, "--seed") && x >= 0)
                o->seed = (uint64_t)x;
            else if (!strcmp(a, "--data-ways") && x >= 1)
                o->D = (int)x;
            else if (!strcmp(a, "--fc-ways") && x >= 1)
                o->F = (int)x;
            else if (!strcmp(a, "--bn-group") && x >= 1)
                o->bn_group = (int)x;
            else if (!strcmp(a, "--stages") && x >= 1 && x <= 64)
                o->pipe_stages = (int)x;
            else if (!strcmp(a, "--chunks") && x >= 1 && x <= 8)
                o->pipe_chunks = (int)x;
            else if (!strcmp(a, "--microbatches") && x >= 1)
                o->microbatches = (int)x;
            else
                return bad(a, v);
        }
#undef NEXT
    }
    if (o->resume && o->checkpoint == NULL)
        return bad("--resume without --checkpoint", "");
    if (o->D * o->Ph * o->Pw > world) {
        if (me == 0)
            fprintf(stderr, "ladle-train: the layout %d x %dx%d needs %d ranks; there are %d\n",
                    o->D, o->Ph, o->Pw, o->D * o->Ph * o->Pw, world);
        return 2;
    }
    return 0;
}

static void fail(const char *what)
{
    fprintf(stderr, "ladle-train (rank %d): %s: %s\n", me, what, ladle_error_message());
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

/* This rank's input block (offset and shape in the global batch) and label
 * block (rows of the loss's input). */
typedef struct blocks {
    int64_t xoff[4], xbox[4];
    int64_t loff[2], lbox[2];
    int has_x, has_loss;
} blocks;

static void find_blocks(ladle_network *net, blocks *b)
{
    const ladle_layout *lx = ladle_op_x_layout(ladle_network_layer(net, 0));
    const ladle_layout *ll = ladle_op_x_layout(ladle_network_loss_op(net));
    ladle_layout_box(lx, LADLE_SELF, b->xoff, b->xbox);
    ladle_layout_box(ll, LADLE_SELF, b->loff, b->lbox);
    b->has_x = ladle_layout_local_volume(lx, LADLE_SELF) > 0;
    b->has_loss = ladle_partition_active(ladle_layout_partition(ll));
}

/* Fill the label block of batch `step`. */
static void labels_of(const ladle_dataset *ds, uint64_t seed, int64_t epoch, int64_t step,
                      int64_t batch, const blocks *b, ladle_tensor *t)
{
    int64_t *l = ladle_tensor_data(t);
    for (int64_t i = 0; i < b->lbox[0]; i++)
        l[i] = ladle_dataset_label(
            ds, ladle_dataset_sample(ds, seed, epoch, step * batch + b->loff[0] + i));
}

/* Test accuracy over the whole test set (the last batch padded). */
static double accuracy(ladle_network *net, const ladle_dataset *test, int64_t n, const opts *o,
                       const blocks *b, ladle_tensor *x, ladle_tensor *t, int64_t *right)
{
    int64_t correct = 0;
    int64_t steps = (n + o->batch - 1) / o->batch;
    ladle_network_set_training(net, 0);
    for (int64_t s = 0; s < steps; s++) {
        const ladle_tensor *y = NULL;
        if (b->has_x && ladle_dataset_batch(test, 0, 0, s, o->batch, b->xoff[0], 0, 0, x, NULL))
            fail("reading the test set");
        if (ladle_network_forward(net, x, &y))
            fail("forward");
        if (!b->has_loss)
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
                double v = ladle_tensor_dtype(y) == LADLE_F32
                               ? ((const float *)ladle_tensor_data(y))[at]
                               : ((const double *)ladle_tensor_data(y))[at];
                if (v > bv) {
                    bv = v;
                    best = c;
                }
            }
            correct += best == label;
        }
    }
    (void)t;
    ladle_network_set_training(net, 1);
    MPI_Allreduce(MPI_IN_PLACE, &correct, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    *right = correct;
    return (double)correct / (double)n;
}

/* Train as o says; the final test accuracy and the mean step time come
 * back (on every rank). */
static void train_run(opts *op, double *accuracy_out, double *ms_per_step)
{
    opts o = *op;

    ladle_lenet_desc d;
    ladle_lenet_desc_init(&d);
    d.batch = o.batch;
    d.batchnorm = o.bn;
    d.bn_sync = o.bn_sync;
    d.bn_group = o.bn_group;
    d.data_ways = o.D;
    d.spatial[0] = o.Ph;
    d.spatial[1] = o.Pw;
    d.fc_ways = o.F;
    d.dtype = o.dtype;
    d.seed = o.seed;
    ladle_network *net = NULL;
    if (ladle_lenet_create(&d, MPI_COMM_WORLD, &net))
        fail("building the network");
    blocks b;
    find_blocks(net, &b);

    /* each rank keeps its tile of every image (nothing off the layout) */
    ladle_dataset *train = NULL, *test = NULL;
    double t0 = MPI_Wtime();
    if (b.has_x || b.has_loss) {
        int64_t r0 = b.has_x ? b.xoff[2] : 0, rows = b.has_x ? b.xbox[2] : 1;
        int64_t c0 = b.has_x ? b.xoff[3] : 0, cols = b.has_x ? b.xbox[3] : 1;
        if (ladle_dataset_load_dir(o.data, "train", r0, rows, c0, cols, 0.2860, 0.3530, &train) ||
            ladle_dataset_load_dir(o.data, "t10k", r0, rows, c0, cols, 0.2860, 0.3530, &test))
            fail("loading the data");
    }
    /* the sizes every rank loops over, data or not */
    int64_t nb[2] = {train ? ladle_dataset_size(train) : 0, test ? ladle_dataset_size(test) : 0};
    MPI_Allreduce(MPI_IN_PLACE, nb, 2, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    int64_t per_epoch = nb[0] / o.batch;
    if (o.steps > 0 && o.steps < per_epoch)
        per_epoch = o.steps;
    int progress = o.progress ? o.progress : (int)(per_epoch / 10 > 0 ? per_epoch / 10 : 1);

    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, o.adam ? LADLE_OPT_ADAM : LADLE_OPT_SGD, o.lr);
    if (!o.adam)
        od.momentum = o.momentum;
    od.weight_decay = o.weight_decay;
    ladle_optimizer *opt = NULL;
    if (ladle_optimizer_create(&od, &opt) || ladle_optimizer_add_network(opt, net))
        fail("creating the optimizer");
    ladle_lr_schedule sched;
    ladle_lr_schedule_init(&sched, o.cosine ? LADLE_LR_COSINE : LADLE_LR_CONSTANT, o.lr);
    sched.total_steps = (int64_t)o.epochs * per_epoch;

    int64_t start_epoch = 0, start_step = 0;
    if (o.resume) {
        int64_t meta[4];
        int nm = 0;
        if (ladle_checkpoint_load(o.checkpoint, MPI_COMM_WORLD, net, opt, 4, meta, &nm))
            fail("resuming");
        if (nm >= 2) {
            start_epoch = meta[0];
            start_step = meta[1];
        }
        if (me == 0)
            printf("resumed from %s at epoch %lld, step %lld\n", o.checkpoint,
                   (long long)start_epoch + 1, (long long)start_step);
    }
    if (me == 0) {
        printf("LeNet-5%s on %s: %d ranks, layout %d (data) x %dx%d (spatial), fc %d; batch "
               "%lld, %s lr %g, %lld steps per epoch\n",
               o.bn ? " with batch norm" : "", o.data, world, o.D, o.Ph, o.Pw, o.F,
               (long long)o.batch, o.adam ? "Adam" : "SGD", o.lr, (long long)per_epoch);
        if (o.D * o.Ph * o.Pw < world)
            printf("(ranks %d-%d take no part in this layout)\n", o.D * o.Ph * o.Pw, world - 1);
        printf("data loaded in %.1f s\n", MPI_Wtime() - t0);
        fflush(stdout);
    }

    ladle_tensor *x = NULL, *t = NULL;
    int64_t tz[1] = {b.has_loss ? b.lbox[0] : 0};
    if (ladle_tensor_create(o.dtype, 4, b.xbox, &x) || ladle_tensor_create(LADLE_I64, 1, tz, &t))
        fail("allocating the batch");
    double final_acc = 0, last_loss = 0, train_time = 0;
    for (int64_t e = start_epoch; e < o.epochs; e++) {
        double te = MPI_Wtime(), sum = 0;
        int64_t seen = 0;
        for (int64_t s = e == start_epoch ? start_step : 0; s < per_epoch; s++) {
            double loss = 0;
            if (b.has_x && ladle_dataset_batch(train, o.seed, e, s, o.batch, b.xoff[0], 0, 0, x,
                                               NULL))
                fail("reading a batch");
            if (b.has_loss)
                labels_of(train, o.seed, e, s, o.batch, &b, t);
            ladle_optimizer_set_lr(opt, ladle_lr_at(&sched, e * per_epoch + s));
            if (ladle_network_zero_grad(net) || ladle_network_forward(net, x, NULL) ||
                ladle_network_loss(net, t, &loss) || ladle_network_backward(net, 1) ||
                ladle_optimizer_step(opt))
                fail("a training step");
            sum += loss;
            seen++;
            last_loss = loss;
            if (!o.quiet && me == 0 && ((s + 1) % progress == 0 || s + 1 == per_epoch)) {
                double el = MPI_Wtime() - te, rate = (double)(seen * o.batch) / el;
                double left = (double)(per_epoch - s - 1) * el / (double)seen +
                              (double)(o.epochs - e - 1) * (double)per_epoch * el / (double)seen;
                char eta[32];
                clock_text(left, eta, sizeof eta);
                printf("epoch %lld/%d  step %lld/%lld  loss %.4f (mean %.4f)  %.0f images/s  "
                       "eta %s\n",
                       (long long)e + 1, o.epochs, (long long)s + 1, (long long)per_epoch, loss,
                       sum / (double)seen, rate, eta);
                fflush(stdout);
            }
        }
        double epoch_time = MPI_Wtime() - te;
        train_time += epoch_time;
        int64_t right = 0;
        final_acc = accuracy(net, test, nb[1], &o, &b, x, t, &right);
        if (me == 0) {
            printf("epoch %lld: test accuracy %.2f%% (%lld/%lld), mean train loss %.4f, %.1f s\n",
                   (long long)e + 1, 100 * final_acc, (long long)right,
                   (long long)nb[1],
                   seen ? sum / (double)seen : 0.0, epoch_time);
            fflush(stdout);
        }
        if (o.checkpoint) {
            int64_t meta[3] = {e + 1, 0, (int64_t)o.seed};
            if (ladle_checkpoint_save(o.checkpoint, MPI_COMM_WORLD, net, opt, 3, meta))
                fail("saving the checkpoint");
        }
        if (o.stop_after && e + 1 >= o.stop_after && e + 1 < o.epochs) {
            if (me == 0)
                printf("stopping after epoch %lld as asked\n", (long long)e + 1);
            o.epochs = (int)e + 1;
            break;
        }
    }
    double per_step = train_time / (double)((o.epochs - start_epoch) * per_epoch + 1e-9);
    if (me == 0) {
        printf("done: test accuracy %.2f%%, %.2f ms per step\n", 100 * final_acc, 1e3 * per_step);
        if (o.summary) {
            FILE *f = fopen(o.summary, "a");
            if (f) {
                fprintf(f, "ranks %d layout %dx%dx%d fc %d bn %d sync %d group %d epochs %d "
                           "accuracy %.4f ms_per_step %.3f last_loss %.4f\n",
                        world, o.D, o.Ph, o.Pw, o.F, o.bn, (int)o.bn_sync, o.bn_group, o.epochs,
                        final_acc, 1e3 * per_step, last_loss);
                fclose(f);
            }
        }
    }
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&t);
    ladle_optimizer_destroy(&opt);
    ladle_network_destroy(&net);
    ladle_dataset_destroy(&train);
    ladle_dataset_destroy(&test);
    if (accuracy_out)
        *accuracy_out = final_acc;
    if (ms_per_step)
        *ms_per_step = 1e3 * per_step;
}

#endif /* LADLE_TOOLS_TRAIN_H */
