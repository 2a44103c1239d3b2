/*
 * The CUDA device as a whole: how ladle finds it, opens it and refuses it.
 *
 * Built everywhere, it checks what the build can show:
 *   - without the CUDA backend (a plain build): every CUDA request is
 *     LADLE_ERR_DEVICE, "built without", on every rank;
 *   - with the backend and no GPU (make CUDA=1 on a machine without one,
 *     or the emulator with LADLE_EMU_DEVICES=0): LADLE_ERR_DEVICE with the
 *     driver's reason, on every rank, and nothing else breaks;
 *   - with a GPU (the emulator's, or a real one): memory comes zeroed,
 *     copies arrive in stream order, events order the host, the device is
 *     chosen and described, options take, caller memory of the wrong kind
 *     is refused.
 * LADLE_TEST_EXPECT_GPU=1 (scripts/device-check.sh) makes a run without a
 * GPU fail instead of checking the refusal.
 */
#include <stdlib.h>
#include <string.h>

#include "src/core/backend.h"
#include "harness.h"

/* What this build and machine offer. */
enum { NO_BACKEND, NO_GPU, GPU };

static int situation(void)
{
    int count = 0;
    ladle_status st = ladle_device_count(LADLE_CUDA, &count);
    if (st == LADLE_ERR_DEVICE) {
        ladle_error_clear();
        return NO_BACKEND;
    }
    return count > 0 ? GPU : NO_GPU;
}

static int expect_gpu(void)
{
    const char *v = getenv("LADLE_TEST_EXPECT_GPU");
    return v != NULL && strcmp(v, "1") == 0;
}

START_TEST(refused_without_a_gpu)
{
    int s = situation();
    LT_ASSERT(!(expect_gpu() && s != GPU), "LADLE_TEST_EXPECT_GPU=1, but no GPU: %s",
              s == NO_BACKEND ? "ladle was built without CUDA" : "the driver sees none");
    if (s == GPU)
        return;
    const char *want = s == NO_BACKEND ? "built without the cuda backend" : "no GPU";
    const int64_t shape[2] = {3, 4};
    ladle_tensor *t = NULL;
    LT_FAILS(ladle_tensor_create(LADLE_F32, LADLE_CUDA, 2, shape, &t), LADLE_ERR_DEVICE);
    LT_ASSERT(t == NULL, "no tensor made");
    /* the message says why, on every rank */
    ladle_status st = ladle_tensor_create(LADLE_F64, LADLE_CUDA, 2, shape, &t);
    LT_ASSERT(st == LADLE_ERR_DEVICE && strstr(ladle_error_message(), want) != NULL,
              "message '%s' lacks '%s'", ladle_error_message(), want);
    ladle_error_clear();
    /* an op on the device is refused alike, collectively */
    ladle_op *op = NULL;
    LT_FAILS(ladle_activation_create(LADLE_RELU, 0.0, 2, shape, LADLE_F32, LADLE_CUDA, &op),
             LADLE_ERR_DEVICE);
    int index = -1;
    LT_FAILS(ladle_device_index(LADLE_CUDA, &index), LADLE_ERR_DEVICE);
    char line[256];
    LT_FAILS(ladle_device_describe(LADLE_CUDA, line, sizeof line), LADLE_ERR_DEVICE);
    /* and the CPU goes on working */
    LT_OK(ladle_tensor_create(LADLE_F32, LADLE_CPU, 2, shape, &t));
    LT_OK(ladle_tensor_fill(t, 1.5));
    LT_ASSERT(lt_get(t, 11) == 1.5, "the CPU after a CUDA refusal");
    ladle_tensor_destroy(&t);
}
END_TEST

START_TEST(device_calls_check_their_arguments)
{
    int n = -1;
    LT_FAILS(ladle_device_count(LADLE_CPU, NULL), LADLE_ERR_NULL);
    LT_FAILS(ladle_device_count((ladle_device)7, &n), LADLE_ERR_DEVICE);
    LT_OK(ladle_device_count(LADLE_CPU, &n));
    LT_ASSERT(n == 1, "one CPU device, got %d", n);
    LT_FAILS(ladle_device_select(LADLE_CPU, 1), LADLE_ERR_ARG);
    LT_OK(ladle_device_select(LADLE_GUARDED, 0));
    LT_FAILS(ladle_device_set(LADLE_CPU, LADLE_DEVICE_TF32, 1), LADLE_ERR_UNSUPPORTED);
    LT_FAILS(ladle_device_set(LADLE_CPU, (ladle_device_option)99, 1), LADLE_ERR_ARG);
    char line[256];
    LT_OK(ladle_device_describe(LADLE_CPU, line, sizeof line));
    LT_ASSERT(strncmp(line, "cpu:0 ", 6) == 0, "'%s'", line);
    if (situation() != GPU)
        return;
    LT_FAILS(ladle_device_set(LADLE_CUDA, LADLE_DEVICE_TF32, 2), LADLE_ERR_ARG);
    LT_FAILS(ladle_device_select(LADLE_CUDA, -2), LADLE_ERR_ARG);
    LT_FAILS(ladle_device_select(LADLE_CUDA, 1 << 20), LADLE_ERR_ARG);
}
END_TEST

START_TEST(opens_one_gpu_and_says_which)
{
    if (situation() != GPU)
        return;
    int count = 0, index = -1;
    LT_OK(ladle_device_count(LADLE_CUDA, &count));
    LT_OK(ladle_device_index(LADLE_CUDA, &index));
    LT_ASSERT(index >= 0 && index < count, "GPU %d of %d", index, count);
    /* once open, another GPU cannot be chosen; the one in use can */
    LT_OK(ladle_device_select(LADLE_CUDA, index));
    LT_OK(ladle_device_select(LADLE_CUDA, -1));
    if (count > 1)
        LT_FAILS(ladle_device_select(LADLE_CUDA, (index + 1) % count), LADLE_ERR_STATE);
    char line[512];
    LT_OK(ladle_device_describe(LADLE_CUDA, line, sizeof line));
    char want[32];
    snprintf(want, sizeof want, "cuda:%d ", index);
    LT_ASSERT(strncmp(line, want, strlen(want)) == 0 && strstr(line, "TF32") != NULL,
              "'%s'", line);
    /* a short buffer is cut, and terminated */
    char small[8];
    LT_OK(ladle_device_describe(LADLE_CUDA, small, sizeof small));
    LT_ASSERT(strlen(small) == 7, "'%s'", small);
}
END_TEST

START_TEST(options_take_and_read_back)
{
    if (situation() != GPU)
        return;
    int v = -1;
    LT_OK(ladle_device_set(LADLE_CUDA, LADLE_DEVICE_TF32, 1));
    LT_OK(ladle_device_get(LADLE_CUDA, LADLE_DEVICE_TF32, &v));
    LT_ASSERT(v == 1, "TF32 on, read %d", v);
    LT_OK(ladle_device_set(LADLE_CUDA, LADLE_DEVICE_TF32, 0));
    LT_OK(ladle_device_get(LADLE_CUDA, LADLE_DEVICE_TF32, &v));
    LT_ASSERT(v == 0, "TF32 off, read %d", v);
    /* staging is the default where the MPI does not say it reads CUDA memory */
    LT_OK(ladle_device_get(LADLE_CUDA, LADLE_DEVICE_MPI_DIRECT, &v));
    LT_OK(ladle_device_set(LADLE_CUDA, LADLE_DEVICE_MPI_DIRECT, 0));
    int staged = -1;
    LT_OK(ladle_device_get(LADLE_CUDA, LADLE_DEVICE_MPI_DIRECT, &staged));
    LT_ASSERT(staged == 0, "staged, read %d", staged);
    if (v == 1) /* a device-aware MPI: put it back */
        LT_OK(ladle_device_set(LADLE_CUDA, LADLE_DEVICE_MPI_DIRECT, 1));
}
END_TEST

START_TEST(memory_is_zeroed_and_copies_keep_order)
{
    if (situation() != GPU)
        return;
    const ladle_backend *be = ladle__backend(LADLE_CUDA);
    LT_ASSERT(be != NULL && be->async && !be->host_access, "an asynchronous device");
    enum { N = 4099 };
    double *host = calloc(N, sizeof *host), *back = calloc(N, sizeof *back);
    void *a = NULL, *b = NULL;
    LT_OK(be->fn->alloc(be, N * sizeof(double), &a));
    LT_OK(be->fn->alloc(be, N * sizeof(double), &b));
    LT_OK(be->fn->to_host(be, N * sizeof(double), a, back));
    LT_OK(be->fn->synchronize(be));
    int zero = 1;
    for (int i = 0; i < N; i++)
        zero &= back[i] == 0.0;
    LT_ASSERT(zero, "fresh device memory is zeroed");
    /* up, across, down, queued back to back: stream order carries the data */
    for (int i = 0; i < N; i++)
        host[i] = i * 0.5 - 7;
    LT_OK(be->fn->to_device(be, N * sizeof(double), host, a));
    LT_OK(be->fn->copy(be, LADLE_F64, N, a, b));
    LT_OK(be->fn->to_host(be, N * sizeof(double), b, back));
    LT_OK(be->fn->synchronize(be));
    int same = 1;
    for (int i = 0; i < N; i++)
        same &= back[i] == host[i];
    LT_ASSERT(same, "host -> device -> device -> host");
    /* an event recorded after the copy lets the host read it */
    void *ev = NULL;
    LT_OK(ladle__be_event_create(be, &ev));
    memset(back, 0, N * sizeof *back);
    LT_OK(be->fn->to_host(be, N * sizeof(double), a, back));
    LT_OK(ladle__be_event_record(be, ev));
    int done = 0;
    for (int tries = 0; !done && tries < 1000000; tries++)
        LT_OK(ladle__be_event_query(be, ev, &done));
    LT_ASSERT(done && back[N - 1] == host[N - 1], "the event passed and the data is there");
    LT_OK(ladle__be_event_destroy(be, ev));
    LT_OK(be->fn->free(be, a));
    LT_OK(be->fn->free(be, b));
    free(host);
    free(back);
}
END_TEST

START_TEST(tensors_read_and_write_through_the_device)
{
    if (situation() != GPU)
        return;
    const int64_t shape[2] = {5, 7};
    ladle_tensor *t = NULL, *h = NULL;
    LT_OK(ladle_tensor_create(LADLE_F32, LADLE_CUDA, 2, shape, &t));
    LT_OK(ladle_tensor_create(LADLE_F32, LADLE_CPU, 2, shape, &h));
    float in[35], out[35];
    for (int i = 0; i < 35; i++)
        in[i] = (float)(i * i) - 100.0f;
    LT_OK(ladle_tensor_write(t, in));
    LT_OK(ladle_tensor_read(t, out));
    LT_ASSERT(memcmp(in, out, sizeof in) == 0, "write then read");
    LT_OK(ladle_tensor_copy(h, t));
    LT_ASSERT(lt_get(h, 34) == in[34] && ladle_tensor_get(t, 3, NULL) == LADLE_ERR_NULL,
              "device to host copy");
    double v = 0;
    LT_OK(ladle_tensor_set(t, 3, 2.5));
    LT_OK(ladle_tensor_get(t, 3, &v));
    LT_ASSERT(v == 2.5, "one element, %g", v);
    LT_OK(ladle_tensor_fill(t, -1.25));
    LT_OK(ladle_tensor_read(t, out));
    LT_ASSERT(out[0] == -1.25f && out[34] == -1.25f, "fill");
    ladle_tensor_destroy(&t);
    ladle_tensor_destroy(&h);
}
END_TEST

START_TEST(caller_memory_of_the_wrong_kind_is_refused)
{
    if (situation() != GPU)
        return;
    const int64_t shape[1] = {16};
    float host[16] = {0};
    ladle_tensor *t = NULL, *d = NULL;
    ladle_status st = ladle_tensor_wrap(LADLE_F32, LADLE_CUDA, 1, shape, NULL, host, &t);
    LT_ASSERT(st == LADLE_ERR_DEVICE && strstr(ladle_error_message(), "host memory") != NULL,
              "host memory as a CUDA tensor: %s (%s)", ladle_status_name(st),
              ladle_error_message());
    ladle_error_clear();
    /* device memory wraps, and a wrapped tensor's data may be replaced only
     * by device memory */
    LT_OK(ladle_tensor_create(LADLE_F32, LADLE_CUDA, 1, shape, &d));
    LT_OK(ladle_tensor_wrap(LADLE_F32, LADLE_CUDA, 1, shape, NULL, ladle_tensor_data(d), &t));
    LT_FAILS(ladle_tensor_set_data(t, host), LADLE_ERR_DEVICE);
    ladle_tensor_destroy(&t);
    ladle_tensor_destroy(&d);
}
END_TEST

LT_SUITE("cuda", "device", 300, refused_without_a_gpu, device_calls_check_their_arguments,
         opens_one_gpu_and_says_which, options_take_and_read_back,
         memory_is_zeroed_and_copies_keep_order, tensors_read_and_write_through_the_device,
         caller_memory_of_the_wrong_kind_is_refused)
