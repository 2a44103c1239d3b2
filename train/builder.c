/* The model builder (see ladle/builder.h): the partitions of a layout, the
 * global shapes of the values, and the layers made on them. */
#include <stdio.h>
#include <string.h>

#include "ladle/builder.h"
#include "ladle/distributed.h"
#include "layers/distributed/dist.h"
#include "train/grow.h"

/* Where a value lives: nowhere in particular (sequential), the convolution
 * grid, the images' grid (channel layouts: the channels whole), the head
 * (one rank per batch block). */
enum { W_NONE, W_CONV, W_IMAGE, W_HEAD };

typedef struct bvalue {
    int known, nd, where;
    int64_t global[LADLE_MAX_NDIM], local[LADLE_MAX_NDIM];
} bvalue;

struct ladle_builder {
    ladle_builder_desc d;
    int dist, broken;
    ladle_graph *g;
    /* px the convolution grid; pw its weight grid (channels); pimg, pwimg
     * the images' grid and its weight grid (channels); phead D x 1, plin
     * the classifier's weight grid; pgap 1 x C, where global average
     * pooling leaves a channel-split value (channel ways only) */
    ladle_partition *px, *pw, *pimg, *pwimg, *pgap, *phead, *plin;
    bvalue *v;
    int nv;
    uint64_t seeded; /* layers with weights made so far */
};

void ladle_builder_desc_init(ladle_builder_desc *d)
{
    if (!LADLE_DESC_START(d))
        return;
    d->data_ways = d->channel_ways = 1;
    d->spatial[0] = d->spatial[1] = 1;
    d->bn_sync = LADLE_BN_SYNC_GLOBAL;
    d->dtype = LADLE_F32;
    d->device = LADLE_CPU;
    d->seed = 1;
}

/* A partition of comm: shape over the ranks first + step * i. */
static ladle_status grid(MPI_Comm comm, int nd, const int *shape, int n, int step,
                         ladle_partition **p)
{
    ladle_status st = LADLE_OK;
    int *ranks = ladle__calloc((size_t)n, sizeof *ranks);
    LADLE_CHECK(ranks != NULL, LADLE_ERR_ALLOC, "out of memory");
    for (int i = 0; i < n; i++)
        ranks[i] = i * step;
    st = ladle_partition_create(ladle_comm_of(comm), nd, shape, ranks, p);
fail:
    ladle__free(ranks);
    return st;
}

static ladle_status partitions(ladle_builder *b, MPI_Comm comm)
{
    ladle_status st = LADLE_OK;
    int D = b->d.data_ways, Ph = b->d.spatial[0], Pw = b->d.spatial[1], C = b->d.channel_ways;
    int T = Ph * Pw;
    if (C > 1) {
        LADLE_CALL(grid(comm, 4, (int[]){1, C, Ph, Pw}, C * T, 1, &b->px));
        LADLE_CALL(grid(comm, 4, (int[]){C, C, Ph, Pw}, C * C * T, 1, &b->pw));
        LADLE_CALL(grid(comm, 4, (int[]){1, 1, Ph, Pw}, T, 1, &b->pimg));
        LADLE_CALL(grid(comm, 4, (int[]){C, 1, Ph, Pw}, C * T, 1, &b->pwimg));
    } else {
        LADLE_CALL(grid(comm, 4, (int[]){D, 1, Ph, Pw}, D * T, 1, &b->px));
    }
    /* the head: batch block k on the rank of its first tile */
    int step = C > 1 ? 1 : T;
    if (C > 1) /* the first spatial tile of each channel block */
        LADLE_CALL(grid(comm, 2, (int[]){1, C}, C, T, &b->pgap));
    LADLE_CALL(grid(comm, 2, (int[]){D, 1}, D, step, &b->phead));
    if (D > 1)
        LADLE_CALL(grid(comm, 3, (int[]){1, D, 1}, D, step, &b->plin));
    else
        LADLE_CALL(grid(comm, 2, (int[]){1, 1}, 1, step, &b->plin));
fail:
    return st;
}

/* The layout's numbers: each way bounded before they are multiplied. */
static ladle_status check_desc(const ladle_builder_desc *d, int size)
{
    ladle_status st = LADLE_OK;
    LADLE_CHECK_SIZE(d);
    LADLE_CHECK(d->dtype == LADLE_F32 || d->dtype == LADLE_F64, LADLE_ERR_DTYPE,
                "dtype %d (f32 or f64)", (int)d->dtype);
    if (d->sequential)
        return LADLE_OK;
    int D = d->data_ways, Ph = d->spatial[0], Pw = d->spatial[1], C = d->channel_ways;
    int ok = D >= 1 && Ph >= 1 && Pw >= 1 && C >= 1 && D <= 4096 && Ph <= 4096 && Pw <= 4096 &&
             C <= 4096 && (int64_t)D * Ph * Pw <= 4096 && (int64_t)C * C * Ph * Pw <= 4096;
    LADLE_CHECK(ok, LADLE_ERR_ARG,
                "layout data %d x spatial %dx%d x channels %d (each 1 to 4096, their "
                "product at most 4096)",
                D, Ph, Pw, C);
    LADLE_CHECK(C == 1 || D == 1, LADLE_ERR_ARG,
                "channel ways (%d) do not mix with data ways (%d)", C, D);
    int need = C > 1 ? C * C * Ph * Pw : D * Ph * Pw;
    LADLE_CHECK(need <= size, LADLE_ERR_ARG,
                "layout data %d x spatial %dx%d x channels %d needs %d ranks; the "
                "communicator has %d",
                D, Ph, Pw, C, need, size);
fail:
    return st;
}

ladle_status ladle_builder_create(const ladle_builder_desc *d, ladle_comm comm_in,
                                  ladle_builder **out)
{
    LADLE_COMM_IN(comm, comm_in);
    ladle_status st = LADLE_OK;
    ladle_builder *b = NULL;
    int size = 1;
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(out);
    if (!d->sequential) {
        LADLE_CHECK(comm != MPI_COMM_NULL, LADLE_ERR_ARG, "a distributed layout on MPI_COMM_NULL");
        LADLE_MPI(MPI_Comm_size(comm, &size));
    }
    LADLE_CALL(check_desc(d, size));
    b = ladle__calloc(1, sizeof *b);
    LADLE_CHECK(b != NULL, LADLE_ERR_ALLOC, "out of memory");
    b->d = *d;
    b->dist = !d->sequential;
    LADLE_CALL(ladle_graph_create(d->dtype, d->device, 0, &b->g));
    if (b->dist)
        LADLE_CALL(partitions(b, comm));
    *out = b;
    return LADLE_OK;
fail:
    ladle_builder_destroy(&b);
    return st;
}

ladle_status ladle_builder_destroy(ladle_builder **pb)
{
    if (pb == NULL || *pb == NULL)
        return LADLE_OK;
    ladle_builder *b = *pb;
    ladle_graph_destroy(&b->g);
    ladle_partition *ps[] = {b->px, b->pw, b->pimg, b->pwimg, b->pgap, b->phead, b->plin};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        ladle_partition_destroy(&ps[i]);
    ladle__free(b->v);
    ladle__free(b);
    *pb = NULL;
    return LADLE_OK;
}

/* ---- values ------------------------------------------------------------- */

static ladle_status value(const ladle_builder *b, int id, int nd, const bvalue **x)
{
    ladle_status st = LADLE_OK;
    LADLE_CHECK(id >= 0 && id < b->nv && b->v[id].known, LADLE_ERR_ARG,
                "value %d was not made by the builder", id);
    LADLE_CHECK(nd == 0 || b->v[id].nd == nd, LADLE_ERR_SHAPE,
                "value %d has %d dimensions, not %d", id, b->v[id].nd, nd);
    *x = &b->v[id];
fail:
    return st;
}

/* Record value id: its global shape, this rank's shape, where it lives. */
static ladle_status put(ladle_builder *b, int id, int nd, const int64_t *global,
                        const int64_t *local, int where)
{
    ladle_status st = LADLE_OK;
    int64_t g[LADLE_MAX_NDIM], l[LADLE_MAX_NDIM]; /* they may point into the table */
    memcpy(g, global, sizeof(int64_t) * (size_t)nd);
    memcpy(l, local, sizeof(int64_t) * (size_t)nd);
    /* every entry of the table is a value, known or not */
    bvalue *v = ladle__grow_int(b->v, b->nv, id + 1, &b->nv, sizeof *v, 16);
    LADLE_CHECK(v != NULL, LADLE_ERR_ALLOC, "out of memory");
    b->v = v;
    bvalue *x = &b->v[id];
    x->known = 1;
    x->nd = nd;
    x->where = where;
    memcpy(x->global, g, sizeof(int64_t) * (size_t)nd);
    memcpy(x->local, l, sizeof(int64_t) * (size_t)nd);
fail:
    return st;
}

/* prefix + suffix into a node name. */
static ladle_status join(char *out, const char *prefix, const char *suffix)
{
    int n = snprintf(out, LADLE_GRAPH_NAME_MAX, "%s%s", prefix, suffix);
    if (n < 0 || n >= LADLE_GRAPH_NAME_MAX)
        return ladle__raise(LADLE_ERR_ARG, "ladle_builder", "the name '%s%s' is longer than %d",
                            prefix, suffix, LADLE_GRAPH_NAME_MAX - 1);
    return LADLE_OK;
}

/* Add op (made for value x) as node name; the graph owns it from then on,
 * a refused op is destroyed here. y's global shape is global. */
static ladle_status layer(ladle_builder *b, const char *name, ladle_op *op, int x, int nd,
                          const int64_t *global, int where, int *id)
{
    ladle_status st = LADLE_OK;
    int ynd, y = -1;
    int64_t local[LADLE_MAX_NDIM];
    LADLE_CALL(ladle_op_y_shape(op, &ynd, local));
    LADLE_CALL(ladle_graph_add_layer(b->g, name, op, x, &y));
    op = NULL;
    LADLE_CALL(put(b, y, nd, global, local, where));
    *id = y;
fail:
    ladle_op_destroy(&op);
    return st;
}

/* ---- layers ------------------------------------------------------------- */

/* The next layer's seed: the same index on every layout. */
static uint64_t next_seed(ladle_builder *b) { return b->d.seed + b->seeded++; }

/* conv k x k (padding k / 2, no bias) of x to co channels at stride. */
static ladle_status conv(ladle_builder *b, const char *name, int x, int64_t co, int k, int stride,
                         int *id)
{
    ladle_status st = LADLE_OK;
    const bvalue *xv = NULL;
    ladle_op *op = NULL;
    ladle_conv_desc c;
    LADLE_CALL(value(b, x, 4, &xv));
    LADLE_CHECK(co >= 1 && k >= 1 && k <= 15 && stride >= 1 && stride <= 16, LADLE_ERR_ARG,
                "'%s': %lld channels, kernel %d, stride %d", name, (long long)co, k, stride);
    LADLE_CHECK(xv->where != W_HEAD, LADLE_ERR_SHAPE, "'%s': a convolution after pooling", name);
    const int64_t *xs = xv->global;
    int64_t ys[4] = {xs[0], co, 0, 0};
    for (int a = 0; a < 2; a++)
        ys[2 + a] = xs[2 + a] + 2 * (k / 2) >= k ? (xs[2 + a] + 2 * (k / 2) - k) / stride + 1 : 0;
    if (b->dist) {
        int Ph = b->d.spatial[0], Pw = b->d.spatial[1], C = b->d.channel_ways;
        LADLE_CHECK(ys[2] >= Ph && ys[3] >= Pw, LADLE_ERR_SHAPE,
                    "'%s': %lld x %lld images give %lld x %lld outputs, too small for %d x %d "
                    "tiles",
                    name, (long long)xs[2], (long long)xs[3], (long long)ys[2],
                    (long long)ys[3], Ph, Pw);
        LADLE_CHECK(co >= C && (xv->where == W_IMAGE || xs[1] >= C), LADLE_ERR_SHAPE,
                    "'%s': %lld -> %lld channels cannot be split %d ways", name,
                    (long long)xs[1], (long long)co, C);
    }
    ladle_conv_desc_init(&c, 2, xs[1], co, k);
    c.padding[0] = c.padding[1] = k / 2;
    c.stride[0] = c.stride[1] = stride;
    c.bias = 0;
    ladle_dtype dt = b->d.dtype;
    ladle_device dev = b->d.device;
    uint64_t seed = next_seed(b);
    if (!b->dist)
        LADLE_CALL(ladle_conv_create(&c, xs, dt, dev, seed, &op));
    else if (xv->where == W_IMAGE)
        LADLE_CALL(ladle_dist_conv_grid_create(
            &c, &(ladle_dist_partitions){.x = b->pimg, .w = b->pwimg, .y = b->px}, xs, dt,
            dev, seed, &op));
    else if (b->pw)
        LADLE_CALL(ladle_dist_conv_grid_create(
            &c, &(ladle_dist_partitions){.x = b->px, .w = b->pw, .y = b->px}, xs, dt, dev,
            seed, &op));
    else
        LADLE_CALL(ladle_dist_conv_create(&c, b->px, xs, dt, dev, seed, &op));
    st = layer(b, name, op, x, 4, ys, b->dist ? W_CONV : W_NONE, id);
fail:
    return st;
}

static ladle_status bnorm(ladle_builder *b, const char *name, int x, int *id)
{
    ladle_status st = LADLE_OK;
    const bvalue *xv = NULL;
    ladle_op *op = NULL;
    ladle_batchnorm_desc d;
    LADLE_CALL(value(b, x, 4, &xv));
    LADLE_CHECK(xv->where == W_CONV || xv->where == W_NONE, LADLE_ERR_SHAPE,
                "'%s': batch norm goes after a convolution", name);
    ladle_batchnorm_desc_init(&d, xv->global[1]);
    if (b->dist) {
        d.sync = b->d.bn_sync;
        d.group_size = b->d.bn_group;
        LADLE_CALL(ladle_dist_batchnorm_create(&d, b->px, xv->global, b->d.dtype,
                                               b->d.device, &op));
    } else
        LADLE_CALL(ladle_batchnorm_create(&d, 4, xv->global, b->d.dtype, b->d.device, &op));
    st = layer(b, name, op, x, 4, xv->global, xv->where, id);
fail:
    return st;
}

/* ReLU on this rank's block of x (it keeps x's layout). */
static ladle_status relu(ladle_builder *b, const char *name, int x, int *id)
{
    ladle_status st = LADLE_OK;
    const bvalue *xv = NULL;
    ladle_op *op = NULL;
    LADLE_CALL(value(b, x, 0, &xv));
    LADLE_CALL(ladle_activation_create(LADLE_RELU, 0, xv->nd, xv->local, b->d.dtype, b->d.device,
                                       &op));
    int64_t global[LADLE_MAX_NDIM];
    memcpy(global, xv->global, sizeof global);
    st = layer(b, name, op, x, xv->nd, global, xv->where, id);
fail:
    return st;
}

static ladle_status add2(ladle_builder *b, const char *name, int x0, int x1, int *id)
{
    ladle_status st = LADLE_OK;
    const bvalue *a = NULL, *c = NULL;
    int y = -1;
    LADLE_CALL(value(b, x0, 0, &a));
    LADLE_CALL(value(b, x1, a->nd, &c));
    LADLE_CHECK(memcmp(a->global, c->global, sizeof(int64_t) * (size_t)a->nd) == 0 &&
                    a->where == c->where,
                LADLE_ERR_SHAPE, "'%s': the two branches differ in shape", name);
    bvalue sum = *a; /* a may move when put grows the table */
    LADLE_CALL(ladle_graph_add_add(b->g, name, 2, (int[]){x0, x1}, &y));
    LADLE_CALL(put(b, y, sum.nd, sum.global, sum.local, sum.where));
    *id = y;
fail:
    return st;
}

/* ---- global average pooling ----------------------------------------------
 * The distributed layer on the value's own grid: each tile sums its block,
 * a sum-reduce adds the tiles onto the first tile of each batch (or
 * channel) block. Its y is the head's layout (D x 1) or, with channel ways,
 * 1 x C on those first tiles; the graph then inserts the repartition that
 * gathers the C channel blocks for the classifier. */

static ladle_status gap(ladle_builder *b, const char *name, int x, int *id)
{
    ladle_status st = LADLE_OK;
    const bvalue *xv = NULL;
    ladle_op *op = NULL;
    LADLE_CALL(value(b, x, 4, &xv));
    LADLE_CHECK(xv->where != W_HEAD, LADLE_ERR_SHAPE, "'%s': pooling twice", name);
    int64_t ys[2] = {xv->global[0], xv->global[1]};
    if (b->dist) {
        const ladle_partition *px = xv->where == W_IMAGE ? b->pimg : b->px;
        const ladle_partition *py = xv->where == W_CONV && b->pgap ? b->pgap : b->phead;
        LADLE_CALL(ladle_dist_global_avg_pool_create(px, xv->global, py, b->d.dtype,
                                                     b->d.device, 0, &op));
    } else
        LADLE_CALL(ladle_global_avg_pool_create(4, xv->global, b->d.dtype, b->d.device, &op));
    st = layer(b, name, op, x, 2, ys, b->dist ? W_HEAD : W_NONE, id);
fail:
    return st;
}

/* ---- head ---------------------------------------------------------------- */

static ladle_status classifier(ladle_builder *b, const char *name, int x, int64_t classes, int *id)
{
    ladle_status st = LADLE_OK;
    const bvalue *xv = NULL;
    ladle_op *op = NULL;
    LADLE_CALL(value(b, x, 2, &xv));
    LADLE_CHECK(classes >= 1 && classes <= ((int64_t)1 << 31), LADLE_ERR_ARG,
                "'%s': %lld classes", name, (long long)classes);
    LADLE_CHECK(xv->where == W_HEAD || xv->where == W_NONE, LADLE_ERR_SHAPE,
                "'%s': the classifier goes after global average pooling", name);
    int64_t n = xv->global[0], f = xv->global[1], ys[2] = {n, classes};
    uint64_t seed = next_seed(b);
    ladle_dtype dt = b->d.dtype;
    ladle_device dev = b->d.device;
    ladle_linear_desc fc;
    ladle_linear_desc_init(&fc, f, classes);
    if (b->dist) {
        ladle_dist_partitions p = {b->phead, b->plin, b->phead};
        LADLE_CALL(ladle_dist_linear_create(&fc, &p, xv->global, dt, dev, seed, &op));
    } else
        LADLE_CALL(ladle_linear_create(&fc, 2, xv->global, dt, dev, seed, &op));
    st = layer(b, name, op, x, 2, ys, xv->where, id);
fail:
    return st;
}

static ladle_status loss(ladle_builder *b, const char *name, int x, int *k)
{
    ladle_status st = LADLE_OK;
    const bvalue *xv = NULL;
    ladle_op *op = NULL;
    LADLE_CALL(value(b, x, 2, &xv));
    LADLE_CHECK(xv->where == W_HEAD || xv->where == W_NONE, LADLE_ERR_SHAPE,
                "'%s': the loss takes the classifier's logits", name);
    ladle_dtype dt = b->d.dtype;
    ladle_device dev = b->d.device;
    ladle_loss_desc ld;
    ladle_loss_desc_init(&ld, LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN);
    if (b->dist)
        LADLE_CALL(ladle_dist_loss_create(&ld, b->phead, xv->global, dt, dev, &op));
    else
        LADLE_CALL(ladle_loss_create(&ld, 2, xv->global, dt, dev, &op));
    LADLE_CALL(ladle_graph_add_loss(b->g, name, op, x, 1.0, k));
    op = NULL;
fail:
    ladle_op_destroy(&op);
    return st;
}

/* ---- blocks -------------------------------------------------------------- */

/* conv, batch norm and (relu_name not NULL) ReLU, each named in full. */
static ladle_status cbr(ladle_builder *b, const char *cname, const char *bname,
                        const char *rname, int x, int64_t co, int k, int stride, int *id)
{
    ladle_status st = LADLE_OK;
    int y = -1;
    LADLE_CALL(conv(b, cname, x, co, k, stride, &y));
    LADLE_CALL(bnorm(b, bname, y, &y));
    if (rname)
        LADLE_CALL(relu(b, rname, y, &y));
    *id = y;
fail:
    return st;
}

/* The names "<prefix><suffix>" for the conv, bn and relu (n of them). */
static ladle_status names(char (*out)[LADLE_GRAPH_NAME_MAX], const char *prefix, int n,
                          const char *const *suffix)
{
    for (int i = 0; i < n; i++) {
        ladle_status st = join(out[i], prefix, suffix[i]);
        if (st != LADLE_OK)
            return st;
    }
    return LADLE_OK;
}

static ladle_status shortcut(ladle_builder *b, const char *prefix, int x, int64_t co, int stride,
                             int *id)
{
    ladle_status st = LADLE_OK;
    const bvalue *xv = NULL;
    char nm[2][LADLE_GRAPH_NAME_MAX];
    LADLE_CALL(value(b, x, 4, &xv));
    if (stride == 1 && xv->global[1] == co) {
        *id = x;
        return LADLE_OK;
    }
    LADLE_CALL(names(nm, prefix, 2, (const char *[]){".conv", ".bn"}));
    LADLE_CALL(cbr(b, nm[0], nm[1], NULL, x, co, 1, stride, id));
fail:
    return st;
}

/* The residual tail: relu(branch + shortcut(x)). */
static ladle_status merge(ladle_builder *b, const char *name, int x, int branch, int stride,
                          int *id)
{
    ladle_status st = LADLE_OK;
    char nm[3][LADLE_GRAPH_NAME_MAX];
    int s = -1, y = -1;
    const bvalue *bv = NULL;
    LADLE_CALL(names(nm, name, 3, (const char *[]){".shortcut", ".add", ".relu"}));
    LADLE_CALL(value(b, branch, 4, &bv));
    LADLE_CALL(shortcut(b, nm[0], x, bv->global[1], stride, &s));
    LADLE_CALL(add2(b, nm[1], branch, s, &y));
    LADLE_CALL(relu(b, nm[2], y, id));
fail:
    return st;
}

static ladle_status basic(ladle_builder *b, const char *name, int x, int64_t planes, int stride,
                          int *id)
{
    ladle_status st = LADLE_OK;
    char nm[5][LADLE_GRAPH_NAME_MAX];
    int y = -1;
    LADLE_CALL(names(nm, name, 5, (const char *[]){".conv1", ".bn1", ".relu1", ".conv2", ".bn2"}));
    LADLE_CALL(cbr(b, nm[0], nm[1], nm[2], x, planes, 3, stride, &y));
    LADLE_CALL(cbr(b, nm[3], nm[4], NULL, y, planes, 3, 1, &y));
    LADLE_CALL(merge(b, name, x, y, stride, id));
fail:
    return st;
}

static ladle_status bottleneck(ladle_builder *b, const char *name, int x, int64_t planes,
                               int stride, int *id)
{
    ladle_status st = LADLE_OK;
    char nm[8][LADLE_GRAPH_NAME_MAX];
    int y = -1;
    LADLE_CHECK(planes >= 1 && planes <= ((int64_t)1 << 40), LADLE_ERR_ARG, "'%s': %lld planes",
                name, (long long)planes);
    LADLE_CALL(names(nm, name, 8,
                     (const char *[]){".conv1", ".bn1", ".relu1", ".conv2", ".bn2", ".relu2",
                                      ".conv3", ".bn3"}));
    LADLE_CALL(cbr(b, nm[0], nm[1], nm[2], x, planes, 1, 1, &y));
    LADLE_CALL(cbr(b, nm[3], nm[4], nm[5], y, planes, 3, stride, &y));
    LADLE_CALL(cbr(b, nm[6], nm[7], NULL, y, 4 * planes, 1, 1, &y));
    LADLE_CALL(merge(b, name, x, y, stride, id));
fail:
    return st;
}

static ladle_status input(ladle_builder *b, const char *name, const int64_t *shape, int *id)
{
    ladle_status st = LADLE_OK;
    ladle_layout *l = NULL;
    int y = -1, where = W_NONE;
    int64_t local[4];
    for (int a = 0; a < 4; a++)
        LADLE_CHECK(shape[a] >= 1 && shape[a] <= ((int64_t)1 << 40), LADLE_ERR_SHAPE,
                    "'%s': images of %lld x %lld x %lld x %lld", name, (long long)shape[0],
                    (long long)shape[1], (long long)shape[2], (long long)shape[3]);
    memcpy(local, shape, sizeof local);
    if (b->dist) {
        LADLE_CHECK(shape[0] >= b->d.data_ways && shape[2] >= b->d.spatial[0] &&
                        shape[3] >= b->d.spatial[1],
                    LADLE_ERR_SHAPE, "'%s': a batch of %lld images %lld x %lld over %d x %dx%d",
                    name, (long long)shape[0], (long long)shape[2], (long long)shape[3],
                    b->d.data_ways, b->d.spatial[0], b->d.spatial[1]);
        where = b->pimg ? W_IMAGE : W_CONV;
        LADLE_CALL(ladle_layout_create_balanced(b->pimg ? b->pimg : b->px, 4, shape, &l));
        LADLE_CALL(ladle_layout_box(l, LADLE_SELF, NULL, local));
    }
    LADLE_CALL(ladle_graph_add_input(b->g, name, l, 4, shape, &y));
    LADLE_CALL(put(b, y, 4, shape, local, where));
    *id = y;
fail:
    ladle_layout_destroy(&l);
    return st;
}

/* ---- the public calls ------------------------------------------------------ */

static ladle_status usable(const char *func, const ladle_builder *b, const char *name,
                           const void *out)
{
    if (b == NULL || name == NULL || out == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "%s is NULL",
                            b == NULL ? "b" : name == NULL ? "name" : "id");
    if (b->g == NULL || b->broken)
        return ladle__raise(LADLE_ERR_STATE, func, "the builder is %s",
                            b->g == NULL ? "finished" : "broken by a failed call");
    return LADLE_OK;
}

/* A failed call breaks the builder (a half-made block stays in the graph). */
static ladle_status done(ladle_builder *b, ladle_status st)
{
    if (st != LADLE_OK)
        b->broken = 1;
    return st;
}

ladle_status ladle_builder_input(ladle_builder *b, const char *name, const int64_t shape[4],
                                 int *id)
{
    ladle_status st = usable(__func__, b, name, id);
    if (st == LADLE_OK && shape == NULL)
        st = ladle__raise(LADLE_ERR_NULL, __func__, "shape is NULL");
    return st != LADLE_OK ? st : done(b, input(b, name, shape, id));
}

ladle_status ladle_builder_conv_bn(ladle_builder *b, const char *name, int x,
                                   int64_t out_channels, int kernel, int stride, int *id)
{
    char nm[2][LADLE_GRAPH_NAME_MAX];
    ladle_status st = usable(__func__, b, name, id);
    if (st == LADLE_OK)
        st = names(nm, name, 2, (const char *[]){".conv", ".bn"});
    if (st != LADLE_OK)
        return st;
    return done(b, cbr(b, nm[0], nm[1], NULL, x, out_channels, kernel, stride, id));
}

ladle_status ladle_builder_relu(ladle_builder *b, const char *name, int x, int *id)
{
    char nm[1][LADLE_GRAPH_NAME_MAX];
    ladle_status st = usable(__func__, b, name, id);
    if (st == LADLE_OK)
        st = names(nm, name, 1, (const char *[]){".relu"});
    return st != LADLE_OK ? st : done(b, relu(b, nm[0], x, id));
}

ladle_status ladle_builder_shortcut(ladle_builder *b, const char *name, int x,
                                    int64_t out_channels, int stride, int *id)
{
    ladle_status st = usable(__func__, b, name, id);
    return st != LADLE_OK ? st : done(b, shortcut(b, name, x, out_channels, stride, id));
}

ladle_status ladle_builder_basic_block(ladle_builder *b, const char *name, int x, int64_t planes,
                                       int stride, int *id)
{
    ladle_status st = usable(__func__, b, name, id);
    return st != LADLE_OK ? st : done(b, basic(b, name, x, planes, stride, id));
}

ladle_status ladle_builder_bottleneck(ladle_builder *b, const char *name, int x, int64_t planes,
                                      int stride, int *id)
{
    ladle_status st = usable(__func__, b, name, id);
    return st != LADLE_OK ? st : done(b, bottleneck(b, name, x, planes, stride, id));
}

ladle_status ladle_builder_global_avg_pool(ladle_builder *b, const char *name, int x, int *id)
{
    ladle_status st = usable(__func__, b, name, id);
    return st != LADLE_OK ? st : done(b, gap(b, name, x, id));
}

ladle_status ladle_builder_classifier(ladle_builder *b, const char *name, int x, int64_t classes,
                                      int *id)
{
    ladle_status st = usable(__func__, b, name, id);
    return st != LADLE_OK ? st : done(b, classifier(b, name, x, classes, id));
}

ladle_status ladle_builder_loss(ladle_builder *b, const char *name, int x, int *k)
{
    int unused;
    ladle_status st = usable(__func__, b, name, k ? (void *)k : (void *)&unused);
    return st != LADLE_OK ? st : done(b, loss(b, name, x, k));
}

ladle_status ladle_builder_shape(const ladle_builder *b, int id, int *ndim, int64_t shape[])
{
    ladle_status st = LADLE_OK;
    const bvalue *xv = NULL;
    LADLE_NOT_NULL(b);
    LADLE_NOT_NULL(ndim);
    LADLE_NOT_NULL(shape);
    LADLE_CALL(value(b, id, 0, &xv));
    *ndim = xv->nd;
    memcpy(shape, xv->global, sizeof(int64_t) * (size_t)xv->nd);
fail:
    return st;
}

ladle_graph *ladle_builder_graph(const ladle_builder *b) { return b ? b->g : NULL; }

ladle_status ladle_builder_finish(ladle_builder *b, int output, ladle_graph **g)
{
    ladle_status st = usable(__func__, b, "finish", g);
    const bvalue *xv = NULL;
    if (st != LADLE_OK)
        return st;
    LADLE_CALL(value(b, output, 0, &xv));
    LADLE_CALL(ladle_graph_set_outputs(b->g, 1, &output));
    LADLE_CALL(ladle_graph_finalize(b->g));
    *g = b->g;
    b->g = NULL;
    return LADLE_OK;
fail:
    return done(b, st);
}
