/* Training equivalence: LeNet-5 (with batch norm) trained 5 steps with SGD
 * and momentum on one rank's sequential layers and on 2 to 12 ranks in
 * data-parallel, spatial, weight-grid and hybrid layouts reaches the same
 * parameters (f64, 1e-8 relative); and ladle's LeNet-5, which applies each
 * ReLU after its max pooling, trains exactly as the textbook order (ReLU,
 * then pooling) built here layer by layer. */
#include <math.h>
#include <stdio.h>

#include "harness.h"

#define STEPS 5

/* Train net for STEPS steps on the batch (X, labels), every rank its block. */
static void train(ladle_network *net, const ladle_tensor *X, const int64_t *labels,
                  double *losses)
{
    ladle_op *first = ladle_network_layer(net, 0), *loss = ladle_network_loss_op(net);
    int64_t off[4], box[4], loff[2], lbox[2];
    if (ladle_op_x_layout(first)) {
        ladle_layout_box(ladle_op_x_layout(first), LADLE_SELF, off, box);
        ladle_layout_box(ladle_op_x_layout(loss), LADLE_SELF, loff, lbox);
    } else { /* sequential: the whole batch */
        for (int d = 0; d < 4; d++)
            off[d] = 0, box[d] = ladle_tensor_shape(X)[d];
        loff[0] = 0, lbox[0] = box[0];
    }
    ladle_tensor *x = lt_tensor(LADLE_F64, 4, box), *t = lt_tensor(LADLE_I64, 1, lbox);
    lt_box_extract(X, off, x);
    for (int64_t i = 0; i < lbox[0]; i++)
        lt_set(t, i, labels[loff[0] + i]);
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, LADLE_OPT_SGD, 0.05);
    od.momentum = 0.9;
    ladle_optimizer *opt = NULL;
    LT_OK(ladle_optimizer_create(&od, &opt));
    LT_OK(ladle_optimizer_add_network(opt, net));
    for (int s = 0; s < STEPS; s++) {
        lt_train_step(net, opt, x, t, &losses[s]);
    }
    ladle_optimizer_destroy(&opt);
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&t);
}

/* The sequential LeNet-5 of batch n, images s x s, f64 on the test's
 * device. */
static void sequential_lenet(ladle_lenet_desc *d, int64_t n, int64_t s, uint64_t seed,
                             int bn)
{
    lt_lenet_desc(d, n, s, seed);
    d->batchnorm = bn;
    d->sequential = 1;
}

/* n random images of s x s (from seed) and their labels, (i * mul + add)
 * % 10 for image i. */
static ladle_tensor *images(int64_t n, int64_t s, uint64_t seed, int64_t *labels, int mul,
                            int add)
{
    ladle_tensor *x = lt_tensor(LADLE_F64, 4, (int64_t[]){n, 1, s, s});
    LT_OK(ladle_tensor_fill_random(x, seed, 0));
    for (int i = 0; i < n; i++)
        labels[i] = (i * mul + add) % 10;
    return x;
}

START_TEST(lenet_layouts)
{
    struct {
        int D, Ph, Pw, F, bn;
        ladle_bn_sync sync;
    } layouts[] = {
        {1, 1, 1, 1, 1, LADLE_BN_SYNC_GLOBAL}, {2, 1, 1, 1, 1, LADLE_BN_SYNC_GLOBAL},
        {1, 2, 1, 1, 1, LADLE_BN_SYNC_GLOBAL}, {1, 1, 2, 2, 1, LADLE_BN_SYNC_GLOBAL},
        {3, 1, 1, 1, 1, LADLE_BN_SYNC_GLOBAL}, {1, 3, 1, 2, 0, LADLE_BN_SYNC_GLOBAL},
        {2, 2, 1, 2, 1, LADLE_BN_SYNC_GLOBAL}, {2, 1, 2, 1, 1, LADLE_BN_SYNC_GLOBAL},
        {1, 2, 2, 3, 1, LADLE_BN_SYNC_GLOBAL}, {4, 1, 1, 1, 0, LADLE_BN_SYNC_GLOBAL},
        {3, 2, 1, 2, 1, LADLE_BN_SYNC_GLOBAL}, {2, 2, 3, 4, 1, LADLE_BN_SYNC_GLOBAL},
    };
    int64_t N = 12, S = 16, labels[12];
    ladle_tensor *X = images(N, S, 77, labels, 5, 1);
    for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
        int need = layouts[k].D * layouts[k].Ph * layouts[k].Pw;
        if (need > lt_size)
            continue;
        ladle_lenet_desc d;
        sequential_lenet(&d, N, S, 5, layouts[k].bn);
        d.bn_sync = layouts[k].sync;
        ladle_network *ref = NULL, *net = NULL;
        LT_OK(ladle_lenet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &ref));
        d.sequential = 0;
        d.data_ways = layouts[k].D;
        d.spatial[0] = layouts[k].Ph;
        d.spatial[1] = layouts[k].Pw;
        d.fc_ways = layouts[k].F;
        LT_OK(ladle_lenet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &net));
        double lr[STEPS], ld[STEPS];
        train(ref, X, labels, lr);
        train(net, X, labels, ld);
        /* every shard against the reference's parameters */
        double err = 0, lerr = 0;
        /* the loss is known on the ranks of the loss's partition */
        const ladle_layout *ll = ladle_op_x_layout(ladle_network_loss_op(net));
        for (int s = 0; s < STEPS; s++)
            if (ladle_partition_active(ladle_layout_partition(ll)))
                lerr = fmax(lerr, fabs(ld[s] - lr[s]) / (1 + fabs(lr[s])));
        for (int i = 0; i < ladle_network_size(net); i++) {
            ladle_op *a = ladle_network_layer(net, i), *r = ladle_network_layer(ref, i);
            for (int q = 0; q < ladle_op_num_params(a); q++) {
                int64_t off[LADLE_MAX_NDIM];
                LT_OK(ladle_op_param_shard(a, q, NULL, NULL, off, NULL));
                err = fmax(err, lt_box_error(ladle_op_param(r, q), off, ladle_op_param(a, q)));
            }
        }
        LT_ASSERT(err < 1e-8 && lerr < 1e-10,
                  "layout %dx%dx%d fc %d bn %d: parameters %.2e, losses %.2e apart after %d "
                  "steps (%d buckets)",
                  layouts[k].D, layouts[k].Ph, layouts[k].Pw, layouts[k].F, layouts[k].bn, err,
                  lerr, STEPS, ladle_network_buckets(net));
        ladle_network_destroy(&ref);
        ladle_network_destroy(&net);
    }
    ladle_tensor_destroy(&X);
}
END_TEST

/* LeNet-5 in the textbook order: conv, [bn], ReLU, max pool, twice, then
 * the linear layers; the seeds as models.c gives them. */
static ladle_network *textbook_lenet(int64_t n, int64_t s, int bn, uint64_t seed)
{
    int64_t s1 = s / 2, s2 = (s1 - 4) / 2, f = 16 * s2 * s2;
    int64_t x1[4] = {n, 1, s, s}, y1[4] = {n, 6, s, s}, x2[4] = {n, 6, s1, s1},
            y2[4] = {n, 16, s1 - 4, s1 - 4}, x4[4] = {n, 16, s2, s2};
    ladle_op *ops[16];
    int k = 0;
    ladle_conv_desc c;
    ladle_pool_desc p;
    ladle_batchnorm_desc b;
    ladle_pool_desc_init(&p, LADLE_POOL_MAX, 2, 2);
    ladle_conv_desc_init(&c, 2, 1, 6, 5);
    c.padding[0] = c.padding[1] = 2;
    LT_OK(ladle_conv_create(&c, x1, LADLE_F64, lt_device(), seed, &ops[k++]));
    if (bn) {
        ladle_batchnorm_desc_init(&b, 6);
        LT_OK(ladle_batchnorm_create(&b, 4, y1, LADLE_F64, lt_device(), &ops[k++]));
    }
    LT_OK(ladle_activation_create(LADLE_RELU, 0, 4, y1, LADLE_F64, lt_device(), &ops[k++]));
    LT_OK(ladle_pool_create(&p, y1, LADLE_F64, lt_device(), &ops[k++]));
    ladle_conv_desc_init(&c, 2, 6, 16, 5);
    LT_OK(ladle_conv_create(&c, x2, LADLE_F64, lt_device(), seed + 1, &ops[k++]));
    if (bn) {
        ladle_batchnorm_desc_init(&b, 16);
        LT_OK(ladle_batchnorm_create(&b, 4, y2, LADLE_F64, lt_device(), &ops[k++]));
    }
    LT_OK(ladle_activation_create(LADLE_RELU, 0, 4, y2, LADLE_F64, lt_device(), &ops[k++]));
    LT_OK(ladle_pool_create(&p, y2, LADLE_F64, lt_device(), &ops[k++]));
    LT_OK(ladle_flatten_create(4, x4, LADLE_F64, lt_device(), &ops[k++]));
    int64_t in[3] = {f, 120, 84}, out[3] = {120, 84, 10};
    for (int l = 0; l < 3; l++) {
        LT_OK(ladle_linear_create(LT_LINEAR(in[l], out[l], 1, 0), 2, (int64_t[]){n, in[l]},
                                  LADLE_F64, lt_device(), seed + 2 + (uint64_t)l,
                                  &ops[k++]));
        if (l < 2)
            LT_OK(ladle_activation_create(LADLE_RELU, 0, 2, (int64_t[]){n, out[l]},
                                          LADLE_F64, lt_device(), &ops[k++]));
    }
    ladle_op *loss = NULL;
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN, 0, 0), 2,
                            (int64_t[]){n, 10}, LADLE_F64, lt_device(), &loss));
    ladle_network *net = NULL;
    LT_OK(ladle_network_create(k, ops, loss, 0, &net));
    return net;
}

/* Max pooling commutes with ReLU (max(relu(a), relu(b)) = relu(max(a, b)),
 * and the gradient reaches the same input either way, or is zero), so
 * ladle's order, with a quarter of the ReLU's work, trains as the textbook
 * order does: the same losses and parameters after 5 steps, to rounding
 * (f64), with and without batch norm. The parameters are compared in order,
 * as both networks list them. */
START_TEST(lenet_relu_after_pool)
{
    int64_t N = 8, S = 16, labels[8];
    ladle_tensor *X = images(N, S, 91, labels, 3, 2);
    for (int bn = 0; bn <= 1; bn++) {
        ladle_lenet_desc d;
        sequential_lenet(&d, N, S, 7, bn);
        ladle_network *net = NULL, *ref = textbook_lenet(N, S, bn, 7);
        LT_OK(ladle_lenet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &net));
        LT_ASSERT(ladle_network_size(net) == ladle_network_size(ref),
                  "%d layers, textbook %d", ladle_network_size(net),
                  ladle_network_size(ref));
        double l_net[STEPS], l_ref[STEPS], err = 0, lerr = 0;
        train(ref, X, labels, l_ref);
        train(net, X, labels, l_net);
        for (int s = 0; s < STEPS; s++)
            lerr = fmax(lerr, fabs(l_net[s] - l_ref[s]) / (1 + fabs(l_ref[s])));
        int na = 0, nr = 0;
        ladle_tensor *pa[16], *pr[16];
        for (int i = 0; i < ladle_network_size(net); i++) {
            for (int q = 0; q < ladle_op_num_params(ladle_network_layer(net, i)) && na < 16;
                 q++)
                pa[na++] = ladle_op_param(ladle_network_layer(net, i), q);
            for (int q = 0; q < ladle_op_num_params(ladle_network_layer(ref, i)) && nr < 16;
                 q++)
                pr[nr++] = ladle_op_param(ladle_network_layer(ref, i), q);
        }
        LT_ASSERT(na == nr && na >= 10, "%d parameters, textbook %d", na, nr);
        int64_t zero[LADLE_MAX_NDIM] = {0};
        for (int q = 0; q < na; q++)
            err = fmax(err, lt_box_error(pr[q], zero, pa[q]));
        LT_ASSERT(
            err < 1e-12 && lerr < 1e-13,
            "bn %d: parameters %.2e, losses %.2e from the textbook order after %d steps",
            bn, err, lerr, STEPS);
        ladle_network_destroy(&net);
        ladle_network_destroy(&ref);
    }
    ladle_tensor_destroy(&X);
}
END_TEST

LT_SUITE("dist_train", "dist_train", 0, lenet_layouts, lenet_relu_after_pool)
