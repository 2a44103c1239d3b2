/* The dot-product (adjoint) test for any operator, and the gradient test of layers. */
#include <math.h>
#include <string.h>

#include "op_impl.h"

double ladle_adjoint_tolerance(ladle_dtype dtype)
{
    return dtype == LADLE_F32 ? 1e-5 : 1e-13;
}

static ladle_status make(const ladle_op *op, int which, ladle_tensor **t)
{
    return ladle_tensor_create(op->dtype, which ? op->y_ndim : op->x_ndim,
                               which ? op->y_shape : op->x_shape, t);
}

/* Add (hi, lo) pairs from every rank in rank order, carrying rounding
 * errors, so every rank gets the same, nearly exact total. */
static ladle_status global_sum2(MPI_Comm comm, const double mine[4], double total[2])
{
    ladle_status st = LADLE_OK;
    int size = 0;
    double *all = NULL;
    LADLE_MPI(MPI_Comm_size(comm, &size));
    all = ladle__calloc((size_t)size * 4, sizeof(double));
    LADLE_CHECK(all != NULL, LADLE_ERR_ALLOC, "out of memory");
    {
        MPI_Request req;
        LADLE_MPI(MPI_Iallgather(mine, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, comm, &req));
        LADLE_MPI(ladle__wait(&req));
    }
    for (int k = 0; k < 2; k++) {
        double s = 0.0, c = 0.0;
        for (int r = 0; r < size; r++)
            for (int h = 0; h < 2; h++) {
                double p = all[4 * r + 2 * k + h];
                double t = s + p, z = t - s;
                c += (s - (t - z)) + (p - z);
                s = t;
            }
        total[k] = s + c;
    }
fail:
    ladle__free(all);
    return st;
}

/* The compensated local inner product of two contiguous tensors. */
static void local_dot2(const ladle_op *op, const ladle_tensor *a, const ladle_tensor *b,
                       double out[2])
{
    out[0] = out[1] = 0.0;
    if (a->numel > 0)
        op->be->dot2(op->dtype, a->numel, a->data, b->data, out);
}

ladle_status ladle_adjoint_test(ladle_op *op, uint64_t seed, ladle_adjoint_result *r)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle_tensor *x = NULL, *y = NULL, *fx = NULL, *fty = NULL;
    double dots[4], sums[2] = {0.0, 0.0};
    int me = 0;

    LADLE_NOT_NULL(op);
    LADLE_NOT_NULL(r);
    r->fx_y = r->x_fty = r->mismatch = 0.0;
    /* a layer is local: its test involves no other rank */
    if (op->comm == MPI_COMM_NULL && !op->layer)
        return LADLE_OK;
    if (op->comm != MPI_COMM_NULL)
        MPI_Comm_rank(op->comm, &me);
    /* every rank allocates, then all agree, so a failure cannot strand peers */
    local = make(op, 0, &x);
    if (local == LADLE_OK)
        local = make(op, 1, &y);
    if (local == LADLE_OK)
        local = make(op, 1, &fx);
    if (local == LADLE_OK)
        local = make(op, 0, &fty);
    if (op->comm != MPI_COMM_NULL)
        LADLE_CALL(ladle__agree(op->comm, local, 0, __func__));
    else
        LADLE_CALL(local);
    LADLE_CALL(ladle_tensor_fill_random(x, seed, 2 * (uint64_t)me));
    LADLE_CALL(ladle_tensor_fill_random(y, seed, 2 * (uint64_t)me + 1));
    LADLE_CALL(ladle_op_forward(op, x, fx));
    LADLE_CALL(ladle_op_adjoint(op, y, fty));
    local_dot2(op, fx, y, &dots[0]);
    local_dot2(op, x, fty, &dots[2]);
    if (op->comm != MPI_COMM_NULL) {
        LADLE_CALL(global_sum2(op->comm, dots, sums));
    } else {
        sums[0] = dots[0] + dots[1];
        sums[1] = dots[2] + dots[3];
    }
    r->fx_y = sums[0];
    r->x_fty = sums[1];
    double scale = fmax(fabs(sums[0]), fabs(sums[1]));
    r->mismatch = scale > 0.0 ? fabs(sums[0] - sums[1]) / scale : 0.0;
fail:
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&y);
    ladle_tensor_destroy(&fx);
    ladle_tensor_destroy(&fty);
    return st;
}

/* L = <f(x), w> with the layer's forward, no ctx, replaying step. */
static ladle_status projected(ladle_op *op, const ladle_tensor *x, ladle_tensor *y,
                              const ladle_tensor *w, uint64_t step, double *value)
{
    ladle_status st = LADLE_OK;
    double pair[2];
    op->step = step;
    LADLE_CALL(ladle_layer_forward(op, NULL, x, y));
    op->be->dot2(op->dtype, y->numel, y->data, w->data, pair);
    *value = pair[0] + pair[1];
fail:
    return st;
}

static double get_elem(const ladle_tensor *t, int64_t i)
{
    return t->dtype == LADLE_F32 ? ((float *)t->data)[i] : ((double *)t->data)[i];
}

static void set_elem(ladle_tensor *t, int64_t i, double v)
{
    if (t->dtype == LADLE_F32)
        ((float *)t->data)[i] = (float)v;
    else
        ((double *)t->data)[i] = v;
}

/* Compare finite differences over sampled entries of `perturbed` (x or a
 * parameter) with the analytic gradient `grad`. */
static ladle_status compare(ladle_op *op, ladle_tensor *perturbed, const ladle_tensor *grad,
                            const ladle_tensor *x, ladle_tensor *y, const ladle_tensor *w,
                            uint64_t step, int samples, uint64_t seed, double *worst)
{
    ladle_status st = LADLE_OK;
    int64_t n = perturbed->numel;
    double gmax = 0.0;
    for (int64_t i = 0; i < n; i++)
        gmax = fmax(gmax, fabs(get_elem(grad, i)));
    *worst = 0.0;
    int64_t count = n < samples ? n : samples;
    for (int64_t k = 0; k < count; k++) {
        int64_t i = n <= samples ? k
                                 : (int64_t)(ladle__random_bits(seed, 99, (uint64_t)k) %
                                             (uint64_t)n);
        double v = get_elem(perturbed, i), lp, lm;
        double h = 1e-6 * fmax(1.0, fabs(v));
        set_elem(perturbed, i, v + h);
        LADLE_CALL(projected(op, x, y, w, step, &lp));
        set_elem(perturbed, i, v - h);
        LADLE_CALL(projected(op, x, y, w, step, &lm));
        set_elem(perturbed, i, v);
        double fd = (lp - lm) / (2 * h), an = get_elem(grad, i);
        double scale = fmax(fmax(fabs(fd), fabs(an)), 1e-3 * gmax);
        if (scale > 0)
            *worst = fmax(*worst, fabs(fd - an) / scale);
    }
fail:
    return st;
}

ladle_status ladle_gradient_test(ladle_op *op, uint64_t seed, int samples,
                                 ladle_gradient_result *r)
{
    ladle_status st = LADLE_OK;
    ladle_tensor *x = NULL, *y = NULL, *w = NULL, *dx = NULL, *grads[LADLE_MAX_PARAMS] = {0};
    ladle_ctx *ctx = NULL;
    LADLE_NOT_NULL(op);
    LADLE_NOT_NULL(r);
    LADLE_CHECK(op->layer, LADLE_ERR_ARG, "the %s op is not a layer", op->vt->name);
    memset(r, 0, sizeof *r);
    LADLE_CALL(make(op, 0, &x));
    LADLE_CALL(make(op, 1, &y));
    LADLE_CALL(make(op, 1, &w));
    LADLE_CALL(make(op, 0, &dx));
    LADLE_CALL(ladle_tensor_fill_random(x, seed, 0));
    LADLE_CALL(ladle_tensor_fill_random(w, seed, 1));
    LADLE_CALL(ladle_ctx_create(op, &ctx));
    uint64_t step = op->step;
    LADLE_CALL(ladle_layer_forward(op, ctx, x, y));
    LADLE_CALL(ladle_layer_backward(op, ctx, w, dx));
    LADLE_CALL(ladle_op_zero_grad(op));
    LADLE_CALL(ladle_layer_backward_weight(op, ctx, w));
    r->nparams = op->nparams;
    for (int p = 0; p < op->nparams; p++) {
        LADLE_CALL(ladle_tensor_create(op->dtype, op->grads[p]->ndim, op->grads[p]->shape,
                                       &grads[p]));
        LADLE_CALL(ladle_tensor_copy(grads[p], op->grads[p]));
    }
    LADLE_CALL(compare(op, x, dx, x, y, w, step, samples, seed, &r->input_error));
    for (int p = 0; p < op->nparams; p++)
        LADLE_CALL(compare(op, op->params[p], grads[p], x, y, w, step, samples, seed + 1 + p,
                           &r->param_error[p]));
    op->step = step + 1;
fail:
    ladle_ctx_destroy(&ctx);
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&y);
    ladle_tensor_destroy(&w);
    ladle_tensor_destroy(&dx);
    for (int p = 0; p < LADLE_MAX_PARAMS; p++)
        ladle_tensor_destroy(&grads[p]);
    return st;
}
