/* Test harness for Check under MPI; see harness.h. */
#include "harness.h"

#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lt_rank = 0, lt_size = 1;

/* The device named by LADLE_TEST_DEVICE ("cpu" when unset), or -1 for a
 * name ladle_device_name gives no device. */
static int device_from_env(const char **name)
{
    const ladle_device all[] = {LADLE_CPU, LADLE_CUDA, LADLE_GUARDED};
    *name = getenv("LADLE_TEST_DEVICE");
    if (*name == NULL || (*name)[0] == '\0')
        *name = "cpu";
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(*name, ladle_device_name(all[i])) == 0)
            return (int)all[i];
    return -1;
}

ladle_device lt_device(void)
{
    /* read once; lt_main has refused an unknown name before any test runs */
    static int device = -2;
    if (device == -2) {
        const char *name;
        device = device_from_env(&name);
    }
    return device < 0 ? LADLE_CPU : (ladle_device)device;
}

/* MPICH's blocking collectives busy-poll, which costs milliseconds per call
 * when ranks outnumber cores; poll a nonblocking one and yield instead. */
static void polite_allreduce_min(const int *in, int *out)
{
    MPI_Request req;
    MPI_Status status;
    int done = 0;
    MPI_Iallreduce(in, out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req);
    for (;;) {
        MPI_Test(&req, &done, &status);
        if (done)
            return;
        sched_yield();
    }
}

void lt_assert_all(int ok, const char *file, int line, const char *expr, const char *fmt,
                   ...)
{
    int all = 0;
    polite_allreduce_min(&ok, &all);
    if (all)
        return;
    if (!ok) {
        char detail[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
        fprintf(stderr, "[rank %d of %d] %s:%d: assertion '%s' failed: %s\n", lt_rank,
                lt_size, file, line, expr, detail);
        fflush(stderr);
    }
    ck_abort_msg("%s:%d: '%s' failed on some rank (see stderr)", file, line, expr);
}

ladle_partition *lt_partition_ranks(int ndim, const int *shape, const int *ranks)
{
    ladle_partition *p = NULL;
    LT_OK(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), ndim, shape, ranks, &p));
    return p;
}

ladle_partition *lt_partition(int ndim, const int *shape, int first)
{
    int n = 1, ranks[4096];
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    for (int r = 0; r < n && r < 4096; r++)
        ranks[r] = first + r;
    return lt_partition_ranks(ndim, shape, ranks);
}

ladle_tensor *lt_tensor(ladle_dtype dtype, int ndim, const int64_t *shape)
{
    ladle_tensor *t = NULL;
    LT_OK(ladle_tensor_create(dtype, lt_device(), ndim, shape, &t));
    return t;
}

ladle_tensor *lt_op_tensor(const ladle_op *op, int which)
{
    int ndim = 0;
    int64_t shape[LADLE_MAX_NDIM];
    if (which)
        ladle_op_y_shape(op, &ndim, shape);
    else
        ladle_op_x_shape(op, &ndim, shape);
    return lt_tensor(ladle_op_dtype(op), ndim, shape);
}

/* A failing element access is a fault of the test itself, on one rank:
 * stop the job rather than leave the other ranks waiting in an assertion. */
void lt_destroy_tensors(size_t n, ladle_tensor **const *handles)
{
    for (size_t i = 0; i < n; i++)
        ladle_tensor_destroy(handles[i]);
}

int lt_ranks_of(int ndim, const int *grid)
{
    int n = 1;
    for (int i = 0; i < ndim; i++)
        n *= grid[i];
    return n;
}

void lt_share_params(ladle_op *dist, ladle_op *seq, uint64_t seed)
{
    for (int i = 0; i < ladle_op_num_params(seq); i++) {
        int64_t off[1];
        LT_OK(ladle_tensor_fill_random(ladle_op_param(seq, i), seed, (uint64_t)i));
        LT_OK(ladle_op_param_shard(dist, i, NULL, NULL, off, NULL));
        lt_box_extract(ladle_op_param(seq, i), off, ladle_op_param(dist, i));
    }
}

void lt_destroy_ops(size_t n, ladle_op **const *handles)
{
    for (size_t i = 0; i < n; i++)
        ladle_op_destroy(handles[i]);
}

void lt_destroy_partitions(size_t n, ladle_partition **const *handles)
{
    for (size_t i = 0; i < n; i++)
        ladle_partition_destroy(handles[i]);
}

static void access_failed(const char *what, int64_t i, ladle_status st)
{
    fprintf(stderr, "[rank %d of %d] %s of element %lld failed: %s: %s\n", lt_rank, lt_size, what,
            (long long)i, ladle_status_name(st), ladle_error_message());
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);
}

double lt_get(const ladle_tensor *t, int64_t i)
{
    double v = 0.0;
    ladle_status st = ladle_tensor_get(t, i, &v);
    if (st != LADLE_OK)
        access_failed("lt_get", i, st);
    return v;
}

void lt_set(ladle_tensor *t, int64_t i, double v)
{
    ladle_status st = ladle_tensor_set(t, i, v);
    if (st != LADLE_OK)
        access_failed("lt_set", i, st);
}

/* A contiguous tensor's values as host doubles (malloc'd), wherever it
 * lives, and back: one transfer each way instead of one per element. */
double *lt_values(const ladle_tensor *t)
{
    int64_t n = ladle_tensor_numel(t);
    size_t es = ladle_dtype_size(ladle_tensor_dtype(t));
    double *v = calloc((size_t)n + 1, sizeof *v);
    char *raw = calloc((size_t)n + 1, es);
    ladle_status st = v && raw ? ladle_tensor_read(t, raw) : LADLE_ERR_ALLOC;
    if (st != LADLE_OK)
        access_failed("reading all", n, st);
    for (int64_t i = 0; i < n; i++) {
        if (ladle_tensor_dtype(t) == LADLE_F32)
            v[i] = ((const float *)raw)[i];
        else if (ladle_tensor_dtype(t) == LADLE_F64)
            v[i] = ((const double *)raw)[i];
        else
            v[i] = (double)((const int64_t *)raw)[i];
    }
    free(raw);
    return v;
}

void lt_store(ladle_tensor *t, const double *v)
{
    int64_t n = ladle_tensor_numel(t);
    size_t es = ladle_dtype_size(ladle_tensor_dtype(t));
    char *raw = calloc((size_t)n + 1, es);
    for (int64_t i = 0; raw && i < n; i++) {
        if (ladle_tensor_dtype(t) == LADLE_F32)
            ((float *)raw)[i] = (float)v[i];
        else if (ladle_tensor_dtype(t) == LADLE_F64)
            ((double *)raw)[i] = v[i];
        else
            ((int64_t *)raw)[i] = (int64_t)v[i];
    }
    ladle_status st = raw ? ladle_tensor_write(t, raw) : LADLE_ERR_ALLOC;
    if (st != LADLE_OK)
        access_failed("writing all", n, st);
    free(raw);
}

void lt_twin_run(ladle_op *ops[2], int ndim, const int64_t *xs, uint64_t seed,
                 double (*xmap)(int64_t i, double v, const void *arg), const void *arg,
                 ladle_tensor *t[2][4], ladle_ctx *ctx[2])
{
    for (int i = 0; i < ladle_op_num_params(ops[0]); i++) {
        double *v = lt_values(ladle_op_param(ops[0], i));
        lt_store(ladle_op_param(ops[1], i), v);
        free(v);
    }
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 4; i++)
            t[k][i] = lt_tensor(ladle_op_dtype(ops[k]), ndim, xs);
    LT_OK(ladle_tensor_fill_random(t[0][0], seed, 0));
    LT_OK(ladle_tensor_fill_random(t[0][2], seed, 1));
    double *v = lt_values(t[0][0]);
    for (int64_t e = 0; xmap && e < ladle_tensor_numel(t[0][0]); e++)
        v[e] = xmap(e, v[e], arg);
    lt_store(t[0][0], v);
    free(v);
    for (int i = 0; i < 3; i += 2) {
        v = lt_values(t[0][i]);
        lt_store(t[1][i], v);
        free(v);
    }
    for (int k = 0; k < 2; k++) {
        LT_OK(ladle_ctx_create(ops[k], &ctx[k]));
        LT_OK(ladle_layer_forward(ops[k], ctx[k], t[k][0], t[k][1]));
        LT_OK(ladle_layer_backward(ops[k], ctx[k], t[k][2], t[k][3]));
        LT_OK(ladle_layer_backward_weight(ops[k], ctx[k], t[k][2]));
    }
}

void lt_twin_free(ladle_op *ops[2], ladle_tensor *t[2][4], ladle_ctx *ctx[2])
{
    for (int k = 0; k < 2; k++) {
        ladle_ctx_destroy(&ctx[k]);
        for (int i = 0; i < 4; i++)
            ladle_tensor_destroy(&t[k][i]);
        ladle_op_destroy(&ops[k]);
    }
}

void lt_adjoint_ok(ladle_op *op, uint64_t seed, const char *what)
{
    ladle_adjoint_result r = {0, 0, 0};
    LT_OK(ladle_adjoint_test(op, seed, &r));
    double tol = ladle_adjoint_tolerance(ladle_op_dtype(op));
    /* a vacuous test (all zeros) proves nothing: demand a non-zero product
     * wherever the op moves any data */
    int nonzero = !ladle_op_active(op) || r.fx_y != 0.0;
    LT_ASSERT(r.mismatch <= tol && nonzero,
              "%s (%s): mismatch %.3e (tolerance %.1e), <Fx,y> = %.17g, <x,F*y> = %.17g",
              what, ladle_dtype_name(ladle_op_dtype(op)), r.mismatch, tol, r.fx_y, r.x_fty);
}

void lt_adjoint_cases(int n, lt_case_make *make, uint64_t seed)
{
    for (int k = 0; k < n; k++)
        for (int t = 0; t < 2; t++) {
            const char *name = NULL;
            ladle_op *op = make(k, t ? LADLE_F32 : LADLE_F64, &name);
            if (op == NULL)
                break;
            lt_adjoint_ok(op, seed + (uint64_t)k, name);
            ladle_op_destroy(&op);
        }
}

int lt_main(int argc, char **argv, Suite *(*make_suite)(void))
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &lt_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &lt_size);
    /* the device the suite runs on: a name ladle knows, with a backend built */
    const char *name;
    int device = device_from_env(&name);
    ladle_tensor *probe = NULL;
    if (device < 0 ||
        ladle_tensor_create(LADLE_F64, (ladle_device)device, 0, NULL, &probe)) {
        if (lt_rank == 0) {
            if (device < 0)
                fprintf(stderr, "LADLE_TEST_DEVICE=%s names no device (cpu, cuda, guarded)\n",
                        name);
            else
                fprintf(stderr, "LADLE_TEST_DEVICE=%s: %s\n", name, ladle_error_message());
        }
        MPI_Finalize();
        return EXIT_FAILURE;
    }
    ladle_tensor_destroy(&probe);
    /* a launcher from another MPI than the build's starts n singletons of
     * one rank each, which would all pass as 1-rank runs */
    const char *want = getenv("LADLE_TEST_RANKS");
    if (want != NULL && atoi(want) != lt_size) {
        fprintf(stderr, "launched as %s ranks, but MPI_COMM_WORLD has %d: is the launcher "
                        "from another MPI than the one this test was built with?\n",
                want, lt_size);
        MPI_Finalize();
        return EXIT_FAILURE;
    }
    SRunner *sr = srunner_create(make_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, lt_rank == 0 ? CK_NORMAL : CK_SILENT);
    int failed = srunner_ntests_failed(sr), any = 0;
    srunner_free(sr);
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any ? EXIT_FAILURE : EXIT_SUCCESS;
}

Suite *lt_suite(const char *name, const char *tcase, int timeout, TCase **tc, size_t ntests,
                const TTest *const *tests)
{
    Suite *s = suite_create(name);
    TCase *c = tcase_create(tcase);
    if (timeout != LT_CHECK_TIMEOUT)
        tcase_set_timeout(c, timeout);
    for (size_t i = 0; i < ntests; i++)
        tcase_add_test(c, tests[i]);
    suite_add_tcase(s, c);
    if (tc != NULL)
        *tc = c;
    return s;
}

/* ---- distributed layers against their sequential twins ---- */

/* Visit the elements of a box: k counts local elements, g is the global
 * linear index. */
static void box_walk(const ladle_tensor *global, const int64_t *offset,
                     const ladle_tensor *local, void (*visit)(int64_t g, int64_t k, void *),
                     void *arg)
{
    int nd = ladle_tensor_ndim(local);
    const int64_t *gs = ladle_tensor_shape(global), *ls = ladle_tensor_shape(local);
    int64_t n = ladle_tensor_numel(local), idx[LADLE_MAX_NDIM] = {0};
    for (int64_t k = 0; k < n; k++) {
        int64_t g = 0;
        for (int d = 0; d < nd; d++)
            g = g * gs[d] + offset[d] + idx[d];
        visit(g, k, arg);
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < ls[d])
                break;
            idx[d] = 0;
        }
    }
}

/* The two tensors' values on the host. */
typedef struct box_arg {
    const double *global;
    double *local;
    double err;
} box_arg;

static void put_visit(int64_t g, int64_t k, void *a)
{
    box_arg *b = a;
    b->local[k] = b->global[g];
}

static void err_visit(int64_t g, int64_t k, void *a)
{
    box_arg *b = a;
    double want = b->global[g], got = b->local[k];
    double e = fabs(got - want) / (1.0 + fabs(want));
    if (!(e <= b->err)) /* NaN counts as an error */
        b->err = e == e ? e : INFINITY;
}

void lt_box_extract(const ladle_tensor *global, const int64_t *offset, ladle_tensor *local)
{
    double *g = lt_values(global), *l = lt_values(local);
    box_arg b = {g, l, 0};
    box_walk(global, offset, local, put_visit, &b);
    lt_store(local, l);
    free(g);
    free(l);
}

double lt_box_error(const ladle_tensor *global, const int64_t *offset,
                    const ladle_tensor *local)
{
    double *g = lt_values(global), *l = lt_values(local);
    box_arg b = {g, l, 0};
    box_walk(global, offset, local, err_visit, &b);
    free(g);
    free(l);
    return b.err;
}

static ladle_tensor *like(const ladle_op *seq, int which)
{
    return lt_op_tensor(seq, which);
}

void lt_equivalent(ladle_op *dist, ladle_op *seq, uint64_t seed, double tol, const char *what)
{
    ladle_tensor *X = like(seq, 0), *Y = like(seq, 1), *dY = like(seq, 1), *dX = like(seq, 0);
    ladle_tensor *x = lt_op_tensor(dist, 0), *y = lt_op_tensor(dist, 1);
    ladle_tensor *dy = lt_op_tensor(dist, 1), *dx = lt_op_tensor(dist, 0);
    int64_t xo[LADLE_MAX_NDIM], yo[LADLE_MAX_NDIM];
    LT_OK(ladle_tensor_fill_random(X, seed, 1));
    LT_OK(ladle_tensor_fill_random(dY, seed, 2));
    LT_OK(ladle_layout_box(ladle_op_x_layout(dist), LADLE_SELF, xo, NULL));
    LT_OK(ladle_layout_box(ladle_op_y_layout(dist), LADLE_SELF, yo, NULL));
    lt_box_extract(X, xo, x);
    lt_box_extract(dY, yo, dy);

    /* the initial weights are the sequential layer's */
    int np = ladle_op_num_params(seq);
    LT_ASSERT(ladle_op_num_params(dist) == np, "%s: %d parameters, the sequential layer has %d",
              what, ladle_op_num_params(dist), np);
    double werr = 0;
    for (int i = 0; i < np && ladle_op_num_params(dist) == np; i++) {
        int64_t off[LADLE_MAX_NDIM];
        LT_OK(ladle_op_param_shard(dist, i, NULL, NULL, off, NULL));
        werr = fmax(werr, lt_box_error(ladle_op_param(seq, i), off, ladle_op_param(dist, i)));
    }
    LT_ASSERT(werr <= tol, "%s: initial weights differ by %.2e", what, werr);

    ladle_ctx *cd = NULL, *cs = NULL;
    LT_OK(ladle_ctx_create(dist, &cd));
    LT_OK(ladle_ctx_create(seq, &cs));
    LT_OK(ladle_op_zero_grad(dist));
    LT_OK(ladle_op_zero_grad(seq));
    LT_OK(ladle_layer_forward(dist, cd, x, y));
    LT_OK(ladle_layer_backward(dist, cd, dy, dx));
    LT_OK(ladle_layer_backward_weight(dist, cd, dy));
    LT_OK(ladle_layer_sync_gradients(dist));
    LT_OK(ladle_layer_forward(seq, cs, X, Y));
    LT_OK(ladle_layer_backward(seq, cs, dY, dX));
    LT_OK(ladle_layer_backward_weight(seq, cs, dY));

    double ey = lt_box_error(Y, yo, y), ex = lt_box_error(dX, xo, dx), eg = 0;
    for (int i = 0; i < np && ladle_op_num_params(dist) == np; i++) {
        int64_t off[LADLE_MAX_NDIM];
        LT_OK(ladle_op_param_shard(dist, i, NULL, NULL, off, NULL));
        eg = fmax(eg, lt_box_error(ladle_op_grad(seq, i), off, ladle_op_grad(dist, i)));
    }
    LT_ASSERT(ey <= tol && ex <= tol && eg <= tol, "%s: y %.2e, dx %.2e, weight gradients %.2e",
              what, ey, ex, eg);
    ladle_ctx_destroy(&cd);
    ladle_ctx_destroy(&cs);
    ladle_tensor_destroy(&X);
    ladle_tensor_destroy(&Y);
    ladle_tensor_destroy(&dX);
    ladle_tensor_destroy(&dY);
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&y);
    ladle_tensor_destroy(&dx);
    ladle_tensor_destroy(&dy);
}

/* 1 when a and b hold the same values, bit for bit. */
static int same_bits(const ladle_tensor *a, const ladle_tensor *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    int64_t n = ladle_tensor_numel(a);
    if (n != ladle_tensor_numel(b))
        return 0;
    double *va = lt_values(a), *vb = lt_values(b);
    int same = memcmp(va, vb, sizeof(double) * (size_t)n) == 0;
    free(va);
    free(vb);
    return same;
}

void lt_same_layer(ladle_op *a, ladle_op *b, uint64_t seed, const char *what)
{
    int np = ladle_op_num_params(a);
    LT_ASSERT(np == ladle_op_num_params(b), "%s: %d and %d parameters", what, np,
              ladle_op_num_params(b));
    int same = 1;
    for (int i = 0; i < np; i++)
        same &= same_bits(ladle_op_param(a, i), ladle_op_param(b, i));
    LT_ASSERT(same, "%s: the initial weights differ", what);
    ladle_tensor *t[2][4];
    ladle_ctx *c[2];
    ladle_op *ops[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        t[k][0] = lt_op_tensor(ops[k], 0);
        t[k][1] = lt_op_tensor(ops[k], 1);
        t[k][2] = lt_op_tensor(ops[k], 1);
        t[k][3] = lt_op_tensor(ops[k], 0);
        LT_OK(ladle_tensor_fill_random(t[k][0], seed, 0));
        LT_OK(ladle_tensor_fill_random(t[k][2], seed, 1));
        LT_OK(ladle_ctx_create(ops[k], &c[k]));
        LT_OK(ladle_op_zero_grad(ops[k]));
        LT_OK(ladle_layer_forward(ops[k], c[k], t[k][0], t[k][1]));
        LT_OK(ladle_layer_backward(ops[k], c[k], t[k][2], t[k][3]));
        LT_OK(ladle_layer_backward_weight(ops[k], c[k], t[k][2]));
        LT_OK(ladle_layer_sync_gradients(ops[k]));
    }
    int sy = same_bits(t[0][1], t[1][1]), sx = same_bits(t[0][3], t[1][3]), sg = 1;
    for (int i = 0; i < np; i++)
        sg &= same_bits(ladle_op_grad(a, i), ladle_op_grad(b, i));
    LT_ASSERT(sy && sx && sg, "%s: the same bits in y %d, dx %d, weight gradients %d", what,
              sy, sx, sg);
    for (int k = 0; k < 2; k++) {
        ladle_ctx_destroy(&c[k]);
        for (int i = 0; i < 4; i++)
            ladle_tensor_destroy(&t[k][i]);
    }
}
