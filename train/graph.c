/* Running a graph network: forward in the planned order, the losses, and
 * the backward in reverse with fan-out gradients summed and the buckets'
 * sums overlapping it (see ladle/graph.h). Nothing here allocates. */
#include <math.h>
#include <string.h>

#include "train/checkpoint_impl.h"
#include "train/graph_impl.h"

static ladle_status ready(const ladle_graph *g, const char *func)
{
    if (g == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "g is NULL");
    if (!g->finalized)
        return ladle__raise(LADLE_ERR_STATE, func,
                            "the graph is not finalized: call ladle_graph_finalize first");
    return LADLE_OK;
}

/* Bind the caller's inputs to the input values. */
static ladle_status bind_inputs(ladle_graph *g, int n, const ladle_tensor *const xs[])
{
    ladle_status st = LADLE_OK;
    char a[128], b[128];
    LADLE_CHECK(n == g->ninputs, LADLE_ERR_ARG, "%d inputs given, the graph has %d", n,
                g->ninputs);
    LADLE_CHECK(n == 0 || xs != NULL, LADLE_ERR_NULL, "xs is NULL");
    for (int i = 0; i < g->nnodes; i++) {
        const gnode *node = &g->nodes[i];
        if (node->kind != G_INPUT)
            continue;
        const ladle_tensor *x = xs[node->index];
        gvalue *v = &g->values[node->out];
        LADLE_CHECK(x != NULL, LADLE_ERR_NULL, "input %d ('%s') is NULL", node->index,
                    node->name);
        ladle_dtype want = v->tokens ? LADLE_I64 : g->dtype;
        LADLE_CHECK(x->dtype == want && x->device == g->device, LADLE_ERR_DTYPE,
                    "input %d ('%s') is %s on %s, the graph takes %s on %s%s", node->index,
                    node->name, ladle_dtype_name(x->dtype), ladle_device_name(x->device),
                    ladle_dtype_name(want), ladle_device_name(g->device),
                    v->tokens ? " (token ids)" : "");
        int same = x->ndim == v->nd;
        for (int d = 0; same && d < v->nd; d++)
            same = x->shape[d] == v->shape[d];
        LADLE_CHECK(same, LADLE_ERR_SHAPE, "input %d ('%s') has shape %s, this rank's is %s",
                    node->index, node->name, ladle__fmt_shape64(a, sizeof a, x->ndim, x->shape),
                    ladle__fmt_shape64(b, sizeof b, v->nd, v->shape));
        v->y = x;
    }
fail:
    return st;
}

static ladle_status forward_node(ladle_graph *g, gnode *n)
{
    ladle_status st = LADLE_OK;
    const ladle_tensor *x = n->nin ? g->values[n->in[0]].y : NULL;
    ladle_tensor *y = n->nout ? g->values[n->out].buf : NULL;
    switch (n->kind) {
    case G_LAYER: LADLE_CALL(ladle_layer_forward(n->op, n->ctx, x, y)); break;
    case G_REPART: LADLE_CALL(ladle_op_forward(n->op, x, y)); break;
    case G_ADD:
        LADLE_CALL(ladle_add(x, g->values[n->in[1]].y, y));
        for (int k = 2; k < n->nin; k++)
            LADLE_CALL(ladle_add(y, g->values[n->in[k]].y, y));
        break;
    case G_CONCAT:
        for (int k = 0; k < n->nin; k++)
            n->tx[k] = g->values[n->in[k]].y;
        LADLE_CALL(ladle_concat(n->nin, n->tx, n->dim, y));
        break;
    case G_SPLIT:
        for (int k = 0; k < n->nout; k++)
            n->tdx[k] = g->values[n->out + k].buf;
        LADLE_CALL(ladle_concat_backward(x, n->dim, n->nout, n->tdx));
        break;
    default: break; /* inputs are bound; losses run in ladle_graph_loss */
    }
fail:
    return st;
}

ladle_status ladle_graph_forward(ladle_graph *g, int n, const ladle_tensor *const xs[],
                                 const ladle_tensor *ys[])
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(ready(g, __func__));
    /* a failed forward leaves nothing a loss or a backward could use */
    g->forwarded = g->lossed = 0;
    LADLE_CALL(bind_inputs(g, n, xs));
    for (int j = 0; j < g->norder; j++)
        LADLE_CALL(forward_node(g, &g->nodes[g->order[j]]));
    g->forwarded = 1;
    for (int k = 0; ys && k < g->nouts; k++)
        ys[k] = g->values[g->outs[k]].y;
fail:
    return st;
}

ladle_status ladle_graph_loss(ladle_graph *g, int n, const ladle_tensor *const targets[],
                              double *total)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(ready(g, __func__));
    LADLE_CHECK(g->forwarded, LADLE_ERR_STATE,
                "no forward pass to take the loss of: call ladle_graph_forward first (or "
                "again, after a failed one)");
    LADLE_CHECK(g->nlosses > 0, LADLE_ERR_STATE, "the graph has no loss");
    LADLE_CHECK(n == g->nlosses, LADLE_ERR_ARG, "%d targets given, the graph has %d losses", n,
                g->nlosses);
    LADLE_NOT_NULL(targets);
    g->lossed = 0;
    double sum = 0;
    for (int j = 0; j < g->norder; j++) {
        gnode *node = &g->nodes[g->order[j]];
        if (node->kind != G_LOSS)
            continue;
        LADLE_CHECK(targets[node->index] != NULL, LADLE_ERR_NULL, "target %d ('%s') is NULL",
                    node->index, node->name);
        ladle_status got = ladle_loss_forward(node->op, node->ctx, g->values[node->in[0]].y,
                                              targets[node->index], node->lossval);
        if (got != LADLE_OK && got != LADLE_ERR_NUMERIC) {
            st = got; /* the loss's own message stands */
            goto fail;
        }
        const ladle_layout *l = node->op->x_layout;
        double v = 0;
        if (l == NULL || ladle_partition_active(l->p))
            LADLE_CALL(ladle_tensor_get(node->lossval, 0, &v));
        sum += node->weight * v;
    }
    if (total)
        *total = sum;
    LADLE_CHECK(isfinite(sum), LADLE_ERR_NUMERIC, "the total loss is %g", sum);
    g->lossed = 1;
fail:
    return st;
}

/* Where the gradient for input slot k of node n goes: its value's dy if
 * nothing wrote that yet in this backward, else the slot's scratch (added
 * by accumulate). */
static ladle_tensor *target(ladle_graph *g, gnode *n, int k)
{
    gvalue *v = &g->values[n->in[k]];
    n->via_scratch[k] = v->written;
    v->written = 1;
    return n->via_scratch[k] ? n->scratch[k] : v->dy;
}

static ladle_status accumulate(ladle_graph *g, gnode *n, int k)
{
    ladle_tensor *dy = g->values[n->in[k]].dy;
    return n->via_scratch[k] ? ladle_add(dy, n->scratch[k], dy) : LADLE_OK;
}

static ladle_status backward_node(ladle_graph *g, gnode *n, int sync)
{
    ladle_status st = LADLE_OK;
    const ladle_tensor *dy = n->nout ? g->values[n->out].dy : NULL;
    switch (n->kind) {
    case G_LOSS:
        LADLE_CALL(ladle_loss_backward(n->op, n->ctx, n->dloss, target(g, n, 0)));
        LADLE_CALL(accumulate(g, n, 0));
        break;
    case G_LAYER:
        if (!g->values[n->in[0]].tokens) { /* ids have no gradient */
            LADLE_CALL(ladle_layer_backward(n->op, n->ctx, dy, target(g, n, 0)));
            LADLE_CALL(accumulate(g, n, 0));
        }
        LADLE_CALL(ladle_layer_backward_weight(n->op, n->ctx, dy));
        if (sync)
            LADLE_CALL(ladle__buckets_after(g->buckets, n->index));
        break;
    case G_REPART:
        LADLE_CALL(ladle_op_adjoint(n->op, dy, target(g, n, 0)));
        LADLE_CALL(accumulate(g, n, 0));
        break;
    case G_ADD: /* the adjoint of a copy is a sum */
        for (int k = 0; k < n->nin; k++) {
            gvalue *v = &g->values[n->in[k]];
            if (v->written)
                LADLE_CALL(ladle_add(v->dy, dy, v->dy));
            else
                LADLE_CALL(ladle_tensor_copy(v->dy, dy));
            v->written = 1;
        }
        break;
    case G_CONCAT: /* the adjoint of a concat is the split */
        for (int k = 0; k < n->nin; k++)
            n->tdx[k] = target(g, n, k);
        LADLE_CALL(ladle_concat_backward(dy, n->dim, n->nin, n->tdx));
        for (int k = 0; k < n->nin; k++)
            LADLE_CALL(accumulate(g, n, k));
        break;
    case G_SPLIT:
        for (int k = 0; k < n->nout; k++)
            n->tx[k] = g->values[n->out + k].dy;
        LADLE_CALL(ladle_concat(n->nout, n->tx, n->dim, target(g, n, 0)));
        LADLE_CALL(accumulate(g, n, 0));
        break;
    default: break;
    }
fail:
    return st;
}

ladle_status ladle_graph_backward(ladle_graph *g, int sync)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(ready(g, __func__));
    LADLE_CHECK(g->lossed, LADLE_ERR_STATE,
                "no loss to take the gradient of: ladle_graph_backward needs a successful "
                "ladle_graph_loss after the last forward, and consumes it");
    g->lossed = 0;
    /* a value nobody reads keeps the zero gradient it was created with */
    for (int v = 0; v < g->nvalues; v++)
        g->values[v].written = 0;
    for (int j = g->norder - 1; j >= 0; j--)
        LADLE_CALL(backward_node(g, &g->nodes[g->order[j]], sync));
    g->sync_wait = 0;
    if (sync && g->buckets)
        LADLE_CALL(ladle__buckets_finish(g->buckets, &g->sync_wait));
fail:
    return st;
}

ladle_status ladle_graph_zero_grad(ladle_graph *g)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(g);
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].kind == G_LAYER)
            LADLE_CALL(ladle_op_zero_grad(g->nodes[i].op));
fail:
    return st;
}

ladle_status ladle_graph_set_training(ladle_graph *g, int training)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(g);
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].kind == G_LAYER)
            LADLE_CALL(ladle_layer_set_training(g->nodes[i].op, training));
fail:
    return st;
}

ladle_status ladle_graph_set_loss_scale(ladle_graph *g, double scale)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(g);
    LADLE_CHECK(isfinite(scale) && scale > 0, LADLE_ERR_ARG,
                "the loss scale %g must be finite and > 0", scale);
    g->loss_scale = scale;
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].kind == G_LOSS && g->nodes[i].dloss != NULL)
            LADLE_CALL(ladle_tensor_fill(g->nodes[i].dloss, g->nodes[i].weight * scale));
fail:
    return st;
}

static ladle_status value_at(const ladle_graph *g, int id, const char *func)
{
    ladle_status st = ready(g, func);
    if (st == LADLE_OK && (id < 0 || id >= g->nvalues))
        st = ladle__raise(LADLE_ERR_ARG, func, "no value %d (0..%d)", id, g->nvalues - 1);
    return st;
}

ladle_status ladle_graph_value(const ladle_graph *g, int id, const ladle_tensor **y)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(y);
    LADLE_CALL(value_at(g, id, __func__));
    *y = g->values[id].y;
fail:
    return st;
}

ladle_status ladle_graph_value_grad(const ladle_graph *g, int id, const ladle_tensor **dy)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(dy);
    LADLE_CALL(value_at(g, id, __func__));
    LADLE_CHECK(!g->values[id].tokens, LADLE_ERR_ARG,
                "value %d holds token ids, which have no gradient", id);
    *dy = g->values[id].dy;
fail:
    return st;
}

const ladle_layout *ladle_graph_value_layout(const ladle_graph *g, int id)
{
    return g && g->finalized && id >= 0 && id < g->nvalues ? g->values[id].layout : NULL;
}

int ladle_graph_num_layers(const ladle_graph *g) { return g && g->finalized ? g->nlayers : 0; }

ladle_op *ladle_graph_layer(const ladle_graph *g, int i)
{
    return g && g->finalized && i >= 0 && i < g->nlayers ? g->layers[i] : NULL;
}

int ladle_graph_num_params(const ladle_graph *g) { return g && g->finalized ? g->nparams : 0; }

ladle_status ladle_graph_param(const ladle_graph *g, int i, const char **name,
                               ladle_tensor **param, ladle_tensor **grad)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(ready(g, __func__));
    LADLE_CHECK(i >= 0 && i < g->nparams, LADLE_ERR_ARG, "no parameter %d (0..%d)", i,
                g->nparams - 1);
    for (int l = 0, base = 0; l < g->nlayers; l++) {
        int np = ladle_op_num_params(g->layers[l]);
        if (i < base + np) {
            if (name)
                *name = g->pnames[i];
            if (param)
                *param = ladle_op_param(g->layers[l], i - base);
            if (grad)
                *grad = ladle_op_grad(g->layers[l], i - base);
            break;
        }
        base += np;
    }
fail:
    return st;
}

int ladle_graph_num_repartitions(const ladle_graph *g) { return g ? g->nrepart : 0; }

int ladle_graph_buckets(const ladle_graph *g) { return g ? ladle__buckets_count(g->buckets) : 0; }

ladle_status ladle_optimizer_add_graph(ladle_optimizer *opt, const ladle_graph *g)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(ready(g, __func__));
    for (int l = 0; l < g->nlayers; l++)
        LADLE_CALL(ladle_optimizer_add_op(opt, g->layers[l]));
fail:
    return st;
}

/* The graph's layers as a checkpoint sees them (ops NULL for a NULL g). */
static ladle_status graph_model(const ladle_graph *g, ladle__model *m, const char *func)
{
    *m = (ladle__model){0, NULL, LADLE_F32, "g"};
    if (g == NULL)
        return LADLE_OK;
    if (!g->finalized)
        return ladle__raise(LADLE_ERR_STATE, func,
                            "the graph is not finalized: call ladle_graph_finalize first");
    *m = (ladle__model){g->nlayers, g->layers, g->dtype, "g"};
    return LADLE_OK;
}

ladle_status ladle_checkpoint_save_graph(const char *path, ladle_comm comm_in,
                                         const ladle_graph *g, const ladle_optimizer *opt,
                                         int nmeta, const int64_t meta[])
{
    LADLE_COMM_IN(comm, comm_in);
    ladle__model m;
    ladle_status st = graph_model(g, &m, __func__);
    return st != LADLE_OK ? st
                          : ladle__checkpoint_save_model(path, comm, &m, opt, nmeta, meta,
                                                         LADLE_MPI_CHUNK_BYTES);
}

ladle_status ladle_checkpoint_load_graph(const char *path, ladle_comm comm_in,
                                         ladle_graph *g, ladle_optimizer *opt, int max_meta,
                                         int64_t meta[], int *nmeta)
{
    LADLE_COMM_IN(comm, comm_in);
    ladle__model m;
    ladle_status st = graph_model(g, &m, __func__);
    return st != LADLE_OK ? st
                          : ladle__checkpoint_load_model(path, comm, &m, opt, max_meta, meta,
                                                         nmeta, LADLE_MPI_CHUNK_BYTES);
}
