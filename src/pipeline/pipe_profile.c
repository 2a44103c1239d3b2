/* The profiling pass behind the planner: each layer's forward, input
 * gradient and weight gradient timed on random data (see ladle/pipeline.h). */
#include <stdlib.h>

#include "src/op/op_impl.h"
#include "src/pipeline/pipe.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

/* The time now, once the device has finished what was queued: on a GPU a
 * layer's calls return before their kernels have run. */
static ladle_status now(const ladle_op *op, double *t)
{
    ladle_status st = op->be->async ? op->be->fn->synchronize(op->be) : LADLE_OK;
    *t = MPI_Wtime();
    return st;
}

/* One layer: reps timed rounds after one untimed (first touch). */
static ladle_status profile_one(ladle_op *op, int reps, double *times, double *f, double *b,
                                double *w)
{
    ladle_status st = LADLE_OK;
    ladle_tensor *x = NULL, *y = NULL, *dy = NULL, *dx = NULL;
    ladle_ctx *ctx = NULL;
    /* a layer that takes token ids gets ids 0 (valid for every vocabulary)
     * and no dx */
    ladle_dtype xdt = op->x_ids ? LADLE_I64 : op->dtype;
    LADLE_CALL(ladle_tensor_create_on(xdt, op->be->device, op->x_ndim, op->x_shape, &x));
    if (!op->x_ids)
        LADLE_CALL(ladle_tensor_create_on(op->dtype, op->be->device, op->x_ndim, op->x_shape,
                                          &dx));
    LADLE_CALL(ladle_tensor_create_on(op->dtype, op->be->device, op->y_ndim, op->y_shape, &y));
    LADLE_CALL(ladle_tensor_create_on(op->dtype, op->be->device, op->y_ndim, op->y_shape, &dy));
    LADLE_CALL(ladle_ctx_create(op, &ctx));
    if (op->x_ids)
        LADLE_CALL(ladle_tensor_fill(x, 0));
    else
        LADLE_CALL(ladle_tensor_fill_random(x, 1, 0));
    LADLE_CALL(ladle_tensor_fill_random(dy, 2, 0));
    for (int r = -1; r < reps; r++) {
        double t0, t1, t2, t3;
        LADLE_CALL(now(op, &t0));
        LADLE_CALL(ladle_layer_forward(op, ctx, x, y));
        LADLE_CALL(now(op, &t1));
        LADLE_CALL(ladle_layer_backward(op, ctx, dy, dx));
        LADLE_CALL(now(op, &t2));
        LADLE_CALL(ladle_layer_backward_weight(op, ctx, dy));
        LADLE_CALL(now(op, &t3));
        if (r >= 0) {
            times[r] = t1 - t0;
            times[reps + r] = t2 - t1;
            times[2 * reps + r] = t3 - t2;
        }
    }
    *f = median(times, reps);
    *b = median(times + reps, reps);
    *w = median(times + 2 * reps, reps);
    /* the weight gradients this pass accumulated are not the caller's */
    LADLE_CALL(ladle_op_zero_grad(op));
fail:
    ladle_ctx_destroy(&ctx);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&dx);
    ladle_tensor_destroy(&y), ladle_tensor_destroy(&dy);
    return st;
}

ladle_status ladle_pipe_profile(int n, ladle_op *const layers[], int reps, double f[],
                                double b[], double w[])
{
    ladle_status st = LADLE_OK;
    double *times = NULL;
    LADLE_NOT_NULL(layers);
    LADLE_NOT_NULL(f);
    LADLE_NOT_NULL(b);
    LADLE_NOT_NULL(w);
    LADLE_CHECK(n >= 1 && n <= 1 << 20 && reps >= 1 && reps <= 1000, LADLE_ERR_ARG,
                "%d layers and %d repetitions (1 to 2^20 and 1 to 1000)", n, reps);
    for (int i = 0; i < n; i++)
        LADLE_CHECK(layers[i] != NULL && layers[i]->layer, LADLE_ERR_ARG,
                    "entry %d is not a layer", i);
    /* the medians go to f, b and w only once every layer has been timed */
    times = ladle__calloc((size_t)(3 * reps + 3 * n), sizeof(double));
    LADLE_CHECK(times != NULL, LADLE_ERR_ALLOC, "out of memory");
    double *got = times + 3 * reps;
    for (int i = 0; i < n; i++)
        LADLE_CALL(
            profile_one(layers[i], reps, times, &got[i], &got[n + i], &got[2 * n + i]));
    for (int i = 0; i < n; i++)
        f[i] = got[i], b[i] = got[n + i], w[i] = got[2 * n + i];
fail:
    ladle__free(times);
    return st;
}
