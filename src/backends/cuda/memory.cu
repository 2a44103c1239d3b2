/*
 * Memory, copies and order on the GPU: device blocks zeroed before they
 * are handed out, pinned host memory for staging, copies queued on the
 * instance's stream, events.
 */
#include <string.h>

#include "src/backends/cuda/cuda.h"

ladle_status ladle__cuda_alloc(const ladle_backend *be, size_t bytes, void **out)
{
    *out = NULL;
    if (bytes == 0)
        return LADLE_OK;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* an allocation failure is not sticky: forget it */
        return ladle__raise(e == cudaErrorMemoryAllocation ? LADLE_ERR_ALLOC : LADLE_ERR_DEVICE,
                            "alloc", "cuda:%d: cannot allocate %zu bytes of device memory: %s (%s)",
                            ladle__cuda(be)->device, bytes, cudaGetErrorString(e),
                            cudaGetErrorName(e));
    }
    /* zeroed, and so touched, now: at plan time, not in the first call */
    e = cudaMemsetAsync(p, 0, bytes, ladle__cuda_stream(be));
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(ladle__cuda_stream(be));
    if (e != cudaSuccess) {
        cudaFree(p);
        return ladle__cuda_fail(e, "alloc", "zeroing new device memory");
    }
    *out = p;
    return LADLE_OK;
}

ladle_status ladle__cuda_free(const ladle_backend *be, void *ptr)
{
    if (ptr != NULL)
        LADLE_CUDA_TRY("free", cudaFree(ptr));
    return LADLE_OK;
}

ladle_status ladle__cuda_host_alloc(const ladle_backend *be, size_t bytes, void **out)
{
    *out = NULL;
    if (bytes == 0)
        return LADLE_OK;
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return ladle__raise(e == cudaErrorMemoryAllocation ? LADLE_ERR_ALLOC : LADLE_ERR_DEVICE,
                            "host_alloc",
                            "cuda:%d: cannot allocate %zu bytes of pinned host memory: %s (%s)",
                            ladle__cuda(be)->device, bytes, cudaGetErrorString(e),
                            cudaGetErrorName(e));
    }
    memset(p, 0, bytes); /* touched at plan time */
    *out = p;
    return LADLE_OK;
}

ladle_status ladle__cuda_host_free(const ladle_backend *be, void *ptr)
{
    if (ptr != NULL)
        LADLE_CUDA_TRY("host_free", cudaFreeHost(ptr));
    return LADLE_OK;
}

ladle_status ladle__cuda_to_device(const ladle_backend *be, size_t bytes, const void *host,
                                   void *dst)
{
    if (bytes > 0)
        LADLE_CUDA_TRY("to_device", cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice,
                                                    ladle__cuda_stream(be)));
    return LADLE_OK;
}

ladle_status ladle__cuda_to_host(const ladle_backend *be, size_t bytes, const void *src,
                                 void *host)
{
    if (bytes > 0)
        LADLE_CUDA_TRY("to_host", cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost,
                                                  ladle__cuda_stream(be)));
    return LADLE_OK;
}

ladle_status ladle__cuda_synchronize(const ladle_backend *be)
{
    LADLE_CUDA_TRY("synchronize", cudaStreamSynchronize(ladle__cuda_stream(be)));
    return LADLE_OK;
}

ladle_status ladle__cuda_event_create(const ladle_backend *be, void **event)
{
    cudaEvent_t e = NULL;
    *event = NULL;
    LADLE_CUDA_TRY("event_create", cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    *event = e;
    return LADLE_OK;
}

ladle_status ladle__cuda_event_destroy(const ladle_backend *be, void *event)
{
    if (event != NULL)
        LADLE_CUDA_TRY("event_destroy", cudaEventDestroy((cudaEvent_t)event));
    return LADLE_OK;
}

ladle_status ladle__cuda_event_record(const ladle_backend *be, void *event)
{
    LADLE_CUDA_TRY("event_record", cudaEventRecord((cudaEvent_t)event, ladle__cuda_stream(be)));
    return LADLE_OK;
}

ladle_status ladle__cuda_event_wait(const ladle_backend *be, void *event)
{
    LADLE_CUDA_TRY("event_wait",
                   cudaStreamWaitEvent(ladle__cuda_stream(be), (cudaEvent_t)event, 0));
    return LADLE_OK;
}

ladle_status ladle__cuda_event_sync(const ladle_backend *be, void *event)
{
    LADLE_CUDA_TRY("event_sync", cudaEventSynchronize((cudaEvent_t)event));
    return LADLE_OK;
}

ladle_status ladle__cuda_event_query(const ladle_backend *be, void *event, int *done)
{
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    *done = e == cudaSuccess;
    if (e == cudaErrorNotReady) {
        cudaGetLastError(); /* an answer, not a failure: nothing to remember */
        return LADLE_OK;
    }
    return e == cudaSuccess ? LADLE_OK : ladle__cuda_fail(e, "event_query", "cudaEventQuery");
}

ladle_status ladle__cuda_check_pointer(const ladle_backend *be, const void *ptr, size_t bytes)
{
    cudaPointerAttributes a;
    int dev = ladle__cuda(be)->device;
    if (bytes == 0)
        return LADLE_OK;
    cudaError_t e = cudaPointerGetAttributes(&a, ptr);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return ladle__cuda_fail(e, "check_pointer", "cudaPointerGetAttributes");
    }
    if (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged) {
        if (a.device == dev)
            return LADLE_OK;
        return ladle__raise(LADLE_ERR_DEVICE, "check_pointer",
                            "%p is memory of cuda:%d, but this process uses cuda:%d", ptr,
                            a.device, dev);
    }
    return ladle__raise(LADLE_ERR_DEVICE, "check_pointer",
                        "%p is host memory%s, not memory of cuda:%d", ptr,
                        a.type == cudaMemoryTypeHost ? " (pinned)" : "", dev);
}

ladle_status ladle__cuda_health(const ladle_backend *be)
{
    /* a sticky error stays; anything else the runtime remembers was
     * already reported where it happened */
    cudaError_t e = cudaPeekAtLastError();
    if (e == cudaErrorNotReady) {
        cudaGetLastError();
        return LADLE_OK;
    }
    return e == cudaSuccess ? LADLE_OK : ladle__cuda_fail(e, "health", "the device");
}
