/*
 * The row statistics of the vocabulary-parallel cross entropy on the GPU
 * (lse_rows, exp_rows; the CPU's are in src/backends/cpu/loss.c). Rows are
 * contiguous.
 *
 *   - lse_rows: a block per row (kernel.h's row launch). The row's maximum
 *     (NaN skipped, as fmax does) and whether it holds a NaN or +inf are
 *     reduced over the block first; the sum of e^{x - max} in double (the
 *     double exponential, for f32 rows too: more accurate than the CPU's
 *     f32 terms) by the block's fixed tree. A row with NaN or +inf gives
 *     NaN, a row of -inf only (or none) -inf, as the contract says.
 *   - exp_rows: element-wise, a thread per element, in double and rounded
 *     once; the arguments clamped above at 88 (f32) and 709 (f64), and 0
 *     below e^-87 (f32) and e^-708.39 (f64), the CPU's limits.
 */
#include "src/backends/cuda/lines.h"

template <class T>
__global__ void lse_rows_kernel(int64_t rows, int64_t len, const T *x, double *lse)
{
    LADLE_DYN_SHARED(double, shm);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * len;
        double mx = -INFINITY, bad = 0;
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
            double v = (double)xr[j];
            if (v != v || v == INFINITY) /* NaN or +inf */
                bad = 1;
            mx = fmax(mx, v);
        }
        bad = ladle_block_sum(bad, shm);
        mx = ladle_block_max(mx, shm);
        double z; /* the same branch in every thread of the block */
        if (bad != 0) {
            z = NAN;
        } else if (mx == -INFINITY) {
            z = -INFINITY;
        } else {
            double s = 0;
            for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
                s += exp((double)xr[j] - mx);
            z = mx + log(ladle_block_sum(s, shm));
        }
        if (threadIdx.x == 0)
            lse[r] = z;
    }
}

template <class T>
__global__ void exp_rows_kernel(int64_t rows, int64_t len, const T *x, const double *shift,
                                const double *scale, T *y)
{
    const double top = sizeof(T) == 4 ? 88.0 : 709.0,
                 low = sizeof(T) == 4 ? -87.0 : -708.39;
    LADLE_GRID_STRIDE(e, rows * len)
    {
        int64_t r = e / len;
        double d = (double)x[e] - shift[r];
        d = d > top ? top : d;
        y[e] = d < low ? (T)0 : (T)(scale[r] * exp(d));
    }
}

ladle_status ladle__cuda_lse_rows(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                                  int64_t len, const void *x, double *lse)
{
    if (rows == 0)
        return LADLE_OK;
    int threads = ladle__cuda_row_threads(len);
    unsigned grid = ladle__cuda_row_blocks(be, rows);
    size_t shmem = threads * sizeof(double);
    cudaStream_t st = ladle__cuda_stream(be);
    if (dtype == LADLE_F32)
        LADLE_LAUNCH_SYNC(lse_rows_kernel<float>, grid, threads, shmem, st, rows, len,
                          (const float *)x, lse);
    else
        LADLE_LAUNCH_SYNC(lse_rows_kernel<double>, grid, threads, shmem, st, rows, len,
                          (const double *)x, lse);
    LADLE_CUDA_LAUNCHED("lse_rows");
    return LADLE_OK;
}

ladle_status ladle__cuda_exp_rows(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                                  int64_t len, const void *x, const double *shift,
                                  const double *scale, void *y)
{
    if (rows == 0 || len == 0)
        return LADLE_OK;
    unsigned grid = ladle__cuda_blocks(be, rows * len, LADLE_CUDA_THREADS);
    cudaStream_t st = ladle__cuda_stream(be);
    if (dtype == LADLE_F32)
        LADLE_LAUNCH(exp_rows_kernel<float>, grid, LADLE_CUDA_THREADS, 0, st, rows, len,
                     (const float *)x, shift, scale, (float *)y);
    else
        LADLE_LAUNCH(exp_rows_kernel<double>, grid, LADLE_CUDA_THREADS, 0, st, rows, len,
                     (const double *)x, shift, scale, (double *)y);
    LADLE_CUDA_LAUNCHED("exp_rows");
    return LADLE_OK;
}
