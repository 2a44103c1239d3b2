/*
 * The GPT model (ladle_gpt_create): its parameters counted by hand, the
 * causal mask seen from outside (changing a token changes no logit before
 * it), the cross entropy over the logits rows recomputed here (with the
 * ignored targets of an evaluation batch's padding), central differences
 * of the loss against the backward for parameters of every kind of layer,
 * a fixed batch learned by AdamW, and the refusals. Data parallel
 * (ladle_gpt_create_on at every rank count the suite runs): the logits,
 * the losses and the weights of 5 AdamW steps against one rank's model on
 * the whole batch, a checkpoint of the copies loaded into the one-rank
 * model, and the refusals of ladle_dist_replicate_create.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { V = 11, T = 6, NB = 2, L = 2, E = 8, H = 2 };

/* The small model of these tests: vocabulary V, context T, L layers of
 * width E with H heads, a global batch of `batch`, on the test's device. */
static ladle_gpt_desc small_desc(int64_t batch, ladle_dtype dt, uint64_t seed)
{
    ladle_gpt_desc d;
    ladle_gpt_desc_init(&d);
    d.vocab = V;
    d.context = T;
    d.batch = batch;
    d.layers = L;
    d.width = E;
    d.heads = H;
    d.dtype = dt;
    d.device = lt_device();
    d.seed = seed;
    return d;
}

static ladle_graph *small_gpt_tiles(ladle_dtype dt, double dropout, int f32_tiles)
{
    ladle_gpt_desc d = small_desc(NB, dt, 5);
    d.dropout = dropout;
    d.attn_f32_tiles = f32_tiles;
    ladle_graph *g = NULL;
    LT_OK(ladle_gpt_create(&d, ladle_comm_of(MPI_COMM_SELF), &g));
    return g;
}

static ladle_graph *small_gpt(ladle_dtype dt, double dropout)
{
    return small_gpt_tiles(dt, dropout, 0);
}

static void fill_ids(int64_t *ids, uint64_t seed)
{
    for (int i = 0; i < NB * T; i++)
        ids[i] = (int64_t)((seed * 31 + (uint64_t)i * 7 + (uint64_t)(i * i) * 3) % V);
}

/* Forward, loss (targets tg) and, when back, backward; the loss. */
static double run(ladle_graph *g, const int64_t *idv, const int64_t *tgv, int back)
{
    ladle_tensor *ids = lt_tensor(LADLE_I64, 2, (int64_t[]){NB, T});
    ladle_tensor *tg = lt_tensor(LADLE_I64, 1, (int64_t[]){NB * T});
    LT_OK(ladle_tensor_write(ids, idv));
    LT_OK(ladle_tensor_write(tg, tgv));
    const ladle_tensor *xs[1] = {ids}, *ts[1] = {tg};
    double loss = 0;
    LT_OK(ladle_graph_forward(g, 1, xs, NULL));
    LT_OK(ladle_graph_loss(g, 1, ts, &loss));
    if (back) {
        LT_OK(ladle_graph_zero_grad(g));
        LT_OK(ladle_graph_backward(g, 0));
    }
    ladle_tensor_destroy(&ids);
    ladle_tensor_destroy(&tg);
    return loss;
}

/* The logits (N T x V, the graph's output) of ids. */
static void logits_of(ladle_graph *g, const int64_t *idv, double *out)
{
    ladle_tensor *ids = lt_tensor(LADLE_I64, 2, (int64_t[]){NB, T});
    LT_OK(ladle_tensor_write(ids, idv));
    const ladle_tensor *xs[1] = {ids}, *ys[1] = {NULL};
    LT_OK(ladle_graph_forward(g, 1, xs, ys));
    LT_ASSERT(ladle_tensor_ndim(ys[0]) == 2 && ladle_tensor_shape(ys[0])[0] == NB * T &&
                  ladle_tensor_shape(ys[0])[1] == V,
              "the output is N T x V");
    double *v = lt_values(ys[0]); /* widened from f32 models' */
    memcpy(out, v, sizeof(double) * NB * T * V);
    free(v);
    ladle_tensor_destroy(&ids);
}

/* Parameters of V 11, T 6, L 2, E 8, H 2, MLP 4 E, counted by hand: wte 88,
 * wpe 48; a block: ln1 16, qkv 3 E E + 3 E = 216, out E E + E = 72, ln2
 * 16, fc 4 E E + 4 E = 288, proj 4 E E + E = 264 (872); ln_f 16, head
 * V E = 88 (no bias): 88 + 48 + 2 x 872 + 16 + 88 = 1984. */
START_TEST(parameters_by_hand)
{
    ladle_graph *g = small_gpt(LADLE_F64, 0);
    int64_t total = 0;
    int n = ladle_graph_num_params(g);
    int seen_qkv = 0, seen_head = 0, seen_wte = 0;
    for (int i = 0; i < n; i++) {
        const char *name = NULL;
        ladle_tensor *p = NULL;
        LT_OK(ladle_graph_param(g, i, &name, &p, NULL));
        total += ladle_tensor_numel(p);
        seen_qkv +=
            !strcmp(name, "h2.attn.qkv_weight") && ladle_tensor_numel(p) == 3 * E * E;
        seen_head += !strcmp(name, "head.weight") && ladle_tensor_numel(p) == V * E;
        seen_wte += !strcmp(name, "wte.weight") && ladle_tensor_numel(p) == V * E;
    }
    LT_ASSERT(total == 1984, "%lld parameters, 1984 by hand", (long long)total);
    LT_ASSERT(n == 2 + L * 12 + 2 + 1, "%d parameter tensors", n);
    LT_ASSERT(seen_qkv == 1 && seen_head == 1 && seen_wte == 1, "named parameters");
    ladle_graph_destroy(&g);
}
END_TEST

/* Changing token 3 of sample 0 leaves that sample's logits at positions 0..2
 * and all of sample 1 exactly as they were, and moves position 3's. */
START_TEST(causal_from_outside)
{
    ladle_graph *g = small_gpt(LADLE_F64, 0);
    LT_OK(ladle_graph_set_training(g, 0));
    int64_t ids[NB * T];
    double *a = malloc(sizeof(double) * NB * T * V),
           *b = malloc(sizeof(double) * NB * T * V);
    fill_ids(ids, 1);
    logits_of(g, ids, a);
    ids[3] = (ids[3] + 1) % V;
    logits_of(g, ids, b);
    for (int n = 0; n < NB; n++)
        for (int t = 0; t < T; t++) {
            double diff = 0;
            for (int v = 0; v < V; v++)
                diff = fmax(diff, fabs(a[(n * T + t) * V + v] - b[(n * T + t) * V + v]));
            if (n == 0 && t >= 3)
                LT_ASSERT(diff > 1e-6, "position %d does not see token 3 (%.2e)", t, diff);
            else
                LT_ASSERT(diff == 0, "sample %d position %d moved by %.2e", n, t, diff);
        }
    free(a);
    free(b);
    ladle_graph_destroy(&g);
}
END_TEST

/* The mean cross entropy over the rows whose target is not -1, from the
 * logits by log-sum-exp here. */
START_TEST(loss_by_hand)
{
    ladle_graph *g = small_gpt(LADLE_F64, 0);
    int64_t ids[NB * T], tg[NB * T];
    double *lg = malloc(sizeof(double) * NB * T * V);
    fill_ids(ids, 2);
    logits_of(g, ids, lg);
    for (int i = 0; i < NB * T; i++)
        tg[i] = i >= 9 ? -1 : (i * 5 + 1) % V; /* the last 3 rows: padding */
    double want = 0;
    int count = 0;
    for (int i = 0; i < NB * T; i++) {
        if (tg[i] < 0)
            continue;
        const double *r = lg + i * V;
        double top = r[0], z = 0;
        for (int v = 1; v < V; v++)
            top = fmax(top, r[v]);
        for (int v = 0; v < V; v++)
            z += exp(r[v] - top);
        want += log(z) + top - r[tg[i]];
        count++;
    }
    want /= count;
    double got = run(g, ids, tg, 0);
    LT_ASSERT(fabs(got - want) < 1e-13, "loss %.17g, by hand %.17g", got, want);
    free(lg);
    ladle_graph_destroy(&g);
}
END_TEST

/* attn_f32_tiles reaches the attention layers: an f32 model's logits move
 * (by rounding: within 1e-5 of the largest), an f64 model's do not. */
START_TEST(f32_tiles_reach_the_attention)
{
    int64_t ids[NB * T];
    fill_ids(ids, 3);
    double a[NB * T * V], b[NB * T * V];
    for (int k = 0; k < 2; k++) {
        ladle_dtype dt = k ? LADLE_F64 : LADLE_F32;
        ladle_graph *g0 = small_gpt_tiles(dt, 0, 0), *g1 = small_gpt_tiles(dt, 0, 1);
        logits_of(g0, ids, a);
        logits_of(g1, ids, b);
        double big = 0, diff = 0;
        int moved = 0;
        for (int i = 0; i < NB * T * V; i++) {
            big = fmax(big, fabs(a[i]));
            diff = fmax(diff, fabs(a[i] - b[i]));
            moved |= a[i] != b[i];
        }
        if (k)
            LT_ASSERT(!moved, "f64: attn_f32_tiles moved a logit by %.2e", diff);
        else
            LT_ASSERT(moved && diff < 1e-5 * big,
                      "f32: attn_f32_tiles moved the logits by %.2e of %.2e (want > 0, "
                      "< 1e-5 of it)",
                      diff, big);
        ladle_graph_destroy(&g0);
        ladle_graph_destroy(&g1);
    }
}
END_TEST

/* Central differences of the loss for a few entries of every kind of
 * parameter (embeddings, layer norms, the attention's projections, the
 * MLP, the head) against the backward, f64. */
START_TEST(gradients_by_finite_differences)
{
    ladle_graph *g = small_gpt(LADLE_F64, 0);
    int64_t ids[NB * T], tg[NB * T];
    fill_ids(ids, 3);
    for (int i = 0; i < NB * T; i++)
        tg[i] = (i * 3 + 2) % V;
    run(g, ids, tg, 1);
    for (int i = 0; i < ladle_graph_num_params(g); i++) {
        const char *name = NULL;
        ladle_tensor *p = NULL, *gr = NULL;
        LT_OK(ladle_graph_param(g, i, &name, &p, &gr));
        int64_t n = ladle_tensor_numel(p);
        for (int k = 0; k < 3; k++) {
            int64_t at = (int64_t)((uint64_t)(i * 131 + k * 977) % (uint64_t)n);
            double analytic = lt_get(gr, at), x0 = lt_get(p, at), h = 1e-5;
            lt_set(p, at, x0 + h);
            double up = run(g, ids, tg, 0);
            lt_set(p, at, x0 - h);
            double down = run(g, ids, tg, 0);
            lt_set(p, at, x0);
            double numeric = (up - down) / (2 * h);
            double err = fabs(numeric - analytic) / (1e-6 + fabs(numeric) + fabs(analytic));
            LT_ASSERT(err < 1e-5, "%s[%lld]: backward %.10e, differences %.10e", name,
                      (long long)at, analytic, numeric);
        }
    }
    ladle_graph_destroy(&g);
}
END_TEST

/* AdamW on one fixed batch: the loss falls to under a quarter of where it
 * started within 60 steps (a model that cannot learn does not). */
START_TEST(learns_a_batch)
{
    ladle_graph *g = small_gpt(LADLE_F32, 0.1);
    ladle_optimizer_desc od;
    ladle_optimizer *opt = NULL;
    ladle_optimizer_desc_init(&od, LADLE_OPT_ADAMW, 1e-2);
    LT_OK(ladle_optimizer_create(&od, &opt));
    LT_OK(ladle_optimizer_add_graph(opt, g));
    int64_t ids[NB * T], tg[NB * T];
    fill_ids(ids, 4);
    for (int i = 0; i < NB * T; i++)
        tg[i] = (ids[i] * 2 + 1) % V;
    double first = run(g, ids, tg, 1), loss = first;
    for (int s = 0; s < 60; s++) {
        LT_OK(ladle_optimizer_step(opt));
        loss = run(g, ids, tg, 1);
    }
    LT_ASSERT(isfinite(first) && loss < 0.25 * first, "loss %.4f after 60 steps from %.4f",
              loss, first);
    ladle_optimizer_destroy(&opt);
    ladle_graph_destroy(&g);
}
END_TEST

START_TEST(bad_descriptors)
{
    ladle_gpt_desc d;
    ladle_graph *g = NULL;
    ladle_gpt_desc_init(&d);
    d.device = lt_device();
    LT_FAILS(ladle_gpt_create(NULL, ladle_comm_of(MPI_COMM_SELF), &g), LADLE_ERR_NULL);
    LT_FAILS(ladle_gpt_create(&d, ladle_comm_of(MPI_COMM_SELF), NULL), LADLE_ERR_NULL);
    ladle_gpt_desc b;
#define REFUSED(field, value, text)                                                        \
    do {                                                                                   \
        b = d;                                                                             \
        b.field = value;                                                                   \
        ladle_status st_ = ladle_gpt_create(&b, ladle_comm_of(MPI_COMM_SELF), &g);         \
        LT_ASSERT(st_ == LADLE_ERR_ARG && g == NULL &&                                     \
                      strstr(ladle_error_message(), text) != NULL,                         \
                  #field " = " #value ": %s: %s", ladle_status_name(st_),                  \
                  ladle_error_message());                                                  \
    } while (0)
    REFUSED(size, 0, "size");
    REFUSED(vocab, 0, "vocab 0");
    REFUSED(vocab, (1 << 24) + 1, "vocab");
    REFUSED(context, -3, "context -3");
    REFUSED(batch, 0, "batch 0");
    REFUSED(layers, 0, "layers 0");
    REFUSED(layers, 257, "layers 257");
    REFUSED(width, 0, "width 0");
    REFUSED(heads, 3, "heads 3 must divide the width 128");
    REFUSED(heads, 0, "heads 0");
    REFUSED(mlp, 0, "mlp 0");
    REFUSED(dropout, 1.0, "dropout 1");
    REFUSED(dropout, -0.1, "dropout");
    REFUSED(dropout, NAN, "dropout");
    REFUSED(data_ways, 0, "data_ways 0");
    REFUSED(data_ways, 3, "data_ways 3 must divide the batch");
    REFUSED(tensor_ways, 3, "tensor_ways 3 must divide the context");
    REFUSED(tensor_ways, 8, "at most the heads");
    REFUSED(tensor_ways, 2, "over a communicator of 1 ranks: they must be equal");
#undef REFUSED
}
END_TEST

/* The global batch of the data-parallel tests (divisible by 1, 2, 3, 4). */
enum { NG = 12 };

static ladle_gpt_desc dp_desc(int ways, uint64_t seed)
{
    ladle_gpt_desc d = small_desc(NG, LADLE_F64, seed);
    d.data_ways = ways;
    return d;
}

/* Forward, loss and backward (gradients summed over the copies) of rows
 * first .. first + n - 1 (of len tokens) of ids and tg; the loss. */
static double dp_run(ladle_graph *g, const int64_t *ids, const int64_t *tg, int first,
                     int n, int len, const ladle_tensor **logits)
{
    ladle_tensor *x = lt_tensor(LADLE_I64, 2, (int64_t[]){n, len});
    ladle_tensor *t = lt_tensor(LADLE_I64, 1, (int64_t[]){(int64_t)n * len});
    LT_OK(ladle_tensor_write(x, ids + (size_t)first * len));
    LT_OK(ladle_tensor_write(t, tg + (size_t)first * len));
    const ladle_tensor *xs[1] = {x}, *ts[1] = {t};
    double loss = 0;
    LT_OK(ladle_graph_zero_grad(g));
    LT_OK(ladle_graph_forward(g, 1, xs, logits));
    LT_OK(ladle_graph_loss(g, 1, ts, &loss));
    LT_OK(ladle_graph_backward(g, 1));
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&t);
    return loss;
}

/* The largest |a - b| / (1 + |b|) over every parameter of two graphs of the
 * same structure (names checked alike). */
static double params_apart(const ladle_graph *a, const ladle_graph *b, int grads)
{
    double worst = 0;
    LT_ASSERT(ladle_graph_num_params(a) == ladle_graph_num_params(b),
              "%d and %d parameters", ladle_graph_num_params(a), ladle_graph_num_params(b));
    for (int i = 0; i < ladle_graph_num_params(a); i++) {
        const char *na = NULL, *nb = NULL;
        ladle_tensor *pa = NULL, *ga = NULL, *pb = NULL, *gb = NULL;
        LT_OK(ladle_graph_param(a, i, &na, &pa, &ga));
        LT_OK(ladle_graph_param(b, i, &nb, &pb, &gb));
        LT_ASSERT(strcmp(na, nb) == 0 && ladle_tensor_numel(pa) == ladle_tensor_numel(pb),
                  "parameter %d: %s and %s", i, na, nb);
        int64_t n = ladle_tensor_numel(pa);
        double *va = malloc(sizeof(double) * (size_t)n),
               *vb = malloc(sizeof(double) * (size_t)n);
        LT_ASSERT(va && vb, "out of memory");
        LT_OK(ladle_tensor_read(grads ? ga : pa, va));
        LT_OK(ladle_tensor_read(grads ? gb : pb, vb));
        for (int64_t k = 0; k < n; k++) {
            double e = fabs(va[k] - vb[k]) / (1 + fabs(vb[k]));
            worst = e > worst ? e : worst;
        }
        free(va);
        free(vb);
    }
    return worst;
}

/* This rank's block of a global N x T array (rows of windows b, positions
 * i, window by window) as the D x S layout of ladle_gpt_create_on holds
 * it. */
static void block_of(const int64_t *all, int D, int S, int rank, int64_t *mine)
{
    int nb = NG / D, ts = T / S, b = rank / S, i = rank % S, k = 0;
    for (int n = 0; n < nb; n++)
        for (int t = 0; t < ts; t++)
            mine[k++] = all[(size_t)(b * nb + n) * T + (size_t)(i * ts + t)];
}

/* D x S ranks of ladle_gpt_create_on against ladle_gpt_create on the whole
 * batch: the copies start as rank 0's though each rank draws its own seed
 * (S = 1: the tensor-parallel layers draw their blocks, so every rank passes
 * the seed there), each rank's logits rows, the losses of 5 AdamW steps
 * (with weight decay and some ignored targets), the summed gradients of the
 * first step (S = 1), and the weights after them, gathered by a checkpoint
 * and loaded into the one-rank model, agree to 1e-10. */
static void parallel_equals_one_rank(int D, int S)
{
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int nb = NG / D, ts = T / S, b = rank / S, i = rank % S;
    ladle_gpt_desc ds = dp_desc(1, 9), dd = dp_desc(D, S == 1 ? 9 + (uint64_t)rank : 9);
    dd.tensor_ways = S;
    ladle_graph *one = NULL, *dp = NULL;
    LT_OK(ladle_gpt_create(&ds, ladle_comm_of(MPI_COMM_SELF), &one));
    LT_OK(ladle_gpt_create(&dd, ladle_comm_of(MPI_COMM_WORLD), &dp));
    if (S == 1)
        LT_ASSERT(params_apart(dp, one, 0) == 0,
                  "the copies do not start as rank 0's weights");
    LT_ASSERT(D * S == 1 || ladle_graph_buckets(dp) >= 1, "no gradient bucket over %dx%d",
              D, S);

    int64_t ids[NG * T], tg[NG * T], mi[NG * T], mt[NG * T];
    for (int k = 0; k < NG * T; k++) {
        ids[k] = (int64_t)(((uint64_t)k * 2654435761u + 7) % V);
        tg[k] = k % 13 == 5 ? -1 : (int64_t)(((uint64_t)k * 40503u + 3) % V);
    }
    block_of(ids, D, S, rank, mi);
    block_of(tg, D, S, rank, mt);
    ladle_optimizer_desc od;
    ladle_optimizer *o1 = NULL, *od_ = NULL;
    ladle_optimizer_desc_init(&od, LADLE_OPT_ADAMW, 1e-2);
    od.weight_decay = 0.1;
    LT_OK(ladle_optimizer_create(&od, &o1));
    LT_OK(ladle_optimizer_create(&od, &od_));
    LT_OK(ladle_optimizer_add_graph(o1, one));
    LT_OK(ladle_optimizer_add_graph(od_, dp));
    for (int s = 0; s < 5; s++) {
        const ladle_tensor *y1 = NULL, *yd = NULL;
        double l1 = dp_run(one, ids, tg, 0, NG, T, &y1);
        double ld = dp_run(dp, mi, mt, 0, nb, ts, &yd);
        LT_ASSERT(fabs(ld - l1) <= 1e-12 * fabs(l1),
                  "%dx%d step %d: loss %.17g, one rank %.17g", D, S, s, ld, l1);
        if (s == 0) {
            double *a = malloc(sizeof(double) * NG * T * V),
                   *m = malloc(sizeof(double) * NG * T * V);
            LT_ASSERT(a && m, "out of memory");
            LT_OK(ladle_tensor_read(y1, a));
            LT_OK(ladle_tensor_read(yd, m));
            double e = 0;
            for (int n = 0; n < nb; n++)
                for (int t = 0; t < ts; t++)
                    for (int v = 0; v < V; v++) {
                        double want =
                            a[((size_t)(b * nb + n) * T + (size_t)(i * ts + t)) * V + v];
                        double got = m[((size_t)n * ts + (size_t)t) * V + v];
                        e = fmax(e, fabs(got - want) / (1 + fabs(want)));
                    }
            LT_ASSERT(e <= 1e-12, "%dx%d: logits %.3e apart", D, S, e);
            free(a);
            free(m);
            if (S == 1) {
                double ge = params_apart(dp, one, 1);
                LT_ASSERT(ge <= 1e-10, "summed gradients %.3e apart from one rank's", ge);
            }
        }
        LT_OK(ladle_optimizer_step(o1));
        LT_OK(ladle_optimizer_step(od_));
    }
    if (S == 1) {
        double pe = params_apart(dp, one, 0);
        LT_ASSERT(pe <= 1e-10, "weights after 5 steps %.3e apart", pe);
    }
    /* every shard and copy gathered by a checkpoint, into the one-rank model */
    char path[64];
    snprintf(path, sizeof path, "/tmp/ladle_test_gpt_%dx%d.ckpt", D, S);
    LT_OK(ladle_checkpoint_save_graph(path, ladle_comm_of(MPI_COMM_WORLD), dp, NULL, 0,
                                      NULL));
    ladle_graph *back = NULL;
    LT_OK(ladle_gpt_create(&ds, ladle_comm_of(MPI_COMM_SELF), &back));
    LT_OK(ladle_checkpoint_load_graph(path, ladle_comm_of(MPI_COMM_SELF), back, NULL, 0,
                                      NULL, NULL));
    double ce = params_apart(back, one, 0);
    LT_ASSERT(ce <= 1e-10, "%dx%d: the checkpoint's weights are %.3e from one rank's", D, S,
              ce);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        remove(path);
    ladle_graph_destroy(&back);
    ladle_optimizer_destroy(&o1);
    ladle_optimizer_destroy(&od_);
    ladle_graph_destroy(&one);
    ladle_graph_destroy(&dp);
}

/* Every D x S = the ranks with D dividing the batch and S the context. */
START_TEST(data_parallel_equals_one_rank)
{
    int ranks = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    for (int S = 1; S <= ranks; S++)
        if (ranks % S == 0 && T % S == 0 && NG % (ranks / S) == 0 && S <= H)
            parallel_equals_one_rank(ranks / S, S);
}
END_TEST

/* ladle_gpt_create_on's own refusals, on every rank alike, and the
 * replicate wrapper's. */
START_TEST(data_parallel_refusals)
{
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    ladle_graph *g = NULL;
    ladle_gpt_desc d = dp_desc(ranks + 1, 1);
    ladle_status st = ladle_gpt_create(&d, ladle_comm_of(MPI_COMM_WORLD), &g);
    LT_ASSERT(st == LADLE_ERR_ARG && g == NULL &&
                  strstr(ladle_error_message(), "data_ways"),
              "data_ways %d over %d ranks: %s: %s", ranks + 1, ranks, ladle_status_name(st),
              ladle_error_message());
    ladle_error_clear();
    d = dp_desc(ranks, 1);
    d.batch = 5 * ranks + (ranks > 1); /* not divisible when ranks > 1 */
    if (ranks > 1) {
        st = ladle_gpt_create(&d, ladle_comm_of(MPI_COMM_WORLD), &g);
        LT_ASSERT(st == LADLE_ERR_ARG && g == NULL, "batch %lld over %d: %s",
                  (long long)d.batch, ranks, ladle_status_name(st));
        ladle_error_clear();
        /* one rank alone with a bad description: every rank fails */
        d = dp_desc(ranks, 1);
        if (rank == ranks - 1)
            d.layers = 0;
        st = ladle_gpt_create(&d, ladle_comm_of(MPI_COMM_WORLD), &g);
        LT_ASSERT(st == LADLE_ERR_ARG && g == NULL, "layers 0 on the last rank: %s",
                  ladle_status_name(st));
        ladle_error_clear();
    }
    d = dp_desc(1, 1);
    d.data_ways = 2;
    LT_FAILS(ladle_gpt_create(&d, ladle_comm_of(MPI_COMM_SELF), &g), LADLE_ERR_ARG);
    LT_FAILS(ladle_gpt_create(NULL, ladle_comm_of(MPI_COMM_WORLD), &g), LADLE_ERR_NULL);

    /* the wrapper */
    ladle_partition *p = lt_partition(1, (int[]){ranks}, 0);
    ladle_op *layer = NULL, *w = NULL;
    int64_t xs[2] = {3, 4};
    LT_OK(ladle_activation_create(LADLE_RELU, 0, 2, xs, LADLE_F64, lt_device(), &layer));
    LT_FAILS(ladle_dist_replicate_create(p, &layer, 0, &w),
             LADLE_ERR_ARG); /* no parameters */
    LT_ASSERT(layer != NULL && w == NULL, "a refused layer stays the caller's");
    ladle_op_destroy(&layer);
    /* the last rank's linear has other output features: every rank refuses */
    LT_OK(
        ladle_linear_create(LT_LINEAR(xs[1], rank == ranks - 1 && ranks > 1 ? 5 : 4, 1, 0),
                            2, xs, LADLE_F64, lt_device(), 1, &layer));
    if (ranks > 1) {
        LT_FAILS(ladle_dist_replicate_create(p, &layer, 0, &w), LADLE_ERR_ARG);
        LT_ASSERT(layer != NULL && w == NULL, "a refused layer stays the caller's");
    }
    LT_FAILS(ladle_dist_replicate_create(p, &layer, 0x80, &w), LADLE_ERR_ARG);
    LT_FAILS(ladle_dist_replicate_create(NULL, &layer, 0, &w), LADLE_ERR_NULL);
    ladle_op_destroy(&layer);
    /* a distributed layer is replicated already */
    ladle_partition *px = lt_partition(2, (int[]){1, 1}, 0);
    LT_OK(ladle_dist_linear_create(LT_LINEAR(3, 3, 1, 0),
                                   &(ladle_dist_partitions){.x = px, .w = px, .y = px},
                                   (int64_t[]){2, 3}, LADLE_F64, lt_device(), 1, &layer));
    if (rank == 0)
        LT_FAILS(ladle_dist_replicate_create(px, &layer, 0, &w), LADLE_ERR_ARG);
    else /* not a member of px */
        LT_FAILS(ladle_dist_replicate_create(px, &layer, 0, &w), LADLE_ERR_PARTITION);
    ladle_op_destroy(&layer);
    ladle_partition_destroy(&px);
    ladle_partition_destroy(&p);
}
END_TEST

LT_SUITE("gpt", "gpt", 300, parameters_by_hand, causal_from_outside, loss_by_hand,
         f32_tiles_reach_the_attention, gradients_by_finite_differences, learns_a_batch,
         bad_descriptors, data_parallel_equals_one_rank, data_parallel_refusals)
