/*
 * The emulated CUDA runtime (see emu.h): devices, memory with guard zones,
 * streams whose work runs late, events, launches (their threads run in
 * threads.cc).
 */
#include "src/backends/cuda/emu/emu.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

struct ladle_emu_stream {
    std::deque<std::function<void()>> work;
    uint64_t queued = 0, done = 0;
};

struct ladle_emu_event {
    ladle_emu_stream *stream = nullptr; /* where it was last recorded */
    uint64_t seq = 0;                   /* reached when the stream has done this many */
    bool recorded = false, asked = false, timing = true;
    double at_ms = 0.0; /* host time when the stream reached it */
};

namespace ladle_emu {

namespace {

constexpr size_t GUARD = 256;           /* guard zone on each side of an allocation */
constexpr unsigned char GUARD_BYTE = 0xCB;
constexpr unsigned char FRESH_BYTE = 0xFF; /* all-ones f32 and f64 are NaN */
constexpr size_t MAX_DYN_SHARED = 48 * 1024;

struct allocation {
    size_t bytes;
};

struct state {
    std::recursive_mutex lock;
    bool ready = false;
    int ndev = 1;
    size_t capacity = (size_t)8 << 30, used = 0;
    long fault_at = -1, launches = 0;
    bool reverse = false;
    int device = 0;
    cudaError_t sticky = cudaSuccess;
    std::map<uintptr_t, allocation> device_blocks, pinned_blocks;
    std::vector<ladle_emu_stream *> streams;
    ladle_emu_stream legacy;
};

state &S()
{
    static state s;
    return s;
}

thread_local cudaError_t last_error = cudaSuccess;

long env_long(const char *name, long fallback)
{
    const char *v = getenv(name);
    if (v == nullptr || v[0] == '\0')
        return fallback;
    char *end = nullptr;
    long x = strtol(v, &end, 10);
    return end != v && *end == '\0' && x >= 0 ? x : fallback;
}

void init(state &s)
{
    if (s.ready)
        return;
    s.ready = true;
    s.ndev = (int)env_long("LADLE_EMU_DEVICES", 1);
    s.capacity = (size_t)env_long("LADLE_EMU_MEMORY", (long)s.capacity);
    s.fault_at = env_long("LADLE_EMU_FAULT", -1);
    s.reverse = env_long("LADLE_EMU_REVERSE", 0) != 0;
}

double now_ms()
{
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

cudaError_t fail(cudaError_t e)
{
    last_error = e;
    return e;
}

/* The lock, the environment read, and the sticky error: every runtime call
 * starts here. */
#define ENTER(s)                                                                           \
    state &s = S();                                                                        \
    std::lock_guard<std::recursive_mutex> guard_(s.lock);                                  \
    init(s);                                                                               \
    if (s.sticky != cudaSuccess)                                                           \
        return s.sticky;

/* ...and for calls that need a device. */
#define ENTER_DEVICE(s)                                                                    \
    ENTER(s)                                                                               \
    if (s.ndev == 0)                                                                       \
        return fail(cudaErrorNoDevice);

const allocation *find_block(const std::map<uintptr_t, allocation> &m, const void *p,
                             uintptr_t *base)
{
    uintptr_t a = (uintptr_t)p;
    auto it = m.upper_bound(a);
    if (it == m.begin())
        return nullptr;
    --it;
    if (a > it->first + it->second.bytes)
        return nullptr;
    *base = it->first;
    return &it->second;
}

bool device_range(state &s, const void *p, size_t bytes)
{
    uintptr_t base = 0;
    const allocation *b = find_block(s.device_blocks, p, &base);
    return b != nullptr && (uintptr_t)p + bytes <= base + b->bytes;
}

/* A guard zone that changed means a write outside the allocation: on a GPU
 * an illegal address, which kills the context. */
void check_guards(state &s)
{
    for (const auto &kv : s.device_blocks) {
        const unsigned char *p = (const unsigned char *)kv.first;
        size_t n = kv.second.bytes;
        for (size_t i = 0; i < GUARD; i++) {
            if (p[-1 - (long)i] != GUARD_BYTE || p[n + i] != GUARD_BYTE) {
                if (s.sticky == cudaSuccess)
                    fprintf(stderr,
                            "ladle CUDA emulator: a write %s the device allocation of %zu "
                            "bytes at %p\n",
                            p[-1 - (long)i] != GUARD_BYTE ? "before" : "past", n,
                            (const void *)p);
                s.sticky = cudaErrorIllegalAddress;
                return;
            }
        }
    }
}

ladle_emu_stream *resolve(state &s, cudaStream_t stream)
{
    return stream != nullptr ? stream : &s.legacy;
}

/* Run a stream's work until it has done `upto` items. Work queued behind a
 * sticky error is dropped, as a dead context drops it. */
void flush(state &s, ladle_emu_stream *st, uint64_t upto)
{
    while (st->done < upto && !st->work.empty()) {
        std::function<void()> w = std::move(st->work.front());
        st->work.pop_front();
        if (s.sticky == cudaSuccess)
            w();
        st->done++;
    }
}

void flush_all(state &s)
{
    for (ladle_emu_stream *st : s.streams)
        flush(s, st, st->queued);
    flush(s, &s.legacy, s.legacy.queued);
    check_guards(s);
}

void push(state &s, ladle_emu_stream *st, std::function<void()> w)
{
    if (st == &s.legacy) /* the legacy stream waits for every other one */
        for (ladle_emu_stream *o : s.streams)
            flush(s, o, o->queued);
    st->work.push_back(std::move(w));
    st->queued++;
}

} // namespace

/* threads.cc: a grid's blocks and threads, run now on the calling thread */
void run_grid(bool barriers, dim3 grid, dim3 block, size_t shmem,
              const std::function<void()> &body, bool reverse);

cudaError_t launch(bool barriers, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                   std::function<void()> body)
{
    ENTER_DEVICE(s);
    unsigned long threads = (unsigned long)block.x * block.y * block.z;
    if (threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 ||
        grid.x == 0 || grid.x > 2147483647u || grid.y == 0 || grid.y > 65535 || grid.z == 0 ||
        grid.z > 65535 || shmem > MAX_DYN_SHARED)
        return fail(cudaErrorInvalidConfiguration);
    /* LADLE_EMU_FAULT counts from when it is first seen set, so a test can
     * set it just before the launch it wants to fail */
    if (s.fault_at < 0 && (s.fault_at = env_long("LADLE_EMU_FAULT", -1)) >= 0)
        s.launches = 0;
    bool fault = ++s.launches == s.fault_at;
    bool reverse = s.reverse;
    state *sp = &s;
    push(s, resolve(s, stream), [=]() {
        if (fault) {
            fprintf(stderr, "ladle CUDA emulator: kernel launch %ld faults "
                            "(LADLE_EMU_FAULT)\n", sp->launches);
            sp->sticky = cudaErrorLaunchFailure;
            return;
        }
        run_grid(barriers, grid, block, shmem, body, reverse);
    });
    return cudaSuccess;
}

cudaError_t enqueue(cudaStream_t stream, std::function<void()> work)
{
    ENTER_DEVICE(s);
    push(s, resolve(s, stream), std::move(work));
    return cudaSuccess;
}

bool is_device(const void *p, size_t bytes)
{
    state &s = S();
    std::lock_guard<std::recursive_mutex> guard(s.lock);
    return device_range(s, p, bytes);
}

/* Called from queued work (the emulated cuBLAS) that found a bad pointer. */
void fault(const char *what)
{
    state &s = S();
    std::lock_guard<std::recursive_mutex> guard(s.lock);
    if (s.sticky == cudaSuccess)
        fprintf(stderr, "ladle CUDA emulator: %s\n", what);
    s.sticky = cudaErrorIllegalAddress;
}

} // namespace ladle_emu

using namespace ladle_emu;

/* ---- devices ---- */

cudaError_t cudaGetDeviceCount(int *count)
{
    ENTER(s);
    if (count == nullptr)
        return fail(cudaErrorInvalidValue);
    *count = s.ndev;
    return s.ndev > 0 ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device)
{
    ENTER_DEVICE(s);
    if (device < 0 || device >= s.ndev)
        return fail(cudaErrorInvalidDevice);
    s.device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    ENTER_DEVICE(s);
    if (device == nullptr)
        return fail(cudaErrorInvalidValue);
    *device = s.device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device)
{
    ENTER_DEVICE(s);
    if (prop == nullptr)
        return fail(cudaErrorInvalidValue);
    if (device < 0 || device >= s.ndev)
        return fail(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "ladle CUDA emulator");
    prop->totalGlobalMem = s.capacity;
    prop->sharedMemPerBlock = MAX_DYN_SHARED;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 2147483647;
    prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
    prop->multiProcessorCount = 4;
    prop->major = 9;
    prop->minor = 0;
    prop->l2CacheSize = 1 << 20;
    prop->pciBusID = device;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device)
{
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess)
        return e;
    if (value == nullptr || attr != cudaDevAttrMultiProcessorCount)
        return fail(cudaErrorInvalidValue);
    *value = p.multiProcessorCount;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version)
{
    if (version == nullptr)
        return fail(cudaErrorInvalidValue);
    *version = 13000;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version) { return cudaDriverGetVersion(version); }

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    ENTER_DEVICE(s);
    if (free_bytes == nullptr || total_bytes == nullptr)
        return fail(cudaErrorInvalidValue);
    *free_bytes = s.capacity - s.used;
    *total_bytes = s.capacity;
    return cudaSuccess;
}

/* ---- memory ---- */

cudaError_t cudaMalloc(void **ptr, size_t bytes)
{
    ENTER_DEVICE(s);
    if (ptr == nullptr)
        return fail(cudaErrorInvalidValue);
    *ptr = nullptr;
    if (bytes == 0)
        return cudaSuccess;
    if (bytes > s.capacity - s.used)
        return fail(cudaErrorMemoryAllocation);
    size_t total = (bytes + 2 * GUARD + 255) / 256 * 256;
    unsigned char *raw = (unsigned char *)aligned_alloc(256, total);
    if (raw == nullptr)
        return fail(cudaErrorMemoryAllocation);
    memset(raw, GUARD_BYTE, GUARD);
    memset(raw + GUARD, FRESH_BYTE, bytes);
    memset(raw + GUARD + bytes, GUARD_BYTE, GUARD);
    s.device_blocks[(uintptr_t)(raw + GUARD)] = allocation{bytes};
    s.used += bytes;
    *ptr = raw + GUARD;
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr)
{
    ENTER(s);
    if (ptr == nullptr)
        return cudaSuccess;
    flush_all(s);
    if (s.sticky != cudaSuccess)
        return s.sticky;
    auto it = s.device_blocks.find((uintptr_t)ptr);
    if (it == s.device_blocks.end())
        return fail(cudaErrorInvalidValue);
    s.used -= it->second.bytes;
    s.device_blocks.erase(it);
    free((unsigned char *)ptr - GUARD);
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned flags)
{
    ENTER_DEVICE(s);
    if (ptr == nullptr)
        return fail(cudaErrorInvalidValue);
    *ptr = nullptr;
    if (bytes == 0)
        return cudaSuccess;
    void *p = aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (p == nullptr)
        return fail(cudaErrorMemoryAllocation);
    memset(p, FRESH_BYTE, bytes);
    s.pinned_blocks[(uintptr_t)p] = allocation{bytes};
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t bytes)
{
    return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault);
}

cudaError_t cudaFreeHost(void *ptr)
{
    ENTER(s);
    if (ptr == nullptr)
        return cudaSuccess;
    flush_all(s);
    auto it = s.pinned_blocks.find((uintptr_t)ptr);
    if (it == s.pinned_blocks.end())
        return fail(cudaErrorInvalidValue);
    s.pinned_blocks.erase(it);
    free(ptr);
    return s.sticky;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *attr, const void *ptr)
{
    ENTER(s);
    if (attr == nullptr)
        return fail(cudaErrorInvalidValue);
    uintptr_t base = 0;
    memset(attr, 0, sizeof *attr);
    attr->device = -2;
    if (find_block(s.device_blocks, ptr, &base) != nullptr) {
        attr->type = cudaMemoryTypeDevice;
        attr->device = s.device;
        attr->devicePointer = (void *)ptr;
    } else if (find_block(s.pinned_blocks, ptr, &base) != nullptr) {
        attr->type = cudaMemoryTypeHost;
        attr->device = s.device;
        attr->hostPointer = (void *)ptr;
    } else {
        attr->type = cudaMemoryTypeUnregistered;
    }
    return cudaSuccess;
}

namespace {
/* Neither side NULL, and what a copy's kind says of its two sides, checked
 * against the blocks. */
cudaError_t check_copy(state &s, void *dst, const void *src, size_t bytes,
                       cudaMemcpyKind kind)
{
    if (dst == nullptr || src == nullptr)
        return fail(cudaErrorInvalidValue);
    bool dd = device_range(s, dst, bytes), sd = device_range(s, src, bytes);
    bool want_dd, want_sd;
    switch (kind) {
    case cudaMemcpyHostToHost: want_dd = false, want_sd = false; break;
    case cudaMemcpyHostToDevice: want_dd = true, want_sd = false; break;
    case cudaMemcpyDeviceToHost: want_dd = false, want_sd = true; break;
    case cudaMemcpyDeviceToDevice: want_dd = true, want_sd = true; break;
    case cudaMemcpyDefault: return cudaSuccess;
    default: return fail(cudaErrorInvalidMemcpyDirection);
    }
    if (dd != want_dd || sd != want_sd)
        return fail(cudaErrorInvalidValue);
    /* overlapping device copies are undefined on a GPU */
    if (dd && sd && (const char *)src < (char *)dst + bytes && (char *)dst < (const char *)src + bytes &&
        src != dst)
        return fail(cudaErrorInvalidValue);
    return cudaSuccess;
}
} // namespace

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    ENTER_DEVICE(s);
    if (bytes == 0)
        return cudaSuccess;
    cudaError_t e = check_copy(s, dst, src, bytes, kind);
    if (e != cudaSuccess)
        return e;
    push(s, resolve(s, stream), [=]() { memmove(dst, src, bytes); });
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    ENTER_DEVICE(s);
    if (bytes == 0)
        return cudaSuccess;
    cudaError_t e = check_copy(s, dst, src, bytes, kind);
    if (e != cudaSuccess)
        return e;
    flush_all(s);
    if (s.sticky != cudaSuccess)
        return s.sticky;
    memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream)
{
    ENTER_DEVICE(s);
    if (bytes == 0)
        return cudaSuccess;
    if (!device_range(s, ptr, bytes))
        return fail(cudaErrorInvalidValue);
    push(s, resolve(s, stream), [=]() { memset(ptr, value, bytes); });
    return cudaSuccess;
}

cudaError_t cudaMemset(void *ptr, int value, size_t bytes)
{
    cudaError_t e = cudaMemsetAsync(ptr, value, bytes, nullptr);
    return e != cudaSuccess ? e : cudaDeviceSynchronize();
}

/* ---- streams and events ---- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags)
{
    ENTER_DEVICE(s);
    if (stream == nullptr)
        return fail(cudaErrorInvalidValue);
    *stream = new ladle_emu_stream;
    s.streams.push_back(*stream);
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream)
{
    return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    ENTER(s);
    auto it = std::find(s.streams.begin(), s.streams.end(), stream);
    if (stream == nullptr || it == s.streams.end())
        return fail(cudaErrorInvalidResourceHandle);
    flush(s, stream, stream->queued);
    s.streams.erase(it);
    delete stream;
    return s.sticky;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    ENTER(s);
    ladle_emu_stream *st = resolve(s, stream);
    flush(s, st, st->queued);
    check_guards(s);
    return s.sticky;
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    return cudaStreamSynchronize(stream);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags)
{
    ENTER_DEVICE(s);
    if (event == nullptr)
        return fail(cudaErrorInvalidValue);
    *event = new ladle_emu_event;
    (*event)->timing = (flags & cudaEventDisableTiming) == 0;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    ENTER(s);
    if (event == nullptr)
        return fail(cudaErrorInvalidResourceHandle);
    if (event->recorded) /* its record is still queued: let it pass first */
        flush(s, event->stream, event->seq);
    delete event;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    ENTER_DEVICE(s);
    if (event == nullptr)
        return fail(cudaErrorInvalidResourceHandle);
    ladle_emu_stream *st = resolve(s, stream);
    push(s, st, [event]() { event->at_ms = now_ms(); });
    event->stream = st;
    event->seq = st->queued;
    event->recorded = true;
    event->asked = false;
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    ENTER(s);
    if (event == nullptr)
        return fail(cudaErrorInvalidResourceHandle);
    if (event->recorded)
        flush(s, event->stream, event->seq);
    check_guards(s);
    return s.sticky;
}

/* The first query of a pending event answers "not ready", so callers'
 * polling paths run; the next one waits for it. */
cudaError_t cudaEventQuery(cudaEvent_t event)
{
    ENTER(s);
    if (event == nullptr)
        return fail(cudaErrorInvalidResourceHandle);
    if (!event->recorded || event->stream->done >= event->seq)
        return cudaSuccess;
    if (!event->asked) {
        event->asked = true;
        return cudaErrorNotReady;
    }
    flush(s, event->stream, event->seq);
    check_guards(s);
    return s.sticky;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags)
{
    ENTER_DEVICE(s);
    if (event == nullptr)
        return fail(cudaErrorInvalidResourceHandle);
    if (!event->recorded)
        return cudaSuccess;
    ladle_emu_stream *other = event->stream;
    uint64_t seq = event->seq;
    state *sp = &s;
    push(s, resolve(s, stream), [sp, other, seq]() { flush(*sp, other, seq); });
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    ENTER(s);
    if (ms == nullptr || start == nullptr || end == nullptr)
        return fail(cudaErrorInvalidValue);
    if (!start->timing || !end->timing || !start->recorded || !end->recorded)
        return fail(cudaErrorInvalidResourceHandle);
    if (start->stream->done < start->seq || end->stream->done < end->seq)
        return cudaErrorNotReady;
    *ms = (float)(end->at_ms - start->at_ms);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    ENTER(s);
    flush_all(s);
    return s.sticky;
}

/* ---- errors ---- */

cudaError_t cudaGetLastError(void)
{
    state &s = S();
    std::lock_guard<std::recursive_mutex> guard(s.lock);
    if (s.sticky != cudaSuccess)
        return s.sticky;
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    state &s = S();
    std::lock_guard<std::recursive_mutex> guard(s.lock);
    return s.sticky != cudaSuccess ? s.sticky : last_error;
}

const char *cudaGetErrorName(cudaError_t error)
{
    switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t error)
{
    switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver:
        return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    }
    return "unknown error";
}
