/* Caller-owned memory: parameters bound to caller buffers train exactly as
 * ladle's own, contexts and workspaces in caller memory give the same
 * results, the allocator hook sees every allocation and its free (and none
 * in the calls), strided views are refused with the reason. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Caller memory for parameter i of op: a tensor of the test's with one
 * element more, the buffer starting one element in (so a free of it by
 * ladle would be caught as an invalid free), holding ladle's initial
 * values. */
typedef struct caller_buf {
    ladle_tensor *owner, *view;
} caller_buf;

static void *caller_copy(caller_buf *b, const ladle_tensor *like)
{
    int64_t n = ladle_tensor_numel(like) + 1;
    size_t es = ladle_dtype_size(ladle_tensor_dtype(like));
    b->owner = lt_tensor(ladle_tensor_dtype(like), 1, &n);
    char *data = (char *)ladle_tensor_data(b->owner) + es;
    LT_OK(ladle_tensor_wrap(ladle_tensor_dtype(like), ladle_tensor_device(like),
                            ladle_tensor_ndim(like), ladle_tensor_shape(like), NULL,
                            n > 1 ? data : NULL, &b->view));
    LT_OK(ladle_tensor_copy(b->view, like));
    return n > 1 ? data : NULL;
}

static void caller_free(caller_buf *b)
{
    ladle_tensor_destroy(&b->view);
    ladle_tensor_destroy(&b->owner);
}

static double max_diff(const ladle_tensor *a, const ladle_tensor *b)
{
    double worst = 0;
    for (int64_t i = 0; i < ladle_tensor_numel(a); i++)
        worst = fmax(worst, fabs(lt_get(a, i) - lt_get(b, i)));
    return worst;
}

/* Steps of SGD on a (ladle's memory) and b (bound to caller buffers, made
 * the same way): the outputs and parameters must agree exactly, and b's
 * parameters must be the caller's buffers. Collective where the layers are. */
static void bound_trains_alike(ladle_op *a, ladle_op *b, const char *what)
{
    int np = ladle_op_num_params(b);
    caller_buf pb[4], gb[4];
    void *pd[4];
    for (int i = 0; i < np; i++) {
        pd[i] = caller_copy(&pb[i], ladle_op_param(b, i));
        void *g = caller_copy(&gb[i], ladle_op_grad(b, i));
        LT_OK(ladle_op_bind_param(b, i, pd[i], g));
    }
    ladle_optimizer *oa = NULL, *ob = NULL;
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, LADLE_OPT_SGD, 0.1);
    od.momentum = 0.5;
    LT_OK(ladle_optimizer_create(&od, &oa));
    LT_OK(ladle_optimizer_create(&od, &ob));
    LT_OK(ladle_optimizer_add_op(oa, a));
    LT_OK(ladle_optimizer_add_op(ob, b));
    ladle_tensor *x = lt_op_tensor(a, 0), *ya = lt_op_tensor(a, 1), *yb = lt_op_tensor(a, 1);
    ladle_tensor *dy = lt_op_tensor(a, 1), *dxa = lt_op_tensor(a, 0), *dxb = lt_op_tensor(a, 0);
    ladle_ctx *ca = NULL, *cb = NULL;
    LT_OK(ladle_ctx_create(a, &ca));
    LT_OK(ladle_ctx_create(b, &cb));
    double worst = 0;
    for (int k = 0; k < 3; k++) {
        LT_OK(ladle_tensor_fill_random(x, 10 + (uint64_t)k, (uint64_t)lt_rank));
        LT_OK(ladle_tensor_fill_random(dy, 20 + (uint64_t)k, (uint64_t)lt_rank));
        LT_OK(ladle_op_zero_grad(a));
        LT_OK(ladle_op_zero_grad(b));
        LT_OK(ladle_layer_forward(a, ca, x, ya));
        LT_OK(ladle_layer_forward(b, cb, x, yb));
        LT_OK(ladle_layer_backward(a, ca, dy, dxa));
        LT_OK(ladle_layer_backward(b, cb, dy, dxb));
        LT_OK(ladle_layer_backward_weight(a, ca, dy));
        LT_OK(ladle_layer_backward_weight(b, cb, dy));
        LT_OK(ladle_layer_sync_gradients(a));
        LT_OK(ladle_layer_sync_gradients(b));
        LT_OK(ladle_optimizer_step(oa));
        LT_OK(ladle_optimizer_step(ob));
        worst = fmax(worst, fmax(max_diff(ya, yb), max_diff(dxa, dxb)));
    }
    int mine = 1;
    for (int i = 0; i < np; i++) {
        worst = fmax(worst, max_diff(ladle_op_param(a, i), pb[i].view));
        worst = fmax(worst, max_diff(ladle_op_grad(a, i), gb[i].view));
        mine &= ladle_tensor_data(ladle_op_param(b, i)) == pd[i];
    }
    LT_ASSERT(worst == 0.0 && mine, "%s: bound parameters train apart by %.2e (buffers %s)",
              what, worst, mine ? "kept" : "lost");
    ladle_ctx_destroy(&ca);
    ladle_ctx_destroy(&cb);
    ladle_optimizer_destroy(&oa);
    ladle_optimizer_destroy(&ob);
    ladle_tensor *ts[6] = {x, ya, yb, dy, dxa, dxb};
    for (int i = 0; i < 6; i++)
        ladle_tensor_destroy(&ts[i]);
    /* the op goes first: freeing the caller's buffers would be caught */
    ladle_op_destroy(&a);
    ladle_op_destroy(&b);
    for (int i = 0; i < np; i++) {
        caller_free(&pb[i]);
        caller_free(&gb[i]);
    }
}

START_TEST(bind_sequential_layers)
{
    int64_t xl[2] = {4, 6}, xc[4] = {2, 3, 7, 7};
    for (int k = 0; k < 3; k++) {
        ladle_op *a = NULL, *b = NULL;
        for (int t = 0; t < 2; t++) {
            ladle_op **o = t ? &b : &a;
            if (k == 0)
                LT_OK(ladle_linear_create(LT_LINEAR(xl[1], 5, 1, 0), 2, xl, LADLE_F64,
                                          lt_device(), 3, o));
            if (k == 1) {
                ladle_conv_desc d;
                ladle_conv_desc_init(&d, 2, 3, 4, 3);
                d.padding[0] = d.padding[1] = 1;
                LT_OK(ladle_conv_create(&d, xc, LADLE_F64, lt_device(), 4, o));
            }
            if (k == 2) {
                ladle_batchnorm_desc d;
                ladle_batchnorm_desc_init(&d, 3);
                LT_OK(ladle_batchnorm_create(&d, 4, xc, LADLE_F64, lt_device(), o));
            }
        }
        bound_trains_alike(a, b, k == 0 ? "linear" : k == 1 ? "conv" : "batch norm");
    }
}
END_TEST

START_TEST(bind_distributed_layers)
{
    int P = lt_size, s1[2] = {1, 1}, sw[2] = {P, 1}, sy[2] = {1, P}, zero = 0;
    ladle_partition *px = lt_partition_ranks(2, s1, &zero);
    ladle_partition *pw = lt_partition(2, sw, 0), *py = lt_partition(2, sy, 0);
    int grid[4] = {1, 1, P, 1};
    ladle_partition *pc = lt_partition(4, grid, 0);
    int64_t xc[4] = {2, 2, 8, 6};
    for (int k = 0; k < 3; k++) {
        ladle_op *a = NULL, *b = NULL;
        for (int t = 0; t < 2; t++) {
            ladle_op **o = t ? &b : &a;
            if (k == 0)
                LT_OK(ladle_dist_linear_create(
                    LT_LINEAR(5, 7, 1, 0),
                    &(ladle_dist_partitions){.x = px, .w = pw, .y = py}, (int64_t[]){3, 5},
                    LADLE_F64, lt_device(), 2, o));
            if (k == 1) {
                ladle_conv_desc d;
                ladle_conv_desc_init(&d, 2, 2, 3, 3);
                d.padding[0] = d.padding[1] = 1;
                LT_OK(ladle_dist_conv_create(&d, pc, xc, LADLE_F64, lt_device(), 5, o));
            }
            if (k == 2) {
                ladle_batchnorm_desc d;
                ladle_batchnorm_desc_init(&d, 2);
                LT_OK(ladle_dist_batchnorm_create(&d, pc, xc, LADLE_F64, lt_device(), o));
            }
        }
        bound_trains_alike(a, b, k == 0   ? "distributed linear"
                                 : k == 1 ? "distributed conv (replicated weights)"
                                          : "distributed batch norm");
    }
    ladle_partition_destroy(&px);
    ladle_partition_destroy(&pw);
    ladle_partition_destroy(&py);
    ladle_partition_destroy(&pc);
}
END_TEST

START_TEST(bind_refusals)
{
    int64_t xl[2] = {4, 6}, n = 31;
    ladle_op *op = NULL, *act = NULL;
    LT_OK(ladle_linear_create(LT_LINEAR(xl[1], 5, 1, 0), 2, xl, LADLE_F64, lt_device(), 3,
                              &op));
    LT_OK(ladle_activation_create(LADLE_RELU, 0, 2, xl, LADLE_F64, lt_device(), &act));
    ladle_tensor *buf = lt_tensor(LADLE_F64, 1, &n);
    char *mem = ladle_tensor_data(buf);
    LT_FAILS(ladle_op_bind_param(NULL, 0, mem, NULL), LADLE_ERR_NULL);
    LT_FAILS(ladle_op_bind_param(op, 2, mem, NULL), LADLE_ERR_ARG);
    LT_FAILS(ladle_op_bind_param(op, -1, mem, NULL), LADLE_ERR_ARG);
    LT_FAILS(ladle_op_bind_param(act, 0, mem, NULL), LADLE_ERR_ARG);
    LT_FAILS(ladle_op_bind_param(op, 0, NULL, NULL), LADLE_ERR_NULL);
    LT_FAILS(ladle_op_bind_param(op, 0, mem + 1, NULL), LADLE_ERR_ARG); /* misaligned */
    LT_FAILS(ladle_op_bind_param(op, 0, mem, mem), LADLE_ERR_ARG);
    /* nothing changed: the weight is still ladle's */
    LT_ASSERT(ladle_tensor_data(ladle_op_param(op, 0)) != mem, "a refused bind took the buffer");
    ladle_op_destroy(&op);
    ladle_op_destroy(&act);
    ladle_tensor_destroy(&buf);
}
END_TEST

/* A max pooling's context (its winners) in caller memory gives the same
 * backward. */
START_TEST(context_in_caller_memory)
{
    int64_t xc[4] = {2, 3, 6, 6};
    ladle_pool_desc d;
    ladle_pool_desc_init(&d, LADLE_POOL_MAX, 2, 2);
    ladle_op *op = NULL, *seq = NULL, *lin = NULL;
    LT_OK(ladle_pool_create(&d, xc, LADLE_F64, lt_device(), &op));
    size_t need = ladle_ctx_bytes(op);
    int host_state = lt_device() == LADLE_CPU;
    LT_ASSERT(host_state ? need > 0 : need == 0, "ctx bytes %zu on %s", need,
              ladle_device_name(lt_device()));
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1), *dy = lt_op_tensor(op, 1);
    ladle_tensor *dxa = lt_op_tensor(op, 0), *dxb = lt_op_tensor(op, 0);
    LT_OK(ladle_tensor_fill_random(x, 1, 0));
    LT_OK(ladle_tensor_fill_random(dy, 2, 0));
    ladle_ctx *ca = NULL, *cb = NULL;
    void *mem = NULL;
    LT_OK(ladle_ctx_create(op, &ca));
    LT_OK(ladle_layer_forward(op, ca, x, y));
    LT_OK(ladle_layer_backward(op, ca, dy, dxa));
    if (host_state) {
        LT_ASSERT(posix_memalign(&mem, 64, need) == 0, "memory");
        LT_FAILS(ladle_ctx_create_in(op, mem, need - 1, &cb), LADLE_ERR_ARG);
        LT_FAILS(ladle_ctx_create_in(op, (char *)mem + 8, need, &cb), LADLE_ERR_ARG);
        LT_OK(ladle_ctx_create_in(op, mem, need, &cb));
        LT_OK(ladle_layer_forward(op, cb, x, y));
        LT_OK(ladle_layer_backward(op, cb, dy, dxb));
        LT_ASSERT(max_diff(dxa, dxb) == 0.0, "the caller's ctx gives another backward");
        LT_OK(ladle_ctx_destroy(&cb));
        LT_ASSERT(cb == NULL, "destroy keeps the handle");
        free(mem); /* still the caller's: ladle freed none of it */
    } else {
        char small[256];
        LT_FAILS(ladle_ctx_create_in(op, small, sizeof small, &cb), LADLE_ERR_UNSUPPORTED);
    }
    /* the message names the size needed */
    if (host_state) {
        char small[64] __attribute__((aligned(64)));
        ladle_status st = ladle_ctx_create_in(op, small, sizeof small, &cb);
        char want[32];
        snprintf(want, sizeof want, "needs %zu", need);
        LT_ASSERT(st == LADLE_ERR_ARG && strstr(ladle_error_message(), want), "%s",
                  ladle_error_message());
    }
    /* containers' contexts hold more than one block */
    LT_OK(ladle_linear_create(LT_LINEAR(3, 3, 1, 0), 2, (int64_t[]){2, 3}, LADLE_F64,
                              lt_device(), 1, &lin));
    LT_OK(ladle_sequential_create(1, &lin, &seq));
    LT_ASSERT(ladle_ctx_bytes(seq) == 0, "a sequential's ctx in caller memory");
    char buf[4096] __attribute__((aligned(64)));
    LT_FAILS(ladle_ctx_create_in(seq, buf, sizeof buf, &cb), LADLE_ERR_UNSUPPORTED);
    ladle_ctx_destroy(&ca);
    ladle_tensor *ts[5] = {x, y, dy, dxa, dxb};
    for (int i = 0; i < 5; i++)
        ladle_tensor_destroy(&ts[i]);
    ladle_op_destroy(&op);
    ladle_op_destroy(&seq);
}
END_TEST

/* A broadcast's workspace in caller memory gives the same results. */
START_TEST(workspace_in_caller_memory)
{
    int one = 1, all = lt_size;
    int64_t shape[2] = {5, 7};
    ladle_partition *pr = lt_partition(1, &one, 0), *pa = lt_partition(1, &all, 0);
    ladle_op *a = NULL, *b = NULL;
    LT_OK(
        ladle_sum_reduce_create(LT_BCAST(2, shape, 0), pa, pr, LADLE_F64, lt_device(), &a));
    LT_OK(
        ladle_sum_reduce_create(LT_BCAST(2, shape, 0), pa, pr, LADLE_F64, lt_device(), &b));
    size_t need = ladle_op_workspace_bytes(b);
    /* the size differs by rank: each checks alone, then all assert */
    ladle_tensor *ws = NULL;
    ladle_status small = LADLE_ERR_ARG, none = LADLE_ERR_NULL, fits;
    if (need > 0) {
        int64_t n = (int64_t)(need / 8 + 1);
        /* not lt_tensor, which would assert on these ranks alone */
        small = ladle_tensor_create(LADLE_F64, lt_device(), 1, &n, &ws);
        if (small == LADLE_OK) {
            small = ladle_op_set_workspace(b, ladle_tensor_data(ws), need - 1);
            none = ladle_op_set_workspace(b, NULL, need);
        }
    }
    fits = ladle_op_set_workspace(b, ws ? ladle_tensor_data(ws) : NULL, need);
    LT_ASSERT(small == LADLE_ERR_ARG && none == LADLE_ERR_NULL && fits == LADLE_OK,
              "workspace of %zu bytes: %s %s %s", need, ladle_status_name(small),
              ladle_status_name(none), ladle_status_name(fits));
    ladle_tensor *x = lt_op_tensor(a, 0), *ya = lt_op_tensor(a, 1), *yb = lt_op_tensor(a, 1);
    ladle_tensor *dxa = lt_op_tensor(a, 0), *dxb = lt_op_tensor(a, 0);
    LT_OK(ladle_tensor_fill_random(x, 3, (uint64_t)lt_rank));
    LT_OK(ladle_op_forward(a, x, ya));
    LT_OK(ladle_op_forward(b, x, yb));
    LT_OK(ladle_op_adjoint(a, ya, dxa));
    LT_OK(ladle_op_adjoint(b, yb, dxb));
    LT_ASSERT(max_diff(ya, yb) == 0.0 && max_diff(dxa, dxb) == 0.0,
              "the caller's workspace gives other results");
    lt_adjoint_ok(b, 4, "sum-reduce on the caller's workspace");
    ladle_tensor *ts[5] = {x, ya, yb, dxa, dxb};
    for (int i = 0; i < 5; i++)
        ladle_tensor_destroy(&ts[i]);
    ladle_op_destroy(&a);
    ladle_op_destroy(&b);
    ladle_tensor_destroy(&ws); /* after the op: ladle never freed it */
    ladle_partition_destroy(&pr);
    ladle_partition_destroy(&pa);
}
END_TEST

/* Everything made under the hook is allocated and freed through it (also
 * after the hook is gone), and the calls allocate nothing. */
START_TEST(allocator_hook)
{
    /* static: an assertion that fails while the hook is set leaves the
     * test, and the hook must still point at a live counter */
    static lt_counter c;
    c.allocs = c.frees = 0;
    ladle_allocator a = {sizeof a, lt_count_alloc, lt_count_free, &c}, bad = a;
    bad.size = 8;
    LT_FAILS(ladle_allocator_set(&bad), LADLE_ERR_ARG);
    bad = a;
    bad.free = NULL;
    LT_FAILS(ladle_allocator_set(&bad), LADLE_ERR_NULL);
    LT_OK(ladle_allocator_set(&a));
    int one = 1, all = lt_size;
    int64_t shape[1] = {9}, xl[2] = {4, 6};
    ladle_partition *pr = lt_partition(1, &one, 0), *pa = lt_partition(1, &all, 0);
    ladle_op *bc = NULL, *lin = NULL;
    LT_OK(
        ladle_broadcast_create(LT_BCAST(1, shape, 0), pr, pa, LADLE_F64, lt_device(), &bc));
    LT_OK(ladle_linear_create(LT_LINEAR(xl[1], 5, 1, 0), 2, xl, LADLE_F64, lt_device(), 3,
                              &lin));
    ladle_tensor *x = lt_op_tensor(bc, 0), *y = lt_op_tensor(bc, 1), *lx = lt_op_tensor(lin, 0);
    ladle_tensor *ly = lt_op_tensor(lin, 1), *ldx = lt_op_tensor(lin, 0);
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_ctx_create(lin, &ctx));
    long made = c.allocs, freed = c.frees;
    for (int k = 0; k < 2; k++) {
        LT_OK(ladle_op_forward(bc, x, y));
        LT_OK(ladle_op_adjoint(bc, y, x));
        LT_OK(ladle_layer_forward(lin, ctx, lx, ly));
        LT_OK(ladle_layer_backward(lin, ctx, ly, ldx));
        LT_OK(ladle_layer_backward_weight(lin, ctx, ly));
    }
    long calls_alloc = c.allocs - made, calls_free = c.frees - freed;
    /* the hook goes before any assertion: one that fails leaves the test
     * and its counter behind */
    LT_OK(ladle_allocator_set(NULL));
    LT_ASSERT(made > freed && freed >= 0, "the hook saw %ld allocations, %ld frees", made,
              freed);
    LT_ASSERT(calls_alloc == 0 && calls_free == 0, "the calls allocated %ld and freed %ld",
              calls_alloc, calls_free);
    ladle_tensor *other = lt_op_tensor(lin, 0); /* ladle's own again */
    LT_ASSERT(c.allocs == made, "an allocation after the hook was removed");
    ladle_tensor_destroy(&other);
    ladle_ctx_destroy(&ctx);
    ladle_tensor *ts[5] = {x, y, lx, ly, ldx};
    for (int i = 0; i < 5; i++)
        ladle_tensor_destroy(&ts[i]);
    ladle_op_destroy(&bc);
    ladle_op_destroy(&lin);
    ladle_partition_destroy(&pr);
    ladle_partition_destroy(&pa);
    LT_ASSERT(c.frees == c.allocs, "%ld allocations but %ld frees", c.allocs, c.frees);
}
END_TEST

/* Strided views: the element-wise calls take them, ops refuse them with
 * the reason, and a copy makes them usable. */
START_TEST(strided_views)
{
    int64_t xl[2] = {4, 6}, big[2] = {4, 9}, strides[2] = {9, 1};
    ladle_op *lin = NULL;
    LT_OK(ladle_linear_create(LT_LINEAR(xl[1], 5, 1, 0), 2, xl, LADLE_F64, lt_device(), 3,
                              &lin));
    ladle_tensor *store = lt_tensor(LADLE_F64, 2, big), *view = NULL;
    ladle_tensor *x = lt_op_tensor(lin, 0), *y = lt_op_tensor(lin, 1);
    LT_OK(ladle_tensor_fill_random(store, 5, 0));
    /* the first 6 of every row of 9: a column slice */
    LT_OK(ladle_tensor_wrap(LADLE_F64, lt_device(), 2, xl, strides, ladle_tensor_data(store),
                            &view));
    ladle_status st = ladle_op_forward(lin, view, y);
    LT_ASSERT(st == LADLE_ERR_ARG && strstr(ladle_error_message(), "not contiguous"), "%s: %s",
              ladle_status_name(st), ladle_error_message());
    LT_OK(ladle_tensor_copy(x, view));
    LT_ASSERT(lt_get(x, 6) == lt_get(store, 9) && lt_get(x, 23) == lt_get(store, 32),
              "the copy of the view");
    LT_OK(ladle_op_forward(lin, x, y));
    LT_DESTROY(&view, &store, &x, &y);
    ladle_op_destroy(&lin);
}
END_TEST

LT_SUITE("memory", "memory", 120, bind_sequential_layers, bind_distributed_layers,
         bind_refusals, context_in_caller_memory, workspace_in_caller_memory,
         allocator_hook, strided_views)
