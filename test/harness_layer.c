/* Test harness, the layer fixtures: a layer's pass against a reference,
 * its contexts, a chain against its parts, refusals, a training step and
 * a counting allocator; see harness.h. */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double lt_layer_pass(ladle_op *op, ladle_tensor *x, ladle_tensor *y, ladle_tensor *dy,
                     ladle_tensor *dx, lt_layer_reference *ref, const void *arg)
{
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_ctx_create(op, &ctx));
    LT_OK(ladle_layer_forward(op, ctx, x, y));
    LT_OK(ladle_layer_backward_weight(op, ctx, dy));
    LT_OK(ladle_layer_backward(op, ctx, dy, dx));
    LT_OK(ladle_layer_backward_weight(op, ctx, dy));
    ladle_ctx_destroy(&ctx);
    int64_t ny = ladle_tensor_numel(y), nx = ladle_tensor_numel(x);
    int np = ladle_op_num_params(op);
    double *hx = lt_values(x), *hy = lt_values(y), *hdy = lt_values(dy), *hdx = lt_values(dx);
    double *ry = calloc((size_t)ny + 1, sizeof *ry);
    double *rdx = calloc((size_t)nx + 1, sizeof *rdx);
    double **grads = calloc((size_t)np + 1, sizeof *grads);
    for (int i = 0; i < np; i++)
        grads[i] = calloc((size_t)ladle_tensor_numel(ladle_op_grad(op, i)) + 1, sizeof(double));
    ref(arg, hx, hdy, ry, rdx, grads);
    double worst = 0;
    for (int64_t i = 0; i < ny; i++)
        worst = fmax(worst, fabs(hy[i] - ry[i]) / (1 + fabs(ry[i])));
    for (int64_t i = 0; i < nx; i++)
        worst = fmax(worst, fabs(hdx[i] - rdx[i]) / (1 + fabs(rdx[i])));
    for (int i = 0; i < np; i++) {
        double *got = lt_values(ladle_op_grad(op, i)), *want = grads[i];
        for (int64_t e = 0; e < ladle_tensor_numel(ladle_op_grad(op, i)); e++)
            worst = fmax(worst, fabs(got[e] - 2 * want[e]) / (1 + fabs(2 * want[e])));
        free(got), free(grads[i]);
    }
    /* without a ctx the forward gives the same y */
    LT_OK(ladle_layer_forward(op, NULL, x, y));
    double *hy2 = lt_values(y);
    for (int64_t i = 0; i < ny; i++)
        worst = fmax(worst, hy2[i] == hy[i] ? 0 : 1);
    free(hy2), free(hx), free(hy), free(hdy), free(hdx), free(ry), free(rdx), free(grads);
    return worst;
}

void lt_layer_empty_batch(ladle_op *op, int ndim, const int64_t *shape)
{
    ladle_tensor *x = lt_tensor(ladle_op_dtype(op), ndim, shape);
    ladle_tensor *y = lt_tensor(ladle_op_dtype(op), ndim, shape);
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_ctx_create(op, &ctx));
    LT_OK(ladle_layer_forward(op, ctx, x, y));
    LT_OK(ladle_layer_backward(op, ctx, y, x));
    LT_OK(ladle_layer_backward_weight(op, ctx, y));
    ladle_ctx_destroy(&ctx);
    LT_DESTROY(&x, &y);
}

int lt_same_values(const ladle_tensor *a, const ladle_tensor *b)
{
    double *va = lt_values(a), *vb = lt_values(b);
    int same = 1;
    for (int64_t i = 0; i < ladle_tensor_numel(a); i++)
        same &= va[i] == vb[i];
    free(va), free(vb);
    return same;
}

int lt_ctx_pair_run(ladle_op *op, const int64_t *xs, int again, lt_ctx_pair *p)
{
    ladle_tensor **all[6] = {&p->x1, &p->x2, &p->y, &p->dy, &p->dxa, &p->dxb};
    for (int i = 0; i < 6; i++)
        *all[i] = lt_tensor(LADLE_F64, 3, xs);
    LT_OK(ladle_tensor_fill_random(p->x1, 1, 0));
    LT_OK(ladle_tensor_fill_random(p->x2, 1, 1));
    LT_OK(ladle_tensor_fill_random(p->dy, 1, 2));
    p->c1 = p->c2 = NULL;
    LT_OK(ladle_ctx_create(op, &p->c1));
    LT_OK(ladle_ctx_create(op, &p->c2));
    LT_OK(ladle_layer_forward(op, p->c1, p->x1, p->y));
    LT_OK(ladle_layer_backward(op, p->c1, p->dy, p->dxa));
    LT_OK(ladle_layer_forward(op, p->c2, p->x2, p->y));
    if (again)
        LT_OK(ladle_layer_forward(op, p->c1, p->x1, p->y));
    LT_OK(ladle_layer_backward(op, p->c1, p->dy, p->dxb));
    int same = lt_same_values(p->dxa, p->dxb);
    LT_ASSERT(same, "a ctx's backward is its own forward's");
    return same;
}

int lt_ctx_in_caller_memory(ladle_op *op, lt_ctx_pair *p, int same)
{
    size_t cb = ladle_ctx_bytes(op);
    void *cm = NULL;
    LT_ASSERT(cb > 0 && posix_memalign(&cm, 64, cb) == 0, "ctx bytes %zu", cb);
    ladle_ctx *c3 = NULL;
    LT_OK(ladle_ctx_create_in(op, cm, cb, &c3));
    LT_OK(ladle_layer_forward(op, c3, p->x1, p->y));
    LT_OK(ladle_layer_backward(op, c3, p->dy, p->dxb));
    same &= lt_same_values(p->dxa, p->dxb);
    LT_ASSERT(same, "a ctx in caller memory");
    ladle_ctx_destroy(&c3);
    free(cm);
    return same;
}

void lt_ctx_pair_free(lt_ctx_pair *p)
{
    ladle_ctx_destroy(&p->c1);
    ladle_ctx_destroy(&p->c2);
    LT_DESTROY(&p->x1, &p->x2, &p->y, &p->dy, &p->dxa, &p->dxb);
}

/* The largest |a - b| over two tensors of one numel. */
static double max_difference(const ladle_tensor *a, const ladle_tensor *b)
{
    double *p = lt_values(a), *q = lt_values(b), worst = 0;
    for (int64_t e = 0; e < ladle_tensor_numel(b); e++)
        worst = fmax(worst, fabs(p[e] - q[e]));
    free(p), free(q);
    return worst;
}

double lt_chain_error(int n, ladle_op *const *parts, ladle_op *seq, const ladle_tensor *x,
                      const ladle_tensor *dy, int with_dx)
{
    /* y[i]: part i's output; g[i]: the gradient at part i's input */
    ladle_tensor **y = calloc((size_t)n, sizeof *y), **g = calloc((size_t)n + 1, sizeof *g);
    ladle_ctx **c = calloc((size_t)n, sizeof *c), *cs = NULL;
    int first = with_dx ? 0 : 1;
    for (int i = 0; i < n; i++) {
        y[i] = lt_op_tensor(parts[i], 1);
        g[i] = i >= first ? lt_op_tensor(parts[i], 0) : NULL;
        LT_OK(ladle_ctx_create(parts[i], &c[i]));
    }
    for (int i = 0; i < n; i++)
        LT_OK(ladle_layer_forward(parts[i], c[i], i ? y[i - 1] : x, y[i]));
    for (int i = n - 1; i >= first; i--)
        LT_OK(ladle_layer_backward(parts[i], c[i], i == n - 1 ? dy : g[i + 1], g[i]));
    for (int i = 0; i < n; i++)
        LT_OK(ladle_op_zero_grad(parts[i]));
    for (int i = n - 1; i >= 0; i--)
        LT_OK(ladle_layer_backward_weight(parts[i], c[i], i == n - 1 ? dy : g[i + 1]));
    ladle_tensor *ys = lt_op_tensor(seq, 1), *dxs = with_dx ? lt_op_tensor(seq, 0) : NULL;
    LT_OK(ladle_ctx_create(seq, &cs));
    LT_OK(ladle_layer_forward(seq, cs, x, ys));
    LT_OK(ladle_layer_backward(seq, cs, dy, dxs));
    LT_OK(ladle_op_zero_grad(seq));
    LT_OK(ladle_layer_backward_weight(seq, cs, dy));
    double worst = max_difference(y[n - 1], ys);
    if (with_dx)
        worst = fmax(worst, max_difference(g[0], dxs));
    for (int i = 0, s = 0; i < n; i++)
        for (int k = 0; k < ladle_op_num_params(parts[i]); k++, s++)
            worst = fmax(worst, max_difference(ladle_op_grad(parts[i], k), ladle_op_grad(seq, s)));
    for (int i = 0; i < n; i++) {
        ladle_ctx_destroy(&c[i]);
        LT_DESTROY(&y[i], &g[i]);
    }
    ladle_ctx_destroy(&cs);
    LT_DESTROY(&ys, &dxs);
    free(y), free(g), free(c);
    return worst;
}

void *lt_count_alloc(void *user, size_t bytes, size_t align, ladle_device device)
{
    lt_counter *c = user;
    void *p = NULL;
    if (device != LADLE_CPU || posix_memalign(&p, align < 16 ? 16 : align, bytes) != 0)
        return NULL;
    c->allocs++;
    c->bytes += bytes;
    return p;
}

void lt_count_free(void *user, void *ptr, size_t bytes, ladle_device device)
{
    lt_counter *c = user;
    (void)bytes, (void)device;
    c->frees++;
    free(ptr);
}

ladle_ctx *lt_forward_backward(ladle_op *op, const ladle_tensor *x, ladle_tensor *y,
                               const ladle_tensor *dy, ladle_tensor *dx)
{
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_ctx_create(op, &ctx));
    LT_OK(ladle_layer_forward(op, ctx, x, y));
    LT_OK(ladle_layer_backward(op, ctx, dy, dx));
    return ctx;
}

void lt_train_step(ladle_network *net, ladle_optimizer *opt, const ladle_tensor *x,
                   const ladle_tensor *t, double *loss)
{
    LT_OK(ladle_network_zero_grad(net));
    LT_OK(ladle_network_forward(net, x, NULL));
    LT_OK(ladle_network_loss(net, t, loss));
    LT_OK(ladle_network_backward(net, 1));
    LT_OK(ladle_optimizer_step(opt));
}

void lt_lenet_desc(ladle_lenet_desc *d, int64_t n, int64_t s, uint64_t seed)
{
    ladle_lenet_desc_init(d);
    d->batch = n;
    d->image = s;
    d->dtype = LADLE_F64;
    d->device = lt_device();
    d->seed = seed;
}

void lt_forward_refuses(ladle_op *op, ladle_ctx *ctx, ladle_tensor *x, ladle_tensor *y,
                        const ladle_tensor *wrong, const ladle_tensor *big,
                        const ladle_tensor *other_dtype)
{
    LT_FAILS(ladle_layer_forward(op, ctx, NULL, y), LADLE_ERR_NULL);
    LT_FAILS(ladle_layer_forward(op, ctx, wrong, y), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_layer_forward(op, ctx, big, y), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_layer_forward(op, ctx, other_dtype, y), LADLE_ERR_DTYPE);
    LT_FAILS(ladle_layer_forward(op, ctx, x, x), LADLE_ERR_ARG);
}
