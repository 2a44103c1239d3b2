/*
 * Dynamic loss scaling (ladle_loss_scaler): the scale's growth and backoff
 * and the skipped steps against a sequence worked out here, an overflow on
 * one rank skipping the step on every rank, f16 gradients that underflow
 * without a scale and step exactly with one, and training with a
 * power-of-two scale giving the same parameters, to the bit, as training
 * without (LeNet-5 data parallel over the suite's ranks, and the GPT graph
 * with dropout). Then the refusals.
 */
#include <math.h>
#include <string.h>

#include "harness.h"

static ladle_loss_scaler *scaler(double init, int64_t interval)
{
    ladle_loss_scaler_desc d;
    ladle_loss_scaler_desc_init(&d);
    d.init_scale = init;
    d.growth_interval = interval;
    ladle_loss_scaler *s = NULL;
    LT_OK(ladle_loss_scaler_create(&d, ladle_comm_of(MPI_COMM_WORLD), &s));
    return s;
}

/* Steps of SGD (lr 1/4) on 5 f64 parameters, the gradient of step t
 * stored S times g_t, with an inf (step 2) or a NaN (step 3) on the last
 * rank only; the scale, skips and parameters after each step against
 * the rule: skip and halve on any non-finite gradient, else step with
 * g_t and double after 2 good steps in a row. */
START_TEST(dynamics)
{
    int64_t n = 5;
    ladle_tensor *p = lt_tensor(LADLE_F64, 1, &n), *g = lt_tensor(LADLE_F64, 1, &n);
    double ref[5];
    for (int i = 0; i < 5; i++)
        lt_set(p, i, ref[i] = 0.5 * i - 1.0);
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, LADLE_OPT_SGD, 0.25);
    ladle_optimizer *o = NULL;
    LT_OK(ladle_optimizer_create(&od, &o));
    LT_OK(ladle_optimizer_add_param(o, p, g));
    ladle_loss_scaler *s = scaler(8.0, 2);
    /* bad[t]: 0 finite, 1 inf, 2 NaN on the last rank */
    const int bad[8] = {0, 0, 1, 2, 0, 0, 0, 1};
    double S = 8.0;
    int64_t good = 0, skipped = 0, steps = 0;
    for (int t = 0; t < 8; t++) {
        LT_ASSERT(ladle_loss_scaler_scale(s) == S, "step %d: scale %g, expected %g", t,
                  ladle_loss_scaler_scale(s), S);
        double gt[5];
        for (int i = 0; i < 5; i++) {
            gt[i] = (t + 1) * 0.375 - 0.125 * i * i + 0x1p-30 * i;
            lt_set(g, i, S * gt[i]);
        }
        if (bad[t] && lt_rank == lt_size - 1)
            lt_set(g, 3, bad[t] == 1 ? INFINITY : NAN);
        int stepped = -1;
        LT_OK(ladle_loss_scaler_step(s, o, &stepped));
        if (bad[t]) {
            skipped++, good = 0, S *= 0.5;
        } else {
            for (int i = 0; i < 5; i++)
                ref[i] -= 0.25 * gt[i];
            steps++;
            if (++good == 2)
                good = 0, S *= 2;
        }
        int same = 1;
        for (int i = 0; i < 5; i++)
            same &= lt_get(p, i) == ref[i];
        LT_ASSERT(stepped == !bad[t] && same && ladle_optimizer_steps(o) == steps &&
                      ladle_loss_scaler_skipped(s) == skipped &&
                      ladle_loss_scaler_good_steps(s) == good,
                  "step %d: stepped %d, parameter 0 %.17g vs %.17g, steps %lld, skipped %lld",
                  t, stepped, lt_get(p, 0), ref[0], (long long)ladle_optimizer_steps(o),
                  (long long)ladle_loss_scaler_skipped(s));
        if (t == 5) { /* unscale first, as before clipping: the gradient is g_t */
            for (int i = 0; i < 5; i++)
                lt_set(g, i, S * gt[i]);
            int finite = 0;
            LT_OK(ladle_loss_scaler_unscale(s, o, &finite));
            LT_ASSERT(finite && lt_get(g, 4) == gt[4], "unscaled %.17g, expected %.17g",
                      lt_get(g, 4), gt[4]);
            LT_FAILS_SAYING(ladle_loss_scaler_unscale(s, o, NULL), LADLE_ERR_ARG, "already");
            LT_OK(ladle_loss_scaler_step(s, o, &stepped));
            for (int i = 0; i < 5; i++)
                ref[i] -= 0.25 * gt[i];
            steps++;
            if (++good == 2)
                good = 0, S *= 2;
            LT_ASSERT(stepped && lt_get(p, 2) == ref[2], "step after unscale: %.17g vs %.17g",
                      lt_get(p, 2), ref[2]);
        }
    }
    ladle_loss_scaler_destroy(&s);
    ladle_optimizer_destroy(&o);
    LT_DESTROY(&p, &g);
}
END_TEST

/* f16 parameters and gradients: the true gradient 2^-26 underflows to 0
 * in f16, but 2^15 times it is exact; unscaled in f32 inside the step,
 * the f32 master moves by exactly lr 2^-26. A gradient of 1 stored at
 * scale 2^16 overflows f16's largest value (65504): skipped, the scale
 * halves, and at 2^15 it steps. */
START_TEST(f16_gradients)
{
    int64_t n = 3;
    ladle_tensor *p = lt_tensor(LADLE_F16, 1, &n), *g = lt_tensor(LADLE_F16, 1, &n);
    for (int i = 0; i < 3; i++)
        lt_set(p, i, 1.0);
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, LADLE_OPT_SGD, 1.0);
    ladle_optimizer *o = NULL;
    LT_OK(ladle_optimizer_create(&od, &o));
    LT_OK(ladle_optimizer_add_param(o, p, g));
    ladle_loss_scaler *s = scaler(65536.0, 1000);
    for (int i = 0; i < 3; i++)
        lt_set(g, i, 65536.0);
    LT_ASSERT(isinf(lt_get(g, 0)), "65536 should overflow f16, got %g", lt_get(g, 0));
    int stepped = -1;
    LT_OK(ladle_loss_scaler_step(s, o, &stepped));
    LT_ASSERT(!stepped && ladle_loss_scaler_scale(s) == 32768.0 && lt_get(p, 0) == 1.0,
              "overflow: stepped %d, scale %g, p %g", stepped, ladle_loss_scaler_scale(s),
              lt_get(p, 0));
    lt_set(g, 0, 0x1p-26);
    LT_ASSERT(lt_get(g, 0) == 0, "2^-26 should underflow f16, got %g", lt_get(g, 0));
    for (int i = 0; i < 3; i++)
        lt_set(g, i, 32768.0 * 0x1p-26 * (i + 1));
    LT_OK(ladle_loss_scaler_step(s, o, &stepped));
    ladle_tensor *m = ladle_optimizer_master(o, 0);
    int ok = stepped;
    for (int i = 0; i < 3; i++)
        ok &= lt_get(m, i) == (double)(float)(1.0 - 0x1p-26 * (i + 1));
    LT_ASSERT(ok, "master %.10g, expected %.10g", lt_get(m, 0),
              (double)(float)(1.0 - 0x1p-26));
    ladle_loss_scaler_destroy(&s);
    ladle_optimizer_destroy(&o);
    LT_DESTROY(&p, &g);
}
END_TEST

/* LeNet-5, f64, data parallel over every rank (sequential at 1): 5 steps
 * of SGD with momentum unscaled and with a scaler from 2^10 growing every
 * 2 steps: the same losses and parameters, to the bit. */
START_TEST(lenet_same_bits)
{
    int64_t N = 8, Sz = 12, labels[8];
    ladle_tensor *X = lt_tensor(LADLE_F64, 4, (int64_t[]){N, 1, Sz, Sz});
    LT_OK(ladle_tensor_fill_random(X, 41, 0));
    for (int i = 0; i < N; i++)
        labels[i] = (i * 3 + 1) % 10;
    int D = lt_size <= 4 && N % lt_size == 0 ? lt_size : 1;
    ladle_network *net[2] = {NULL, NULL};
    ladle_optimizer *opt[2] = {NULL, NULL};
    ladle_tensor *x = NULL, *t = NULL;
    for (int k = 0; k < 2; k++) {
        ladle_lenet_desc d;
        lt_lenet_desc(&d, N, Sz, 9);
        d.batchnorm = 1;
        d.sequential = D == 1;
        d.data_ways = D;
        LT_OK(ladle_lenet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &net[k]));
        ladle_optimizer_desc od;
        ladle_optimizer_desc_init(&od, LADLE_OPT_SGD, 0.05);
        od.momentum = 0.9;
        LT_OK(ladle_optimizer_create(&od, &opt[k]));
        LT_OK(ladle_optimizer_add_network(opt[k], net[k]));
    }
    int64_t off[4] = {0}, box[4] = {N, 1, Sz, Sz};
    if (D > 1)
        ladle_layout_box(ladle_op_x_layout(ladle_network_layer(net[0], 0)), LADLE_SELF, off, box);
    x = lt_tensor(LADLE_F64, 4, box);
    t = lt_tensor(LADLE_I64, 1, box);
    lt_box_extract(X, off, x);
    for (int64_t i = 0; i < box[0]; i++)
        lt_set(t, i, labels[off[0] + i]);
    ladle_loss_scaler *s = scaler(1024.0, 2);
    for (int step = 0; step < 5; step++) {
        double loss[2];
        lt_train_step(net[0], opt[0], x, t, &loss[0]);
        LT_OK(ladle_network_set_loss_scale(net[1], ladle_loss_scaler_scale(s)));
        LT_OK(ladle_network_zero_grad(net[1]));
        LT_OK(ladle_network_forward(net[1], x, NULL));
        LT_OK(ladle_network_loss(net[1], t, &loss[1]));
        LT_OK(ladle_network_backward(net[1], 1));
        int stepped = 0;
        LT_OK(ladle_loss_scaler_step(s, opt[1], &stepped));
        LT_ASSERT(stepped && loss[0] == loss[1], "step %d: losses %.17g, %.17g", step, loss[0],
                  loss[1]);
    }
    LT_ASSERT(ladle_loss_scaler_scale(s) == 4096.0, "scale %g after 5 steps",
              ladle_loss_scaler_scale(s));
    int same = 1;
    for (int i = 0; i < ladle_network_size(net[0]); i++)
        for (int q = 0; q < ladle_op_num_params(ladle_network_layer(net[0], i)); q++)
            same &= lt_same_values(ladle_op_param(ladle_network_layer(net[0], i), q),
                                   ladle_op_param(ladle_network_layer(net[1], i), q));
    LT_ASSERT(same, "parameters differ after 5 scaled steps (D %d)", D);
    ladle_loss_scaler_destroy(&s);
    for (int k = 0; k < 2; k++) {
        ladle_optimizer_destroy(&opt[k]);
        ladle_network_destroy(&net[k]);
    }
    LT_DESTROY(&x, &t, &X);
}
END_TEST

/* The GPT graph (one rank's, with dropout) trained 4 AdamW steps with and
 * without a scale of 2^12: the same losses and parameters, to the bit. */
START_TEST(gpt_same_bits)
{
    enum { V = 13, T = 6, NB = 2 };
    ladle_graph *g[2] = {NULL, NULL};
    ladle_optimizer *opt[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        ladle_gpt_desc d;
        ladle_gpt_desc_init(&d);
        d.vocab = V;
        d.context = T;
        d.batch = NB;
        d.layers = 2;
        d.width = 8;
        d.heads = 2;
        d.dtype = LADLE_F64;
        d.device = lt_device();
        d.dropout = 0.1;
        d.seed = 3;
        LT_OK(ladle_gpt_create(&d, ladle_comm_of(MPI_COMM_SELF), &g[k]));
        ladle_optimizer_desc od;
        ladle_optimizer_desc_init(&od, LADLE_OPT_ADAMW, 1e-2);
        LT_OK(ladle_optimizer_create(&od, &opt[k]));
        LT_OK(ladle_optimizer_add_graph(opt[k], g[k]));
    }
    LT_OK(ladle_graph_set_loss_scale(g[1], 4096.0));
    ladle_tensor *ids = lt_tensor(LADLE_I64, 2, (int64_t[]){NB, T});
    ladle_tensor *tg = lt_tensor(LADLE_I64, 1, (int64_t[]){NB * T});
    int64_t iv[NB * T], tv[NB * T];
    for (int i = 0; i < NB * T; i++)
        iv[i] = (i * 5 + 2) % V, tv[i] = (i * 7 + 3) % V;
    LT_OK(ladle_tensor_write(ids, iv));
    LT_OK(ladle_tensor_write(tg, tv));
    ladle_loss_scaler *s = scaler(4096.0, 100);
    for (int step = 0; step < 4; step++) {
        double loss[2];
        for (int k = 0; k < 2; k++) {
            const ladle_tensor *xs[1] = {ids}, *ts[1] = {tg};
            LT_OK(ladle_graph_zero_grad(g[k]));
            LT_OK(ladle_graph_forward(g[k], 1, xs, NULL));
            LT_OK(ladle_graph_loss(g[k], 1, ts, &loss[k]));
            LT_OK(ladle_graph_backward(g[k], 1));
        }
        LT_OK(ladle_optimizer_step(opt[0]));
        LT_OK(ladle_loss_scaler_step(s, opt[1], NULL));
        LT_ASSERT(loss[0] == loss[1], "step %d: losses %.17g, %.17g", step, loss[0], loss[1]);
    }
    int same = 1;
    for (int i = 0; i < ladle_graph_num_params(g[0]); i++) {
        ladle_tensor *a = NULL, *b = NULL;
        LT_OK(ladle_graph_param(g[0], i, NULL, &a, NULL));
        LT_OK(ladle_graph_param(g[1], i, NULL, &b, NULL));
        same &= lt_same_values(a, b);
    }
    LT_ASSERT(same, "GPT parameters differ after 4 scaled steps");
    ladle_loss_scaler_destroy(&s);
    for (int k = 0; k < 2; k++) {
        ladle_optimizer_destroy(&opt[k]);
        ladle_graph_destroy(&g[k]);
    }
    LT_DESTROY(&ids, &tg);
}
END_TEST

START_TEST(refusals)
{
    ladle_loss_scaler_desc d;
    ladle_loss_scaler *s = NULL;
    ladle_comm w = ladle_comm_of(MPI_COMM_WORLD);
    LT_FAILS(ladle_loss_scaler_create(NULL, w, &s), LADLE_ERR_NULL);
    ladle_loss_scaler_desc_init(&d);
    LT_FAILS(ladle_loss_scaler_create(&d, w, NULL), LADLE_ERR_NULL);
    d.init_scale = -1;
    LT_FAILS_SAYING(ladle_loss_scaler_create(&d, w, &s), LADLE_ERR_ARG, "initial scale");
    d.init_scale = INFINITY;
    LT_FAILS(ladle_loss_scaler_create(&d, w, &s), LADLE_ERR_ARG);
    ladle_loss_scaler_desc_init(&d);
    d.growth_factor = 0.5;
    LT_FAILS_SAYING(ladle_loss_scaler_create(&d, w, &s), LADLE_ERR_ARG, "growth factor");
    ladle_loss_scaler_desc_init(&d);
    d.backoff_factor = 1.5;
    LT_FAILS_SAYING(ladle_loss_scaler_create(&d, w, &s), LADLE_ERR_ARG, "backoff");
    ladle_loss_scaler_desc_init(&d);
    d.growth_interval = -3;
    LT_FAILS_SAYING(ladle_loss_scaler_create(&d, w, &s), LADLE_ERR_ARG, "interval");
    ladle_loss_scaler_desc_init(&d);
    LT_FAILS(ladle_loss_scaler_create(&d, ladle_comm_of(MPI_COMM_NULL), &s), LADLE_ERR_ARG);
    d.size = 0;
    LT_FAILS(ladle_loss_scaler_create(&d, w, &s), LADLE_ERR_ARG);
    LT_ASSERT(s == NULL, "a refused create left a scaler");
    /* a zeroed desc with its size means the defaults */
    memset(&d, 0, sizeof d);
    d.size = sizeof d;
    LT_OK(ladle_loss_scaler_create(&d, w, &s));
    LT_ASSERT(ladle_loss_scaler_scale(s) == 65536.0, "default scale %g",
              ladle_loss_scaler_scale(s));
    LT_FAILS(ladle_loss_scaler_set_state(s, 0.0, 0), LADLE_ERR_ARG);
    LT_FAILS(ladle_loss_scaler_set_state(s, 8.0, -1), LADLE_ERR_ARG);
    LT_OK(ladle_loss_scaler_set_state(s, 8.0, 3));
    LT_ASSERT(ladle_loss_scaler_scale(s) == 8.0 && ladle_loss_scaler_good_steps(s) == 3,
              "state not restored");
    LT_FAILS(ladle_loss_scaler_step(s, NULL, NULL), LADLE_ERR_NULL);
    LT_FAILS(ladle_loss_scaler_unscale(NULL, NULL, NULL), LADLE_ERR_NULL);
    LT_FAILS(ladle_network_set_loss_scale(NULL, 2.0), LADLE_ERR_NULL);
    LT_FAILS(ladle_graph_set_loss_scale(NULL, 2.0), LADLE_ERR_NULL);
    LT_ASSERT(ladle_loss_scaler_scale(NULL) == 0 && ladle_loss_scaler_skipped(NULL) == 0,
              "NULL reads");
    LT_OK(ladle_loss_scaler_destroy(&s));
    LT_OK(ladle_loss_scaler_destroy(&s));
    LT_ASSERT(s == NULL, "destroy leaves NULL");
}
END_TEST

START_TEST(scale_refusals)
{
    ladle_lenet_desc d;
    lt_lenet_desc(&d, 2, 12, 1);
    d.sequential = 1;
    ladle_network *net = NULL;
    LT_OK(ladle_lenet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &net));
    LT_FAILS_SAYING(ladle_network_set_loss_scale(net, 0.0), LADLE_ERR_ARG, "loss scale");
    LT_FAILS(ladle_network_set_loss_scale(net, NAN), LADLE_ERR_ARG);
    LT_FAILS(ladle_network_set_loss_scale(net, INFINITY), LADLE_ERR_ARG);
    ladle_network_destroy(&net);
}
END_TEST

LT_SUITE("loss_scale", "core", 120, dynamics, f16_gradients, lenet_same_bits, gpt_same_bits,
         refusals, scale_refusals)
