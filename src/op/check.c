/* The dot-product (adjoint) test for any operator, and the gradient test of layers. */
#include <math.h>
#include <string.h>

#include "src/op/op_impl.h"

double ladle_adjoint_tolerance(ladle_dtype dtype)
{
    return dtype == LADLE_F32 ? 1e-5 : 1e-13;
}

static ladle_status make(const ladle_op *op, int which, ladle_tensor **t)
{
    return ladle_tensor_create(op->dtype, op->be->device, which ? op->y_ndim : op->x_ndim,
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
static ladle_status local_dot2(const ladle_op *op, const ladle_tensor *a,
                               const ladle_tensor *b, double out[2])
{
    out[0] = out[1] = 0.0;
    if (a->numel > 0)
        return op->be->fn->dot2(op->be, op->dtype, a->numel, a->data, b->data, out);
    return LADLE_OK;
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
    LADLE_CALL(local_dot2(op, fx, y, &dots[0]));
    LADLE_CALL(local_dot2(op, x, fty, &dots[2]));
    if (op->comm != MPI_COMM_NULL) {
        LADLE_CALL(global_sum2(op->comm, dots, sums));
    } else {
        sums[0] = dots[0] + dots[1];
        sums[1] = dots[2] + dots[3];
    }
    r->fx_y = sums[0];
    r->x_fty = sums[1];
    /* fmax would drop a NaN, and two NaN sums would pass as a mismatch of 0:
     * an operator that makes non-finite values has not passed the test */
    if (!isfinite(sums[0]) || !isfinite(sums[1])) {
        r->mismatch = NAN;
        LADLE_CHECK(0, LADLE_ERR_NUMERIC,
                    "<F x, y> = %g and <x, F* y> = %g: the %s op made non-finite values",
                    sums[0], sums[1], op->vt->name);
    }
    double scale = fmax(fabs(sums[0]), fabs(sums[1]));
    r->mismatch = scale > 0.0 ? fabs(sums[0] - sums[1]) / scale : 0.0;
fail:
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&y);
    ladle_tensor_destroy(&fx);
    ladle_tensor_destroy(&fty);
    return st;
}

/* L = <f(x), w> with the layer's forward and no ctx, which leaves the state
 * of stochastic layers (the dropout step) alone. */
static ladle_status projected(ladle_op *op, const ladle_tensor *x, ladle_tensor *y,
                              const ladle_tensor *w, double *value)
{
    ladle_status st = LADLE_OK;
    double pair[2];
    LADLE_CALL(ladle_layer_forward(op, NULL, x, y));
    LADLE_CALL(op->be->fn->dot2(op->be, op->dtype, y->numel, y->data, w->data, pair));
    *value = pair[0] + pair[1];
fail:
    return st;
}

/* The sampled entries of a tensor: all of them when there are few. */
static int64_t sample_count(const ladle_tensor *t, int samples)
{
    return t->numel < samples ? t->numel : samples;
}

static int64_t sample_index(const ladle_tensor *t, int samples, uint64_t seed, int64_t k)
{
    if (t->numel <= samples)
        return k;
    return (int64_t)(ladle__random_bits(seed, 99, (uint64_t)k) % (uint64_t)t->numel);
}

/* Central differences of L over the sampled entries of `perturbed`. */
static ladle_status differences(ladle_op *op, ladle_tensor *perturbed, const ladle_tensor *x,
                                ladle_tensor *y, const ladle_tensor *w, int samples,
                                uint64_t seed, double *fd)
{
    ladle_status st = LADLE_OK;
    for (int64_t k = 0; k < sample_count(perturbed, samples); k++) {
        int64_t i = sample_index(perturbed, samples, seed, k);
        double v = 0, lp, lm;
        LADLE_CALL(ladle_tensor_get(perturbed, i, &v));
        double h = 1e-6 * fmax(1.0, fabs(v));
        LADLE_CALL(ladle_tensor_set(perturbed, i, v + h));
        LADLE_CALL(projected(op, x, y, w, &lp));
        LADLE_CALL(ladle_tensor_set(perturbed, i, v - h));
        LADLE_CALL(projected(op, x, y, w, &lm));
        LADLE_CALL(ladle_tensor_set(perturbed, i, v));
        fd[k] = (lp - lm) / (2 * h);
    }
fail:
    return st;
}

/* The worst relative error of the analytic gradient against fd. */
static ladle_status worst_error(const ladle_op *op, const ladle_tensor *grad, const double *fd,
                                int samples, uint64_t seed, double *worst)
{
    ladle_status st = LADLE_OK;
    double gmax = 0.0;
    *worst = 0.0;
    LADLE_CALL(op->be->fn->abs_max(op->be, grad->dtype, grad->numel, grad->data, &gmax));
    for (int64_t k = 0; k < sample_count(grad, samples); k++) {
        double an = 0;
        LADLE_CALL(ladle_tensor_get(grad, sample_index(grad, samples, seed, k), &an));
        if (!isfinite(an) || !isfinite(fd[k])) {
            *worst = NAN; /* fmax would hide it */
            break;
        }
        double scale = fmax(fmax(fabs(fd[k]), fabs(an)), 1e-3 * gmax);
        if (scale > 0)
            *worst = fmax(*worst, fabs(fd[k] - an) / scale);
    }
fail:
    return st;
}

ladle_status ladle_gradient_test(ladle_op *op, uint64_t seed, int samples,
                                 ladle_gradient_result *r)
{
    ladle_status st = LADLE_OK;
    ladle_tensor *x = NULL, *y = NULL, *w = NULL, *dx = NULL;
    double *fd = NULL;
    ladle_ctx *ctx = NULL;
    LADLE_NOT_NULL(op);
    LADLE_NOT_NULL(r);
    LADLE_CHECK(op->layer, LADLE_ERR_ARG, "the %s op is not a layer", op->vt->name);
    LADLE_CHECK(samples >= 1, LADLE_ERR_ARG, "samples must be at least 1");
    memset(r, 0, sizeof *r);
    r->nparams = ladle_op_num_params(op);
    LADLE_CALL(make(op, 0, &x));
    LADLE_CALL(make(op, 1, &y));
    LADLE_CALL(make(op, 1, &w));
    LADLE_CALL(make(op, 0, &dx));
    LADLE_CALL(ladle_tensor_fill_random(x, seed, 0));
    LADLE_CALL(ladle_tensor_fill_random(w, seed, 1));
    fd = ladle__calloc((size_t)samples * (size_t)(1 + r->nparams), sizeof(double));
    LADLE_CHECK(fd != NULL, LADLE_ERR_ALLOC, "out of memory");
    /* differences first: forwards without a ctx keep a dropout's step, so
     * the forward with a ctx below sees the very same masks */
    LADLE_CALL(differences(op, x, x, y, w, samples, seed, fd));
    for (int p = 0; p < r->nparams; p++)
        LADLE_CALL(differences(op, ladle_op_param(op, p), x, y, w, samples, seed + 1 + p,
                               fd + (size_t)samples * (size_t)(1 + p)));
    LADLE_CALL(ladle_ctx_create(op, &ctx));
    LADLE_CALL(ladle_layer_forward(op, ctx, x, y));
    LADLE_CALL(ladle_layer_backward(op, ctx, w, dx));
    LADLE_CALL(ladle_op_zero_grad(op));
    LADLE_CALL(ladle_layer_backward_weight(op, ctx, w));
    LADLE_CALL(worst_error(op, dx, fd, samples, seed, &r->input_error));
    int bad = isnan(r->input_error);
    for (int p = 0; p < r->nparams; p++) {
        double e = 0;
        LADLE_CALL(worst_error(op, ladle_op_grad(op, p), fd + (size_t)samples * (size_t)(1 + p),
                               samples, seed + 1 + p, &e));
        if (p < 4)
            r->param_error[p] = e;
        r->max_param_error = isnan(e) ? e : fmax(r->max_param_error, e);
        bad |= isnan(e);
    }
    LADLE_CHECK(!bad, LADLE_ERR_NUMERIC,
                "the %s layer's gradients or differences are not finite (errors: input %g, "
                "parameters %g)", op->vt->name, r->input_error, r->max_param_error);
fail:
    ladle_ctx_destroy(&ctx);
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&y);
    ladle_tensor_destroy(&w);
    ladle_tensor_destroy(&dx);
    ladle__free(fd);
    return st;
}

double ladle_gradient_result_param_error(const ladle_gradient_result *r, int i)
{
    int held = (int)(sizeof r->param_error / sizeof r->param_error[0]);
    if (r == NULL || i < 0 || i >= r->nparams || i >= held)
        return NAN;
    return r->param_error[i];
}
