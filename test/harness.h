/*
 * Test harness for ladle's Check programs under MPI.
 *
 * Check runs without forking (a forked child is not an MPI process), only
 * rank 0 prints Check's report, and every assertion is collective: each
 * rank evaluates its condition, the verdicts are combined, and every rank
 * fails the test together, so one bad rank never leaves the others waiting
 * in a collective.
 */
#ifndef LADLE_TEST_HARNESS_H
#define LADLE_TEST_HARNESS_H

#include <check.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ladle.h"

/* World rank and size, set by lt_main. */
extern int lt_rank, lt_size;

/* Collective assertion: fails on every rank if cond is false on any rank.
 * The failing ranks print the formatted detail to stderr. */
void lt_assert_all(int ok, const char *file, int line, const char *expr, const char *fmt,
                   ...);
#define LT_ASSERT(cond, ...)                                                               \
    lt_assert_all((cond) ? 1 : 0, __FILE__, __LINE__, #cond, __VA_ARGS__)

/* Collective: the call must return LADLE_OK on every rank. */
#define LT_OK(expr)                                                                        \
    do {                                                                                   \
        ladle_status lt_st_ = (expr);                                                      \
        lt_assert_all(lt_st_ == LADLE_OK, __FILE__, __LINE__, #expr, "%s: %s",             \
                      ladle_status_name(lt_st_), ladle_error_message());                   \
    } while (0)

/* Collective: the call must return `code` on every rank, with a message. */
#define LT_FAILS(expr, code)                                                               \
    do {                                                                                   \
        ladle_status lt_st_ = (expr);                                                      \
        lt_assert_all(lt_st_ == (code) && ladle_error_message()[0] != '\0', __FILE__,      \
                      __LINE__, #expr, "returned %s (%s), expected %s",                    \
                      ladle_status_name(lt_st_), ladle_error_message(), #code);            \
        ladle_error_clear();                                                               \
    } while (0)

/* LT_FAILS, and the message holds what (a piece of the text), on every rank. */
#define LT_FAILS_SAYING(expr, code, what)                                                  \
    do {                                                                                   \
        ladle_status lt_st_ = (expr);                                                      \
        const char *lt_msg_ = ladle_error_message();                                       \
        lt_assert_all(lt_st_ == (code) && strstr(lt_msg_, (what)) != NULL, __FILE__,       \
                      __LINE__, #expr, "returned %s (%s), expected %s saying '%s'",        \
                      ladle_status_name(lt_st_), lt_msg_, #code, (what));                  \
        ladle_error_clear();                                                               \
    } while (0)

/* A partition of MPI_COMM_WORLD over ranks first .. first+prod(shape)-1. */
ladle_partition *lt_partition(int ndim, const int *shape, int first);

/* A partition over an explicit rank list. */
ladle_partition *lt_partition_ranks(int ndim, const int *shape, const int *ranks);

/* The device the suite runs on: LADLE_TEST_DEVICE, a name as
 * ladle_device_name gives it ("cpu" when unset), read once. lt_main fails
 * the program for a name ladle does not know or a device it was built
 * without. Every op a test creates, and every tensor it hands one, lives
 * there: a test never reaches the data of such a tensor but through
 * lt_get/lt_set or ladle_tensor_read/write. */
ladle_device lt_device(void);

/* The ranks of a grid of ndim extents (their product). */
int lt_ranks_of(int ndim, const int *grid);

/* A tensor of dtype and shape on lt_device() (local, not collective). */
ladle_tensor *lt_tensor(ladle_dtype dtype, int ndim, const int64_t *shape);

/* ladle_tensor_destroy on each handle listed: LT_DESTROY(&x, &y, &dx). */
void lt_destroy_tensors(size_t n, ladle_tensor **const *handles);
#define LT_DESTROY(...)                                                                    \
    lt_destroy_tensors(sizeof((ladle_tensor **[]){__VA_ARGS__}) / sizeof(ladle_tensor **), \
                       (ladle_tensor **[]){__VA_ARGS__})

/* ladle_op_destroy and ladle_partition_destroy on each handle listed, in
 * order: LT_DESTROY_OPS(&dist, &seq), LT_DESTROY_PARTS(&px, &py). */
void lt_destroy_ops(size_t n, ladle_op **const *handles);
void lt_destroy_partitions(size_t n, ladle_partition **const *handles);
#define LT_DESTROY_OPS(...)                                                                \
    lt_destroy_ops(sizeof((ladle_op **[]){__VA_ARGS__}) / sizeof(ladle_op **),             \
                   (ladle_op **[]){__VA_ARGS__})
#define LT_DESTROY_PARTS(...)                                                              \
    lt_destroy_partitions(sizeof((ladle_partition **[]){__VA_ARGS__}) /                    \
                              sizeof(ladle_partition **),                                  \
                          (ladle_partition **[]){__VA_ARGS__})

/* A test that needs n ranks at least returns here (passing) at fewer: every
 * rank sees the same lt_size, so all return alike. */
#define LT_NEED_RANKS(n)                                                                   \
    do {                                                                                   \
        if (lt_size < (n))                                                                 \
            return;                                                                        \
    } while (0)

/* A tensor shaped as the op's x (which = 0) or y (which = 1) on this rank,
 * on lt_device(). */
ladle_tensor *lt_op_tensor(const ladle_op *op, int which);

/* Element i (row-major) of a tensor as a double, and setting it, through
 * ladle_tensor_get/set: one transfer per call, so meant for a few
 * elements (the box helpers below move whole tensors). A failing access
 * (an index out of range) aborts the job. */
double lt_get(const ladle_tensor *t, int64_t i);
void lt_set(ladle_tensor *t, int64_t i, double v);

/* All of a contiguous tensor's elements as host doubles (malloc'd, one
 * more than numel so that an empty tensor gives a pointer; the caller
 * frees), and storing such an array back: one transfer each, for the loops
 * over whole tensors (on a GPU an element's transfer costs about 10 us).
 * A failing transfer aborts the job. */
double *lt_values(const ladle_tensor *t);
void lt_store(ladle_tensor *t, const double *v);

/* A layer and its twin in another dtype (ops[0], ops[1], of the same
 * shapes) on the same values: ops[1] takes ops[0]'s parameters; t[k] is
 * {x, y, dy, dx} of shape xs in ops[k]'s dtype, x random from seed (then
 * element i's value v made xmap(i, v, arg) unless xmap is NULL) and dy
 * random, in t[0] and copied, rounded to its dtype, into t[1]; each op
 * runs forward, backward and backward_weight with its own ctx[k].
 * lt_twin_free destroys the ctxs, the tensors and the ops. */
void lt_twin_run(ladle_op *ops[2], int ndim, const int64_t *xs, uint64_t seed,
                 double (*xmap)(int64_t i, double v, const void *arg), const void *arg,
                 ladle_tensor *t[2][4], ladle_ctx *ctx[2]);
void lt_twin_free(ladle_op *ops[2], ladle_tensor *t[2][4], ladle_ctx *ctx[2]);

/* Run the dot-product test on op and assert the mismatch is within the
 * dtype's tolerance on every rank. */
void lt_adjoint_ok(ladle_op *op, uint64_t seed, const char *what);

/* lt_adjoint_ok on each of n cases, in f64 and then in f32: make builds
 * case k's op in a dtype and names it, or returns NULL for a case that does
 * not run at this world size (alike on every rank); case k's seed is
 * seed + k. Collective over the world. */
typedef ladle_op *lt_case_make(int k, ladle_dtype dtype, const char **name);
void lt_adjoint_cases(int n, lt_case_make *make, uint64_t seed);

/* A layer's pass against a reference written in the test: with x and dy
 * filled (shapes of the op's x and y), forward, backward_weight, backward
 * and backward_weight again (so the gradients accumulate twice) on a fresh
 * ctx; ref(arg, x, dy, y, dx, grads) works out in double, from x and dy on
 * the host, the layer's y, dx and each parameter i's gradient grads[i]
 * (numel of parameter i, allocated here). The worst of |y - ref| /
 * (1 + |ref|), the same for dx and for each gradient against twice its
 * reference, and 1 where a forward without a ctx differs from y. Local. */
typedef void lt_layer_reference(const void *arg, const double *x, const double *dy,
                                double *y, double *dx, double *const *grads);
double lt_layer_pass(ladle_op *op, ladle_tensor *x, ladle_tensor *y, ladle_tensor *dy,
                     ladle_tensor *dx, lt_layer_reference *ref, const void *arg);

/* A batch of none does nothing and fails nothing: forward, backward and
 * backward_weight of op on x and y of shape (its first extent 0). */
void lt_layer_empty_batch(ladle_op *op, int ndim, const int64_t *shape);

/* Whether two tensors of one numel hold the same values, bit for bit. */
int lt_same_values(const ladle_tensor *a, const ladle_tensor *b);

/* Two contexts of a layer in flight keep their own saved state: on f64
 * tensors of shape xs (three extents; the op's x and y alike), x1 runs forward and
 * backward through c1 (into dxa), x2 forward through c2, then (again
 * nonzero) x1 forward through c1 once more, and c1's backward (into dxb)
 * must give dxa bit for bit ("a ctx's backward is its own forward's").
 * The tensors and contexts stay in p for more checks; the verdict is
 * returned. Local. */
typedef struct lt_ctx_pair {
    ladle_tensor *x1, *x2, *y, *dy, *dxa, *dxb;
    ladle_ctx *c1, *c2;
} lt_ctx_pair;
int lt_ctx_pair_run(ladle_op *op, const int64_t *xs, int again, lt_ctx_pair *p);
/* A ctx in ladle_ctx_bytes of caller memory gives p's dxa for x1 too;
 * asserted with same (an earlier verdict) folded in, and returned. */
int lt_ctx_in_caller_memory(ladle_op *op, lt_ctx_pair *p, int same);
void lt_ctx_pair_free(lt_ctx_pair *p);

/* A sequential of n layers against its parts run by hand: parts (n ops)
 * run forward on x, backward from dy down to the first part's dx (to the
 * second part's, when with_dx is 0: a first part whose x is ids), then
 * their weight passes after a zero_grad; seq (made of twins of the parts,
 * their parameters in order) runs the same on x and dy. The largest
 * |difference| over y, dx (with_dx) and every weight gradient. Local. */
double lt_chain_error(int n, ladle_op *const *parts, ladle_op *seq, const ladle_tensor *x,
                      const ladle_tensor *dy, int with_dx);

/* A counting allocator for a ladle_allocator's slots, user an lt_counter:
 * CPU memory only (a request for another device gets NULL), the blocks
 * allocated and freed and the bytes allocated. */
typedef struct lt_counter {
    long allocs, frees;
    size_t bytes;
} lt_counter;
void *lt_count_alloc(void *user, size_t bytes, size_t align, ladle_device device);
void lt_count_free(void *user, void *ptr, size_t bytes, ladle_device device);

/* A fresh ctx of op (the caller destroys it) after forward x -> y and
 * backward dy -> dx through it, each call asserted LADLE_OK. */
ladle_ctx *lt_forward_backward(ladle_op *op, const ladle_tensor *x, ladle_tensor *y,
                               const ladle_tensor *dy, ladle_tensor *dx);

/* One training step of net with opt: zero_grad, forward of x, the loss
 * against the targets t into *loss, backward and the optimizer's step,
 * each asserted LADLE_OK. Collective over the network's ranks. */
void lt_train_step(ladle_network *net, ladle_optimizer *opt, const ladle_tensor *x,
                   const ladle_tensor *t, double *loss);

/* ladle_lenet_desc_init, then a batch of n images of s x s in f64 on
 * lt_device(), parameters from seed. */
void lt_lenet_desc(ladle_lenet_desc *d, int64_t n, int64_t s, uint64_t seed);

/* A layer's forward through ctx into y refuses no x (LADLE_ERR_NULL), x
 * of a wrong shape and of a batch too large (LADLE_ERR_SHAPE), x of
 * another dtype (LADLE_ERR_DTYPE) and y being x (LADLE_ERR_ARG: not in
 * place); each on every rank, with a message. */
void lt_forward_refuses(ladle_op *op, ladle_ctx *ctx, ladle_tensor *x, ladle_tensor *y,
                        const ladle_tensor *wrong, const ladle_tensor *big,
                        const ladle_tensor *other_dtype);

/* Distributed layers against their sequential twins. */

/* Copy the box at offset (the box's shape is local's) out of a contiguous
 * global tensor into local; the largest |local - global box| / (1 + |global|)
 * after a computation. Local, not collective. */
void lt_box_extract(const ladle_tensor *global, const int64_t *offset, ladle_tensor *local);
/* Random parameters for seq (parameter i from stream i of seed) and the
 * same values in dist: each rank's shard of seq's parameter i copied into
 * dist's (parameters of one dimension, as the norms' gamma and beta). */
void lt_share_params(ladle_op *dist, ladle_op *seq, uint64_t seed);
double lt_box_error(const ladle_tensor *global, const int64_t *offset,
                    const ladle_tensor *local);

/* The equivalence test: the same random global x and dy on every rank; the
 * distributed layer runs on this rank's boxes (its x and y layouts), the
 * sequential layer (same seed) on the global tensors; y, dx, the initial
 * weights and the synced weight gradients must agree to tol on every rank
 * (each compared with its box). Collective over the world. */
void lt_equivalent(ladle_op *dist, ladle_op *seq, uint64_t seed, double tol, const char *what);
/* Two layers that must be one (a deprecated name and its replacement, say),
 * sequential or distributed alike: the same initial weights and, on the
 * same random x and dy of this rank, the same y, dx and weight gradients,
 * bit for bit. Collective over the layers' ranks. */
void lt_same_layer(ladle_op *a, ladle_op *b, uint64_t seed, const char *what);

/* The test program's entry: MPI_Init, the suite, a global verdict. */
int lt_main(int argc, char **argv, Suite *(*make_suite)(void));

/* The suite of a test program, of one test case as every program here
 * has: the suite's name, its test case's, the test case's timeout in
 * seconds (0: none; LT_CHECK_TIMEOUT leaves Check's default) and its tests,
 * run in the order given (LT_TESTS(a, b, ...) writes the last two
 * arguments). *tc, unless tc is NULL, is the test case, for a suite that
 * adds a fixture to it. */
#define LT_CHECK_TIMEOUT (-1)
Suite *lt_suite(const char *name, const char *tcase, int timeout, TCase **tc, size_t ntests,
                const TTest *const *tests);
#define LT_TESTS(...)                                                                      \
    sizeof((const TTest *[]){__VA_ARGS__}) / sizeof(const TTest *), (const TTest *[])      \
    {                                                                                      \
        __VA_ARGS__                                                                        \
    }

/* main of the program that runs the suite make_suite makes. */
#define LT_MAIN(make_suite)                                                                \
    int main(int argc, char **argv) { return lt_main(argc, argv, (make_suite)); }

/* A program's suite (lt_suite, no fixture) and its main, in one: the
 * suite's name, its test case's, the timeout, then the tests. */
#define LT_SUITE(name, tcase, timeout, ...)                                                \
    static Suite *lt_make_suite_(void)                                                     \
    {                                                                                      \
        return lt_suite((name), (tcase), (timeout), NULL, LT_TESTS(__VA_ARGS__));          \
    }                                                                                      \
    LT_MAIN(lt_make_suite_)

/* The descriptors of the primitives in one expression, for tests that make
 * many (a compound literal: what ladle_*_desc_init sets, with the flags;
 * test_broadcast and test_all_sum_reduce check the _init calls themselves). */
#define LT_BCAST(ndim, shape, flags)                                                       \
    (&(ladle_broadcast_desc){sizeof(ladle_broadcast_desc), (ndim), (shape), (flags)})
#define LT_ASR(naxes, axes, ndim, shape, flags)                                            \
    (&(ladle_all_sum_reduce_desc){sizeof(ladle_all_sum_reduce_desc), (naxes), (axes),      \
                                  (ndim), (shape), (flags)})
/* A ladle_linear_desc in place: &(in -> out features, bias nonzero: with a
 * bias, flags). */
#define LT_LINEAR(in, out, bias, flags)                                                    \
    (&(ladle_linear_desc){sizeof(ladle_linear_desc), (in), (out), (bias), (flags)})

/* A loss's descriptor likewise: what ladle_loss_desc_init sets (no weights,
 * no ignored label), with the smoothing and the flags; test_loss checks the
 * _init call itself. */
#define LT_LOSS(kind, reduction, smoothing, flags)                                         \
    (&(ladle_loss_desc){sizeof(ladle_loss_desc), (kind), (reduction), (smoothing),         \
                        LADLE_LOSS_NO_IGNORE, NULL, 0, (flags)})

/* Around a test of a deprecated wrapper (include/ladle/deprecated.h): the
 * call is meant, so its warning is silenced there and nowhere else. */
#define LT_DEPRECATED_BEGIN                                                                \
    _Pragma("GCC diagnostic push")                                                         \
        _Pragma("GCC diagnostic ignored \"-Wdeprecated-declarations\"")
#define LT_DEPRECATED_END _Pragma("GCC diagnostic pop")

#endif /* LADLE_TEST_HARNESS_H */
