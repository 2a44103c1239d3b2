/*
 * The CUDA device failing: out of memory, and a kernel that faults. Each
 * failure is a status with CUDA's own text, on every rank, and never a
 * crash or a hang. Runs where the CUDA backend is (LADLE_TEST_DEVICE=cuda):
 * over the emulator the fault is injected (LADLE_EMU_FAULT), on a GPU it is
 * a real one (a kernel writing to an address no allocation holds). A
 * faulted CUDA context is dead for the rest of the process, so the fault
 * comes last.
 */
#include <stdlib.h>
#include <string.h>

#include "src/core/backend.h"
#include "harness.h"

static int emulated(void)
{
    char line[256];
    return ladle_device_describe(LADLE_CUDA, line, sizeof line) == LADLE_OK &&
           strstr(line, "emulator") != NULL;
}

START_TEST(out_of_memory_is_a_status_and_passes)
{
    /* 2^37 doubles (1 TiB): more than any GPU of today, and the emulator's
     * 8 GiB */
    const int64_t shape[2] = {(int64_t)1 << 20, (int64_t)1 << 17};
    ladle_tensor *t = NULL;
    ladle_status st = ladle_tensor_create(LADLE_F64, LADLE_CUDA, 2, shape, &t);
    const char *msg = ladle_error_message();
    LT_ASSERT(st == LADLE_ERR_ALLOC && t == NULL && strstr(msg, "cudaErrorMemoryAllocation") &&
                  strstr(msg, "ladle_tensor_create:"),
              "%s: %s", ladle_status_name(st), msg);
    ladle_error_clear();
    /* the device is fine afterwards: an allocation failure is not sticky */
    const int64_t small[1] = {1000};
    LT_OK(ladle_tensor_create(LADLE_F64, LADLE_CUDA, 1, small, &t));
    LT_OK(ladle_tensor_fill(t, 2.0));
    LT_OK(ladle_device_synchronize(LADLE_CUDA));
    double v = 0;
    LT_OK(ladle_tensor_get(t, 999, &v));
    LT_ASSERT(v == 2.0, "after the failed allocation, %g", v);
    ladle_tensor_destroy(&t);
}
END_TEST

/* Make this rank's device fail: the next kernel faults. */
static void fault(void)
{
    const ladle_backend *be = ladle__backend(LADLE_CUDA);
    if (emulated()) {
        setenv("LADLE_EMU_FAULT", "1", 1);
        void *p = NULL;
        be->fn->alloc(be, 4096, &p);
        be->fn->fill(be, LADLE_F32, 1024, 1.0, p);
    } else {
        /* no allocation holds these addresses: an illegal access */
        be->fn->fill(be, LADLE_F32, 1 << 20, 1.0, (void *)(uintptr_t)4096);
    }
}

START_TEST(a_faulting_kernel_fails_every_rank_cleanly)
{
    /* a checked collective op over every rank, made while all is well */
    int shape[1] = {lt_size};
    ladle_partition *p = lt_partition(1, shape, 0);
    int64_t block[1] = {257};
    ladle_op *op = NULL;
    LT_OK(ladle_all_sum_reduce_create(LT_ASR(1, (int[]){0}, 1, block, LADLE_CHECKED), p,
                                      LADLE_F32, LADLE_CUDA, &op));
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    LT_OK(ladle_op_forward(op, x, y));
    /* rank 0's GPU fails; the host learns it at its next wait */
    if (lt_rank == 0) {
        fault();
        ladle_status st = ladle_device_synchronize(LADLE_CUDA);
        const char *msg = ladle_error_message();
        int named = strstr(msg, "cudaErrorLaunchFailure") || strstr(msg, "cudaErrorIllegalAddress");
        LT_ASSERT(st == LADLE_ERR_DEVICE && named, "the fault: %s: %s", ladle_status_name(st),
                  msg);
    } else {
        LT_ASSERT(1, "the other ranks' devices are well");
    }
    /* the checked call agrees on it before any message: a status on every
     * rank, the failing rank's own, the others LADLE_ERR_REMOTE */
    ladle_status st = ladle_op_forward(op, x, y);
    ladle_status want = lt_rank == 0 ? LADLE_ERR_DEVICE : LADLE_ERR_REMOTE;
    LT_ASSERT(st == want, "forward after the fault: %s (%s)", ladle_status_name(st),
              ladle_error_message());
    ladle_error_clear();
    /* the dead device keeps saying so; the CPU goes on */
    int ok = 1;
    if (lt_rank == 0) {
        const int64_t n[1] = {4};
        ladle_tensor *t = NULL;
        ok &= ladle_tensor_create(LADLE_F32, LADLE_CUDA, 1, n, &t) == LADLE_ERR_DEVICE;
        ok &= ladle_tensor_create(LADLE_F32, LADLE_CPU, 1, n, &t) == LADLE_OK &&
              ladle_tensor_fill(t, 3) == LADLE_OK && lt_get(t, 3) == 3.0;
        ladle_tensor_destroy(&t);
    }
    LT_ASSERT(ok, "after the fault: no tensor on the GPU, the CPU as ever");
    ladle_error_clear();
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&y);
    ladle_op_destroy(&op);
    ladle_partition_destroy(&p);
}
END_TEST

LT_SUITE("cuda_fault", "faults", 300, out_of_memory_is_a_status_and_passes,
         a_faulting_kernel_fails_every_rank_cleanly)
