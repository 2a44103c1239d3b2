/*
 * Tensor parallelism with sequence parallelism (see ladle/distributed.h):
 * the residual stream x (N x T x E) split over p = D x S x 1, batch blocks
 * by sequence blocks, and the S ranks of a batch block sharing the heads
 * or the hidden features of the heavy layers. Each layer is
 *
 *   attention   y = G* (sum_i A_i) G x       (A_i: head group i)
 *   column      y = (stack_i L_i) G x        (L_i: output features i)
 *   row         y = G* (sum_i L_i) x         (L_i: input features i)
 *
 * where G is the all-gather of the sequence (a window gather: worker (b, i)
 * receives the whole sequence of batch block b from its S owners) and G*
 * its adjoint, the reduce-scatter (each sequence block gets the sum of the
 * S workers' partial outputs over its rows). A column layer followed by a
 * row layer (the MLP) meets in the features-split layout with no message
 * in between. The backward of each is the same chain read backwards:
 * dx = G* A_i* G dy, and so on; the weight pass reuses the gathered dy.
 */
#include <string.h>

#include "layers/distributed/dist.h"

enum { TP_ATTN, TP_COL, TP_ROW };

typedef struct tp {
    /* base.local: the rank's sequential layer on its block; base.param /
     * base.grad: zero-volume stand-ins for parameters it lacks */
    ladle__dist_base base;
    const ladle_partition *p; /* borrowed during creation */
    int kind;
    int D, S, b, i;     /* the grid and this rank's place (-1 outside p) */
    int64_t n, t, e, f; /* N, T, the stream's width E, the other width F */
    int64_t nb;         /* the rows of this rank's batch block */
    int64_t heads, hd;  /* attention: H and d (global) */
    ladle_attention_desc ad;
    int bias;                   /* linear: with a bias; attention: qkv bias */
    int out_bias;               /* attention: with an output bias */
    int lidx[LADLE_MAX_PARAMS]; /* the local layer's index of parameter k, or -1 */
    int gnd[LADLE_MAX_PARAMS];
    int64_t gshape[LADLE_MAX_PARAMS][3], goff[LADLE_MAX_PARAMS][3];
    const char *names[LADLE_MAX_PARAMS];
    /* how parameter k splits: along dimension sdim[k] in units of sunit[k]
     * elements per head or feature (-1: whole, on index 0 only), and the
     * stream and fans of the sequential layer's draw of it */
    int sdim[LADLE_MAX_PARAMS];
    int64_t sunit[LADLE_MAX_PARAMS];
    uint64_t stream[LADLE_MAX_PARAMS];
    double fan_in[LADLE_MAX_PARAMS], fan_out[LADLE_MAX_PARAMS];
    ladle_op *gather; /* G */
    /* views of the workspace (a scratch workspace, see below): region A
     * holds G x (attention, column) or the attention's partial dx, region
     * B the partial y (attention, row), G dy (attention, row) or the
     * column layer's partial dx; the gather's message buffers follow */
    ladle_tensor *wa, *wb;
    size_t a_bytes, b_bytes, l_bytes; /* l: the local layer's scratch */
    ladle__ws_tags ltags;             /* the local layer's record (see claim) */
} tp;

enum { WA = 0, WB = 1 };

/* Regions start on 64-byte boundaries. */
static size_t round64(size_t bytes) { return (bytes + 63) / 64 * 64; }

static const ladle__part tp_parts[] = {
    LADLE__PART_DIST_BASE(tp), LADLE__PART_OP(tp, gather), LADLE__PART_TENSOR(tp, wa),
    LADLE__PART_TENSOR(tp, wb), LADLE__PARTS_END};

static void tp_destroy(ladle_op *op) { ladle__parts_free(op->impl, tp_parts, NULL); }

static void tp_ws_bound(ladle_op *op);

/*
 * The workspace is scratch (op->ws_scratch): a graph may share it among
 * all its tensor-parallel layers, so that the whole-sequence tensors are
 * held once per model rather than once per layer and context. Nothing in
 * it is trusted across calls unless the shared record says this op wrote
 * it last with that label: G x of the ctx's forward (ctx->gen) in A, G dy
 * of that ctx in B. Otherwise the weight pass gathers again (x from
 * the forward's input, which the ctx borrows as every layer's does), which
 * is Megatron-LM's trade of one all-gather per layer for the memory. Every
 * rank makes the same calls, so every rank decides alike whether to gather.
 *
 * The local attention keeps a record of its own region (its dQKV for the
 * weight pass) that only it and this layer see: when another op has
 * written the shared memory since this layer's last call, claim forgets
 * that too.
 */
static void claim(ladle_op *op)
{
    tp *v = op->impl;
    if (op->ws_tags == NULL || op->ws_tags->who != op)
        memset(&v->ltags, 0, sizeof v->ltags);
    ladle__ws_claim(op);
}

/* dst (region r) = G src, unless it holds what already (what 0: always). */
static ladle_status gather_into(ladle_op *op, int r, ladle_tensor *dst,
                                const ladle_tensor *src, uint64_t what)
{
    ladle_status st = LADLE_OK;
    tp *v = op->impl;
    if (ladle__ws_holds(op, r, what))
        return LADLE_OK;
    ladle__ws_label(op, r, 0);
    LADLE_CALL(ladle_op_forward(v->gather, src, dst));
    ladle__ws_label(op, r, what);
fail:
    return st;
}

static ladle_status tp_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    tp *v = op->impl;
    ladle__dist_ctx *c = ctx ? ctx->impl : NULL;
    ladle_ctx *lc = c ? c->local : NULL;
    (void)n;
    claim(op);
    if (v->kind == TP_ROW) {
        ladle__ws_label(op, WB, 0);
        if (v->base.local)
            LADLE_CALL(ladle_layer_forward(v->base.local, lc, x, v->wb));
        LADLE_CALL(ladle_op_adjoint(v->gather, v->wb, y));
    } else {
        LADLE_CALL(gather_into(op, WA, v->wa, x, ctx ? ctx->gen : 0));
        if (v->kind == TP_ATTN)
            ladle__ws_label(op, WB, 0);
        ladle_tensor *out = v->kind == TP_COL ? y : v->wb;
        if (v->base.local)
            LADLE_CALL(ladle_layer_forward(v->base.local, lc, v->wa, out));
        if (v->kind == TP_ATTN)
            LADLE_CALL(ladle_op_adjoint(v->gather, v->wb, y));
    }
fail:
    return st;
}

static ladle_status tp_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    tp *v = op->impl;
    ladle__dist_ctx *c = ctx ? ctx->impl : NULL;
    (void)n;
    if (dx == NULL)
        return LADLE_OK;
    claim(op);
    const ladle_tensor *dyg = dy; /* a column layer's dy is its own block */
    if (v->kind != TP_COL) {
        LADLE_CALL(gather_into(op, WB, v->wb, dy, ctx ? ctx->gen : 0));
        dyg = v->wb;
    }
    int r = v->kind == TP_ATTN ? WA : WB; /* the partial dx's region */
    ladle_tensor *out = v->kind == TP_ROW ? dx : r == WA ? v->wa : v->wb;
    if (v->kind != TP_ROW)
        ladle__ws_label(op, r, 0);
    LADLE_CALL(ladle__dist_local_backward(&v->base, c, dyg, out));
    if (v->kind != TP_ROW)
        LADLE_CALL(ladle_op_adjoint(v->gather, out, dx));
fail:
    return st;
}

static ladle_status tp_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       int64_t n)
{
    ladle_status st = LADLE_OK;
    tp *v = op->impl;
    ladle__dist_ctx *c = ctx->impl;
    (void)n;
    claim(op);
    const ladle_tensor *dyg = dy;
    if (v->kind != TP_COL) {
        LADLE_CALL(gather_into(op, WB, v->wb, dy, ctx->gen));
        dyg = v->wb;
    }
    /* the local layer's ctx borrowed region A as its x: fill it again */
    if (v->kind != TP_ROW)
        LADLE_CALL(gather_into(op, WA, v->wa, ctx->x, ctx->gen));
    if (v->base.local)
        LADLE_CALL(ladle_layer_backward_weight(v->base.local, c->local, dyg));
fail:
    return st;
}

static ladle_tensor *tp_param_at(const ladle_op *op, int k, int grad, const char **name)
{
    const tp *v = op->impl;
    if (name)
        *name = v->names[k];
    if (v->lidx[k] >= 0)
        return grad ? ladle_op_grad(v->base.local, v->lidx[k])
                    : ladle_op_param(v->base.local, v->lidx[k]);
    return grad ? v->base.grad[k] : v->base.param[k];
}

static void tp_param_info(const ladle_op *op, int k, ladle__pinfo *info)
{
    const tp *v = op->impl;
    info->ndim = v->gnd[k];
    for (int d = 0; d < v->gnd[k]; d++) {
        info->global[d] = v->gshape[k][d];
        info->offset[d] = v->lidx[k] >= 0 ? v->goff[k][d] : 0;
    }
    /* batch block 0's copy writes the shard */
    info->owner = v->lidx[k] >= 0 && v->b == 0;
    ladle__dist_sync_info(v->base.sync[k], v->base.gid[k], v->base.cnt[k], info);
}

static void tp_param_bound(ladle_op *op, int k)
{
    tp *v = op->impl;
    if (v->lidx[k] >= 0 && v->base.local->vt->param_bound)
        v->base.local->vt->param_bound(v->base.local, v->lidx[k]);
    ladle__dist_param_bound(op, k);
}

static const ladle_op_vtable tp_vt = {
    .kind = LADLE_OP_DIST_TP,
    .name = "tensor-parallel",
    .destroy = tp_destroy,
    .layer_forward = tp_forward,
    .layer_backward = tp_backward,
    .layer_backward_weight = tp_backward_weight,
    .ctx_init = ladle__dist_ctx_init,
    .ctx_held = ladle__dist_ctx_held,
    .ctx_fini = ladle__dist_ctx_fini,
    .num_params = ladle__dist_num_params,
    .param_at = tp_param_at,
    .set_training = ladle__dist_set_training,
    .param_info = tp_param_info,
    .sync_grads = ladle__dist_sync_grads,
    .param_bound = tp_param_bound,
    .ws_bound = tp_ws_bound,
};

/* The block of the split dimension that tensor index i holds: heads for
 * attention, output features for a column layer, input features for a
 * row layer. */
static int64_t split_total(const tp *v) { return v->kind == TP_ATTN ? v->heads : v->f; }

/* Parameter k's box for tensor index i (extents in ext, offsets in off);
 * 0 when index i holds none of it (the output bias beyond index 0). */
static int param_box(const tp *v, int k, int i, int64_t *off, int64_t *ext)
{
    int64_t s0 = ladle__balanced_start(split_total(v), v->S, i);
    int64_t sl = ladle__balanced_size(split_total(v), v->S, i);
    for (int d = 0; d < 3; d++)
        off[d] = 0, ext[d] = v->gshape[k][d];
    if (v->sdim[k] < 0) /* a bias the partial outputs would add S times */
        return i == 0;
    off[v->sdim[k]] = s0 * v->sunit[k];
    ext[v->sdim[k]] = sl * v->sunit[k];
    return 1;
}

/* D > 1: every block has one copy per batch block; the copies of tensor
 * index i form group i (count: the block's elements). */
static void replica_group(const void *arg, int k, int r, int *gid, int64_t *count)
{
    const tp *v = arg;
    int c[3] = {0, 0, 0};
    ladle_partition_coords_of(v->p, r, c);
    int64_t off[3], ext[3];
    if (param_box(v, k, c[1], off, ext)) {
        *gid = c[1];
        *count = 1;
        for (int d = 0; d < v->gnd[k]; d++)
            *count *= ext[d];
    } else {
        *gid = v->S + r;
        *count = 0;
    }
}

/* The global facts every rank checks alike. */
static ladle_status validate(int kind, const ladle_attention_desc *ad,
                             const ladle_partition *p, const int64_t *xs, int64_t f,
                             ladle_dtype dtype, unsigned flags, const char *fn)
{
    ladle_status st = ladle__make_check_kind(dtype, flags, fn);
    if (st != LADLE_OK)
        return st;
    if (ladle_partition_ndim(p) != 3 || ladle_partition_shape(p)[2] != 1)
        return ladle__raise(LADLE_ERR_PARTITION, fn,
                            "p must be a D x S x 1 grid (batch blocks x sequence blocks)");
    const int *ps = ladle_partition_shape(p);
    for (int d = 0; d < 3; d++)
        if (xs[d] < 1 || xs[d] > ((int64_t)1 << 40))
            return ladle__raise(LADLE_ERR_SHAPE, fn, "x's extent %lld in dimension %d",
                                (long long)xs[d], d);
    if (xs[0] < ps[0] || xs[1] < ps[1])
        return ladle__raise(
            LADLE_ERR_SHAPE, fn,
            "a batch of %lld and a sequence of %lld over a %d x %d grid: every "
            "rank needs a block",
            (long long)xs[0], (long long)xs[1], ps[0], ps[1]);
    if (kind == TP_ATTN) {
        if (ad->num_heads < ps[1])
            return ladle__raise(LADLE_ERR_SHAPE, fn,
                                "%lld heads over %d ranks: every rank needs a head",
                                (long long)ad->num_heads, ps[1]);
    } else if (f < ps[1] || f > INT32_MAX || xs[2] > INT32_MAX) {
        return ladle__raise(
            LADLE_ERR_SHAPE, fn,
            "%lld features over %d ranks: every rank needs one (and at most "
            "2^31 - 1)",
            (long long)f, ps[1]);
    }
    return LADLE_OK;
}

/* Layouts on p: x's and y's (sequence blocks, or for a column layer's y
 * and a row layer's x the features split S ways over whole sequences), and
 * the gathered one lw (whole sequences of width E, one box per batch
 * block on each of its S ranks). Local (global facts). */
static ladle_status layouts(ladle__make *m, tp *v, const ladle_partition *p,
                            ladle_layout **lw)
{
    ladle_status st = LADLE_OK;
    int size = ladle_partition_size(p);
    int64_t *off = ladle__calloc((size_t)size * 3, sizeof(int64_t));
    int64_t *ext = ladle__calloc((size_t)size * 3, sizeof(int64_t));
    int64_t *foff = ladle__calloc((size_t)size * 3, sizeof(int64_t));
    int64_t *fext = ladle__calloc((size_t)size * 3, sizeof(int64_t));
    LADLE_CHECK(off && ext && foff && fext, LADLE_ERR_ALLOC, "out of memory");
    for (int r = 0; r < size; r++) {
        int c[3];
        ladle_partition_coords_of(p, r, c);
        int b = c[0], i = c[1];
        int64_t *o = off + 3 * r, *x = ext + 3 * r, *fo = foff + 3 * r, *fx = fext + 3 * r;
        o[0] = fo[0] = ladle__balanced_start(v->n, v->D, b);
        x[0] = fx[0] = ladle__balanced_size(v->n, v->D, b);
        o[1] = fo[1] = 0;
        x[1] = fx[1] = v->t;
        o[2] = 0;
        x[2] = v->e;
        fo[2] = ladle__balanced_start(v->f, v->S, i);
        fx[2] = ladle__balanced_size(v->f, v->S, i);
    }
    int64_t ge[3] = {v->n, v->t, v->e}, gf[3] = {v->n, v->t, v->f};
    ladle_layout *seq = NULL, *feat = NULL;
    LADLE_CALL(ladle_layout_create_balanced(p, 3, ge, &seq));
    LADLE_CALL(ladle__layout_create_explicit(p, 3, ge, off, ext, lw));
    if (v->kind != TP_ATTN)
        LADLE_CALL(ladle__layout_create_explicit(p, 3, gf, foff, fext, &feat));
    m->lx = v->kind == TP_ROW ? feat : ladle__layout_retain(seq);
    m->ly = v->kind == TP_COL ? feat : ladle__layout_retain(seq);
    if (v->kind == TP_ATTN)
        ladle_layout_destroy(&feat);
    ladle_layout_destroy(&seq);
fail:
    ladle__free(off);
    ladle__free(ext);
    ladle__free(foff);
    ladle__free(fext);
    return st;
}

/* Parameter k: name, global shape (up to 3 extents), how it splits and how
 * the sequential layer draws it. */
static void param(tp *v, int k, const char *name, int nd, int64_t g0, int64_t g1,
                  int64_t g2, int sdim, int64_t sunit, uint64_t stream, double fan_in,
                  double fan_out)
{
    v->names[k] = name;
    v->gnd[k] = nd;
    v->gshape[k][0] = g0, v->gshape[k][1] = g1, v->gshape[k][2] = g2;
    v->sdim[k] = sdim;
    v->sunit[k] = sunit;
    v->stream[k] = stream;
    v->fan_in[k] = fan_in;
    v->fan_out[k] = fan_out;
}

/* The parameters as every rank reports them, in the sequential layer's
 * order: attention's (qkv split by heads along their rows, out_weight
 * along its columns; streams 0 .. 3, fans E and H d), a linear's (the
 * weight's rows for a column layer, its columns for a row layer; streams
 * 0 and 1, fans in and out). */
static void describe_params(tp *v)
{
    int k = 0;
    if (v->kind == TP_ATTN) {
        int64_t hd = v->heads * v->hd;
        double e = (double)v->e;
        param(v, k++, "qkv_weight", 3, 3, hd, v->e, 1, v->hd, 0, e, 0);
        if (v->bias)
            param(v, k++, "qkv_bias", 2, 3, hd, 0, 1, v->hd, 1, e, 0);
        param(v, k++, "out_weight", 2, v->e, hd, 0, 1, v->hd, 2, (double)hd, 0);
        if (v->out_bias)
            param(v, k++, "out_bias", 1, v->e, 0, 0, -1, 0, 3, (double)hd, 0);
    } else {
        int col = v->kind == TP_COL;
        int64_t out = col ? v->f : v->e, in = col ? v->e : v->f;
        param(v, k++, "weight", 2, out, in, 0, col ? 0 : 1, 1, 0, (double)in, (double)out);
        if (v->bias)
            param(v, k++, "bias", 1, out, 0, 0, col ? 0 : -1, 1, 1, (double)in,
                  (double)out);
    }
    v->base.nparams = k;
}

/* The local layer of this rank's block, its parameters drawn as its blocks
 * of the global layer's, the stand-ins and the workspace. Local. */
static ladle_status allocate(ladle__make *m, tp *v, uint64_t seed)
{
    ladle_status st = LADLE_OK;
    ladle_dtype dt = m->dtype;
    ladle_device dev = m->device;
    int member = v->i >= 0;
    int64_t sl = member ? ladle__balanced_size(split_total(v), v->S, v->i) : 0;
    int64_t nb = member ? v->nb : 0;
    int64_t xs[3] = {nb, v->t, v->e}, fs[3] = {nb, v->t, v->kind == TP_ATTN ? 0 : sl};
    if (member && v->kind == TP_ATTN) {
        ladle_attention_desc d = v->ad;
        d.num_heads = sl;
        d.head_dim = v->hd;
        d.out_bias = v->out_bias && v->i == 0;
        LADLE_CALL(ladle_attention_create(&d, 3, xs, dt, dev, seed, &v->base.local));
    } else if (member) {
        int64_t *in_shape = v->kind == TP_COL ? xs : fs;
        int64_t out = v->kind == TP_COL ? sl : v->e;
        int bias = v->bias && (v->kind == TP_COL || v->i == 0);
        ladle_linear_desc ld;
        ladle_linear_desc_init(&ld, in_shape[2], out);
        ld.bias = bias;
        LADLE_CALL(ladle_linear_create(&ld, 3, in_shape, dt, dev, seed, &v->base.local));
    }
    /* map every parameter to the local layer's, or to a stand-in */
    int next = 0;
    for (int k = 0; k < v->base.nparams; k++) {
        int64_t off[3], ext[3], zero[3] = {0, 0, 0};
        int has = member && param_box(v, k, v->i, off, ext);
        v->lidx[k] = has ? next++ : -1;
        if (has) {
            memcpy(v->goff[k], off, sizeof off);
            ladle__pinfo info;
            memset(&info, 0, sizeof info);
            info.ndim = v->gnd[k];
            for (int d = 0; d < v->gnd[k]; d++) {
                info.global[d] = v->gshape[k][d];
                info.offset[d] = off[d];
            }
            LADLE_CALL(ladle__init_shard(ladle_op_param(v->base.local, v->lidx[k]), &info,
                                         LADLE_INIT_DEFAULT, v->fan_in[k], v->fan_out[k],
                                         seed, v->stream[k]));
        } else {
            LADLE_CALL(ladle__dist_param(dt, dev, v->gnd[k], zero, &v->base.param[k]));
            v->base.grad[k] = v->base.param[k];
        }
    }
    /* the workspace's regions (bound in bind_workspace): A for G x or the
     * attention's partial dx, B for everything else; whole sequences of
     * the batch block, at width E */
    size_t es = ladle_dtype_size(dt), whole = (size_t)(nb * v->t * v->e) * es;
    v->a_bytes = v->kind != TP_ROW ? round64(whole) : 0;
    v->b_bytes = round64(whole);
    v->base.nsaved = 0;
fail:
    return st;
}

/* The local layer's workspace, when it is scratch too (the attention's),
 * lives in the layer's: one shared buffer then covers both. */
static size_t local_ws(const tp *v)
{
    const ladle_op *l = v->base.local;
    return l && l->ws_scratch && l->ws_tags != NULL ? l->ws_bytes : 0;
}

/* Point the views, the gather's message buffers and the local layer's
 * scratch at op->ws: A, B, the gather's, the local layer's. */
static void tp_ws_bound(ladle_op *op)
{
    tp *v = op->impl;
    char *ws = op->ws;
    if (v->wa)
        ladle_tensor_set_data(v->wa, ws);
    if (v->wb)
        ladle_tensor_set_data(v->wb, ws + v->a_bytes);
    size_t g = ladle_op_workspace_bytes(v->gather), off = v->a_bytes + v->b_bytes;
    if (g > 0)
        ladle_op_set_workspace(v->gather, ws + off, g);
    if (v->l_bytes > 0)
        ladle__op_share_ws(v->base.local, ws + off + round64(g),
                           op->ws_tags ? &v->ltags : NULL);
}

/* The scratch workspace and the views of A and B. Local. */
static ladle_status bind_workspace(ladle_op *op, tp *v)
{
    ladle_status st = LADLE_OK;
    size_t g = ladle_op_workspace_bytes(v->gather);
    v->l_bytes = local_ws(v);
    op->ws_bytes = v->a_bytes + v->b_bytes + round64(g) + v->l_bytes;
    op->ws_scratch = 1;
    op->ws_tags = &op->ws_own_tags;
    if (v->i < 0 || op->ws_bytes == 0)
        return LADLE_OK;
    LADLE_CALL(ladle__alloc_as(op->be, LADLE_MEM_WORKSPACE, op->ws_bytes, &op->ws));
    int64_t xs[3] = {v->nb, v->t, v->e};
    if (v->a_bytes)
        LADLE_CALL(
            ladle_tensor_wrap(op->dtype, op->be->device, 3, xs, NULL, op->ws, &v->wa));
    LADLE_CALL(ladle_tensor_wrap(op->dtype, op->be->device, 3, xs, NULL,
                                 (char *)op->ws + v->a_bytes, &v->wb));
    tp_ws_bound(op);
fail:
    return st;
}

/* The arguments every rank of p must pass alike. */
static uint64_t args_hash(int kind, const ladle_attention_desc *ad, const ladle_partition *p,
                          const int64_t x_shape[3], int64_t f, int bias, ladle_dtype dtype,
                          unsigned flags, uint64_t seed)
{
    int64_t args[9] = {kind,      x_shape[0],     x_shape[1],     x_shape[2],   f,
                       bias != 0, (int64_t)dtype, (int64_t)flags, (int64_t)seed};
    uint64_t h = ladle__make_hash(LADLE_HASH_INIT, 1, &p, 9, args);
    if (ad) {
        int64_t a[8] = {ad->embed_dim,   ad->num_heads,     ad->head_dim,
                        ad->causal != 0, ad->qkv_bias != 0, ad->out_bias != 0,
                        ad->block,       ad->f32_tiles != 0};
        h = ladle__hash(h, a, sizeof a);
        h = ladle__hash(h, &ad->scale, sizeof ad->scale);
    }
    return h;
}

/* The layer's extents and this rank's blocks of them, and its parameters'
 * description. Local. */
static void plan_shape(tp *v, int kind, const ladle_attention_desc *ad,
                       const ladle_partition *p, const int64_t x_shape[3], int64_t f, int bias)
{
    const int *ps = ladle_partition_shape(p), *c = ladle_partition_coords(p);
    v->kind = kind;
    v->p = p;
    v->D = ps[0];
    v->S = ps[1];
    v->b = c ? c[0] : -1;
    v->i = c ? c[1] : -1;
    v->n = x_shape[0];
    v->t = x_shape[1];
    v->e = x_shape[2];
    v->f = f;
    v->nb = c ? ladle__balanced_size(v->n, v->D, v->b) : 0;
    v->bias = bias != 0;
    if (ad) {
        v->ad = *ad;
        v->heads = ad->num_heads;
        v->hd = ad->head_dim;
        v->bias = ad->qkv_bias != 0;
        v->out_bias = ad->out_bias != 0;
    }
    describe_params(v);
}

static ladle_status create(int kind, const ladle_attention_desc *ad,
                           const ladle_partition *p, const int64_t x_shape[3], int64_t f,
                           int bias, ladle_dtype dtype, ladle_device device, uint64_t seed,
                           unsigned flags, ladle_op **out, const char *fn)
{
    ladle_status st = LADLE_OK, local;
    ladle__make m = {fn, dtype, device, flags, MPI_COMM_NULL, NULL, NULL};
    ladle_op *op = NULL;
    ladle_layout *lw = NULL;
    tp *v = NULL;
    LADLE_NOT_NULL(p);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    local = validate(kind, ad, p, x_shape, f, dtype, flags, fn);
    LADLE_CALL(ladle__make_open(&m, 1, &p, local,
                                args_hash(kind, ad, p, x_shape, f, bias, dtype, flags, seed)));

    v = ladle__calloc(1, sizeof *v);
    local = ladle__make_alloc_ok(&m, v != NULL);
    if (local == LADLE_OK) {
        plan_shape(v, kind, ad, p, x_shape, f, bias);
        local = layouts(&m, v, p, &lw);
    }
    LADLE_CALL(ladle__make_step(m.comm, local, fn));
    /* G: sequence blocks (x's, or a row layer's y's) to whole sequences */
    LADLE_CALL(
        ladle__make_step(m.comm,
                         ladle__window_gather_create(kind == TP_ROW ? m.ly : m.lx, lw,
                                                     dtype, device, flags, &v->gather),
                         fn));
    LADLE_CALL(ladle__make_step(m.comm, allocate(&m, v, seed), fn));
    if (v->D > 1)
        LADLE_CALL(
            ladle__dist_replicas(&m, &v->base, v->base.nparams, p, replica_group, v));
    local = ladle__make_layer(&m, LADLE_OK, &tp_vt, v, NULL, &op);
    if (local == LADLE_OK) {
        op->linear = kind != TP_ATTN && !v->bias; /* the ctx-less adjoint works */
        local = bind_workspace(op, v);
        v = NULL;
    }
    st = ladle__make_end(&m, &op, local, out);
fail:
    ladle_op_destroy(&op);
    ladle__make_close(&m);
    ladle_layout_destroy(&lw);
    ladle__parts_free(v, tp_parts, NULL);
    return st;
}

ladle_status ladle_dist_tp_attention_create(const ladle_attention_desc *d,
                                            const ladle_partition *p,
                                            const int64_t x_shape[3], ladle_dtype dtype,
                                            ladle_device device, uint64_t seed,
                                            ladle_op **out)
{
    const char *fn = __func__;
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(x_shape);
    LADLE_CHECK_SIZE(d);
    ladle_attention_desc a = *d;
    unsigned flags = a.flags;
    a.flags = 0; /* the local layers' */
    LADLE_CHECK(a.embed_dim == x_shape[2], LADLE_ERR_SHAPE,
                "x's width %lld is not embed_dim %lld", (long long)x_shape[2],
                (long long)a.embed_dim);
    LADLE_CHECK(a.num_heads >= 1 && a.head_dim >= 1, LADLE_ERR_ARG,
                "num_heads %lld and head_dim %lld must be >= 1", (long long)a.num_heads,
                (long long)a.head_dim);
    return create(TP_ATTN, &a, p, x_shape, 0, 0, dtype, device, seed, flags, out, fn);
fail:
    return st;
}

ladle_status ladle_dist_tp_linear_create(const ladle_linear_desc *d,
                                         const ladle_partition *p, const int64_t x_shape[3],
                                         ladle_dtype dtype, ladle_device device,
                                         uint64_t seed, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    LADLE_NOT_NULL(x_shape);
    int row = (d->flags & LADLE_TP_ROW) != 0;
    unsigned flags = d->flags & ~(unsigned)LADLE_TP_ROW;
    int64_t e = row ? d->out_features : d->in_features;
    int64_t features = row ? d->in_features : d->out_features;
    LADLE_CHECK(e == x_shape[2], LADLE_ERR_SHAPE,
                "x's width %lld is not the %s layer's %s_features %lld",
                (long long)x_shape[2], row ? "row" : "column", row ? "out" : "in",
                (long long)e);
    return create(row ? TP_ROW : TP_COL, NULL, p, x_shape, features, d->bias, dtype, device,
                  seed, flags, out, __func__);
fail:
    return st;
}
