/* Optimizers against their update rules written out here, schedules, and
 * the sequential container. */
#include <math.h>
#include <stdlib.h>

#include "src/core/half.h"
#include "harness.h"

/* Three steps of an optimizer on p from gradients g_t = (t+1) * g0 + p,
 * next to the same steps by the formulas. */
static void run_steps(const ladle_optimizer_desc *d, const char *what)
{
    int64_t n = 4;
    ladle_tensor *p = lt_tensor(LADLE_F64, 1, &n), *g = lt_tensor(LADLE_F64, 1, &n);
    double rp[4] = {0.5, -1.0, 2.0, 0.25}, rv[4] = {0}, rm[4] = {0}, g0[4] = {0.1, -0.3, 0.2, 1.0};
    for (int i = 0; i < 4; i++)
        lt_set(p, i, rp[i]);
    ladle_optimizer *o = NULL;
    LT_OK(ladle_optimizer_create(d, &o));
    LT_OK(ladle_optimizer_add_param(o, p, g));
    for (int t = 1; t <= 3; t++) {
        for (int i = 0; i < 4; i++)
            lt_set(g, i, t * g0[i] + lt_get(p, i));
        LT_OK(ladle_optimizer_step(o));
        for (int i = 0; i < 4; i++) {
            double gi = t * g0[i] + rp[i];
            if (d->kind == LADLE_OPT_SGD) {
                gi += d->weight_decay * rp[i];
                if (d->momentum > 0) {
                    rv[i] = t == 1 ? gi : d->momentum * rv[i] + (1 - d->dampening) * gi;
                    gi = d->nesterov ? gi + d->momentum * rv[i] : rv[i];
                }
                rp[i] -= d->lr * gi;
            } else {
                if (d->kind == LADLE_OPT_ADAMW)
                    rp[i] *= 1 - d->lr * d->weight_decay;
                else
                    gi += d->weight_decay * rp[i];
                rm[i] = d->beta1 * rm[i] + (1 - d->beta1) * gi;
                rv[i] = d->beta2 * rv[i] + (1 - d->beta2) * gi * gi;
                double mh = rm[i] / (1 - pow(d->beta1, t)), vh = rv[i] / (1 - pow(d->beta2, t));
                rp[i] -= d->lr * mh / (sqrt(vh) + d->eps);
            }
        }
    }
    int ok = ladle_optimizer_steps(o) == 3;
    for (int i = 0; i < 4; i++)
        ok &= fabs(lt_get(p, i) - rp[i]) < 1e-15 * fmax(1, fabs(rp[i]));
    LT_ASSERT(ok, "%s: %.17g vs %.17g", what, lt_get(p, 0), rp[0]);
    ladle_optimizer_destroy(&o);
    ladle_tensor_destroy(&p);
    ladle_tensor_destroy(&g);
}

START_TEST(update_rules)
{
    ladle_optimizer_desc d;
    ladle_optimizer_desc_init(&d, LADLE_OPT_SGD, 0.1);
    run_steps(&d, "sgd");
    d.momentum = 0.9;
    d.dampening = 0.1;
    d.weight_decay = 0.01;
    run_steps(&d, "sgd momentum, dampening, decay");
    d.dampening = 0;
    d.nesterov = 1;
    run_steps(&d, "sgd nesterov");
    ladle_optimizer_desc_init(&d, LADLE_OPT_ADAM, 0.01);
    run_steps(&d, "adam");
    d.weight_decay = 0.1;
    run_steps(&d, "adam with L2");
    ladle_optimizer_desc_init(&d, LADLE_OPT_ADAMW, 0.01);
    LT_ASSERT(d.weight_decay == 0.01, "AdamW's default decay");
    run_steps(&d, "adamw");
}
END_TEST

/* A bf16 or f16 parameter steps through its f32 master: the master must be
 * bit for bit the f32 parameter of the same optimizer fed the same
 * gradients (values of the 2-byte format, so widening them is exact), and
 * the parameter the master rounded to nearest even. */
static void run_master(const ladle_optimizer_desc *d, ladle_dtype half, const char *what)
{
    enum { N = 37, STEPS = 40 };
    int64_t n = N;
    ladle_tensor *p32 = lt_tensor(LADLE_F32, 1, &n), *g32 = lt_tensor(LADLE_F32, 1, &n);
    ladle_tensor *ph = lt_tensor(half, 1, &n), *gh = lt_tensor(half, 1, &n);
    ladle_tensor *back = lt_tensor(LADLE_F32, 1, &n), *round = lt_tensor(half, 1, &n);
    LT_OK(ladle_tensor_fill_random(p32, 11, 0));
    LT_OK(ladle_tensor_convert(ph, p32)); /* the start, a value of the format */
    LT_OK(ladle_tensor_convert(p32, ph));
    ladle_optimizer *o32 = NULL, *oh = NULL;
    LT_OK(ladle_optimizer_create(d, &o32));
    LT_OK(ladle_optimizer_create(d, &oh));
    LT_OK(ladle_optimizer_add_param(o32, p32, g32));
    LT_OK(ladle_optimizer_add_param(oh, ph, gh));
    /* the same 2-byte parameter with its gradient kept in f32 */
    ladle_tensor *pf = lt_tensor(half, 1, &n);
    ladle_optimizer *of = NULL;
    LT_OK(ladle_tensor_copy(pf, ph));
    LT_OK(ladle_optimizer_create(d, &of));
    LT_OK(ladle_optimizer_add_param(of, pf, g32));
    ladle_tensor *m = ladle_optimizer_master(oh, 0);
    LT_ASSERT(m != NULL && ladle_tensor_dtype(m) == LADLE_F32 &&
                  ladle_optimizer_master(o32, 0) == NULL &&
                  ladle_tensor_dtype(ladle_optimizer_state(oh, 0, 0)) == LADLE_F32,
              "%s: an f32 master and f32 states", what);
    for (int t = 0; t < STEPS; t++) {
        LT_OK(ladle_tensor_fill_random(g32, 100 + (uint64_t)t, 0));
        LT_OK(ladle_tensor_convert(gh, g32));
        LT_OK(ladle_tensor_convert(g32, gh));
        LT_OK(ladle_optimizer_step(o32));
        LT_OK(ladle_optimizer_step(oh));
        LT_OK(ladle_optimizer_step(of));
    }
    double *fm = lt_values(ladle_optimizer_master(of, 0)), *om = lt_values(m);
    int same_f = 1;
    for (int i = 0; i < N; i++)
        same_f &= fm[i] == om[i];
    LT_ASSERT(same_f, "%s: the f32-gradient master differs", what);
    free(fm), free(om);
    ladle_optimizer_destroy(&of);
    ladle_tensor_destroy(&pf);
    /* the 2-byte tensors read through f32 (exact) */
    LT_OK(ladle_tensor_convert(back, ph));
    double *want = lt_values(p32), *got = lt_values(m), *par = lt_values(back);
    LT_OK(ladle_tensor_convert(round, p32));
    LT_OK(ladle_tensor_convert(back, round));
    double *rounded = lt_values(back);
    int same = 1, rnd = 1;
    for (int i = 0; i < N; i++)
        same &= want[i] == got[i], rnd &= par[i] == rounded[i];
    LT_ASSERT(same && rnd, "%s: master %.9g vs f32 %.9g (%s), parameter %.9g vs %.9g (%s)",
              what, got[0], want[0], same ? "same" : "differ", par[0], rounded[0],
              rnd ? "same" : "differ");
    free(want), free(got), free(par), free(rounded);
    ladle_optimizer_destroy(&o32);
    ladle_optimizer_destroy(&oh);
    LT_DESTROY(&p32, &g32, &ph, &gh, &back, &round);
}

START_TEST(master_weights_for_2_byte_parameters)
{
    ladle_optimizer_desc d;
    for (int k = 0; k < 2; k++) {
        ladle_dtype half = k ? LADLE_F16 : LADLE_BF16;
        const char *name = ladle_dtype_name(half);
        ladle_optimizer_desc_init(&d, LADLE_OPT_SGD, 2e-3);
        d.momentum = 0.9;
        d.weight_decay = 0.01;
        run_master(&d, half, name);
        ladle_optimizer_desc_init(&d, LADLE_OPT_ADAMW, 1e-3);
        run_master(&d, half, name);
        ladle_optimizer_desc_init(&d, LADLE_OPT_ADAM, 1e-3);
        d.weight_decay = 0.1;
        run_master(&d, half, name);
    }
    /* 40 steps of 5e-4 from 1: each below half of bf16's last bit under 1
     * (2^-9), so a bf16 parameter updated in place would stay 1; the
     * master's sum moves it */
    int64_t one = 1;
    ladle_tensor *p = lt_tensor(LADLE_BF16, 1, &one), *g = lt_tensor(LADLE_BF16, 1, &one);
    LT_OK(ladle_tensor_fill(p, 1.0));
    LT_OK(ladle_tensor_fill(g, 0.5));
    ladle_optimizer *sgd = NULL;
    ladle_optimizer_desc_init(&d, LADLE_OPT_SGD, 1e-3);
    LT_OK(ladle_optimizer_create(&d, &sgd));
    LT_OK(ladle_optimizer_add_param(sgd, p, g));
    float want = 1.0f;
    for (int t = 0; t < 40; t++) {
        LT_OK(ladle_optimizer_step(sgd));
        want = (float)((double)want - 1e-3 * 0.5); /* the slot's rule: in double, stored f32 */
    }
    LT_ASSERT(ladle__f32_to_bf16(1.0f - 5e-4f) == ladle__f32_to_bf16(1.0f) &&
                  lt_get(ladle_optimizer_master(sgd, 0), 0) == want &&
                  lt_get(p, 0) == ladle__bf16_to_f32(ladle__f32_to_bf16(want)) &&
                  lt_get(p, 0) < 1.0,
              "40 small steps: master %.9g (want %.9g), parameter %.9g",
              lt_get(ladle_optimizer_master(sgd, 0), 0), (double)want, lt_get(p, 0));
    ladle_optimizer_destroy(&sgd);
    LT_DESTROY(&p, &g);
    /* two dtypes, and i64, still refused */
    ladle_optimizer *o = NULL;
    ladle_optimizer_desc_init(&d, LADLE_OPT_SGD, 0.1);
    LT_OK(ladle_optimizer_create(&d, &o));
    int64_t n = 3;
    ladle_tensor *b = lt_tensor(LADLE_BF16, 1, &n), *h = lt_tensor(LADLE_F16, 1, &n);
    ladle_tensor *i = lt_tensor(LADLE_I64, 1, &n);
    LT_FAILS_SAYING(ladle_optimizer_add_param(o, b, h), LADLE_ERR_DTYPE, "bf16");
    ladle_tensor *f64 = lt_tensor(LADLE_F64, 1, &n);
    LT_FAILS(ladle_optimizer_add_param(o, b, f64), LADLE_ERR_DTYPE);
    ladle_tensor_destroy(&f64);
    LT_FAILS(ladle_optimizer_add_param(o, i, i), LADLE_ERR_DTYPE);
    LT_ASSERT(ladle_optimizer_num_params(o) == 0, "nothing added");
    ladle_optimizer_destroy(&o);
    LT_DESTROY(&b, &h, &i);
}
END_TEST

START_TEST(schedules)
{
    ladle_lr_schedule s;
    ladle_lr_schedule_init(&s, LADLE_LR_STEP, 1.0);
    s.step_size = 3;
    s.gamma = 0.5;
    LT_ASSERT(ladle_lr_at(&s, 0) == 1 && ladle_lr_at(&s, 2) == 1 && ladle_lr_at(&s, 3) == 0.5 &&
                  ladle_lr_at(&s, 7) == 0.25,
              "step");
    ladle_lr_schedule_init(&s, LADLE_LR_COSINE, 0.1);
    s.total_steps = 10;
    s.min_lr = 0.001;
    s.warmup_steps = 4;
    s.warmup_start = 0.25;
    LT_ASSERT(fabs(ladle_lr_at(&s, 0) - 0.025) < 1e-17 && fabs(ladle_lr_at(&s, 2) - 0.0625) < 1e-17,
              "warm-up");
    LT_ASSERT(ladle_lr_at(&s, 4) == 0.1, "cosine starts at the base");
    LT_ASSERT(fabs(ladle_lr_at(&s, 9) - (0.001 + 0.099 * 0.5)) < 1e-16, "cosine midpoint");
    LT_ASSERT(ladle_lr_at(&s, 14) == 0.001 && ladle_lr_at(&s, 100) == 0.001, "cosine floor");
    ladle_lr_schedule_init(&s, LADLE_LR_CONSTANT, 0.3);
    LT_ASSERT(ladle_lr_at(&s, 1000) == 0.3, "constant");
}
END_TEST

START_TEST(bad_input)
{
    ladle_optimizer_desc d;
    ladle_optimizer *o = NULL;
    ladle_optimizer_desc_init(&d, LADLE_OPT_SGD, -1);
    LT_FAILS(ladle_optimizer_create(&d, &o), LADLE_ERR_ARG);
    ladle_optimizer_desc_init(&d, LADLE_OPT_SGD, 0.1);
    d.nesterov = 1;
    LT_FAILS(ladle_optimizer_create(&d, &o), LADLE_ERR_ARG);
    ladle_optimizer_desc_init(&d, LADLE_OPT_ADAM, 0.1);
    d.beta2 = 1.0;
    LT_FAILS(ladle_optimizer_create(&d, &o), LADLE_ERR_ARG);
    ladle_optimizer_desc_init(&d, LADLE_OPT_ADAM, 0.1);
    LT_OK(ladle_optimizer_create(&d, &o));
    int64_t n2 = 2, n3 = 3;
    ladle_tensor *a = lt_tensor(LADLE_F32, 1, &n2), *b = lt_tensor(LADLE_F32, 1, &n3);
    ladle_tensor *c = lt_tensor(LADLE_F64, 1, &n2);
    LT_FAILS(ladle_optimizer_add_param(o, a, b), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_optimizer_add_param(o, a, c), LADLE_ERR_DTYPE);
    LT_OK(ladle_optimizer_add_param(o, a, a));
    LT_FAILS(ladle_optimizer_add_param(o, a, a), LADLE_ERR_ARG);
    LT_ASSERT(ladle_optimizer_state(o, 0, 1) != NULL && ladle_optimizer_state(o, 1, 0) == NULL,
              "state");
    ladle_optimizer_destroy(&o);
    LT_OK(ladle_optimizer_destroy(&o));
    LT_DESTROY(&a, &b, &c);
}
END_TEST

/* conv -> relu -> max pool -> flatten -> linear */
static ladle_op *small_net(ladle_dtype dt, int64_t batch)
{
    int64_t xs[4] = {batch, 2, 6, 6}, fs[4] = {batch, 3, 3, 3}, ls[2] = {batch, 27};
    ladle_conv_desc cd;
    ladle_conv_desc_init(&cd, 2, 2, 3, 3);
    cd.padding[0] = cd.padding[1] = 1;
    ladle_pool_desc pd;
    ladle_pool_desc_init(&pd, LADLE_POOL_MAX, 2, 2);
    ladle_op *layers[5] = {NULL}, *seq = NULL;
    int64_t cs[4] = {batch, 3, 6, 6};
    LT_OK(ladle_conv_create(&cd, xs, dt, lt_device(), 1, &layers[0]));
    LT_OK(ladle_activation_create(LADLE_TANH, 0, 4, cs, dt, lt_device(), &layers[1]));
    LT_OK(ladle_pool_create(&pd, cs, dt, lt_device(), &layers[2]));
    LT_OK(ladle_flatten_create(4, fs, dt, lt_device(), &layers[3]));
    LT_OK(ladle_linear_create(LT_LINEAR(ls[1], 4, 1, 0), 2, ls, dt, lt_device(), 2,
                              &layers[4]));
    LT_OK(ladle_sequential_create(5, layers, &seq));
    return seq;
}

START_TEST(sequential)
{
    ladle_op *seq = small_net(LADLE_F64, 3);
    LT_ASSERT(ladle_sequential_size(seq) == 5 && ladle_op_num_params(seq) == 4, "4 parameters");
    LT_ASSERT(ladle_op_param(seq, 2) == ladle_op_param(ladle_sequential_layer(seq, 4), 0) &&
                  ladle_op_grad(seq, 3) == ladle_op_grad(ladle_sequential_layer(seq, 4), 1),
              "parameters are the layers'");
    ladle_gradient_result r;
    LT_OK(ladle_gradient_test(seq, 3, 100, &r));
    LT_ASSERT(r.input_error < 1e-6 && r.max_param_error < 1e-6, "chain gradients %.1e %.1e",
              r.input_error, r.max_param_error);
    /* backward_weight before backward is refused */
    ladle_ctx *ctx = NULL;
    ladle_tensor *x = lt_op_tensor(seq, 0), *y = lt_op_tensor(seq, 1);
    LT_OK(ladle_ctx_create(seq, &ctx));
    LT_OK(ladle_layer_forward(seq, ctx, x, y));
    LT_FAILS(ladle_layer_backward_weight(seq, ctx, y), LADLE_ERR_STATE);
    /* training a few steps drives a regression loss down */
    ladle_op *loss = NULL;
    int64_t ys[2] = {3, 4};
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 2, ys,
                            LADLE_F64, lt_device(), &loss));
    ladle_tensor *t = lt_tensor(LADLE_F64, 2, ys), *l = lt_tensor(LADLE_F64, 0, NULL);
    ladle_tensor *dy = lt_op_tensor(seq, 1), *one = lt_tensor(LADLE_F64, 0, NULL);
    ladle_ctx *lctx = NULL;
    LT_OK(ladle_ctx_create(loss, &lctx));
    LT_OK(ladle_tensor_fill_random(x, 8, 0));
    LT_OK(ladle_tensor_fill_random(t, 8, 1));
    LT_OK(ladle_tensor_fill(one, 1));
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, LADLE_OPT_ADAM, 0.01);
    ladle_optimizer *o = NULL;
    LT_OK(ladle_optimizer_create(&od, &o));
    LT_OK(ladle_optimizer_add_op(o, seq));
    double first = 0, last = 0;
    for (int step = 0; step < 60; step++) {
        LT_OK(ladle_optimizer_zero_grad(o));
        LT_OK(ladle_layer_forward(seq, ctx, x, y));
        LT_OK(ladle_loss_forward(loss, lctx, y, t, l));
        LT_OK(ladle_loss_backward(loss, lctx, one, dy));
        LT_OK(ladle_layer_backward(seq, ctx, dy, NULL));
        LT_OK(ladle_layer_backward_weight(seq, ctx, dy));
        LT_OK(ladle_optimizer_step(o));
        if (step == 0)
            first = lt_get(l, 0);
        last = lt_get(l, 0);
    }
    LT_ASSERT(last < 0.2 * first, "loss %g -> %g", first, last);
    ladle_optimizer_destroy(&o);
    ladle_ctx_destroy(&lctx);
    ladle_ctx_destroy(&ctx);
    LT_DESTROY(&x, &y, &t, &l, &dy, &one);
    ladle_op_destroy(&loss);
    ladle_op_destroy(&seq);

    /* a chain of linear layers is linear: its adjoint works */
    int64_t s1[2] = {2, 5}, s2[2] = {2, 3};
    ladle_op *a = NULL, *b = NULL;
    LT_OK(ladle_linear_create(LT_LINEAR(s1[1], 3, 0, 0), 2, s1, LADLE_F64, lt_device(), 1,
                              &a));
    LT_OK(ladle_linear_create(LT_LINEAR(s2[1], 4, 0, 0), 2, s2, LADLE_F64, lt_device(), 2,
                              &b));
    LT_OK(ladle_sequential_create(2, (ladle_op *[]){a, b}, &seq));
    lt_adjoint_ok(seq, 4, "linear chain");
    ladle_op_destroy(&seq);
    /* a broken chain is refused and the layers stay the caller's */
    LT_OK(ladle_linear_create(LT_LINEAR(s1[1], 3, 0, 0), 2, s1, LADLE_F64, lt_device(), 1,
                              &a));
    LT_OK(ladle_linear_create(LT_LINEAR(s1[1], 4, 0, 0), 2, s1, LADLE_F64, lt_device(), 2,
                              &b));
    LT_FAILS(ladle_sequential_create(2, (ladle_op *[]){a, b}, &seq), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_sequential_create(2, (ladle_op *[]){a, a}, &seq), LADLE_ERR_ARG);
    ladle_op_destroy(&a);
    ladle_op_destroy(&b);
}
END_TEST

LT_SUITE("optim", "optim", LT_CHECK_TIMEOUT, update_rules, master_weights_for_2_byte_parameters,
         schedules, bad_input, sequential)
