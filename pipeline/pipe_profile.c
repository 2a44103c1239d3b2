/* The profiling pass behind the planner: each layer's forward, input
 * gradient and weight gradient timed on random data (see ladle/pipeline.h). */
#include <stdlib.h>

#include "pipeline/pipe.h"
#include "src/op/op_impl.h"

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
    LADLE_CALL(ladle_tensor_create(xdt, op->be->device, op->x_ndim, op->x_shape, &x));
    if (!op->x_ids)
        LADLE_CALL(
            ladle_tensor_create(op->dtype, op->be->device, op->x_ndim, op->x_shape, &dx));
    LADLE_CALL(ladle_tensor_create(op->dtype, op->be->device, op->y_ndim, op->y_shape, &y));
    LADLE_CALL(
        ladle_tensor_create(op->dtype, op->be->device, op->y_ndim, op->y_shape, &dy));
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

/* ---- what surrounds the compute: boundaries and all-reduces ---- */

/* Layer i's output bytes and parameter elements (in the layer's dtype). */
static void sizes_of(const ladle_op *op, int64_t *out_bytes, int64_t *params)
{
    *out_bytes = op->y_numel * (int64_t)ladle_dtype_size(op->dtype);
    *params = 0;
    for (int q = 0; q < op->nparams; q++)
        *params += op->params[q]->numel;
}

/* Half a ping-pong of `bytes` between ranks 0 and 1 of c (the others wait
 * at the barrier), the median of reps on rank 0. */
static ladle_status one_way(MPI_Comm c, int me, int reps, char *buf, int bytes,
                            double *times, double *out)
{
    ladle_status st = LADLE_OK;
    LADLE_MPI(MPI_Barrier(c));
    for (int r = -2; r < reps && me < 2; r++) {
        double t0 = MPI_Wtime();
        if (me == 0) {
            LADLE_MPI(MPI_Send(buf, bytes, MPI_BYTE, 1, 0, c));
            LADLE_MPI(MPI_Recv(buf, bytes, MPI_BYTE, 1, 0, c, MPI_STATUS_IGNORE));
        } else {
            LADLE_MPI(MPI_Recv(buf, bytes, MPI_BYTE, 0, 0, c, MPI_STATUS_IGNORE));
            LADLE_MPI(MPI_Send(buf, bytes, MPI_BYTE, 0, 0, c));
        }
        if (r >= 0)
            times[r] = (MPI_Wtime() - t0) / 2;
    }
    *out = me == 0 ? median(times, reps) : 0;
fail:
    return st;
}

/* An all-reduce (sum) of count elements of type between ranks 0 and 1
 * (pair: their communicator, MPI_COMM_NULL elsewhere), the slower rank's
 * time, the median of reps on rank 0. */
static ladle_status pair_reduce(MPI_Comm pair, int me, int reps, void *buf, int count,
                                MPI_Datatype type, double *times, double *out)
{
    ladle_status st = LADLE_OK;
    *out = 0;
    for (int r = -2; r < reps && pair != MPI_COMM_NULL; r++) {
        LADLE_MPI(MPI_Barrier(pair));
        double t0 = MPI_Wtime();
        LADLE_MPI(MPI_Allreduce(MPI_IN_PLACE, buf, count, type, MPI_SUM, pair));
        double e = MPI_Wtime() - t0;
        LADLE_MPI(MPI_Allreduce(MPI_IN_PLACE, &e, 1, MPI_DOUBLE, MPI_MAX, pair));
        if (r >= 0)
            times[r] = e;
    }
    if (me == 0)
        *out = median(times, reps);
fail:
    return st;
}

ladle_status ladle_pipe_profile_comm(ladle_comm comm_in, int n, ladle_op *const layers[],
                                     int reps, double cut[], double reduce[],
                                     double *latency)
{
    LADLE_COMM_IN(comm, comm_in);
    ladle_status st = LADLE_OK, local = LADLE_OK;
    MPI_Comm c = MPI_COMM_NULL, pair = MPI_COMM_NULL;
    double *times = NULL, *got = NULL;
    char *buf = NULL;
    int me = 0, size = 1;
    LADLE_CHECK(comm != MPI_COMM_NULL, LADLE_ERR_ARG, "the communicator is MPI_COMM_NULL");
    LADLE_MPI(MPI_Comm_rank(comm, &me));
    LADLE_MPI(MPI_Comm_size(comm, &size));
    /* the arguments, checked on every rank and agreed on below */
    uint64_t h = LADLE_HASH_INIT;
    int64_t most = 8;
    if (layers == NULL || cut == NULL || reduce == NULL || latency == NULL)
        local = ladle__raise(LADLE_ERR_NULL, __func__, "%s is NULL",
                             layers == NULL   ? "layers"
                             : cut == NULL    ? "cut"
                             : reduce == NULL ? "reduce"
                                              : "latency");
    else if (n < 1 || n > 1 << 20 || reps < 1 || reps > 1000)
        local =
            ladle__raise(LADLE_ERR_ARG, __func__,
                         "%d layers and %d repetitions (1 to 2^20 and 1 to 1000)", n, reps);
    for (int i = 0; local == LADLE_OK && i < n; i++) {
        int64_t bytes, params;
        if (layers[i] == NULL || !layers[i]->layer) {
            local = ladle__raise(LADLE_ERR_ARG, __func__, "entry %d is not a layer", i);
            break;
        }
        sizes_of(layers[i], &bytes, &params);
        int64_t pbytes = params * (int64_t)ladle_dtype_size(layers[i]->dtype);
        if (bytes > INT32_MAX || pbytes > INT32_MAX) {
            local = ladle__raise(LADLE_ERR_ARG, __func__,
                                 "layer %d's %s (%lld bytes) is beyond one MPI message", i,
                                 bytes > INT32_MAX ? "output" : "parameters",
                                 (long long)(bytes > INT32_MAX ? bytes : pbytes));
            break;
        }
        most = bytes > most ? bytes : most;
        most = pbytes > most ? pbytes : most;
        h = ladle__hash(h, &bytes, sizeof bytes);
        h = ladle__hash(h, &pbytes, sizeof pbytes);
        h = ladle__hash(h, &layers[i]->dtype, sizeof layers[i]->dtype);
    }
    h = ladle__hash(h, &n, sizeof n);
    h = ladle__hash(h, &reps, sizeof reps);
    if (local == LADLE_OK) {
        times = ladle__calloc((size_t)reps, sizeof(double));
        got = ladle__calloc((size_t)(2 * n + 1), sizeof(double));
        buf = ladle__calloc((size_t)most, 1); /* zeros: every sum stays finite */
        if (times == NULL || got == NULL || buf == NULL)
            local = ladle__raise(LADLE_ERR_ALLOC, __func__, "out of memory");
    }
    LADLE_CALL(ladle__agree(comm, local, h, __func__));
    if (size < 2) { /* one worker: no boundary, no replica */
        for (int i = 0; i < n; i++)
            cut[i] = reduce[i] = 0;
        *latency = 0;
        goto fail;
    }
    /* a private communicator for the traffic, and ranks 0 and 1's own */
    LADLE_MPI(MPI_Comm_dup(comm, &c));
    LADLE_MPI(MPI_Comm_split(c, me < 2 ? 0 : MPI_UNDEFINED, me, &pair));
    double t1, a1, t;
    LADLE_CALL(one_way(c, me, reps, buf, 1, times, &t1));
    for (int i = 0; i + 1 < n; i++) {
        int64_t bytes, params;
        sizes_of(layers[i], &bytes, &params);
        LADLE_CALL(one_way(c, me, reps, buf, (int)bytes, times, &t));
        got[i] = t > t1 ? t - t1 : 0;
    }
    got[n - 1] = 0;
    LADLE_CALL(pair_reduce(pair, me, reps, buf, 1, MPI_DOUBLE, times, &a1));
    got[2 * n] = a1 / 2; /* a two-replica ring takes two steps */
    for (int i = 0; i < n; i++) {
        int64_t bytes, params;
        sizes_of(layers[i], &bytes, &params);
        MPI_Datatype type = layers[i]->dtype == LADLE_F32 ? MPI_FLOAT : MPI_DOUBLE;
        t = 0;
        if (params > 0)
            LADLE_CALL(pair_reduce(pair, me, reps, buf, (int)params, type, times, &t));
        got[n + i] = t > a1 ? t - a1 : 0;
    }
    LADLE_MPI(MPI_Bcast(got, 2 * n + 1, MPI_DOUBLE, 0, c));
    for (int i = 0; i < n; i++)
        cut[i] = got[i], reduce[i] = got[n + i];
    *latency = got[2 * n];
fail:
    if (pair != MPI_COMM_NULL)
        MPI_Comm_free(&pair);
    if (c != MPI_COMM_NULL)
        MPI_Comm_free(&c);
    ladle__free(times);
    ladle__free(got);
    ladle__free(buf);
    return st;
}
