/*
 * Padding modes as box copies (see pad_impl.h). Padding dimension i copies
 * one plane per padding cell: the plane spans every dimension before i over
 * its data and padding cells (already filled) and every dimension after i
 * over its data cells only (filled later from these), so the corners come
 * out as padding dimension by dimension. Each copy is a linear map
 * "dst = src" between disjoint planes; its adjoint "src += dst" runs in the
 * reverse order. The copies go through the backend's copy_box slot, so
 * every device runs them.
 */
#include "layers/sequential/pad_impl.h"

int64_t ladle__pad_source(ladle_padding_mode mode, int64_t g, int64_t n)
{
    if (g >= 0 && g < n)
        return g;
    switch (mode) {
    case LADLE_PAD_REFLECT:
        return g < 0 ? -g : 2 * (n - 1) - g;
    case LADLE_PAD_REPLICATE:
        return g < 0 ? 0 : n - 1;
    case LADLE_PAD_CIRCULAR:
        return g < 0 ? g + n : g - n;
    default:
        return g;
    }
}

int ladle__pad_fits(ladle_padding_mode mode, int64_t lo, int64_t hi, int64_t n)
{
    if (lo < 0 || hi < 0 || n < 1)
        return 0;
    if (mode == LADLE_PAD_REFLECT)
        return lo < n && hi < n;
    if (mode == LADLE_PAD_CIRCULAR)
        return lo <= n && hi <= n;
    return 1;
}

const char *ladle__pad_name(ladle_padding_mode mode)
{
    switch (mode) {
    case LADLE_PAD_ZEROS:
        return "zeros";
    case LADLE_PAD_REFLECT:
        return "reflect";
    case LADLE_PAD_REPLICATE:
        return "replicate";
    case LADLE_PAD_CIRCULAR:
        return "circular";
    default:
        return NULL;
    }
}

/* The local cells [*a, *b) of dimension d whose global index lies in
 * [g0, g1). */
static void cells(const ladle__pad_dim *d, int64_t extent, int64_t g0, int64_t g1, int64_t *a,
                  int64_t *b)
{
    *a = g0 - d->off < 0 ? 0 : g0 - d->off;
    *b = g1 - d->off > extent ? extent : g1 - d->off;
    if (*b < *a)
        *b = *a;
}

/* The padding cells of dimension i, each copied from (or, adjoint, added
 * into) its source plane. */
static ladle_status pad_dim(const ladle_backend *be, ladle_dtype dtype, ladle_padding_mode mode,
                            int ndim, const int64_t *shape, const ladle__pad_dim *dims,
                            const int64_t *str, char *t, int i, int adjoint)
{
    size_t es = ladle_dtype_size(dtype);
    int64_t ext[LADLE_MAX_NDIM], base = 0;
    const ladle__pad_dim *di = &dims[i];
    for (int e = 0; e < ndim; e++) {
        int64_t a, b;
        if (e == i)
            a = 0, b = 1;
        else if (e < i)
            cells(&dims[e], shape[e], -dims[e].lo, dims[e].n + dims[e].hi, &a, &b);
        else
            cells(&dims[e], shape[e], 0, dims[e].n, &a, &b);
        ext[e] = b - a;
        base += a * str[e];
    }
    int64_t ranges[2][2];
    cells(di, shape[i], -di->lo, 0, &ranges[0][0], &ranges[0][1]);
    cells(di, shape[i], di->n, di->n + di->hi, &ranges[1][0], &ranges[1][1]);
    for (int side = 0; side < 2; side++)
        for (int64_t c = ranges[side][0]; c < ranges[side][1]; c++) {
            char *dst = t + (size_t)(base + c * str[i]) * es;
            ladle_status st;
            if (mode == LADLE_PAD_ZEROS) {
                if (adjoint)
                    continue;
                st = be->fn->copy_box(be, dtype, LADLE_BOX_ZERO, ndim, ext, dst, str, dst, str);
            } else {
                int64_t src = ladle__pad_source(mode, di->off + c, di->n) - di->off;
                char *sp = t + (size_t)(base + src * str[i]) * es;
                st = adjoint ? be->fn->copy_box(be, dtype, LADLE_BOX_ADD, ndim, ext, dst, str,
                                                sp, str)
                             : be->fn->copy_box(be, dtype, LADLE_BOX_COPY, ndim, ext, sp, str,
                                                dst, str);
            }
            if (st != LADLE_OK)
                return st;
        }
    return LADLE_OK;
}

ladle_status ladle__pad_fill(const ladle_backend *be, ladle_dtype dtype, ladle_padding_mode mode,
                             int ndim, const int64_t *shape, const ladle__pad_dim *dims, void *t,
                             int adjoint)
{
    int64_t str[LADLE_MAX_NDIM], s = 1;
    for (int e = ndim - 1; e >= 0; e--) {
        str[e] = s;
        s *= shape[e];
        if (shape[e] == 0)
            return LADLE_OK;
    }
    for (int k = 0; k < ndim; k++) {
        int i = adjoint ? ndim - 1 - k : k;
        if (dims[i].lo == 0 && dims[i].hi == 0)
            continue;
        ladle_status st = pad_dim(be, dtype, mode, ndim, shape, dims, str, t, i, adjoint);
        if (st != LADLE_OK)
            return st;
    }
    return LADLE_OK;
}
