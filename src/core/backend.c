/*
 * The backend registry: one default instance per device built in, the
 * devices' public calls (ladle/device.h), and the meaning of the optional
 * slots where a backend leaves them empty.
 *
 * The CUDA backend is built in with make CUDA=1 (or CUDA=emu, over the
 * emulator), which compiles this file with LADLE_WITH_CUDA. Its instance is
 * opened on first use, since it needs a GPU, a stream and library handles;
 * opening can fail (no GPU, no driver), and then says why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/backend.h"

extern const ladle_backend ladle__cpu_backend;
extern const ladle_backend ladle__guarded_backend;

/* A table written for another revision of the contract is not used. */
static ladle_status checked(const ladle_backend *be, const char *func,
                            const ladle_backend **out)
{
    if (be->fn->version != LADLE_BACKEND_VERSION)
        return ladle__raise(LADLE_ERR_DEVICE, func,
                            "the %s backend was written for revision %d of the backend "
                            "table, this is revision %d",
                            be->fn->name, be->fn->version, LADLE_BACKEND_VERSION);
    *out = be;
    return LADLE_OK;
}

ladle_status ladle__backend_get(ladle_device device, const char *func,
                                const ladle_backend **out)
{
    *out = NULL;
    switch (device) {
    case LADLE_CPU:
        return checked(&ladle__cpu_backend, func, out);
    case LADLE_GUARDED:
        return checked(&ladle__guarded_backend, func, out);
    case LADLE_CUDA: {
#ifdef LADLE_WITH_CUDA
        const ladle_backend *be = NULL;
        ladle_status st = ladle__cuda_open(func, &be);
        return st != LADLE_OK ? st : checked(be, func, out);
#else
        break;
#endif
    }
    }
    return ladle__raise(LADLE_ERR_DEVICE, func, "ladle was built without the %s backend",
                        ladle_device_name(device));
}

const ladle_backend *ladle__backend(ladle_device device)
{
    switch (device) {
    case LADLE_CPU:
        return &ladle__cpu_backend;
    case LADLE_GUARDED:
        return &ladle__guarded_backend;
    case LADLE_CUDA:
#ifdef LADLE_WITH_CUDA
        return ladle__cuda_opened();
#else
        break;
#endif
    }
    return NULL;
}

/* ---- the devices' public calls ---- */

/* LADLE_OK for a device of the enum, and whether it is CUDA. */
static ladle_status known(ladle_device device, const char *func, int *cuda)
{
    *cuda = device == LADLE_CUDA;
    if (device != LADLE_CPU && device != LADLE_GUARDED && device != LADLE_CUDA)
        return ladle__raise(LADLE_ERR_DEVICE, func, "no device %d", (int)device);
#ifndef LADLE_WITH_CUDA
    if (*cuda)
        return ladle__raise(LADLE_ERR_DEVICE, func, "ladle was built without the %s backend",
                            ladle_device_name(device));
#endif
    return LADLE_OK;
}

ladle_status ladle_device_count(ladle_device device, int *count)
{
    int cuda;
    ladle_status st = known(device, __func__, &cuda);
    if (st != LADLE_OK)
        return st;
    if (count == NULL)
        return ladle__raise(LADLE_ERR_NULL, __func__, "count is NULL");
#ifdef LADLE_WITH_CUDA
    if (cuda)
        return ladle__cuda_count(count);
#endif
    *count = 1;
    return LADLE_OK;
}

ladle_status ladle_device_select(ladle_device device, int index)
{
    int cuda;
    ladle_status st = known(device, __func__, &cuda);
    if (st != LADLE_OK)
        return st;
#ifdef LADLE_WITH_CUDA
    if (cuda)
        return ladle__cuda_select(index);
#endif
    if (index != 0 && index != -1)
        return ladle__raise(LADLE_ERR_ARG, __func__, "%s has one device (0), not %d",
                            ladle_device_name(device), index);
    return LADLE_OK;
}

ladle_status ladle_device_index(ladle_device device, int *index)
{
    int cuda;
    ladle_status st = known(device, __func__, &cuda);
    if (st != LADLE_OK)
        return st;
    if (index == NULL)
        return ladle__raise(LADLE_ERR_NULL, __func__, "index is NULL");
#ifdef LADLE_WITH_CUDA
    if (cuda)
        return ladle__cuda_index(index);
#endif
    *index = 0;
    return LADLE_OK;
}

ladle_status ladle_device_describe(ladle_device device, char *buf, size_t cap)
{
    int cuda;
    ladle_status st = known(device, __func__, &cuda);
    if (st != LADLE_OK)
        return st;
    if (buf == NULL || cap == 0)
        return ladle__raise(LADLE_ERR_NULL, __func__, "no buffer to write into");
#ifdef LADLE_WITH_CUDA
    if (cuda)
        return ladle__cuda_describe(buf, cap);
#endif
    snprintf(buf, cap, "%s:0 %s", ladle_device_name(device),
             device == LADLE_CPU ? "host memory, OpenBLAS"
                                 : "host memory behind a fence (the test device)");
    return LADLE_OK;
}

ladle_status ladle_device_synchronize(ladle_device device)
{
    int cuda;
    ladle_status st = known(device, __func__, &cuda);
    if (st != LADLE_OK)
        return st;
    const ladle_backend *be = ladle__backend(device);
    return be != NULL ? be->fn->synchronize(be) : LADLE_OK;
}

static ladle_status option_known(ladle_device device, ladle_device_option option,
                                 const char *func, int *cuda)
{
    ladle_status st = known(device, func, cuda);
    if (st != LADLE_OK)
        return st;
    if (option != LADLE_DEVICE_TF32 && option != LADLE_DEVICE_MPI_DIRECT)
        return ladle__raise(LADLE_ERR_ARG, func, "no device option %d", (int)option);
    if (!*cuda)
        return ladle__raise(LADLE_ERR_UNSUPPORTED, func, "%s has no option %s",
                            ladle_device_name(device),
                            option == LADLE_DEVICE_TF32 ? "TF32" : "MPI_DIRECT");
    return LADLE_OK;
}

ladle_status ladle_device_set(ladle_device device, ladle_device_option option, int value)
{
    int cuda;
    ladle_status st = option_known(device, option, __func__, &cuda);
    if (st != LADLE_OK)
        return st;
    if (value != 0 && value != 1)
        return ladle__raise(LADLE_ERR_ARG, __func__, "option value %d (0 or 1)", value);
#ifdef LADLE_WITH_CUDA
    return ladle__cuda_set((int)option, value);
#else
    return LADLE_ERR_INTERNAL; /* option_known refused: CUDA is not built in */
#endif
}

ladle_status ladle_device_get(ladle_device device, ladle_device_option option, int *value)
{
    int cuda;
    ladle_status st = option_known(device, option, __func__, &cuda);
    if (st != LADLE_OK)
        return st;
    if (value == NULL)
        return ladle__raise(LADLE_ERR_NULL, __func__, "value is NULL");
#ifdef LADLE_WITH_CUDA
    return ladle__cuda_get((int)option, value);
#else
    return LADLE_ERR_INTERNAL;
#endif
}

/* ---- the optional slots ---- */

ladle_status ladle__alloc_as(const ladle_backend *be, ladle_memory_kind kind, size_t bytes,
                             void **out)
{
    int prev = ladle__mem_kind_begin(kind);
    ladle_status st = be->fn->alloc(be, bytes, out);
    ladle__mem_kind_end(prev);
    return st;
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

ladle_status ladle__be_event_query(const ladle_backend *be, void *event, int *done)
{
    *done = 1;
    return be->fn->event_query != NULL && event != NULL ? be->fn->event_query(be, event, done)
                                                        : LADLE_OK;
}

ladle_status ladle__be_check_pointer(const ladle_backend *be, const void *ptr, size_t bytes)
{
    return be->fn->check_pointer != NULL ? be->fn->check_pointer(be, ptr, bytes) : LADLE_OK;
}

ladle_status ladle__be_health(const ladle_backend *be)
{
    return be->fn->health != NULL ? be->fn->health(be) : LADLE_OK;
}

ladle_status ladle__be_dot(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                           const void *x, const void *y, double *out)
{
    double pair[2] = {0.0, 0.0};
    ladle_status st = be->fn->dot2(be, dtype, n, x, y, pair);
    *out = pair[0] + pair[1];
    return st;
}
