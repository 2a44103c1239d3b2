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

/* The grids of the distributed LeNet; all NULL for the sequential one. */
typedef struct grids {
    ladle_partition *conv; /* (batch block, 1, tile row, tile column) */
    ladle_partition *head; /* D x 1: batch block b on its first tile's rank */
    ladle_partition *fc;   /* D x F: (b, j) on rank b * tiles + j */
    ladle_partition *w[3]; /* the weight grids of fc1 (F x 1), fc2 (1 x F), fc3 (1 x 1) */
} grids;

/* A partition of comm of nd extents whose ranks, flattened row-major as
 * rows x cols, are i * rs + j * cs at (i, j). At most 4096 ranks (the
 * layout's bound). */
static ladle_status strided(MPI_Comm comm, int nd, const int *shape, int rows, int cols, int rs,
                            int cs, ladle_partition **p)
{
    int ranks[4096];
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            ranks[i * cols + j] = i * rs + j * cs;
    return ladle_partition_create(ladle_comm_of(comm), nd, shape, ranks, p);
}

static void grids_free(grids *g)
{
    ladle_partition_destroy(&g->conv);
    ladle_partition_destroy(&g->head);
    ladle_partition_destroy(&g->fc);
    for (int i = 0; i < 3; i++)
        ladle_partition_destroy(&g->w[i]);
}

/* The grids of d's layout over comm. With one batch block the weight
 * grids are 2-D (Pout x Pin), else 3-D (Pout, D, Pin). */
static ladle_status grids_create(const ladle_lenet_desc *d, MPI_Comm comm, grids *g)
{
    ladle_status st = LADLE_OK;
    int D = d->data_ways, F = d->fc_ways, tiles = d->spatial[0] * d->spatial[1];
    int three = D > 1;
    LADLE_CALL(strided(comm, 4, (int[]){D, 1, d->spatial[0], d->spatial[1]}, D * tiles, 1, 1, 0,
                       &g->conv));
    LADLE_CALL(strided(comm, 2, (int[]){D, 1}, D, 1, tiles, 0, &g->head));
    LADLE_CALL(strided(comm, 2, (int[]){D, F}, D, F, tiles, 1, &g->fc));
    /* fc1: output block i of batch block b on rank b * tiles + i */
    LADLE_CALL(strided(comm, three ? 3 : 2, three ? (int[]){F, D, 1} : (int[]){F, 1}, F, D, 1,
                       tiles, &g->w[0]));
    LADLE_CALL(strided(comm, three ? 3 : 2, three ? (int[]){1, D, F} : (int[]){1, F}, D, F, tiles,
                       1, &g->w[1]));
    LADLE_CALL(strided(comm, three ? 3 : 2, three ? (int[]){1, D, 1} : (int[]){1, 1}, D, 1, tiles,
                       0, &g->w[2]));
fail:
    return st;
}

/* Convolution (5 x 5, padding pad) from cin to cout channels on [n, cin,
 * s, s], batch norm when d asks for it, 2 x 2 max pooling, ReLU: on g's
 * conv grid, or sequential when it has none. */
static ladle_status conv_block(builder *b, const ladle_lenet_desc *d, const grids *g,
                               int64_t cin, int64_t cout, int64_t pad, int64_t s, uint64_t seed)
{
    ladle_status st = LADLE_OK;
    ladle_dtype dt = d->dtype;
    ladle_device dev = d->device;
    int64_t n = d->batch, so = s + 2 * pad - 4;
    int64_t xs[4] = {n, cin, s, s}, ys[4] = {n, cout, so, so};
    ladle_conv_desc c;
    ladle_pool_desc p;
    ladle_batchnorm_desc bn;
    ladle_op *op = NULL;
    ladle_conv_desc_init(&c, 2, cin, cout, 5);
    c.padding[0] = c.padding[1] = pad;
    ladle_pool_desc_init(&p, LADLE_POOL_MAX, 2, 2);
    ladle_batchnorm_desc_init(&bn, cout);
    if (g->conv) {
        bn.sync = d->bn_sync;
        bn.group_size = d->bn_group;
        LADLE_CALL(add(b, ladle_dist_conv_create(&c, g->conv, xs, dt, dev, seed, &op), &op));
        if (d->batchnorm)
            LADLE_CALL(
                add(b, ladle_dist_batchnorm_create(&bn, g->conv, ys, dt, dev, &op), &op));
        LADLE_CALL(add(b, ladle_dist_pool_create(&p, g->conv, ys, dt, dev, &op), &op));
    } else {
        LADLE_CALL(add(b, ladle_conv_create(&c, xs, dt, dev, seed, &op), &op));
        if (d->batchnorm)
            LADLE_CALL(add(b, ladle_batchnorm_create(&bn, 4, ys, dt, dev, &op), &op));
        LADLE_CALL(add(b, ladle_pool_create(&p, ys, dt, dev, &op), &op));
    }
    LADLE_CALL(relu(b, dt, dev));
fail:
    return st;
}

/* The layers of LeNet-5 on g's grids (sequential when g has none): two
 * convolution blocks, flatten, three fully connected layers with ReLUs
 * between them, and the cross-entropy loss. */
static ladle_status stack(const ladle_lenet_desc *d, const grids *g, builder *b)
{
    ladle_status st = LADLE_OK;
    ladle_dtype dt = d->dtype;
    ladle_device dev = d->device;
    int64_t n = d->batch, s = d->image, s1 = s / 2, s2 = (s1 - 4) / 2;
    int64_t x4[4] = {n, 16, s2, s2};
    ladle_op *op = NULL;
    LADLE_CALL(conv_block(b, d, g, 1, 6, 2, s, d->seed));
    LADLE_CALL(conv_block(b, d, g, 6, 16, 0, s1, d->seed + 1));
    if (g->conv)
        LADLE_CALL(add(b, ladle_dist_flatten_create(g->conv, x4, g->head, dt, dev, 0, &op), &op));
    else
        LADLE_CALL(add(b, ladle_flatten_create(4, x4, dt, dev, &op), &op));
    ladle_linear_desc fc[3];
    ladle_linear_desc_init(&fc[0], 16 * s2 * s2, 120);
    ladle_linear_desc_init(&fc[1], 120, 84);
    ladle_linear_desc_init(&fc[2], 84, d->classes);
    const ladle_dist_partitions parts[3] = {
        {g->head, g->w[0], g->fc}, {g->fc, g->w[1], g->head}, {g->head, g->w[2], g->head}};
    for (int i = 0; i < 3; i++) {
        int64_t xs[2] = {n, fc[i].in_features};
        uint64_t seed = d->seed + 2 + (uint64_t)i;
        if (i > 0)
            LADLE_CALL(relu(b, dt, dev));
        if (g->conv)
            LADLE_CALL(
                add(b, ladle_dist_linear_create(&fc[i], &parts[i], xs, dt, dev, seed, &op), &op));
        else
            LADLE_CALL(add(b, ladle_linear_create(&fc[i], 2, xs, dt, dev, seed, &op), &op));
    }
    ladle_loss_desc ld;
    ladle_loss_desc_init(&ld, LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN);
    int64_t ls[2] = {n, d->classes};
    if (g->conv)
        LADLE_CALL(ladle_dist_loss_create(&ld, g->head, ls, dt, dev, &b->loss));
    else
        LADLE_CALL(ladle_loss_create(&ld, 2, ls, dt, dev, &b->loss));
fail:
    return st;
}

static ladle_status sequential(const ladle_lenet_desc *d, builder *b)
{
    grids none = {0};
    return stack(d, &none, b);
}

static ladle_status distributed(const ladle_lenet_desc *d, MPI_Comm comm, builder *b)
{
    ladle_status st = LADLE_OK;
    grids g = {0};
    LADLE_CALL(grids_create(d, comm, &g));
    LADLE_CALL(stack(d, &g, b));
fail:
    grids_free(&g);
    return st;
}

/* The image and class counts every LeNet needs (raised for func). */
static ladle_status check_image(const ladle_lenet_desc *d, const char *func)
{
    if (d->image >= 12 && (d->image / 2 - 4) >= 2 && d->classes >= 1 && d->batch >= 1)
        return LADLE_OK;
    return ladle__raise(LADLE_ERR_ARG, func, "images of %lld (at least 12) and %lld classes",
                        (long long)d->image, (long long)d->classes);
}

/* What a failed build made so far. */
static void builder_free(builder *b)
{
    for (int i = 0; i < b->n; i++)
        ladle_op_destroy(&b->ops[i]);
    ladle_op_destroy(&b->loss);
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
    LADLE_CALL(check_image(d, __func__));
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
    builder_free(&b);
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
    LADLE_CALL(check_image(d, __func__));
    LADLE_CALL(sequential(d, &b));
    LADLE_CHECK(b.n <= cap, LADLE_ERR_ARG, "LeNet-5 has %d layers; room for %d", b.n, cap);
    memcpy(layers, b.ops, sizeof(ladle_op *) * (size_t)b.n);
    *n = b.n;
    *loss = b.loss;
    return LADLE_OK;
fail:
    builder_free(&b);
    return st;
}

/* deprecated: ladle_lenet_create takes a ladle_comm */
ladle_status ladle_lenet_create_f(const ladle_lenet_desc *d, MPI_Fint comm, ladle_network **net)
{
    return ladle_lenet_create(d, ladle_comm_of_fortran(comm), net);
}
