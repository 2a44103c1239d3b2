/*
 * Copies and boxes on the CPU. Box kernels walk all but the innermost
 * dimension with an index counter and run the innermost one as a plain loop
 * (memcpy when both sides are unit stride), so packing a box costs one pass
 * over its bytes.
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

ladle_status ladle__cpu_copy_box(const ladle_backend *be, ladle_dtype dtype,
                                 ladle_box_mode mode, int ndim, const int64_t *ext,
                                 const void *src, const int64_t *sstr, void *dst,
                                 const int64_t *dstr)
{
    static const int64_t one = 1;
    int64_t idx[LADLE_MAX_NDIM] = {0};
    size_t es = ladle_dtype_size(dtype);
    if (ndim == 0) /* a scalar is a box of one element */
        return ladle__cpu_copy_box(be, dtype, mode, 1, &one, src, &one, dst, &one);
    for (int d = 0; d < ndim; d++)
        if (ext[d] <= 0)
            return LADLE_OK;
    int inner = ndim - 1;
    for (;;) {
        int64_t so = 0, doff = 0;
        for (int d = 0; d < inner; d++) {
            so += idx[d] * (mode == LADLE_BOX_ZERO ? 0 : sstr[d]);
            doff += idx[d] * dstr[d];
        }
        const char *s = mode == LADLE_BOX_ZERO ? NULL : (const char *)src + (size_t)so * es;
        char *dp = (char *)dst + (size_t)doff * es;
        int64_t ss = mode == LADLE_BOX_ZERO ? 0 : sstr[inner];
        if (dtype == LADLE_F32)
            row_f32(mode, ext[inner], (const float *)s, ss, (float *)dp, dstr[inner]);
        else
            row_f64(mode, ext[inner], (const double *)s, ss, (double *)dp, dstr[inner]);
        int d = inner - 1;
        while (d >= 0 && ++idx[d] == ext[d])
            idx[d--] = 0;
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
