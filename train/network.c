/* Networks: a chain of layers, a loss, and overlapped gradient buckets
 * (see ladle/network.h). */
#include <math.h>
#include <string.h>

#include "layers/distributed/dist.h"
#include "train/buckets.h"
#include "train/checkpoint_impl.h"
#include "train/memory_model.h"

struct ladle_network {
    int n;
    ladle_op **layers;
    ladle_op *loss;
    ladle_ctx **ctx, *lctx;
    ladle_tensor **act, **grad; /* each layer's y and dy */
    ladle_tensor *lossval, *dloss;
    ladle__buckets *buckets;
    double sync_wait;
    int stage;      /* ladle_network_desc's zero_stage */
    int stale;      /* stages 1, 2: the slices may have been stepped since the last gather */
    MPI_Comm parent; /* borrowed from the layers' partitions; MPI_COMM_NULL for sequential ones */
    double *norms;   /* a partial squared norm per rank of parent (clipping) */
    /* the order of the calls: a loss needs a forward, a backward a loss */
    int forwarded, lossed;
};

static void free_net(ladle_network *net, int own_ops)
{
    if (net == NULL)
        return;
    for (int i = 0; i < net->n; i++) {
        if (net->ctx)
            ladle_ctx_destroy(&net->ctx[i]);
        if (net->act)
            ladle_tensor_destroy(&net->act[i]);
        if (net->grad)
            ladle_tensor_destroy(&net->grad[i]);
        if (own_ops && net->layers)
            ladle_op_destroy(&net->layers[i]);
    }
    ladle_ctx_destroy(&net->lctx);
    if (own_ops)
        ladle_op_destroy(&net->loss);
    ladle_tensor_destroy(&net->lossval);
    ladle_tensor_destroy(&net->dloss);
    ladle__buckets_destroy(&net->buckets);
    ladle__free(net->layers);
    ladle__free(net->norms);
    ladle__free(net->ctx);
    ladle__free(net->act);
    ladle__free(net->grad);
    ladle__free(net);
}

/* The checks of a network's chain on this rank. */
static ladle_status check_chain(int n, ladle_op *const layers[], ladle_op *loss)
{
    ladle_status st = LADLE_OK;
    char a[128], b[128];
    LADLE_NOT_NULL(loss);
    LADLE_CHECK(loss->vt->kind == LADLE_OP_LOSS || loss->vt->loss_forward != NULL,
                LADLE_ERR_ARG, "the %s op is not a loss", loss->vt->name);
    LADLE_CHECK(n >= 1 && layers != NULL, LADLE_ERR_ARG, "a network needs at least one layer");
    for (int i = 0; i < n; i++) {
        LADLE_CHECK(layers[i] != NULL && layers[i]->layer, LADLE_ERR_ARG,
                    "layer %d is not a layer", i);
        LADLE_CHECK(layers[i]->dtype == layers[0]->dtype, LADLE_ERR_DTYPE,
                    "layer %d is %s, layer 0 %s", i, ladle_dtype_name(layers[i]->dtype),
                    ladle_dtype_name(layers[0]->dtype));
        LADLE_CHECK(layers[i]->be->device == layers[0]->be->device, LADLE_ERR_DEVICE,
                    "layer %d (%s) is on %s but layer 0 (%s) is on %s: a network's layers "
                    "live on one device",
                    i, layers[i]->vt->name, ladle_device_name(layers[i]->be->device),
                    layers[0]->vt->name, ladle_device_name(layers[0]->be->device));
        if (i > 0) {
            const ladle_op *p = layers[i - 1], *q = layers[i];
            int same = p->y_ndim == q->x_ndim;
            for (int d = 0; same && d < p->y_ndim; d++)
                same = p->y_shape[d] == q->x_shape[d];
            LADLE_CHECK(same, LADLE_ERR_SHAPE,
                        "layer %d gives this rank %s, layer %d takes %s", i - 1,
                        ladle__fmt_shape64(a, sizeof a, p->y_ndim, p->y_shape), i,
                        ladle__fmt_shape64(b, sizeof b, q->x_ndim, q->x_shape));
        }
    }
    LADLE_CHECK(loss->dtype == layers[0]->dtype, LADLE_ERR_DTYPE,
                "the loss is %s but the layers are %s", ladle_dtype_name(loss->dtype),
                ladle_dtype_name(layers[0]->dtype));
    LADLE_CHECK(loss->be->device == layers[0]->be->device, LADLE_ERR_DEVICE,
                "the loss (%s) is on %s but layer 0 (%s) is on %s", loss->vt->name,
                ladle_device_name(loss->be->device), layers[0]->vt->name,
                ladle_device_name(layers[0]->be->device));
    const ladle_op *last = layers[n - 1];
    int fits = last->y_ndim == loss->x_ndim;
    for (int d = 0; fits && d < last->y_ndim; d++)
        fits = last->y_shape[d] == loss->x_shape[d];
    LADLE_CHECK(fits, LADLE_ERR_SHAPE, "the loss takes %s, the last layer gives %s",
                ladle__fmt_shape64(a, sizeof a, loss->x_ndim, loss->x_shape),
                ladle__fmt_shape64(b, sizeof b, last->y_ndim, last->y_shape));
fail:
    return st;
}

/* The parent communicator of the network's partitions (MPI_COMM_NULL for a
 * network of sequential layers, which needs no agreement). */
static MPI_Comm parent_comm(int n, ladle_op *const layers[], ladle_op *loss)
{
    for (int i = 0; layers != NULL && i <= n; i++) {
        const ladle_op *op = i < n ? layers[i] : loss;
        if (op != NULL && op->x_layout != NULL)
            return op->x_layout->p->root->comm;
    }
    return MPI_COMM_NULL;
}

void ladle_network_desc_init(ladle_network_desc *d)
{
    (void)LADLE_DESC_START(d);
}

/* The options against the chain (global facts: every rank finds the same). */
static ladle_status check_desc(const ladle_network_desc *d, ladle_op *const layers[])
{
    ladle_status st = LADLE_OK;
    LADLE_CHECK(d->zero_stage >= 0 && d->zero_stage <= 2, LADLE_ERR_ARG,
                "zero_stage %d: the sharding stages are 0 (replicated), 1 and 2",
                d->zero_stage);
    LADLE_CHECK(d->zero_stage == 0 || layers[0]->dtype == LADLE_F32 ||
                    layers[0]->dtype == LADLE_F64,
                LADLE_ERR_UNSUPPORTED, "zero_stage %d needs an f32 or f64 network, not %s",
                d->zero_stage, ladle_dtype_name(layers[0]->dtype));
fail:
    return st;
}

ladle_status ladle_network_create(int n, ladle_op *const layers[], ladle_op *loss,
                                  size_t bucket_bytes, ladle_network **out)
{
    ladle_network_desc d;
    ladle_network_desc_init(&d);
    d.bucket_bytes = bucket_bytes;
    return ladle_network_create_desc(&d, n, layers, loss, out);
}

ladle_status ladle_network_create_desc(const ladle_network_desc *d, int n,
                                       ladle_op *const layers[], ladle_op *loss,
                                       ladle_network **out)
{
    ladle_status st = LADLE_OK;
    ladle_network *net = NULL;
    LADLE_NOT_NULL(out);
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    st = check_chain(n, layers, loss);
    if (st == LADLE_OK)
        st = check_desc(d, layers);
    size_t bucket_bytes = d->bucket_bytes;
    MPI_Comm parent = st == LADLE_OK ? parent_comm(n, layers, loss) : MPI_COMM_NULL;
    if (parent != MPI_COMM_NULL)
        st = ladle__agree(parent, st, 0, __func__);
    LADLE_CALL(st);

    net = ladle__calloc(1, sizeof *net);
    LADLE_CHECK(net != NULL, LADLE_ERR_ALLOC, "out of memory");
    net->n = n;
    net->layers = ladle__calloc((size_t)n, sizeof(ladle_op *));
    net->ctx = ladle__calloc((size_t)n, sizeof(ladle_ctx *));
    net->act = ladle__calloc((size_t)n, sizeof(ladle_tensor *));
    net->grad = ladle__calloc((size_t)n, sizeof(ladle_tensor *));
    LADLE_CHECK(net->layers && net->ctx && net->act && net->grad, LADLE_ERR_ALLOC,
                "out of memory");
    memcpy(net->layers, layers, sizeof(ladle_op *) * (size_t)n);
    net->loss = loss;
    net->stage = d->zero_stage;
    net->parent = parent;
    if (parent != MPI_COMM_NULL) {
        int size = 1;
        MPI_Comm_size(parent, &size);
        net->norms = ladle__calloc((size_t)size, sizeof(double));
        LADLE_CHECK(net->norms != NULL, LADLE_ERR_ALLOC, "out of memory");
    }
    ladle_dtype dt = layers[0]->dtype;
    ladle_device dev = layers[0]->be->device;
    const ladle_memory_kind A = LADLE_MEM_ACTIVATIONS;
    for (int i = 0; i < n; i++) {
        const ladle_op *l = layers[i];
        LADLE_CALL(ladle_ctx_create(l, &net->ctx[i]));
        LADLE_CALL(
            ladle__tensor_create_as(A, dt, dev, l->y_ndim, l->y_shape, &net->act[i]));
        LADLE_CALL(
            ladle__tensor_create_as(A, dt, dev, l->y_ndim, l->y_shape, &net->grad[i]));
    }
    LADLE_CALL(ladle_ctx_create(loss, &net->lctx));
    int64_t one = 1;
    LADLE_CALL(ladle__tensor_create_as(A, dt, dev, 0, &one, &net->lossval));
    LADLE_CALL(ladle__tensor_create_as(A, dt, dev, 0, &one, &net->dloss));
    LADLE_CALL(ladle_tensor_fill(net->dloss, 1.0));
    LADLE_CALL(ladle__buckets_create_stage(n, net->layers,
                                           bucket_bytes ? bucket_bytes : LADLE_BUCKET_BYTES, dt,
                                           dev, net->stage, &net->buckets));
    if (parent != MPI_COMM_NULL)
        LADLE_CALL(ladle__agree(parent, LADLE_OK, 0, __func__));
    *out = net;
    return LADLE_OK;
fail:
    free_net(net, 0);
    return st;
}

ladle_status ladle_optimizer_add_network(ladle_optimizer *opt, const ladle_network *net)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(net);
    if (net->stage == 0) {
        for (int i = 0; i < net->n; i++)
            LADLE_CALL(ladle_optimizer_add_op(opt, net->layers[i]));
        return LADLE_OK;
    }
    /* the bucketed parameters are stepped as this rank's slices */
    LADLE_NOT_NULL(opt);
    for (int i = 0; i < net->n; i++)
        for (int k = 0; k < ladle_op_num_params(net->layers[i]); k++)
            if (!ladle__buckets_holds(net->buckets, i, k))
                LADLE_CALL(ladle_optimizer_add_param(opt, ladle_op_param(net->layers[i], k),
                                                     ladle_op_grad(net->layers[i], k)));
    LADLE_CALL(ladle__buckets_add_shards(net->buckets, opt));
fail:
    return st;
}

ladle_status ladle_network_destroy(ladle_network **net)
{
    if (net == NULL || *net == NULL)
        return LADLE_OK;
    free_net(*net, 1);
    *net = NULL;
    return LADLE_OK;
}

ladle_status ladle_network_forward(ladle_network *net, const ladle_tensor *x,
                                   const ladle_tensor **y)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(net);
    /* a failed forward leaves nothing a loss or a backward could use */
    net->forwarded = net->lossed = 0;
    if (net->stale)
        LADLE_CALL(ladle_network_gather_params(net));
    for (int i = 0; i < net->n; i++)
        LADLE_CALL(ladle_layer_forward(net->layers[i], net->ctx[i], i ? net->act[i - 1] : x,
                                       net->act[i]));
    net->forwarded = 1;
    if (y)
        *y = net->act[net->n - 1];
fail:
    return st;
}

ladle_status ladle_network_loss(ladle_network *net, const ladle_tensor *target, double *loss)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(net);
    LADLE_CHECK(net->forwarded, LADLE_ERR_STATE,
                "no forward pass to take the loss of: call ladle_network_forward first (or "
                "again, after a failed one)");
    net->lossed = 0;
    st = ladle_loss_forward(net->loss, net->lctx, net->act[net->n - 1], target,
                            net->lossval);
    /* a non-finite loss is still reported, so that the caller can print it */
    if (loss && (st == LADLE_OK || st == LADLE_ERR_NUMERIC)) {
        ladle_status got = ladle_tensor_get(net->lossval, 0, loss);
        if (got != LADLE_OK)
            st = got;
    }
    net->lossed = st == LADLE_OK;
fail:
    return st;
}

ladle_status ladle_network_backward(ladle_network *net, int sync)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(net);
    LADLE_CHECK(net->lossed, LADLE_ERR_STATE,
                "no loss to take the gradient of: ladle_network_backward needs a "
                "successful ladle_network_loss after the last forward, and consumes it");
    net->lossed = 0;
    LADLE_CALL(ladle_loss_backward(net->loss, net->lctx, net->dloss, net->grad[net->n - 1]));
    for (int i = net->n - 1; i >= 0; i--) {
        ladle_op *op = net->layers[i];
        LADLE_CALL(ladle_layer_backward(op, net->ctx[i], net->grad[i], i ? net->grad[i - 1] : NULL));
        LADLE_CALL(ladle_layer_backward_weight(op, net->ctx[i], net->grad[i]));
        if (sync)
            LADLE_CALL(ladle__buckets_after(net->buckets, i));
    }
    net->sync_wait = 0;
    if (sync)
        LADLE_CALL(ladle__buckets_finish(net->buckets, &net->sync_wait));
    /* an optimizer step on the slices may follow */
    net->stale = sync && net->stage >= 1;
fail:
    return st;
}

ladle_status ladle_network_zero_grad(ladle_network *net)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(net);
    for (int i = 0; i < net->n; i++)
        LADLE_CALL(ladle_op_zero_grad(net->layers[i]));
fail:
    return st;
}

ladle_status ladle_network_set_training(ladle_network *net, int training)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(net);
    for (int i = 0; i < net->n; i++)
        LADLE_CALL(ladle_layer_set_training(net->layers[i], training));
fail:
    return st;
}

ladle_status ladle_network_set_loss_scale(ladle_network *net, double scale)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(net);
    LADLE_CHECK(isfinite(scale) && scale > 0, LADLE_ERR_ARG,
                "the loss scale %g must be finite and > 0", scale);
    LADLE_CALL(ladle_tensor_fill(net->dloss, scale));
fail:
    return st;
}

int ladle_network_size(const ladle_network *net) { return net ? net->n : 0; }

ladle_op *ladle_network_layer(const ladle_network *net, int i)
{
    return net && i >= 0 && i < net->n ? net->layers[i] : NULL;
}

ladle_op *ladle_network_loss_op(const ladle_network *net) { return net ? net->loss : NULL; }

int ladle_network_buckets(const ladle_network *net)
{
    return net ? ladle__buckets_count(net->buckets) : 0;
}

double ladle_network_sync_wait(const ladle_network *net) { return net ? net->sync_wait : 0.0; }

ladle_op *const *ladle__network_layers(const ladle_network *net, int *n)
{
    *n = net->n;
    return net->layers;
}

ladle_status ladle_network_gather_params(ladle_network *net)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(net);
    LADLE_CALL(ladle__buckets_gather_params(net->buckets));
    net->stale = 0;
fail:
    return st;
}

ladle_status ladle__network_params_written(ladle_network *net)
{
    net->stale = 0;
    return ladle__buckets_take_params(net->buckets);
}

int ladle_network_zero_stage(const ladle_network *net) { return net ? net->stage : 0; }

/* The sum of squares of the gradients this rank answers for: its slices of
 * the summed buckets, and the parameters outside buckets whose shard it
 * owns (each counted on its one owner). */
static ladle_status local_sumsq(const ladle_network *net, double *sum)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *be = net->layers[0]->be;
    ladle__pinfo info;
    *sum = 0;
    LADLE_CALL(ladle__buckets_sumsq(net->buckets, sum));
    for (int i = 0; i < net->n; i++)
        for (int k = 0; k < ladle_op_num_params(net->layers[i]); k++) {
            const ladle_tensor *g = ladle_op_grad(net->layers[i], k);
            double d[2] = {0, 0};
            if (ladle__buckets_holds(net->buckets, i, k) || g->numel == 0)
                continue;
            ladle__param_info(net->layers[i], k, &info);
            if (!info.owner)
                continue;
            LADLE_CALL(be->fn->dot2(be, g->dtype, g->numel, g->data, g->data, d));
            *sum += d[0] + d[1];
        }
fail:
    return st;
}

ladle_status ladle_network_clip_grad_norm(ladle_network *net, double max_norm, double *norm)
{
    ladle_status st = LADLE_OK;
    double sum = 0;
    LADLE_NOT_NULL(net);
    LADLE_CHECK(max_norm > 0, LADLE_ERR_ARG,
                "max_norm %g: the largest gradient norm must be positive (inf: measure only)",
                max_norm);
    LADLE_CALL(local_sumsq(net, &sum));
    if (net->parent != MPI_COMM_NULL) {
        /* every rank adds the same partial sums in rank order: the same bits
         * on every rank and at every stage */
        int size;
        MPI_Comm_size(net->parent, &size);
        LADLE_MPI(MPI_Allgather(&sum, 1, MPI_DOUBLE, net->norms, 1, MPI_DOUBLE, net->parent));
        sum = 0;
        for (int r = 0; r < size; r++)
            sum += net->norms[r];
    }
    double total = sqrt(sum), coef = max_norm / (total + 1e-6);
    if (norm)
        *norm = total;
    LADLE_CHECK(isfinite(total), LADLE_ERR_NUMERIC, "the gradient norm is %g", total);
    if (coef >= 1)
        goto fail;
    const ladle_backend *be = net->layers[0]->be;
    LADLE_CALL(ladle__buckets_scale(net->buckets, coef));
    for (int i = 0; i < net->n; i++)
        for (int k = 0; k < ladle_op_num_params(net->layers[i]); k++) {
            ladle_tensor *g = ladle_op_grad(net->layers[i], k);
            /* stage 2 keeps only the slices of bucketed gradients */
            if (g->numel == 0 || (net->stage == 2 && ladle__buckets_holds(net->buckets, i, k)))
                continue;
            LADLE_CALL(be->fn->scal(be, g->dtype, g->numel, coef, g->data));
        }
fail:
    return st;
}

ladle_status ladle_network_bytes(const ladle_network *net, size_t *params, size_t *grads,
                                 size_t *buffers)
{
    ladle_status st = LADLE_OK;
    size_t p = 0, g = 0, b = 0;
    LADLE_NOT_NULL(net);
    for (int i = 0; i < net->n; i++)
        for (int k = 0; k < ladle_op_num_params(net->layers[i]); k++) {
            const ladle_tensor *t = ladle_op_param(net->layers[i], k);
            const ladle_tensor *d = ladle_op_grad(net->layers[i], k);
            p += (size_t)t->numel * ladle_dtype_size(t->dtype);
            g += (size_t)d->numel * ladle_dtype_size(d->dtype);
        }
    ladle__buckets_bytes(net->buckets, &p, &g, &b);
    if (params)
        *params = p;
    if (grads)
        *grads = g;
    if (buffers)
        *buffers = b;
fail:
    return st;
}

const ladle_ctx *ladle__network_ctx(const ladle_network *net, int i)
{
    return i < net->n ? net->ctx[i] : net->lctx;
}

const ladle__buckets *ladle__network_buckets(const ladle_network *net)
{
    return net->buckets;
}
