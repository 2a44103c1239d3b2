/* A GPT-style transformer as a graph (see ladle/models.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ladle/models.h"
#include "layers/distributed/dist.h"

void ladle_gpt_desc_init(ladle_gpt_desc *d)
{
    if (!LADLE_DESC_START(d))
        return;
    d->vocab = 256;
    d->context = 128;
    d->batch = 32;
    d->layers = 4;
    d->width = 128;
    d->heads = 4;
    d->mlp = 4;
    d->dropout = 0.0;
    d->dtype = LADLE_F32;
    d->device = LADLE_CPU;
    d->seed = 1;
    d->data_ways = 1;
    d->tensor_ways = 1;
}

/* The numbers of d, each named when out of range. */
static ladle_status check_desc(const ladle_gpt_desc *d)
{
    ladle_status st = LADLE_OK;
    LADLE_CHECK(d->vocab >= 1 && d->vocab <= (1 << 24), LADLE_ERR_ARG,
                "vocab %lld is outside 1 .. 2^24", (long long)d->vocab);
    LADLE_CHECK(d->context >= 1 && d->context <= (1 << 20), LADLE_ERR_ARG,
                "context %lld is outside 1 .. 2^20", (long long)d->context);
    LADLE_CHECK(d->batch >= 1 && d->batch <= (1 << 24), LADLE_ERR_ARG,
                "batch %lld is outside 1 .. 2^24", (long long)d->batch);
    LADLE_CHECK(d->layers >= 1 && d->layers <= 256, LADLE_ERR_ARG,
                "layers %d is outside 1 .. 256", d->layers);
    LADLE_CHECK(d->width >= 1 && d->width <= (1 << 20), LADLE_ERR_ARG,
                "width %lld is outside 1 .. 2^20", (long long)d->width);
    LADLE_CHECK(d->heads >= 1 && d->heads <= d->width && d->width % d->heads == 0,
                LADLE_ERR_ARG, "heads %lld must divide the width %lld", (long long)d->heads,
                (long long)d->width);
    LADLE_CHECK(d->mlp >= 1 && d->mlp <= 64, LADLE_ERR_ARG, "mlp %lld is outside 1 .. 64",
                (long long)d->mlp);
    LADLE_CHECK(d->data_ways >= 1 && d->data_ways <= 4096 && d->batch % d->data_ways == 0,
                LADLE_ERR_ARG, "data_ways %d must divide the batch %lld (and be 1 .. 4096)",
                d->data_ways, (long long)d->batch);
    LADLE_CHECK(d->tensor_ways >= 1 && d->tensor_ways <= 4096 &&
                    d->context % d->tensor_ways == 0 && d->heads >= d->tensor_ways &&
                    d->mlp * d->width >= d->tensor_ways,
                LADLE_ERR_ARG,
                "tensor_ways %d must divide the context %lld and be at most the heads %lld "
                "(and 1 .. 4096)",
                d->tensor_ways, (long long)d->context, (long long)d->heads);
    LADLE_CHECK(d->recompute >= LADLE_GPT_RECOMPUTE_NONE &&
                    d->recompute <= LADLE_GPT_RECOMPUTE_SELECTIVE,
                LADLE_ERR_ARG, "recompute %d is not a ladle_gpt_recompute", d->recompute);
    LADLE_CHECK(d->recompute == LADLE_GPT_RECOMPUTE_NONE || d->tensor_ways == 1, LADLE_ERR_ARG,
                "recompute %d with tensor_ways %d: recomputation is not there yet for "
                "tensor-parallel blocks", d->recompute, d->tensor_ways);
    LADLE_CHECK(d->dropout >= 0.0 && d->dropout < 1.0, LADLE_ERR_ARG,
                "dropout %g is outside [0, 1)", d->dropout);
    /* the largest activation, N T max(V, mlp E), and the head's weight */
    int64_t wide = d->vocab > d->mlp * d->width ? d->vocab : d->mlp * d->width;
    LADLE_CHECK(d->batch * d->context <= INT64_MAX / wide &&
                    d->vocab <= INT64_MAX / d->width,
                LADLE_ERR_ARG, "batch %lld x context %lld x %lld values overflow",
                (long long)d->batch, (long long)d->context, (long long)wide);
fail:
    return st;
}

/* The graph being built and the seed of its next layer with weights. */
typedef struct gpt_build {
    ladle_graph *g;
    const ladle_gpt_desc *d;
    ladle_partition *p;    /* D S x 1, the replicas and the loss; NULL on one rank */
    ladle_partition *grid; /* D x S x 1, the tensor-parallel layers (S > 1) */
    int seq_block;         /* this rank's i: positions i T/S .. */
    uint64_t seed;
    int64_t xs[3]; /* this rank's N / D x T / S x E */
} gpt_build;

/* Add *op, made with status `made`, on x as node name: the graph owns it
 * from then on (destroyed here if the graph does not take it). *op is
 * read only after its constructor has run. Data parallel, a layer with
 * parameters goes in as copies over the ranks. */
static ladle_status add(gpt_build *b, const char *name, ladle_status made, ladle_op **op,
                        int x, int *y)
{
    if (made != LADLE_OK)
        return made;
    if (b->p && ladle_op_num_params(*op) > 0 && ladle_op_x_layout(*op) == NULL) {
        ladle_op *copies = NULL;
        ladle_status st = ladle_dist_replicate_create(b->p, op, 0, &copies);
        if (st != LADLE_OK) {
            ladle_op_destroy(op);
            return st;
        }
        *op = copies;
    }
    ladle_status st = ladle_graph_add_layer(b->g, name, *op, x, y);
    if (st != LADLE_OK)
        ladle_op_destroy(op);
    *op = NULL;
    return st;
}

static ladle_status norm(gpt_build *b, const char *name, int x, int *y)
{
    ladle_layernorm_desc nd;
    ladle_op *op = NULL;
    ladle_layernorm_desc_init(&nd, 1);
    return add(b, name,
               ladle_layernorm_create(&nd, 3, b->xs, b->d->dtype, b->d->device, &op), &op,
               x, y);
}

static ladle_status linear(gpt_build *b, const char *name, int64_t in, int64_t out,
                           int bias, int x, int *y)
{
    int64_t xs[3] = {b->xs[0], b->xs[1], in};
    ladle_op *op = NULL;
    ladle_linear_desc ld;
    ladle_linear_desc_init(&ld, in, out);
    ld.bias = bias;
    return add(b, name,
               ladle_linear_create(&ld, 3, xs, b->d->dtype, b->d->device, b->seed++, &op),
               &op, x, y);
}

static ladle_status dropout(gpt_build *b, const char *name, int x, int *y)
{
    ladle_op *op = NULL;
    if (b->d->dropout == 0.0) {
        *y = x;
        return LADLE_OK;
    }
    return add(b, name,
               ladle_dropout_create(3, b->xs, b->d->dropout, b->d->dtype, b->d->device,
                                    b->seed++, &op),
               &op, x, y);
}

static int seeds_of(const ladle_gpt_desc *d, int i);
static ladle_status chain_layer(const ladle_gpt_desc *d, int i, uint64_t seed,
                               const ladle_partition *rep, ladle_op **out);

/* Block k (from 1) as the chain's two residual blocks, recomputed as d
 * says, with the seeds the graph's nodes would draw. */
static ladle_status block_chain(gpt_build *b, int k, int x, int *y)
{
    ladle_status st = LADLE_OK;
    ladle_gpt_desc local = *b->d; /* this rank's share of the batch */
    local.batch = b->xs[0];
    local.data_ways = 1;
    char name[LADLE_GRAPH_NAME_MAX];
    for (int half = 0; half < 2; half++) {
        int i = 2 + (b->d->dropout > 0) + 2 * (k - 1) + half;
        ladle_op *op = NULL;
        /* data parallel, the block's layers are copies each (a copy holds
         * a few parameters), so the block is not copied again */
        ladle_status made = chain_layer(&local, i, b->seed, b->p, &op);
        b->seed += (uint64_t)seeds_of(b->d, i);
        snprintf(name, sizeof name, half ? "h%d.mlp" : "h%d.attn", k);
        LADLE_CALL(made);
        if ((st = ladle_graph_add_layer(b->g, name, op, x, &x)) != LADLE_OK)
            ladle_op_destroy(&op);
        LADLE_CALL(st);
    }
    *y = x;
fail:
    return st;
}

/* Block k (from 1) on the residual stream x; *y the stream after it. */
static ladle_status block(gpt_build *b, int k, int x, int *y)
{
    ladle_status st = LADLE_OK;
    const ladle_gpt_desc *d = b->d;
    char name[LADLE_GRAPH_NAME_MAX];
    int v, a, r1, m;
    ladle_attention_desc ad;
    ladle_op *op = NULL;
#define NAME(s) (snprintf(name, sizeof name, "h%d." s, k), name)
    LADLE_CALL(norm(b, NAME("ln1"), x, &v));
    ladle_attention_desc_init(&ad, d->width, d->heads);
    ad.f32_tiles = d->attn_f32_tiles;
    int64_t gs[3] = {d->batch, d->context, d->width}; /* the stream's global shape */
    if (b->grid)
        LADLE_CALL(add(b, NAME("attn"),
                       ladle_dist_tp_attention_create(&ad, b->grid, gs, d->dtype, d->device,
                                                      b->seed++, &op),
                       &op, v, &a));
    else
        LADLE_CALL(
            add(b, NAME("attn"),
                ladle_attention_create(&ad, 3, b->xs, d->dtype, d->device, b->seed++, &op),
                &op, v, &a));
    LADLE_CALL(dropout(b, NAME("drop1"), a, &a));
    LADLE_CALL(ladle_graph_add_add(b->g, NAME("res1"), 2, (int[]){x, a}, &r1));
    LADLE_CALL(norm(b, NAME("ln2"), r1, &v));
    int64_t f = d->mlp * d->width, hs[3] = {b->xs[0], b->xs[1], f};
    op = NULL;
    if (b->grid) { /* the hidden features split S ways, the sequence whole */
        hs[1] = d->context;
        hs[2] = ladle__balanced_size(f, d->tensor_ways, b->seq_block);
        ladle_linear_desc fc;
        ladle_linear_desc_init(&fc, d->width, f);
        LADLE_CALL(add(b, NAME("fc"),
                       ladle_dist_tp_linear_create(&fc, b->grid, gs, d->dtype, d->device,
                                                   b->seed++, &op),
                       &op, v, &m));
    } else
        LADLE_CALL(linear(b, NAME("fc"), d->width, f, 1, v, &m));
    op = NULL;
    LADLE_CALL(
        add(b, NAME("gelu"),
            ladle_activation_create(LADLE_GELU_TANH, 0, 3, hs, d->dtype, d->device, &op),
            &op, m, &m));
    op = NULL;
    if (b->grid) {
        ladle_linear_desc proj;
        ladle_linear_desc_init(&proj, f, d->width);
        proj.flags = LADLE_TP_ROW;
        LADLE_CALL(add(b, NAME("proj"),
                       ladle_dist_tp_linear_create(&proj, b->grid, gs, d->dtype, d->device,
                                                   b->seed++, &op),
                       &op, m, &m));
    } else
        LADLE_CALL(linear(b, NAME("proj"), f, d->width, 1, m, &m));
    LADLE_CALL(dropout(b, NAME("drop2"), m, &m));
    LADLE_CALL(ladle_graph_add_add(b->g, NAME("res2"), 2, (int[]){r1, m}, y));
#undef NAME
fail:
    return st;
}

/* The token embedding's descriptor: the vocabulary by the width. */
static ladle_embedding_desc wte_desc(const ladle_gpt_desc *d)
{
    ladle_embedding_desc e;
    ladle_embedding_desc_init(&e, d->vocab, d->width);
    return e;
}

/* The graph of d on this rank's block; b->p set when data parallel. */
static ladle_status build(gpt_build *b, const ladle_gpt_desc *d, ladle_graph **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    int ids, x, p, h, logits, rows;
    int64_t n = d->batch / d->data_ways, t = d->context / d->tensor_ways;
    b->d = d;
    b->seed = d->seed;
    b->xs[0] = n;
    b->xs[1] = t;
    b->xs[2] = d->width;
    int64_t ids_shape[2] = {n, t};
    ladle_embedding_desc wd = wte_desc(d);
    LADLE_CALL(ladle_graph_create(d->dtype, d->device, 0, &b->g));
    LADLE_CALL(ladle_graph_add_input(b->g, "ids", NULL, 2, ids_shape, &ids));
    LADLE_CALL(
        add(b, "wte",
            ladle_embedding_create(&wd, 2, ids_shape, d->dtype, d->device, b->seed++, &op),
            &op, ids, &x));
    op = NULL;
    /* this rank's positions: its sequence block's */
    ladle_status made = ladle_pos_embedding_create(3, b->xs, d->context, d->dtype,
                                                   d->device, b->seed++, &op);
    if (made == LADLE_OK) {
        made = ladle_pos_embedding_set_offset(op, b->seq_block * t);
        if (made != LADLE_OK)
            ladle_op_destroy(&op);
    }
    LADLE_CALL(add(b, "wpe", made, &op, x, &p));
    LADLE_CALL(dropout(b, "drop", p, &h));
    for (int k = 1; k <= d->layers; k++)
        LADLE_CALL(d->recompute ? block_chain(b, k, h, &h) : block(b, k, h, &h));
    LADLE_CALL(norm(b, "ln_f", h, &h));
    LADLE_CALL(linear(b, "head", d->width, d->vocab, 0, h, &logits));
    int64_t ls[3] = {n, t, d->vocab}, rs[2] = {n * t, d->vocab};
    op = NULL;
    LADLE_CALL(add(b, "rows", ladle_reshape_create(3, ls, 2, rs, d->dtype, d->device, &op),
                   &op, logits, &rows));
    ladle_loss_desc ld;
    ladle_loss_desc_init(&ld, LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN);
    ld.ignore_index = -1;
    op = NULL;
    if (b->p) /* the rows split D S ways, the mean over all of them */
        LADLE_CALL(ladle_dist_vocab_loss_create(
            &ld, b->p, (int64_t[]){d->batch * d->context, d->vocab}, d->dtype, d->device,
            &op));
    else
        LADLE_CALL(ladle_loss_create(&ld, 2, rs, d->dtype, d->device, &op));
    st = ladle_graph_add_loss(b->g, "loss", op, rows, 1.0, NULL);
    if (st != LADLE_OK)
        ladle_op_destroy(&op);
    LADLE_CALL(st);
    LADLE_CALL(ladle_graph_set_outputs(b->g, 1, &rows));
    LADLE_CALL(ladle_graph_finalize(b->g));
    LADLE_CALL(ladle_graph_set_training(b->g, 1));
    *out = b->g;
    b->g = NULL;
fail:
    ladle_graph_destroy(&b->g);
    return st;
}

ladle_status ladle_gpt_create(const ladle_gpt_desc *d, ladle_comm comm_in,
                              ladle_graph **out)
{
    LADLE_COMM_IN(comm, comm_in);
    ladle_status st = LADLE_OK, local = LADLE_OK;
    gpt_build b = {0};
    int size = 0;
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(out);
    *out = NULL;
    LADLE_CHECK(comm != MPI_COMM_NULL, LADLE_ERR_ARG, "comm is MPI_COMM_NULL");
    LADLE_CHECK(MPI_Comm_size(comm, &size) == MPI_SUCCESS, LADLE_ERR_MPI,
                "MPI_Comm_size failed");
    /* every rank checks the same description; the verdicts are agreed
     * before anything collective, so a bad one fails every rank */
    local = ladle__check_size(__func__, "d", d->size, sizeof *d);
    if (local == LADLE_OK)
        local = check_desc(d);
    if (local == LADLE_OK && (int64_t)d->data_ways * d->tensor_ways != size)
        local =
            ladle__raise(LADLE_ERR_ARG, __func__,
                         "data_ways %d x tensor_ways %d over a communicator of %d ranks: "
                         "they must be equal",
                         d->data_ways, d->tensor_ways, size);
    LADLE_CALL(ladle__agree_code(comm, local, __func__));
    if (size > 1)
        LADLE_CALL(
            ladle_partition_create(ladle_comm_of(comm), 2, (int[]){size, 1}, NULL, &b.p));
    if (d->tensor_ways > 1) {
        LADLE_CALL(ladle_partition_create(ladle_comm_of(comm), 3,
                                          (int[]){d->data_ways, d->tensor_ways, 1}, NULL,
                                          &b.grid));
        b.seq_block = ladle_partition_coords(b.grid)[1];
    }
    st = build(&b, d, out);
fail:
    ladle_partition_destroy(&b.p);
    ladle_partition_destroy(&b.grid);
    return st;
}

/* ---- the GPT as a chain of layers (pipelines) -------------------------- */

int ladle_gpt_num_layers(const ladle_gpt_desc *d)
{
    if (d == NULL || d->size != sizeof *d || check_desc(d) != LADLE_OK)
        return -1;
    return 2 + (d->dropout > 0) + 2 * d->layers + 3;
}

/* The seeds layer i of the chain draws: wte, wpe, drop; then per block
 * the attention residual (attn, drop1) and the MLP residual (fc, proj,
 * drop2); ln_f none, head one, rows none: ladle_gpt_create's order. */
static int seeds_of(const ladle_gpt_desc *d, int i)
{
    int drop = d->dropout > 0, front = 2 + drop, blocks = 2 * d->layers;
    if (i < front)
        return 1;
    if (i < front + blocks)
        return (i - front) % 2 == 0 ? 1 + drop : 2 + drop;
    return i == front + blocks + 1; /* the head */
}

/* Wrap the n layers of body into a residual block, taking them over. */
static ladle_status residual(int n, ladle_op *body[], ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *seq = NULL;
    st = ladle_sequential_create(n, body, &seq);
    if (st != LADLE_OK) {
        for (int k = 0; k < n; k++)
            ladle_op_destroy(&body[k]);
        return st;
    }
    st = ladle_residual_create(&seq, out);
    ladle_op_destroy(&seq);
    return st;
}

/* The cheap layers of a block's body recomputed (selective): the layer
 * norm and the GELU; the GEMMs keep their outputs. */
static ladle_status selective(int n, ladle_op *body[])
{
    ladle_status st = LADLE_OK;
    for (int k = 0; k < n; k++) {
        ladle_op_kind kind = ladle_op_kind_of(body[k]);
        if (kind == LADLE_OP_LAYERNORM || kind == LADLE_OP_ACTIVATION)
            LADLE_CALL(ladle_recompute_create(&body[k], &body[k]));
    }
fail:
    return st;
}

/* The layers of body with parameters as copies over rep. */
static ladle_status copies(const ladle_partition *rep, int n, ladle_op *body[])
{
    ladle_status st = LADLE_OK;
    for (int k = 0; rep && k < n; k++)
        if (ladle_op_num_params(body[k]) > 0)
            LADLE_CALL(ladle_dist_replicate_create(rep, &body[k], 0, &body[k]));
fail:
    return st;
}

/* Chain layer i of d with seeds from seed; a block's layers with
 * parameters as copies over rep when it is not NULL. */
static ladle_status chain_layer(const ladle_gpt_desc *d, int i, uint64_t seed,
                                const ladle_partition *rep, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_dtype dt = d->dtype;
    ladle_device dev = d->device;
    int drop = d->dropout > 0, front = 2 + drop, blocks = 2 * d->layers;
    int64_t xs[3] = {d->batch, d->context, d->width}, ids[2] = {d->batch, d->context};
    int64_t f = d->mlp * d->width, hs[3] = {d->batch, d->context, f};
    ladle_op *body[5] = {NULL};
    int n = 0;
    ladle_layernorm_desc nd;
    ladle_layernorm_desc_init(&nd, 1);
    *out = NULL;
    if (i == 0) {
        ladle_embedding_desc wd = wte_desc(d);
        return ladle_embedding_create(&wd, 2, ids, dt, dev, seed, out);
    }
    if (i == 1)
        return ladle_pos_embedding_create(3, xs, d->context, dt, dev, seed, out);
    if (i < front)
        return ladle_dropout_create(3, xs, d->dropout, dt, dev, seed, out);
    if (i < front + blocks) {
        LADLE_CALL(ladle_layernorm_create(&nd, 3, xs, dt, dev, &body[n++]));
        if ((i - front) % 2 == 0) { /* x + drop(attn(ln1(x))) */
            ladle_attention_desc ad;
            ladle_attention_desc_init(&ad, d->width, d->heads);
            ad.f32_tiles = d->attn_f32_tiles;
            LADLE_CALL(ladle_attention_create(&ad, 3, xs, dt, dev, seed++, &body[n++]));
        } else { /* x + drop(proj(gelu(fc(ln2(x))))) */
            ladle_linear_desc fc, proj;
            ladle_linear_desc_init(&fc, d->width, f);
            ladle_linear_desc_init(&proj, f, d->width);
            LADLE_CALL(ladle_linear_create(&fc, 3, xs, dt, dev, seed++, &body[n++]));
            LADLE_CALL(
                ladle_activation_create(LADLE_GELU_TANH, 0, 3, hs, dt, dev, &body[n++]));
            LADLE_CALL(ladle_linear_create(&proj, 3, hs, dt, dev, seed++, &body[n++]));
        }
        if (drop)
            LADLE_CALL(ladle_dropout_create(3, xs, d->dropout, dt, dev, seed, &body[n++]));
        if (d->recompute == LADLE_GPT_RECOMPUTE_SELECTIVE)
            LADLE_CALL(selective(n, body));
        LADLE_CALL(copies(rep, n, body));
        LADLE_CALL(residual(n, body, out));
        n = 0; /* the block owns them */
        if (d->recompute == LADLE_GPT_RECOMPUTE_BLOCK &&
            (st = ladle_recompute_create(out, out)) != LADLE_OK)
            ladle_op_destroy(out);
        return st;
    }
    if (i == front + blocks)
        return ladle_layernorm_create(&nd, 3, xs, dt, dev, out);
    if (i == front + blocks + 1) {
        ladle_linear_desc head;
        ladle_linear_desc_init(&head, d->width, d->vocab);
        head.bias = 0;
        return ladle_linear_create(&head, 3, xs, dt, dev, seed, out);
    }
    int64_t ls[3] = {d->batch, d->context, d->vocab},
            rs[2] = {d->batch * d->context, d->vocab};
    return ladle_reshape_create(3, ls, 2, rs, dt, dev, out);
fail:
    for (int k = 0; k < n; k++)
        ladle_op_destroy(&body[k]);
    return st;
}

static ladle_status layers_one(const ladle_gpt_desc *d, int first, int count,
                               ladle_op *layers[])
{
    ladle_status st = LADLE_OK;
    int made = 0;
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(layers);
    LADLE_CHECK_SIZE(d);
    LADLE_CALL(check_desc(d));
    LADLE_CHECK(
        d->data_ways == 1 && d->tensor_ways == 1, LADLE_ERR_ARG,
        "data_ways %d and tensor_ways %d: the chain is one rank's model (a pipeline "
        "replicates its stages instead)",
        d->data_ways, d->tensor_ways);
    int total = ladle_gpt_num_layers(d);
    LADLE_CHECK(first >= 0 && count >= 1 && first <= total - count, LADLE_ERR_ARG,
                "layers %d .. %d of a chain of %d", first, first + count - 1, total);
    uint64_t seed = d->seed;
    for (int i = 0; i < first; i++)
        seed += (uint64_t)seeds_of(d, i);
    for (; made < count; made++) {
        int i = first + made;
        LADLE_CALL(chain_layer(d, i, seed, NULL, &layers[made]));
        LADLE_CALL(ladle_layer_set_training(layers[made], 1));
        seed += (uint64_t)seeds_of(d, i);
    }
    return LADLE_OK;
fail:
    for (int k = 0; k < made; k++)
        ladle_op_destroy(&layers[k]);
    return st;
}

/* ---- the chain over S ranks: tensor parallelism inside a stage --------- */

/* The layouts of the chain's values over the S ranks of a stage, rank i
 * holding sequence block i of every window: the ids (N x T over 1 x S),
 * the stream (N x T x E over 1 x S x 1), the logits (N x T x V, the same
 * way) and their rows (N T x V over S x 1: rank i's N T/S rows, window by
 * window, are block i of the rows, so the rows' order is the sequence
 * blocks' one after another; ladle_gpt_chain_targets puts the targets in
 * it). */
typedef struct chain_on {
    const ladle_gpt_desc *d;
    ladle_partition *grid, *ids_p, *rows_p;
    ladle_layout *ids, *x, *logits, *rows;
    int S, i;
    int64_t t; /* T / S */
} chain_on;

static void chain_on_free(chain_on *c)
{
    ladle_layout_destroy(&c->ids);
    ladle_layout_destroy(&c->x);
    ladle_layout_destroy(&c->logits);
    ladle_layout_destroy(&c->rows);
    ladle_partition_destroy(&c->grid);
    ladle_partition_destroy(&c->ids_p);
    ladle_partition_destroy(&c->rows_p);
}

/* Collective over comm (S ranks). */
static ladle_status chain_on_make(const ladle_gpt_desc *d, MPI_Comm comm, int S,
                                  chain_on *c)
{
    ladle_status st = LADLE_OK;
    int64_t n = d->batch, T = d->context;
    c->d = d;
    c->S = S;
    c->t = T / S;
    LADLE_CALL(
        ladle_partition_create(ladle_comm_of(comm), 3, (int[]){1, S, 1}, NULL, &c->grid));
    LADLE_CALL(
        ladle_partition_create(ladle_comm_of(comm), 2, (int[]){1, S}, NULL, &c->ids_p));
    LADLE_CALL(
        ladle_partition_create(ladle_comm_of(comm), 2, (int[]){S, 1}, NULL, &c->rows_p));
    c->i = ladle_partition_coords(c->grid)[1];
    LADLE_CALL(ladle_layout_create_balanced(c->ids_p, 2, (int64_t[]){n, T}, &c->ids));
    LADLE_CALL(
        ladle_layout_create_balanced(c->grid, 3, (int64_t[]){n, T, d->width}, &c->x));
    LADLE_CALL(
        ladle_layout_create_balanced(c->grid, 3, (int64_t[]){n, T, d->vocab}, &c->logits));
    LADLE_CALL(
        ladle_layout_create_balanced(c->rows_p, 2, (int64_t[]){n * T, d->vocab}, &c->rows));
fail:
    return st;
}

/* The copies of *layer (made with status `made`) on the ranks' blocks of
 * lx and ly; the layer is destroyed when anything fails. */
static ladle_status on_blocks(ladle_status made, ladle_op **layer, const ladle_layout *lx,
                              const ladle_layout *ly, ladle_op **out)
{
    ladle_status st = made;
    if (st == LADLE_OK)
        st = ladle_dist_replicate_create_on(lx, ly, layer, 0, out);
    ladle_op_destroy(layer);
    return st;
}

/* Half k of a transformer block over the stage's ranks, as one residual
 * layer: x + drop(attn(ln1(x))) for k even, x + drop(proj(gelu(fc(ln2(x)))))
 * for k odd; seeds from seed. */
static ladle_status chain_block_on(const chain_on *c, int k, uint64_t seed, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    const ladle_gpt_desc *d = c->d;
    ladle_dtype dt = d->dtype;
    ladle_device dev = d->device;
    int64_t xs[3] = {d->batch, c->t, d->width};
    int64_t gs[3] = {d->batch, d->context, d->width};
    int64_t f = d->mlp * d->width;
    ladle_op *body[5] = {NULL}, *op = NULL;
    int n = 0;
    ladle_layernorm_desc nd;
    ladle_layernorm_desc_init(&nd, 1);
    LADLE_CALL(on_blocks(ladle_layernorm_create(&nd, 3, xs, dt, dev, &op), &op, c->x, c->x,
                         &body[n++]));
    if (k % 2 == 0) { /* x + drop(attn(ln1(x))) */
        ladle_attention_desc ad;
        ladle_attention_desc_init(&ad, d->width, d->heads);
        ad.f32_tiles = d->attn_f32_tiles;
        LADLE_CALL(
            ladle_dist_tp_attention_create(&ad, c->grid, gs, dt, dev, seed++, &body[n++]));
    } else { /* x + drop(proj(gelu(fc(ln2(x))))): fc's features split, T whole */
        int64_t hs[3] = {d->batch, d->context, ladle__balanced_size(f, c->S, c->i)};
        ladle_linear_desc fc, proj;
        ladle_linear_desc_init(&fc, d->width, f);
        ladle_linear_desc_init(&proj, f, d->width);
        proj.flags = LADLE_TP_ROW;
        LADLE_CALL(ladle_dist_tp_linear_create(&fc, c->grid, gs, dt, dev, seed++, &body[n++]));
        LADLE_CALL(ladle_activation_create(LADLE_GELU_TANH, 0, 3, hs, dt, dev, &body[n++]));
        LADLE_CALL(
            ladle_dist_tp_linear_create(&proj, c->grid, gs, dt, dev, seed++, &body[n++]));
    }
    if (d->dropout > 0)
        LADLE_CALL(on_blocks(ladle_dropout_create(3, xs, d->dropout, dt, dev, seed, &op), &op,
                             c->x, c->x, &body[n++]));
    return residual(n, body, out);
fail:
    for (int j = 0; j < n; j++)
        ladle_op_destroy(&body[j]);
    return st;
}

/* Chain layer i over the stage's ranks, with seeds from seed: the layers
 * of ladle_gpt_create_on's graph with D = 1, in the chain's order. */
static ladle_status chain_layer_on(const chain_on *c, int i, uint64_t seed, ladle_op **out)
{
    const ladle_gpt_desc *d = c->d;
    ladle_dtype dt = d->dtype;
    ladle_device dev = d->device;
    int drop = d->dropout > 0, front = 2 + drop, blocks = 2 * d->layers;
    int64_t xs[3] = {d->batch, c->t, d->width}, ids[2] = {d->batch, c->t};
    ladle_op *op = NULL;
    *out = NULL;
    if (i == 0) {
        ladle_embedding_desc wd = wte_desc(d);
        return on_blocks(ladle_embedding_create(&wd, 2, ids, dt, dev, seed, &op), &op,
                         c->ids, c->x, out);
    }
    if (i == 1) {
        ladle_status made =
            ladle_pos_embedding_create(3, xs, d->context, dt, dev, seed, &op);
        if (made == LADLE_OK)
            made = ladle_pos_embedding_set_offset(op, c->i * c->t);
        return on_blocks(made, &op, c->x, c->x, out);
    }
    if (i < front)
        return on_blocks(ladle_dropout_create(3, xs, d->dropout, dt, dev, seed, &op), &op,
                         c->x, c->x, out);
    if (i < front + blocks)
        return chain_block_on(c, i - front, seed, out);
    if (i == front + blocks) {
        ladle_layernorm_desc nd;
        ladle_layernorm_desc_init(&nd, 1);
        return on_blocks(ladle_layernorm_create(&nd, 3, xs, dt, dev, &op), &op, c->x, c->x,
                         out);
    }
    if (i == front + blocks + 1) {
        ladle_linear_desc head;
        ladle_linear_desc_init(&head, d->width, d->vocab);
        head.bias = 0;
        return on_blocks(ladle_linear_create(&head, 3, xs, dt, dev, seed, &op), &op, c->x,
                         c->logits, out);
    }
    int64_t ls[3] = {d->batch, c->t, d->vocab}, rs[2] = {d->batch * c->t, d->vocab};
    return on_blocks(ladle_reshape_create(3, ls, 2, rs, dt, dev, &op), &op, c->logits,
                     c->rows, out);
}

/* The checks of the _on calls, agreed over comm; *size comm's size. */
static ladle_status check_on(const ladle_gpt_desc *d, MPI_Comm comm, int *size,
                             const char *func)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    LADLE_CHECK(comm != MPI_COMM_NULL, LADLE_ERR_ARG, "comm is MPI_COMM_NULL");
    LADLE_CHECK(MPI_Comm_size(comm, size) == MPI_SUCCESS, LADLE_ERR_MPI,
                "MPI_Comm_size failed");
    local = ladle__check_size(func, "d", d->size, sizeof *d);
    if (local == LADLE_OK)
        local = check_desc(d);
    if (local == LADLE_OK && (d->data_ways != 1 || d->tensor_ways != *size))
        local = ladle__raise(LADLE_ERR_ARG, func,
                             "data_ways %d and tensor_ways %d over a communicator of %d "
                             "ranks: a stage's chain is tensor parallel over all of them "
                             "(data_ways 1; a pipeline replicates stages instead)",
                             d->data_ways, d->tensor_ways, *size);
    st = ladle__agree_code(comm, local, func);
fail:
    return st;
}

ladle_status ladle_gpt_layers(const ladle_gpt_desc *d, ladle_comm comm_in, int first,
                              int count, ladle_op *layers[])
{
    LADLE_COMM_IN(comm, comm_in);
    ladle_status st = LADLE_OK;
    chain_on c = {0};
    int made = 0, size = 0;
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(layers);
    LADLE_CALL(check_on(d, comm, &size, __func__));
    int total = ladle_gpt_num_layers(d);
    LADLE_CHECK(first >= 0 && count >= 1 && first <= total - count, LADLE_ERR_ARG,
                "layers %d .. %d of a chain of %d", first, first + count - 1, total);
    if (size == 1)
        return layers_one(d, first, count, layers);
    LADLE_CALL(chain_on_make(d, comm, size, &c));
    uint64_t seed = d->seed;
    for (int i = 0; i < first; i++)
        seed += (uint64_t)seeds_of(d, i);
    for (; made < count; made++) {
        int i = first + made;
        LADLE_CALL(chain_layer_on(&c, i, seed, &layers[made]));
        LADLE_CALL(ladle_layer_set_training(layers[made], 1));
        seed += (uint64_t)seeds_of(d, i);
    }
    chain_on_free(&c);
    return LADLE_OK;
fail:
    for (int k = 0; k < made; k++)
        ladle_op_destroy(&layers[k]);
    chain_on_free(&c);
    return st;
}

static ladle_status loss_one(const ladle_gpt_desc *d, ladle_op **loss);

ladle_status ladle_gpt_loss_create(const ladle_gpt_desc *d, ladle_comm comm_in,
                                   ladle_op **loss)
{
    LADLE_COMM_IN(comm, comm_in);
    ladle_status st = LADLE_OK;
    int size = 0;
    ladle_partition *p = NULL;
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(loss);
    LADLE_CALL(check_on(d, comm, &size, __func__));
    if (size == 1)
        return loss_one(d, loss);
    ladle_loss_desc ld;
    ladle_loss_desc_init(&ld, LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN);
    ld.ignore_index = -1;
    LADLE_CALL(ladle_partition_create(ladle_comm_of(comm), 2, (int[]){size, 1}, NULL, &p));
    LADLE_CALL(ladle_dist_loss_create(&ld, p, (int64_t[]){d->batch * d->context, d->vocab},
                                      d->dtype, d->device, loss));
fail:
    ladle_partition_destroy(&p);
    return st;
}

ladle_status ladle_gpt_chain_targets(const ladle_gpt_desc *d, const ladle_tensor *targets,
                                     ladle_tensor *rows)
{
    ladle_status st = LADLE_OK;
    char a[128];
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(targets);
    LADLE_NOT_NULL(rows);
    LADLE_CHECK_SIZE(d);
    LADLE_CALL(check_desc(d));
    int64_t b = d->batch, T = d->context, S = d->tensor_ways, t = T / S;
    LADLE_CHECK(targets->dtype == LADLE_I64 && rows->dtype == LADLE_I64, LADLE_ERR_DTYPE,
                "targets are %s and rows %s: both hold i64 token ids",
                ladle_dtype_name(targets->dtype), ladle_dtype_name(rows->dtype));
    LADLE_CHECK(targets->device == LADLE_CPU && rows->device == LADLE_CPU, LADLE_ERR_DEVICE,
                "targets and rows must be on the CPU");
    LADLE_CHECK(
        targets->ndim == 2 && targets->shape[1] == T && targets->shape[0] % b == 0 &&
            ladle_tensor_is_contiguous(targets),
        LADLE_ERR_SHAPE,
        "targets are %s: they must be contiguous windows x %lld, whole microbatches "
        "of %lld windows",
        ladle__fmt_shape64(a, sizeof a, targets->ndim, targets->shape), (long long)T,
        (long long)b);
    int64_t n = targets->shape[0];
    LADLE_CHECK(
        rows->ndim == 1 && rows->shape[0] == n * T && ladle_tensor_is_contiguous(rows),
        LADLE_ERR_SHAPE, "rows are %s: they must be a contiguous %lld",
        ladle__fmt_shape64(a, sizeof a, rows->ndim, rows->shape), (long long)(n * T));
    LADLE_CHECK(targets->data != rows->data || S == 1, LADLE_ERR_ARG,
                "targets and rows are one buffer: the reorder needs two");
    const int64_t *in = targets->data;
    int64_t *out = rows->data;
    /* microbatch k, then sequence block i, then window w, then position */
    for (int64_t k = 0; k < n / b; k++)
        for (int64_t i = 0; i < S; i++)
            for (int64_t w = 0; w < b; w++)
                memmove(out + k * b * T + i * b * t + w * t, in + (k * b + w) * T + i * t,
                        sizeof(int64_t) * (size_t)t);
fail:
    return st;
}

/* The loss after the one-rank chain's "rows". */
static ladle_status loss_one(const ladle_gpt_desc *d, ladle_op **loss)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(loss);
    LADLE_CHECK_SIZE(d);
    LADLE_CALL(check_desc(d));
    ladle_loss_desc ld;
    ladle_loss_desc_init(&ld, LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN);
    ld.ignore_index = -1;
    int64_t rs[2] = {d->batch * d->context, d->vocab};
    LADLE_CALL(ladle_loss_create(&ld, 2, rs, d->dtype, d->device, loss));
fail:
    return st;
}

/* ---- deprecated: the _on forms of 0.1 ---------------------------------- */

ladle_status ladle_gpt_create_on(const ladle_gpt_desc *d, MPI_Comm comm, ladle_graph **g)
{
    return ladle_gpt_create(d, ladle_comm_of(comm), g);
}

ladle_status ladle_gpt_layers_on(const ladle_gpt_desc *d, MPI_Comm comm, int first,
                                 int count, ladle_op *layers[])
{
    return ladle_gpt_layers(d, ladle_comm_of(comm), first, count, layers);
}

ladle_status ladle_gpt_loss_create_on(const ladle_gpt_desc *d, MPI_Comm comm,
                                      ladle_op **loss)
{
    return ladle_gpt_loss_create(d, ladle_comm_of(comm), loss);
}
