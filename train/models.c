/* LeNet-5 over a layout (see ladle/models.h). */
#include <string.h>

#include "layers/distributed/dist.h"

void ladle_lenet_desc_init(ladle_lenet_desc *d)
{
    if (!LADLE_DESC_START(d))
        return;
    d->batch = 64;
    d->image = 28;
    d->classes = 10;
    d->bn_sync = LADLE_BN_SYNC_GLOBAL;
    d->data_ways = 1;
    d->spatial[0] = d->spatial[1] = 1;
    d->fc_ways = 1;
    d->dtype = LADLE_F32;
    d->device = LADLE_CPU;
    d->seed = 1;
}

typedef struct builder {
    ladle_op *ops[24];
    int n;
    ladle_op *loss;
} builder;

/* Keep the op a constructor made (read after the call: the order in which
 * arguments are evaluated is unspecified). */
static ladle_status add(builder *b, ladle_status st, ladle_op **op)
{
    if (st == LADLE_OK) {
        b->ops[b->n++] = *op;
        *op = NULL;
    }
    return st;
}

/* The y shape of the last layer on this rank. */
static void last_y(const builder *b, int *nd, int64_t *shape)
{
    ladle_op_y_shape(b->ops[b->n - 1], nd, shape);
}

/* A ReLU on this rank's block of the last layer's output. */
static ladle_status relu(builder *b, ladle_dtype dt, ladle_device dev)
{
    int nd;
    int64_t s[LADLE_MAX_NDIM];
    ladle_op *op = NULL;
    last_y(b, &nd, s);
    ladle_status st = ladle_activation_create(LADLE_RELU, 0, nd, s, dt, dev, &op);
    return add(b, st, &op);
}

static ladle_status sequential(const ladle_lenet_desc *d, builder *b)
{
    ladle_status st = LADLE_OK;
    ladle_dtype dt = d->dtype;
    ladle_device dev = d->device;
    int64_t n = d->batch, s = d->image, s1 = s / 2, s2 = (s1 - 4) / 2;
    int64_t x[4] = {n, 1, s, s}, x2[4] = {n, 6, s1, s1}, x3[4] = {n, 16, s1 - 4, s1 - 4};
    int64_t x4[4] = {n, 16, s2, s2};
    ladle_conv_desc c;
    ladle_pool_desc p;
    ladle_batchnorm_desc bn;
    ladle_op *op = NULL;
    ladle_pool_desc_init(&p, LADLE_POOL_MAX, 2, 2);
    ladle_conv_desc_init(&c, 2, 1, 6, 5);
    c.padding[0] = c.padding[1] = 2;
    LADLE_CALL(add(b, ladle_conv_create(&c, x, dt, dev, d->seed, &op), &op));
    if (d->batchnorm) {
        ladle_batchnorm_desc_init(&bn, 6);
        LADLE_CALL(
            add(b, ladle_batchnorm_create(&bn, 4, (int64_t[]){n, 6, s, s}, dt, dev, &op), &op));
    }
    LADLE_CALL(add(b, ladle_pool_create(&p, (int64_t[]){n, 6, s, s}, dt, dev, &op), &op));
    LADLE_CALL(relu(b, dt, dev));
    ladle_conv_desc_init(&c, 2, 6, 16, 5);
    LADLE_CALL(add(b, ladle_conv_create(&c, x2, dt, dev, d->seed + 1, &op), &op));
    if (d->batchnorm) {
        ladle_batchnorm_desc_init(&bn, 16);
        LADLE_CALL(add(b, ladle_batchnorm_create(&bn, 4, x3, dt, dev, &op), &op));
    }
    LADLE_CALL(add(b, ladle_pool_create(&p, x3, dt, dev, &op), &op));
    LADLE_CALL(relu(b, dt, dev));
    LADLE_CALL(add(b, ladle_flatten_create(4, x4, dt, dev, &op), &op));
    int64_t f = 16 * s2 * s2;
    ladle_linear_desc fc[3];
    ladle_linear_desc_init(&fc[0], f, 120);
    ladle_linear_desc_init(&fc[1], 120, 84);
    ladle_linear_desc_init(&fc[2], 84, d->classes);
    for (int i = 0; i < 3; i++) {
        int64_t xs[2] = {n, fc[i].in_features};
        if (i > 0)
            LADLE_CALL(relu(b, dt, dev));
        LADLE_CALL(add(
            b, ladle_linear_create(&fc[i], 2, xs, dt, dev, d->seed + 2 + (uint64_t)i, &op),
            &op));
    }
    ladle_loss_desc ld;
    ladle_loss_desc_init(&ld, LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN);
    LADLE_CALL(ladle_loss_create(&ld, 2, (int64_t[]){n, d->classes}, dt, dev, &b->loss));
fail:
    return st;
}

/* A partition of comm over explicit ranks. */
static ladle_status grid(MPI_Comm comm, int nd, const int *shape, const int *ranks,
                         ladle_partition **p)
{
    return ladle_partition_create(ladle_comm_of(comm), nd, shape, ranks, p);
}

static ladle_status distributed(const ladle_lenet_desc *d, MPI_Comm comm, builder *b)
{
    ladle_status st = LADLE_OK;
    ladle_dtype dt = d->dtype;
    ladle_device dev = d->device;
    int D = d->data_ways, Ph = d->spatial[0], Pw = d->spatial[1], F = d->fc_ways;
    int tiles = Ph * Pw, ranks[4096];
    ladle_partition *p4 = NULL, *p2 = NULL, *pf = NULL, *pw1 = NULL, *pw2 = NULL, *pw3 = NULL;
    int64_t n = d->batch, s = d->image, s1 = s / 2, s2 = (s1 - 4) / 2;
    ladle_conv_desc c;
    ladle_pool_desc p;
    ladle_batchnorm_desc bn;
    ladle_op *op = NULL;

    /* the convolution grid: (batch block, 1, tile row, tile column) */
    int g4[4] = {D, 1, Ph, Pw};
    for (int r = 0; r < D * tiles; r++)
        ranks[r] = r;
    LADLE_CALL(grid(comm, 4, g4, ranks, &p4));
    /* D x 1: batch block b on its first tile's rank; D x F and the weight
     * grids: (., b, j) on rank b * tiles + j */
    int g2[2] = {D, 1}, gf[2] = {D, F};
    for (int bb = 0; bb < D; bb++)
        ranks[bb] = bb * tiles;
    LADLE_CALL(grid(comm, 2, g2, ranks, &p2));
    for (int bb = 0; bb < D; bb++)
        for (int j = 0; j < F; j++)
            ranks[bb * F + j] = bb * tiles + j;
    LADLE_CALL(grid(comm, 2, gf, ranks, &pf));
    /* fc1: Pout = F, Pin = 1; fc2: Pout = 1, Pin = F; fc3: 1 x 1 */
    int three = D > 1;
    int w1[3] = {F, D, 1}, w2[3] = {1, D, F}, w3[3] = {1, D, 1};
    for (int i = 0; i < F; i++)
        for (int bb = 0; bb < D; bb++)
            ranks[i * D + bb] = bb * tiles + i;
    if (three)
        LADLE_CALL(grid(comm, 3, w1, ranks, &pw1));
    else
        LADLE_CALL(grid(comm, 2, (int[]){F, 1}, ranks, &pw1));
    for (int bb = 0; bb < D; bb++)
        for (int j = 0; j < F; j++)
            ranks[bb * F + j] = bb * tiles + j;
    if (three)
        LADLE_CALL(grid(comm, 3, w2, ranks, &pw2));
    else
        LADLE_CALL(grid(comm, 2, (int[]){1, F}, ranks, &pw2));
    for (int bb = 0; bb < D; bb++)
        ranks[bb] = bb * tiles;
    if (three)
        LADLE_CALL(grid(comm, 3, w3, ranks, &pw3));
    else
        LADLE_CALL(grid(comm, 2, (int[]){1, 1}, ranks, &pw3));

    ladle_pool_desc_init(&p, LADLE_POOL_MAX, 2, 2);
    ladle_conv_desc_init(&c, 2, 1, 6, 5);
    c.padding[0] = c.padding[1] = 2;
    LADLE_CALL(add(
        b, ladle_dist_conv_create(&c, p4, (int64_t[]){n, 1, s, s}, dt, dev, d->seed, &op),
        &op));
    if (d->batchnorm) {
        ladle_batchnorm_desc_init(&bn, 6);
        bn.sync = d->bn_sync;
        bn.group_size = d->bn_group;
        LADLE_CALL(add(
            b, ladle_dist_batchnorm_create(&bn, p4, (int64_t[]){n, 6, s, s}, dt, dev, &op),
            &op));
    }
    LADLE_CALL(
        add(b, ladle_dist_pool_create(&p, p4, (int64_t[]){n, 6, s, s}, dt, dev, &op), &op));
    LADLE_CALL(relu(b, dt, dev));
    ladle_conv_desc_init(&c, 2, 6, 16, 5);
    LADLE_CALL(add(b,
                   ladle_dist_conv_create(&c, p4, (int64_t[]){n, 6, s1, s1}, dt, dev,
                                          d->seed + 1, &op),
                   &op));
    int64_t x3[4] = {n, 16, s1 - 4, s1 - 4}, x4[4] = {n, 16, s2, s2};
    if (d->batchnorm) {
        ladle_batchnorm_desc_init(&bn, 16);
        bn.sync = d->bn_sync;
        bn.group_size = d->bn_group;
        LADLE_CALL(add(b, ladle_dist_batchnorm_create(&bn, p4, x3, dt, dev, &op), &op));
    }
    LADLE_CALL(add(b, ladle_dist_pool_create(&p, p4, x3, dt, dev, &op), &op));
    LADLE_CALL(relu(b, dt, dev));
    LADLE_CALL(add(b, ladle_dist_flatten_create(p4, x4, p2, dt, dev, 0, &op), &op));
    int64_t f = 16 * s2 * s2;
    ladle_linear_desc fc[3];
    ladle_linear_desc_init(&fc[0], f, 120);
    ladle_linear_desc_init(&fc[1], 120, 84);
    ladle_linear_desc_init(&fc[2], 84, d->classes);
    const ladle_dist_partitions parts[3] = {{p2, pw1, pf}, {pf, pw2, p2}, {p2, pw3, p2}};
    for (int i = 0; i < 3; i++) {
        int64_t xs[2] = {n, fc[i].in_features};
        if (i > 0)
            LADLE_CALL(relu(b, dt, dev));
        LADLE_CALL(add(b,
                       ladle_dist_linear_create(&fc[i], &parts[i], xs, dt, dev,
                                                d->seed + 2 + (uint64_t)i, &op),
                       &op));
    }
    ladle_loss_desc ld;
    ladle_loss_desc_init(&ld, LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN);
    LADLE_CALL(
        ladle_dist_loss_create(&ld, p2, (int64_t[]){n, d->classes}, dt, dev, &b->loss));
fail:
    ladle_partition_destroy(&p4);
    ladle_partition_destroy(&p2);
    ladle_partition_destroy(&pf);
    ladle_partition_destroy(&pw1);
    ladle_partition_destroy(&pw2);
    ladle_partition_destroy(&pw3);
    return st;
}

ladle_status ladle_lenet_create(const ladle_lenet_desc *d, ladle_comm comm_in,
                                ladle_network **net)
{
    LADLE_COMM_IN(comm, comm_in);
    ladle_status st = LADLE_OK;
    builder b;
    int size = 1;
    memset(&b, 0, sizeof b);
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    LADLE_NOT_NULL(net);
    if (comm != MPI_COMM_NULL)
        MPI_Comm_size(comm, &size);
    int D = d->data_ways, Ph = d->spatial[0], Pw = d->spatial[1], F = d->fc_ways;
    LADLE_CHECK(d->image >= 12 && (d->image / 2 - 4) >= 2 && d->classes >= 1 && d->batch >= 1,
                LADLE_ERR_ARG, "images of %lld (at least 12) and %lld classes",
                (long long)d->image, (long long)d->classes);
    if (!d->sequential) {
        /* each way bounded before they are multiplied (no int overflow) */
        int ok = D >= 1 && Ph >= 1 && Pw >= 1 && F >= 1 && D <= 4096 && Ph <= 4096 &&
                 Pw <= 4096 && (int64_t)D * Ph * Pw <= 4096;
        LADLE_CHECK(ok && D * Ph * Pw <= size && F <= Ph * Pw,
                    LADLE_ERR_ARG,
                    "layout %d x %dx%d (fc %d) does not fit %d ranks (fc ways at most the "
                    "tiles per batch block)",
                    D, Ph, Pw, F, size);
        LADLE_CHECK(d->batch >= D && F <= 84, LADLE_ERR_ARG, "a batch of %lld over %d blocks",
                    (long long)d->batch, D);
        LADLE_CALL(distributed(d, comm, &b));
    } else {
        LADLE_CALL(sequential(d, &b));
    }
    LADLE_CALL(ladle_network_create(b.n, b.ops, b.loss, 0, net));
    return LADLE_OK;
fail:
    for (int i = 0; i < b.n; i++)
        ladle_op_destroy(&b.ops[i]);
    ladle_op_destroy(&b.loss);
    return st;
}

ladle_status ladle_lenet_layers(const ladle_lenet_desc *d, int cap, ladle_op *layers[], int *n,
                                ladle_op **loss)
{
    ladle_status st = LADLE_OK;
    builder b;
    memset(&b, 0, sizeof b);
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    LADLE_NOT_NULL(layers);
    LADLE_NOT_NULL(n);
    LADLE_NOT_NULL(loss);
    LADLE_CHECK(d->image >= 12 && (d->image / 2 - 4) >= 2 && d->classes >= 1 && d->batch >= 1,
                LADLE_ERR_ARG, "images of %lld (at least 12) and %lld classes",
                (long long)d->image, (long long)d->classes);
    LADLE_CALL(sequential(d, &b));
    LADLE_CHECK(b.n <= cap, LADLE_ERR_ARG, "LeNet-5 has %d layers; room for %d", b.n, cap);
    memcpy(layers, b.ops, sizeof(ladle_op *) * (size_t)b.n);
    *n = b.n;
    *loss = b.loss;
    return LADLE_OK;
fail:
    for (int i = 0; i < b.n; i++)
        ladle_op_destroy(&b.ops[i]);
    ladle_op_destroy(&b.loss);
    return st;
}

/* deprecated: ladle_lenet_create takes a ladle_comm */
ladle_status ladle_lenet_create_f(const ladle_lenet_desc *d, MPI_Fint comm, ladle_network **net)
{
    return ladle_lenet_create(d, ladle_comm_of_fortran(comm), net);
}
