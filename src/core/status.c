/* Status codes, the per-thread error message, version, small utilities. */
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/core/internal.h"
#include "src/core/random.h"

#define LADLE_ERROR_CAP 1024

/* The last error of each thread; the only state ladle keeps outside objects,
 * and it is per thread by design (the caller asks "why did my call fail"). */
static _Thread_local char error_message[LADLE_ERROR_CAP];

const char *ladle_version(void) { return LADLE_VERSION_STRING; }

int ladle_version_number(void) { return LADLE_VERSION_NUMBER; }

const char *ladle_status_string(ladle_status status)
{
    switch (status) {
#define LADLE_STATUS_TEXT_(name, value, text)                                              \
    case name:                                                                             \
        return text;
        LADLE_STATUS_LIST(LADLE_STATUS_TEXT_)
#undef LADLE_STATUS_TEXT_
    }
    return "unknown status";
}

const char *ladle_status_name(ladle_status status)
{
    switch (status) {
#define LADLE_STATUS_NAME_(name, value, text)                                              \
    case name:                                                                             \
        return #name;
        LADLE_STATUS_LIST(LADLE_STATUS_NAME_)
#undef LADLE_STATUS_NAME_
    }
    return "LADLE_UNKNOWN";
}

const char *ladle_error_message(void) { return error_message; }

void ladle_error_clear(void) { error_message[0] = '\0'; }

int ladle__mpi_usable(void)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
}

static int world_rank(void)
{
    int rank = -1;
    if (ladle__mpi_usable())
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

static int verbose(void)
{
    const char *v = getenv("LADLE_VERBOSE");
    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

static ladle_status vraise(ladle_status status, const char *func, int rank, const char *fmt,
                           va_list ap)
{
    int n = rank >= 0 ? snprintf(error_message, LADLE_ERROR_CAP, "[rank %d] %s: ", rank, func)
                      : snprintf(error_message, LADLE_ERROR_CAP, "%s: ", func);
    if (n < 0)
        n = 0;
    if (n < LADLE_ERROR_CAP)
        vsnprintf(error_message + n, (size_t)(LADLE_ERROR_CAP - n), fmt, ap);
    if (verbose())
        fprintf(stderr, "ladle: %s (%s)\n", error_message, ladle_status_name(status));
    return status;
}

ladle_status ladle__raise(ladle_status status, const char *func, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    /* rank -1 before MPI_Init or after MPI_Finalize: no rank to name */
    vraise(status, func, world_rank(), fmt, ap);
    va_end(ap);
    return status;
}

ladle_status ladle__raise_plain(ladle_status status, const char *func, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vraise(status, func, -1, fmt, ap);
    va_end(ap);
    return status;
}

ladle_status ladle__raise_after(ladle_status status, const char *func, const char *fmt, ...)
{
    char reason[LADLE_ERROR_CAP], what[LADLE_ERROR_CAP];
    /* the reason without its "[rank R] func: " */
    const char *r = error_message, *colon = strstr(error_message, ": ");
    if (colon != NULL && colon - error_message < 80)
        r = colon + 2;
    snprintf(reason, sizeof reason, "%s", r);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ladle__raise(status, func, "%s: %s", what, reason);
}

ladle_status ladle__check_size(const char *func, const char *what, size_t size, size_t first)
{
    if (size >= first)
        return LADLE_OK;
    return ladle__raise(LADLE_ERR_ARG, func,
                        "descriptor size %zu, expected %zu: %s was not set up by its _init "
                        "call (or was built against another ladle's headers)",
                        size, first, what);
}

ladle_status ladle__raise_mpi(int mpi_code, const char *func, const char *call)
{
    char text[MPI_MAX_ERROR_STRING] = "unknown MPI error";
    int len = 0;
    if (MPI_Error_string(mpi_code, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", mpi_code);
    return ladle__raise(LADLE_ERR_MPI, func, "%s failed: %s", call, text);
}

size_t ladle_dtype_size(ladle_dtype dtype)
{
    switch (dtype) {
    case LADLE_BF16:
    case LADLE_F16:
        return 2;
    case LADLE_F32:
        return 4;
    case LADLE_F64:
    case LADLE_I64:
        return 8;
    }
    return 0;
}

const char *ladle_dtype_name(ladle_dtype dtype)
{
    switch (dtype) {
    case LADLE_F32:
        return "f32";
    case LADLE_F64:
        return "f64";
    case LADLE_I64:
        return "i64";
    case LADLE_BF16:
        return "bf16";
    case LADLE_F16:
        return "f16";
    }
    return "unknown";
}

const char *ladle_device_name(ladle_device device)
{
    switch (device) {
    case LADLE_CPU:
        return "cpu";
    case LADLE_CUDA:
        return "cuda";
    case LADLE_GUARDED:
        return "guarded";
    }
    return "unknown";
}

/* The calling thread's allocator (ladle_allocator_set), or none: ladle's
 * own. Per thread for the reason the error message is: ladle keeps no
 * global mutable state, and a thread embedding ladle for one owner never
 * allocates through another's. */
static _Thread_local ladle_allocator thread_allocator;
static _Thread_local int thread_has_allocator;

ladle_status ladle_allocator_set(const ladle_allocator *a)
{
    if (a == NULL) {
        thread_has_allocator = 0;
        return LADLE_OK;
    }
    if (a->size != sizeof *a)
        return ladle__raise(LADLE_ERR_ARG, __func__,
                            "a->size is %zu, not this library's sizeof(ladle_allocator) %zu",
                            a->size, sizeof *a);
    if (a->alloc == NULL || a->free == NULL)
        return ladle__raise(LADLE_ERR_NULL, __func__, "a->%s is NULL",
                            a->alloc == NULL ? "alloc" : "free");
    thread_allocator = *a;
    thread_has_allocator = 1;
    return LADLE_OK;
}

const ladle_allocator *ladle__allocator(void)
{
    return thread_has_allocator ? &thread_allocator : NULL;
}

/* Every block of ladle__calloc records how to free it: the allocator
 * current at its allocation (NULL: the C library's) and its size, and the
 * tracker that counted it. 48 bytes keep the block aligned as malloc's. */
typedef struct alloc_header {
    void (*free)(void *user, void *ptr, size_t bytes, ladle_device device);
    void *user;
    size_t bytes; /* the whole block, header included */
    size_t payload;
    ladle__mem_acct acct;
} alloc_header;

void *ladle__calloc(size_t count, size_t size)
{
    size_t bytes;
    if (count != 0 && size > (SIZE_MAX - 64) / count)
        return NULL;
    bytes = count * size + sizeof(alloc_header);
    const ladle_allocator *a = ladle__allocator();
    alloc_header *h = a ? a->alloc(a->user, bytes, 16, LADLE_CPU) : calloc(1, bytes);
    if (h == NULL)
        return NULL;
    if (a)
        memset(h, 0, bytes);
    h->free = a ? a->free : NULL;
    h->user = a ? a->user : NULL;
    h->bytes = bytes;
    h->payload = count * size;
    ladle__mem_count(&h->acct, h->payload, 1);
    return h + 1;
}

void ladle__free(void *p)
{
    if (p == NULL)
        return;
    alloc_header *h = (alloc_header *)p - 1;
    ladle__mem_uncount(&h->acct);
    if (h->free)
        h->free(h->user, h, h->bytes, LADLE_CPU);
    else
        free(h);
}

void *ladle__realloc(void *p, size_t bytes)
{
    void *n = ladle__calloc(1, bytes);
    if (n == NULL || p == NULL)
        return n;
    size_t old = ((alloc_header *)p - 1)->payload;
    memcpy(n, p, old < bytes ? old : bytes);
    ladle__free(p);
    return n;
}

int64_t ladle__volume_within(int n, const int64_t *extents, int64_t limit)
{
    int64_t v = 1;
    for (int d = 0; d < n; d++)
        if (extents[d] < 0)
            return -1;
    for (int d = 0; d < n; d++) /* a zero extent makes any product fit */
        if (extents[d] == 0)
            return 0;
    for (int d = 0; d < n; d++)
        if (!ladle__mul_ok(v, extents[d], &v) || v > limit)
            return -1;
    return v;
}

int ladle__bytes_ok(int64_t count, size_t es, size_t *bytes)
{
    int64_t b;
    if (count < 0 || !ladle__mul_ok(count, (int64_t)es, &b) || b > LADLE_MAX_BYTES)
        return 0;
    *bytes = (size_t)b;
    return 1;
}

const char *ladle__fmt_shape64(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t n = 0;
    buf[0] = '\0';
    if (ndim == 0) {
        snprintf(buf, cap, "()");
        return buf;
    }
    for (int d = 0; d < ndim && n < cap; d++) {
        int w = snprintf(buf + n, cap - n, d ? "x%lld" : "%lld", (long long)shape[d]);
        if (w < 0)
            break;
        n += (size_t)w;
    }
    return buf;
}

const char *ladle__fmt_shape(char *buf, size_t cap, int ndim, const int *shape)
{
    int64_t s[LADLE_MAX_NDIM];
    int nd = ndim < LADLE_MAX_NDIM ? ndim : LADLE_MAX_NDIM;
    for (int d = 0; d < nd; d++)
        s[d] = shape[d];
    return ladle__fmt_shape64(buf, cap, nd, s);
}

uint64_t ladle__hash(uint64_t h, const void *data, size_t bytes)
{
    const unsigned char *b = data;
    for (size_t i = 0; i < bytes; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

uint64_t ladle__random_bits(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return ladle__rng_bits(seed, stream, counter);
}

double ladle__random_uniform(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return ladle__rng_uniform(seed, stream, counter);
}

double ladle__random_normal(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return ladle__rng_normal(seed, stream, counter);
}

/* How long the hybrid policy spins before it starts to yield. */
#define SPIN_SECONDS 50e-6

static long env_long(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? strtol(v, NULL, 10) : -1;
}

ladle_wait_policy ladle__wait_policy(void)
{
    const char *v = getenv("LADLE_WAIT");
    if (v != NULL && strcmp(v, "spin") == 0)
        return LADLE_WAIT_SPIN;
    if (v != NULL && strcmp(v, "yield") == 0)
        return LADLE_WAIT_YIELD;
    /* launchers say how many ranks share this node */
    long local = env_long("MPI_LOCALNRANKS");
    if (local < 0)
        local = env_long("OMPI_COMM_WORLD_LOCAL_SIZE");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (local > 0 && cores > 0)
        return local > cores ? LADLE_WAIT_YIELD : LADLE_WAIT_SPIN;
    return LADLE_WAIT_HYBRID;
}

void ladle__poll_pause(ladle_wait_policy policy, double *since)
{
    if (policy == LADLE_WAIT_SPIN)
        return;
    if (policy == LADLE_WAIT_HYBRID) {
        double now = MPI_Wtime();
        if (*since == 0.0)
            *since = now;
        if (now - *since < SPIN_SECONDS)
            return;
    }
    sched_yield();
}

int ladle__wait(MPI_Request *req)
{
    ladle_wait_policy policy = ladle__wait_policy();
    double since = 0.0;
    MPI_Status status;
    if (policy == LADLE_WAIT_SPIN)
        return MPI_Wait(req, &status);
    for (;;) {
        int done = 0;
        int rc = MPI_Test(req, &done, &status);
        if (rc != MPI_SUCCESS || done)
            return rc;
        ladle__poll_pause(policy, &since);
    }
}

int ladle__allreduce(const void *in, void *out, int count, MPI_Datatype type, MPI_Op op,
                     MPI_Comm comm)
{
    MPI_Request req;
    int rc = MPI_Iallreduce(in, out, count, type, op, comm, &req);
    if (rc != MPI_SUCCESS)
        return rc;
    return ladle__wait(&req);
}

ladle_status ladle__mpi_count(const char *func, const char *what, int64_t n, int *out)
{
    if (n < 0)
        return ladle__raise(LADLE_ERR_ARG, func, "%s has a negative count (%lld)", what,
                            (long long)n);
    if (n > INT_MAX)
        return ladle__raise(LADLE_ERR_UNSUPPORTED, func,
                            "%s of %lld elements is more than one MPI message holds "
                            "(at most %d)",
                            what, (long long)n, INT_MAX);
    *out = (int)n;
    return LADLE_OK;
}

int ladle__is_real(ladle_dtype dtype) { return dtype == LADLE_F32 || dtype == LADLE_F64; }

int ladle__is_half(ladle_dtype dtype) { return dtype == LADLE_BF16 || dtype == LADLE_F16; }
