/* Optimizers (SGD, Adam, AdamW) and learning-rate schedules. Each
 * parameter steps on its own device through the optim_step slot; the
 * optimizer keeps its state tensors there too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/op/op_impl.h"
#include "train/grow.h"

typedef struct slot {
    ladle_tensor *param, *grad;
    ladle_tensor *state[2]; /* on the parameter's device */
    /* a bf16 or f16 parameter's f32 master copy, which the steps update
     * (and round into param); NULL for f32 and f64 parameters */
    ladle_tensor *master;
    const ladle_backend *be;
} slot;

/* the devices' numbers, 0 .. LADLE_GUARDED */
#define N_DEVICES 3

struct ladle_optimizer {
    ladle_optimizer_desc d;
    int64_t steps;
    int n, cap;
    slot *slots;
    /* per device, the 2-byte gradients widened to f32 for a step: one
     * buffer as long as the device's longest such parameter */
    ladle_tensor *wide_grad[N_DEVICES];
    /* the factor the next step multiplies the 2-byte gradients by once
     * widened (a loss scaler's 1 / scale, which those formats could not
     * take in place without losing the small values); 1 otherwise */
    double half_inv;
};

void ladle_optimizer_desc_init(ladle_optimizer_desc *d, ladle_optimizer_kind kind, double lr)
{
    if (!LADLE_DESC_START(d))
        return;
    d->kind = kind;
    d->lr = lr;
    d->beta1 = 0.9;
    d->beta2 = 0.999;
    d->eps = 1e-8;
    d->weight_decay = kind == LADLE_OPT_ADAMW ? 0.01 : 0.0;
}

ladle_status ladle_optimizer_create(const ladle_optimizer_desc *d, ladle_optimizer **out)
{
    ladle_status st = LADLE_OK;
    ladle_optimizer *o = NULL;
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    LADLE_NOT_NULL(out);
    LADLE_CHECK(d->kind >= LADLE_OPT_SGD && d->kind <= LADLE_OPT_ADAMW, LADLE_ERR_ARG,
                "unknown optimizer %d", (int)d->kind);
    LADLE_CHECK(d->lr >= 0 && d->weight_decay >= 0 && d->momentum >= 0 && isfinite(d->lr) &&
                    isfinite(d->weight_decay) && isfinite(d->momentum) &&
                    isfinite(d->dampening),
                LADLE_ERR_ARG,
                "learning rate %g, weight decay %g and momentum %g must be finite and >= 0 "
                "(dampening %g finite)",
                d->lr, d->weight_decay, d->momentum, d->dampening);
    LADLE_CHECK(d->beta1 >= 0 && d->beta1 < 1 && d->beta2 >= 0 && d->beta2 < 1 &&
                    d->eps >= 0 && isfinite(d->eps),
                LADLE_ERR_ARG, "betas %g, %g must lie in [0, 1) and eps >= 0", d->beta1,
                d->beta2);
    LADLE_CHECK(!d->nesterov || (d->momentum > 0 && d->dampening == 0), LADLE_ERR_ARG,
                "Nesterov momentum needs momentum > 0 and no dampening");
    o = ladle__calloc(1, sizeof *o);
    LADLE_CHECK(o != NULL, LADLE_ERR_ALLOC, "out of memory");
    o->d = *d;
    o->half_inv = 1.0;
    *out = o;
fail:
    return st;
}

ladle_status ladle_optimizer_destroy(ladle_optimizer **o)
{
    if (o == NULL || *o == NULL)
        return LADLE_OK;
    for (int i = 0; i < (*o)->n; i++) {
        for (int k = 0; k < 2; k++)
            ladle_tensor_destroy(&(*o)->slots[i].state[k]);
        ladle_tensor_destroy(&(*o)->slots[i].master);
    }
    for (int d = 0; d < N_DEVICES; d++)
        ladle_tensor_destroy(&(*o)->wide_grad[d]);
    ladle__free((*o)->slots);
    ladle__free(*o);
    *o = NULL;
    return LADLE_OK;
}

/* A 2-byte parameter's f32 master, its value now, and the device's widened
 * gradient buffer grown to hold its gradient (a buffer that grows is
 * replaced only once the master exists, so a failure leaves the old one). */
static ladle_status add_master(ladle_optimizer *o, slot *s)
{
    ladle_status st = LADLE_OK;
    const ladle_tensor *p = s->param;
    ladle_tensor *wide = NULL, **have = &o->wide_grad[p->device];
    LADLE_CALL(ladle__tensor_create_as(LADLE_MEM_OPTIM, LADLE_F32, p->device, p->ndim,
                                       p->shape, &s->master));
    LADLE_CALL(ladle_tensor_convert(s->master, p));
    if (s->grad->dtype != LADLE_F32 && (*have == NULL || (*have)->numel < p->numel)) {
        LADLE_CALL(ladle__tensor_create_as(LADLE_MEM_GRADS, LADLE_F32, p->device, 1,
                                           &p->numel, &wide));
        ladle_tensor_destroy(have);
        *have = wide;
    }
fail:
    return st;
}

ladle_status ladle_optimizer_add_param(ladle_optimizer *o, ladle_tensor *param,
                                       ladle_tensor *grad)
{
    ladle_status st = LADLE_OK;
    slot s = {param, grad, {NULL, NULL}, NULL, NULL};
    LADLE_NOT_NULL(o);
    LADLE_NOT_NULL(param);
    LADLE_NOT_NULL(grad);
    int half = ladle__is_half(param->dtype);
    /* a 2-byte parameter's gradient may be kept in f32 (accumulated there
     * across microbatches, as the mixed-precision layers will) */
    int grad_ok = param->dtype == grad->dtype || (half && grad->dtype == LADLE_F32);
    LADLE_CHECK((ladle__is_real(param->dtype) || half) && grad_ok, LADLE_ERR_DTYPE,
                "parameter (%s) and gradient (%s) must share an f32, f64, bf16 or f16 dtype "
                "(or a bf16/f16 parameter an f32 gradient)",
                ladle_dtype_name(param->dtype), ladle_dtype_name(grad->dtype));
    int same = param->ndim == grad->ndim;
    for (int d = 0; same && d < param->ndim; d++)
        same = param->shape[d] == grad->shape[d];
    char a[128], b[128];
    LADLE_CHECK(same, LADLE_ERR_SHAPE, "the parameter is %s but its gradient %s",
                ladle__fmt_shape64(a, sizeof a, param->ndim, param->shape),
                ladle__fmt_shape64(b, sizeof b, grad->ndim, grad->shape));
    LADLE_CHECK(ladle_tensor_is_contiguous(param) && ladle_tensor_is_contiguous(grad),
                LADLE_ERR_ARG, "the parameter and its gradient must be contiguous");
    LADLE_CHECK(param->device == grad->device, LADLE_ERR_DEVICE,
                "the parameter is on %s and its gradient on %s: they must share a device",
                ladle_device_name(param->device), ladle_device_name(grad->device));
    LADLE_CALL(ladle__backend_get(param->device, __func__, &s.be));
    for (int i = 0; i < o->n; i++)
        LADLE_CHECK(o->slots[i].param != param, LADLE_ERR_ARG, "the parameter is added twice");
    int nstate = o->d.kind == LADLE_OPT_SGD ? (o->d.momentum > 0) : 2;
    ladle_dtype sdt = half ? LADLE_F32 : param->dtype;
    for (int k = 0; k < nstate; k++)
        LADLE_CALL(ladle__tensor_create_as(LADLE_MEM_OPTIM, sdt, param->device, param->ndim,
                                           param->shape, &s.state[k]));
    if (half)
        LADLE_CALL(add_master(o, &s));
    slot *p = ladle__grow_int(o->slots, o->n, o->n + 1, &o->cap, sizeof *p, 16);
    LADLE_CHECK(p != NULL, LADLE_ERR_ALLOC, "out of memory");
    o->slots = p;
    o->slots[o->n++] = s;
    return LADLE_OK;
fail:
    ladle_tensor_destroy(&s.state[0]);
    ladle_tensor_destroy(&s.state[1]);
    ladle_tensor_destroy(&s.master);
    return st;
}

ladle_status ladle_optimizer_add_op(ladle_optimizer *o, const ladle_op *op)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(o);
    LADLE_NOT_NULL(op);
    for (int i = 0; i < ladle_op_num_params(op); i++)
        LADLE_CALL(ladle_optimizer_add_param(o, ladle_op_param(op, i), ladle_op_grad(op, i)));
fail:
    return st;
}


ladle_status ladle_optimizer_step(ladle_optimizer *o)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(o);
    int64_t t = ++o->steps;
    for (int i = 0; i < o->n; i++) {
        slot *s = &o->slots[i];
        int64_t n = s->param->numel;
        void *a = s->state[0] ? s->state[0]->data : NULL;
        void *b = s->state[1] ? s->state[1]->data : NULL;
        if (s->master != NULL) {
            /* the step in f32 on the master, from the gradient widened
             * exactly (and unscaled there); then the parameter is the
             * master rounded once */
            const ladle_backend *be = s->be;
            void *g = s->grad->data;
            if (s->grad->dtype != LADLE_F32) {
                g = o->wide_grad[s->param->device]->data;
                LADLE_CALL(be->fn->convert(be, s->grad->dtype, n, s->grad->data, LADLE_F32, g));
                if (o->half_inv != 1.0)
                    LADLE_CALL(be->fn->scal(be, LADLE_F32, n, o->half_inv, g));
            }
            LADLE_CALL(be->fn->optim_step(be, LADLE_F32, &o->d, t, n, s->master->data, g, a, b));
            LADLE_CALL(be->fn->convert(be, LADLE_F32, n, s->master->data, s->param->dtype,
                                       s->param->data));
            continue;
        }
        LADLE_CALL(s->be->fn->optim_step(s->be, s->param->dtype, &o->d, t, n, s->param->data,
                                         s->grad->data, a, b));
    }
fail:
    o->half_inv = 1.0;
    return st;
}

ladle_status ladle__optimizer_grads_finite(ladle_optimizer *o, int *finite)
{
    ladle_status st = LADLE_OK;
    *finite = 1;
    for (int i = 0; i < o->n && *finite; i++) {
        const slot *s = &o->slots[i];
        const ladle_backend *be = s->be;
        ladle_dtype dt = s->grad->dtype;
        int64_t n = s->grad->numel;
        const void *g = s->grad->data;
        if (ladle__is_half(dt)) {
            void *w = o->wide_grad[s->param->device]->data;
            LADLE_CALL(be->fn->convert(be, dt, n, g, LADLE_F32, w));
            g = w;
            dt = LADLE_F32;
        }
        /* the sum of squares in double: not finite exactly when an
         * element is not (or, for f64, the sum overflows) */
        double sq[2] = {0, 0};
        LADLE_CALL(be->fn->dot2(be, dt, n, g, g, sq));
        *finite = isfinite(sq[0]) && isfinite(sq[1]);
    }
fail:
    return st;
}

ladle_status ladle__optimizer_unscale(ladle_optimizer *o, double inv)
{
    ladle_status st = LADLE_OK;
    for (int i = 0; i < o->n; i++) {
        const slot *s = &o->slots[i];
        if (!ladle__is_half(s->grad->dtype))
            LADLE_CALL(s->be->fn->scal(s->be, s->grad->dtype, s->grad->numel, inv,
                                       s->grad->data));
    }
    o->half_inv *= inv;
fail:
    return st;
}

void ladle__optimizer_forget_scale(ladle_optimizer *o) { o->half_inv = 1.0; }

ladle_status ladle_optimizer_zero_grad(ladle_optimizer *o)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(o);
    o->half_inv = 1.0;
    for (int i = 0; i < o->n; i++)
        LADLE_CALL(ladle_tensor_fill(o->slots[i].grad, 0.0));
fail:
    return st;
}

ladle_status ladle_optimizer_set_lr(ladle_optimizer *o, double lr)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(o);
    LADLE_CHECK(lr >= 0 && isfinite(lr), LADLE_ERR_ARG,
                "learning rate %g must be finite and >= 0", lr);
    o->d.lr = lr;
fail:
    return st;
}

double ladle_optimizer_lr(const ladle_optimizer *o) { return o ? o->d.lr : 0.0; }
int64_t ladle_optimizer_steps(const ladle_optimizer *o) { return o ? o->steps : 0; }
int ladle_optimizer_num_params(const ladle_optimizer *o) { return o ? o->n : 0; }

ladle_tensor *ladle__optimizer_param(const ladle_optimizer *o, int i)
{
    return o != NULL && i >= 0 && i < o->n ? o->slots[i].param : NULL;
}

ladle_tensor *ladle_optimizer_state(const ladle_optimizer *o, int i, int k)
{
    if (o == NULL || i < 0 || i >= o->n || k < 0 || k > 1)
        return NULL;
    return o->slots[i].state[k];
}

ladle_tensor *ladle_optimizer_master(const ladle_optimizer *o, int i)
{
    if (o == NULL || i < 0 || i >= o->n)
        return NULL;
    return o->slots[i].master;
}

ladle_status ladle_optimizer_set_steps(ladle_optimizer *o, int64_t steps)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(o);
    LADLE_CHECK(steps >= 0, LADLE_ERR_ARG, "steps %lld is negative", (long long)steps);
    o->steps = steps;
fail:
    return st;
}

void ladle_lr_schedule_init(ladle_lr_schedule *s, ladle_lr_kind kind, double base_lr)
{
    if (s == NULL)
        return;
    memset(s, 0, sizeof *s);
    s->size = sizeof *s;
    s->kind = kind;
    s->base_lr = base_lr;
    s->step_size = 1;
    s->gamma = 0.1;
    s->total_steps = 1;
    s->warmup_start = 0.0;
}

double ladle_lr_at(const ladle_lr_schedule *s, int64_t step)
{
    if (s == NULL || step < 0)
        return 0.0;
    if (s->size < sizeof *s) /* not from ladle_lr_schedule_init: no rate to trust */
        return NAN;
    if (step < s->warmup_steps) {
        double f = (double)step / (double)s->warmup_steps;
        return s->base_lr * (s->warmup_start + (1 - s->warmup_start) * f);
    }
    int64_t t = step - s->warmup_steps;
    switch (s->kind) {
    case LADLE_LR_STEP:
        return s->base_lr * pow(s->gamma, (double)(t / (s->step_size > 0 ? s->step_size : 1)));
    case LADLE_LR_COSINE:
        if (t >= s->total_steps)
            return s->min_lr;
        return s->min_lr + (s->base_lr - s->min_lr) *
                               (1 + cos(3.141592653589793 * (double)t / (double)s->total_steps)) /
                               2;
    default:
        return s->base_lr;
    }
}
