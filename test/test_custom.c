/* Custom ops: the user's linear operators pass the adjoint test and a wrong
 * adjoint fails it; the user's nonlinear layer passes the gradient test and
 * a wrong backward fails it; failing callbacks, bad descriptors and the
 * user pointer's destructor. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* ---- a user's linear op: y = A x, A an m x n random matrix, and a
 * distributed one, y = B(A x), A on rank 0 and B a broadcast to all ranks ---- */

typedef struct mat {
    int64_t m, n;
    double *a;      /* m x n, row-major */
    double *hx, *hy; /* host scratch, allocated at creation */
    int wrong;      /* the adjoint is off in one entry */
    int fail_rank;  /* the forward fails on this world rank (-1: never) */
    int say_why;    /* ... and says why */
    int *destroyed; /* counts the destructor's calls */
    ladle_op *bcast; /* distributed: B, and A x on the root */
    ladle_tensor *ax, *dax;
} mat;

static mat *mat_new(int64_t m, int64_t n, uint64_t seed)
{
    mat *u = calloc(1, sizeof *u);
    u->m = m;
    u->n = n;
    u->a = malloc(sizeof(double) * (size_t)(m * n));
    u->hx = malloc(sizeof(double) * (size_t)n);
    u->hy = malloc(sizeof(double) * (size_t)m);
    for (int64_t i = 0; i < m * n; i++)
        u->a[i] = sin(1.0 + (double)seed * 7.3 + (double)i * 0.37);
    u->fail_rank = -1;
    return u;
}

static void mat_free(void *p)
{
    mat *u = p;
    if (u->destroyed)
        (*u->destroyed)++;
    ladle_op_destroy(&u->bcast);
    LT_DESTROY(&u->ax, &u->dax);
    free(u->a);
    free(u->hx);
    free(u->hy);
    free(u);
}

/* hy = A hx, or hx = A^T hy (the wrong one perturbs an entry) */
static void apply(mat *u, int transpose)
{
    if (!transpose) {
        for (int64_t i = 0; i < u->m; i++) {
            double s = 0;
            for (int64_t j = 0; j < u->n; j++)
                s += u->a[i * u->n + j] * u->hx[j];
            u->hy[i] = s;
        }
        return;
    }
    for (int64_t j = 0; j < u->n; j++) {
        double s = 0;
        for (int64_t i = 0; i < u->m; i++)
            s += (u->a[i * u->n + j] + (u->wrong && i == 0 && j == 0 ? 1e-3 : 0)) * u->hy[i];
        u->hx[j] = s;
    }
}

static int fails_here(const mat *u)
{
    if (u->fail_rank != lt_rank)
        return 0;
    return u->say_why ? ladle_custom_fail("sensor offline") : 7;
}

static int mat_forward(void *user, const ladle_tensor *x, ladle_tensor *y, void *saved)
{
    mat *u = user;
    if (saved != NULL)
        return ladle_custom_fail("a linear op called outside a layer context got scratch");
    if (ladle_tensor_read(x, u->hx) || (apply(u, 0), ladle_tensor_write(y, u->hy)))
        return ladle_custom_fail(ladle_error_message());
    return fails_here(u);
}

static int mat_adjoint(void *user, const ladle_tensor *dy, ladle_tensor *dx, void *saved)
{
    mat *u = user;
    (void)saved;
    if (ladle_tensor_read(dy, u->hy) || (apply(u, 1), ladle_tensor_write(dx, u->hx)))
        return ladle_custom_fail(ladle_error_message());
    return 0;
}

/* Distributed: A on the root's block, then ladle's broadcast. A failure is
 * reported after the broadcast, so the peers are never left waiting. */
static int dmat_forward(void *user, const ladle_tensor *x, ladle_tensor *y, void *saved)
{
    mat *u = user;
    (void)saved;
    if (ladle_tensor_numel(x) > 0 &&
        (ladle_tensor_read(x, u->hx) || (apply(u, 0), ladle_tensor_write(u->ax, u->hy))))
        return ladle_custom_fail(ladle_error_message());
    if (ladle_op_forward(u->bcast, u->ax, y))
        return ladle_custom_fail(ladle_error_message());
    return fails_here(u);
}

static int dmat_adjoint(void *user, const ladle_tensor *dy, ladle_tensor *dx, void *saved)
{
    mat *u = user;
    (void)saved;
    if (ladle_op_adjoint(u->bcast, dy, u->dax))
        return ladle_custom_fail(ladle_error_message());
    if (ladle_tensor_numel(dx) > 0 &&
        (ladle_tensor_read(u->dax, u->hy) || (apply(u, 1), ladle_tensor_write(dx, u->hx))))
        return ladle_custom_fail(ladle_error_message());
    return 0;
}

static void local_desc(ladle_custom_desc *d, mat *u, const int64_t *xs, const int64_t *ys)
{
    ladle_custom_desc_init(d);
    d->name = "user matrix";
    d->device = lt_device();
    d->x_ndim = 1;
    d->x_shape = xs;
    d->y_ndim = 1;
    d->y_shape = ys;
    d->linear = 1;
    d->forward = mat_forward;
    d->adjoint = mat_adjoint;
    d->user = u;
    d->destroy = mat_free;
}

static double mismatch(ladle_op *op)
{
    ladle_adjoint_result r;
    LT_OK(ladle_adjoint_test(op, 5, &r));
    return r.mismatch;
}

START_TEST(local_linear_adjoint)
{
    int destroyed = 0;
    int64_t xs[1] = {7}, ys[1] = {5};
    mat *u = mat_new(5, 7, 1);
    u->destroyed = &destroyed;
    ladle_custom_desc d;
    local_desc(&d, u, xs, ys);
    ladle_op *op = NULL;
    LT_OK(ladle_custom_create(&d, &op));
    LT_ASSERT(ladle_op_kind_of(op) == LADLE_OP_CUSTOM &&
                  strcmp(ladle_op_name(op), "user matrix") == 0 &&
                  strcmp(ladle_op_kind_name(LADLE_OP_CUSTOM), "custom") == 0,
              "kind %d, name %s", (int)ladle_op_kind_of(op), ladle_op_name(op));
    lt_adjoint_ok(op, 3, "a user's matrix");
    /* y = A x checked against the matrix itself */
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    LT_OK(ladle_tensor_fill_random(x, 9, 0));
    LT_OK(ladle_op_forward(op, x, y));
    double err = 0;
    for (int i = 0; i < 5; i++) {
        double s = 0;
        for (int j = 0; j < 7; j++)
            s += sin(1.0 + 7.3 + (double)(i * 7 + j) * 0.37) * lt_get(x, j);
        err = fmax(err, fabs(s - lt_get(y, i)));
    }
    LT_ASSERT(err < 1e-14, "y = A x: error %.2e", err);
    LT_DESTROY(&x, &y);
    /* the wrong adjoint is caught */
    u->wrong = 1;
    double bad = mismatch(op);
    LT_ASSERT(bad > 1e-8, "a wrong adjoint passed: mismatch %.3e", bad);
    LT_ASSERT(destroyed == 0, "destroyed %d times while alive", destroyed);
    LT_OK(ladle_op_destroy(&op));
    LT_ASSERT(destroyed == 1 && op == NULL, "destroy called %d times", destroyed);
    LT_OK(ladle_op_destroy(&op));
    LT_ASSERT(destroyed == 1, "destroy called again on a NULL op");
}
END_TEST

/* The distributed op F = B A over layouts: x a block of n on rank 0, y a
 * block of m on every rank. */
static ladle_op *dist_op(mat *u, ladle_partition **pr, ladle_partition **pa, int *destroyed)
{
    int one = 1, all = lt_size;
    *pr = lt_partition(1, &one, 0);
    *pa = lt_partition(1, &all, 0);
    ladle_layout *lx = NULL, *ly = NULL;
    LT_OK(ladle_layout_create_block(*pr, 1, &u->n, &lx));
    LT_OK(ladle_layout_create_block(*pa, 1, &u->m, &ly));
    LT_OK(ladle_broadcast_create(LT_BCAST(1, &u->m, 0), *pr, *pa, LADLE_F64, lt_device(),
                                 &u->bcast));
    u->ax = lt_op_tensor(u->bcast, 0);
    u->dax = lt_op_tensor(u->bcast, 0);
    u->destroyed = destroyed;
    ladle_custom_desc d;
    ladle_custom_desc_init(&d);
    d.name = "user broadcast";
    d.device = lt_device();
    d.x_layout = lx;
    d.y_layout = ly;
    d.linear = 1;
    d.forward = dmat_forward;
    d.adjoint = dmat_adjoint;
    d.user = u;
    d.destroy = mat_free;
    ladle_op *op = NULL;
    LT_OK(ladle_custom_create(&d, &op));
    ladle_layout_destroy(&lx);
    ladle_layout_destroy(&ly);
    return op;
}

START_TEST(distributed_linear_adjoint)
{
    int destroyed = 0;
    ladle_partition *pr = NULL, *pa = NULL;
    mat *u = mat_new(6, 4, 2);
    ladle_op *op = dist_op(u, &pr, &pa, &destroyed);
    lt_adjoint_ok(op, 11, "a user's matrix composed with a broadcast");
    u->wrong = 1;
    double bad = mismatch(op);
    LT_ASSERT(bad > 1e-8, "a wrong distributed adjoint passed: mismatch %.3e", bad);
    u->wrong = 0;
    /* a forward that fails on the last rank fails on every rank, with its reason */
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    u->fail_rank = lt_size - 1;
    u->say_why = 1;
    ladle_status st = ladle_op_forward(op, x, y);
    LT_ASSERT(st == LADLE_ERR_CALLBACK && strstr(ladle_error_message(), "sensor offline") &&
                  strstr(ladle_error_message(), "user broadcast"),
              "%s: %s", ladle_status_name(st), ladle_error_message());
    u->fail_rank = -1;
    LT_OK(ladle_op_forward(op, x, y));
    LT_DESTROY(&x, &y);
    LT_OK(ladle_op_destroy(&op));
    LT_ASSERT(destroyed == 1, "destroy called %d times", destroyed);
    LT_DESTROY_PARTS(&pr, &pa);
}
END_TEST

/* ---- a user's nonlinear layer: y[b] = tanh(W x[b]), W an m x n parameter ---- */

typedef struct tanh_layer {
    int64_t b, m, n;
    ladle_tensor *w, *dw;
    double *hw, *hdw, *hx, *hy, *hdy;
    int wrong; /* the backward forgets the derivative of tanh */
} tanh_layer;

/* saved: x (b n) then y (b m) */
static int tl_forward(void *user, const ladle_tensor *x, ladle_tensor *y, void *saved)
{
    tanh_layer *u = user;
    double *sx = saved, *sy = sx + u->b * u->n;
    if (saved == NULL)
        return ladle_custom_fail("no scratch for a nonlinear forward");
    if (ladle_tensor_read(x, sx) || ladle_tensor_read(u->w, u->hw))
        return ladle_custom_fail(ladle_error_message());
    for (int64_t r = 0; r < u->b; r++)
        for (int64_t i = 0; i < u->m; i++) {
            double s = 0;
            for (int64_t j = 0; j < u->n; j++)
                s += u->hw[i * u->n + j] * sx[r * u->n + j];
            sy[r * u->m + i] = tanh(s);
        }
    return ladle_tensor_write(y, sy) ? ladle_custom_fail(ladle_error_message()) : 0;
}

/* hdy := dy * (1 - y^2), the gradient before tanh */
static int pre_activation(tanh_layer *u, const ladle_tensor *dy, const double *sy)
{
    if (ladle_tensor_read(dy, u->hdy))
        return 1;
    for (int64_t k = 0; k < u->b * u->m; k++)
        u->hdy[k] *= u->wrong ? 1.0 : 1.0 - sy[k] * sy[k];
    return 0;
}

static int tl_backward(void *user, const ladle_tensor *dy, ladle_tensor *dx, void *saved)
{
    tanh_layer *u = user;
    const double *sy = (const double *)saved + u->b * u->n;
    if (pre_activation(u, dy, sy) || ladle_tensor_read(u->w, u->hw))
        return ladle_custom_fail(ladle_error_message());
    for (int64_t r = 0; r < u->b; r++)
        for (int64_t j = 0; j < u->n; j++) {
            double s = 0;
            for (int64_t i = 0; i < u->m; i++)
                s += u->hw[i * u->n + j] * u->hdy[r * u->m + i];
            u->hx[r * u->n + j] = s;
        }
    return ladle_tensor_write(dx, u->hx) ? ladle_custom_fail(ladle_error_message()) : 0;
}

static int tl_backward_weight(void *user, const ladle_tensor *dy, void *saved)
{
    tanh_layer *u = user;
    const double *sx = saved, *sy = sx + u->b * u->n;
    if (pre_activation(u, dy, sy) || ladle_tensor_read(u->dw, u->hdw))
        return ladle_custom_fail(ladle_error_message());
    for (int64_t r = 0; r < u->b; r++)
        for (int64_t i = 0; i < u->m; i++)
            for (int64_t j = 0; j < u->n; j++)
                u->hdw[i * u->n + j] += u->hdy[r * u->m + i] * sx[r * u->n + j];
    return ladle_tensor_write(u->dw, u->hdw) ? ladle_custom_fail(ladle_error_message()) : 0;
}

static void tl_free(void *p)
{
    tanh_layer *u = p;
    LT_DESTROY(&u->w, &u->dw);
    free(u->hw);
    free(u->hdw);
    free(u->hx);
    free(u->hy);
    free(u->hdy);
    free(u);
}

static const char *tl_names[1] = {"weight"};

/* The layer and its descriptor (d's arrays point into u). */
static tanh_layer *tl_new(int64_t b, int64_t m, int64_t n, ladle_custom_desc *d,
                          int64_t shapes[4])
{
    tanh_layer *u = calloc(1, sizeof *u);
    u->b = b;
    u->m = m;
    u->n = n;
    int64_t ws[2] = {m, n};
    u->w = lt_tensor(LADLE_F64, 2, ws);
    u->dw = lt_tensor(LADLE_F64, 2, ws);
    LT_OK(ladle_tensor_fill_random(u->w, 77, 0));
    u->hw = calloc((size_t)(m * n), sizeof(double));
    u->hdw = calloc((size_t)(m * n), sizeof(double));
    u->hx = calloc((size_t)(b * n), sizeof(double));
    u->hy = calloc((size_t)(b * m), sizeof(double));
    u->hdy = calloc((size_t)(b * m), sizeof(double));
    shapes[0] = b;
    shapes[1] = n;
    shapes[2] = b;
    shapes[3] = m;
    ladle_custom_desc_init(d);
    d->name = "tanh(W x)";
    d->device = lt_device();
    d->x_ndim = 2;
    d->x_shape = shapes;
    d->y_ndim = 2;
    d->y_shape = shapes + 2;
    d->forward = tl_forward;
    d->adjoint = tl_backward;
    d->backward_weight = tl_backward_weight;
    d->saved_bytes = sizeof(double) * (size_t)(b * (n + m));
    d->num_params = 1;
    d->params = &u->w;
    d->grads = &u->dw;
    d->param_names = tl_names;
    d->user = u;
    d->destroy = tl_free;
    return u;
}

START_TEST(nonlinear_gradient)
{
    ladle_custom_desc d;
    int64_t shapes[4];
    tanh_layer *u = tl_new(3, 4, 5, &d, shapes);
    ladle_op *op = NULL;
    LT_OK(ladle_custom_create(&d, &op));
    LT_ASSERT(ladle_op_num_params(op) == 1 && ladle_op_param(op, 0) == u->w &&
                  ladle_op_grad(op, 0) == u->dw &&
                  strcmp(ladle_op_param_name(op, 0), "weight") == 0,
              "the parameter is the user's");
    ladle_gradient_result r;
    LT_OK(ladle_gradient_test(op, 7, 100, &r));
    LT_ASSERT(r.input_error < 1e-6 && r.param_error[0] < 1e-6 && r.nparams == 1,
              "tanh(W x): input %.2e, weight %.2e", r.input_error, r.param_error[0]);
    /* not linear: no adjoint */
    ladle_tensor *dy = lt_op_tensor(op, 1), *dx = lt_op_tensor(op, 0);
    LT_FAILS(ladle_op_adjoint(op, dy, dx), LADLE_ERR_UNSUPPORTED);
    LT_DESTROY(&dy, &dx);
    u->wrong = 1;
    LT_OK(ladle_gradient_test(op, 7, 100, &r));
    LT_ASSERT(r.input_error > 1e-3 && r.param_error[0] > 1e-3,
              "a wrong backward passed: input %.2e, weight %.2e", r.input_error,
              r.param_error[0]);
    ladle_op_destroy(&op);
}
END_TEST

/* Two contexts in flight keep their own saved state. */
START_TEST(contexts_keep_their_state)
{
    ladle_custom_desc d;
    int64_t shapes[4];
    tl_new(2, 3, 3, &d, shapes);
    ladle_op *op = NULL;
    LT_OK(ladle_custom_create(&d, &op));
    ladle_ctx *c1 = NULL, *c2 = NULL;
    LT_OK(ladle_ctx_create(op, &c1));
    LT_OK(ladle_ctx_create(op, &c2));
    ladle_tensor *x1 = lt_op_tensor(op, 0), *x2 = lt_op_tensor(op, 0);
    ladle_tensor *y1 = lt_op_tensor(op, 1), *y2 = lt_op_tensor(op, 1);
    ladle_tensor *dy = lt_op_tensor(op, 1), *dxa = lt_op_tensor(op, 0);
    ladle_tensor *dxb = lt_op_tensor(op, 0);
    LT_OK(ladle_tensor_fill_random(x1, 1, 0));
    LT_OK(ladle_tensor_fill_random(x2, 2, 0));
    LT_OK(ladle_tensor_fill_random(dy, 3, 0));
    LT_OK(ladle_layer_forward(op, c1, x1, y1));
    LT_OK(ladle_layer_backward(op, c1, dy, dxa)); /* alone */
    LT_OK(ladle_layer_forward(op, c2, x2, y2));
    LT_OK(ladle_layer_backward(op, c1, dy, dxb)); /* with c2 in flight */
    double diff = 0;
    for (int64_t i = 0; i < ladle_tensor_numel(dxa); i++)
        diff = fmax(diff, fabs(lt_get(dxa, i) - lt_get(dxb, i)));
    LT_ASSERT(diff == 0.0, "context 1's backward changed by context 2: %.2e", diff);
    /* no dx wanted: nothing to do */
    LT_OK(ladle_layer_backward(op, c2, dy, NULL));
    ladle_ctx_destroy(&c1);
    ladle_ctx_destroy(&c2);
    ladle_tensor *ts[7] = {x1, x2, y1, y2, dy, dxa, dxb};
    for (int i = 0; i < 7; i++)
        ladle_tensor_destroy(&ts[i]);
    ladle_op_destroy(&op);
}
END_TEST

START_TEST(failing_callbacks)
{
    int64_t xs[1] = {3}, ys[1] = {2};
    mat *u = mat_new(2, 3, 3);
    ladle_custom_desc d;
    local_desc(&d, u, xs, ys);
    ladle_op *op = NULL;
    LT_OK(ladle_custom_create(&d, &op));
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    u->fail_rank = lt_rank;
    u->say_why = 1;
    ladle_status st = ladle_op_forward(op, x, y);
    LT_ASSERT(st == LADLE_ERR_CALLBACK && strstr(ladle_error_message(), "sensor offline") &&
                  strstr(ladle_error_message(), "forward") &&
                  strstr(ladle_error_message(), "user matrix"),
              "%s: %s", ladle_status_name(st), ladle_error_message());
    u->say_why = 0;
    st = ladle_op_forward(op, x, y);
    LT_ASSERT(st == LADLE_ERR_CALLBACK && strstr(ladle_error_message(), "returned 7") &&
                  strstr(ladle_error_message(), "gave no reason") &&
                  !strstr(ladle_error_message(), "sensor"),
              "an old reason came back: %s", ladle_error_message());
    LT_ASSERT(strcmp(ladle_status_string(LADLE_ERR_CALLBACK), "a user callback failed") == 0 &&
                  strcmp(ladle_status_name(LADLE_ERR_CALLBACK), "LADLE_ERR_CALLBACK") == 0,
              "the status's name and text");
    u->fail_rank = -1;
    LT_OK(ladle_op_forward(op, x, y));
    LT_DESTROY(&x, &y);
    ladle_op_destroy(&op);
}
END_TEST

static int noop_forward(void *user, const ladle_tensor *x, ladle_tensor *y, void *s)
{
    return 0;
}
static int noop_adjoint(void *user, const ladle_tensor *dy, ladle_tensor *dx, void *s)
{
    return 0;
}
static void count_destroy(void *user) { (*(int *)user)++; }

/* A valid descriptor of an op that does nothing, x_shape -> y_shape, on the
 * test's device: the cases below each break one field of it. */
static void noop_desc(ladle_custom_desc *d, int x_ndim, const int64_t *x_shape, int y_ndim,
                      const int64_t *y_shape)
{
    ladle_custom_desc_init(d);
    d->device = lt_device();
    d->x_ndim = x_ndim;
    d->x_shape = x_shape;
    d->y_ndim = y_ndim;
    d->y_shape = y_shape;
    d->forward = noop_forward;
    d->adjoint = noop_adjoint;
}

START_TEST(bad_descriptors)
{
    int destroyed = 0;
    int64_t xs[2] = {3, 4}, ys[1] = {5}, neg[1] = {-2}, nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    ladle_custom_desc d, good;
    ladle_op *op = NULL;
    noop_desc(&good, 2, xs, 1, ys);
    good.user = &destroyed;
    good.destroy = count_destroy;

    LT_FAILS(ladle_custom_create(NULL, &op), LADLE_ERR_NULL);
    LT_FAILS(ladle_custom_create(&good, NULL), LADLE_ERR_NULL);
    d = good;
    d.size = 0; /* not initialised */
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_ARG);
    d = good;
    d.size = sizeof d - 8; /* a smaller, other build's descriptor */
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_ARG);
    d = good;
    d.forward = NULL;
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_NULL);
    d = good;
    d.adjoint = NULL;
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_NULL);
    d = good;
    d.dtype = LADLE_I64;
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_DTYPE);
    d = good;
    d.x_shape = neg;
    d.x_ndim = 1;
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_SHAPE);
    d = good;
    d.y_ndim = -1;
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_ARG);
    d = good;
    d.y_ndim = 9;
    d.y_shape = nine;
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_ARG);
    d = good;
    d.x_shape = NULL;
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_NULL);
    d = good;
    d.num_params = -1;
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_ARG);

    /* a layout without the other, and a shape that disagrees with its layout */
    int all = lt_size;
    ladle_partition *pa = lt_partition(1, &all, 0);
    ladle_layout *l = NULL;
    int64_t n = 6, wrong[1] = {5};
    LT_OK(ladle_layout_create_block(pa, 1, &n, &l));
    d = good;
    d.x_layout = l;
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_ARG);
    d.y_layout = l;
    d.x_ndim = 1;
    d.x_shape = wrong;
    d.y_ndim = 0;
    d.y_shape = NULL;
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_SHAPE);
    /* the same shape as the box is accepted */
    d.x_shape = &n;
    LT_OK(ladle_custom_create(&d, &op));
    LT_ASSERT(destroyed == 0, "destroy called for refused descriptors: %d", destroyed);
    ladle_op_destroy(&op);
    LT_ASSERT(destroyed == 1, "destroy called %d times", destroyed);
    ladle_layout_destroy(&l);
    ladle_partition_destroy(&pa);
}
END_TEST

static int weight_noop(void *user, const ladle_tensor *dy, void *s) { return 0; }

START_TEST(bad_parameters)
{
    int64_t xs[1] = {3}, ps[1] = {4}, qs[1] = {3};
    ladle_custom_desc good, d;
    ladle_op *op = NULL;
    noop_desc(&good, 1, xs, 1, xs);
    good.backward_weight = weight_noop;
    ladle_tensor *p = lt_tensor(LADLE_F64, 1, ps), *g = lt_tensor(LADLE_F64, 1, ps);
    ladle_tensor *g3 = lt_tensor(LADLE_F64, 1, qs), *p32 = lt_tensor(LADLE_F32, 1, ps);
    ladle_tensor *strided = NULL;
    int64_t two[1] = {2};
    LT_OK(ladle_tensor_wrap(LADLE_F64, lt_device(), 1, qs, two, ladle_tensor_data(p),
                            &strided));
    ladle_tensor *pp[2] = {p, p}, *gg[2] = {g, g}, *nul[1] = {NULL};
    ladle_tensor *odd[1] = {g3}, *f32[1] = {p32}, *str[1] = {strided}, *str_g[1] = {g3};
    const char *names[2] = {"w", "v"}, *same[2] = {"w", "w"}, *none[1] = {NULL};

    d = good;
    d.num_params = 2;
    d.params = pp;
    d.grads = gg;
    d.param_names = names;
    LT_OK(ladle_custom_create(&d, &op));
    LT_ASSERT(ladle_op_num_params(op) == 2 && strcmp(ladle_op_param_name(op, 1), "v") == 0,
              "two parameters");
    ladle_op_destroy(&op);
    d.param_names = same;
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_ARG);
    d.param_names = none;
    d.num_params = 1;
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_NULL);
    d.param_names = names;
    d.params = nul;
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_NULL);
    d.params = pp;
    d.grads = NULL;
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_NULL);
    d.grads = odd;
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_SHAPE);
    d.grads = gg;
    d.params = f32;
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_DTYPE);
    d.params = str;
    d.grads = str_g;
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_ARG);
    d.params = pp;
    d.grads = gg;
    d.backward_weight = NULL;
    LT_FAILS(ladle_custom_create(&d, &op), LADLE_ERR_NULL);
    LT_DESTROY(&strided, &p, &g, &g3, &p32);
}
END_TEST

/* ---- in containers: a user's affine layer, y = x W^T + b, against
 * ladle_linear_create with the same initial weights ---- */

typedef struct ulin {
    int64_t b, in, out;
    ladle_tensor *params[2], *grads[2]; /* weight, bias */
    double *hw, *hb, *hdy, *hout, *hdw, *hdb;
} ulin;

static const char *ulin_names[2] = {"weight", "bias"};

static int ul_forward(void *user, const ladle_tensor *x, ladle_tensor *y, void *saved)
{
    ulin *u = user;
    double *sx = saved; /* x, for backward_weight */
    u->b = ladle_tensor_shape(x)[0]; /* this call's batch */
    if (ladle_tensor_read(x, sx) || ladle_tensor_read(u->params[0], u->hw) ||
        ladle_tensor_read(u->params[1], u->hb))
        return ladle_custom_fail(ladle_error_message());
    for (int64_t r = 0; r < u->b; r++)
        for (int64_t o = 0; o < u->out; o++) {
            double s = u->hb[o];
            for (int64_t i = 0; i < u->in; i++)
                s += sx[r * u->in + i] * u->hw[o * u->in + i];
            u->hout[r * u->out + o] = s;
        }
    return ladle_tensor_write(y, u->hout) ? ladle_custom_fail(ladle_error_message()) : 0;
}

static int ul_backward(void *user, const ladle_tensor *dy, ladle_tensor *dx, void *saved)
{
    ulin *u = user;
    double *hdx = u->hout; /* b * max(in, out) */
    if (ladle_tensor_read(dy, u->hdy) || ladle_tensor_read(u->params[0], u->hw))
        return ladle_custom_fail(ladle_error_message());
    for (int64_t r = 0; r < u->b; r++)
        for (int64_t i = 0; i < u->in; i++) {
            double s = 0;
            for (int64_t o = 0; o < u->out; o++)
                s += u->hdy[r * u->out + o] * u->hw[o * u->in + i];
            hdx[r * u->in + i] = s;
        }
    return ladle_tensor_write(dx, hdx) ? ladle_custom_fail(ladle_error_message()) : 0;
}

static int ul_backward_weight(void *user, const ladle_tensor *dy, void *saved)
{
    ulin *u = user;
    const double *sx = saved;
    if (ladle_tensor_read(dy, u->hdy) || ladle_tensor_read(u->grads[0], u->hdw) ||
        ladle_tensor_read(u->grads[1], u->hdb))
        return ladle_custom_fail(ladle_error_message());
    for (int64_t r = 0; r < u->b; r++)
        for (int64_t o = 0; o < u->out; o++) {
            double g = u->hdy[r * u->out + o];
            u->hdb[o] += g;
            for (int64_t i = 0; i < u->in; i++)
                u->hdw[o * u->in + i] += g * sx[r * u->in + i];
        }
    if (ladle_tensor_write(u->grads[0], u->hdw) || ladle_tensor_write(u->grads[1], u->hdb))
        return ladle_custom_fail(ladle_error_message());
    return 0;
}

static void ul_free(void *p)
{
    ulin *u = p;
    for (int k = 0; k < 2; k++) {
        LT_DESTROY(&u->params[k], &u->grads[k]);
    }
    free(u->hw);
    free(u->hb);
    free(u->hdy);
    free(u->hout);
    free(u->hdw);
    free(u->hdb);
    free(u);
}

/* A user's affine layer b x in -> b x out starting from twin's weights. */
static ladle_op *ulin_create(int64_t b, int64_t in, int64_t out, const ladle_op *twin)
{
    ulin *u = calloc(1, sizeof *u);
    int64_t ws[2] = {out, in}, xs[2] = {b, in}, ys[2] = {b, out};
    u->b = b;
    u->in = in;
    u->out = out;
    for (int k = 0; k < 2; k++) {
        u->params[k] = lt_tensor(LADLE_F64, 2 - k, ws);
        u->grads[k] = lt_tensor(LADLE_F64, 2 - k, ws);
        if (twin)
            LT_OK(ladle_tensor_copy(u->params[k], ladle_op_param(twin, k)));
    }
    int64_t big = b * (in > out ? in : out);
    u->hw = calloc((size_t)(in * out), sizeof(double));
    u->hb = calloc((size_t)out, sizeof(double));
    u->hdy = calloc((size_t)(b * out), sizeof(double));
    u->hout = calloc((size_t)big, sizeof(double));
    u->hdw = calloc((size_t)(in * out), sizeof(double));
    u->hdb = calloc((size_t)out, sizeof(double));
    ladle_custom_desc d;
    ladle_custom_desc_init(&d);
    d.name = "user affine";
    d.device = lt_device();
    d.x_ndim = d.y_ndim = 2;
    d.x_shape = xs;
    d.y_shape = ys;
    d.forward = ul_forward;
    d.adjoint = ul_backward;
    d.backward_weight = ul_backward_weight;
    d.saved_bytes = sizeof(double) * (size_t)(b * in);
    d.num_params = 2;
    d.params = u->params;
    d.grads = u->grads;
    d.param_names = ulin_names;
    d.user = u;
    d.destroy = ul_free;
    d.batched = 1;
    ladle_op *op = NULL;
    LT_OK(ladle_custom_create(&d, &op));
    return op;
}

#define NB 4
#define NIN 6
#define NHID 5
#define NOUT 3

/* The three layers, [affine, tanh, affine]: ladle's (custom = 0) or the
 * user's (custom = 1, from ladle's weights for the same seed). */
static void three_layers(int custom, uint64_t seed, ladle_op *layers[3])
{
    int64_t x1[2] = {NB, NIN}, x2[2] = {NB, NHID};
    ladle_op *l1 = NULL, *l3 = NULL;
    LT_OK(ladle_linear_create(LT_LINEAR(x1[1], NHID, 1, 0), 2, x1, LADLE_F64, lt_device(),
                              seed, &l1));
    LT_OK(ladle_linear_create(LT_LINEAR(x2[1], NOUT, 1, 0), 2, x2, LADLE_F64, lt_device(),
                              seed + 1, &l3));
    LT_OK(ladle_activation_create(LADLE_TANH, 0, 2, x2, LADLE_F64, lt_device(), &layers[1]));
    if (custom) {
        layers[0] = ulin_create(NB, NIN, NHID, l1);
        layers[2] = ulin_create(NB, NHID, NOUT, l3);
        LT_DESTROY_OPS(&l1, &l3);
    } else {
        layers[0] = l1;
        layers[2] = l3;
    }
}

/* A network of the three layers (nested in a sequential when seq). */
static ladle_network *three_net(int custom, int seq, uint64_t seed)
{
    int64_t ys[2] = {NB, NOUT};
    ladle_op *layers[3], *loss = NULL, *s = NULL;
    ladle_network *net = NULL;
    three_layers(custom, seed, layers);
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 2, ys,
                            LADLE_F64, lt_device(), &loss));
    if (seq) {
        LT_OK(ladle_sequential_create(3, layers, &s));
        LT_OK(ladle_network_create(1, &s, loss, 0, &net));
    } else {
        LT_OK(ladle_network_create(3, layers, loss, 0, &net));
    }
    return net;
}

/* Steps of SGD with momentum; the losses into out. */
static void train(ladle_network *net, int steps, double *out)
{
    int64_t xs[2] = {NB, NIN}, ys[2] = {NB, NOUT};
    ladle_tensor *x = lt_tensor(LADLE_F64, 2, xs), *t = lt_tensor(LADLE_F64, 2, ys);
    ladle_optimizer_desc od;
    ladle_optimizer *opt = NULL;
    ladle_optimizer_desc_init(&od, LADLE_OPT_SGD, 0.2);
    od.momentum = 0.9;
    LT_OK(ladle_optimizer_create(&od, &opt));
    LT_OK(ladle_optimizer_add_network(opt, net));
    for (int k = 0; k < steps; k++) {
        LT_OK(ladle_tensor_fill_random(x, 100 + (uint64_t)k, 0));
        LT_OK(ladle_tensor_fill_random(t, 200 + (uint64_t)k, 0));
        lt_train_step(net, opt, x, t, &out[k]);
    }
    ladle_optimizer_destroy(&opt);
    LT_DESTROY(&x, &t);
}

START_TEST(trains_like_builtin)
{
    for (int seq = 0; seq < 2; seq++) {
        double a[6], b[6], worst = 0;
        ladle_network *na = three_net(0, seq, 21), *nb = three_net(1, seq, 21);
        train(na, 6, a);
        train(nb, 6, b);
        for (int k = 0; k < 6; k++)
            worst = fmax(worst, fabs(a[k] - b[k]) / fabs(a[k]));
        LT_ASSERT(worst < 1e-12 && a[5] < a[0],
                  "%s: the user's layers train apart from ladle's: %.2e (losses %.6g -> %.6g)",
                  seq ? "sequential" : "network", worst, a[0], a[5]);
        ladle_network_destroy(&na);
        ladle_network_destroy(&nb);
    }
}
END_TEST

/* Checkpoints hold a custom op's parameters: trained user layers saved and
 * loaded into fresh ones give the same next steps, and a checkpoint of
 * ladle's own layers loads into the user's (the same parameters by place
 * and name). */
START_TEST(checkpoint_round_trip)
{
    char path[256];
    int pid = lt_rank == 0 ? (int)getpid() : 0;
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    snprintf(path, sizeof path, "/tmp/ladle_custom_%d.ckpt", pid);
    double warm[3], a[3], b[3], c[3];
    ladle_network *trained = three_net(1, 0, 5), *fresh = three_net(1, 0, 99);
    train(trained, 3, warm);
    LT_OK(
        ladle_checkpoint_save(path, ladle_comm_of(MPI_COMM_WORLD), trained, NULL, 0, NULL));
    LT_OK(ladle_checkpoint_load(path, ladle_comm_of(MPI_COMM_WORLD), fresh, NULL, 0, NULL,
                                NULL));
    int same = 1;
    for (int l = 0; l < 3; l += 2)
        for (int k = 0; k < 2; k++) {
            const ladle_tensor *p = ladle_op_param(ladle_network_layer(trained, l), k);
            const ladle_tensor *q = ladle_op_param(ladle_network_layer(fresh, l), k);
            for (int64_t i = 0; i < ladle_tensor_numel(p); i++)
                same &= lt_get(p, i) == lt_get(q, i);
        }
    LT_ASSERT(same, "the loaded parameters differ from the saved ones");
    train(trained, 3, a);
    train(fresh, 3, b);
    /* ladle's layers into the user's */
    ladle_network *builtin = three_net(0, 0, 5), *user = three_net(1, 0, 77);
    LT_OK(
        ladle_checkpoint_save(path, ladle_comm_of(MPI_COMM_WORLD), builtin, NULL, 0, NULL));
    LT_OK(ladle_checkpoint_load(path, ladle_comm_of(MPI_COMM_WORLD), user, NULL, 0, NULL,
                                NULL));
    train(builtin, 3, c);
    train(user, 3, warm);
    double worst = 0;
    for (int k = 0; k < 3; k++)
        worst = fmax(worst, fmax(fabs(a[k] - b[k]), fabs(c[k] - warm[k]) / fabs(c[k])));
    LT_ASSERT(worst < 1e-12, "training after a load differs: %.2e", worst);
    if (lt_rank == 0)
        remove(path);
    ladle_network_destroy(&trained);
    ladle_network_destroy(&fresh);
    ladle_network_destroy(&builtin);
    ladle_network_destroy(&user);
}
END_TEST

/* A pipeline (1F1B over two stages where there are two ranks) of the
 * user's layers trains as the same pipeline of ladle's. */
static void pipeline_losses(int custom, double *losses, int steps)
{
    int S = lt_size >= 2 ? 2 : 1, m = 2, me;
    ladle_pipe_schedule *s = NULL;
    LT_OK(ladle_pipe_schedule_generate(LADLE_PIPE_1F1B, S, NULL, 1, m, NULL, &s));
    int W = ladle_pipe_schedule_workers(s);
    ladle_partition *p = lt_partition(1, &W, 0);
    me = ladle_partition_active(p) ? ladle_partition_rank(p) : -1;
    ladle_op *layers[3];
    three_layers(custom, 31, layers);
    /* stage 0: affine and tanh; stage 1: the second affine (all on one
     * stage when S = 1) */
    ladle_pipe_stage held[2];
    int nheld = 0, last = 0;
    if (me >= 0 && S == 1) {
        held[nheld++] = (ladle_pipe_stage){0, 3, layers};
        last = 1;
    } else if (me >= 0) {
        for (int j = 0; j < S; j++)
            if (ladle_pipe_schedule_worker(s, j, 0) == me) {
                held[nheld++] = j == 0 ? (ladle_pipe_stage){0, 2, layers}
                                       : (ladle_pipe_stage){1, 1, layers + 2};
                last |= j == S - 1;
            }
    }
    /* the layers no stage here holds are not the pipeline's */
    int kept[3] = {0, 0, 0};
    for (int h = 0; h < nheld; h++)
        for (int i = 0; i < held[h].n; i++)
            kept[held[h].layers + i - layers] = 1;
    for (int i = 0; i < 3; i++)
        if (!kept[i])
            ladle_op_destroy(&layers[i]);
    int64_t ys[2] = {NB, NOUT}, xs[2] = {2 * NB, NIN}, ts[2] = {2 * NB, NOUT};
    ladle_op *loss = NULL;
    ladle_status st =
        last ? ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 2, ys,
                                 LADLE_F64, lt_device(), &loss)
             : LADLE_OK;
    LT_ASSERT(st == LADLE_OK, "the loss: %s", ladle_error_message());
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, LADLE_OPT_SGD, 0.2);
    od.momentum = 0.9;
    ladle_pipeline *pl = NULL;
    LT_OK(ladle_pipeline_create(p, s, nheld, held, loss, &od, &pl));
    ladle_tensor *x = lt_tensor(LADLE_F64, 2, xs), *t = lt_tensor(LADLE_F64, 2, ts);
    for (int k = 0; k < steps; k++) {
        LT_OK(ladle_tensor_fill_random(x, 300 + (uint64_t)k, 0));
        LT_OK(ladle_tensor_fill_random(t, 400 + (uint64_t)k, 0));
        losses[k] = 0;
        LT_OK(ladle_pipeline_step(pl, x, t, &losses[k]));
    }
    LT_DESTROY(&x, &t);
    ladle_pipeline_destroy(&pl);
    ladle_pipe_schedule_destroy(&s);
    ladle_partition_destroy(&p);
}

START_TEST(pipeline_of_custom_layers)
{
    double a[4], b[4], worst = 0;
    pipeline_losses(0, a, 4);
    pipeline_losses(1, b, 4);
    for (int k = 0; k < 4; k++)
        worst = fmax(worst, fabs(a[k] - b[k]) / fmax(fabs(a[k]), 1e-300));
    LT_ASSERT(worst < 1e-12, "the pipelines' losses differ by %.2e (%.6g vs %.6g)", worst,
              a[3], b[3]);
}
END_TEST

LT_SUITE("custom", "custom", 120, local_linear_adjoint, distributed_linear_adjoint,
         nonlinear_gradient, contexts_keep_their_state, failing_callbacks, bad_descriptors,
         bad_parameters, trains_like_builtin, checkpoint_round_trip,
         pipeline_of_custom_layers)
