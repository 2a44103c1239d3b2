/*
 * Layer norm and RMS norm on the GPU (the CPU's are in
 * src/backends/cpu/norm.c), and the token embedding's lookup and
 * scatter-add. The contract asks for sums and elementwise steps in double,
 * each result rounded to the dtype once, for f32 rows as for f64: so the
 * statistics of both dtypes are accumulated in double here too (at least
 * as accurate as the CPU, as the contract requires).
 *
 *   - forward and backward: a block per row (rows are contiguous, so its
 *     threads read the row coalesced), as few threads as cover the row, 32
 *     to 256. Layer norm's statistics are one pass over the row, the
 *     deviations d = x - c from a shift c and their squares summed in
 *     double and added by a fixed tree (ladle_block_sum): the mean is c +
 *     sum d / L, the variance (sum d^2 - (sum d)^2 / L) / L. c is the mean
 *     of the row's first min(L, 32) values, as the CPU takes for f32 rows
 *     (norm.c says why the subtraction then loses at most a few bits of
 *     double); the output is a second read of the row.
 *   - weight gradient: the sums run down the columns, over rows: a block
 *     is 32 columns x 8 lanes of rows (a warp reads 32 neighbouring
 *     columns of one row), each lane sums its rows in order, the 8 lanes
 *     are added in order, and the total is added to dw, db once.
 *   - embedding: the lookup is a copy, a thread per element. The backward
 *     adds every row of dy whose id is v into row v of dw, in the order of
 *     the tokens, in the dtype, as the CPU does: so the result is the CPU's
 *     bit for bit, on every run. Each row v of dw is owned by the block of
 *     its first token (the block finds whether an earlier token has its
 *     id); the owner walks the later tokens for the others. No atomics, no
 *     scratch; the walk costs n id reads for each distinct id, which is
 *     fine for a batch's tokens (thousands) but quadratic beyond.
 */
#include "src/backends/cuda/kernel.h"

/* the values of a row the layer norm's shift is the mean of (norm.c's NL) */
#define NORM_SHIFT 32
/* the weight gradient's block: columns x lanes of rows */
#define WG_COLS 32
#define WG_LANES (LADLE_CUDA_THREADS / WG_COLS)

/* The row's statistics: *mu (0 for RMS norm) and *is, by every thread of
 * the block. */
template <class T>
__device__ __forceinline__ void row_stats(int rms, int64_t len, double eps, const T *xr,
                                          double *shm, double *mu, double *is)
{
    if (rms) {
        double s2 = 0;
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
            s2 += (double)xr[j] * (double)xr[j];
        s2 = ladle_block_sum(s2, shm);
        *mu = 0;
        *is = 1.0 / sqrt(s2 / (double)len + eps);
        return;
    }
    int64_t n1 = len < NORM_SHIFT ? len : NORM_SHIFT;
    double c = 0;
    for (int64_t j = 0; j < n1; j++) /* the same loads in every thread: broadcast */
        c += (double)xr[j];
    c /= (double)n1;
    double s1 = 0, s2 = 0;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
        double d = (double)xr[j] - c;
        s1 += d;
        s2 += d * d;
    }
    s1 = ladle_block_sum(s1, shm);
    s2 = ladle_block_sum(s2, shm);
    double var = (s2 - s1 * s1 / (double)len) / (double)len;
    *mu = c + s1 / (double)len;
    *is = 1.0 / sqrt((var > 0 ? var : 0) + eps);
}

template <class T>
__global__ void norm_fwd_kernel(int rms, int64_t rows, int64_t len, double eps, const T *x,
                                const T *w, const T *b, T *y, double *mean, double *invstd)
{
    LADLE_DYN_SHARED(double, shm);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * len;
        T *yr = y + r * len;
        double mu, is;
        row_stats(rms, len, eps, xr, shm, &mu, &is);
        if (threadIdx.x == 0) {
            invstd[r] = is;
            if (!rms)
                mean[r] = mu;
        }
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
            double v = ((double)xr[j] - mu) * is;
            if (w)
                v *= (double)w[j];
            if (b)
                v += (double)b[j];
            yr[j] = (T)v;
        }
    }
}

template <class T>
__global__ void norm_bwd_kernel(int rms, int64_t rows, int64_t len, const T *x, const T *w,
                                const T *dy, const double *mean, const double *invstd,
                                T *dx)
{
    LADLE_DYN_SHARED(double, shm);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * len, *gr = dy + r * len;
        T *dr = dx + r * len;
        double mu = rms ? 0 : mean[r], is = invstd[r], sg = 0, sgx = 0;
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
            double g = (double)gr[j] * (w ? (double)w[j] : 1.0);
            sg += g;
            sgx += g * ((double)xr[j] - mu);
        }
        /* the last barrier also keeps dx (maybe dy's storage) unwritten
         * until every thread has read its part of the row */
        sg = ladle_block_sum(sg, shm);
        sgx = ladle_block_sum(sgx, shm);
        double cx = -is * is * (is * sgx / (double)len);
        double c = rms ? 0 : -is * (sg / (double)len);
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
            double g = (double)gr[j] * (w ? (double)w[j] : 1.0);
            dr[j] = (T)(is * g + (((double)xr[j] - mu) * cx + c));
        }
    }
}

/* Block b owns columns b WG_COLS ..; thread (lane, col) sums rows lane,
 * lane + WG_LANES, ...; lane 0 adds the lanes in order. */
template <class T>
__global__ void norm_wgrad_kernel(int rms, int64_t rows, int64_t len, const T *x,
                                  const T *dy, const double *mean, const double *invstd,
                                  T *dw, T *db)
{
    __shared__ double shw[LADLE_CUDA_THREADS], shb[LADLE_CUDA_THREADS];
    int col = (int)(threadIdx.x % WG_COLS), lane = (int)(threadIdx.x / WG_COLS);
    for (int64_t j0 = (int64_t)blockIdx.x * WG_COLS; j0 < len;
         j0 += (int64_t)gridDim.x * WG_COLS) {
        int64_t j = j0 + col;
        double sw = 0, sb = 0;
        if (j < len)
            for (int64_t r = lane; r < rows; r += WG_LANES) {
                double g = (double)dy[r * len + j];
                double mu = rms ? 0 : mean[r];
                sw += g * ((double)x[r * len + j] - mu) * invstd[r];
                sb += g;
            }
        shw[threadIdx.x] = sw;
        shb[threadIdx.x] = sb;
        __syncthreads();
        if (lane == 0 && j < len) {
            for (int l = 1; l < WG_LANES; l++) {
                sw += shw[l * WG_COLS + col];
                sb += shb[l * WG_COLS + col];
            }
            if (dw)
                dw[j] = (T)((double)dw[j] + sw);
            if (db)
                db[j] = (T)((double)db[j] + sb);
        }
        __syncthreads();
    }
}

template <class T>
static ladle_status norm_forward(const ladle_backend *be, int rms, int64_t rows,
                                 int64_t len, double eps, const T *x, const T *w,
                                 const T *b, T *y, double *mean, double *invstd)
{
    if (rows == 0 || len == 0)
        return LADLE_OK;
    int threads = ladle__cuda_row_threads(len);
    LADLE_LAUNCH_SYNC(norm_fwd_kernel<T>, ladle__cuda_row_blocks(be, rows), threads,
                      threads * sizeof(double), ladle__cuda_stream(be), rms, rows, len, eps,
                      x, w, b, y, mean, invstd);
    LADLE_CUDA_LAUNCHED("norm_forward");
    return LADLE_OK;
}

ladle_status ladle__cuda_norm_forward(const ladle_backend *be, ladle_dtype dtype, int rms,
                                      int64_t rows, int64_t len, double eps, const void *x,
                                      const void *w, const void *b, void *y, double *mean,
                                      double *invstd)
{
    if (dtype == LADLE_F32)
        return norm_forward(be, rms, rows, len, eps, (const float *)x, (const float *)w,
                            (const float *)b, (float *)y, mean, invstd);
    return norm_forward(be, rms, rows, len, eps, (const double *)x, (const double *)w,
                        (const double *)b, (double *)y, mean, invstd);
}

template <class T>
static ladle_status norm_backward(const ladle_backend *be, int rms, int64_t rows,
                                  int64_t len, const T *x, const T *w, const T *dy,
                                  const double *mean, const double *invstd, T *dx)
{
    if (rows == 0 || len == 0)
        return LADLE_OK;
    int threads = ladle__cuda_row_threads(len);
    LADLE_LAUNCH_SYNC(norm_bwd_kernel<T>, ladle__cuda_row_blocks(be, rows), threads,
                      threads * sizeof(double), ladle__cuda_stream(be), rms, rows, len, x,
                      w, dy, mean, invstd, dx);
    LADLE_CUDA_LAUNCHED("norm_backward");
    return LADLE_OK;
}

ladle_status ladle__cuda_norm_backward(const ladle_backend *be, ladle_dtype dtype, int rms,
                                       int64_t rows, int64_t len, const void *x,
                                       const void *w, const void *dy, const double *mean,
                                       const double *invstd, void *dx)
{
    if (dtype == LADLE_F32)
        return norm_backward(be, rms, rows, len, (const float *)x, (const float *)w,
                             (const float *)dy, mean, invstd, (float *)dx);
    return norm_backward(be, rms, rows, len, (const double *)x, (const double *)w,
                         (const double *)dy, mean, invstd, (double *)dx);
}

template <class T>
static ladle_status norm_wgrad(const ladle_backend *be, int rms, int64_t rows, int64_t len,
                               const T *x, const T *dy, const double *mean,
                               const double *invstd, T *dw, T *db)
{
    if (len == 0 || (dw == NULL && db == NULL))
        return LADLE_OK;
    unsigned grid = ladle__cuda_blocks(be, len, WG_COLS);
    LADLE_LAUNCH_SYNC(norm_wgrad_kernel<T>, grid, LADLE_CUDA_THREADS, 0,
                      ladle__cuda_stream(be), rms, rows, len, x, dy, mean, invstd, dw, db);
    LADLE_CUDA_LAUNCHED("norm_weight_grad");
    return LADLE_OK;
}

/* ws (the contract's 2 len doubles of scratch) is not needed: each
 * column's sum stays in one thread until it is added. */
ladle_status ladle__cuda_norm_weight_grad(const ladle_backend *be, ladle_dtype dtype,
                                          int rms, int64_t rows, int64_t len, const void *x,
                                          const void *dy, const double *mean,
                                          const double *invstd, void *dw, void *db,
                                          double *ws)
{
    (void)ws;
    if (dtype == LADLE_F32)
        return norm_wgrad(be, rms, rows, len, (const float *)x, (const float *)dy, mean,
                          invstd, (float *)dw, (float *)db);
    return norm_wgrad(be, rms, rows, len, (const double *)x, (const double *)dy, mean,
                      invstd, (double *)dw, (double *)db);
}

/* ---- the token embedding ---- */

template <class T>
__global__ void embed_fwd_kernel(int64_t n, int64_t dim, const int64_t *ids, const T *w,
                                 T *y)
{
    LADLE_GRID_STRIDE(e, n * dim)
    {
        int64_t i = e / dim, j = e % dim;
        y[e] = w[ids[i] * dim + j];
    }
}

/* Block per token i (striding): whether an earlier token has i's id, then,
 * for the first, the sum over tokens t >= i of that id, in order, into
 * dw's row, column by column across the block's threads. */
template <class T>
__global__ void embed_bwd_kernel(int64_t n, int64_t dim, const int64_t *ids, const T *dy,
                                 T *dw)
{
    __shared__ int shm[LADLE_CUDA_THREADS];
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        int64_t v = ids[i];
        int seen = 0;
        for (int64_t t = threadIdx.x; t < i && !seen; t += blockDim.x)
            seen = ids[t] == v;
        if (ladle_block_sum(seen, shm) != 0)
            continue; /* every thread agrees: an earlier block owns the row */
        T *row = dw + v * dim;
        for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
            T acc = row[j];
            for (int64_t t = i; t < n; t++)
                if (ids[t] == v)
                    acc = acc + dy[t * dim + j];
            row[j] = acc;
        }
    }
}

ladle_status ladle__cuda_embed_forward(const ladle_backend *be, ladle_dtype dtype,
                                       int64_t n, int64_t dim, const int64_t *ids,
                                       const void *w, void *y)
{
    if (n == 0 || dim == 0)
        return LADLE_OK;
    unsigned grid = ladle__cuda_blocks(be, n * dim, LADLE_CUDA_THREADS);
    cudaStream_t st = ladle__cuda_stream(be);
    if (dtype == LADLE_F32)
        LADLE_LAUNCH(embed_fwd_kernel<float>, grid, LADLE_CUDA_THREADS, 0, st, n, dim, ids,
                     (const float *)w, (float *)y);
    else
        LADLE_LAUNCH(embed_fwd_kernel<double>, grid, LADLE_CUDA_THREADS, 0, st, n, dim, ids,
                     (const double *)w, (double *)y);
    LADLE_CUDA_LAUNCHED("embed_forward");
    return LADLE_OK;
}

ladle_status ladle__cuda_embed_backward(const ladle_backend *be, ladle_dtype dtype,
                                        int64_t n, int64_t dim, const int64_t *ids,
                                        const void *dy, void *dw)
{
    if (n == 0 || dim == 0)
        return LADLE_OK;
    int threads = ladle__cuda_row_threads(dim);
    unsigned grid = ladle__cuda_row_blocks(be, n);
    cudaStream_t st = ladle__cuda_stream(be);
    if (dtype == LADLE_F32)
        LADLE_LAUNCH_SYNC(embed_bwd_kernel<float>, grid, threads, 0, st, n, dim, ids,
                          (const float *)dy, (float *)dw);
    else
        LADLE_LAUNCH_SYNC(embed_bwd_kernel<double>, grid, threads, 0, st, n, dim, ids,
                          (const double *)dy, (double *)dw);
    LADLE_CUDA_LAUNCHED("embed_backward");
    return LADLE_OK;
}
