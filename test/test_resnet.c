/* ResNets made by the builder (ladle/builder.h, ladle/models.h): a small
 * ResNet on every layout (data, spatial, data x spatial, channels, channels
 * x spatial) equals the same model built sequentially on the whole batch
 * (logits, loss, input and parameter gradients, batch-norm running
 * statistics; f64, 1e-10), and so do 5 SGD steps; the bottleneck variant on
 * one layout; the sequential ResNet's parameter names and counts are those
 * of its definition (worked out by hand below); bad descriptors and builder
 * calls are refused with their status on every rank. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

#define N 4
#define IMG 12
#define CLASSES 5

typedef struct lay {
    int d, ph, pw, c;
} lay;

static int need(const lay *l)
{
    return l->c > 1 ? l->c * l->c * l->ph * l->pw : l->d * l->ph * l->pw;
}

/* A small ResNet of kind on layout l, or sequential (l NULL). */
static ladle_graph *model(ladle_resnet_kind kind, const lay *l)
{
    ladle_resnet_desc d;
    ladle_graph *g = NULL;
    LT_OK(ladle_resnet_desc_init(&d, kind));
    d.batch = N;
    d.image = IMG;
    d.classes = CLASSES;
    d.dtype = LADLE_F64;
    d.device = lt_device();
    d.seed = 7;
    if (l) {
        d.data_ways = l->d;
        d.spatial[0] = l->ph;
        d.spatial[1] = l->pw;
        d.channel_ways = l->c;
    } else {
        d.sequential = 1;
    }
    LT_OK(ladle_resnet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &g));
    return g;
}

/* The classifier, last in the layer order: its y layout boxes the logits
 * and the labels. */
static ladle_op *head(const ladle_graph *g)
{
    return ladle_graph_layer(g, ladle_graph_num_layers(g) - 1);
}

/* This rank's box (offset, shape) of a global tensor under layout l (the
 * whole tensor for NULL). */
static void box(const ladle_layout *l, const ladle_tensor *global, int64_t *off, int64_t *shape)
{
    for (int d = 0; d < ladle_tensor_ndim(global); d++)
        off[d] = 0, shape[d] = ladle_tensor_shape(global)[d];
    if (l)
        LT_OK(ladle_layout_box(l, LADLE_SELF, off, shape));
}

/* One forward, loss and backward on this rank's blocks of the batch. */
static double step(ladle_graph *g, const ladle_tensor *X, const int64_t *labels,
                   const ladle_tensor **y)
{
    int64_t off[4], shape[4], loff[2], lshape[2];
    box(ladle_graph_value_layout(g, 0), X, off, shape);
    ladle_tensor *x = lt_tensor(LADLE_F64, 4, shape);
    lt_box_extract(X, off, x);
    ladle_tensor *probe = lt_tensor(LADLE_F64, 2, (int64_t[]){N, CLASSES});
    box(ladle_op_y_layout(head(g)), probe, loff, lshape);
    ladle_tensor *t = lt_tensor(LADLE_I64, 1, lshape);
    for (int64_t i = 0; i < lshape[0]; i++)
        lt_set(t, i, (double)labels[loff[0] + i]);
    double loss = 0;
    const ladle_tensor *ys[1] = {NULL};
    LT_OK(ladle_graph_forward(g, 1, (const ladle_tensor *const *)&x, ys));
    if (y)
        *y = ys[0];
    LT_OK(ladle_graph_loss(g, 1, (const ladle_tensor *const *)&t, &loss));
    LT_OK(ladle_graph_backward(g, 1));
    LT_DESTROY(&x, &t, &probe);
    return loss;
}

/* The largest error of every parameter (grad 0) or gradient (grad 1)
 * shard of d against the sequential r's, and of the running statistics of
 * the batch norms. */
static double param_err(const ladle_graph *d, const ladle_graph *r, int grad)
{
    double err = 0;
    LT_ASSERT(ladle_graph_num_layers(d) == ladle_graph_num_layers(r) &&
                  ladle_graph_num_params(d) == ladle_graph_num_params(r),
              "%d layers and %d parameters, %d and %d sequentially", ladle_graph_num_layers(d),
              ladle_graph_num_params(d), ladle_graph_num_layers(r), ladle_graph_num_params(r));
    for (int i = 0; i < ladle_graph_num_layers(d); i++) {
        ladle_op *a = ladle_graph_layer(d, i), *s = ladle_graph_layer(r, i);
        int64_t off[LADLE_MAX_NDIM];
        for (int q = 0; q < ladle_op_num_params(a); q++) {
            LT_OK(ladle_op_param_shard(a, q, NULL, NULL, off, NULL));
            err = fmax(err, lt_box_error(grad ? ladle_op_grad(s, q) : ladle_op_param(s, q), off,
                                         grad ? ladle_op_grad(a, q) : ladle_op_param(a, q)));
        }
        ladle_tensor *m = NULL, *v = NULL, *ms = NULL, *vs = NULL;
        if (ladle_batchnorm_running_stats(a, &m, &v) != LADLE_OK) {
            ladle_error_clear();
            continue;
        }
        LT_OK(ladle_batchnorm_running_stats(s, &ms, &vs));
        LT_OK(ladle_op_param_shard(a, 0, NULL, NULL, off, NULL));
        if (m == NULL) /* a rank without channels (after the collective checks) */
            continue;
        err = fmax(err, fmax(lt_box_error(ms, off, m), lt_box_error(vs, off, v)));
    }
    return err;
}

/* The logits yd of d against the sequential yr; the input gradients. */
static double value_err(const ladle_graph *d, const ladle_tensor *yd, const ladle_graph *r,
                        const ladle_tensor *yr)
{
    const ladle_tensor *a, *ref;
    int64_t off[4], shape[4];
    box(ladle_op_y_layout(head(d)), yr, off, shape);
    double err = lt_box_error(yr, off, yd);
    LT_OK(ladle_graph_value_grad(d, 0, &a));
    LT_OK(ladle_graph_value_grad(r, 0, &ref));
    box(ladle_graph_value_layout(d, 0), ref, off, shape);
    return fmax(err, lt_box_error(ref, off, a));
}

static const lay layouts[] = {
    {1, 1, 1, 1}, {2, 1, 1, 1}, {1, 2, 1, 1}, {1, 1, 2, 1}, {1, 2, 2, 1},
    {2, 2, 1, 1}, {3, 1, 1, 1}, {1, 1, 1, 2}, {1, 2, 1, 2},
};
#define NLAYOUTS ((int)(sizeof layouts / sizeof layouts[0]))

static const int64_t labels[N] = {1, 4, 0, 3};

static ladle_tensor *images(uint64_t seed)
{
    ladle_tensor *X = lt_tensor(LADLE_F64, 4, (int64_t[]){N, 1, IMG, IMG});
    LT_OK(ladle_tensor_fill_random(X, seed, 0));
    return X;
}

/* Does this rank know the loss (a rank of the head)? */
static int knows_loss(const ladle_graph *g)
{
    const ladle_layout *l = ladle_op_y_layout(head(g));
    int64_t shape[2] = {1, 1};
    if (l)
        LT_OK(ladle_layout_box(l, LADLE_SELF, NULL, shape));
    return shape[0] > 0;
}

/* Layout l of kind against the sequential r (run on X already: yr, lr). */
static void twin(ladle_resnet_kind kind, const lay *l, const ladle_graph *r, const ladle_tensor *yr,
                 double lr, const ladle_tensor *X)
{
    const ladle_tensor *yd = NULL;
    ladle_graph *d = model(kind, l);
    double ld = step(d, X, labels, &yd);
    double ey = value_err(d, yd, r, yr), ew = param_err(d, r, 1);
    double el = knows_loss(d) ? fabs(ld - lr) / (1 + fabs(lr)) : 0;
    LT_ASSERT(ey < 1e-10 && ew < 1e-10 && el < 1e-10,
              "kind %d, layout %d x %dx%d x c%d: logits/dx %.2e, dW/stats %.2e, loss %.2e", kind,
              l->d, l->ph, l->pw, l->c, ey, ew, el);
    ladle_graph_destroy(&d);
}

START_TEST(resnet_twin)
{
    ladle_tensor *X = images(11);
    const ladle_tensor *yr = NULL;
    ladle_graph *r = model(LADLE_RESNET8, NULL);
    double lr = step(r, X, labels, &yr);
    LT_ASSERT(isfinite(lr) && lr > 0, "loss %g", lr);
    for (int k = 0; k < NLAYOUTS; k++)
        if (need(&layouts[k]) <= lt_size)
            twin(LADLE_RESNET8, &layouts[k], r, yr, lr, X);
    ladle_graph_destroy(&r);
    ladle_tensor_destroy(&X);
}
END_TEST

START_TEST(bottleneck_twin)
{
    static const lay pick[] = {{1, 1, 1, 2}, {2, 1, 1, 1}, {1, 1, 1, 1}};
    ladle_tensor *X = images(12);
    const ladle_tensor *yr = NULL;
    ladle_graph *r = model(LADLE_RESNET_BOTTLENECK_TINY, NULL);
    double lr = step(r, X, labels, &yr);
    const lay *l = &pick[2];
    for (int k = 1; k >= 0; k--)
        if (need(&pick[k]) <= lt_size)
            l = &pick[k];
    twin(LADLE_RESNET_BOTTLENECK_TINY, l, r, yr, lr, X);
    ladle_graph_destroy(&r);
    ladle_tensor_destroy(&X);
}
END_TEST

/* 5 SGD steps (momentum) of a layout equal the sequential run's. */
static void train_twin(const lay *l, const ladle_tensor *X)
{
    ladle_graph *g[2] = {model(LADLE_RESNET8, NULL), model(LADLE_RESNET8, l)};
    ladle_optimizer *opt[2] = {NULL, NULL};
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, LADLE_OPT_SGD, 0.05);
    od.momentum = 0.9;
    for (int k = 0; k < 2; k++) {
        LT_OK(ladle_optimizer_create(&od, &opt[k]));
        LT_OK(ladle_optimizer_add_graph(opt[k], g[k]));
    }
    double loss[2] = {0, 0};
    for (int s = 0; s < 5; s++)
        for (int k = 0; k < 2; k++) {
            LT_OK(ladle_graph_zero_grad(g[k]));
            loss[k] = step(g[k], X, labels, NULL);
            LT_OK(ladle_optimizer_step(opt[k]));
        }
    double ew = param_err(g[1], g[0], 0);
    double el = knows_loss(g[1]) ? fabs(loss[1] - loss[0]) / (1 + fabs(loss[0])) : 0;
    LT_ASSERT(ew < 1e-10 && el < 1e-10,
              "layout %d x %dx%d x c%d: parameters %.2e apart after 5 steps, last loss %.2e", l->d,
              l->ph, l->pw, l->c, ew, el);
    for (int k = 0; k < 2; k++) {
        ladle_optimizer_destroy(&opt[k]);
        ladle_graph_destroy(&g[k]);
    }
}

START_TEST(training_twin)
{
    static const lay mixed[] = {{2, 2, 1, 1}, {2, 1, 1, 1}, {1, 1, 1, 1}};
    static const lay channels = {1, 2, 1, 2}, channels1 = {1, 1, 1, 2};
    ladle_tensor *X = images(13);
    for (int k = 0; k < 3; k++)
        if (need(&mixed[k]) <= lt_size) {
            train_twin(&mixed[k], X);
            break;
        }
    if (need(&channels) <= lt_size)
        train_twin(&channels, X);
    else if (need(&channels1) <= lt_size)
        train_twin(&channels1, X);
    ladle_tensor_destroy(&X);
}
END_TEST

/* ResNet-20's parameters, counted by hand for 1 input channel and 10
 * classes: stem 1*16*9 + 2*16; stage 1: 3 x (2*16*16*9 + 4*16); stage 2:
 * 16*32*9 + 32*32*9 + 4*32 + 16*32 + 2*32, then 2 x (2*32*32*9 + 4*32);
 * stage 3 the same with 32 -> 64; fc 64*10 + 10. */
START_TEST(resnet20_by_hand)
{
    ladle_resnet_desc d;
    ladle_graph *g = NULL;
    LT_OK(ladle_resnet_desc_init(&d, LADLE_RESNET20));
    d.batch = 2;
    d.image = 8;
    d.sequential = 1;
    d.dtype = LADLE_F64;
    d.device = lt_device();
    LT_OK(ladle_resnet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &g));
    int64_t stem = 144 + 32, s1 = 3 * (2 * 2304 + 64);
    int64_t s2 = 4608 + 9216 + 128 + 512 + 64 + 2 * (2 * 9216 + 128);
    int64_t s3 = 18432 + 36864 + 256 + 2048 + 128 + 2 * (2 * 36864 + 256);
    int64_t want = stem + s1 + s2 + s3 + 650, total = 0;
    int found = 0, np = ladle_graph_num_params(g);
    for (int i = 0; i < np; i++) {
        const char *name;
        ladle_tensor *w;
        LT_OK(ladle_graph_param(g, i, &name, &w, NULL));
        total += ladle_tensor_numel(w);
        found += strcmp(name, "stage2.block1.shortcut.conv.weight") == 0 ||
                 strcmp(name, "stage3.block3.bn2.bias") == 0;
    }
    const char *first, *last;
    LT_OK(ladle_graph_param(g, 0, &first, NULL, NULL));
    LT_OK(ladle_graph_param(g, np - 1, &last, NULL, NULL));
    LT_ASSERT(total == want && want == 272186 && np == 21 + 42 + 2 && found == 2 &&
                  strcmp(first, "stem.conv.weight") == 0 && strcmp(last, "fc.bias") == 0,
              "%lld parameters in %d tensors (want %lld in 65), first '%s', last '%s'",
              (long long)total, np, (long long)want, first, last);
    ladle_graph_destroy(&g);
}
END_TEST

/* A descriptor of RESNET8 on layout l, 12 x 12 images, batch N. */
static ladle_resnet_desc desc(const lay *l)
{
    ladle_resnet_desc d;
    LT_OK(ladle_resnet_desc_init(&d, LADLE_RESNET8));
    d.batch = N;
    d.image = IMG;
    d.dtype = LADLE_F64;
    d.device = lt_device();
    d.data_ways = l->d;
    d.spatial[0] = l->ph;
    d.spatial[1] = l->pw;
    d.channel_ways = l->c;
    return d;
}

START_TEST(bad_descriptors)
{
    ladle_graph *g = NULL;
    ladle_resnet_desc d = desc(&(lay){1, 1, 1, 1});
    LT_FAILS(ladle_resnet_create(NULL, ladle_comm_of(MPI_COMM_WORLD), &g), LADLE_ERR_NULL);
    LT_FAILS(ladle_resnet_create(&d, ladle_comm_of(MPI_COMM_WORLD), NULL), LADLE_ERR_NULL);
    LT_FAILS(ladle_resnet_desc_init(&d, (ladle_resnet_kind)9), LADLE_ERR_ARG);
    LT_FAILS(ladle_resnet_desc_init(NULL, LADLE_RESNET18), LADLE_ERR_NULL);
    d = desc(&(lay){1, 1, 1, 1});
    d.size = 8;
    LT_FAILS(ladle_resnet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &g), LADLE_ERR_ARG);
    /* numbers out of range, one at a time */
    for (int k = 0; k < 9; k++) {
        d = desc(&(lay){1, 1, 1, 1});
        switch (k) {
        case 0: d.stages = 0; break;
        case 1: d.stages = LADLE_RESNET_MAX_STAGES + 1; break;
        case 2: d.blocks[1] = 0; break;
        case 3: d.width = 0; break;
        case 4: d.classes = 0; break;
        case 5: d.batch = 0; break;
        case 6: d.image = -3; break;
        case 7: d.in_channels = INT64_MAX; break;
        default: d.width = INT64_MAX; break;
        }
        LT_FAILS(ladle_resnet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &g), LADLE_ERR_ARG);
    }
    /* layouts: more ranks than there are, overflowing ways, a batch
     * smaller than the data ways, too few channels for the channel ways,
     * channels with data, images too small for the tiles */
    lay bad[] = {{lt_size + 1, 1, 1, 1}, {1, INT_MAX, INT_MAX, 1}, {0, 1, 1, 1},
                 {1, 1, 1, -2},          {N + 1, 1, 1, 1},         {2, 1, 1, 2},
                 {1, 1, 1, 1}};
    for (int k = 0; k < (int)(sizeof bad / sizeof bad[0]); k++) {
        d = desc(&bad[k]);
        if (k == 6) {
            d.channel_ways = 2;
            d.width = 1;
        }
        LT_FAILS(ladle_resnet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &g), LADLE_ERR_ARG);
    }
    d = desc(&(lay){1, 1, 2, 1});
    d.image = 3; /* 3 -> 2 -> 1 across: one column for two tiles */
    LT_FAILS(ladle_resnet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &g), LADLE_ERR_ARG);
    d = desc(&(lay){1, 1, 1, 1});
    d.dtype = LADLE_I64;
    LT_FAILS(ladle_resnet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &g), LADLE_ERR_DTYPE);
    LT_ASSERT(g == NULL, "a graph after failures");
}
END_TEST

/* The builder's own refusals. */
START_TEST(bad_builder_calls)
{
    ladle_builder_desc bd;
    ladle_builder *b = NULL;
    ladle_graph *g = NULL;
    int x = -1, y = -1, p = -1;
    ladle_builder_desc_init(&bd);
    bd.dtype = LADLE_F64;
    bd.device = lt_device();
    bd.sequential = 1;
    LT_FAILS(ladle_builder_create(NULL, ladle_comm_of(MPI_COMM_WORLD), &b), LADLE_ERR_NULL);
    bd.size = 4;
    LT_FAILS(ladle_builder_create(&bd, ladle_comm_of(MPI_COMM_WORLD), &b), LADLE_ERR_ARG);
    bd.size = sizeof bd;
    LT_OK(ladle_builder_create(&bd, ladle_comm_of(MPI_COMM_WORLD), &b));
    LT_FAILS(ladle_builder_input(b, "x", NULL, &x), LADLE_ERR_NULL);
    LT_FAILS(ladle_builder_input(b, "x", (int64_t[]){2, 1, 0, 4}, &x), LADLE_ERR_SHAPE);
    /* a refused input leaves the builder broken */
    LT_FAILS(ladle_builder_input(b, "x", (int64_t[]){2, 1, 4, 4}, &x), LADLE_ERR_STATE);
    ladle_builder_destroy(&b);
    LT_OK(ladle_builder_create(&bd, ladle_comm_of(MPI_COMM_WORLD), &b));
    LT_OK(ladle_builder_input(b, "x", (int64_t[]){2, 1, 4, 4}, &x));
    LT_FAILS(ladle_builder_conv_bn(b, NULL, x, 4, 3, 1, &y), LADLE_ERR_NULL);
    LT_OK(ladle_builder_conv_bn(b, "stem", x, 4, 3, 1, &y));
    int r = -1;
    LT_FAILS(ladle_builder_relu(b, NULL, y, &r), LADLE_ERR_NULL);
    LT_OK(ladle_builder_relu(b, "stem", y, &r));
    LT_ASSERT(r > y, "the relu's value %d, the conv_bn's %d", r, y);
    y = r;
    int nd;
    int64_t shape[4];
    LT_OK(ladle_builder_shape(b, y, &nd, shape));
    LT_ASSERT(nd == 4 && shape[0] == 2 && shape[1] == 4 && shape[2] == 4 && shape[3] == 4,
              "stem shape %d: %lld x %lld x %lld x %lld", nd, (long long)shape[0],
              (long long)shape[1], (long long)shape[2], (long long)shape[3]);
    /* the shortcut of a block that keeps the shape is the value itself */
    int s = -1;
    LT_OK(ladle_builder_shortcut(b, "same", y, 4, 1, &s));
    LT_ASSERT(s == y, "identity shortcut %d, want %d", s, y);
    LT_OK(ladle_builder_global_avg_pool(b, "pool", y, &p));
    LT_FAILS(ladle_builder_shape(b, 999, &nd, shape), LADLE_ERR_ARG);
    /* a convolution after pooling; each refusal breaks the builder, so
     * each gets a fresh one below */
    LT_FAILS(ladle_builder_basic_block(b, "block", p, 4, 1, &x), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_builder_classifier(b, "fc", p, 3, &x), LADLE_ERR_STATE);
    ladle_builder_destroy(&b);
    char longname[LADLE_GRAPH_NAME_MAX + 8];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    longname[LADLE_GRAPH_NAME_MAX - 6] = '\0'; /* fits, but "<name>.conv1" does not */
    for (int k = 0; k < 4; k++) {
        LT_OK(ladle_builder_create(&bd, ladle_comm_of(MPI_COMM_WORLD), &b));
        LT_OK(ladle_builder_input(b, "x", (int64_t[]){2, 3, 4, 4}, &x));
        if (k == 0)
            LT_FAILS(ladle_builder_basic_block(b, longname, x, 4, 1, &y), LADLE_ERR_ARG);
        else if (k == 1)
            LT_FAILS(ladle_builder_bottleneck(b, "b", x + 7, 4, 1, &y), LADLE_ERR_ARG);
        else if (k == 2)
            LT_FAILS(ladle_builder_classifier(b, "fc", x, 3, &y), LADLE_ERR_SHAPE);
        else {
            LT_OK(ladle_builder_global_avg_pool(b, "pool", x, &p));
            LT_FAILS(ladle_builder_classifier(b, "fc", p, 0, &y), LADLE_ERR_ARG);
        }
        ladle_builder_destroy(&b);
    }
    /* finish hands the graph over; the builder is spent */
    LT_OK(ladle_builder_create(&bd, ladle_comm_of(MPI_COMM_WORLD), &b));
    LT_OK(ladle_builder_input(b, "x", (int64_t[]){2, 3, 4, 4}, &x));
    LT_OK(ladle_builder_global_avg_pool(b, "pool", x, &p));
    LT_OK(ladle_builder_finish(b, p, &g));
    LT_ASSERT(g != NULL && ladle_builder_graph(b) == NULL, "finish kept the graph");
    LT_FAILS(ladle_builder_finish(b, p, &g), LADLE_ERR_STATE);
    LT_FAILS(ladle_builder_global_avg_pool(b, "pool2", p, &y), LADLE_ERR_STATE);
    ladle_builder_destroy(&b);
    LT_OK(ladle_builder_destroy(NULL));
    LT_ASSERT(b == NULL, "destroy left the handle");
    ladle_graph_destroy(&g);
    /* a distributed builder on more ranks than there are */
    bd.sequential = 0;
    bd.spatial[0] = lt_size + 1;
    LT_FAILS(ladle_builder_create(&bd, ladle_comm_of(MPI_COMM_WORLD), &b), LADLE_ERR_ARG);
}
END_TEST

LT_SUITE("resnet", "resnet", 0, bad_descriptors, bad_builder_calls, resnet20_by_hand,
         resnet_twin, bottleneck_twin, training_twin)
