/* Tensors: one rank's local shard, owned or wrapping caller memory. */
#include <stdlib.h>
#include <string.h>

#include "src/core/backend.h"
#include "src/core/half.h"

void ladle__contiguous_strides(int ndim, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d] > 0 ? shape[d] : 1;
    }
}

ladle_status ladle__check_shape(const char *func, int ndim, const int64_t *shape,
                                int64_t *numel)
{
    if (ndim < 0 || ndim > LADLE_MAX_NDIM)
        return ladle__raise(LADLE_ERR_ARG, func, "ndim %d is outside 0..%d", ndim,
                            LADLE_MAX_NDIM);
    if (ndim > 0 && shape == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "shape is NULL");
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0)
            return ladle__raise(LADLE_ERR_SHAPE, func,
                                "extent %lld of dimension %d is negative",
                                (long long)shape[d], d);
    /* every element count must also fit as a byte count of the widest dtype,
     * and so must the strides, which count a zero extent as one: then no
     * product of a shape's extents can overflow */
    int64_t n = ladle__volume_within(ndim, shape, LADLE_MAX_ELEMS), ones[LADLE_MAX_NDIM];
    for (int d = 0; d < ndim; d++)
        ones[d] = shape[d] > 0 ? shape[d] : 1;
    char buf[256];
    if (n < 0)
        return ladle__raise(LADLE_ERR_SHAPE, func,
                            "a %s tensor is too large (more than 2^57 elements)",
                            ladle__fmt_shape64(buf, sizeof buf, ndim, shape));
    if (ladle__volume_within(ndim, ones, LADLE_MAX_ELEMS) < 0)
        return ladle__raise(LADLE_ERR_SHAPE, func,
                            "the extents of a %s tensor are too large (their strides would "
                            "pass 2^57 elements)",
                            ladle__fmt_shape64(buf, sizeof buf, ndim, shape));
    *numel = n;
    return LADLE_OK;
}

static ladle_status check_dtype(const char *func, ladle_dtype dtype)
{
    if (ladle_dtype_size(dtype) == 0)
        return ladle__raise(LADLE_ERR_ARG, func, "unknown dtype %d", (int)dtype);
    return LADLE_OK;
}

static ladle_status tensor_new(const char *func, ladle_dtype dtype, ladle_device device,
                               int ndim, const int64_t *shape, const int64_t *strides,
                               ladle_tensor **out)
{
    ladle_status st = LADLE_OK;
    ladle_tensor *t = NULL;
    int64_t numel = 0;
    LADLE_CALL(check_dtype(func, dtype));
    LADLE_CHECK(device == LADLE_CPU || device == LADLE_CUDA || device == LADLE_GUARDED,
                LADLE_ERR_ARG, "unknown device %d", (int)device);
    LADLE_CALL(ladle__check_shape(func, ndim, shape, &numel));
    t = ladle__calloc(1, sizeof *t);
    LADLE_CHECK(t != NULL, LADLE_ERR_ALLOC, "out of memory");
    t->dtype = dtype;
    t->device = device;
    t->ndim = ndim;
    t->numel = numel;
    for (int d = 0; d < ndim; d++)
        t->shape[d] = shape[d];
    if (strides != NULL) {
        int64_t reach = 0, step = 0;
        for (int d = 0; d < ndim; d++) {
            LADLE_CHECK(strides[d] >= 0, LADLE_ERR_ARG, "stride %d is negative", d);
            t->strides[d] = strides[d];
            /* the offset of the last element must be an index ladle can form */
            int ok = numel == 0 ||
                     (ladle__mul_ok(shape[d] - 1, strides[d], &step) &&
                      ladle__add_ok(reach, step, &reach) && reach < LADLE_MAX_ELEMS);
            LADLE_CHECK(ok, LADLE_ERR_ARG,
                        "stride %lld of dimension %d reaches past 2^57 elements",
                        (long long)strides[d], d);
        }
    } else {
        ladle__contiguous_strides(ndim, shape, t->strides);
    }
    *out = t;
    return LADLE_OK;
fail:
    ladle__free(t);
    return st;
}

/* Caller memory for t: memory of t's device (where its backend can tell),
 * reaching as far as t's last element. */
static ladle_status check_memory(const char *func, const ladle_tensor *t, const void *data)
{
    const ladle_backend *be;
    ladle_status st = ladle__backend_get(t->device, func, &be);
    if (st != LADLE_OK || t->numel == 0)
        return st;
    int64_t last = 0;
    for (int d = 0; d < t->ndim; d++)
        last += (t->shape[d] - 1) * t->strides[d];
    st = ladle__be_check_pointer(be, data, (size_t)(last + 1) * ladle_dtype_size(t->dtype));
    if (st != LADLE_OK)
        st = ladle__raise_after(st, func, "caller memory for a %s tensor",
                                ladle_device_name(t->device));
    return st;
}

ladle_status ladle_tensor_create(ladle_dtype dtype, ladle_device device, int ndim,
                                 const int64_t shape[], ladle_tensor **t)
{
    ladle_status st = LADLE_OK;
    ladle_tensor *n = NULL;
    const ladle_backend *be;
    LADLE_NOT_NULL(t);
    LADLE_CALL(ladle__backend_get(device, __func__, &be));
    LADLE_CALL(tensor_new(__func__, dtype, device, ndim, shape, NULL, &n));
    n->owned = 1;
    if (n->numel > 0) {
        st = be->fn->alloc(be, (size_t)n->numel * ladle_dtype_size(dtype), &n->data);
        if (st != LADLE_OK) {
            st = ladle__raise_after(st, __func__, "cannot allocate %lld elements on %s",
                                    (long long)n->numel, ladle_device_name(device));
            goto fail;
        }
    }
    *t = n;
    return LADLE_OK;
fail:
    ladle__free(n);
    return st;
}

ladle_status ladle__tensor_create_as(ladle_memory_kind kind, ladle_dtype dtype,
                                     ladle_device device, int ndim, const int64_t shape[],
                                     ladle_tensor **t)
{
    int prev = ladle__mem_kind_begin(kind);
    ladle_status st = ladle_tensor_create(dtype, device, ndim, shape, t);
    ladle__mem_kind_end(prev);
    return st;
}

/* deprecated (include/ladle/deprecated.h) */
ladle_status ladle_tensor_create_on(ladle_dtype dtype, ladle_device device, int ndim,
                                    const int64_t shape[], ladle_tensor **t)
{
    return ladle_tensor_create(dtype, device, ndim, shape, t);
}

ladle_status ladle_tensor_wrap(ladle_dtype dtype, ladle_device device, int ndim,
                               const int64_t shape[], const int64_t strides[], void *data,
                               ladle_tensor **t)
{
    ladle_status st = LADLE_OK;
    ladle_tensor *n = NULL;
    LADLE_NOT_NULL(t);
    LADLE_CALL(tensor_new(__func__, dtype, device, ndim, shape, strides, &n));
    LADLE_CHECK(data != NULL || n->numel == 0, LADLE_ERR_NULL,
                "data is NULL for a tensor of %lld elements", (long long)n->numel);
    LADLE_CALL(check_memory(__func__, n, data));
    n->data = data;
    *t = n;
    return LADLE_OK;
fail:
    ladle__free(n);
    return st;
}

ladle_status ladle_tensor_set_data(ladle_tensor *t, void *data)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(t);
    LADLE_CHECK(!t->owned, LADLE_ERR_ARG, "the tensor owns its memory");
    LADLE_CHECK(data != NULL || t->numel == 0, LADLE_ERR_NULL, "data is NULL");
    LADLE_CALL(check_memory(__func__, t, data));
    t->data = data;
fail:
    return st;
}

ladle_status ladle__tensor_view(ladle_dtype dtype, ladle_device device, int ndim,
                                const int64_t shape[], ladle_tensor **t)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(t);
    LADLE_CALL(tensor_new(__func__, dtype, device, ndim, shape, NULL, t));
    (*t)->owned = 0;
fail:
    return st;
}

ladle_status ladle__tensor_adopt(ladle_tensor *t, void *data, int apply, const char *func)
{
    size_t es = ladle_dtype_size(t->dtype);
    if (data == NULL && t->numel > 0)
        return ladle__raise(LADLE_ERR_NULL, func, "the buffer for %lld elements is NULL",
                            (long long)t->numel);
    if (!ladle_tensor_is_contiguous(t))
        return ladle__raise(LADLE_ERR_ARG, func, "the tensor to rebind is strided");
    if (t->numel > 0 && (uintptr_t)data % es != 0)
        return ladle__raise(LADLE_ERR_ARG, func,
                            "the buffer at %p is not aligned to its %zu-byte elements", data, es);
    if (t->numel > 0) {
        ladle_status st = check_memory(func, t, data);
        if (st != LADLE_OK)
            return st;
    }
    if (!apply)
        return LADLE_OK;
    if (t->owned && t->data != NULL) {
        const ladle_backend *be = ladle__backend(t->device);
        be->fn->free(be, t->data);
    }
    t->owned = 0;
    t->data = t->numel > 0 ? data : NULL;
    return LADLE_OK;
}

ladle_status ladle_tensor_destroy(ladle_tensor **t)
{
    if (t == NULL || *t == NULL)
        return LADLE_OK;
    if ((*t)->owned) {
        const ladle_backend *be = ladle__backend((*t)->device);
        be->fn->free(be, (*t)->data);
    }
    ladle__free(*t);
    *t = NULL;
    return LADLE_OK;
}

ladle_dtype ladle_tensor_dtype(const ladle_tensor *t)
{
    return t ? t->dtype : (ladle_dtype)0;
}
ladle_device ladle_tensor_device(const ladle_tensor *t)
{
    return t ? t->device : LADLE_CPU;
}
int ladle_tensor_ndim(const ladle_tensor *t) { return t ? t->ndim : 0; }
const int64_t *ladle_tensor_shape(const ladle_tensor *t) { return t ? t->shape : NULL; }
const int64_t *ladle_tensor_strides(const ladle_tensor *t) { return t ? t->strides : NULL; }
int64_t ladle_tensor_numel(const ladle_tensor *t) { return t ? t->numel : 0; }
void *ladle_tensor_data(const ladle_tensor *t) { return t ? t->data : NULL; }

int ladle_tensor_is_contiguous(const ladle_tensor *t)
{
    if (t == NULL)
        return 0;
    if (t->numel == 0)
        return 1;
    int64_t s = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->strides[d] != s)
            return 0;
        s *= t->shape[d];
    }
    return 1;
}

/* The backend of t's device (LADLE_ERR_DEVICE when ladle has none). */
static ladle_status backend_of(const char *func, const ladle_tensor *t,
                               const ladle_backend **be)
{
    return ladle__backend_get(t->device, func, be);
}

ladle_status ladle_tensor_fill(ladle_tensor *t, double value)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *be;
    LADLE_NOT_NULL(t);
    LADLE_CALL(backend_of(__func__, t, &be));
    if (t->numel == 0)
        return LADLE_OK;
    if (t->dtype == LADLE_I64) {
        LADLE_CHECK(ladle_tensor_is_contiguous(t) && be->host_access, LADLE_ERR_UNSUPPORTED,
                    "an i64 tensor is filled only when contiguous and in host memory");
        for (int64_t i = 0; i < t->numel; i++)
            ((int64_t *)t->data)[i] = (int64_t)value;
        return LADLE_OK;
    }
    if (ladle_tensor_is_contiguous(t)) {
        LADLE_CALL(be->fn->fill(be, t->dtype, t->numel, value, t->data));
    } else {
        /* one element on the device, broadcast over the box by stride 0 */
        int64_t zero[LADLE_MAX_NDIM] = {0};
        void *one = NULL;
        LADLE_CALL(be->fn->alloc(be, ladle_dtype_size(t->dtype), &one));
        st = be->fn->fill(be, t->dtype, 1, value, one);
        if (st == LADLE_OK)
            st = be->fn->copy_box(be, t->dtype, LADLE_BOX_COPY, t->ndim, t->shape, one, zero,
                                  t->data, t->strides);
        be->fn->free(be, one);
    }
fail:
    return st;
}

static ladle_status same_layout(const char *func, const ladle_tensor *a,
                                const ladle_tensor *b)
{
    char sa[128], sb[128];
    if (a->dtype != b->dtype)
        return ladle__raise(LADLE_ERR_DTYPE, func, "dtypes %s and %s differ",
                            ladle_dtype_name(a->dtype), ladle_dtype_name(b->dtype));
    int same = a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim; d++)
        same = a->shape[d] == b->shape[d];
    if (!same)
        return ladle__raise(LADLE_ERR_SHAPE, func, "shapes %s and %s differ",
                            ladle__fmt_shape64(sa, sizeof sa, a->ndim, a->shape),
                            ladle__fmt_shape64(sb, sizeof sb, b->ndim, b->shape));
    return LADLE_OK;
}

ladle_status ladle_tensor_copy(ladle_tensor *dst, const ladle_tensor *src)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *bd, *bs;
    LADLE_NOT_NULL(dst);
    LADLE_NOT_NULL(src);
    LADLE_CALL(same_layout(__func__, dst, src));
    LADLE_CALL(backend_of(__func__, dst, &bd));
    LADLE_CALL(backend_of(__func__, src, &bs));
    if (dst->numel == 0)
        return LADLE_OK;
    if (bd == bs) {
        LADLE_CALL(bd->fn->copy_box(bd, dst->dtype, LADLE_BOX_COPY, dst->ndim, dst->shape,
                                    src->data, src->strides, dst->data, dst->strides));
        return LADLE_OK;
    }
    /* between devices: through the host side of whichever is not the host */
    LADLE_CHECK(ladle_tensor_is_contiguous(dst) && ladle_tensor_is_contiguous(src),
                LADLE_ERR_UNSUPPORTED, "a copy from %s to %s needs contiguous tensors",
                ladle_device_name(src->device), ladle_device_name(dst->device));
    LADLE_CHECK(bd->host_access || bs->host_access, LADLE_ERR_UNSUPPORTED,
                "no direct copy from %s to %s", ladle_device_name(src->device),
                ladle_device_name(dst->device));
    size_t bytes = (size_t)dst->numel * ladle_dtype_size(dst->dtype);
    if (bd->host_access) {
        LADLE_CALL(bs->fn->to_host(bs, bytes, src->data, dst->data));
        LADLE_CALL(bs->fn->synchronize(bs));
    } else {
        LADLE_CALL(bd->fn->to_device(bd, bytes, src->data, dst->data));
        LADLE_CALL(bd->fn->synchronize(bd));
    }
fail:
    return st;
}

static int convertible(ladle_dtype t) { return ladle__is_real(t) || ladle__is_half(t); }

/* two byte ranges that share a byte */
static int overlap(const ladle_tensor *a, const ladle_tensor *b)
{
    const char *pa = a->data, *pb = b->data;
    size_t na = (size_t)a->numel * ladle_dtype_size(a->dtype);
    size_t nb = (size_t)b->numel * ladle_dtype_size(b->dtype);
    return pa < pb + nb && pb < pa + na;
}

ladle_status ladle_tensor_convert(ladle_tensor *dst, const ladle_tensor *src)
{
    ladle_status st = LADLE_OK;
    char sa[128], sb[128];
    const ladle_backend *bd, *bs;
    LADLE_NOT_NULL(dst);
    LADLE_NOT_NULL(src);
    LADLE_CHECK(convertible(dst->dtype) && convertible(src->dtype), LADLE_ERR_DTYPE,
                "no conversion from %s to %s (f32, f64, bf16 and f16 convert)",
                ladle_dtype_name(src->dtype), ladle_dtype_name(dst->dtype));
    int same = dst->ndim == src->ndim;
    for (int d = 0; same && d < dst->ndim; d++)
        same = dst->shape[d] == src->shape[d];
    LADLE_CHECK(same, LADLE_ERR_SHAPE, "shapes %s and %s differ",
                ladle__fmt_shape64(sa, sizeof sa, dst->ndim, dst->shape),
                ladle__fmt_shape64(sb, sizeof sb, src->ndim, src->shape));
    LADLE_CALL(backend_of(__func__, dst, &bd));
    LADLE_CALL(backend_of(__func__, src, &bs));
    LADLE_CHECK(bd == bs, LADLE_ERR_DEVICE, "src on %s, dst on %s: convert on one device",
                ladle_device_name(src->device), ladle_device_name(dst->device));
    LADLE_CHECK(ladle_tensor_is_contiguous(dst) && ladle_tensor_is_contiguous(src),
                LADLE_ERR_UNSUPPORTED, "a conversion of strided tensors");
    if (dst->numel == 0)
        return LADLE_OK;
    LADLE_CHECK(!overlap(dst, src) || (dst->data == src->data && dst->dtype == src->dtype),
                LADLE_ERR_ARG, "src and dst overlap");
    LADLE_CALL(bd->fn->convert(bd, src->dtype, src->numel, src->data, dst->dtype, dst->data));
fail:
    return st;
}

/* The whole of a contiguous tensor to host memory or from it. */
static ladle_status transfer(const char *func, const ladle_tensor *t, void *host,
                             const void *from_host)
{
    const ladle_backend *be;
    ladle_status st = LADLE_OK;
    if (t == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "t is NULL");
    if (host == NULL && from_host == NULL && t->numel > 0)
        return ladle__raise(LADLE_ERR_NULL, func, "host is NULL");
    LADLE_CALL(backend_of(func, t, &be));
    if (!ladle_tensor_is_contiguous(t))
        return ladle__raise(LADLE_ERR_UNSUPPORTED, func,
                            "only a contiguous tensor is read or written whole");
    size_t bytes = (size_t)t->numel * ladle_dtype_size(t->dtype);
    if (t->numel > 0) {
        if (from_host != NULL)
            LADLE_CALL(be->fn->to_device(be, bytes, from_host, t->data));
        else
            LADLE_CALL(be->fn->to_host(be, bytes, t->data, host));
        LADLE_CALL(be->fn->synchronize(be));
    }
fail:
    return st;
}

/* The byte offset of element i of t, and t's backend. */
static ladle_status element_at(const char *func, const ladle_tensor *t, int64_t i,
                               const ladle_backend **be, size_t *off)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(backend_of(func, t, be));
    LADLE_CHECK(i >= 0 && i < t->numel, LADLE_ERR_ARG,
                "index %lld is outside the tensor's %lld elements (0 .. numel-1)", (long long)i,
                (long long)t->numel);
    int64_t e = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        e += (i % t->shape[d]) * t->strides[d];
        i /= t->shape[d];
    }
    *off = (size_t)e * ladle_dtype_size(t->dtype);
fail:
    return st;
}

/* One element of any dtype, as ladle_tensor_get and _set move it. */
typedef union element {
    float f;
    double d;
    int64_t i;
    uint16_t h; /* bf16, f16 */
} element;

static ladle_status element_io(const char *func, const ladle_tensor *t, int64_t i, void *get,
                               const void *set)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *be = NULL;
    size_t off = 0, es = ladle_dtype_size(t->dtype);
    LADLE_CALL(element_at(func, t, i, &be, &off));
    if (set != NULL)
        LADLE_CALL(be->fn->to_device(be, es, set, (char *)t->data + off));
    else
        LADLE_CALL(be->fn->to_host(be, es, (const char *)t->data + off, get));
    LADLE_CALL(be->fn->synchronize(be));
fail:
    return st;
}

ladle_status ladle_tensor_get(const ladle_tensor *t, int64_t index, double *value)
{
    ladle_status st = LADLE_OK;
    element e = {0};
    LADLE_NOT_NULL(t);
    LADLE_NOT_NULL(value);
    LADLE_CHECK(ladle_dtype_size(t->dtype) != 0, LADLE_ERR_DTYPE, "unknown dtype %d",
                (int)t->dtype);
    LADLE_CALL(element_io(__func__, t, index, &e, NULL));
    switch (t->dtype) {
    case LADLE_F32:
        *value = e.f;
        break;
    case LADLE_BF16:
        *value = ladle__bf16_to_f32(e.h);
        break;
    case LADLE_F16:
        *value = ladle__f16_to_f32(e.h);
        break;
    case LADLE_I64:
        *value = (double)e.i;
        break;
    default:
        *value = e.d;
    }
fail:
    return st;
}

ladle_status ladle__tensor_get_i64(const ladle_tensor *t, int64_t i, int64_t *v)
{
    ladle_status st = LADLE_OK;
    LADLE_CHECK(t->dtype == LADLE_I64, LADLE_ERR_DTYPE, "%s", ladle_dtype_name(t->dtype));
    LADLE_CALL(element_io(__func__, t, i, v, NULL));
fail:
    return st;
}

ladle_status ladle_tensor_set(ladle_tensor *t, int64_t index, double value)
{
    ladle_status st = LADLE_OK;
    element e = {0};
    LADLE_NOT_NULL(t);
    LADLE_CHECK(ladle_dtype_size(t->dtype) != 0, LADLE_ERR_DTYPE, "unknown dtype %d",
                (int)t->dtype);
    if (t->dtype == LADLE_I64) {
        /* the range of int64_t as doubles: -2^63 is one, 2^63 is just past it */
        LADLE_CHECK(value == value && value >= -9223372036854775808.0 &&
                        value < 9223372036854775808.0 && value == (double)(int64_t)value,
                    LADLE_ERR_ARG, "%g is not an i64 value", value);
        e.i = (int64_t)value;
    } else if (t->dtype == LADLE_F32) {
        e.f = (float)value;
    } else if (t->dtype == LADLE_BF16) {
        e.h = ladle__f64_to_bf16(value);
    } else if (t->dtype == LADLE_F16) {
        e.h = ladle__f64_to_f16(value);
    } else {
        e.d = value;
    }
    LADLE_CALL(element_io(__func__, t, index, NULL, &e));
fail:
    return st;
}

ladle_status ladle__tensor_scale(ladle_tensor *t, double alpha)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *be = NULL;
    LADLE_CALL(backend_of(__func__, t, &be));
    LADLE_CHECK(ladle_tensor_is_contiguous(t), LADLE_ERR_UNSUPPORTED, "a strided tensor");
    LADLE_CALL(be->fn->scal(be, t->dtype, t->numel, alpha, t->data));
fail:
    return st;
}

ladle_status ladle_tensor_read(const ladle_tensor *t, void *host)
{
    return transfer(__func__, t, host, NULL);
}

ladle_status ladle_tensor_write(ladle_tensor *t, const void *host)
{
    return transfer(__func__, t, NULL, host);
}

ladle_status ladle_tensor_dot(const ladle_tensor *a, const ladle_tensor *b, double *result)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *be, *bb;
    void *pa = NULL, *pb = NULL;
    LADLE_NOT_NULL(a);
    LADLE_NOT_NULL(b);
    LADLE_NOT_NULL(result);
    LADLE_CALL(same_layout(__func__, a, b));
    LADLE_CALL(backend_of(__func__, a, &be));
    LADLE_CALL(backend_of(__func__, b, &bb));
    LADLE_CHECK(be == bb, LADLE_ERR_DEVICE, "a is on %s, b on %s", ladle_device_name(a->device),
                ladle_device_name(b->device));
    LADLE_CHECK(ladle__is_real(a->dtype), LADLE_ERR_DTYPE, "no inner product of %s tensors",
                ladle_dtype_name(a->dtype));
    *result = 0.0;
    if (a->numel == 0)
        return LADLE_OK;
    if (ladle_tensor_is_contiguous(a) && ladle_tensor_is_contiguous(b)) {
        LADLE_CALL(ladle__be_dot(be, a->dtype, a->numel, a->data, b->data, result));
    } else {
        /* pack both, then dot: a test-path convenience, not a hot path */
        size_t bytes = (size_t)a->numel * ladle_dtype_size(a->dtype);
        LADLE_CALL(be->fn->alloc(be, bytes, &pa));
        LADLE_CALL(be->fn->alloc(be, bytes, &pb));
        LADLE_CALL(be->fn->pack(be, a->dtype, a->ndim, a->shape, a->data, a->strides, pa));
        LADLE_CALL(be->fn->pack(be, b->dtype, b->ndim, b->shape, b->data, b->strides, pb));
        LADLE_CALL(ladle__be_dot(be, a->dtype, a->numel, pa, pb, result));
    }
fail:
    if (pa != NULL)
        be->fn->free(be, pa);
    if (pb != NULL)
        be->fn->free(be, pb);
    return st;
}

ladle_status ladle_tensor_fill_random(ladle_tensor *t, uint64_t seed, uint64_t stream)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *be;
    LADLE_NOT_NULL(t);
    LADLE_CALL(backend_of(__func__, t, &be));
    LADLE_CHECK(ladle__is_real(t->dtype), LADLE_ERR_DTYPE, "no random %s values",
                ladle_dtype_name(t->dtype));
    if (t->numel > 0)
        LADLE_CALL(be->fn->fill_random(be, t->dtype, t->ndim, t->shape, t->strides, seed,
                                       stream, t->data));
fail:
    return st;
}
