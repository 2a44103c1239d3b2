/*
 * Losses on the GPU (the CPU's are in src/backends/cpu/loss.c), and the
 * scans that check labels and values. Terms and sums are in double for
 * both dtypes, as the contract asks.
 *
 *   - Regression losses (MSE, L1, BCE with logits) are elementwise: a
 *     grid-stride loop over the elements.
 *   - Classification losses see x as [N][C][inner]: a sample is a line of
 *     C classes, inner apart, mapped as lines.h says (a block per sample
 *     for long contiguous rows of classes, else a thread per sample).
 *     Cross entropy reduces the line (its maximum, then the sum of the
 *     exponentials and of q (x - max) in one pass); NLL reads one element.
 *   - A mean or a sum is two passes without atomics: each block sums its
 *     terms in a fixed order into a partial in the instance's scratch, then
 *     one block adds the partials in order and writes out[0] = sum /
 *     divisor. Both passes are queued under the scratch's lock, so no other
 *     slot's use of the scratch falls between them on the stream.
 *   - The scans (synchronous) take the same two passes over the smallest
 *     bad index, and wait for the answer.
 */
#include <float.h>
#include <string.h>

#include "src/backends/cuda/lines.h"

/* ---- terms and gradients (double) ---- */

/* A thread's term v of element i: kept in out[i] where the caller keeps
 * every term (no partial sums), and added to the thread's acc. */
template <class T>
__device__ __forceinline__ void keep_term(T *out, int64_t i, double v, const double *partial,
                                          double &acc)
{
    if (partial == NULL)
        out[i] = (T)v;
    acc += v;
}

/* The block's total of its threads' acc into partial[blockIdx.x], where the
 * caller sums (every thread of the block calls it). */
__device__ __forceinline__ void block_total(double acc, double *shm, double *partial)
{
    if (partial != NULL) {
        acc = ladle_block_sum(acc, shm);
        if (threadIdx.x == 0)
            partial[blockIdx.x] = acc;
    }
}

template <int K> __device__ __forceinline__ double regression_term(double x, double t)
{
    switch (K) {
    case LADLE_LOSS_MSE:
        return (x - t) * (x - t);
    case LADLE_LOSS_L1:
        return fabs(x - t);
    default: /* BCE with logits, stable for any x */
        return fmax(x, 0.0) - x * t + log1p(exp(-fabs(x)));
    }
}

template <int K> __device__ __forceinline__ double regression_grad(double x, double t)
{
    switch (K) {
    case LADLE_LOSS_MSE:
        return 2 * (x - t);
    case LADLE_LOSS_L1:
        return (double)((x > t) - (x < t));
    default: {
        double e = exp(x >= 0 ? -x : x); /* sigmoid without overflow */
        return (x >= 0 ? 1 / (1 + e) : e / (1 + e)) - t;
    }
    }
}

/* Class weights and ignore_index (revision 4): the weights are read from
 * the plan's device copy, weight_dev (weight is host memory). */
__device__ __forceinline__ bool ignored(const ladle_loss_plan &l, int64_t label)
{
    return l.ignore && label == l.ignore_index;
}

__device__ __forceinline__ double label_weight(const ladle_loss_plan &l, int64_t label)
{
    return l.weight_dev != NULL ? l.weight_dev[label] : 1.0;
}

/* Cross entropy's target weight q_k of class k: (1 - e) onehot + e / C,
 * with class weights (1 - e) w_label onehot + e w_k / C. */
__device__ __forceinline__ double class_weight(const ladle_loss_plan &l, int64_t k,
                                               int64_t label)
{
    double e = l.smoothing, c = (double)l.classes;
    if (l.weight_dev == NULL)
        return (k == label ? 1 - e : 0) + e / c;
    return (k == label ? (1 - e) * l.weight_dev[label] : 0) + e * l.weight_dev[k] / c;
}

/* One sample's cross entropy -sum_c q_c (x_c - lse) from the line's
 * maximum mx, the sum s of exp(x_c - mx), qx = sum of q_c (x_c - mx) and
 * qs = sum of q_c over q_c != 0: qs log(s) - qx, where without weights
 * sum q = 1 is taken as exact. */
__device__ __forceinline__ double ce_term(const ladle_loss_plan &l, double s, double qx,
                                          double qs)
{
    return (l.weight_dev != NULL ? qs : 1.0) * log(s) - qx;
}

/* Cross entropy's gradient of one logit, before the sample's scale, from
 * its probability p: p - q, with class weights p qs - q (qs = sum q). */
__device__ __forceinline__ double ce_grad_term(const ladle_loss_plan &l, double p, double qs,
                                               double q)
{
    return l.weight_dev != NULL ? p * qs - q : p - q;
}

/* The gradient scale of term j: dloss per term, or dloss[0] / divisor. */
template <class T>
__device__ __forceinline__ double grad_scale(const ladle_loss_plan &l, const T *dloss,
                                             int64_t j)
{
    return l.reduction == LADLE_REDUCE_NONE ? (double)dloss[j]
                                            : (double)dloss[0] / l.divisor;
}

/* ---- forward kernels: terms into out (reduction none) or block partials
 * into partial[blockIdx.x] (launched with LADLE_LAUNCH_SYNC) ---- */

template <class T, int K>
__global__ void regress_kernel(int64_t n, const T *x, const T *t, T *out, double *partial)
{
    __shared__ double shm[LADLE_CUDA_THREADS];
    double acc = 0;
    LADLE_GRID_STRIDE(i, n)
    {
        double v = regression_term<K>((double)x[i], (double)t[i]);
        keep_term(out, i, v, partial, acc);
    }
    block_total(acc, shm, partial);
}

/* One sample's term by one thread. */
template <class T>
__device__ __forceinline__ double sample_term(const ladle_loss_plan &l, const T *x,
                                              int64_t base, int64_t label)
{
    int64_t c = l.classes, inner = l.inner;
    if (ignored(l, label))
        return 0.0;
    if (l.kind == LADLE_LOSS_NLL)
        return -label_weight(l, label) * (double)x[base + label * inner];
    double mx = -INFINITY, s = 0, qx = 0, qs = 0;
    for (int64_t k = 0; k < c; k++)
        mx = fmax(mx, (double)x[base + k * inner]);
    for (int64_t k = 0; k < c; k++) {
        double d = (double)x[base + k * inner] - mx, q = class_weight(l, k, label);
        s += exp(d);
        if (q != 0) {
            qx += q * d;
            qs += q;
        }
    }
    return ce_term(l, s, qx, qs);
}

template <class T>
__global__ void class_thread_kernel(ladle_loss_plan l, int64_t samples, const T *x,
                                    const int64_t *labels, T *out, double *partial)
{
    __shared__ double shm[LADLE_CUDA_THREADS];
    double acc = 0;
    LADLE_GRID_STRIDE(s, samples)
    {
        double v = sample_term(l, x, ladle_line_base(s, l.classes, l.inner), labels[s]);
        keep_term(out, s, v, partial, acc);
    }
    block_total(acc, shm, partial);
}

/* Cross entropy, a block per sample; thread 0 keeps the block's total. */
template <class T>
__global__ void class_block_kernel(ladle_loss_plan l, int64_t samples, const T *x,
                                   const int64_t *labels, T *out, double *partial)
{
    LADLE_DYN_SHARED(double, shm);
    int64_t c = l.classes, inner = l.inner;
    double total = 0;
    for (int64_t s = blockIdx.x; s < samples; s += gridDim.x) {
        const T *xs = x + ladle_line_base(s, c, inner);
        int64_t label = labels[s];
        double mx = -INFINITY, e = 0, qx = 0, qs = 0, v = 0;
        if (!ignored(l, label)) { /* the same branch in every thread of the block */
            for (int64_t k = threadIdx.x; k < c; k += blockDim.x)
                mx = fmax(mx, (double)xs[k * inner]);
            mx = ladle_block_max(mx, shm);
            for (int64_t k = threadIdx.x; k < c; k += blockDim.x) {
                double d = (double)xs[k * inner] - mx, q = class_weight(l, k, label);
                e += exp(d);
                if (q != 0) {
                    qx += q * d;
                    qs += q;
                }
            }
            e = ladle_block_sum(e, shm);
            qx = ladle_block_sum(qx, shm);
            qs = l.weight_dev != NULL ? ladle_block_sum(qs, shm) : 1.0;
            v = ce_term(l, e, qx, qs);
        }
        if (threadIdx.x == 0 && partial == NULL)
            out[s] = (T)v;
        total += v;
    }
    if (threadIdx.x == 0 && partial != NULL)
        partial[blockIdx.x] = total;
}

/* The second pass: out[0] = (sum of the parts partials, in order) /
 * divisor, by one block of LADLE_CUDA_THREADS. */
template <class T>
__global__ void finish_kernel(int64_t parts, const double *partial, double divisor, T *out)
{
    __shared__ double shm[LADLE_CUDA_THREADS];
    double acc = 0;
    for (int64_t i = threadIdx.x; i < parts; i += blockDim.x)
        acc += partial[i];
    acc = ladle_block_sum(acc, shm);
    if (threadIdx.x == 0)
        out[0] = (T)(acc / divisor);
}

/* ---- backward kernels ---- */

template <class T, int K>
__global__ void regress_grad_kernel(ladle_loss_plan l, const T *x, const T *t,
                                    const T *dloss, T *dx)
{
    LADLE_GRID_STRIDE(i, l.numel)
    dx[i] = (T)(grad_scale(l, dloss, i) * regression_grad<K>((double)x[i], (double)t[i]));
}

/* NLL: -[c == label] dloss, elementwise over x. */
template <class T>
__global__ void nll_grad_kernel(ladle_loss_plan l, const int64_t *labels, const T *dloss,
                                T *dx)
{
    int64_t plane = l.classes * l.inner;
    LADLE_GRID_STRIDE(i, l.numel)
    {
        int64_t o = i / plane, k = i % plane / l.inner, s = o * l.inner + i % l.inner;
        int64_t label = labels[s];
        double v = k == label && !ignored(l, label) ? -label_weight(l, label) : 0.0;
        dx[i] = (T)(grad_scale(l, dloss, s) * v);
    }
}

/* Cross entropy: (softmax(x)_c - q_c) times the sample's scale. */
template <class T>
__global__ void ce_grad_thread_kernel(ladle_loss_plan l, int64_t samples, const T *x,
                                      const int64_t *labels, const T *dloss, T *dx)
{
    int64_t c = l.classes, inner = l.inner;
    LADLE_GRID_STRIDE(s, samples)
    {
        int64_t base = ladle_line_base(s, c, inner), label = labels[s];
        double g = grad_scale(l, dloss, s), mx = -INFINITY, e = 0, qs = 0;
        if (ignored(l, label)) {
            for (int64_t k = 0; k < c; k++)
                dx[base + k * inner] = (T)0;
            continue;
        }
        for (int64_t k = 0; k < c; k++)
            mx = fmax(mx, (double)x[base + k * inner]);
        for (int64_t k = 0; k < c; k++) {
            e += exp((double)x[base + k * inner] - mx);
            qs += l.weight_dev != NULL ? class_weight(l, k, label) : 0.0;
        }
        double z = mx + log(e);
        qs = l.weight_dev != NULL ? qs : 1.0;
        for (int64_t k = 0; k < c; k++) {
            int64_t i = base + k * inner;
            dx[i] = (T)(g * ce_grad_term(l, exp((double)x[i] - z), qs, class_weight(l, k, label)));
        }
    }
}

template <class T>
__global__ void ce_grad_block_kernel(ladle_loss_plan l, int64_t samples, const T *x,
                                     const int64_t *labels, const T *dloss, T *dx)
{
    LADLE_DYN_SHARED(double, shm);
    int64_t c = l.classes, inner = l.inner;
    for (int64_t s = blockIdx.x; s < samples; s += gridDim.x) {
        int64_t base = ladle_line_base(s, c, inner), label = labels[s];
        double g = grad_scale(l, dloss, s), mx = -INFINITY, e = 0, qs = 0;
        if (ignored(l, label)) { /* the same branch in every thread of the block */
            for (int64_t k = threadIdx.x; k < c; k += blockDim.x)
                dx[base + k * inner] = (T)0;
            continue;
        }
        for (int64_t k = threadIdx.x; k < c; k += blockDim.x)
            mx = fmax(mx, (double)x[base + k * inner]);
        mx = ladle_block_max(mx, shm);
        for (int64_t k = threadIdx.x; k < c; k += blockDim.x) {
            e += exp((double)x[base + k * inner] - mx);
            qs += l.weight_dev != NULL ? class_weight(l, k, label) : 0.0;
        }
        double z = mx + log(ladle_block_sum(e, shm));
        qs = l.weight_dev != NULL ? ladle_block_sum(qs, shm) : 1.0;
        for (int64_t k = threadIdx.x; k < c; k += blockDim.x) {
            int64_t i = base + k * inner;
            dx[i] = (T)(g * ce_grad_term(l, exp((double)x[i] - z), qs, class_weight(l, k, label)));
        }
    }
}

/* ---- the slots ---- */

static int classify(const ladle_loss_plan *l)
{
    return l->kind == LADLE_LOSS_CROSS_ENTROPY || l->kind == LADLE_LOSS_NLL;
}

static int64_t samples_of(const ladle_loss_plan *l)
{
    return l->classes > 0 ? l->numel / l->classes : 0;
}

/* N of x's [N][C][inner] (inner may be 0 for an empty x) */
static int64_t samples_per_inner(const ladle_loss_plan *l)
{
    return l->inner > 0 ? samples_of(l) / l->inner : 0;
}

/* A pass whose blocks leave partials in the scratch has at most as many
 * blocks as it holds. */
static unsigned reduce_grid(unsigned grid)
{
    return grid < LADLE_CUDA_REDUCE_BLOCKS ? grid : LADLE_CUDA_REDUCE_BLOCKS;
}

/* Launch kernel k on be's stream: with barriers only when it sums its
 * block (partial). */
#define LAUNCH_TERMS(k, grid, threads, shmem, partial, ...)                                \
    do {                                                                                   \
        if ((partial) != NULL)                                                             \
            LADLE_LAUNCH_SYNC(k, grid, threads, shmem, ladle__cuda_stream(be),             \
                              __VA_ARGS__);                                                \
        else                                                                               \
            LADLE_LAUNCH(k, grid, threads, shmem, ladle__cuda_stream(be), __VA_ARGS__);    \
    } while (0)

/* The first pass: terms into out (partial NULL) or one partial a block;
 * returns the number of blocks. */
template <class T>
static unsigned terms_pass(const ladle_backend *be, const ladle_loss_plan *l, const T *x,
                           const void *target, T *out, double *partial)
{
    unsigned grid;
    if (!classify(l)) {
        void (*k)(int64_t, const T *, const T *, T *, double *) =
            l->kind == LADLE_LOSS_MSE  ? regress_kernel<T, LADLE_LOSS_MSE>
            : l->kind == LADLE_LOSS_L1 ? regress_kernel<T, LADLE_LOSS_L1>
                                       : regress_kernel<T, LADLE_LOSS_BCE_WITH_LOGITS>;
        grid = ladle__cuda_blocks(be, l->numel, LADLE_CUDA_THREADS);
        grid = partial != NULL ? reduce_grid(grid) : grid;
        LAUNCH_TERMS(k, grid, LADLE_CUDA_THREADS, 0, partial, l->numel, x,
                     (const T *)target, out, partial);
        return grid;
    }
    int64_t samples = samples_of(l);
    const int64_t *labels = (const int64_t *)target;
    ladle_lines_plan pl = ladle_plan_lines(be, samples_per_inner(l), l->classes, l->inner);
    if (l->kind == LADLE_LOSS_CROSS_ENTROPY && pl.threads > 0) {
        grid = partial != NULL ? reduce_grid(pl.grid) : pl.grid;
        /* a block reduces every sample: barriers either way */
        LADLE_LAUNCH_SYNC(class_block_kernel<T>, grid, pl.threads,
                          pl.threads * sizeof(double), ladle__cuda_stream(be), *l, samples,
                          x, labels, out, partial);
        return grid;
    }
    /* NLL (one element a sample), and cross entropy over short rows or
     * many strided samples: a thread a sample */
    grid = ladle__cuda_blocks(be, samples, LADLE_CUDA_THREADS);
    grid = partial != NULL ? reduce_grid(grid) : grid;
    LAUNCH_TERMS(class_thread_kernel<T>, grid, LADLE_CUDA_THREADS, 0, partial, *l, samples,
                 x, labels, out, partial);
    return grid;
}

template <class T>
static ladle_status forward(const ladle_backend *be, const ladle_loss_plan *l, const T *x,
                            const void *target, T *out)
{
    if (l->reduction == LADLE_REDUCE_NONE) {
        if ((classify(l) ? samples_of(l) : l->numel) == 0)
            return LADLE_OK;
        terms_pass(be, l, x, target, out, (double *)NULL);
        LADLE_CUDA_LAUNCHED("loss_forward");
        return LADLE_OK;
    }
    /* both passes queued together: the partials stay the scratch's until
     * the second has read them */
    ladle_cuda_state *cs = ladle__cuda(be);
    pthread_mutex_lock(&cs->scratch_lock);
    double *partial = (double *)cs->scratch;
    unsigned parts = terms_pass(be, l, x, target, (T *)NULL, partial);
    LADLE_LAUNCH_SYNC(finish_kernel<T>, 1, LADLE_CUDA_THREADS, 0, ladle__cuda_stream(be),
                      (int64_t)parts, (const double *)partial, l->divisor, out);
    pthread_mutex_unlock(&cs->scratch_lock);
    LADLE_CUDA_LAUNCHED("loss_forward");
    return LADLE_OK;
}

template <class T>
static ladle_status backward(const ladle_backend *be, const ladle_loss_plan *l, const T *x,
                             const void *target, const T *dloss, T *dx)
{
    if (l->numel == 0)
        return LADLE_OK;
    cudaStream_t st = ladle__cuda_stream(be);
    const int64_t *labels = (const int64_t *)target;
    unsigned grid = ladle__cuda_blocks(be, l->numel, LADLE_CUDA_THREADS);
    if (!classify(l)) {
        void (*k)(ladle_loss_plan, const T *, const T *, const T *, T *) =
            l->kind == LADLE_LOSS_MSE  ? regress_grad_kernel<T, LADLE_LOSS_MSE>
            : l->kind == LADLE_LOSS_L1 ? regress_grad_kernel<T, LADLE_LOSS_L1>
                                       : regress_grad_kernel<T, LADLE_LOSS_BCE_WITH_LOGITS>;
        LADLE_LAUNCH(k, grid, LADLE_CUDA_THREADS, 0, st, *l, x, (const T *)target, dloss,
                     dx);
    } else if (l->kind == LADLE_LOSS_NLL) {
        LADLE_LAUNCH(nll_grad_kernel<T>, grid, LADLE_CUDA_THREADS, 0, st, *l, labels, dloss,
                     dx);
    } else {
        int64_t samples = samples_of(l);
        ladle_lines_plan pl =
            ladle_plan_lines(be, samples_per_inner(l), l->classes, l->inner);
        if (pl.threads == 0)
            LADLE_LAUNCH(ce_grad_thread_kernel<T>, pl.grid, LADLE_CUDA_THREADS, 0, st, *l,
                         samples, x, labels, dloss, dx);
        else
            LADLE_LAUNCH_SYNC(ce_grad_block_kernel<T>, pl.grid, pl.threads,
                              pl.threads * sizeof(double), st, *l, samples, x, labels,
                              dloss, dx);
    }
    LADLE_CUDA_LAUNCHED("loss_backward");
    return LADLE_OK;
}

ladle_status ladle__cuda_loss_forward(const ladle_backend *be, ladle_dtype dtype,
                                      const ladle_loss_plan *l, const void *x,
                                      const void *target, void *out)
{
    if (dtype == LADLE_F32)
        return forward(be, l, (const float *)x, target, (float *)out);
    return forward(be, l, (const double *)x, target, (double *)out);
}

ladle_status ladle__cuda_loss_backward(const ladle_backend *be, ladle_dtype dtype,
                                       const ladle_loss_plan *l, const void *x,
                                       const void *target, const void *dloss, void *dx)
{
    if (dtype == LADLE_F32)
        return backward(be, l, (const float *)x, target, (const float *)dloss, (float *)dx);
    return backward(be, l, (const double *)x, target, (const double *)dloss, (double *)dx);
}

/* ---- the scans ---- */

/* The smallest of the values of a block's threads, as ladle_block_sum sums
 * them (same rules). */
__device__ __forceinline__ int64_t block_min(int64_t v, int64_t *shm)
{
    unsigned t = threadIdx.x;
    shm[t] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s && shm[t + s] < shm[t])
            shm[t] = shm[t + s];
        __syncthreads();
    }
    int64_t r = shm[0];
    __syncthreads();
    return r;
}

/* What the scans look for. */
struct outside_test {
    const int64_t *v;
    int64_t lo, hi;
    __device__ bool operator()(int64_t i) const { return v[i] < lo || v[i] > hi; }
};

template <class T> struct non_finite_test {
    const T *x;
    __device__ bool operator()(int64_t i) const
    {
        double a = fabs((double)x[i]); /* NaN compares false */
        return !(a <= (sizeof(T) == 4 ? (double)FLT_MAX : DBL_MAX));
    }
};

/* The first pass: each block's smallest index i < n where bad(i) holds, or
 * n, into part[blockIdx.x]. A thread's indices rise, so it stops at its
 * first. */
template <class Test> __global__ void scan_kernel(int64_t n, Test bad, int64_t *part)
{
    __shared__ int64_t shm[LADLE_CUDA_THREADS];
    int64_t first = n;
    LADLE_GRID_STRIDE(i, n)
    if (bad(i)) {
        first = i;
        break;
    }
    first = block_min(first, shm);
    if (threadIdx.x == 0)
        part[blockIdx.x] = first;
}

/* The second pass: the smallest of the parts partials into part[0], -1
 * for n (none found). */
__global__ void scan_finish_kernel(int64_t parts, int64_t n, int64_t *part)
{
    __shared__ int64_t shm[LADLE_CUDA_THREADS];
    int64_t first = n;
    for (int64_t i = threadIdx.x; i < parts; i += blockDim.x)
        first = part[i] < first ? part[i] : first;
    first = block_min(first, shm);
    if (threadIdx.x == 0)
        part[0] = first == n ? -1 : first;
}

/* A synchronous slot's last step, under the scratch's lock: the answer's
 * bytes at dev into the pinned mirror, waited for. */
static cudaError_t answer_to_host(ladle_cuda_state *cs, cudaStream_t st, const void *dev,
                                  size_t bytes)
{
    cudaError_t e = cudaMemcpyAsync(cs->host_scratch, dev, bytes, cudaMemcpyDeviceToHost, st);
    return e == cudaSuccess ? cudaStreamSynchronize(st) : e;
}

/* Both passes, then the answer copied to the host and waited for, all
 * under the scratch's lock. */
template <class Test>
static ladle_status scan(const ladle_backend *be, const char *slot, int64_t n, Test bad,
                         int64_t *first)
{
    *first = -1;
    if (n == 0)
        return LADLE_OK;
    ladle_cuda_state *cs = ladle__cuda(be);
    cudaStream_t st = ladle__cuda_stream(be);
    unsigned grid = reduce_grid(ladle__cuda_blocks(be, n, LADLE_CUDA_THREADS));
    int64_t *part = (int64_t *)cs->scratch;
    pthread_mutex_lock(&cs->scratch_lock);
    LADLE_LAUNCH_SYNC(scan_kernel<Test>, grid, LADLE_CUDA_THREADS, 0, st, n, bad, part);
    LADLE_LAUNCH_SYNC(scan_finish_kernel, 1, LADLE_CUDA_THREADS, 0, st, (int64_t)grid, n,
                      part);
    cudaError_t e = answer_to_host(cs, st, part, sizeof(int64_t));
    if (e == cudaSuccess)
        memcpy(first, cs->host_scratch, sizeof(int64_t));
    pthread_mutex_unlock(&cs->scratch_lock);
    if (e != cudaSuccess) {
        *first = -1;
        return ladle__cuda_fail(e, slot, "waiting for the scan");
    }
    LADLE_CUDA_LAUNCHED(slot);
    return LADLE_OK;
}

ladle_status ladle__cuda_find_outside(const ladle_backend *be, int64_t n, const int64_t *v,
                                      int64_t lo, int64_t hi, int64_t *first)
{
    return scan(be, "find_outside", n, outside_test{v, lo, hi}, first);
}

ladle_status ladle__cuda_find_non_finite(const ladle_backend *be, ladle_dtype dtype,
                                         int64_t n, const void *x, int64_t *first)
{
    if (dtype == LADLE_F32)
        return scan(be, "find_non_finite", n, non_finite_test<float>{(const float *)x},
                    first);
    return scan(be, "find_non_finite", n, non_finite_test<double>{(const double *)x},
                first);
}

/* ---- the label scan of class weights and ignore_index ---- */

/* The first pass: each block's smallest index of a label that is neither
 * ignored nor in 0..C-1 (or n) into first[blockIdx.x], and the sum of the
 * weights of the labels its threads passed before stopping into
 * sum[blockIdx.x] (the total is only defined when no label is bad). */
__global__ void weight_sum_kernel(ladle_loss_plan l, int64_t n, const int64_t *labels,
                                  int64_t *first, double *sum)
{
    __shared__ int64_t shi[LADLE_CUDA_THREADS];
    __shared__ double shd[LADLE_CUDA_THREADS];
    int64_t bad = n;
    double acc = 0;
    LADLE_GRID_STRIDE(i, n)
    {
        int64_t label = labels[i];
        if (ignored(l, label))
            continue;
        if (label < 0 || label >= l.classes) {
            bad = i;
            break;
        }
        acc += label_weight(l, label);
    }
    bad = block_min(bad, shi);
    acc = ladle_block_sum(acc, shd);
    if (threadIdx.x == 0) {
        first[blockIdx.x] = bad;
        sum[blockIdx.x] = acc;
    }
}

/* The second pass, one block: the smallest first (-1 for none) into
 * *out_first and the partials' sum, in a fixed order, into *out_sum. */
__global__ void weight_sum_finish(int64_t parts, int64_t n, const int64_t *first,
                                  const double *sum, double *out_sum, int64_t *out_first)
{
    __shared__ int64_t shi[LADLE_CUDA_THREADS];
    __shared__ double shd[LADLE_CUDA_THREADS];
    int64_t bad = n;
    double acc = 0;
    for (int64_t i = threadIdx.x; i < parts; i += blockDim.x) {
        bad = first[i] < bad ? first[i] : bad;
        acc += sum[i];
    }
    bad = block_min(bad, shi);
    acc = ladle_block_sum(acc, shd);
    if (threadIdx.x == 0) {
        *out_sum = acc;
        *out_first = bad == n ? -1 : bad;
    }
}

/* Both passes through the scratch (the blocks' firsts, their sums, then
 * the answer's two values), the answer copied to the host and waited for,
 * under the scratch's lock. */
ladle_status ladle__cuda_loss_weight_sum(const ladle_backend *be, const ladle_loss_plan *l,
                                         int64_t n, const int64_t *labels, double *sum,
                                         int64_t *first)
{
    ladle_cuda_state *cs = ladle__cuda(be);
    int64_t *part_first = (int64_t *)cs->scratch;
    double *part_sum = (double *)cs->scratch + LADLE_CUDA_REDUCE_BLOCKS;
    double *answer = (double *)cs->scratch + 2 * LADLE_CUDA_REDUCE_BLOCKS;
    *sum = 0;
    *first = -1;
    if (n == 0)
        return LADLE_OK;
    cudaStream_t st = ladle__cuda_stream(be);
    unsigned grid = reduce_grid(ladle__cuda_blocks(be, n, LADLE_CUDA_THREADS));
    pthread_mutex_lock(&cs->scratch_lock);
    LADLE_LAUNCH_SYNC(weight_sum_kernel, grid, LADLE_CUDA_THREADS, 0, st, *l, n, labels,
                      part_first, part_sum);
    LADLE_LAUNCH_SYNC(weight_sum_finish, 1, LADLE_CUDA_THREADS, 0, st, (int64_t)grid, n,
                      (const int64_t *)part_first, (const double *)part_sum, answer,
                      (int64_t *)(answer + 1));
    cudaError_t e = answer_to_host(cs, st, answer, 2 * sizeof(double));
    if (e == cudaSuccess) {
        memcpy(sum, cs->host_scratch, sizeof(double));
        memcpy(first, (const char *)cs->host_scratch + sizeof(double), sizeof(int64_t));
    }
    pthread_mutex_unlock(&cs->scratch_lock);
    if (e != cudaSuccess) {
        *first = -1;
        return ladle__cuda_fail(e, "loss_weight_sum", "waiting for the label scan");
    }
    LADLE_CUDA_LAUNCHED("loss_weight_sum");
    return LADLE_OK;
}
