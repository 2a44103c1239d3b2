/* The backend registry: one default instance per device built in, and the
 * meaning of the optional slots where a backend leaves them empty. */
#include <stdlib.h>
#include <string.h>

#include "src/core/backend.h"

extern const ladle_backend ladle__cpu_backend;
extern const ladle_backend ladle__guarded_backend;

const ladle_backend *ladle__backend(ladle_device device)
{
    const ladle_backend *be = NULL;
    switch (device) {
    case LADLE_CPU:
        be = &ladle__cpu_backend;
        break;
    case LADLE_CUDA:
        be = NULL; /* the CUDA backend arrives with `make CUDA=1` */
        break;
    case LADLE_GUARDED:
        be = &ladle__guarded_backend;
        break;
    }
    /* a table written for another revision of the contract is not used */
    return be != NULL && be->fn->version == LADLE_BACKEND_VERSION ? be : NULL;
}

ladle_status ladle__backend_get(ladle_device device, const char *func,
                                const ladle_backend **out)
{
    *out = ladle__backend(device);
    if (*out == NULL)
        return ladle__raise(LADLE_ERR_DEVICE, func, "ladle was built without the %s backend",
                            ladle_device_name(device));
    return LADLE_OK;
}

ladle_status ladle__be_host_alloc(const ladle_backend *be, size_t bytes, void **out)
{
    if (be->fn->host_alloc != NULL)
        return be->fn->host_alloc(be, bytes, out);
    *out = NULL;
    if (bytes == 0)
        return LADLE_OK;
    *out = malloc(bytes);
    if (*out == NULL)
        return ladle__raise(LADLE_ERR_ALLOC, "ladle__be_host_alloc",
                            "cannot allocate %zu bytes of host memory", bytes);
    memset(*out, 0, bytes); /* zeroed and touched now, at plan time */
    return LADLE_OK;
}

ladle_status ladle__be_host_free(const ladle_backend *be, void *ptr)
{
    if (be->fn->host_free != NULL)
        return be->fn->host_free(be, ptr);
    free(ptr);
    return LADLE_OK;
}

/* Without events every slot has finished on return: the event is NULL and
 * there is nothing to wait for. */
ladle_status ladle__be_event_create(const ladle_backend *be, void **event)
{
    if (be->fn->event_create != NULL)
        return be->fn->event_create(be, event);
    *event = NULL;
    return LADLE_OK;
}

ladle_status ladle__be_event_destroy(const ladle_backend *be, void *event)
{
    return be->fn->event_destroy != NULL && event != NULL ? be->fn->event_destroy(be, event)
                                                          : LADLE_OK;
}

ladle_status ladle__be_event_record(const ladle_backend *be, void *event)
{
    return be->fn->event_record != NULL ? be->fn->event_record(be, event) : LADLE_OK;
}

ladle_status ladle__be_event_wait(const ladle_backend *be, void *event)
{
    return be->fn->event_wait != NULL ? be->fn->event_wait(be, event) : LADLE_OK;
}

ladle_status ladle__be_event_sync(const ladle_backend *be, void *event)
{
    return be->fn->event_sync != NULL ? be->fn->event_sync(be, event) : LADLE_OK;
}

ladle_status ladle__be_dot(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                           const void *x, const void *y, double *out)
{
    double pair[2] = {0.0, 0.0};
    ladle_status st = be->fn->dot2(be, dtype, n, x, y, pair);
    *out = pair[0] + pair[1];
    return st;
}
