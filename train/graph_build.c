/* Building a graph network: its nodes and values, and the checks and
 * plans of finalize (see ladle/graph.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "train/graph_impl.h"
#include "train/grow.h"

ladle_status ladle_graph_create(ladle_dtype dtype, ladle_device device, size_t bucket_bytes,
                                ladle_graph **out)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(out);
    LADLE_CHECK(ladle__is_real(dtype), LADLE_ERR_DTYPE, "dtype %s is not f32 or f64",
                ladle_dtype_name(dtype));
    ladle_graph *g = ladle__calloc(1, sizeof *g);
    LADLE_CHECK(g != NULL, LADLE_ERR_ALLOC, "out of memory");
    g->dtype = dtype;
    g->device = device;
    g->bucket_bytes = bucket_bytes ? bucket_bytes : LADLE_BUCKET_BYTES;
    g->parent = MPI_COMM_NULL;
    g->loss_scale = 1.0;
    *out = g;
fail:
    return st;
}

static void free_node(gnode *n)
{
    ladle_ctx_destroy(&n->ctx);
    ladle_op_destroy(&n->op);
    for (int k = 0; n->scratch && k < n->nin; k++)
        ladle_tensor_destroy(&n->scratch[k]);
    ladle_tensor_destroy(&n->lossval);
    ladle_tensor_destroy(&n->dloss);
    ladle__free(n->scratch);
    ladle__free(n->via_scratch);
    ladle__free(n->tx);
    ladle__free(n->tdx);
    ladle__free(n->in);
    ladle__free(n->sizes);
}

ladle_status ladle_graph_destroy(ladle_graph **gp)
{
    if (gp == NULL || *gp == NULL)
        return LADLE_OK;
    ladle_graph *g = *gp;
    ladle__buckets_destroy(&g->buckets);
    for (int i = 0; i < g->nnodes; i++)
        free_node(&g->nodes[i]);
    if (g->scratch)
        g->scratch_be->fn->free(g->scratch_be, g->scratch);
    if (g->seq_mem)
        g->seq_be->fn->free(g->seq_be, g->seq_mem);
    for (int v = 0; v < g->nvalues; v++) {
        ladle_layout_destroy(&g->values[v].layout);
        ladle_tensor_destroy(&g->values[v].buf);
        ladle_tensor_destroy(&g->values[v].dy);
    }
    for (int p = 0; g->pnames && p < g->nparams; p++)
        ladle__free(g->pnames[p]);
    ladle__free(g->pnames);
    ladle__free(g->layers);
    ladle__free(g->order);
    ladle__free(g->outs);
    ladle__free(g->nodes);
    ladle__free(g->values);
    ladle__free(g);
    *gp = NULL;
    return LADLE_OK;
}

ladle_status ladle__graph_grow(ladle_graph *g, int nout)
{
    ladle_status st = LADLE_OK;
    gnode *n =
        ladle__grow_int(g->nodes, g->nnodes, g->nnodes + 1, &g->capnodes, sizeof *n, 16);
    LADLE_CHECK(n != NULL, LADLE_ERR_ALLOC, "out of memory");
    g->nodes = n;
    gvalue *v = ladle__grow_int(g->values, g->nvalues, g->nvalues + nout, &g->capvalues,
                                sizeof *v, 16);
    LADLE_CHECK(v != NULL, LADLE_ERR_ALLOC, "out of memory");
    g->values = v;
fail:
    return st;
}

/* The checks every add call shares; name goes through unique and short. */
static ladle_status check_add(const ladle_graph *g, const char *name, const char *func)
{
    if (g == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "g is NULL");
    if (g->finalized || g->broken)
        return ladle__raise(LADLE_ERR_STATE, func,
                            "the graph is finalized already: nodes are added before "
                            "ladle_graph_finalize");
    if (name == NULL)
        return LADLE_OK;
    if (name[0] == '\0' || strlen(name) >= LADLE_GRAPH_NAME_MAX)
        return ladle__raise(LADLE_ERR_ARG, func, "a node name has 1 to %d characters",
                            LADLE_GRAPH_NAME_MAX - 1);
    for (int i = 0; i < g->nnodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0)
            return ladle__raise(LADLE_ERR_ARG, func, "the name '%s' is taken by node %d", name,
                                i);
    return LADLE_OK;
}

/* Append a node of kind with nin inputs and nout outputs; *out gets it. */
static ladle_status push(ladle_graph *g, gkind kind, const char *name, int nin, const int *in,
                         int nout, gnode **out)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(ladle__graph_grow(g, nout));
    gnode *n = &g->nodes[g->nnodes];
    memset(n, 0, sizeof *n);
    if (nin > 0) {
        n->in = ladle__calloc((size_t)nin, sizeof(int));
        LADLE_CHECK(n->in != NULL, LADLE_ERR_ALLOC, "out of memory");
        memcpy(n->in, in, sizeof(int) * (size_t)nin);
    }
    n->kind = kind;
    n->nin = nin;
    n->nout = nout;
    n->out = g->nvalues;
    if (name)
        snprintf(n->name, sizeof n->name, "%s", name);
    else
        snprintf(n->name, sizeof n->name, "node%d", g->nnodes);
    for (int k = 0; k < nout; k++) {
        memset(&g->values[g->nvalues + k], 0, sizeof(gvalue));
        g->values[g->nvalues + k].node = g->nnodes;
    }
    g->nvalues += nout;
    g->nnodes++;
    *out = n;
fail:
    return st;
}

ladle_status ladle_graph_add_input(ladle_graph *g, const char *name, const ladle_layout *layout,
                                   int ndim, const int64_t shape[], int *id)
{
    ladle_status st = LADLE_OK;
    gnode *n = NULL;
    LADLE_CALL(check_add(g, name, __func__));
    LADLE_NOT_NULL(id);
    if (layout == NULL) {
        LADLE_CHECK(ndim >= 0 && ndim <= LADLE_MAX_NDIM, LADLE_ERR_ARG,
                    "ndim %d is outside 0..%d", ndim, LADLE_MAX_NDIM);
        LADLE_CHECK(ndim == 0 || shape != NULL, LADLE_ERR_NULL, "shape is NULL");
        for (int d = 0; d < ndim; d++)
            LADLE_CHECK(shape[d] >= 0, LADLE_ERR_SHAPE, "extent %d is negative", d);
    }
    LADLE_CALL(push(g, G_INPUT, name, 0, NULL, 1, &n));
    gvalue *v = &g->values[n->out];
    n->index = g->ninputs++;
    if (layout) {
        v->layout = ladle__layout_retain(layout);
        v->nd = layout->ndim;
        ladle_layout_box(layout, LADLE_SELF, NULL, v->shape);
    } else {
        v->nd = ndim;
        for (int d = 0; d < ndim; d++)
            v->shape[d] = shape[d];
    }
    *id = n->out;
fail:
    return st;
}

/* A layer or loss op for the graph: its dtype and device, not added yet. */
static ladle_status check_op(const ladle_graph *g, const ladle_op *op, int loss,
                             const char *func)
{
    if (op == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "op is NULL");
    int is_loss = op->vt->kind == LADLE_OP_LOSS || op->vt->loss_forward != NULL;
    if (loss != is_loss || (!loss && !op->layer))
        return ladle__raise(LADLE_ERR_ARG, func, "the %s op is not a %s", op->vt->name,
                            loss ? "loss" : "layer");
    if (op->dtype != g->dtype)
        return ladle__raise(LADLE_ERR_DTYPE, func, "the %s op is %s, the graph %s", op->vt->name,
                            ladle_dtype_name(op->dtype), ladle_dtype_name(g->dtype));
    if (op->be->device != g->device)
        return ladle__raise(LADLE_ERR_DEVICE, func, "the %s op is on %s, the graph on %s",
                            op->vt->name, ladle_device_name(op->be->device),
                            ladle_device_name(g->device));
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == op)
            return ladle__raise(LADLE_ERR_ARG, func, "the %s op is node '%s' already",
                                op->vt->name, g->nodes[i].name);
    return LADLE_OK;
}

ladle_status ladle_graph_add_layer(ladle_graph *g, const char *name, ladle_op *op, int x, int *id)
{
    ladle_status st = LADLE_OK;
    gnode *n = NULL;
    LADLE_CALL(check_add(g, name, __func__));
    LADLE_NOT_NULL(id);
    LADLE_CALL(check_op(g, op, 0, __func__));
    LADLE_CALL(push(g, G_LAYER, name, 1, &x, 1, &n));
    n->op = op;
    *id = n->out;
fail:
    return st;
}

ladle_status ladle_graph_add_loss(ladle_graph *g, const char *name, ladle_op *loss, int x,
                                  double weight, int *k)
{
    ladle_status st = LADLE_OK;
    gnode *n = NULL;
    LADLE_CALL(check_add(g, name, __func__));
    LADLE_CALL(check_op(g, loss, 1, __func__));
    LADLE_CHECK(isfinite(weight), LADLE_ERR_ARG, "the weight %g is not finite", weight);
    LADLE_CALL(push(g, G_LOSS, name, 1, &x, 0, &n));
    n->op = loss;
    n->weight = weight;
    n->index = g->nlosses++;
    if (k)
        *k = n->index;
fail:
    return st;
}

ladle_status ladle_graph_add_add(ladle_graph *g, const char *name, int n, const int xs[], int *id)
{
    ladle_status st = LADLE_OK;
    gnode *node = NULL;
    LADLE_CALL(check_add(g, name, __func__));
    LADLE_NOT_NULL(id);
    LADLE_CHECK(n >= 2, LADLE_ERR_ARG, "an add takes 2 or more values, not %d", n);
    LADLE_NOT_NULL(xs);
    LADLE_CALL(push(g, G_ADD, name, n, xs, 1, &node));
    *id = node->out;
fail:
    return st;
}

ladle_status ladle_graph_add_concat(ladle_graph *g, const char *name, int n, const int xs[],
                                    int dim, int *id)
{
    ladle_status st = LADLE_OK;
    gnode *node = NULL;
    LADLE_CALL(check_add(g, name, __func__));
    LADLE_NOT_NULL(id);
    LADLE_CHECK(n >= 1, LADLE_ERR_ARG, "a concat takes 1 or more values, not %d", n);
    LADLE_NOT_NULL(xs);
    LADLE_CHECK(dim >= 0 && dim < LADLE_MAX_NDIM, LADLE_ERR_ARG, "dimension %d is outside 0..%d",
                dim, LADLE_MAX_NDIM - 1);
    LADLE_CALL(push(g, G_CONCAT, name, n, xs, 1, &node));
    node->dim = dim;
    *id = node->out;
fail:
    return st;
}

ladle_status ladle_graph_add_split(ladle_graph *g, const char *name, int x, int dim, int n,
                                   const int64_t sizes[], int ids[])
{
    ladle_status st = LADLE_OK;
    gnode *node = NULL;
    int64_t *copy = NULL;
    LADLE_CALL(check_add(g, name, __func__));
    LADLE_NOT_NULL(sizes);
    LADLE_NOT_NULL(ids);
    LADLE_CHECK(n >= 1 && n <= 1 << 20, LADLE_ERR_ARG, "a split makes 1 to 2^20 parts, not %d",
                n);
    LADLE_CHECK(dim >= 0 && dim < LADLE_MAX_NDIM, LADLE_ERR_ARG, "dimension %d is outside 0..%d",
                dim, LADLE_MAX_NDIM - 1);
    for (int k = 0; k < n; k++)
        LADLE_CHECK(sizes[k] >= 0, LADLE_ERR_SHAPE, "part %d has size %lld", k,
                    (long long)sizes[k]);
    copy = ladle__calloc((size_t)n, sizeof(int64_t));
    LADLE_CHECK(copy != NULL, LADLE_ERR_ALLOC, "out of memory");
    memcpy(copy, sizes, sizeof(int64_t) * (size_t)n);
    LADLE_CALL(push(g, G_SPLIT, name, 1, &x, n, &node));
    node->dim = dim;
    node->sizes = copy;
    copy = NULL;
    for (int k = 0; k < n; k++)
        ids[k] = node->out + k;
fail:
    ladle__free(copy);
    return st;
}

ladle_status ladle_graph_set_outputs(ladle_graph *g, int n, const int ids[])
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(check_add(g, NULL, __func__));
    LADLE_CHECK(n >= 0, LADLE_ERR_ARG, "%d outputs", n);
    LADLE_CHECK(n == 0 || ids != NULL, LADLE_ERR_NULL, "ids is NULL");
    int *outs = n ? ladle__calloc((size_t)n, sizeof(int)) : NULL;
    LADLE_CHECK(n == 0 || outs != NULL, LADLE_ERR_ALLOC, "out of memory");
    if (n)
        memcpy(outs, ids, sizeof(int) * (size_t)n);
    ladle__free(g->outs);
    g->outs = outs;
    g->nouts = n;
fail:
    return st;
}
