/*
 * The guarded test device (LADLE_GUARDED): the CPU's kernels behind a
 * fence. Its memory is host memory, but the instance says that neither host
 * code nor MPI may touch it (host_access and mpi_access 0), so everything
 * ladle does with it goes the way it must go on a GPU: through the slots,
 * with messages staged and scalars fetched by to_host.
 *
 * Under AddressSanitizer the fence is real: every block is poisoned (ASan's
 * manual poisoning interface) except while one of the device's own slots
 * runs, and a slot opens only the blocks its device pointers (the last
 * field of its entry in src/core/backend_slots.h) fall in. A read or write
 * of device memory anywhere else is reported as a use-after-poison and
 * fails `make asan`. Without ASan the device still
 * runs every path a device without host access takes.
 *
 * The device keeps a registry of its blocks, sorted by address, so that a
 * slot can find the block of any pointer into it. Like a GPU driver's
 * allocator it is process-wide state of the device, guarded by a mutex; it
 * is the one piece of mutable state outside ladle's objects, and it exists
 * only in this test device.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "src/backends/cpu/cpu.h"

#if defined(__SANITIZE_ADDRESS__)
#define GUARD_POISON 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GUARD_POISON 1
#endif
#endif

#ifdef GUARD_POISON
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

typedef struct block {
    char *base;
    size_t bytes;
    int open; /* slots running on it now (nested calls, threads) */
    ladle__mem_acct acct; /* its tracker's record (ladle_memory_track) */
} block;

typedef struct registry {
    pthread_mutex_t lock;
    block *blocks;
    int n, cap;
} registry;

static registry reg = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

/* The block holding p, or -1 (memory the device did not allocate: a
 * wrapped host buffer, a NULL pointer). Called with the lock held. */
static int find(const void *p)
{
    const char *c = p;
    int lo = 0, hi = reg.n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const block *b = &reg.blocks[mid];
        if (c < b->base)
            hi = mid - 1;
        else if (c >= b->base + (b->bytes ? b->bytes : 1))
            lo = mid + 1;
        else
            return mid;
    }
    return -1;
}

#define MAX_ARGS 8

/* The blocks one slot call opened, to close them again. */
typedef struct fence {
    char *base[MAX_ARGS];
    int n;
} fence;

static void fence_open(fence *f, int n, const void *const *ptrs)
{
    f->n = 0;
    pthread_mutex_lock(&reg.lock);
    for (int i = 0; i < n; i++) {
        int k = ptrs[i] != NULL ? find(ptrs[i]) : -1;
        if (k < 0)
            continue;
        block *b = &reg.blocks[k];
        if (b->open++ == 0)
            UNPOISON(b->base, b->bytes);
        f->base[f->n++] = b->base;
    }
    pthread_mutex_unlock(&reg.lock);
}

static void fence_close(const fence *f)
{
    pthread_mutex_lock(&reg.lock);
    for (int i = 0; i < f->n; i++) {
        int k = find(f->base[i]);
        if (k >= 0 && --reg.blocks[k].open == 0)
            POISON(reg.blocks[k].base, reg.blocks[k].bytes);
    }
    pthread_mutex_unlock(&reg.lock);
}

/* Run `call` (a CPU slot on the CPU instance) with the blocks of the
 * listed pointers open. */
#define FENCED(call, ...)                                                                  \
    do {                                                                                   \
        const void *const ptrs_[] = {__VA_ARGS__};                                         \
        fence f_;                                                                          \
        fence_open(&f_, (int)(sizeof ptrs_ / sizeof ptrs_[0]), ptrs_);                     \
        ladle_status st_ = (call);                                                         \
        fence_close(&f_);                                                                  \
        return st_;                                                                        \
    } while (0)

extern const ladle_backend ladle__cpu_backend;
#define CPU (&ladle__cpu_backend)

/* ---- memory ---- */

static ladle_status g_alloc(const ladle_backend *be, size_t bytes, void **out)
{
    (void)be;
    *out = NULL;
    if (bytes == 0)
        return LADLE_OK;
    size_t padded = (bytes + 63) / 64 * 64;
    char *p = NULL;
    if (padded < bytes || posix_memalign((void **)&p, 64, padded) != 0)
        return ladle__raise(LADLE_ERR_ALLOC, "guarded", "cannot allocate %zu bytes", bytes);
    memset(p, 0, padded);
    pthread_mutex_lock(&reg.lock);
    if (reg.n == reg.cap) {
        int cap = reg.cap ? 2 * reg.cap : 256;
        block *nb = realloc(reg.blocks, sizeof(block) * (size_t)cap);
        if (nb == NULL) {
            pthread_mutex_unlock(&reg.lock);
            free(p);
            return ladle__raise(LADLE_ERR_ALLOC, "guarded", "cannot grow the block registry");
        }
        reg.blocks = nb;
        reg.cap = cap;
    }
    int at = reg.n;
    while (at > 0 && reg.blocks[at - 1].base > p)
        at--;
    memmove(&reg.blocks[at + 1], &reg.blocks[at], sizeof(block) * (size_t)(reg.n - at));
    reg.blocks[at] = (block){p, padded, 0, {NULL, 0}};
    ladle__mem_count(&reg.blocks[at].acct, bytes, 0);
    reg.n++;
    POISON(p, padded);
    pthread_mutex_unlock(&reg.lock);
    *out = p;
    return LADLE_OK;
}

static ladle_status g_free(const ladle_backend *be, void *ptr)
{
    (void)be;
    if (ptr == NULL)
        return LADLE_OK;
    pthread_mutex_lock(&reg.lock);
    int k = find(ptr);
    if (k < 0 || reg.blocks[k].base != ptr) {
        pthread_mutex_unlock(&reg.lock);
        return ladle__raise(LADLE_ERR_INTERNAL, "guarded", "free of %p, not a block", ptr);
    }
    UNPOISON(reg.blocks[k].base, reg.blocks[k].bytes);
    ladle__mem_uncount(&reg.blocks[k].acct);
    memmove(&reg.blocks[k], &reg.blocks[k + 1], sizeof(block) * (size_t)(reg.n - k - 1));
    reg.n--;
    if (reg.n == 0) { /* the last block: the registry goes too (no leak at exit) */
        free(reg.blocks);
        reg.blocks = NULL;
        reg.cap = 0;
    }
    pthread_mutex_unlock(&reg.lock);
    free(ptr);
    return LADLE_OK;
}

/* The host copies open the host buffer's block too, should it be one (the
 * list names only their device side): kept as they were. */
static ladle_status g_to_device(const ladle_backend *be, size_t bytes, const void *host,
                                void *dst)
{
    FENCED(ladle__cpu_to_device(CPU, bytes, host, dst), host, dst);
}

static ladle_status g_to_host(const ladle_backend *be, size_t bytes, const void *src,
                              void *host)
{
    FENCED(ladle__cpu_to_host(CPU, bytes, src, host), src, host);
}

/* ---- the mechanical wrappers ---- */

#define UNPAREN(...) __VA_ARGS__

/* One per entry of the slot list: open the blocks of the slot's device
 * pointers, run the CPU's kernel on the CPU's instance (the inner `be`
 * shadows the guarded one on purpose), close them again. They are static
 * inline so that those the table does not take (the slots the CPU lacks,
 * and the four written by hand above) are never emitted. The NULL first
 * keeps the array non-empty for a slot without device pointers. */
#define LADLE_SLOT(name, params, args, devptrs)                                            \
    static inline ladle_status guarded_##name params                                       \
    {                                                                                      \
        const void *const ptrs_[] = {NULL, UNPAREN devptrs};                               \
        _Static_assert(sizeof ptrs_ / sizeof ptrs_[0] <= MAX_ARGS + 1,                     \
                       "more device pointers than a fence holds");                         \
        fence f_;                                                                          \
        ladle_status st_;                                                                  \
        fence_open(&f_, (int)(sizeof ptrs_ / sizeof ptrs_[0]), ptrs_);                     \
        {                                                                                  \
            const ladle_backend *const be = CPU;                                           \
            st_ = ladle__cpu_##name args;                                                  \
        }                                                                                  \
        fence_close(&f_);                                                                  \
        return st_;                                                                        \
    }
#include "src/core/backend_slots.h"
#undef LADLE_SLOT

static const ladle_backend_table guarded_table = {
    .version = LADLE_BACKEND_VERSION,
    .name = "guarded",
    .alloc = g_alloc,
    .free = g_free,
    .to_device = g_to_device,
    .to_host = g_to_host,
    .synchronize = guarded_synchronize,
    .copy = guarded_copy,
    .copy_box = guarded_copy_box,
    .pack = guarded_pack,
    .unpack = guarded_unpack,
    .add = guarded_add,
    .axpy = guarded_axpy,
    .dot2 = guarded_dot2,
    .scal = guarded_scal,
    .abs_max = guarded_abs_max,
    .fill = guarded_fill,
    .fill_random = guarded_fill_random,
    .fill_init = guarded_fill_init,
    .gemm = guarded_gemm,
    .act_forward = guarded_act_forward,
    .act_backward = guarded_act_backward,
    .softmax_forward = guarded_softmax_forward,
    .softmax_backward = guarded_softmax_backward,
    .loss_forward = guarded_loss_forward,
    .loss_backward = guarded_loss_backward,
    .find_outside = guarded_find_outside,
    .find_non_finite = guarded_find_non_finite,
    .dropout = guarded_dropout,
    .bn_moment = guarded_bn_moment,
    .bn_dsums = guarded_bn_dsums,
    .bn_affine = guarded_bn_affine,
    .pool_plan = guarded_pool_plan,
    .pool_setup = guarded_pool_setup,
    .pool_forward = guarded_pool_forward,
    .pool_backward = guarded_pool_backward,
    .conv_im2col = guarded_conv_im2col,
    .conv_col2im = guarded_conv_col2im,
    .conv_wide_im2col = guarded_conv_wide_im2col,
    .conv_wide_grid = guarded_conv_wide_grid,
    .bias_add = guarded_bias_add,
    .bias_grad = guarded_bias_grad,
    .optim_step = guarded_optim_step,
    .interp_forward = guarded_interp_forward,
    .interp_backward = guarded_interp_backward,
    .loss_weight_sum = guarded_loss_weight_sum,
    .adaptive_pool_forward = guarded_adaptive_pool_forward,
    .adaptive_pool_backward = guarded_adaptive_pool_backward,
    .norm_forward = guarded_norm_forward,
    .norm_backward = guarded_norm_backward,
    .norm_weight_grad = guarded_norm_weight_grad,
    .embed_forward = guarded_embed_forward,
    .embed_backward = guarded_embed_backward,
    .attn_forward = guarded_attn_forward,
    .attn_backward = guarded_attn_backward,
    .conv_direct_plan = guarded_conv_direct_plan,
    .conv_direct_forward = guarded_conv_direct_forward,
    .conv_direct_weight = guarded_conv_direct_weight,
    .conv_direct_backward = guarded_conv_direct_backward,
    .lse_rows = guarded_lse_rows,
    .exp_rows = guarded_exp_rows,
    .adaptive_max_forward = guarded_adaptive_max_forward,
    .adaptive_max_backward = guarded_adaptive_max_backward,
    .convert = guarded_convert,
    .gemm_half = guarded_gemm_half,
    .gemm_half_ws = guarded_gemm_half_ws,
};

const ladle_backend ladle__guarded_backend = {
    .fn = &guarded_table,
    .device = LADLE_GUARDED,
    .host_access = 0,
    .mpi_access = 0,
};
