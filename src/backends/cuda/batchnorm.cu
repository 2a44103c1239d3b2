/*
 * Batch norm on the GPU: the per-channel sums of the statistics (bn_moment)
 * and of the backward (bn_dsums), and the per-channel affine pass both
 * directions apply (bn_affine). Tensors are n x c x inner, contiguous;
 * channel ch's values are the rows (sm c + ch) inner .. + inner of every
 * sample sm.
 *
 * The sums. Each thread adds its values in double (a difference x - mean is
 * taken in the dtype with the mean rounded to it, as the CPU does, then
 * squared or multiplied in double: a float's product is exact there), then
 * the block adds its threads' sums in a fixed tree (ladle_block_sum). Two
 * layouts:
 *   rows (inner > 1)  a block owns one channel, or one of `split` equal
 *                     slices of its n inner values; its threads walk the
 *                     slice flat (sample, offset), so a warp reads
 *                     consecutive offsets of a row.
 *   cols (inner == 1) a block is 32 channels x 8 lanes of samples, so a
 *                     warp reads 32 neighbouring channels of one sample;
 *                     the 8 lanes are added in order.
 * One block per channel fills an H200 (132 multiprocessors) badly when c
 * is small and the channel long (3 channels of 10^6 values would run on 3
 * of them; 1024-thread blocks would not mend that), so a long channel is
 * cut into `split` slices (at least 8192 values each, about 1024 blocks in
 * all):
 * their partial sums go to the instance's scratch and a second kernel adds
 * each channel's partials in slice order. The split is a function of c and
 * n inner only (not of the GPU), so a result is the same on every GPU; it
 * is capped by the scratch (splits x c x sums <= its doubles), and is 1
 * when c alone gives enough blocks. The scratch is the synchronous slots'
 * too: it is held under scratch_lock while both kernels are queued, and the
 * stream orders them before anything queued after.
 *
 * The affine pass is element-wise: a grid-stride loop that carries the
 * (channel, offset) of its element from step to step instead of dividing.
 */
#include "src/backends/cuda/kernel.h"

enum { BN_SUM, BN_SQUARES, BN_DSUMS };

/* A block's values at least, before a channel is split (32 a thread). */
#define BN_PER_BLOCK (32 * LADLE_CUDA_THREADS)
/* The blocks a split aims at: several per multiprocessor of an H200. */
#define BN_TARGET_BLOCKS 1024
/* The cols layout: channels x sample lanes of a block. */
#define BN_COL_CHANNELS 32
#define BN_COL_LANES (LADLE_CUDA_THREADS / BN_COL_CHANNELS)

/* The sums of a block, written to s1 (and s2) at ch or, split, to the
 * partials at ch * split + part (the second sum's c * split further on). */
__device__ __forceinline__ void bn_put(double v1, double v2, int two, int64_t c, int64_t ch,
                                       int split, double *s1, double *s2, double *partial)
{
    if (split == 1) {
        s1[ch] = v1;
        if (two)
            s2[ch] = v2;
        return;
    }
    int64_t at = ch * split + blockIdx.y;
    partial[at] = v1;
    if (two)
        partial[c * split + at] = v2;
}

/* The [lo, hi) of `len` values that slice `part` of `split` owns. */
__device__ __forceinline__ void bn_slice(int64_t len, int split, int64_t *lo, int64_t *hi)
{
    int64_t part = blockIdx.y, q = len / split, r = len % split;
    *lo = part * q + (part < r ? part : r);
    *hi = *lo + q + (part < r ? 1 : 0);
}

/* inner > 1: block (ch, slice); mean rounded to T. */
template <class T, int MODE>
__global__ void __launch_bounds__(LADLE_CUDA_THREADS)
    bn_rows(int64_t n, int64_t c, int64_t inner, const T *x, const T *dy, const double *mean,
            int split, double *s1, double *s2, double *partial)
{
    __shared__ double shm[LADLE_CUDA_THREADS];
    int64_t ch = blockIdx.x, lo, hi;
    bn_slice(n * inner, split, &lo, &hi);
    T mu = MODE == BN_SUM ? (T)0 : (T)mean[ch];
    double a1 = 0.0, a2 = 0.0;
    /* (sample, offset) of the thread's value, stepped by blockDim */
    int64_t j = lo + threadIdx.x, sm = j / inner, i = j % inner;
    int64_t step_sm = blockDim.x / inner, step_i = blockDim.x % inner;
    for (; j < hi; j += blockDim.x) {
        int64_t at = (sm * c + ch) * inner + i;
        T v = x[at];
        if (MODE == BN_SUM) {
            a1 += (double)v;
        } else if (MODE == BN_SQUARES) {
            double d = (double)(T)(v - mu);
            a1 = __fma_rn(d, d, a1);
        } else {
            double g = (double)dy[at];
            a1 += g;
            a2 = __fma_rn(g, (double)(T)(v - mu), a2);
        }
        sm += step_sm;
        i += step_i;
        if (i >= inner) {
            i -= inner;
            sm++;
        }
    }
    a1 = ladle_block_sum(a1, shm);
    if (MODE == BN_DSUMS)
        a2 = ladle_block_sum(a2, shm);
    if (threadIdx.x == 0)
        bn_put(a1, a2, MODE == BN_DSUMS, c, ch, split, s1, s2, partial);
}

/* inner == 1: block (32 channels, slice of samples); all in double. */
template <class T, int MODE>
__global__ void __launch_bounds__(LADLE_CUDA_THREADS)
    bn_cols(int64_t n, int64_t c, const T *x, const T *dy, const double *mean, int split,
            double *s1, double *s2, double *partial)
{
    __shared__ double sh1[BN_COL_LANES][BN_COL_CHANNELS], sh2[BN_COL_LANES][BN_COL_CHANNELS];
    unsigned tx = threadIdx.x % BN_COL_CHANNELS, ty = threadIdx.x / BN_COL_CHANNELS;
    int64_t ch = (int64_t)blockIdx.x * BN_COL_CHANNELS + tx, lo, hi;
    bn_slice(n, split, &lo, &hi);
    double a1 = 0.0, a2 = 0.0;
    if (ch < c) {
        double mu = MODE == BN_SUM ? 0.0 : mean[ch];
        for (int64_t sm = lo + ty; sm < hi; sm += BN_COL_LANES) {
            double v = (double)x[sm * c + ch];
            if (MODE == BN_SUM) {
                a1 += v;
            } else if (MODE == BN_SQUARES) {
                a1 = __fma_rn(v - mu, v - mu, a1);
            } else {
                double g = (double)dy[sm * c + ch];
                a1 += g;
                a2 = __fma_rn(g, v - mu, a2);
            }
        }
    }
    sh1[ty][tx] = a1;
    sh2[ty][tx] = a2;
    __syncthreads();
    if (ty != 0 || ch >= c)
        return;
    a1 = a2 = 0.0;
    for (int l = 0; l < BN_COL_LANES; l++) {
        a1 += sh1[l][tx];
        a2 += sh2[l][tx];
    }
    bn_put(a1, a2, MODE == BN_DSUMS, c, ch, split, s1, s2, partial);
}

/* A split's second pass: each of the `sums` x c outputs adds its split
 * partials in slice order. */
__global__ void bn_gather(int64_t c, int sums, int split, const double *partial, double *s1,
                          double *s2)
{
    LADLE_GRID_STRIDE(e, sums * c)
    {
        const double *p = partial + e * split;
        double t = 0.0;
        for (int k = 0; k < split; k++)
            t += p[k];
        if (e < c)
            s1[e] = t;
        else
            s2[e - c] = t;
    }
}

/* How many slices a channel of len values is cut into (rows layout: one
 * block a slice; cols: len is n and a block holds 32 channels). */
static int bn_split(int64_t c, int64_t len, int sums, int cols)
{
    int64_t per_slice = cols ? BN_PER_BLOCK / BN_COL_CHANNELS : BN_PER_BLOCK;
    int64_t blocks = cols ? (c + BN_COL_CHANNELS - 1) / BN_COL_CHANNELS : c;
    int64_t cap = (int64_t)(LADLE_CUDA_SCRATCH_BYTES / sizeof(double)) / (sums * c);
    int64_t s = (len + per_slice - 1) / per_slice;
    int64_t want = (BN_TARGET_BLOCKS + blocks - 1) / blocks;
    if (s > want)
        s = want;
    if (s > cap)
        s = cap;
    return s < 1 ? 1 : (int)s;
}

template <class T, int MODE>
static ladle_status bn_sums_t(const ladle_backend *be, const char *slot, int64_t n, int64_t c,
                              int64_t inner, const void *x, const void *dy, const double *mean,
                              double *s1, double *s2)
{
    ladle_cuda_state *cs = ladle__cuda(be);
    cudaStream_t st = ladle__cuda_stream(be);
    int sums = MODE == BN_DSUMS ? 2 : 1, cols = inner == 1;
    int split = bn_split(c, n * inner, sums, cols);
    double *partial = (double *)cs->scratch;
    dim3 grid(cols ? (unsigned)((c + BN_COL_CHANNELS - 1) / BN_COL_CHANNELS) : (unsigned)c,
              (unsigned)split);
    if (split > 1)
        pthread_mutex_lock(&cs->scratch_lock);
    if (cols) {
        auto k = bn_cols<T, MODE>;
        LADLE_LAUNCH_SYNC(k, grid, LADLE_CUDA_THREADS, 0, st, n, c, (const T *)x,
                          (const T *)dy, mean, split, s1, s2, partial);
    } else {
        auto k = bn_rows<T, MODE>;
        LADLE_LAUNCH_SYNC(k, grid, LADLE_CUDA_THREADS, 0, st, n, c, inner, (const T *)x,
                          (const T *)dy, mean, split, s1, s2, partial);
    }
    ladle_status r = ladle__cuda_launched(slot);
    if (r == LADLE_OK && split > 1) {
        LADLE_LAUNCH(bn_gather, ladle__cuda_blocks(be, sums * c, LADLE_CUDA_THREADS),
                     LADLE_CUDA_THREADS, 0, st, c, sums, split, (const double *)partial, s1,
                     s2);
        r = ladle__cuda_launched(slot);
    }
    if (split > 1)
        pthread_mutex_unlock(&cs->scratch_lock);
    return r;
}

template <int MODE>
static ladle_status bn_sums(const ladle_backend *be, const char *slot, ladle_dtype dtype,
                            int64_t n, int64_t c, int64_t inner, const void *x, const void *dy,
                            const double *mean, double *s1, double *s2)
{
    if (c <= 0)
        return LADLE_OK;
    if (dtype == LADLE_F32)
        return bn_sums_t<float, MODE>(be, slot, n, c, inner, x, dy, mean, s1, s2);
    return bn_sums_t<double, MODE>(be, slot, n, c, inner, x, dy, mean, s1, s2);
}

ladle_status ladle__cuda_bn_moment(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                   int64_t c, int64_t inner, const void *x, const double *mean,
                                   double *s)
{
    if (mean == NULL)
        return bn_sums<BN_SUM>(be, "bn_moment", dtype, n, c, inner, x, NULL, NULL, s, NULL);
    return bn_sums<BN_SQUARES>(be, "bn_moment", dtype, n, c, inner, x, NULL, mean, s, NULL);
}

ladle_status ladle__cuda_bn_dsums(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                  int64_t c, int64_t inner, const void *x, const void *dy,
                                  const double *mean, double *s1, double *s2)
{
    return bn_sums<BN_DSUMS>(be, "bn_dsums", dtype, n, c, inner, x, dy, mean, s1, s2);
}

/* out = a u + b w + k over the n c inner elements; u, w and out may be one
 * array (each element is read, then written, by one thread). WIDE: in
 * double, rounded once (inner == 1), else in T with a, b, k rounded. */
template <class T, bool WIDE>
__global__ void bn_affine_k(int64_t total, int64_t c, int64_t inner, const T *u, const T *w,
                            T *out, const double *a, const double *b, const double *k,
                            int64_t step_c, int64_t step_i)
{
    int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t i = e % inner, ch = (e / inner) % c;
    for (; e < total; e += (int64_t)blockDim.x * gridDim.x) {
        if (WIDE) {
            /* the CPU's order: (a u + b w) + k */
            double v = a[ch] * (double)u[e];
            if (w != NULL)
                v += b[ch] * (double)w[e];
            out[e] = (T)(v + k[ch]);
        } else {
            T v = (T)a[ch] * u[e];
            if (w != NULL)
                v += (T)b[ch] * w[e];
            out[e] = v + (T)k[ch];
        }
        /* the next element's (channel, offset): one carry at most each */
        i += step_i;
        int64_t carry = i >= inner;
        i -= carry ? inner : 0;
        ch += step_c + carry;
        ch -= ch >= c ? c : 0;
    }
}

template <class T>
static ladle_status bn_affine_t(const ladle_backend *be, int64_t n, int64_t c, int64_t inner,
                                const void *u, const void *w, void *out, const double *a,
                                const double *b, const double *k)
{
    int64_t total = n * c * inner;
    unsigned blocks = ladle__cuda_blocks(be, total, LADLE_CUDA_THREADS);
    int64_t stride = (int64_t)blocks * LADLE_CUDA_THREADS;
    int64_t step_i = stride % inner, step_c = (stride / inner) % c;
    auto kern = inner == 1 ? bn_affine_k<T, true> : bn_affine_k<T, false>;
    LADLE_LAUNCH(kern, blocks, LADLE_CUDA_THREADS, 0, ladle__cuda_stream(be), total, c, inner,
                 (const T *)u, (const T *)w, (T *)out, a, b, k, step_c, step_i);
    LADLE_CUDA_LAUNCHED("bn_affine");
    return LADLE_OK;
}

ladle_status ladle__cuda_bn_affine(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                   int64_t c, int64_t inner, const void *u, const void *w,
                                   void *out, const double *a, const double *b,
                                   const double *k)
{
    if (n <= 0 || c <= 0 || inner <= 0)
        return LADLE_OK;
    if (b == NULL) /* the term drops with either of its factors */
        w = NULL;
    if (dtype == LADLE_F32)
        return bn_affine_t<float>(be, n, c, inner, u, w, out, a, b, k);
    return bn_affine_t<double>(be, n, c, inner, u, w, out, a, b, k);
}
