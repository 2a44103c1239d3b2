/* box: placeholder until the kernels land. */
#include "src/backends/cuda/cuda.h"

ladle_status ladle__cuda_copy(const ladle_backend *be, ladle_dtype dtype, int64_t n,                const void *src, void *dst)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "copy", "not yet on cuda");
}

ladle_status ladle__cuda_copy_box(const ladle_backend *be, ladle_dtype dtype,                  ladle_box_mode mode, int ndim, const int64_t *ext,                  const void *src, const int64_t *sstr, void *dst,                  const int64_t *dstr)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "copy_box", "not yet on cuda");
}

ladle_status ladle__cuda_pack(const ladle_backend *be, ladle_dtype dtype, int ndim,                const int64_t *ext, const void *src, const int64_t *sstr,                void *dst)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "pack", "not yet on cuda");
}

ladle_status ladle__cuda_unpack(const ladle_backend *be, ladle_dtype dtype,                 ladle_box_mode mode, int ndim, const int64_t *ext,                 const void *src, void *dst, const int64_t *dstr)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "unpack", "not yet on cuda");
}
