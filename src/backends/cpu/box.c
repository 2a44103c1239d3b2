/*
 * Copies and boxes on the CPU. Box kernels merge the dimensions they can
 * (see merge), walk all but the innermost with an index counter and run the
 * innermost one as a plain loop (memcpy when both sides are unit stride and
 * the row is long), so packing a box costs one pass over its bytes.
 */
#include <string.h>

#include "src/backends/cpu/cpu.h"

#define T float
#define ROW row_f32
#include "src/backends/cpu/box_rows.inc"
#undef T
#undef ROW
#define T double
#define ROW row_f64
#include "src/backends/cpu/box_rows.inc"
#undef T
#undef ROW

ladle_status ladle__cpu_copy(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                             const void *src, void *dst)
{
    if (n > 0 && src != dst)
        memmove(dst, src, (size_t)n * ladle_dtype_size(dtype));
    return LADLE_OK;
}

/*
 * The box with its dimensions merged where that changes no element's
 * place: extents of 1 dropped, and a dimension folded into the one inside
 * it where both sides step over it as one run of the inner (stride =
 * inner extent x inner stride; the source's strides do not count when it
 * is not read). A halo or a tile of NCHW rows whose width is whole becomes
 * a few long rows instead of many short ones. LeNet-5's second pooling on
 * 2 row tiles (256 x 16 x 5 x 10 a rank, rows of 10): the copies into and
 * out of its padded tensor were 32% of the layer's samples row by row, 9%
 * merged, and the layer's forward + backward went from 1.07 to 0.42-0.47
 * ms a rank. Returns the merged dimension count (>= 1).
 */
static int merge(ladle_box_mode mode, int ndim, const int64_t *ext, const int64_t *sstr,
                 const int64_t *dstr, int64_t *e, int64_t *ss, int64_t *ds)
{
    int n = 0;
    for (int d = 0; d < ndim; d++) {
        if (ext[d] == 1)
            continue;
        e[n] = ext[d], ss[n] = mode == LADLE_BOX_ZERO ? 0 : sstr[d], ds[n] = dstr[d];
        n++;
    }
    if (n == 0) { /* every extent 1: one element */
        e[0] = 1, ss[0] = 0, ds[0] = 0;
        return 1;
    }
    /* fold outer into inner, innermost pair first */
    int m = n - 1;
    int64_t te[LADLE_MAX_NDIM], ts[LADLE_MAX_NDIM], td[LADLE_MAX_NDIM];
    te[m] = e[m], ts[m] = ss[m], td[m] = ds[m];
    int at = m; /* the innermost kept dimension's slot, growing outward */
    for (int d = m - 1; d >= 0; d--) {
        if (ss[d] == te[at] * ts[at] && ds[d] == te[at] * td[at]) {
            te[at] *= e[d];
            continue;
        }
        at--;
        te[at] = e[d], ts[at] = ss[d], td[at] = ds[d];
    }
    int k = n - at;
    for (int d = 0; d < k; d++)
        e[d] = te[at + d], ss[d] = ts[at + d], ds[d] = td[at + d];
    return k;
}

ladle_status ladle__cpu_copy_box(const ladle_backend *be, ladle_dtype dtype,
                                 ladle_box_mode mode, int ndim, const int64_t *ext,
                                 const void *src, const int64_t *sstr, void *dst,
                                 const int64_t *dstr)
{
    static const int64_t one = 1;
    int64_t idx[LADLE_MAX_NDIM] = {0}, e[LADLE_MAX_NDIM], ss[LADLE_MAX_NDIM],
            ds[LADLE_MAX_NDIM];
    size_t es = ladle_dtype_size(dtype);
    if (ndim == 0) /* a scalar is a box of one element */
        return ladle__cpu_copy_box(be, dtype, mode, 1, &one, src, &one, dst, &one);
    for (int d = 0; d < ndim; d++)
        if (ext[d] <= 0)
            return LADLE_OK;
    int nd = merge(mode, ndim, ext, sstr, dstr, e, ss, ds);
    int inner = nd - 1;
    /* the rows' offsets, kept up to date as the counter steps */
    int64_t so = 0, doff = 0;
    for (;;) {
        const char *s = mode == LADLE_BOX_ZERO ? NULL : (const char *)src + (size_t)so * es;
        char *dp = (char *)dst + (size_t)doff * es;
        if (es == 2)
            ladle__cpu_row_half(mode, dtype, e[inner], (const uint16_t *)s, ss[inner],
                                (uint16_t *)dp, ds[inner]);
        else if (dtype == LADLE_F32)
            row_f32(mode, e[inner], (const float *)s, ss[inner], (float *)dp, ds[inner]);
        else
            row_f64(mode, e[inner], (const double *)s, ss[inner], (double *)dp, ds[inner]);
        int d = inner - 1;
        for (; d >= 0; d--) {
            so += ss[d], doff += ds[d];
            if (++idx[d] < e[d])
                break;
            so -= e[d] * ss[d], doff -= e[d] * ds[d];
            idx[d] = 0;
        }
        if (d < 0)
            break;
    }
    return LADLE_OK;
}

static void contiguous(int ndim, const int64_t *ext, int64_t *str)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        str[d] = s;
        s *= ext[d];
    }
}

ladle_status ladle__cpu_pack(const ladle_backend *be, ladle_dtype dtype, int ndim,
                             const int64_t *ext, const void *src, const int64_t *sstr,
                             void *dst)
{
    int64_t dstr[LADLE_MAX_NDIM];
    contiguous(ndim, ext, dstr);
    return ladle__cpu_copy_box(be, dtype, LADLE_BOX_COPY, ndim, ext, src, sstr, dst, dstr);
}

ladle_status ladle__cpu_unpack(const ladle_backend *be, ladle_dtype dtype,
                               ladle_box_mode mode, int ndim, const int64_t *ext,
                               const void *src, void *dst, const int64_t *dstr)
{
    int64_t sstr[LADLE_MAX_NDIM];
    contiguous(ndim, ext, sstr);
    return ladle__cpu_copy_box(be, dtype, mode, ndim, ext, src, sstr, dst, dstr);
}
