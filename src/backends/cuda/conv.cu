/*
 * The convolution's kernels on the GPU: im2col and col2im for any 1-, 2- or
 * 3-d geometry, the wide-row path's columns and grid (layers/sequential/conv_wide.c),
 * and the bias over channels with its gradient. src/core/backend.h has the
 * layouts; src/backends/cpu/conv.c is the oracle.
 *
 * How they map to the GPU:
 *   - im2col and the wide columns: a thread owns a column (one output of
 *     one image) and walks a chunk of the rows (taps), so a warp writes 32
 *     neighbouring columns of a row (coalesced) and reads neighbouring
 *     inputs; blocks along y take the chunks, so a small image still
 *     fills the GPU. The padding is tested per tap, not copied: the wide
 *     path reads x in place and leaves the xpad scratch alone, as im2col
 *     leaves `planes`.
 *   - col2im is a gather: a thread owns an element of dx and adds, in the
 *     order of the rows r, the column entries of the taps that read it
 *     (a tap reads an element from at most one output), which is the
 *     CPU's order, so the results agree bit for bit; no two threads write
 *     one element, no atomics. Given `planes`, the CPU adds the taps into
 *     a zeroed plane and that plane into dx; the gather then does the same
 *     (from zero, then into dx) and still agrees.
 *   - the grid copies and the bias add are element-wise.
 *   - the bias gradient keeps the contract's rounding sequence: for each
 *     channel db[c] += (T)(row sum in double), row after row. With inner 1
 *     a thread owns a channel (the CPU's sums exactly), fed through shared
 *     memory by its block; otherwise a block owns a channel and sums
 *     several rows at a time, each by a segment of its threads in a fixed
 *     tree (so a row's double sum is added in another order than the
 *     CPU's: f64 may differ in the last bits), and one thread adds the
 *     rounded row sums in row order. Both chains are serial by the
 *     contract, so few channels use few multiprocessors: the pass is small
 *     next to the layer's GEMMs.
 * Loops over flat indices carry their mixed-radix digits (image, channel,
 * position...) from one grid-stride step to the next instead of dividing
 * at each element: 64-bit division is dozens of instructions on a GPU.
 */
#include "src/backends/cuda/kernel.h"

/* The geometry as kernels take it (by value), with derived extents. */
typedef struct conv_dims {
    int64_t cg, cog;
    int64_t in[3], out[3], k[3], s[3], p[3], d[3];
    int64_t pin, pout; /* positions of an image and of its output */
    int64_t wp;        /* the padded width (wide path) */
    int64_t q;         /* the wide grid's columns per image (wide path) */
} conv_dims;

static conv_dims dims_of(const ladle_conv_geom *g, int wide)
{
    conv_dims v;
    v.cg = g->cg;
    v.cog = g->cog;
    for (int a = 0; a < 3; a++) {
        v.in[a] = g->in[a];
        v.out[a] = g->out[a];
        v.k[a] = g->k[a];
        v.s[a] = g->s[a];
        v.p[a] = g->p[a];
        v.d[a] = g->d[a];
    }
    v.pin = v.in[0] * v.in[1] * v.in[2];
    v.pout = v.out[0] * v.out[1] * v.out[2];
    v.wp = v.in[2] + 2 * v.p[2];
    v.q = wide ? (v.out[1] - 1) * v.wp + v.out[2] : 0;
    return v;
}

/*
 * A flat index as N mixed-radix digits (most significant first) and a
 * grid-stride loop's step in the same digits: `next` adds the step with
 * carries (each digit below its extent, so one carry at most per digit),
 * so only a thread's first index is divided out. The leading digit is
 * not wrapped: the loop's flat index says when to stop.
 */
template <int N> struct radix {
    int64_t ext[N];
    int64_t step[N];
};

template <int N> static radix<N> radix_make(const int64_t *ext, int64_t stride)
{
    radix<N> r;
    for (int a = N - 1; a >= 0; a--) {
        r.ext[a] = ext[a];
        r.step[a] = a > 0 ? stride % ext[a] : stride;
        stride = a > 0 ? stride / ext[a] : 0;
    }
    return r;
}

template <int N>
__device__ __forceinline__ void radix_split(const radix<N> &r, int64_t e, int64_t *dig)
{
    for (int a = N - 1; a > 0; a--) {
        dig[a] = e % r.ext[a];
        e /= r.ext[a];
    }
    dig[0] = e;
}

template <int N> __device__ __forceinline__ void radix_next(const radix<N> &r, int64_t *dig)
{
    int64_t carry = 0;
    for (int a = N - 1; a > 0; a--) {
        int64_t v = dig[a] + r.step[a] + carry;
        carry = v >= r.ext[a];
        dig[a] = carry ? v - r.ext[a] : v;
    }
    dig[0] += r.step[0] + carry;
}

/* The grid of a kernel whose threads own columns (x, grid-stride) and whose
 * y blocks take chunks of `rows` rows. */
static dim3 column_grid(const ladle_backend *be, int64_t cols, int64_t rows)
{
    unsigned bx = ladle__cuda_blocks(be, cols, LADLE_CUDA_THREADS);
    int64_t want = (ladle__cuda(be)->max_blocks + bx - 1) / bx;
    int64_t by = want < rows ? want : rows;
    by = by > 65535 ? 65535 : by < 1 ? 1 : by;
    return dim3(bx, (unsigned)by);
}

/* This y block's rows [*r0, *r1) of `rows`. */
__device__ __forceinline__ void row_chunk(int64_t rows, int64_t *r0, int64_t *r1)
{
    int64_t chunk = (rows + gridDim.y - 1) / gridDim.y;
    *r0 = blockIdx.y * chunk;
    *r1 = *r0 + chunk < rows ? *r0 + chunk : rows;
}

/* ---- im2col ---- */

/* col[r, b P + o] = x_b[c, o s - p + t d], 0 outside: a thread's columns
 * carry digits (b, od, oh, ow), its rows (c, i, j, l). */
template <class T>
__global__ void __launch_bounds__(LADLE_CUDA_THREADS)
    im2col_k(conv_dims v, int64_t cols, radix<4> cr, radix<4> rr, const T *x,
             int64_t x_stride, T *col, int64_t ld)
{
    int64_t r0, r1, o[4], t0[4];
    row_chunk(v.cg * v.k[0] * v.k[1] * v.k[2], &r0, &r1);
    radix_split(rr, r0, t0);
    int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    radix_split(cr, q, o);
    for (; q < cols; q += (int64_t)blockDim.x * gridDim.x, radix_next(cr, o)) {
        const T *xb = x + o[0] * x_stride;
        int64_t b0 = o[1] * v.s[0] - v.p[0], b1 = o[2] * v.s[1] - v.p[1];
        int64_t b2 = o[3] * v.s[2] - v.p[2];
        int64_t c = t0[0], i = t0[1], j = t0[2], l = t0[3];
        for (int64_t r = r0; r < r1; r++) {
            int64_t id = b0 + i * v.d[0], ih = b1 + j * v.d[1], iw = b2 + l * v.d[2];
            bool inside = id >= 0 && id < v.in[0] && ih >= 0 && ih < v.in[1] && iw >= 0 &&
                          iw < v.in[2];
            col[r * ld + q] = inside ? xb[c * v.pin + (id * v.in[1] + ih) * v.in[2] + iw] : (T)0;
            /* the next tap: l, then j, i, c */
            if (++l < v.k[2])
                continue;
            l = 0;
            if (++j < v.k[1])
                continue;
            j = 0;
            if (++i < v.k[0])
                continue;
            i = 0;
            c++;
        }
    }
}

template <class T>
static ladle_status im2col_t(const ladle_backend *be, const conv_dims &v, int64_t nb,
                             const void *x, int64_t x_stride, void *col, int64_t ld)
{
    int64_t cols = nb * v.pout, rows = v.cg * v.k[0] * v.k[1] * v.k[2];
    if (cols <= 0 || rows <= 0)
        return LADLE_OK;
    dim3 grid = column_grid(be, cols, rows);
    const int64_t cext[4] = {nb, v.out[0], v.out[1], v.out[2]};
    const int64_t rext[4] = {v.cg, v.k[0], v.k[1], v.k[2]};
    radix<4> cr = radix_make<4>(cext, (int64_t)grid.x * LADLE_CUDA_THREADS);
    radix<4> rr = radix_make<4>(rext, 0);
    auto k = im2col_k<T>;
    LADLE_LAUNCH(k, grid, LADLE_CUDA_THREADS, 0, ladle__cuda_stream(be), v, cols, cr, rr,
                 (const T *)x, x_stride, (T *)col, ld);
    LADLE_CUDA_LAUNCHED("conv_im2col");
    return LADLE_OK;
}

ladle_status ladle__cuda_conv_im2col(const ladle_backend *be, ladle_dtype dtype,
                                     const ladle_conv_geom *geom, int64_t nb, const void *x,
                                     int64_t x_stride, void *col, int64_t ld, void *planes)
{
    (void)planes; /* the taps test the padding themselves */
    conv_dims v = dims_of(geom, 0);
    if (dtype == LADLE_F32)
        return im2col_t<float>(be, v, nb, x, x_stride, col, ld);
    return im2col_t<double>(be, v, nb, x, x_stride, col, ld);
}

/* ---- col2im ---- */

/*
 * Along dimension a, the taps t = 0, 1, .. that read input x come from
 * output o = (x + p - t d) / s where that divides. A walker keeps the
 * quotient and remainder as t grows (the numerator falls by d = dq s + dr),
 * so that only its start divides: tap t hits when the remainder is 0 and
 * the quotient below out, and once the quotient is negative no later tap
 * does.
 */
typedef struct walk_steps {
    int64_t dq[3], dr[3]; /* d / s and d % s of each dimension */
} walk_steps;

typedef struct walker {
    int64_t quo, rem, dq, dr, s;
} walker;

__device__ __forceinline__ walker walk_start(int64_t x, int a, const conv_dims &v,
                                             const walk_steps &ws)
{
    walker w;
    int64_t num = x + v.p[a];
    w.s = v.s[a];
    w.dq = ws.dq[a];
    w.dr = ws.dr[a];
    w.quo = w.s == 1 ? num : num / w.s;
    w.rem = w.s == 1 ? 0 : num % w.s;
    return w;
}

__device__ __forceinline__ void walk_next(walker *w)
{
    w->quo -= w->dq;
    w->rem -= w->dr;
    if (w->rem < 0) {
        w->rem += w->s;
        w->quo--;
    }
}

__device__ __forceinline__ bool walk_hit(const walker &w, int64_t out)
{
    return w.rem == 0 && w.quo < out;
}

/* acc plus the column entries of the taps reading input (x0, x1, x2) of
 * channel c, in row order (cb: the image's first column). */
template <class T>
__device__ __forceinline__ T gather(const conv_dims &v, const walk_steps &ws, const T *cb,
                                    int64_t ld, int64_t c, const int64_t *x, T acc)
{
    walker w0 = walk_start(x[0], 0, v, ws);
    for (int64_t i = 0; i < v.k[0] && w0.quo >= 0; i++, walk_next(&w0)) {
        if (!walk_hit(w0, v.out[0]))
            continue;
        walker w1 = walk_start(x[1], 1, v, ws);
        for (int64_t j = 0; j < v.k[1] && w1.quo >= 0; j++, walk_next(&w1)) {
            if (!walk_hit(w1, v.out[1]))
                continue;
            const T *row = cb + ((c * v.k[0] + i) * v.k[1] + j) * v.k[2] * ld +
                           (w0.quo * v.out[1] + w1.quo) * v.out[2];
            walker w2 = walk_start(x[2], 2, v, ws);
            for (int64_t l = 0; l < v.k[2] && w2.quo >= 0; l++, walk_next(&w2))
                if (walk_hit(w2, v.out[2]))
                    acc += row[l * ld + w2.quo];
        }
    }
    return acc;
}

/* dx_b[c, x] plus the taps reading it; digits (b, c, x0, x1, x2).
 * from_zero: the taps' sum first, then dx plus it (the CPU's planes). */
template <class T>
__global__ void __launch_bounds__(LADLE_CUDA_THREADS)
    col2im_k(conv_dims v, int64_t total, radix<5> er, walk_steps ws, const T *col, int64_t ld,
             T *dx, int64_t dx_stride, int from_zero)
{
    int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, g[5];
    radix_split(er, e, g);
    for (; e < total; e += (int64_t)blockDim.x * gridDim.x, radix_next(er, g)) {
        T *out = dx + g[0] * dx_stride + g[1] * v.pin + (g[2] * v.in[1] + g[3]) * v.in[2] + g[4];
        T sum = gather(v, ws, col + g[0] * v.pout, ld, g[1], g + 2, from_zero ? (T)0 : *out);
        *out = from_zero ? *out + sum : sum;
    }
}

template <class T>
static ladle_status col2im_t(const ladle_backend *be, const conv_dims &v, int64_t nb,
                             const void *col, int64_t ld, void *dx, int64_t dx_stride,
                             int from_zero)
{
    int64_t total = nb * v.cg * v.pin;
    if (total <= 0)
        return LADLE_OK;
    unsigned blocks = ladle__cuda_blocks(be, total, LADLE_CUDA_THREADS);
    const int64_t ext[5] = {nb, v.cg, v.in[0], v.in[1], v.in[2]};
    radix<5> er = radix_make<5>(ext, (int64_t)blocks * LADLE_CUDA_THREADS);
    walk_steps ws;
    for (int a = 0; a < 3; a++) {
        ws.dq[a] = v.d[a] / v.s[a];
        ws.dr[a] = v.d[a] % v.s[a];
    }
    auto k = col2im_k<T>;
    LADLE_LAUNCH(k, blocks, LADLE_CUDA_THREADS, 0, ladle__cuda_stream(be), v, total, er, ws,
                 (const T *)col, ld, (T *)dx, dx_stride, from_zero);
    LADLE_CUDA_LAUNCHED("conv_col2im");
    return LADLE_OK;
}

ladle_status ladle__cuda_conv_col2im(const ladle_backend *be, ladle_dtype dtype,
                                     const ladle_conv_geom *geom, int64_t nb, const void *col,
                                     int64_t ld, void *dx, int64_t dx_stride, void *planes)
{
    conv_dims v = dims_of(geom, 0);
    int from_zero = planes != NULL;
    if (dtype == LADLE_F32)
        return col2im_t<float>(be, v, nb, col, ld, dx, dx_stride, from_zero);
    return col2im_t<double>(be, v, nb, col, ld, dx, dx_stride, from_zero);
}

/* ---- the wide path ---- */

/* col[(c k1 + i) k2 + j, b Q + q] = xp_b[c, i d1 wp + j d2 + q], xp_b the
 * zero-padded plane, read from x in place: column digits (b, q), row
 * digits (c, i, j). */
template <class T>
__global__ void __launch_bounds__(LADLE_CUDA_THREADS)
    wide_im2col_k(conv_dims v, int64_t cols, radix<2> cr, radix<3> rr, const T *x,
                  int64_t x_stride, T *col, int64_t ld)
{
    int64_t r0, r1, o[2], t0[3];
    row_chunk(v.cg * v.k[1] * v.k[2], &r0, &r1);
    radix_split(rr, r0, t0);
    int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    radix_split(cr, e, o);
    for (; e < cols; e += (int64_t)blockDim.x * gridDim.x, radix_next(cr, o)) {
        const T *xb = x + o[0] * x_stride;
        int64_t qh = o[1] / v.wp, qw = o[1] % v.wp;
        int64_t c = t0[0], i = t0[1], j = t0[2];
        T *dst = col + o[0] * v.q + o[1];
        for (int64_t r = r0; r < r1; r++) {
            /* plane index i d1 wp + j d2 + q as (row, column) of the padded
             * plane; j d2 < wp, so one carry at most */
            int64_t mh = qh + i * v.d[1], mw = qw + j * v.d[2];
            if (mw >= v.wp) {
                mw -= v.wp;
                mh++;
            }
            int64_t h = mh - v.p[1], w = mw - v.p[2];
            bool inside = h >= 0 && h < v.in[1] && w >= 0 && w < v.in[2];
            dst[r * ld] = inside ? xb[c * v.pin + h * v.in[2] + w] : (T)0;
            if (++j < v.k[2])
                continue;
            j = 0;
            if (++i < v.k[1])
                continue;
            i = 0;
            c++;
        }
    }
}

template <class T>
static ladle_status wide_im2col_t(const ladle_backend *be, const conv_dims &v, int64_t nb,
                                  const void *x, int64_t x_stride, void *col, int64_t ld)
{
    int64_t cols = nb * v.q, rows = v.cg * v.k[1] * v.k[2];
    if (cols <= 0 || rows <= 0)
        return LADLE_OK;
    dim3 grid = column_grid(be, cols, rows);
    const int64_t cext[2] = {nb, v.q}, rext[3] = {v.cg, v.k[1], v.k[2]};
    radix<2> cr = radix_make<2>(cext, (int64_t)grid.x * LADLE_CUDA_THREADS);
    radix<3> rr = radix_make<3>(rext, 0);
    auto k = wide_im2col_k<T>;
    LADLE_LAUNCH(k, grid, LADLE_CUDA_THREADS, 0, ladle__cuda_stream(be), v, cols, cr, rr,
                 (const T *)x, x_stride, (T *)col, ld);
    LADLE_CUDA_LAUNCHED("conv_wide_im2col");
    return LADLE_OK;
}

ladle_status ladle__cuda_conv_wide_im2col(const ladle_backend *be, ladle_dtype dtype,
                                          const ladle_conv_geom *geom, int64_t nb,
                                          const void *x, int64_t x_stride, void *xpad,
                                          void *col, int64_t ld)
{
    (void)xpad; /* the taps test the padding themselves */
    conv_dims v = dims_of(geom, 1);
    if (dtype == LADLE_F32)
        return wide_im2col_t<float>(be, v, nb, x, x_stride, col, ld);
    return wide_im2col_t<double>(be, v, nb, x, x_stride, col, ld);
}

/* Between grid[c, b Q + oh wp + ow] and t_b[c, oh OW + ow]; digits (b, c,
 * oh, ow). */
template <class T>
__global__ void wide_grid_k(conv_dims v, int64_t total, radix<4> er, int to_tensor, T *grid,
                            int64_t ld, T *t, int64_t t_stride)
{
    int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, g[4];
    radix_split(er, e, g);
    for (; e < total; e += (int64_t)blockDim.x * gridDim.x, radix_next(er, g)) {
        T *gp = grid + g[1] * ld + g[0] * v.q + g[2] * v.wp + g[3];
        T *tp = t + g[0] * t_stride + g[1] * v.pout + g[2] * v.out[2] + g[3];
        if (to_tensor)
            *tp = *gp;
        else
            *gp = *tp;
    }
}

template <class T>
static ladle_status wide_grid_t(const ladle_backend *be, const conv_dims &v, int to_tensor,
                                int64_t nb, void *grid, int64_t ld, void *t, int64_t t_stride)
{
    int64_t total = nb * v.cog * v.out[1] * v.out[2];
    if (total <= 0)
        return LADLE_OK;
    unsigned blocks = ladle__cuda_blocks(be, total, LADLE_CUDA_THREADS);
    const int64_t ext[4] = {nb, v.cog, v.out[1], v.out[2]};
    radix<4> er = radix_make<4>(ext, (int64_t)blocks * LADLE_CUDA_THREADS);
    auto k = wide_grid_k<T>;
    LADLE_LAUNCH(k, blocks, LADLE_CUDA_THREADS, 0, ladle__cuda_stream(be), v, total, er,
                 to_tensor, (T *)grid, ld, (T *)t, t_stride);
    LADLE_CUDA_LAUNCHED("conv_wide_grid");
    return LADLE_OK;
}

ladle_status ladle__cuda_conv_wide_grid(const ladle_backend *be, ladle_dtype dtype,
                                        const ladle_conv_geom *geom, int to_tensor,
                                        int64_t nb, void *grid, int64_t ld, void *t,
                                        int64_t t_stride)
{
    conv_dims v = dims_of(geom, 1);
    if (dtype == LADLE_F32)
        return wide_grid_t<float>(be, v, to_tensor, nb, grid, ld, t, t_stride);
    return wide_grid_t<double>(be, v, to_tensor, nb, grid, ld, t, t_stride);
}

/* ---- bias ---- */

/* y[r, c, p] += b[c]; digits (r, c, p), the leading one unused. */
template <class T>
__global__ void bias_add_k(int64_t total, radix<3> er, const T *b, T *y)
{
    int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, g[3];
    radix_split(er, e, g);
    for (; e < total; e += (int64_t)blockDim.x * gridDim.x, radix_next(er, g))
        y[e] += b[g[1]];
}

template <class T>
static ladle_status bias_add_t(const ladle_backend *be, int64_t rows, int64_t channels,
                               int64_t inner, const void *b, void *y)
{
    int64_t total = rows * channels * inner;
    if (total <= 0)
        return LADLE_OK;
    unsigned blocks = ladle__cuda_blocks(be, total, LADLE_CUDA_THREADS);
    const int64_t ext[3] = {rows, channels, inner};
    radix<3> er = radix_make<3>(ext, (int64_t)blocks * LADLE_CUDA_THREADS);
    auto k = bias_add_k<T>;
    LADLE_LAUNCH(k, blocks, LADLE_CUDA_THREADS, 0, ladle__cuda_stream(be), total, er,
                 (const T *)b, (T *)y);
    LADLE_CUDA_LAUNCHED("bias_add");
    return LADLE_OK;
}

ladle_status ladle__cuda_bias_add(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                                  int64_t channels, int64_t inner, const void *b, void *y)
{
    if (dtype == LADLE_F32)
        return bias_add_t<float>(be, rows, channels, inner, b, y);
    return bias_add_t<double>(be, rows, channels, inner, b, y);
}

/* inner 1: a column of threads owns db[c] and adds the rows in order. The
 * chain of adds is serial, its loads need not be: the block's 8 lanes load
 * a tile of 64 rows x 32 channels into shared memory (a warp reads 32
 * neighbouring channels of a row), then lane 0 adds the tile's rows. */
#define BIAS_TILE_ROWS 64
#define BIAS_CHANNELS 32
#define BIAS_LANES (LADLE_CUDA_THREADS / BIAS_CHANNELS)

template <class T>
__global__ void __launch_bounds__(LADLE_CUDA_THREADS)
    bias_grad_cols_k(int64_t rows, int64_t channels, const T *dy, T *db)
{
    __shared__ T tile[BIAS_TILE_ROWS][BIAS_CHANNELS];
    unsigned tx = threadIdx.x % BIAS_CHANNELS, ty = threadIdx.x / BIAS_CHANNELS;
    int64_t c = (int64_t)blockIdx.x * BIAS_CHANNELS + tx;
    T acc = ty == 0 && c < channels ? db[c] : (T)0;
    for (int64_t r0 = 0; r0 < rows; r0 += BIAS_TILE_ROWS) {
        int64_t n = rows - r0 < BIAS_TILE_ROWS ? rows - r0 : BIAS_TILE_ROWS;
        if (c < channels)
            for (int64_t r = ty; r < n; r += BIAS_LANES)
                tile[r][tx] = dy[(r0 + r) * channels + c];
        __syncthreads();
        if (ty == 0)
            for (int64_t r = 0; r < n; r++)
                acc += tile[r][tx];
        __syncthreads(); /* the tile is the next rows' */
    }
    if (ty == 0 && c < channels)
        db[c] = acc;
}

/* inner > 1: a block owns db[c]; segments of seg threads (a power of two,
 * seg >= inner or 256) sum one row each in double, blockDim / seg rows at
 * a time, and thread 0 adds their sums, rounded to T, in row order. */
template <class T>
__global__ void __launch_bounds__(LADLE_CUDA_THREADS)
    bias_grad_rows_k(int64_t rows, int64_t channels, int64_t inner, int seg, const T *dy,
                     T *db)
{
    __shared__ double shm[LADLE_CUDA_THREADS];
    unsigned t = threadIdx.x, lane = t % seg;
    int64_t group = t / seg, per = blockDim.x / seg;
    for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
        T acc = t == 0 ? db[c] : (T)0;
        for (int64_t r0 = 0; r0 < rows; r0 += per) {
            int64_t r = r0 + group;
            double s = 0.0;
            if (r < rows)
                for (int64_t p = lane; p < inner; p += seg)
                    s += (double)dy[(r * channels + c) * inner + p];
            shm[t] = s;
            __syncthreads();
            for (unsigned h = seg / 2; h > 0; h >>= 1) {
                if (lane < h)
                    shm[t] += shm[t + h];
                __syncthreads();
            }
            if (t == 0)
                for (int64_t k = 0; k < per && r0 + k < rows; k++)
                    acc += (T)shm[k * seg];
            __syncthreads(); /* shm is the next rows' */
        }
        if (t == 0)
            db[c] = acc;
    }
}

template <class T>
static ladle_status bias_grad_t(const ladle_backend *be, int64_t rows, int64_t channels,
                                int64_t inner, const void *dy, void *db)
{
    cudaStream_t st = ladle__cuda_stream(be);
    if (channels <= 0 || rows <= 0 || inner <= 0)
        return LADLE_OK;
    if (inner == 1) {
        unsigned blocks = (unsigned)((channels + BIAS_CHANNELS - 1) / BIAS_CHANNELS);
        auto k = bias_grad_cols_k<T>;
        LADLE_LAUNCH_SYNC(k, blocks, LADLE_CUDA_THREADS, 0, st, rows, channels, (const T *)dy,
                          (T *)db);
    } else {
        int seg = 1;
        while (seg < inner && seg < LADLE_CUDA_THREADS)
            seg *= 2;
        int64_t cap = ladle__cuda(be)->max_blocks;
        unsigned blocks = (unsigned)(channels < cap ? channels : cap);
        auto k = bias_grad_rows_k<T>;
        LADLE_LAUNCH_SYNC(k, blocks, LADLE_CUDA_THREADS, 0, st, rows, channels, inner, seg,
                          (const T *)dy, (T *)db);
    }
    LADLE_CUDA_LAUNCHED("bias_grad");
    return LADLE_OK;
}

ladle_status ladle__cuda_bias_grad(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                                   int64_t channels, int64_t inner, const void *dy, void *db)
{
    if (dtype == LADLE_F32)
        return bias_grad_t<float>(be, rows, channels, inner, dy, db);
    return bias_grad_t<double>(be, rows, channels, inner, dy, db);
}
