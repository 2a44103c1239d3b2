/* conv: placeholder until the kernels land. */
#include "src/backends/cuda/cuda.h"

ladle_status ladle__cuda_conv_im2col(const ladle_backend *be, ladle_dtype dtype,                   const ladle_conv_geom *geom, int64_t nb, const void *x,                   int64_t x_stride, void *col, int64_t ld, void *planes)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "conv_im2col", "not yet on cuda");
}

ladle_status ladle__cuda_conv_col2im(const ladle_backend *be, ladle_dtype dtype,                   const ladle_conv_geom *geom, int64_t nb, const void *col,                   int64_t ld, void *dx, int64_t dx_stride, void *planes)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "conv_col2im", "not yet on cuda");
}

ladle_status ladle__cuda_conv_wide_im2col(const ladle_backend *be, ladle_dtype dtype,                      const ladle_conv_geom *geom, int64_t nb,                      const void *x, int64_t x_stride, void *xpad,                      void *col, int64_t ld)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "conv_wide_im2col", "not yet on cuda");
}

ladle_status ladle__cuda_conv_wide_grid(const ladle_backend *be, ladle_dtype dtype,                     const ladle_conv_geom *geom, int to_tensor,                     int64_t nb, void *grid, int64_t ld, void *t,                     int64_t t_stride)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "conv_wide_grid", "not yet on cuda");
}

ladle_status ladle__cuda_bias_add(const ladle_backend *be, ladle_dtype dtype, int64_t rows,                  int64_t channels, int64_t inner, const void *b, void *y)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "bias_add", "not yet on cuda");
}

ladle_status ladle__cuda_bias_grad(const ladle_backend *be, ladle_dtype dtype, int64_t rows,                  int64_t channels, int64_t inner, const void *dy,                  void *db)
{
    return ladle__raise(LADLE_ERR_UNSUPPORTED, "bias_grad", "not yet on cuda");
}
