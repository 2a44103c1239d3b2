/*
 * Attention on the GPU (the attn slots; the CPU's are in
 * src/backends/cpu/attention.c): a simple tiled kernel, correct and
 * deterministic, not yet FlashAttention's. Dot products, softmax
 * statistics and accumulators are in double for both dtypes, each output
 * rounded once, as the CPU does; with g->f32_tiles an f32 call's dot
 * products and its output and gradient accumulators are in f32 (the type
 * A of the kernels), the statistics (maximum, lse, D) still in double.
 * No T x T matrix exists: a block walks the keys (or queries) in tiles of
 * its own width, a tile's probabilities in shared memory.
 *
 *   - forward: a block per query row (sample, head, t). Its threads take
 *     one key each per tile: the scores' maximum and sum of exponentials
 *     in one pass (a running maximum per thread, merged over the block),
 *     lse = max + log(sum); then a second pass over the tiles recomputes
 *     each tile's p = e^{S - lse} and the threads, one output column each
 *     (and more when d exceeds the block), add p V into shared
 *     accumulators in key order.
 *   - backward, dQ: a block per query row, as the forward's second pass,
 *     with dS = p (dO . V_k - D), D = dO . O of the row, and dQ = scale dS K.
 *   - backward, dK and dV: a block per key row, its threads one query each
 *     per tile (queries from the key's own index on, when causal):
 *     p and dS recomputed (D by each thread for its query), dV = p^T dO and
 *     dK = scale dS^T Q summed in query order. No atomics: each gradient
 *     row is one block's.
 * The scores are computed two (forward) or three (backward) times: the
 * price of keeping no T x T matrix and no scratch.
 */
#include "src/backends/cuda/lines.h"

/* Where head h's d values of row (n, t) start: queries (part 0), keys (1)
 * and values (2) in qkv, and the row in o (part -1). */
__device__ __forceinline__ int64_t attn_at(const ladle_attn_geom &g, int64_t n, int64_t t,
                                           int64_t h, int part)
{
    int64_t hd = g.heads * g.head_dim, row = n * g.seq + t;
    if (part < 0)
        return row * hd + h * g.head_dim;
    return row * 3 * hd + part * hd + h * g.head_dim;
}

/* The dot product of d doubles in shared memory with d values of T, in A. */
template <class A, class T>
__device__ __forceinline__ double dot_row(const double *a, const T *b, int64_t d)
{
    A s = 0;
    for (int64_t j = 0; j < d; j++)
        s += (A)a[j] * (A)b[j];
    return (double)s;
}

/* The row (n, h, t) of block row r. */
__device__ __forceinline__ void attn_row(const ladle_attn_geom &g, int64_t r, int64_t *n,
                                         int64_t *h, int64_t *t)
{
    *t = r % g.seq;
    *h = r / g.seq % g.heads;
    *n = r / (g.seq * g.heads);
}

/* Load d values of T into shared doubles (every thread calls; a barrier
 * follows). */
template <class T>
__device__ __forceinline__ void load_row(double *dst, const T *src, int64_t d)
{
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
        dst[j] = (double)src[j];
    __syncthreads();
}

/* acc[j] += sum over the tile's bk rows c of w[c] x_c[j], in A, rows
 * stride apart from x0; a thread per column j (every thread calls). */
template <class A, class T>
__device__ __forceinline__ void add_tile(double *acc, const double *w, const T *x0,
                                         int64_t stride, int64_t bk, int64_t d)
{
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
        A a = (A)acc[j];
        for (int64_t c = 0; c < bk; c++)
            a += (A)w[c] * (A)x0[c * stride + j];
        acc[j] = (double)a;
    }
}

/* dst[j] = f acc[j], rounded once. */
template <class T>
__device__ __forceinline__ void store_row(T *dst, const double *acc, double f, int64_t d)
{
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
        dst[j] = (T)(f * acc[j]);
}

/* Shared memory: q, acc (d each), p, red (block each). */
template <class T, class A>
__global__ void attn_fwd_kernel(ladle_attn_geom g, const T *qkv, T *o, double *lse)
{
    LADLE_DYN_SHARED(double, shm);
    int64_t d = g.head_dim, B = blockDim.x;
    double *q = shm, *acc = q + d, *p = acc + d, *red = p + B;
    for (int64_t r = blockIdx.x; r < g.batch * g.heads * g.seq; r += gridDim.x) {
        int64_t n, h, t;
        attn_row(g, r, &n, &h, &t);
        int64_t nk = g.causal ? t + 1 : g.seq;
        load_row(q, qkv + attn_at(g, n, t, h, 0), d);
        double m = -INFINITY, l = 0;
        for (int64_t k = threadIdx.x; k < nk; k += B) {
            double s = g.scale * dot_row<A>(q, qkv + attn_at(g, n, k, h, 1), d);
            if (s > m) {
                l = l * exp(m - s) + 1;
                m = s;
            } else {
                l += exp(s - m);
            }
        }
        double mx = ladle_block_max(m, red);
        double z = mx + log(ladle_block_sum(m == -INFINITY ? 0.0 : l * exp(m - mx), red));
        for (int64_t j = threadIdx.x; j < d; j += B)
            acc[j] = 0;
        for (int64_t k0 = 0; k0 < nk; k0 += B) {
            int64_t k = k0 + threadIdx.x;
            p[threadIdx.x] =
                k < nk ? exp(g.scale * dot_row<A>(q, qkv + attn_at(g, n, k, h, 1), d) - z)
                       : 0.0;
            __syncthreads();
            int64_t bk = nk - k0 < B ? nk - k0 : B;
            add_tile<A>(acc, p, qkv + attn_at(g, n, k0, h, 2), 3 * g.heads * d, bk, d);
            __syncthreads();
        }
        store_row(o + attn_at(g, n, t, h, -1), acc, 1.0, d);
        if (threadIdx.x == 0)
            lse[(n * g.heads + h) * g.seq + t] = z;
        __syncthreads();
    }
}

/* What the backward's rows read, passed as one. */
template <class T> struct attn_bwd_args {
    ladle_attn_geom g;
    const T *qkv, *o, *dout;
    const double *lse;
    T *dqkv;
};

/* dQ of query row t. Shared: q, dout, acc (d each), ds, red (block each). */
template <class T, class A>
__device__ void dq_row(const attn_bwd_args<T> &x, int64_t n, int64_t h, int64_t t,
                       double *shm)
{
    const ladle_attn_geom &g = x.g;
    int64_t d = g.head_dim, B = blockDim.x;
    double *q = shm, *dor = q + d, *acc = dor + d, *ds = acc + d, *red = ds + B;
    int64_t nk = g.causal ? t + 1 : g.seq, at = attn_at(g, n, t, h, -1);
    load_row(q, x.qkv + attn_at(g, n, t, h, 0), d);
    load_row(dor, x.dout + at, d);
    double part = 0;
    for (int64_t j = threadIdx.x; j < d; j += B) {
        part += dor[j] * (double)x.o[at + j];
        acc[j] = 0;
    }
    double D = ladle_block_sum(part, red), z = x.lse[(n * g.heads + h) * g.seq + t];
    for (int64_t k0 = 0; k0 < nk; k0 += B) {
        int64_t k = k0 + threadIdx.x;
        double v = 0;
        if (k < nk) {
            double p = exp(g.scale * dot_row<A>(q, x.qkv + attn_at(g, n, k, h, 1), d) - z);
            v = p * (dot_row<A>(dor, x.qkv + attn_at(g, n, k, h, 2), d) - D);
        }
        ds[threadIdx.x] = v;
        __syncthreads();
        int64_t bk = nk - k0 < B ? nk - k0 : B;
        add_tile<A>(acc, ds, x.qkv + attn_at(g, n, k0, h, 1), 3 * g.heads * d, bk, d);
        __syncthreads();
    }
    store_row(x.dqkv + attn_at(g, n, t, h, 0), acc, g.scale, d);
}

/* One query t's p and dS against key row k (whose k and v are kr, vr). */
template <class T, class A>
__device__ __forceinline__ void key_pair(const attn_bwd_args<T> &x, int64_t n, int64_t h,
                                         int64_t t, const double *kr, const double *vr,
                                         double *pv, double *dsv)
{
    const ladle_attn_geom &g = x.g;
    const T *qt = x.qkv + attn_at(g, n, t, h, 0), *gt = x.dout + attn_at(g, n, t, h, -1);
    const T *ot = x.o + attn_at(g, n, t, h, -1);
    A s = 0, dp = 0;
    double D = 0;
    for (int64_t j = 0; j < g.head_dim; j++) {
        s += (A)kr[j] * (A)qt[j];
        dp += (A)vr[j] * (A)gt[j];
        D += (double)gt[j] * (double)ot[j];
    }
    *pv = exp(g.scale * (double)s - x.lse[(n * g.heads + h) * g.seq + t]);
    *dsv = *pv * ((double)dp - D);
}

/* dK and dV of key row k. Shared: k, v, dk, dv (d each), p, ds (block each). */
template <class T, class A>
__device__ void dkv_row(const attn_bwd_args<T> &x, int64_t n, int64_t h, int64_t k,
                        double *shm)
{
    const ladle_attn_geom &g = x.g;
    int64_t d = g.head_dim, B = blockDim.x;
    double *kr = shm, *vr = kr + d, *dk = vr + d, *dv = dk + d, *p = dv + d, *ds = p + B;
    load_row(kr, x.qkv + attn_at(g, n, k, h, 1), d);
    load_row(vr, x.qkv + attn_at(g, n, k, h, 2), d);
    for (int64_t j = threadIdx.x; j < d; j += B)
        dk[j] = dv[j] = 0;
    for (int64_t t0 = g.causal ? k : 0; t0 < g.seq; t0 += B) {
        int64_t t = t0 + threadIdx.x;
        double pv = 0, dsv = 0;
        if (t < g.seq)
            key_pair<T, A>(x, n, h, t, kr, vr, &pv, &dsv);
        p[threadIdx.x] = pv;
        ds[threadIdx.x] = dsv;
        __syncthreads();
        int64_t bt = g.seq - t0 < B ? g.seq - t0 : B;
        add_tile<A>(dv, p, x.dout + attn_at(g, n, t0, h, -1), g.heads * d, bt, d);
        add_tile<A>(dk, ds, x.qkv + attn_at(g, n, t0, h, 0), 3 * g.heads * d, bt, d);
        __syncthreads();
    }
    store_row(x.dqkv + attn_at(g, n, k, h, 1), dk, g.scale, d);
    store_row(x.dqkv + attn_at(g, n, k, h, 2), dv, 1.0, d);
}

/* The backward, a block per row: dQ of query rows (KEYS 0), or dK and dV
 * of key rows (KEYS 1). */
template <class T, class A, int KEYS> __global__ void attn_bwd_kernel(attn_bwd_args<T> x)
{
    LADLE_DYN_SHARED(double, shm);
    for (int64_t r = blockIdx.x; r < x.g.batch * x.g.heads * x.g.seq; r += gridDim.x) {
        int64_t n, h, t;
        attn_row(x.g, r, &n, &h, &t);
        if (KEYS)
            dkv_row<T, A>(x, n, h, t, shm);
        else
            dq_row<T, A>(x, n, h, t, shm);
        __syncthreads();
    }
}

/* A launch of the attention kernels: the block width, the rows' grid,
 * the shared memory; empty when there is nothing to compute. */
typedef struct attn_launch {
    int threads, empty;
    unsigned grid;
    size_t shmem;
} attn_launch;

/* LADLE_ERR_UNSUPPORTED where a head is too wide for the kernels' shared
 * memory (48 KiB). */
static ladle_status attn_plan(const ladle_backend *be, const ladle_attn_geom *g,
                              const char *slot, attn_launch *lp)
{
    lp->empty = g->batch * g->heads * g->seq == 0 || g->head_dim == 0;
    lp->threads = ladle__cuda_row_threads(g->seq < 128 ? g->seq : 128);
    lp->grid = ladle__cuda_row_blocks(be, g->batch * g->heads * g->seq);
    lp->shmem = sizeof(double) * (size_t)(4 * g->head_dim + 2 * lp->threads);
    if (lp->shmem > 48 * 1024)
        return ladle__raise(LADLE_ERR_UNSUPPORTED, slot,
                            "cuda: attention heads of %lld values are wider than the "
                            "kernels' shared memory holds (at most %d)",
                            (long long)g->head_dim, (48 * 1024 / 8 - 2 * lp->threads) / 4);
    return LADLE_OK;
}

ladle_status ladle__cuda_attn_forward(const ladle_backend *be, ladle_dtype dtype,
                                      const ladle_attn_geom *g, const void *qkv, void *o,
                                      double *lse, double *ws)
{
    attn_launch lp; /* ws: nothing of it is needed */
    ladle_status planned = attn_plan(be, g, "attn_forward", &lp);
    if (planned != LADLE_OK || lp.empty)
        return planned;
    int threads = lp.threads;
    unsigned grid = lp.grid;
    size_t shmem = lp.shmem;
    cudaStream_t st = ladle__cuda_stream(be);
    auto tiles = attn_fwd_kernel<float, float>;
    auto f32 = attn_fwd_kernel<float, double>;
    auto f64 = attn_fwd_kernel<double, double>;
    if (dtype == LADLE_F32 && g->f32_tiles)
        LADLE_LAUNCH_SYNC(tiles, grid, threads, shmem, st, *g, (const float *)qkv,
                          (float *)o, lse);
    else if (dtype == LADLE_F32)
        LADLE_LAUNCH_SYNC(f32, grid, threads, shmem, st, *g, (const float *)qkv, (float *)o,
                          lse);
    else
        LADLE_LAUNCH_SYNC(f64, grid, threads, shmem, st, *g, (const double *)qkv,
                          (double *)o, lse);
    LADLE_CUDA_LAUNCHED("attn_forward");
    return LADLE_OK;
}

template <class T, class A>
static void attn_backward_launch(const ladle_backend *be, const ladle_attn_geom *g,
                                 const T *qkv, const T *o, const double *lse, const T *dout,
                                 T *dqkv, const attn_launch &lp)
{
    cudaStream_t st = ladle__cuda_stream(be);
    attn_bwd_args<T> x = {*g, qkv, o, dout, lse, dqkv};
    auto dq = attn_bwd_kernel<T, A, 0>;
    auto dkv = attn_bwd_kernel<T, A, 1>;
    LADLE_LAUNCH_SYNC(dq, lp.grid, lp.threads, lp.shmem, st, x);
    LADLE_LAUNCH_SYNC(dkv, lp.grid, lp.threads, lp.shmem, st, x);
}

ladle_status ladle__cuda_attn_backward(const ladle_backend *be, ladle_dtype dtype,
                                       const ladle_attn_geom *g, const void *qkv,
                                       const void *o, const double *lse, const void *dout,
                                       void *dqkv, double *ws)
{
    attn_launch lp; /* ws: nothing of it is needed */
    ladle_status planned = attn_plan(be, g, "attn_backward", &lp);
    if (planned != LADLE_OK || lp.empty)
        return planned;
    if (dtype == LADLE_F32 && g->f32_tiles)
        attn_backward_launch<float, float>(be, g, (const float *)qkv, (const float *)o, lse,
                                           (const float *)dout, (float *)dqkv, lp);
    else if (dtype == LADLE_F32)
        attn_backward_launch<float, double>(be, g, (const float *)qkv, (const float *)o,
                                            lse, (const float *)dout, (float *)dqkv, lp);
    else
        attn_backward_launch<double, double>(be, g, (const double *)qkv, (const double *)o,
                                             lse, (const double *)dout, (double *)dqkv, lp);
    LADLE_CUDA_LAUNCHED("attn_backward");
    return LADLE_OK;
}
