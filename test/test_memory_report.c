/* Memory accounting (ladle_memory_report): a tracker counts, by kind, the
 * bytes of what ladle makes, to the byte against sizes derived by hand;
 * its peaks; its frees from anywhere; the reduction over ranks; and the
 * memory model of chains and of the GPT graph against what the tracker
 * measured. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static uint64_t rng_state = 88172645463325252ull;
static int64_t draw(int64_t lo, int64_t hi)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (int64_t)(rng_state % (uint64_t)(hi - lo + 1));
}

static ladle_memory_stats now(const ladle_memory_tracker *t)
{
    ladle_memory_stats s;
    ladle_memory_stats_init(&s);
    LT_OK(ladle_memory_report(t, &s));
    return s;
}

/* A tracker made and made current, with its figures all 0. */
static ladle_memory_tracker *tracked(void)
{
    ladle_memory_tracker *t = NULL;
    LT_OK(ladle_memory_tracker_create(&t));
    LT_OK(ladle_memory_track(t));
    LT_ASSERT(ladle_memory_tracking() == t, "the tracker is not the thread's");
    ladle_memory_stats s = now(t);
    LT_ASSERT(s.total == 0 && s.peak_total == 0, "a new tracker counts %zu", s.total);
    return t;
}

/* Stop tracking; every block counted must have been freed again. */
static void untrack(ladle_memory_tracker **t)
{
    LT_OK(ladle_memory_track(NULL));
    ladle_memory_stats s = now(*t);
    for (int k = 0; k < LADLE_MEM_KINDS; k++)
        LT_ASSERT(s.current[k] == 0, "%zu bytes of %s never freed", s.current[k],
                  ladle_memory_kind_name((ladle_memory_kind)k));
    LT_OK(ladle_memory_tracker_destroy(t));
    LT_ASSERT(*t == NULL, "destroy did not null the handle");
}

/* A linear layer's parameters and gradients, by kind, to the byte: (in
 * out + out) elements each; an untagged tensor's data is OTHER (measured
 * as the difference from an empty tensor, whose object alone is counted). */
START_TEST(counts_by_kind)
{
    for (int rep = 0; rep < 4; rep++) {
        int64_t in = draw(1, 40), out = draw(1, 40), n = draw(1, 9);
        int bias = (int)draw(0, 1);
        ladle_dtype dt = rep % 2 ? LADLE_F32 : LADLE_F64;
        size_t es = rep % 2 ? 4 : 8;
        ladle_memory_tracker *t = tracked();
        ladle_op *lin = NULL;
        int64_t xs[2] = {n, in};
        LT_OK(ladle_linear_create(LT_LINEAR(in, out, bias, 0), 2, xs, dt, LADLE_CPU, 7,
                                  &lin));
        ladle_memory_stats s = now(t);
        size_t want = es * (size_t)(in * out + bias * out);
        LT_ASSERT(s.current[LADLE_MEM_PARAMS] == want && s.current[LADLE_MEM_GRADS] == want,
                  "params %zu grads %zu, want %zu each", s.current[LADLE_MEM_PARAMS],
                  s.current[LADLE_MEM_GRADS], want);
        LT_ASSERT(s.current[LADLE_MEM_OPTIM] == 0 && s.current[LADLE_MEM_COMM] == 0,
                  "optim %zu comm %zu", s.current[LADLE_MEM_OPTIM],
                  s.current[LADLE_MEM_COMM]);
        /* an untagged tensor: its object and its data are OTHER */
        int64_t zero = 0, shape[3] = {draw(1, 9), draw(1, 9), draw(1, 9)};
        size_t before = now(t).current[LADLE_MEM_OTHER];
        ladle_tensor *empty = NULL, *full = NULL;
        LT_OK(ladle_tensor_create(dt, LADLE_CPU, 1, &zero, &empty));
        size_t obj = now(t).current[LADLE_MEM_OTHER] - before;
        LT_OK(ladle_tensor_create(dt, LADLE_CPU, 3, shape, &full));
        size_t data = now(t).current[LADLE_MEM_OTHER] - before - 2 * obj;
        LT_ASSERT(data == es * (size_t)(shape[0] * shape[1] * shape[2]),
                  "a tensor's data counted %zu", data);
        LT_ASSERT(now(t).current[LADLE_MEM_PARAMS] == want, "a tensor counted as params");
        LT_DESTROY(&empty, &full);
        /* an optimizer's states: Adam two per parameter, SGD with momentum one */
        ladle_optimizer_kind kinds[3] = {LADLE_OPT_ADAM, LADLE_OPT_SGD, LADLE_OPT_SGD};
        double momenta[3] = {0, 0.9, 0};
        size_t states[3] = {2, 1, 0};
        for (int k = 0; k < 3; k++) {
            ladle_optimizer_desc od;
            ladle_optimizer_desc_init(&od, kinds[k], 0.1);
            od.momentum = momenta[k];
            ladle_optimizer *opt = NULL;
            LT_OK(ladle_optimizer_create(&od, &opt));
            LT_OK(ladle_optimizer_add_op(opt, lin));
            size_t got = now(t).current[LADLE_MEM_OPTIM];
            LT_ASSERT(got == states[k] * want, "optimizer %d holds %zu, want %zu", k, got,
                      states[k] * want);
            LT_OK(ladle_optimizer_destroy(&opt));
            LT_ASSERT(now(t).current[LADLE_MEM_OPTIM] == 0, "optimizer states left");
        }
        ladle_op_destroy(&lin);
        untrack(&t);
    }
}
END_TEST

/* Peaks: the most held at once, per kind and in all; a reset starts them
 * from what is held; frees count wherever the tracker is no longer the
 * thread's; nothing is counted without one, and nothing in a step. */
START_TEST(peaks_and_frees)
{
    int64_t a = draw(2, 30), b = draw(2, 30), c = draw(2, 30), n = 3;
    ladle_memory_tracker *t = tracked();
    ladle_op *la = NULL, *lb = NULL, *lc = NULL, *untracked = NULL;
    int64_t xa[2] = {n, a}, xb[2] = {n, b}, xc[2] = {n, c};
    LT_OK(ladle_linear_create(LT_LINEAR(a, a, 0, 0), 2, xa, LADLE_F64, LADLE_CPU, 1, &la));
    LT_OK(ladle_linear_create(LT_LINEAR(b, b, 0, 0), 2, xb, LADLE_F64, LADLE_CPU, 2, &lb));
    ladle_op_destroy(&la);
    LT_OK(ladle_linear_create(LT_LINEAR(c, c, 0, 0), 2, xc, LADLE_F64, LADLE_CPU, 3, &lc));
    ladle_memory_stats s = now(t);
    size_t pa = 8 * (size_t)(a * a), pb = 8 * (size_t)(b * b), pc = 8 * (size_t)(c * c);
    size_t peak = pa + pb > pb + pc ? pa + pb : pb + pc;
    LT_ASSERT(s.current[LADLE_MEM_PARAMS] == pb + pc && s.peak[LADLE_MEM_PARAMS] == peak,
              "params now %zu peak %zu, want %zu and %zu", s.current[LADLE_MEM_PARAMS],
              s.peak[LADLE_MEM_PARAMS], pb + pc, peak);
    LT_ASSERT(s.peak_total >= s.total && s.peak_total >= 2 * peak, "peak_total %zu",
              s.peak_total);
    LT_OK(ladle_memory_reset_peak(t));
    s = now(t);
    LT_ASSERT(s.peak[LADLE_MEM_GRADS] == pb + pc && s.peak_total == s.total,
              "after a reset, peak %zu total %zu", s.peak_total, s.total);
    /* a forward and a backward allocate nothing */
    ladle_tensor *x = NULL, *y = NULL;
    LT_OK(ladle_tensor_create(LADLE_F64, LADLE_CPU, 2, xc, &x));
    LT_OK(ladle_tensor_create(LADLE_F64, LADLE_CPU, 2, xc, &y));
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_ctx_create(lc, &ctx));
    LT_OK(ladle_tensor_fill_random(x, 4, 0));
    size_t before = now(t).total;
    LT_OK(ladle_layer_forward(lc, ctx, x, y));
    LT_OK(ladle_layer_backward(lc, ctx, y, x));
    LT_ASSERT(now(t).total == before && now(t).peak_total == before,
              "the calls allocated: %zu then %zu", before, now(t).total);
    /* made without a tracker: not counted, and its free changes nothing */
    LT_OK(ladle_memory_track(NULL));
    LT_OK(ladle_linear_create(LT_LINEAR(a, b, 1, 0), 2, xa, LADLE_F64, LADLE_CPU, 4,
                              &untracked));
    LT_OK(ladle_memory_track(t));
    ladle_op_destroy(&untracked);
    LT_ASSERT(now(t).total == before, "an untracked layer counted");
    /* freed while no tracker is the thread's: still taken off t */
    LT_OK(ladle_memory_track(NULL));
    LT_FAILS_SAYING(ladle_memory_tracker_destroy(&t), LADLE_ERR_STATE, "still counts");
    ladle_ctx_destroy(&ctx);
    LT_DESTROY(&x, &y);
    ladle_op_destroy(&lb);
    ladle_op_destroy(&lc);
    LT_OK(ladle_memory_track(t));
    LT_FAILS_SAYING(ladle_memory_tracker_destroy(&t), LADLE_ERR_STATE, "this thread's");
    untrack(&t);
}
END_TEST

/* Bad input, and the maximum over ranks (every figure rank-dependent). */
START_TEST(refusals_and_max)
{
    ladle_memory_tracker *t = NULL;
    ladle_memory_stats s;
    LT_FAILS(ladle_memory_tracker_create(NULL), LADLE_ERR_NULL);
    LT_OK(ladle_memory_tracker_create(&t));
    LT_FAILS(ladle_memory_report(NULL, &s), LADLE_ERR_NULL);
    LT_FAILS(ladle_memory_report(t, NULL), LADLE_ERR_NULL);
    memset(&s, 0, sizeof s);
    s.size = 3;
    LT_FAILS(ladle_memory_report(t, &s), LADLE_ERR_ARG);
    LT_FAILS(ladle_memory_stats_max(&s, ladle_comm_of(MPI_COMM_WORLD)), LADLE_ERR_ARG);
    LT_FAILS(ladle_memory_reset_peak(NULL), LADLE_ERR_NULL);
    LT_ASSERT(strcmp(ladle_memory_kind_name(LADLE_MEM_OPTIM), "optim") == 0 &&
                  strcmp(ladle_memory_kind_name(LADLE_MEM_KINDS), "unknown") == 0,
              "kind names");
    LT_OK(ladle_memory_tracker_destroy(&t));
    LT_OK(ladle_memory_tracker_destroy(&t));
    LT_OK(ladle_memory_tracker_destroy(NULL));
    ladle_memory_stats_init(&s);
    for (int k = 0; k < LADLE_MEM_KINDS; k++) {
        s.current[k] = (size_t)((lt_rank * 7 + k * 3) % (lt_size + 2));
        s.peak[k] = ((size_t)1 << 40) + (size_t)(lt_rank ^ k);
    }
    s.total = (size_t)lt_rank;
    s.peak_total = (size_t)(lt_size - lt_rank);
    LT_OK(ladle_memory_stats_max(&s, ladle_comm_of(MPI_COMM_WORLD)));
    int ok = s.total == (size_t)(lt_size - 1) && s.peak_total == (size_t)lt_size;
    for (int k = 0; k < LADLE_MEM_KINDS; k++) {
        size_t c = 0, p = 0;
        for (int r = 0; r < lt_size; r++) {
            size_t cr = (size_t)((r * 7 + k * 3) % (lt_size + 2));
            size_t pr = ((size_t)1 << 40) + (size_t)(r ^ k);
            c = cr > c ? cr : c;
            p = pr > p ? pr : p;
        }
        ok = ok && s.current[k] == c && s.peak[k] == p;
    }
    LT_ASSERT(ok, "the maximum over %d ranks", lt_size);
}
END_TEST

/* The model against the tracker: every modelled kind exactly (without
 * all_exact: params, grads, optim and gather), and the total within 10% of
 * the measured peak (with full_peak) or of the peak less host objects,
 * which the model leaves out. */
static void model_within(const ladle_memory_stats *model, const ladle_memory_tracker *t,
                         const char *what, int all_exact, int full_peak)
{
    ladle_memory_stats m = now(t);
    int ok = 1;
    for (int k = 0; k < LADLE_MEM_KINDS; k++)
        if (k != LADLE_MEM_OTHER && model->current[k] != m.current[k]) {
            /* without all_exact, the kinds the model derives from the
             * parameters must still be exact */
            ok = ok && !all_exact && k != LADLE_MEM_PARAMS && k != LADLE_MEM_GRADS &&
                 k != LADLE_MEM_OPTIM && k != LADLE_MEM_GATHER;
            if (lt_rank == 0)
                printf("%s: %s model %zu measured %zu\n", what,
                       ladle_memory_kind_name((ladle_memory_kind)k), model->current[k],
                       m.current[k]);
        }
    LT_ASSERT(ok, "%s: the model differs from the measurement", what);
    /* the peak less the host objects, which the model leaves out (a small
     * network's plans outweigh its tensors) */
    size_t peak = full_peak ? m.peak_total : m.peak_total - m.peak[LADLE_MEM_OTHER];
    double ratio = (double)model->peak_total / (double)peak;
    if (lt_rank == 0)
        printf("%s: model %zu measured peak %zu, %zu less other (ratio %.3f)\n", what,
               model->peak_total, m.peak_total, peak, ratio);
    LT_ASSERT(ratio > 0.9 && ratio < 1.1, "%s: model %zu against a peak of %zu", what,
              model->peak_total, peak);
}

static void model_matches(const ladle_memory_stats *model, const ladle_memory_tracker *t,
                          const char *what)
{
    model_within(model, t, what, 1, 1);
}

/* A chain of sequential layers with an optimizer of each kind. */
START_TEST(model_chain)
{
    ladle_optimizer_kind kinds[2] = {LADLE_OPT_ADAMW, LADLE_OPT_SGD};
    for (int rep = 0; rep < 2; rep++) {
        int64_t n = draw(8, 32),
                w[4] = {draw(100, 200), draw(100, 200), draw(100, 200), 10};
        ladle_memory_tracker *t = tracked();
        ladle_op *layers[4] = {NULL}, *loss = NULL;
        int64_t xs[2] = {n, w[0]}, hs[2] = {n, w[1]}, h2[2] = {n, w[2]}, ys[2] = {n, w[3]};
        LT_OK(ladle_linear_create(LT_LINEAR(w[0], w[1], 1, 0), 2, xs, LADLE_F64, LADLE_CPU,
                                  1, &layers[0]));
        LT_OK(ladle_activation_create(LADLE_RELU, 0, 2, hs, LADLE_F64, LADLE_CPU,
                                      &layers[1]));
        LT_OK(ladle_linear_create(LT_LINEAR(w[1], w[2], 1, 0), 2, hs, LADLE_F64, LADLE_CPU,
                                  2, &layers[2]));
        LT_OK(ladle_linear_create(LT_LINEAR(w[2], w[3], 0, 0), 2, h2, LADLE_F64, LADLE_CPU,
                                  3, &layers[3]));
        LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 2, ys,
                                LADLE_F64, LADLE_CPU, &loss));
        ladle_network *net = NULL;
        LT_OK(ladle_network_create(4, layers, loss, 0, &net));
        ladle_optimizer_desc od;
        ladle_optimizer_desc_init(&od, kinds[rep], 0.01);
        od.momentum = 0.9;
        ladle_optimizer *opt = NULL;
        LT_OK(ladle_optimizer_create(&od, &opt));
        LT_OK(ladle_optimizer_add_network(opt, net));
        ladle_memory_stats model;
        ladle_memory_stats_init(&model);
        LT_OK(ladle_network_memory_model(net, &od, &model));
        /* activations by hand: each layer's y and dy, the loss's value and seed */
        size_t act = 8 * (size_t)(2 * n * (w[1] + w[1] + w[2] + w[3]) + 2);
        LT_ASSERT(model.current[LADLE_MEM_ACTIVATIONS] >= act, "activations %zu below %zu",
                  model.current[LADLE_MEM_ACTIVATIONS], act);
        model_matches(&model, t, rep ? "chain sgd" : "chain adamw");
        LT_OK(ladle_optimizer_destroy(&opt));
        LT_OK(ladle_network_destroy(&net));
        untrack(&t);
    }
}
END_TEST

/* The GPT graph of one rank (each rank its own, over MPI_COMM_SELF), f32,
 * with AdamW. The layers of a data or tensor parallel GPT hold message
 * buffers and replicas the model does not see yet (see docs/memory.md). */
START_TEST(model_gpt)
{
    ladle_gpt_desc d;
    ladle_gpt_desc_init(&d);
    d.vocab = 64 + 8 * lt_rank;
    d.context = 16;
    d.layers = 2;
    d.width = 32;
    d.heads = 4;
    d.batch = 2;
    ladle_memory_tracker *t = tracked();
    ladle_graph *g = NULL;
    LT_OK(ladle_gpt_create(&d, ladle_comm_of(MPI_COMM_SELF), &g));
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, LADLE_OPT_ADAMW, 1e-3);
    ladle_optimizer *opt = NULL;
    LT_OK(ladle_optimizer_create(&od, &opt));
    LT_OK(ladle_optimizer_add_graph(opt, g));
    ladle_memory_stats model;
    ladle_memory_stats_init(&model);
    LT_OK(ladle_graph_memory_model(g, &od, &model));
    model_matches(&model, t, "gpt");
    LT_OK(ladle_optimizer_destroy(&opt));
    LT_OK(ladle_graph_destroy(&g));
    untrack(&t);
}
END_TEST

/* The model of a network against the tracker, after an optimizer of kind
 * k took the network (its states counted). */
static void net_model(ladle_network *net, ladle_optimizer_kind k, ladle_memory_tracker *t,
                      const char *what, int exact)
{
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, k, 0.01);
    od.momentum = 0.9;
    ladle_optimizer *opt = NULL;
    LT_OK(ladle_optimizer_create(&od, &opt));
    LT_OK(ladle_optimizer_add_network(opt, net));
    ladle_memory_stats model;
    ladle_memory_stats_init(&model);
    LT_OK(ladle_network_memory_model(net, &od, &model));
    model_within(&model, t, what, exact, 0);
    LT_OK(ladle_optimizer_destroy(&opt));
}

/* LeNet data parallel over every rank (and spatially split where the ranks
 * allow), with AdamW and SGD. */
START_TEST(model_lenet)
{
    for (int rep = 0; rep < 2; rep++) {
        ladle_lenet_desc d;
        ladle_lenet_desc_init(&d);
        d.batch = 4 * lt_size * (1 + rep);
        d.data_ways = lt_size;
        d.dtype = rep ? LADLE_F64 : LADLE_F32;
        d.batchnorm = rep;
        ladle_memory_tracker *t = tracked();
        ladle_network *net = NULL;
        LT_OK(ladle_lenet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &net));
        net_model(net, rep ? LADLE_OPT_SGD : LADLE_OPT_ADAMW, t,
                  rep ? "lenet bn sgd" : "lenet adamw", 0);
        LT_OK(ladle_network_destroy(&net));
        untrack(&t);
    }
}
END_TEST

/* An AdamW optimizer over g, the graph's model against what tracker t
 * measured (model_within's exact), then g and t freed. */
static void graph_model_within(ladle_graph *g, ladle_memory_tracker *t, const char *what,
                               int exact)
{
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, LADLE_OPT_ADAMW, 1e-3);
    ladle_optimizer *opt = NULL;
    LT_OK(ladle_optimizer_create(&od, &opt));
    LT_OK(ladle_optimizer_add_graph(opt, g));
    ladle_memory_stats model;
    ladle_memory_stats_init(&model);
    LT_OK(ladle_graph_memory_model(g, &od, &model));
    model_within(&model, t, what, exact, 0);
    LT_OK(ladle_optimizer_destroy(&opt));
    LT_OK(ladle_graph_destroy(&g));
    untrack(&t);
}

/* The ResNet graph data parallel over every rank, with AdamW. */
START_TEST(model_resnet)
{
    ladle_resnet_desc d;
    LT_OK(ladle_resnet_desc_init(&d, LADLE_RESNET8));
    d.batch = 2 * lt_size;
    d.image = 12;
    d.data_ways = lt_size;
    ladle_memory_tracker *t = tracked();
    ladle_graph *g = NULL;
    LT_OK(ladle_resnet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &g));
    graph_model_within(g, t, "resnet", 0);
}
END_TEST

/* The GPT data parallel over every rank, f32, with AdamW. */
START_TEST(model_gpt_data)
{
    ladle_gpt_desc d;
    ladle_gpt_desc_init(&d);
    d.vocab = 64;
    d.context = 16;
    d.layers = 2;
    d.width = 32;
    d.heads = 4;
    d.batch = 2 * lt_size;
    d.data_ways = lt_size;
    ladle_memory_tracker *t = tracked();
    ladle_graph *g = NULL;
    LT_OK(ladle_gpt_create(&d, ladle_comm_of(MPI_COMM_WORLD), &g));
    graph_model_within(g, t, "gpt data", 1);
}
END_TEST

/* A data parallel chain of distributed linear layers (every rank a
 * replica) at ZeRO stages 0 to 2, with AdamW and SGD: the optimizer's
 * states are the buckets' slices from stage 1. */
START_TEST(model_zero)
{
    for (int stage = 0; stage <= 2; stage++)
        for (int rep = 0; rep < 2; rep++) {
            int64_t n = 2 * lt_size, in = draw(200, 300), h = draw(200, 300),
                    out = draw(3, 9);
            ladle_memory_tracker *t = tracked();
            ladle_partition *px = lt_partition(2, (int[]){lt_size, 1}, 0);
            ladle_partition *pw = lt_partition(3, (int[]){1, lt_size, 1}, 0);
            ladle_op *ops[3], *loss = NULL;
            LT_OK(ladle_dist_linear_create(
                LT_LINEAR(in, h, 1, 0), &(ladle_dist_partitions){px, pw, px},
                (int64_t[]){n, in}, LADLE_F64, LADLE_CPU, 11, &ops[0]));
            int nd;
            int64_t ys[LADLE_MAX_NDIM];
            ladle_op_y_shape(ops[0], &nd, ys);
            LT_OK(ladle_activation_create(LADLE_TANH, 0, nd, ys, LADLE_F64, LADLE_CPU,
                                          &ops[1]));
            LT_OK(ladle_dist_linear_create(
                LT_LINEAR(h, out, 1, 0), &(ladle_dist_partitions){px, pw, px},
                (int64_t[]){n, h}, LADLE_F64, LADLE_CPU, 12, &ops[2]));
            LT_OK(ladle_dist_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0),
                                         px, (int64_t[]){n, out}, LADLE_F64, LADLE_CPU,
                                         &loss));
            ladle_network_desc nd_;
            ladle_network_desc_init(&nd_);
            nd_.zero_stage = stage;
            nd_.bucket_bytes = rep ? 256 : 0;
            ladle_network *net = NULL;
            LT_OK(ladle_network_create_desc(&nd_, 3, ops, loss, &net));
            char what[32];
            snprintf(what, sizeof what, "zero %d %s", stage, rep ? "sgd" : "adamw");
            net_model(net, rep ? LADLE_OPT_SGD : LADLE_OPT_ADAMW, t, what, 1);
            LT_OK(ladle_network_destroy(&net));
            ladle_partition_destroy(&px);
            ladle_partition_destroy(&pw);
            untrack(&t);
        }
}
END_TEST

LT_SUITE("memory_report", "memory_report", 120, counts_by_kind, peaks_and_frees,
         refusals_and_max, model_chain, model_gpt, model_lenet, model_resnet,
         model_gpt_data, model_zero)
