/* Finalizing a graph network: the structure's checks, the topological
 * order, layouts reconciled by inserted repartitions, buffers and buckets
 * (see ladle/graph.h and docs/graphs.md). */
#include <stdio.h>
#include <string.h>

#include "layers/distributed/dist.h"
#include "layers/sequential/seq_impl.h"
#include "train/graph_impl.h"

#define FUNC "ladle_graph_finalize"

/* Every id a node reads or the outputs name is some node's value. Local. */
static ladle_status check_ids(const ladle_graph *g)
{
    for (int i = 0; i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i].nin; k++) {
            int v = g->nodes[i].in[k];
            if (v < 0 || v >= g->nvalues)
                return ladle__raise(LADLE_ERR_ARG, FUNC,
                                    "input %d of node '%s' is value %d, which no node "
                                    "defines (values 0..%d)",
                                    k, g->nodes[i].name, v, g->nvalues - 1);
        }
    /* an unnamed node's "node<i>" may meet a name given earlier */
    for (int i = 0; i < g->nnodes; i++)
        for (int j = i + 1; j < g->nnodes; j++)
            if (strcmp(g->nodes[i].name, g->nodes[j].name) == 0)
                return ladle__raise(LADLE_ERR_ARG, FUNC, "nodes %d and %d are both named '%s'",
                                    i, j, g->nodes[i].name);
    for (int k = 0; k < g->nouts; k++)
        if (g->outs[k] < 0 || g->outs[k] >= g->nvalues)
            return ladle__raise(LADLE_ERR_ARG, FUNC,
                                "output %d is value %d, which no node defines", k, g->outs[k]);
    return LADLE_OK;
}

/* Token ids: a value read by a layer that takes ids (x_ids: an embedding,
 * or a sequential that starts with one) must be a graph input that every
 * reader takes as ids, without a layout (the ids are this rank's own). */
static ladle_status check_tokens(ladle_graph *g)
{
    for (int i = 0; i < g->nnodes; i++) {
        const gnode *n = &g->nodes[i];
        if (n->kind == G_LAYER && n->op->x_ids)
            g->values[n->in[0]].tokens = 1;
    }
    for (int i = 0; i < g->nnodes; i++) {
        const gnode *n = &g->nodes[i];
        for (int k = 0; k < n->nin; k++) {
            const gvalue *v = &g->values[n->in[k]];
            int ids = n->kind == G_LAYER && n->op->x_ids && k == 0;
            const gnode *maker = &g->nodes[v->node];
            if (v->tokens && maker->kind != G_INPUT)
                return ladle__raise(LADLE_ERR_DTYPE, FUNC,
                                    "node '%s' takes token ids, but node '%s' makes values of "
                                    "the graph's dtype: ids must be a graph input",
                                    n->name, maker->name);
            if (v->tokens && !ids)
                return ladle__raise(LADLE_ERR_DTYPE, FUNC,
                                    "input '%s' holds token ids (a layer reads it as ids), but "
                                    "node '%s' reads it as %s values",
                                    maker->name, n->name, ladle_dtype_name(g->dtype));
            if (v->tokens && v->layout != NULL)
                return ladle__raise(LADLE_ERR_ARG, FUNC,
                                    "input '%s' holds token ids and has a layout: ids inputs "
                                    "are this rank's own (layout NULL)",
                                    maker->name);
        }
    }
    return LADLE_OK;
}

/* Kahn's algorithm, taking the first-added ready node each time, so every
 * rank finds the same order. A node left over sits on a cycle or behind
 * one. The readers of each value are listed first (rows of a CSR table). */
static ladle_status topo_order(ladle_graph *g)
{
    ladle_status st = LADLE_OK;
    int n = g->nnodes, slots = 0;
    for (int i = 0; i < n; i++)
        slots += g->nodes[i].nin;
    int *missing = ladle__calloc((size_t)n + 1, sizeof(int));
    int *done = ladle__calloc((size_t)n + 1, sizeof(int));
    int *start = ladle__calloc((size_t)g->nvalues + 2, sizeof(int));
    int *reader = ladle__calloc((size_t)slots + 1, sizeof(int));
    g->order = ladle__calloc((size_t)n + 1, sizeof(int));
    LADLE_CHECK(missing && done && start && reader && g->order, LADLE_ERR_ALLOC, "out of memory");
    for (int i = 0; i < n; i++) {
        missing[i] = g->nodes[i].nin;
        for (int k = 0; k < g->nodes[i].nin; k++)
            start[g->nodes[i].in[k] + 2]++;
    }
    for (int v = 0; v < g->nvalues; v++)
        start[v + 2] += start[v + 1];
    for (int i = 0; i < n; i++)
        for (int k = 0; k < g->nodes[i].nin; k++)
            reader[start[g->nodes[i].in[k] + 1]++] = i;
    /* start[v] .. start[v + 1] are now v's readers */
    for (int step = 0; step < n; step++) {
        int next = -1;
        for (int i = 0; i < n && next < 0; i++)
            if (!done[i] && missing[i] == 0)
                next = i;
        if (next < 0) {
            for (int i = 0; i < n && next < 0; i++)
                if (!done[i])
                    next = i;
            LADLE_CHECK(0, LADLE_ERR_ARG,
                        "the graph has a cycle: node '%s' (and %d others) can never run, "
                        "an input of it depends on its own output",
                        g->nodes[next].name, n - step - 1);
        }
        done[next] = 1;
        g->order[g->norder++] = next;
        const gnode *u = &g->nodes[next];
        for (int v = u->out; v < u->out + u->nout; v++)
            for (int r = start[v]; r < start[v + 1]; r++)
                missing[reader[r]]--;
    }
fail:
    ladle__free(missing);
    ladle__free(done);
    ladle__free(start);
    ladle__free(reader);
    return st;
}

static const char *fmt_layout(char *buf, size_t cap, const ladle_layout *l)
{
    char s[128], p[128];
    int64_t ps[LADLE_MAX_NDIM];
    for (int d = 0; d < l->p->ndim; d++)
        ps[d] = l->p->shape[d];
    snprintf(buf, cap, "%s %s over a %s partition", l->block ? "blocks" : "global",
             ladle__fmt_shape64(s, sizeof s, l->ndim, l->global),
             ladle__fmt_shape64(p, sizeof p, l->p->ndim, ps));
    return buf;
}

static int same_shape(int na, const int64_t *a, int nb, const int64_t *b)
{
    int same = na == nb;
    for (int d = 0; same && d < na; d++)
        same = a[d] == b[d];
    return same;
}

/* The same boxes over the same partition (a layout's representation may
 * differ: balanced, split table or explicit boxes). */
static int same_layout(const ladle_layout *a, const ladle_layout *b)
{
    if (a == b)
        return 1;
    if (a->ndim != b->ndim || a->block != b->block || a->p->size != b->p->size ||
        ladle__partition_hash(LADLE_HASH_INIT, a->p) != ladle__partition_hash(LADLE_HASH_INIT, b->p))
        return 0;
    int64_t oa[LADLE_MAX_NDIM], sa[LADLE_MAX_NDIM], ob[LADLE_MAX_NDIM], sb[LADLE_MAX_NDIM];
    for (int r = 0; r < a->p->size; r++) {
        ladle_layout_box(a, r, oa, sa);
        ladle_layout_box(b, r, ob, sb);
        if (!same_shape(a->ndim, oa, b->ndim, ob) || !same_shape(a->ndim, sa, b->ndim, sb))
            return 0;
    }
    return same_shape(a->ndim, a->global, b->ndim, b->global);
}

/* Make input slot k of node i read a value of layout want (retained by the
 * new value): a repartition node is appended, run just before node i. */
static ladle_status insert_repart(ladle_graph *g, int i, int k, const ladle_layout *want,
                                  int *order, int *norder)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(ladle__graph_grow(g, 1));
    int from = g->nodes[i].in[k];
    gnode *r = &g->nodes[g->nnodes];
    memset(r, 0, sizeof *r);
    r->in = ladle__calloc(1, sizeof(int));
    LADLE_CHECK(r->in != NULL, LADLE_ERR_ALLOC, "out of memory");
    r->kind = G_REPART;
    r->nin = r->nout = 1;
    r->in[0] = from;
    r->out = g->nvalues;
    r->want = want;
    snprintf(r->name, sizeof r->name, "%.40s.repartition%d", g->nodes[i].name, k);
    gvalue *v = &g->values[g->nvalues];
    memset(v, 0, sizeof *v);
    v->node = g->nnodes;
    v->layout = ladle__layout_retain(want);
    v->nd = want->ndim;
    ladle_layout_box(want, LADLE_SELF, NULL, v->shape);
    g->nodes[i].in[k] = g->nvalues++;
    order[(*norder)++] = g->nnodes++;
    g->nrepart++;
fail:
    return st;
}

/* Input slot k of node i against the layout want (may be NULL): a
 * repartition where both have layouts that differ but connect. */
static ladle_status reconcile(ladle_graph *g, int i, int k, const ladle_layout *want, int *order,
                              int *norder)
{
    char a[256], b[256];
    const gvalue *v = &g->values[g->nodes[i].in[k]];
    if (want == NULL || v->layout == NULL || same_layout(v->layout, want))
        return LADLE_OK;
    const gnode *n = &g->nodes[i], *p = &g->nodes[v->node];
    if (!same_shape(v->layout->ndim, v->layout->global, want->ndim, want->global))
        return ladle__raise(LADLE_ERR_SHAPE, FUNC,
                            "node '%s' makes %s, node '%s' takes %s (input %d)", p->name,
                            fmt_layout(a, sizeof a, v->layout), n->name,
                            fmt_layout(b, sizeof b, want), k);
    if (!v->layout->decomposition || !want->decomposition ||
        !ladle__partitions_compatible(v->layout->p, want->p))
        return ladle__raise(LADLE_ERR_PARTITION, FUNC,
                            "no repartition connects node '%s''s %s to node '%s''s %s (input %d)",
                            p->name, fmt_layout(a, sizeof a, v->layout), n->name,
                            fmt_layout(b, sizeof b, want), k);
    return insert_repart(g, i, k, want, order, norder);
}

/* l's boxes with dimension dim of extent ext, on every rank: how a concat's
 * inputs and output and a split's parts are laid out. l must hold dim
 * whole on every rank (else LADLE_ERR_PARTITION, naming node). */
static ladle_status whole_along(const ladle_layout *l, int dim, int64_t ext, const char *node,
                                ladle_layout **out)
{
    ladle_status st = LADLE_OK;
    char a[256];
    int size = l->p->size, nd = l->ndim;
    int64_t global[LADLE_MAX_NDIM];
    int64_t *off = ladle__calloc((size_t)(size * nd) + 1, sizeof(int64_t));
    int64_t *ext_ = ladle__calloc((size_t)(size * nd) + 1, sizeof(int64_t));
    LADLE_CHECK(off && ext_, LADLE_ERR_ALLOC, "out of memory");
    LADLE_CHECK(dim < nd && !l->block, LADLE_ERR_PARTITION,
                "node '%s' works along dimension %d of %s", node, dim,
                fmt_layout(a, sizeof a, l));
    for (int r = 0; r < size; r++) {
        ladle_layout_box(l, r, off + r * nd, ext_ + r * nd);
        LADLE_CHECK(off[r * nd + dim] == 0 && ext_[r * nd + dim] == l->global[dim],
                    LADLE_ERR_PARTITION,
                    "node '%s' works along dimension %d, which %s splits: it must be whole "
                    "on every rank",
                    node, dim, fmt_layout(a, sizeof a, l));
        ext_[r * nd + dim] = ext;
    }
    memcpy(global, l->global, sizeof(int64_t) * (size_t)nd);
    global[dim] = ext;
    LADLE_CALL(ladle__layout_create_explicit(l->p, nd, global, off, ext_, out));
fail:
    ladle__free(off);
    ladle__free(ext_);
    return st;
}

/* The first input of node i that has a layout, or -1. */
static int first_laid_out(const ladle_graph *g, int i)
{
    for (int k = 0; k < g->nodes[i].nin; k++)
        if (g->values[g->nodes[i].in[k]].layout)
            return k;
    return -1;
}

static ladle_status shape_error(const ladle_graph *g, int i, int k, int nd, const int64_t *want)
{
    char a[128], b[128];
    const gvalue *v = &g->values[g->nodes[i].in[k]];
    return ladle__raise(LADLE_ERR_SHAPE, FUNC,
                        "node '%s' gives this rank %s, node '%s' takes %s (input %d)",
                        g->nodes[v->node].name, ladle__fmt_shape64(a, sizeof a, v->nd, v->shape),
                        g->nodes[i].name, ladle__fmt_shape64(b, sizeof b, nd, want), k);
}

/* A layer's or a loss's input; a layer's output. */
static ladle_status infer_op(ladle_graph *g, int i, int *order, int *norder)
{
    ladle_op *op = g->nodes[i].op;
    ladle_status st = reconcile(g, i, 0, op->x_layout, order, norder);
    if (st != LADLE_OK)
        return st;
    gvalue *x = &g->values[g->nodes[i].in[0]];
    if (!same_shape(x->nd, x->shape, op->x_ndim, op->x_shape))
        return shape_error(g, i, 0, op->x_ndim, op->x_shape);
    if (g->nodes[i].kind == G_LOSS)
        return LADLE_OK;
    gvalue *y = &g->values[g->nodes[i].out];
    y->nd = op->y_ndim;
    memcpy(y->shape, op->y_shape, sizeof y->shape);
    /* a sequential layer that keeps the shape (an activation on a block)
     * keeps the layout */
    if (op->y_layout)
        y->layout = ladle__layout_retain(op->y_layout);
    else if (x->layout && same_shape(x->nd, x->shape, y->nd, y->shape))
        y->layout = ladle__layout_retain(x->layout);
    return LADLE_OK;
}

static ladle_status infer_add(ladle_graph *g, int i, int *order, int *norder)
{
    int ref = first_laid_out(g, i);
    ladle_layout *want = ref >= 0 ? g->values[g->nodes[i].in[ref]].layout : NULL;
    for (int k = 0; k < g->nodes[i].nin; k++) {
        ladle_status st = reconcile(g, i, k, want, order, norder);
        if (st != LADLE_OK)
            return st;
        const gvalue *x0 = &g->values[g->nodes[i].in[0]], *x = &g->values[g->nodes[i].in[k]];
        if (!same_shape(x->nd, x->shape, x0->nd, x0->shape))
            return shape_error(g, i, k, x0->nd, x0->shape);
    }
    gvalue *y = &g->values[g->nodes[i].out];
    const gvalue *x0 = &g->values[g->nodes[i].in[0]];
    y->nd = x0->nd;
    memcpy(y->shape, x0->shape, sizeof y->shape);
    y->layout = want ? ladle__layout_retain(want) : NULL;
    return LADLE_OK;
}

static ladle_status infer_concat(ladle_graph *g, int i, int *order, int *norder)
{
    ladle_status st = LADLE_OK;
    int ref = first_laid_out(g, i), dim = g->nodes[i].dim;
    ladle_layout *want = NULL;
    int64_t total = 0, gtotal = 0;
    for (int k = 0; k < g->nodes[i].nin; k++) {
        const gvalue *x = &g->values[g->nodes[i].in[k]];
        if (ref >= 0 && x->layout) {
            LADLE_CHECK(dim < x->layout->ndim, LADLE_ERR_ARG,
                        "node '%s' concatenates along dimension %d of %d", g->nodes[i].name,
                        dim, x->layout->ndim);
            const ladle_layout *l = g->values[g->nodes[i].in[ref]].layout;
            LADLE_CALL(whole_along(l, dim, x->layout->global[dim], g->nodes[i].name, &want));
            LADLE_CALL(reconcile(g, i, k, want, order, norder));
            ladle_layout_destroy(&want);
            gtotal += g->values[g->nodes[i].in[k]].layout->global[dim];
        }
        const gvalue *x0 = &g->values[g->nodes[i].in[0]];
        x = &g->values[g->nodes[i].in[k]];
        LADLE_CHECK(dim < x->nd, LADLE_ERR_ARG, "node '%s' concatenates along dimension %d of %d",
                    g->nodes[i].name, dim, x->nd);
        int fits = x->nd == x0->nd;
        for (int d = 0; fits && d < x->nd; d++)
            fits = d == dim || x->shape[d] == x0->shape[d];
        if (!fits)
            return shape_error(g, i, k, x0->nd, x0->shape);
        total += x->shape[dim];
    }
    gvalue *y = &g->values[g->nodes[i].out];
    const gvalue *x0 = &g->values[g->nodes[i].in[0]];
    y->nd = x0->nd;
    memcpy(y->shape, x0->shape, sizeof y->shape);
    y->shape[dim] = total;
    if (ref >= 0) {
        LADLE_CALL(whole_along(g->values[g->nodes[i].in[ref]].layout, dim, gtotal,
                               g->nodes[i].name, &y->layout));
        ladle_layout_box(y->layout, LADLE_SELF, NULL, y->shape);
    }
fail:
    ladle_layout_destroy(&want);
    return st;
}

static ladle_status infer_split(ladle_graph *g, int i)
{
    ladle_status st = LADLE_OK;
    gnode *n = &g->nodes[i];
    const gvalue *x = &g->values[n->in[0]];
    int64_t total = 0;
    LADLE_CHECK(n->dim < x->nd, LADLE_ERR_ARG, "node '%s' splits along dimension %d of %d",
                n->name, n->dim, x->nd);
    /* a laid-out x holds the dimension whole: its sizes are global */
    int64_t extent = x->layout ? x->layout->global[n->dim] : x->shape[n->dim];
    for (int k = 0; k < n->nout; k++) {
        /* compared before it is added: the sum never overflows */
        LADLE_CHECK(n->sizes[k] <= extent - total, LADLE_ERR_SHAPE,
                    "node '%s' cuts more than its input's %lld along dimension %d at part %d",
                    n->name, (long long)extent, n->dim, k);
        total += n->sizes[k];
    }
    LADLE_CHECK(total == extent, LADLE_ERR_SHAPE,
                "node '%s' cuts %lld along dimension %d, its input has %lld", n->name,
                (long long)total, n->dim, (long long)extent);
    for (int k = 0; k < n->nout; k++) {
        gvalue *y = &g->values[n->out + k];
        y->nd = x->nd;
        memcpy(y->shape, x->shape, sizeof y->shape);
        y->shape[n->dim] = n->sizes[k];
        if (x->layout) {
            LADLE_CALL(whole_along(x->layout, n->dim, n->sizes[k], n->name, &y->layout));
            ladle_layout_box(y->layout, LADLE_SELF, NULL, y->shape);
        }
    }
fail:
    return st;
}

/* Shapes and layouts in topological order, repartitions inserted; the
 * order then includes them. Local (the layouts are global facts, the
 * shapes this rank's). */
static ladle_status infer(ladle_graph *g)
{
    ladle_status st = LADLE_OK;
    int slots = 0, norder = 0;
    for (int i = 0; i < g->nnodes; i++)
        slots += g->nodes[i].nin;
    int *order = ladle__calloc((size_t)(g->nnodes + slots) + 1, sizeof(int));
    LADLE_CHECK(order != NULL, LADLE_ERR_ALLOC, "out of memory");
    for (int j = 0; j < g->norder; j++) {
        int i = g->order[j];
        switch (g->nodes[i].kind) {
        case G_LAYER:
        case G_LOSS: LADLE_CALL(infer_op(g, i, order, &norder)); break;
        case G_ADD: LADLE_CALL(infer_add(g, i, order, &norder)); break;
        case G_CONCAT: LADLE_CALL(infer_concat(g, i, order, &norder)); break;
        case G_SPLIT: LADLE_CALL(infer_split(g, i)); break;
        default: break;
        }
        order[norder++] = i;
    }
    ladle__free(g->order);
    g->order = order;
    g->norder = norder;
    order = NULL;
fail:
    ladle__free(order);
    return st;
}

/* The parent communicator of the graph's partitions (MPI_COMM_NULL for a
 * graph of sequential layers, which needs no agreement), and a hash of the
 * structure that every rank must have built alike. */
static MPI_Comm parent_comm(const ladle_graph *g)
{
    for (int i = 0; i < g->nnodes; i++) {
        const ladle_op *op = g->nodes[i].op;
        if (op && (op->x_layout || op->y_layout))
            return (op->x_layout ? op->x_layout : op->y_layout)->p->root->comm;
    }
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].layout)
            return g->values[v].layout->p->root->comm;
    return MPI_COMM_NULL;
}

static uint64_t structure_hash(const ladle_graph *g)
{
    uint64_t h = LADLE_HASH_INIT;
    for (int i = 0; i < g->nnodes; i++) {
        const gnode *n = &g->nodes[i];
        int head[4] = {(int)n->kind, n->nin, n->nout, n->dim};
        h = ladle__hash(h, head, sizeof head);
        h = ladle__hash(h, n->in, sizeof(int) * (size_t)n->nin);
    }
    return h;
}

/* Which input slots take a second contribution to their value's gradient
 * (the backward visits the nodes in reverse order; the first visitor of a
 * value writes its gradient, the later ones write a scratch buffer that is
 * then added; an add adds directly). */
static ladle_status plan_scratch(ladle_graph *g)
{
    ladle_status st = LADLE_OK;
    int *seen = ladle__calloc((size_t)g->nvalues + 1, sizeof(int));
    LADLE_CHECK(seen != NULL, LADLE_ERR_ALLOC, "out of memory");
    for (int j = g->norder - 1; j >= 0; j--) {
        gnode *n = &g->nodes[g->order[j]];
        if (n->nin == 0)
            continue;
        n->scratch = ladle__calloc((size_t)n->nin, sizeof(ladle_tensor *));
        n->via_scratch = ladle__calloc((size_t)n->nin, sizeof(int));
        LADLE_CHECK(n->scratch && n->via_scratch, LADLE_ERR_ALLOC, "out of memory");
        for (int k = 0; k < n->nin; k++) {
            gvalue *v = &g->values[n->in[k]];
            v->uses++;
            if (seen[n->in[k]] && n->kind != G_ADD && !v->tokens)
                LADLE_CALL(ladle_tensor_create(g->dtype, g->device, v->nd, v->shape,
                                               &n->scratch[k]));
            seen[n->in[k]] = 1;
        }
    }
fail:
    ladle__free(seen);
    return st;
}

/* Buffers of the values and the nodes. */
static ladle_status allocate(ladle_graph *g)
{
    ladle_status st = LADLE_OK;
    ladle_dtype dt = g->dtype;
    ladle_device dev = g->device;
    for (int v = 0; v < g->nvalues; v++) {
        gvalue *x = &g->values[v];
        if (g->nodes[x->node].kind != G_INPUT) {
            LADLE_CALL(ladle_tensor_create(dt, dev, x->nd, x->shape, &x->buf));
            x->y = x->buf;
        }
        if (!x->tokens)
            LADLE_CALL(ladle_tensor_create(dt, dev, x->nd, x->shape, &x->dy));
    }
    for (int i = 0; i < g->nnodes; i++) {
        gnode *n = &g->nodes[i];
        if (n->kind == G_LAYER || n->kind == G_LOSS)
            LADLE_CALL(ladle_ctx_create(n->op, &n->ctx));
        if (n->kind == G_LOSS) {
            int64_t one = 1;
            LADLE_CALL(ladle_tensor_create(dt, dev, 0, &one, &n->lossval));
            LADLE_CALL(ladle_tensor_create(dt, dev, 0, &one, &n->dloss));
            LADLE_CALL(ladle_tensor_fill(n->dloss, n->weight * g->loss_scale));
        }
        int parts = n->kind == G_CONCAT ? n->nin : n->kind == G_SPLIT ? n->nout : 0;
        if (parts) {
            n->tx = ladle__calloc((size_t)parts, sizeof(ladle_tensor *));
            n->tdx = ladle__calloc((size_t)parts, sizeof(ladle_tensor *));
            LADLE_CHECK(n->tx && n->tdx, LADLE_ERR_ALLOC, "out of memory");
        }
    }
    LADLE_CALL(plan_scratch(g));
fail:
    return st;
}

int ladle__op_parts_of(const ladle_op *op)
{
    if (op->vt->num_parts)
        return op->vt->num_parts(op);
    if (ladle_recompute_inner(op) != NULL)
        return 1;
    return op->vt->ctx_init == ladle__dist_ctx_init &&
           ((const ladle__dist_base *)op->impl)->local != NULL;
}

ladle_op *ladle__op_part_of(const ladle_op *op, int i)
{
    if (op->vt->num_parts)
        return op->vt->part_at(op, i);
    ladle_op *inner = ladle_recompute_inner(op);
    return inner ? inner : ((const ladle__dist_base *)op->impl)->local;
}

/* The leaves under op (op itself when it has no parts) into out[n...]
 * when out is not NULL. Returns the new count. */
static int leaves(ladle_op *op, ladle_op **out, int n)
{
    int k = ladle__op_parts_of(op);
    if (k == 0) {
        if (out)
            out[n] = op;
        return n + 1;
    }
    for (int i = 0; i < k; i++)
        n = leaves(ladle__op_part_of(op, i), out, n);
    return n;
}

/* What walk finds under every layer of g, in order: *all (freed by the
 * caller) and its count *n. */
static ladle_status collect(const ladle_graph *g, int (*walk)(ladle_op *, ladle_op **, int),
                            ladle_op ***all, int *n)
{
    ladle_status st = LADLE_OK;
    int k = 0;
    for (int i = 0; i < g->nlayers; i++)
        k = walk(g->layers[i], NULL, k);
    *all = ladle__calloc((size_t)k + 1, sizeof **all);
    LADLE_CHECK(*all != NULL, LADLE_ERR_ALLOC, "out of memory");
    for (int i = 0, j = 0; i < g->nlayers; i++)
        j = walk(g->layers[i], *all, j);
    *n = k;
fail:
    return st;
}

/* The layers run one call at a time, those inside containers and
 * recomputation wrappers too (a wrapper reruns its inner layer's forward
 * right before its backward): one scratch workspace serves every leaf. */
static ladle_status share_workspace(ladle_graph *g)
{
    ladle_status st = LADLE_OK;
    int n = 0;
    ladle_op **all = NULL;
    LADLE_CALL(collect(g, leaves, &all, &n));
    st = ladle__share_scratch(n, all, &g->scratch, &g->scratch_be, &g->scratch_tags);
fail:
    ladle__free(all);
    return st;
}

/* The outermost sequentials under op into out[n...] when out is not NULL
 * (one inside another runs while the outer one's activations are live, so
 * only the outermost share). Returns the new count. */
static int outer_seqs(ladle_op *op, ladle_op **out, int n)
{
    if (ladle__seq_scratch_bytes(op) > 0) {
        if (out)
            out[n] = op;
        return n + 1;
    }
    for (int i = 0, k = ladle__op_parts_of(op); i < k; i++)
        n = outer_seqs(ladle__op_part_of(op, i), out, n);
    return n;
}

/* The activations the sequentials keep for calls without a ctx: live only
 * within one such call, and the graph's layers run one call at a time, so
 * one block of the largest serves the outermost ones. */
static ladle_status share_seq_scratch(ladle_graph *g)
{
    ladle_status st = LADLE_OK;
    int n = 0;
    ladle_op **all = NULL;
    LADLE_CALL(collect(g, outer_seqs, &all, &n));
    size_t most = 0;
    for (int i = 0; i < n; i++) {
        size_t b = ladle__seq_scratch_bytes(all[i]);
        most = b > most ? b : most;
    }
    if (n < 2 || all[0]->be->device != g->device)
        goto fail; /* nothing to share */
    LADLE_CALL(ladle__alloc_as(all[0]->be, LADLE_MEM_ACTIVATIONS, most, &g->seq_mem));
    g->seq_be = all[0]->be;
    for (int i = 0; i < n; i++)
        if (all[i]->be == g->seq_be)
            LADLE_CALL(ladle__seq_scratch_move(all[i], g->seq_mem, most));
fail:
    ladle__free(all);
    return st;
}

/* The layers in order and their parameters' names. */
static ladle_status list_layers(ladle_graph *g)
{
    ladle_status st = LADLE_OK;
    g->layers = ladle__calloc((size_t)g->nnodes + 1, sizeof(ladle_op *));
    LADLE_CHECK(g->layers != NULL, LADLE_ERR_ALLOC, "out of memory");
    for (int j = 0; j < g->norder; j++) {
        gnode *n = &g->nodes[g->order[j]];
        if (n->kind != G_LAYER)
            continue;
        n->index = g->nlayers;
        g->layers[g->nlayers++] = n->op;
        g->nparams += ladle_op_num_params(n->op);
    }
    g->pnames = ladle__calloc((size_t)g->nparams + 1, sizeof(char *));
    LADLE_CHECK(g->pnames != NULL, LADLE_ERR_ALLOC, "out of memory");
    int p = 0;
    for (int j = 0; j < g->norder; j++) {
        const gnode *n = &g->nodes[g->order[j]];
        for (int q = 0; n->kind == G_LAYER && q < ladle_op_num_params(n->op); q++) {
            const char *pn = ladle_op_param_name(n->op, q);
            size_t len = strlen(n->name) + strlen(pn ? pn : "") + 2;
            g->pnames[p] = ladle__calloc(len, 1);
            LADLE_CHECK(g->pnames[p] != NULL, LADLE_ERR_ALLOC, "out of memory");
            snprintf(g->pnames[p++], len, "%s.%s", n->name, pn ? pn : "");
        }
    }
fail:
    return st;
}

/* The collective part: repartitions, then buffers (buckets follow). */
static ladle_status build(ladle_graph *g)
{
    ladle_status st = LADLE_OK;
    for (int j = 0; j < g->norder; j++) {
        gnode *n = &g->nodes[g->order[j]];
        if (n->kind == G_REPART)
            LADLE_CALL(ladle_repartition_create(g->values[n->in[0]].layout, n->want, g->dtype,
                                                g->device, 0, &n->op));
    }
    /* the values, their gradients and the contexts are activations */
    int kind = ladle__mem_kind_begin(LADLE_MEM_ACTIVATIONS);
    st = allocate(g);
    ladle__mem_kind_end(kind);
    LADLE_CALL(st);
    LADLE_CALL(list_layers(g));
    LADLE_CALL(share_workspace(g));
    LADLE_CALL(share_seq_scratch(g));
fail:
    return st;
}

ladle_status ladle_graph_finalize(ladle_graph *g)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(g);
    LADLE_CHECK(!g->finalized && !g->broken, LADLE_ERR_STATE, "%s",
                g->broken ? "a finalize of this graph failed: it can only be destroyed"
                          : "the graph is finalized already");
    g->broken = 1;
    st = check_ids(g);
    if (st == LADLE_OK)
        st = check_tokens(g);
    if (st == LADLE_OK)
        st = topo_order(g);
    if (st == LADLE_OK)
        st = infer(g);
    g->parent = parent_comm(g);
    if (g->parent != MPI_COMM_NULL)
        st = ladle__agree(g->parent, st, structure_hash(g), __func__);
    LADLE_CALL(st);
    st = build(g);
    if (g->parent != MPI_COMM_NULL)
        st = ladle__agree(g->parent, st, 0, __func__);
    LADLE_CALL(st);
    /* the recomputed layers' scratch: their backwards run one at a time */
    st = ladle_recompute_share(g->nlayers, g->layers);
    if (g->parent != MPI_COMM_NULL)
        st = ladle__agree(g->parent, st, 0, __func__);
    LADLE_CALL(st);
    /* the buckets' reductions are planned only once every rank got here */
    if (g->nlayers > 0)
        st = ladle__buckets_create(g->nlayers, g->layers, g->bucket_bytes, g->dtype, g->device,
                                   &g->buckets);
    if (g->parent != MPI_COMM_NULL)
        st = ladle__agree(g->parent, st, 0, __func__);
    LADLE_CALL(st);
    g->broken = 0;
    g->finalized = 1;
fail:
    return st;
}
