/* Status codes, version, tensors, layouts: the local parts of the core. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

START_TEST(status_strings)
{
    LT_ASSERT(strcmp(ladle_status_string(LADLE_OK), "success") == 0, "OK text");
    LT_ASSERT(strcmp(ladle_status_name(LADLE_ERR_SHAPE), "LADLE_ERR_SHAPE") == 0, "name");
    LT_ASSERT(strcmp(ladle_status_string((ladle_status)999), "unknown status") == 0, "?");
    /* every listed status has a distinct, non-empty description */
    static const ladle_status all[] = {
#define LIST_(name, value, text) name,
        LADLE_STATUS_LIST(LIST_)
#undef LIST_
    };
    int n = (int)(sizeof all / sizeof all[0]), distinct = 1;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            distinct &=
                strcmp(ladle_status_string(all[i]), ladle_status_string(all[j])) != 0;
    LT_ASSERT(distinct && n >= 12, "%d statuses, distinct %d", n, distinct);
}
END_TEST

START_TEST(version)
{
    LT_ASSERT(strcmp(ladle_version(), LADLE_VERSION_STRING) == 0, "%s", ladle_version());
    LT_ASSERT(ladle_version_number() == LADLE_VERSION_MAJOR * 10000 +
                                            LADLE_VERSION_MINOR * 100 + LADLE_VERSION_PATCH,
              "%d", ladle_version_number());
}
END_TEST

START_TEST(error_message_names_rank_and_function)
{
    ladle_tensor *t = NULL;
    int64_t shape[2] = {3, -1};
    LT_FAILS(ladle_tensor_create(LADLE_F64, LADLE_CPU, 2, shape, &t), LADLE_ERR_SHAPE);
    ladle_tensor_create(LADLE_F64, LADLE_CPU, 2, shape, &t);
    char want[64];
    snprintf(want, sizeof want, "[rank %d] ladle_tensor_create", lt_rank);
    LT_ASSERT(strncmp(ladle_error_message(), want, strlen(want)) == 0, "'%s'",
              ladle_error_message());
    LT_ASSERT(t == NULL, "output set on failure");
    ladle_error_clear();
    LT_ASSERT(ladle_error_message()[0] == '\0', "cleared");
}
END_TEST

START_TEST(tensor_create_and_accessors)
{
    int64_t shape[3] = {2, 3, 4};
    ladle_tensor *t = lt_tensor(LADLE_F32, 3, shape);
    const int64_t *s = ladle_tensor_shape(t), *st = ladle_tensor_strides(t);
    LT_ASSERT(ladle_tensor_ndim(t) == 3 && s[0] == 2 && s[1] == 3 && s[2] == 4, "shape");
    LT_ASSERT(st[0] == 12 && st[1] == 4 && st[2] == 1, "row-major strides");
    LT_ASSERT(ladle_tensor_numel(t) == 24 && ladle_tensor_dtype(t) == LADLE_F32, "numel");
    LT_ASSERT(ladle_tensor_device(t) == lt_device() && ladle_tensor_is_contiguous(t), "device");
    int zeros = 1;
    for (int i = 0; i < 24; i++)
        zeros &= lt_get(t, i) == 0.0;
    LT_ASSERT(zeros, "created zeroed");
    LT_OK(ladle_tensor_fill(t, 2.5));
    double dot = 0;
    LT_OK(ladle_tensor_dot(t, t, &dot));
    LT_ASSERT(dot == 24 * 6.25, "dot %g", dot);
    LT_OK(ladle_tensor_destroy(&t));
    LT_ASSERT(t == NULL, "destroy nulls the handle");
    LT_OK(ladle_tensor_destroy(&t));
    LT_OK(ladle_tensor_destroy(NULL));
    LT_DEPRECATED_BEGIN
    ladle_tensor *old = NULL;
    LT_OK(ladle_tensor_create_on(LADLE_F32, lt_device(), 3, shape, &old));
    LT_ASSERT(ladle_tensor_device(old) == lt_device() && ladle_tensor_numel(old) == 24 &&
                  ladle_tensor_shape(old)[1] == 3,
              "the deprecated _on call makes the same tensor");
    LT_FAILS(ladle_tensor_create_on(LADLE_F32, lt_device(), 3, (int64_t[]){2, -1, 4}, &old),
             LADLE_ERR_SHAPE);
    LT_DEPRECATED_END
    LT_OK(ladle_tensor_destroy(&old));
}
END_TEST

START_TEST(tensor_zero_volume_and_scalar)
{
    int64_t shape[2] = {5, 0};
    ladle_tensor *z = lt_tensor(LADLE_F64, 2, shape), *s = lt_tensor(LADLE_F64, 0, NULL);
    LT_ASSERT(ladle_tensor_numel(z) == 0 && ladle_tensor_data(z) == NULL, "zero volume");
    LT_ASSERT(ladle_tensor_is_contiguous(z), "zero volume is contiguous");
    LT_ASSERT(ladle_tensor_numel(s) == 1, "a scalar has one element");
    LT_OK(ladle_tensor_fill(z, 1.0));
    double d = -1;
    LT_OK(ladle_tensor_dot(z, z, &d));
    LT_ASSERT(d == 0.0, "dot of nothing");
    ladle_tensor_destroy(&z);
    ladle_tensor_destroy(&s);
}
END_TEST

START_TEST(tensor_wrap_strided)
{
    /* a 3x2 view with strides (4, 2) into a 12-element buffer */
    double buf[12];
    for (int i = 0; i < 12; i++)
        buf[i] = i;
    int64_t shape[2] = {3, 2}, strides[2] = {4, 2};
    /* host memory wrapped on the cpu, copied into a cpu tensor: a strided
     * copy does not cross devices, and the test reads buf directly */
    ladle_tensor *v = NULL, *c = NULL;
    LT_OK(ladle_tensor_create(LADLE_F64, LADLE_CPU, 2, shape, &c));
    LT_OK(ladle_tensor_wrap(LADLE_F64, LADLE_CPU, 2, shape, strides, buf, &v));
    LT_ASSERT(!ladle_tensor_is_contiguous(v), "strided view");
    LT_OK(ladle_tensor_copy(c, v));
    const double want[6] = {0, 2, 4, 6, 8, 10};
    int same = 1;
    for (int i = 0; i < 6; i++)
        same &= lt_get(c, i) == want[i];
    LT_ASSERT(same, "copy of a strided view");
    LT_OK(ladle_tensor_fill(v, -1));
    LT_ASSERT(buf[0] == -1 && buf[1] == 1 && buf[2] == -1 && buf[10] == -1 && buf[11] == 11,
              "fill touches only the view");
    double other[12];
    LT_OK(ladle_tensor_set_data(v, other));
    LT_ASSERT(ladle_tensor_data(v) == other, "rewrapped");
    LT_FAILS(ladle_tensor_set_data(c, other), LADLE_ERR_ARG);
    ladle_tensor_destroy(&v);
    LT_ASSERT(buf[4] == -1, "destroying a wrapper leaves the memory alone");
    ladle_tensor_destroy(&c);
}
END_TEST

/* ladle_tensor_get/set: row-major indices whatever the strides, every
 * dtype through doubles, and refusals for an index outside the tensor, an
 * i64 value that is not an integer and a missing tensor. */
START_TEST(tensor_get_set)
{
    int64_t shape[2] = {2, 3};
    const ladle_dtype dts[3] = {LADLE_F32, LADLE_F64, LADLE_I64};
    for (int k = 0; k < 3; k++) {
        ladle_tensor *t = lt_tensor(dts[k], 2, shape);
        for (int64_t i = 0; i < 6; i++)
            LT_OK(ladle_tensor_set(t, i, (double)(3 * i - 7)));
        union {
            float f[6];
            double d[6];
            int64_t i[6];
        } h;
        double v = 0;
        LT_OK(ladle_tensor_read(t, &h));
        int ok = 1;
        for (int64_t i = 0; i < 6; i++) {
            double want = (double)(3 * i - 7);
            LT_OK(ladle_tensor_get(t, i, &v));
            ok &= v == want;
            ok &= dts[k] == LADLE_F32   ? h.f[i] == (float)want
                  : dts[k] == LADLE_F64 ? h.d[i] == want
                                        : h.i[i] == (int64_t)want;
        }
        LT_ASSERT(ok, "%s: set, get and read disagree", ladle_dtype_name(dts[k]));
        LT_FAILS(ladle_tensor_get(t, 6, &v), LADLE_ERR_ARG);
        LT_FAILS(ladle_tensor_get(t, -1, &v), LADLE_ERR_ARG);
        LT_FAILS(ladle_tensor_set(t, 6, 1.0), LADLE_ERR_ARG);
        LT_FAILS(ladle_tensor_set(t, -1, 1.0), LADLE_ERR_ARG);
        LT_FAILS(ladle_tensor_get(t, 0, NULL), LADLE_ERR_NULL);
        if (dts[k] == LADLE_I64) {
            LT_FAILS(ladle_tensor_set(t, 0, 0.5), LADLE_ERR_ARG);
            LT_FAILS(ladle_tensor_set(t, 0, NAN), LADLE_ERR_ARG);
            LT_FAILS(ladle_tensor_set(t, 0, 1e19), LADLE_ERR_ARG);
        }
        ladle_tensor_destroy(&t);
    }
    double v = 0;
    LT_FAILS(ladle_tensor_get(NULL, 0, &v), LADLE_ERR_NULL);
    LT_FAILS(ladle_tensor_set(NULL, 0, v), LADLE_ERR_NULL);
    /* a zero-volume tensor has no index at all */
    int64_t none[1] = {0};
    ladle_tensor *z = lt_tensor(LADLE_F64, 1, none);
    LT_FAILS(ladle_tensor_get(z, 0, &v), LADLE_ERR_ARG);
    ladle_tensor_destroy(&z);
    /* a strided view on host memory: index i is the i-th element in
     * row-major order, not the i-th of the buffer (a cpu wrap) */
    double buf[12] = {0};
    int64_t vs[2] = {3, 2}, str[2] = {4, 2};
    ladle_tensor *w = NULL;
    LT_OK(ladle_tensor_wrap(LADLE_F64, LADLE_CPU, 2, vs, str, buf, &w));
    LT_OK(ladle_tensor_set(w, 3, 9.0)); /* (1, 1): buffer element 4 + 2 */
    LT_OK(ladle_tensor_get(w, 3, &v));
    LT_ASSERT(buf[6] == 9.0 && v == 9.0, "strided element: buf[6] %g, got %g", buf[6], v);
    ladle_tensor_destroy(&w);
}
END_TEST

START_TEST(tensor_bad_input)
{
    ladle_tensor *t = NULL, *u = NULL;
    int64_t shape[2] = {2, 2}, other[2] = {2, 3};
    LT_FAILS(ladle_tensor_create(LADLE_F64, LADLE_CPU, 2, shape, NULL), LADLE_ERR_NULL);
    LT_FAILS(ladle_tensor_create((ladle_dtype)7, LADLE_CPU, 2, shape, &t), LADLE_ERR_ARG);
    LT_FAILS(ladle_tensor_create(LADLE_F64, LADLE_CPU, LADLE_MAX_NDIM + 1, shape, &t),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_tensor_create(LADLE_F64, LADLE_CPU, 2, NULL, &t), LADLE_ERR_NULL);
    LT_FAILS(ladle_tensor_wrap(LADLE_F64, LADLE_CPU, 2, shape, NULL, NULL, &t),
             LADLE_ERR_NULL);
    LT_ASSERT(t == NULL, "no tensor on failure");
    t = lt_tensor(LADLE_F64, 2, shape);
    u = lt_tensor(LADLE_F64, 2, other);
    double d;
    LT_FAILS(ladle_tensor_copy(t, u), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_tensor_dot(t, NULL, &d), LADLE_ERR_NULL);
    ladle_tensor_destroy(&u);
    u = lt_tensor(LADLE_F32, 2, shape);
    LT_FAILS(ladle_tensor_copy(t, u), LADLE_ERR_DTYPE);
    ladle_tensor_destroy(&t);
    ladle_tensor_destroy(&u);
}
END_TEST

START_TEST(tensor_random_is_counter_based)
{
    int64_t n8[1] = {8}, n4[1] = {4};
    ladle_tensor *a = lt_tensor(LADLE_F64, 1, n8), *b = lt_tensor(LADLE_F64, 1, n4);
    LT_OK(ladle_tensor_fill_random(a, 42, 7));
    LT_OK(ladle_tensor_fill_random(b, 42, 7));
    int same = 1, in_range = 1, distinct = 1;
    for (int i = 0; i < 4; i++)
        same &= lt_get(a, i) == lt_get(b, i);
    for (int i = 0; i < 8; i++) {
        in_range &= lt_get(a, i) >= -1.0 && lt_get(a, i) < 1.0;
        for (int j = 0; j < i; j++)
            distinct &= lt_get(a, i) != lt_get(a, j);
    }
    LT_ASSERT(same && in_range && distinct, "same=%d range=%d distinct=%d", same, in_range,
              distinct);
    LT_OK(ladle_tensor_fill_random(b, 43, 7));
    LT_ASSERT(lt_get(b, 0) != lt_get(a, 0), "the seed matters");
    ladle_tensor_destroy(&a);
    ladle_tensor_destroy(&b);
}
END_TEST

/* ladle_partition_create before MPI_Init, recorded by main */
static ladle_status before_init = LADLE_OK;
static char before_init_message[512];

START_TEST(mpi_not_initialised)
{
    LT_ASSERT(before_init == LADLE_ERR_STATE && strstr(before_init_message, "not initialised"),
              "before MPI_Init: %s (%s)", ladle_status_name(before_init), before_init_message);
}
END_TEST

typedef struct thread_call {
    ladle_status st;
    ladle_partition *p;
    char message[512];
} thread_call;

static void *create_in_thread(void *arg)
{
    thread_call *c = arg;
    c->st = ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 0, NULL, NULL, &c->p);
    snprintf(c->message, sizeof c->message, "%s", ladle_error_message());
    return NULL;
}

/* Below MPI_THREAD_SERIALIZED only MPI's main thread may call ladle; the
 * message of a thread's failure stays that thread's. Every rank is in the
 * same situation, so all take the same branch. */
START_TEST(mpi_thread_level)
{
    int level = MPI_THREAD_SINGLE, main_thread = 0;
    MPI_Query_thread(&level);
    MPI_Is_thread_main(&main_thread);
    LT_ASSERT(main_thread, "the suite runs on MPI's main thread");
    ladle_partition *p = NULL;
    LT_OK(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 0, NULL, NULL,
                                 &p)); /* at any level here */
    ladle_partition_destroy(&p);
    ladle_error_clear();
    thread_call c = {LADLE_OK, NULL, ""};
    pthread_t t;
    LT_ASSERT(pthread_create(&t, NULL, create_in_thread, &c) == 0, "pthread_create");
    pthread_join(t, NULL);
    if (level < MPI_THREAD_SERIALIZED) {
        const char *name = level == MPI_THREAD_SINGLE ? "MPI_THREAD_SINGLE" : "MPI_THREAD_FUNNELED";
        LT_ASSERT(c.st == LADLE_ERR_UNSUPPORTED && c.p == NULL && strstr(c.message, name) &&
                      strstr(c.message, "main thread"),
                  "from another thread at %s: %s (%s)", name, ladle_status_name(c.st),
                  c.message);
        LT_ASSERT(ladle_error_message()[0] == '\0', "the thread's message is its own: '%s'",
                  ladle_error_message());
    } else {
        LT_ASSERT(c.st == LADLE_OK && c.p != NULL, "from another thread at level %d: %s", level,
                  c.message);
        ladle_partition_destroy(&c.p);
    }
}
END_TEST

START_TEST(op_kinds)
{
    /* every kind has its own name; NULL and values outside the list (the
     * list may skip values, kept for kinds added on other branches) */
    struct {
        int value;
        const char *text;
    } kinds[] = {
#define NAME_(name, value, text) {value, text},
        LADLE_OP_KIND_LIST(NAME_)
#undef NAME_
    };
    int n = (int)(sizeof kinds / sizeof kinds[0]), ok = 1, top = 0;
    for (int i = 0; i < n; i++) {
        ok &= strcmp(ladle_op_kind_name((ladle_op_kind)kinds[i].value), kinds[i].text) == 0;
        ok &= kinds[i].value > (i ? kinds[i - 1].value : -1);
        top = kinds[i].value;
        for (int j = 0; j < i; j++)
            ok &= strcmp(kinds[i].text, kinds[j].text) != 0;
    }
    for (int k = 0; k <= top; k++) {
        int listed = 0;
        for (int i = 0; i < n; i++)
            listed |= kinds[i].value == k;
        ok &= listed || strcmp(ladle_op_kind_name((ladle_op_kind)k), "unknown") == 0;
    }
    LT_ASSERT(ok && top == LADLE_OP_RECOMPUTE, "kind names");
    LT_ASSERT(ladle_op_kind_of(NULL) == LADLE_OP_NONE &&
                  strcmp(ladle_op_kind_name((ladle_op_kind)(top + 1)), "unknown") == 0 &&
                  strcmp(ladle_op_kind_name((ladle_op_kind)-1), "unknown") == 0,
              "none and unknown");
    /* some ops of each family report their kind */
    int64_t xs[2] = {4, 3}, ys[2] = {4, 5};
    ladle_op *lin = NULL, *sm = NULL, *loss = NULL, *seq = NULL, *asr = NULL;
    LT_OK(ladle_linear_create(LT_LINEAR(xs[1], 5, 1, 0), 2, xs, LADLE_F64, lt_device(), 1,
                              &lin));
    LT_OK(ladle_softmax_create(2, ys, 1, LADLE_LOG_SOFTMAX, LADLE_F64, lt_device(), &sm));
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 2, ys,
                            LADLE_F64, lt_device(), &loss));
    LT_ASSERT(ladle_op_kind_of(lin) == LADLE_OP_LINEAR &&
                  ladle_op_kind_of(sm) == LADLE_OP_SOFTMAX &&
                  ladle_op_kind_of(loss) == LADLE_OP_LOSS,
              "layer kinds");
    ladle_op *chain[2] = {lin, sm};
    LT_OK(ladle_sequential_create(2, chain, &seq));
    LT_ASSERT(ladle_op_kind_of(seq) == LADLE_OP_SEQUENTIAL &&
                  strcmp(ladle_op_kind_name(ladle_op_kind_of(seq)), "sequential") == 0,
              "container kind");
    int shape[1] = {lt_size}, axes[1] = {0};
    ladle_partition *p = lt_partition(1, shape, 0);
    LT_OK(ladle_all_sum_reduce_create(LT_ASR(1, axes, 2, xs, 0), p, LADLE_F64, lt_device(),
                                      &asr));
    LT_ASSERT(ladle_op_kind_of(asr) == LADLE_OP_ALL_SUM_REDUCE, "primitive kind");
    ladle_op_destroy(&asr);
    ladle_op_destroy(&seq);
    ladle_op_destroy(&loss);
    ladle_partition_destroy(&p);
}
END_TEST

/* Descriptor structs carry their size (first field, set by their _init) so
 * they can grow: a create refuses one whose size is below the struct's
 * first release, naming both sizes, and reads a larger one (a newer
 * program's) only as far as it knows. */
START_TEST(descriptors_carry_their_size)
{
    ladle_conv_desc c;
    ladle_conv_desc_init(&c, 2, 1, 2, 3);
    ladle_pool_desc pl;
    ladle_pool_desc_init(&pl, LADLE_POOL_MAX, 2, 2);
    ladle_batchnorm_desc bn;
    ladle_batchnorm_desc_init(&bn, 1);
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, LADLE_OPT_SGD, 0.1);
    ladle_lenet_desc ld;
    ladle_lenet_desc_init(&ld);
    ladle_lr_schedule lr;
    ladle_lr_schedule_init(&lr, LADLE_LR_CONSTANT, 0.5);
    ladle_window w;
    ladle_window_init(&w, 2);
    LT_ASSERT(c.size == sizeof c && pl.size == sizeof pl && bn.size == sizeof bn &&
                  od.size == sizeof od && ld.size == sizeof ld && lr.size == sizeof lr &&
                  w.size == sizeof w,
              "an _init sets size");
    int64_t xs[4] = {1, 1, 6, 6};
    ladle_op *op = NULL;
    ladle_optimizer *opt = NULL;
    char expect[96];
    snprintf(expect, sizeof expect, "descriptor size 0, expected %zu", sizeof c);
    c.size = 0;
    LT_ASSERT(ladle_conv_create(&c, xs, LADLE_F64, LADLE_CPU, 1, &op) == LADLE_ERR_ARG &&
                  op == NULL && strstr(ladle_error_message(), expect) != NULL,
              "conv: %s", ladle_error_message());
    c.size = sizeof c + 64; /* a newer program's larger struct */
    LT_OK(ladle_conv_create(&c, xs, LADLE_F64, LADLE_CPU, 1, &op));
    ladle_op_destroy(&op);
    pl.size = sizeof pl - 1;
    LT_FAILS(ladle_pool_create(&pl, xs, LADLE_F64, LADLE_CPU, &op), LADLE_ERR_ARG);
    bn.size = 0;
    LT_FAILS(ladle_batchnorm_create(&bn, 4, xs, LADLE_F64, LADLE_CPU, &op), LADLE_ERR_ARG);
    od.size = 0;
    LT_FAILS(ladle_optimizer_create(&od, &opt), LADLE_ERR_ARG);
    ladle_network *net = NULL;
    ld.size = 0;
    LT_FAILS(ladle_lenet_create(&ld, ladle_comm_of(MPI_COMM_WORLD), &net), LADLE_ERR_ARG);
    LT_ASSERT(net == NULL && opt == NULL && op == NULL, "no object on failure");
    LT_ASSERT(ladle_lr_at(&lr, 3) == 0.5, "a set-up schedule");
    lr.size = 0;
    LT_ASSERT(isnan(ladle_lr_at(&lr, 3)), "a schedule without its size gives NaN");
}
END_TEST

static Suite *core_suite(void)
{
    return lt_suite("core", "core", LT_CHECK_TIMEOUT, NULL,
                    LT_TESTS(status_strings, version, error_message_names_rank_and_function,
                             tensor_create_and_accessors, tensor_zero_volume_and_scalar,
                             tensor_wrap_strided, tensor_get_set, tensor_bad_input,
                             tensor_random_is_counter_based, mpi_not_initialised,
                             mpi_thread_level, op_kinds, descriptors_carry_their_size));
}

int main(int argc, char **argv)
{
    /* ladle's first contact with MPI, before and after its lifetime */
    ladle_partition *p = NULL;
    before_init = ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 0, NULL, NULL, &p);
    snprintf(before_init_message, sizeof before_init_message, "%s", ladle_error_message());
    int rc = lt_main(argc, argv, core_suite);
    ladle_status after =
        ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 0, NULL, NULL, &p);
    if (after != LADLE_ERR_STATE || p != NULL || !strstr(ladle_error_message(), "finalised")) {
        fprintf(stderr, "after MPI_Finalize: %s (%s), expected LADLE_ERR_STATE\n",
                ladle_status_name(after), ladle_error_message());
        return 1;
    }
    return rc;
}
