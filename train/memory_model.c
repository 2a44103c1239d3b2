/*
 * The memory model (ladle/memory.h): one rank's bytes by kind, computed
 * from a chain's or graph's shapes, contexts and plans and an optimizer's
 * description, without allocating. The planner compares layouts by it.
 */
#include "train/memory_model.h"
#include "layers/distributed/dist.h"
#include "src/op/op_impl.h"
#include "train/graph_impl.h"

static size_t tensor_bytes(const ladle_tensor *t)
{
    return t != NULL ? (size_t)t->numel * ladle_dtype_size(t->dtype) : 0;
}

static size_t y_bytes(const ladle_op *op)
{
    size_t n = ladle_dtype_size(op->dtype);
    for (int d = 0; d < op->y_ndim; d++)
        n *= (size_t)op->y_shape[d];
    return n;
}

/* The optimizer's states of one parameter, and its f32 master. */
static void add_optim(const ladle_optimizer_desc *opt, const ladle_tensor *p,
                      const ladle_tensor *g, ladle_memory_stats *s, int64_t *widest)
{
    if (opt == NULL)
        return;
    int half = ladle__is_half(p->dtype);
    int nstate = opt->kind == LADLE_OPT_SGD ? opt->momentum > 0 : 2;
    size_t es = half ? sizeof(float) : ladle_dtype_size(p->dtype);
    s->current[LADLE_MEM_OPTIM] += (size_t)nstate * es * (size_t)p->numel;
    if (half) {
        s->current[LADLE_MEM_OPTIM] += sizeof(float) * (size_t)p->numel;
        if (g->dtype != LADLE_F32 && p->numel > *widest)
            *widest = p->numel; /* one f32 buffer for the widest such gradient */
    }
}

/* Parameters, gradients, optimizer states and the workspaces ladle owns of
 * op and, for a container, its layers. */
/* Whether t is (the memory of) one of the tensors of op's parameters. */
static int shares(const ladle_op *op, const ladle_tensor *t)
{
    for (int i = 0; op != NULL && t != NULL && i < ladle_op_num_params(op); i++)
        if (t->data == ladle_op_param(op, i)->data || t->data == ladle_op_grad(op, i)->data)
            return 1;
    return 0;
}

/* What a distributed layer's skeleton holds beside its local layer: its
 * own parameter tensors where the local layer computes with a replica of
 * them, and the message buffers of the sums of replicated gradients. */
static void add_dist_base(const ladle__dist_base *b, ladle_memory_stats *s)
{
    int nlocal = b->local != NULL ? ladle_op_num_params(b->local) : 0;
    for (int i = 0; i < nlocal && i < b->nparams; i++) {
        if (shares(b->local, b->param[i]))
            continue;
        s->current[LADLE_MEM_PARAMS] += tensor_bytes(b->param[i]);
        if (b->grad[i] != b->param[i])
            s->current[LADLE_MEM_GRADS] += tensor_bytes(b->grad[i]);
    }
    for (int i = 0; i < LADLE_MAX_PARAMS; i++)
        if (b->sync[i] != NULL && !b->sync[i]->ws_caller)
            s->current[LADLE_MEM_COMM] += b->sync[i]->ws_bytes;
}

static void add_op(const ladle_op *op, const ladle_optimizer_desc *opt,
                   ladle_memory_stats *s, int64_t *widest, const ladle_op *outer)
{
    /* a distributed layer's local layer holds the replica it computes
     * with, beside the layer's own parameters */
    if (op->vt->num_params == ladle__dist_num_params) {
        const ladle__dist_base *b = op->impl;
        if (b->local != NULL)
            add_op(b->local, NULL, s, widest, op); /* its states are the layer's */
        add_dist_base(b, s);
    }
    if (op->vt->num_parts != NULL) {
        int n = op->vt->num_parts(op);
        for (int i = 0; i < n; i++)
            add_op(op->vt->part_at(op, i), opt, s, widest, NULL);
    } else {
        int n = ladle_op_num_params(op);
        for (int i = 0; i < n; i++) {
            const ladle_tensor *p = ladle_op_param(op, i), *g = ladle_op_grad(op, i);
            s->current[LADLE_MEM_PARAMS] += shares(outer, p) ? 0 : tensor_bytes(p);
            s->current[LADLE_MEM_GRADS] += shares(outer, g) ? 0 : tensor_bytes(g);
            add_optim(opt, p, g, s, widest);
        }
    }
    for (int k = 0; k < LADLE_MEM_KINDS; k++)
        if (k != LADLE_MEM_OTHER)
            s->current[k] += op->held[k];
    /* a planned exchange's workspace holds its messages (ladle__op_finish) */
    int comm = op->fwd != NULL || op->adj != NULL;
    if (!op->ws_caller)
        s->current[comm ? LADLE_MEM_COMM : LADLE_MEM_WORKSPACE] += op->ws_bytes;
}

static ladle_status start(const ladle_optimizer_desc *opt, ladle_memory_stats *s)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(s);
    LADLE_CHECK_SIZE(s);
    if (opt != NULL) {
        LADLE_CHECK_SIZE(opt);
        LADLE_CHECK(opt->kind == LADLE_OPT_SGD || opt->kind == LADLE_OPT_ADAM ||
                        opt->kind == LADLE_OPT_ADAMW,
                    LADLE_ERR_ARG, "unknown optimizer kind %d", (int)opt->kind);
    }
    size_t size = s->size;
    memset(s, 0, sizeof *s);
    s->size = size;
fail:
    return st;
}

/* The gradient buckets: their packed buffers and reductions' workspaces
 * (communication), and the slices of sharded data parallelism (the summed
 * gradient's, and at stages 1 and 2 the parameters' the optimizer steps). */
static void add_buckets(const ladle__buckets *b, ladle_memory_stats *s)
{
    size_t p = 0, g = 0, c = 0;
    ladle__buckets_bytes(b, &p, &g, &c);
    s->current[LADLE_MEM_PARAMS] += p;
    s->current[LADLE_MEM_GRADS] += g;
    s->current[LADLE_MEM_COMM] += c;
}

/* Sharded optimizer states (stages 1 and 2, f32 and f64 only): the
 * optimizer steps this rank's slices of the bucketed parameters, not the
 * parameters, so their states are the slices' size. */
static void shard_optim(const ladle_network *net, const ladle__buckets *b,
                        const ladle_optimizer_desc *opt, ladle_memory_stats *s)
{
    size_t nstate = opt->kind == LADLE_OPT_SGD ? opt->momentum > 0 : 2;
    size_t *o = &s->current[LADLE_MEM_OPTIM];
    for (int i = 0; i < ladle_network_size(net); i++) {
        const ladle_op *op = ladle_network_layer(net, i);
        for (int j = 0; j < ladle_op_num_params(op); j++)
            if (ladle__buckets_holds(b, i, j))
                *o -= nstate * tensor_bytes(ladle_op_param(op, j));
    }
    size_t p = 0, g = 0, c = 0;
    ladle__buckets_bytes(b, &p, &g, &c);
    *o += nstate * p;
}

static void finish(ladle_memory_stats *s, int64_t widest)
{
    s->current[LADLE_MEM_GRADS] += sizeof(float) * (size_t)widest;
    for (int k = 0; k < LADLE_MEM_KINDS; k++) {
        s->peak[k] = s->current[k];
        s->total += s->current[k];
    }
    s->peak_total = s->total;
}

ladle_status ladle_network_memory_model(const ladle_network *net,
                                        const ladle_optimizer_desc *opt,
                                        ladle_memory_stats *s)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(net);
    LADLE_CALL(start(opt, s));
    int64_t widest = 0;
    int n = ladle_network_size(net);
    size_t *act = &s->current[LADLE_MEM_ACTIVATIONS];
    for (int i = 0; i < n; i++) {
        const ladle_op *op = ladle_network_layer(net, i);
        add_op(op, opt, s, &widest, NULL);
        *act += ladle_ctx_bytes_held(ladle__network_ctx(net, i)) + 2 * y_bytes(op);
    }
    const ladle_op *loss = ladle_network_loss_op(net);
    add_op(loss, opt, s, &widest, NULL);
    /* the loss's context, and its value and seed (one element each) */
    *act += ladle_ctx_bytes_held(ladle__network_ctx(net, n)) +
            2 * ladle_dtype_size(loss->dtype);
    const ladle__buckets *b = ladle__network_buckets(net);
    add_buckets(b, s);
    if (opt != NULL && ladle_network_zero_stage(net) >= 1)
        shard_optim(net, b, opt, s);
    finish(s, widest);
fail:
    return st;
}

/* The largest workspace that shares scratch among op and the layers under
 * it (a container's parts, a distributed layer's local layer, a
 * recomputation wrapper's inner layer): the graph's scratch serves them
 * all, one call at a time (train/graph_plan.c). */
static size_t shared_ws(const ladle_op *op, const void *scratch)
{
    size_t most = op->ws == scratch ? op->ws_bytes : 0;
    for (int i = 0, n = ladle__op_parts_of(op); i < n; i++) {
        size_t k = shared_ws(ladle__op_part_of(op, i), scratch);
        most = k > most ? k : most;
    }
    return most;
}

ladle_status ladle_graph_memory_model(const ladle_graph *g, const ladle_optimizer_desc *opt,
                                      ladle_memory_stats *s)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(g);
    LADLE_CHECK(g->finalized, LADLE_ERR_STATE, "the graph is not finalized");
    LADLE_CALL(start(opt, s));
    int64_t widest = 0;
    size_t *act = &s->current[LADLE_MEM_ACTIVATIONS], es = ladle_dtype_size(g->dtype);
    size_t shared = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const gnode *n = &g->nodes[i];
        if (n->op != NULL) {
            add_op(n->op, opt, s, &widest, NULL);
            size_t k = g->scratch != NULL ? shared_ws(n->op, g->scratch) : 0;
            shared = k > shared ? k : shared;
        }
        *act += ladle_ctx_bytes_held(n->ctx);
        if (n->kind == G_LOSS)
            *act += 2 * es;
        for (int k = 0; k < n->nin; k++)
            *act += n->scratch != NULL ? tensor_bytes(n->scratch[k]) : 0;
    }
    s->current[LADLE_MEM_WORKSPACE] += shared;
    for (int v = 0; v < g->nvalues; v++) {
        const gvalue *x = &g->values[v];
        size_t bytes = es;
        for (int d = 0; d < x->nd; d++)
            bytes *= (size_t)x->shape[d];
        *act += (g->nodes[x->node].kind != G_INPUT) * bytes + (!x->tokens) * bytes;
    }
    add_buckets(g->buckets, s);
    finish(s, widest);
fail:
    return st;
}
