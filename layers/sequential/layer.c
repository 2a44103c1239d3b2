/* Shared pieces of the sequential layers' creates (see layer_impl.h). */
#include <string.h>

#include "layers/sequential/layer_impl.h"

ladle_status ladle__window_layer_check(int nd, unsigned flags, ladle_dtype dtype,
                                       const int64_t *x_shape, const char *func)
{
    if (nd < 1 || nd > 3)
        return ladle__raise(LADLE_ERR_ARG, func, "%d spatial dimensions (1 to 3)", nd);
    if ((flags & ~(unsigned)(LADLE_CHECKED | LADLE_OVERLAP_HALO)) != 0)
        return ladle__raise(LADLE_ERR_ARG, func, "unknown flags 0x%x", flags);
    return ladle__layer_check_args(func, dtype, 2 + nd, x_shape, 3);
}

ladle_status ladle__layer_same_shape(const ladle_op_vtable *vt, void *impl, ladle_dtype dtype,
                                     ladle_device device, int ndim, const int64_t *shape,
                                     ladle_op **out, const char *func)
{
    ladle_op *op = NULL;
    ladle_status st = ladle__layer_new(vt, dtype, device, ndim, shape, ndim, shape, 1, &op, func);
    if (st != LADLE_OK) {
        ladle__free(impl);
        return st;
    }
    op->impl = impl;
    *out = op;
    return LADLE_OK;
}

ladle_status ladle__layer_ids_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       ladle_tensor *dx, int64_t n)
{
    (void)op, (void)ctx, (void)dy, (void)dx, (void)n;
    return LADLE_OK;
}

void ladle__layer_free_impl(ladle_op *op) { ladle__free(op->impl); }

void ladle__layer_ctx_free_impl(ladle_ctx *ctx)
{
    ladle__free(ctx->impl);
    ctx->impl = NULL;
}

void ladle__part_op(void *member, const ladle_backend *be)
{
    (void)be;
    ladle_op_destroy(member);
}

void ladle__part_tensor(void *member, const ladle_backend *be)
{
    (void)be;
    ladle_tensor_destroy(member);
}

/* A block's member may be a double * as well as a void *: it is read and
 * nulled through memcpy, not through a void ** that would alias it. */
static void *take_pointer(void *member)
{
    void *p = NULL, *null = NULL;
    memcpy(&p, member, sizeof p);
    memcpy(member, &null, sizeof null);
    return p;
}

void ladle__part_host(void *member, const ladle_backend *be)
{
    (void)be;
    ladle__free(take_pointer(member));
}

void ladle__part_device(void *member, const ladle_backend *be)
{
    if (be == NULL)
        return;
    void *buffer = take_pointer(member);
    if (buffer != NULL)
        be->fn->free(be, buffer);
}

void ladle__parts_release(void *s, const ladle__part *parts, const ladle_backend *be)
{
    if (s == NULL)
        return;
    for (const ladle__part *p = parts; p->free != NULL; p++)
        p->free((char *)s + p->offset, be);
}

void ladle__parts_free(void *impl, const ladle__part *parts, const ladle_backend *be)
{
    ladle__parts_release(impl, parts, be);
    ladle__free(impl);
}
