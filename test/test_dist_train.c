/* Training equivalence: LeNet-5 (with batch norm) trained 5 steps with SGD
 * and momentum on one rank's sequential layers and on 2 to 12 ranks in
 * data-parallel, spatial, weight-grid and hybrid layouts reaches the same
 * parameters (f64, 1e-8 relative). */
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
        LT_OK(ladle_network_zero_grad(net));
        LT_OK(ladle_network_forward(net, x, NULL));
        LT_OK(ladle_network_loss(net, t, &losses[s]));
        LT_OK(ladle_network_backward(net, 1));
        LT_OK(ladle_optimizer_step(opt));
    }
    ladle_optimizer_destroy(&opt);
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&t);
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
    int64_t N = 12, S = 16;
    ladle_tensor *X = lt_tensor(LADLE_F64, 4, (int64_t[]){N, 1, S, S});
    LT_OK(ladle_tensor_fill_random(X, 77, 0));
    int64_t labels[12];
    for (int i = 0; i < N; i++)
        labels[i] = (i * 5 + 1) % 10;
    for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
        int need = layouts[k].D * layouts[k].Ph * layouts[k].Pw;
        if (need > lt_size)
            continue;
        ladle_lenet_desc d;
        ladle_lenet_desc_init(&d);
        d.batch = N;
        d.image = S;
        d.dtype = LADLE_F64;
        d.device = lt_device();
        d.seed = 5;
        d.batchnorm = layouts[k].bn;
        d.bn_sync = layouts[k].sync;
        ladle_network *ref = NULL, *net = NULL;
        d.sequential = 1;
        LT_OK(ladle_lenet_create(&d, MPI_COMM_WORLD, &ref));
        d.sequential = 0;
        d.data_ways = layouts[k].D;
        d.spatial[0] = layouts[k].Ph;
        d.spatial[1] = layouts[k].Pw;
        d.fc_ways = layouts[k].F;
        LT_OK(ladle_lenet_create(&d, MPI_COMM_WORLD, &net));
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

Suite *train_suite(void)
{
    Suite *s = suite_create("dist_train");
    TCase *tc = tcase_create("dist_train");
    tcase_set_timeout(tc, 0);
    tcase_add_test(tc, lenet_layouts);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv) { return lt_main(argc, argv, train_suite); }
