/* Networks: a chain of layers, a loss, and overlapped gradient buckets
 * (see ladle/network.h). */
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

ladle_status ladle_network_create(int n, ladle_op *const layers[], ladle_op *loss,
                                  size_t bucket_bytes, ladle_network **out)
{
    ladle_status st = LADLE_OK;
    ladle_network *net = NULL;
    LADLE_NOT_NULL(out);
    st = check_chain(n, layers, loss);
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
    LADLE_CALL(ladle__buckets_create(n, net->layers, bucket_bytes ? bucket_bytes : LADLE_BUCKET_BYTES,
                                     dt, dev, &net->buckets));
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
    for (int i = 0; i < net->n; i++)
        LADLE_CALL(ladle_optimizer_add_op(opt, net->layers[i]));
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

const ladle_ctx *ladle__network_ctx(const ladle_network *net, int i)
{
    return i < net->n ? net->ctx[i] : net->lctx;
}

const ladle__buckets *ladle__network_buckets(const ladle_network *net)
{
    return net->buckets;
}
