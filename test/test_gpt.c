/*
 * The GPT model (ladle_gpt_create): its parameters counted by hand, the
 * causal mask seen from outside (changing a token changes no logit before
 * it), the cross entropy over the logits rows recomputed here (with the
 * ignored targets of an evaluation batch's padding), central differences
 * of the loss against the backward for parameters of every kind of layer,
 * a fixed batch learned by AdamW, and the refusals.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { V = 11, T = 6, NB = 2, L = 2, E = 8, H = 2 };

static ladle_graph *small_gpt(ladle_dtype dt, double dropout)
{
    ladle_gpt_desc d;
    ladle_gpt_desc_init(&d);
    d.vocab = V;
    d.context = T;
    d.batch = NB;
    d.layers = L;
    d.width = E;
    d.heads = H;
    d.dtype = dt;
    d.device = lt_device();
    d.dropout = dropout;
    d.seed = 5;
    ladle_graph *g = NULL;
    LT_OK(ladle_gpt_create(&d, &g));
    return g;
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
    LT_OK(ladle_tensor_read(ys[0], out));
    ladle_tensor_destroy(&ids);
}

/* Parameters of V 11, T 6, L 2, E 8, H 2, MLP 4 E, counted by hand: wte 88,
 * wpe 48; a block: ln1 16, qkv 3 E E + 3 E = 216, out E E + E = 72, ln2
 * 16, fc 4 E E + 4 E = 288, proj 4 E E + E = 264 (872); ln_f 16, head
 * V E = 88 (no bias): 88 + 48 + 2 x 872 + 16 + 88 = 1984. */
START_TEST(parameters_by_hand)
{
    if (lt_device() == LADLE_CUDA)
        return;
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
    if (lt_device() == LADLE_CUDA)
        return;
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
    if (lt_device() == LADLE_CUDA)
        return;
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

/* Central differences of the loss for a few entries of every kind of
 * parameter (embeddings, layer norms, the attention's projections, the
 * MLP, the head) against the backward, f64. */
START_TEST(gradients_by_finite_differences)
{
    if (lt_device() == LADLE_CUDA)
        return;
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
    if (lt_device() == LADLE_CUDA)
        return;
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
    LT_FAILS(ladle_gpt_create(NULL, &g), LADLE_ERR_NULL);
    LT_FAILS(ladle_gpt_create(&d, NULL), LADLE_ERR_NULL);
    ladle_gpt_desc b;
#define REFUSED(field, value, text)                                                        \
    do {                                                                                   \
        b = d;                                                                             \
        b.field = value;                                                                   \
        ladle_status st_ = ladle_gpt_create(&b, &g);                                       \
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
#undef REFUSED
    if (lt_device() == LADLE_CUDA) { /* no attention kernels there yet */
        ladle_status st = ladle_gpt_create(&d, &g);
        LT_ASSERT(st == LADLE_ERR_DEVICE && g == NULL, "cuda: %s: %s",
                  ladle_status_name(st), ladle_error_message());
    }
}
END_TEST

static Suite *gpt_suite(void)
{
    Suite *s = suite_create("gpt");
    TCase *tc = tcase_create("gpt");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, parameters_by_hand);
    tcase_add_test(tc, causal_from_outside);
    tcase_add_test(tc, loss_by_hand);
    tcase_add_test(tc, gradients_by_finite_differences);
    tcase_add_test(tc, learns_a_batch);
    tcase_add_test(tc, bad_descriptors);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv) { return lt_main(argc, argv, gpt_suite); }
