/*
 * The backend's slots, written once: the contract of src/core/backend.h,
 * one entry per slot of ladle_backend_table, in the table's order,
 *
 *     LADLE_SLOT(name, (parameters), (arguments), (device pointers))
 *
 *   name             the table's member, and the suffix of each backend's
 *                    kernel for it: ladle__cpu_<name>, ladle__cuda_<name>
 *   parameters       the full parameter list, the instance `be` first;
 *                    every slot returns ladle_status
 *   arguments        the parameters' names again, in order: what a wrapper
 *                    forwards (the preprocessor cannot split a declaration)
 *   device pointers  the arguments pointing into device memory whose
 *                    contents the slot reads or writes (not host answers,
 *                    not host descriptors); () for none
 *
 * There is no include guard: a file defines LADLE_SLOT, includes this list
 * and undefines it again. From it come
 *   - the table's members (src/core/backend.h),
 *   - each backend's kernel prototypes (src/backends/cpu/cpu.h,
 *     src/backends/cuda/cuda.h): one for every slot, whether or not the
 *     backend defines that kernel; a table fill naming a kernel nobody
 *     wrote fails at link time,
 *   - the guarded device's wrappers (src/backends/guarded/guarded.c), which
 *     open the device pointers' blocks and run the CPU's kernel.
 * Written by hand: the kernels, each backend's table fill (which slots it
 * fills is the backend's choice; optional slots may stay NULL), guarded's
 * wrappers that are more than forwarding (alloc, free, the host copies),
 * and the meaning of an optional slot left NULL (the ladle__be_* helpers of
 * src/core/backend.c).
 *
 * Adding a slot (docs/architecture.md, "Adding a backend slot"):
 *   1. an entry at the end of this list, under a "--- revision N ---"
 *      heading, with a comment precise enough to write a GPU kernel from,
 *      and LADLE_BACKEND_VERSION one up in src/core/backend.h;
 *   2. the kernel ladle__cpu_<name> (and ladle__cuda_<name>) in its
 *      family's file: its prototype is already declared;
 *   3. the table fills: `.<name> = ladle__cpu_<name>` in cpu.c,
 *      `.<name> = guarded_<name>` in guarded.c (and `.<name> =
 *      ladle__cuda_<name>` in cuda.cu).
 * Nothing else is edited by hand, unless the slot is optional and NULL
 * must mean something (a ladle__be_<name> helper then says what). Entries are never removed, reordered or
 * changed in meaning: the table only grows.
 */

/* --- memory --- */
/* Device memory that is zeroed (and so touched) before it is returned;
 * *out is NULL for 0 bytes. */
LADLE_SLOT(alloc, (const ladle_backend *be, size_t bytes, void **out), (be, bytes, out), ())
LADLE_SLOT(free, (const ladle_backend *be, void *ptr), (be, ptr), ()) /* NULL is fine */
/* Host memory the device copies to and from fastest (pinned), zeroed;
 * optional: NULL means plain host memory. */
LADLE_SLOT(host_alloc, (const ladle_backend *be, size_t bytes, void **out),
           (be, bytes, out), ())
LADLE_SLOT(host_free, (const ladle_backend *be, void *ptr), (be, ptr), ())
/* bytes from host to device and back (queued; the host buffer must stay
 * until the copy is done: after synchronize or a recorded event) */
LADLE_SLOT(to_device, (const ladle_backend *be, size_t bytes, const void *host, void *dst),
           (be, bytes, host, dst), (dst))
LADLE_SLOT(to_host, (const ladle_backend *be, size_t bytes, const void *src, void *host),
           (be, bytes, src, host), (src))

/* --- order --- */
/* Wait until everything queued has finished. */
LADLE_SLOT(synchronize, (const ladle_backend *be), (be), ())
/* Events (optional: NULL on a backend whose slots finish on return):
 * record marks the queue's current point, wait makes the queue wait for
 * an event (of any instance of the same backend), sync makes the host
 * wait for it. */
LADLE_SLOT(event_create, (const ladle_backend *be, void **event), (be, event), ())
LADLE_SLOT(event_destroy, (const ladle_backend *be, void *event), (be, event), ())
LADLE_SLOT(event_record, (const ladle_backend *be, void *event), (be, event), ())
LADLE_SLOT(event_wait, (const ladle_backend *be, void *event), (be, event), ())
LADLE_SLOT(event_sync, (const ladle_backend *be, void *event), (be, event), ())

/* --- copies and boxes --- */
/* The slots take dtype f32 or f64 (i64 where an entry says so), except
 * these: copy, copy_box, pack, unpack and fill take every dtype, the 2-byte
 * bf16 and f16 included (a box ADD of those adds in f32 and rounds once,
 * to nearest even, as src/core/half.h does; fill rounds value so), and
 * convert (revision 11) converts between them. */
/* Contiguous copy of n elements (memmove semantics). */
LADLE_SLOT(copy,
           (const ladle_backend *be, ladle_dtype dtype, int64_t n, const void *src,
            void *dst),
           (be, dtype, n, src, dst), (src, dst))
/* A box of extents ext[0..ndim-1] read with strides sstr from src and
 * written with strides dstr into dst. */
LADLE_SLOT(copy_box,
           (const ladle_backend *be, ladle_dtype dtype, ladle_box_mode mode, int ndim,
            const int64_t *ext, const void *src, const int64_t *sstr, void *dst,
            const int64_t *dstr),
           (be, dtype, mode, ndim, ext, src, sstr, dst, dstr), (src, dst))
/* Gather a strided box into contiguous dst, and scatter (or add)
 * contiguous src into a strided box. */
LADLE_SLOT(pack,
           (const ladle_backend *be, ladle_dtype dtype, int ndim, const int64_t *ext,
            const void *src, const int64_t *sstr, void *dst),
           (be, dtype, ndim, ext, src, sstr, dst), (src, dst))
LADLE_SLOT(unpack,
           (const ladle_backend *be, ladle_dtype dtype, ladle_box_mode mode, int ndim,
            const int64_t *ext, const void *src, void *dst, const int64_t *dstr),
           (be, dtype, mode, ndim, ext, src, dst, dstr), (src, dst))

/* --- vectors --- */
/* c = a + b, elementwise over n elements (c may alias a or b). */
LADLE_SLOT(add,
           (const ladle_backend *be, ladle_dtype dtype, int64_t n, const void *a,
            const void *b, void *c),
           (be, dtype, n, a, b, c), (a, b, c))
/* y += alpha * x */
LADLE_SLOT(axpy,
           (const ladle_backend *be, ladle_dtype dtype, int64_t n, double alpha,
            const void *x, void *y),
           (be, dtype, n, alpha, x, y), (x, y))
/* sum of x[i] * y[i] as an unevaluated pair (hi, lo) in host memory:
 * hi + lo carries about twice double precision (synchronous) */
LADLE_SLOT(dot2,
           (const ladle_backend *be, ladle_dtype dtype, int64_t n, const void *x,
            const void *y, double out[2]),
           (be, dtype, n, x, y, out), (x, y))
/* x[i] *= alpha (in dtype: an f32 x is multiplied by (float)alpha) */
LADLE_SLOT(scal,
           (const ladle_backend *be, ladle_dtype dtype, int64_t n, double alpha, void *x),
           (be, dtype, n, alpha, x), (x))
/* max |x[i]| into *out (host memory, synchronous); NaN elements are
 * skipped, as fmax does, and 0 for n = 0 */
LADLE_SLOT(abs_max,
           (const ladle_backend *be, ladle_dtype dtype, int64_t n, const void *x,
            double *out),
           (be, dtype, n, x, out), (x))
/* x[i] = value */
LADLE_SLOT(fill,
           (const ladle_backend *be, ladle_dtype dtype, int64_t n, double value, void *x),
           (be, dtype, n, value, x), (x))

/* --- random fills --- */
/* Element i (row-major over shape) of the strided box x becomes
 * ladle__random_uniform(seed, stream, i), uniform in [-1, 1): the same
 * values on every device and rank count. */
LADLE_SLOT(fill_random,
           (const ladle_backend *be, ladle_dtype dtype, int ndim, const int64_t *shape,
            const int64_t *strides, uint64_t seed, uint64_t stream, void *x),
           (be, dtype, ndim, shape, strides, seed, stream, x), (x))

/* Element e of the box becomes d->scale * r(d->seed, d->stream, g) with g
 * the row-major index of (d->offset + e's index) in d->global and r
 * ladle__random_normal or ladle__random_uniform: every shard of a
 * tensor, on any device, gets the values the whole tensor would. */
LADLE_SLOT(fill_init,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_init_desc *d, void *x),
           (be, dtype, d, x), (x))

/* --- dense linear algebra --- */
/* C = alpha op(A) op(B) + beta C, row-major, op = transpose if trans_* */
LADLE_SLOT(gemm,
           (const ladle_backend *be, ladle_dtype dtype, int trans_a, int trans_b, int64_t m,
            int64_t n, int64_t k, double alpha, const void *a, int64_t lda, const void *b,
            int64_t ldb, double beta, void *c, int64_t ldc),
           (be, dtype, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc),
           (a, b, c))

/* --- activations and softmax --- */
/* (CPU: src/backends/cpu/activation.c, softmax.c) */
/* y[i] = f(x[i]) over n elements, f the activation kind (slope is
 * LeakyReLU's, >= 0); y may alias x. */
LADLE_SLOT(act_forward,
           (const ladle_backend *be, ladle_dtype dtype, ladle_activation kind, double slope,
            int64_t n, const void *x, void *y),
           (be, dtype, kind, slope, n, x, y), (x, y))
/* dx[i] = f'(x[i]) dy[i], given x and y = f(x): ReLU, LeakyReLU, sigmoid
 * and tanh read only y (x may then be y's storage, overwritten); GELU
 * reads both (Phi(x) = y / x where x is not tiny). dx may alias dy. */
LADLE_SLOT(act_backward,
           (const ladle_backend *be, ladle_dtype dtype, ladle_activation kind, double slope,
            int64_t n, const void *x, const void *y, const void *dy, void *dx),
           (be, dtype, kind, slope, n, x, y, dy, dx), (x, y, dy, dx))
/* Softmax (log = 0) or log-softmax (log = 1) of x viewed as
 * [outer][len][inner], along len: y = exp(x - lse) or x - lse with lse
 * the row's log-sum-exp (computed stably, in double). y may alias x. */
LADLE_SLOT(softmax_forward,
           (const ladle_backend *be, ladle_dtype dtype, int log, int64_t outer, int64_t len,
            int64_t inner, const void *x, void *y),
           (be, dtype, log, outer, len, inner, x, y), (x, y))
/* Its backward from y alone: dx = y (dy - sum(dy y)) for softmax,
 * dx = dy - exp(y) sum(dy) for log-softmax (sums along len, in double).
 * dx may alias dy. */
LADLE_SLOT(softmax_backward,
           (const ladle_backend *be, ladle_dtype dtype, int log, int64_t outer, int64_t len,
            int64_t inner, const void *y, const void *dy, void *dx),
           (be, dtype, log, outer, len, inner, y, dy, dx), (y, dy, dx))

/* --- losses --- */
/* (CPU: src/backends/cpu/loss.c) */
/* The loss of x against target into out: every term (reduction none:
 * out has one value per element, or per sample for classification) or
 * out[0] = (sum of the terms) / l->divisor. Terms and sums in double:
 *   MSE (x - t)^2, L1 |x - t|, BCE with logits max(x, 0) - x t +
 *   log1p(exp(-|x|)); cross entropy -sum_c q_c (x_c - lse(x)) with
 *   q = (1 - e) onehot(label) + e / C; NLL -x_label. With class weights
 *   w (l->weight): q_c = (1 - e) w_label [c == label] + e w_c / C and
 *   NLL -w_label x_label; an ignored label's term is 0.
 * Classification x is [N][C][inner] and target holds N * inner i64
 * labels already checked to lie in 0..C-1; regression target has x's
 * dtype and shape. */
LADLE_SLOT(loss_forward,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_loss_plan *l,
            const void *x, const void *target, void *out),
           (be, dtype, l, x, target, out), (x, target, out))
/* dx = dloss * d(loss)/dx: dloss holds one value per term (reduction
 * none) or one value, then divided by l->divisor. The gradients:
 * 2 (x - t), sign(x - t), sigmoid(x) - t, softmax(x)_c - q_c,
 * -[c == label]; with class weights softmax(x)_c sum_k q_k - q_c and
 * -w_label [c == label]; 0 for an ignored label. */
LADLE_SLOT(loss_backward,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_loss_plan *l,
            const void *x, const void *target, const void *dloss, void *dx),
           (be, dtype, l, x, target, dloss, dx), (x, target, dloss, dx))
/* Scans whose answer goes to the host (synchronous): the index of the
 * first of n i64 values outside [lo, hi], and of the first of n values
 * that is not finite; -1 in *first (host memory) when there is none. */
LADLE_SLOT(find_outside,
           (const ladle_backend *be, int64_t n, const int64_t *v, int64_t lo, int64_t hi,
            int64_t *first),
           (be, n, v, lo, hi, first), (v))
LADLE_SLOT(find_non_finite,
           (const ladle_backend *be, ladle_dtype dtype, int64_t n, const void *x,
            int64_t *first),
           (be, dtype, n, x, first), (x))

/* --- dropout --- */
/* (CPU: src/backends/cpu/dropout.c) */
/* out[i] = in[i] / (1 - p) where u >= p, else 0, with
 * u = (ladle__random_uniform(seed, step, offset + i) + 1) / 2: the mask
 * is a function of the global element index, the same on every device
 * and layout (scale 0 when p = 1). out may alias in. */
LADLE_SLOT(dropout,
           (const ladle_backend *be, ladle_dtype dtype, int64_t n, double p, uint64_t seed,
            uint64_t step, int64_t offset, const void *in, void *out),
           (be, dtype, n, p, seed, step, offset, in, out), (in, out))

/* --- batch norm --- */
/* (CPU: src/backends/cpu/batchnorm.c) */
/* x, dy, u, w and out are n x c x inner tensors of dtype, contiguous
 * (channel ch of sample sm is the row of inner values at
 * (sm c + ch) inner). The per-channel arrays (mean, s, s1, s2, a, b, k:
 * c doubles each) are device memory too: the layers keep statistics,
 * coefficients and what a forward saves in host doubles, and move them
 * across with to_device and to_host around these slots (a few times c
 * doubles per call), so MPI reduces host buffers or tensors only and a
 * GPU needs no scratch of its own. Sums over a channel run over all n
 * inner of its values and overwrite their outputs; the CPU sums in 16
 * lanes of dtype flushed into double every 256 values (in double from
 * the start when inner == 1), and another backend must sum at least as
 * accurately: double across blocks. */
/* s[ch] = sum x over channel ch (mean NULL), or sum (x - mean[ch])^2
 * with mean[ch] rounded to dtype (kept in double when inner == 1). */
LADLE_SLOT(bn_moment,
           (const ladle_backend *be, ladle_dtype dtype, int64_t n, int64_t c, int64_t inner,
            const void *x, const double *mean, double *s),
           (be, dtype, n, c, inner, x, mean, s), (x, mean, s))
/* s1[ch] = sum dy, s2[ch] = sum dy (x - mean[ch]) over channel ch,
 * mean rounded as in bn_moment. */
LADLE_SLOT(bn_dsums,
           (const ladle_backend *be, ladle_dtype dtype, int64_t n, int64_t c, int64_t inner,
            const void *x, const void *dy, const double *mean, double *s1, double *s2),
           (be, dtype, n, c, inner, x, dy, mean, s1, s2), (x, dy, mean, s1, s2))
/* out = a[ch] u + b[ch] w + k[ch] elementwise in channel ch; w and b
 * may be NULL (the term drops). With inner > 1 it is computed in dtype
 * with a, b, k rounded to dtype, with inner == 1 in double and rounded
 * once. out may be u or w (each element is read before it is written),
 * but may not overlap them otherwise. */
LADLE_SLOT(bn_affine,
           (const ladle_backend *be, ladle_dtype dtype, int64_t n, int64_t c, int64_t inner,
            const void *u, const void *w, void *out, const double *a, const double *b,
            const double *k),
           (be, dtype, n, c, inner, u, w, out, a, b, k), (u, w, out, a, b, k))

/* --- pooling --- */
/* (CPU: src/backends/cpu/pool.c, pool_direct.c) */
/* Max and average pooling of `planes` planes (ladle_pool_geom): x and
 * dx hold planes x in-plane elements, y and dy planes x out-plane, each
 * contiguous, plane after plane; no two of them overlap.
 *
 * Max: y[o] is the largest valid tap of o's window; of equal values the
 * first in row-major tap order wins, and a NaN wins over any number
 * (the first NaN stays); a window without valid taps gives -inf and no
 * winner. The backward overwrites dx with zeros plus, at each winner,
 * the dy of the outputs it won.
 * Average: y[o] is the sum of the valid taps times r0 r1 r2, where r[a]
 * is 1 / (e - b) with b = o s[a] - p[a] and e = min(b + k[a], in[a] +
 * p[a]) when count_include_pad, else 1 / (min(e, in[a]) - max(b, 0))
 * (0 when that is empty); the backward overwrites dx with its adjoint,
 * dx[i] = sum over the windows o holding tap i of dy[o] r0 r1 r2.
 * Global: y = the plane's sum (in double) / its size; dx = dy / size.
 *
 * What the backend precomputes for a geometry and dtype (tables, the
 * kernels' scratch) lives in a workspace the caller allocates once:
 * pool_plan says its size in bytes (ws_bytes) and the bytes per plane of
 * the winners a max forward saves for its backward (saved_bytes; 0 for
 * average); pool_setup fills it (at plan time, not in a forward). The
 * forward and backward use the workspace as scratch: calls sharing one
 * must not overlap in time. The saved winners are the backend's own
 * format, planes x saved_bytes of device memory: the forward writes them
 * unless saved is NULL, the max backward reads those of the forward over
 * the same planes (average ignores saved). g is the geometry given to
 * pool_setup. */
LADLE_SLOT(pool_plan,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_pool_geom *g,
            size_t *ws_bytes, size_t *saved_bytes),
           (be, dtype, g, ws_bytes, saved_bytes), ())
LADLE_SLOT(pool_setup,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_pool_geom *g, void *ws),
           (be, dtype, g, ws), (ws))
LADLE_SLOT(pool_forward,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_pool_geom *g,
            int64_t planes, const void *x, void *y, void *saved, void *ws),
           (be, dtype, g, planes, x, y, saved, ws), (x, y, saved, ws))
LADLE_SLOT(pool_backward,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_pool_geom *g,
            int64_t planes, const void *dy, void *dx, const void *saved, void *ws),
           (be, dtype, g, planes, dy, dx, saved, ws), (dy, dx, saved, ws))

/* --- convolution: im2col, the wide path, bias --- */
/* (CPU: src/backends/cpu/conv.c) */
/* The column slots work on one group of nb images; ladle_conv_geom (above
 * the table) gives the group's geometry. An image's group is cg
 * contiguous channels of pin = in[0] in[1] in[2] elements (D, H, W
 * row-major); image b's starts at x + b x_stride. The column matrix has
 * K = cg k[0] k[1] k[2] rows of leading dimension ld, row
 * r = ((c k[0] + i) k[1] + j) k[2] + l for channel c and tap (i, j, l);
 * image b owns its P = out[0] out[1] out[2] columns from b P, column
 * (od out[1] + oh) out[2] + ow for output (od, oh, ow), and nb P <= ld.
 * Tap (i, j, l) of output o reads input o s - p + (i, j, l) d per
 * dimension, zero where that falls outside the image.
 *
 * im2col: col[r, b P + o] = x_b[c, o s - p + t d] (0 outside); every
 * element of the nb P columns is written.
 * col2im: dx_b[c, o s - p + t d] += col[r, b P + o] over all rows and
 * columns whose input is inside: the adjoint of im2col, adding into dx
 * (zero it first for dx = col2im(col)). Taps adding to one element add
 * in the order of r for each output, outputs in order.
 * planes: NULL, or (only when in[0] == 1, k[0] == 1 and s[2] == 1)
 * scratch of 2 hp wp elements, hp = in[1] + 2 p[1], wp = in[2] + 2 p[2],
 * zeroed when allocated and given to no other slot: the CPU then builds
 * the columns from zero-bordered planes (whose borders it keeps zero); a
 * backend may ignore it. x, col, dx and planes must not overlap. */
LADLE_SLOT(conv_im2col,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_conv_geom *geom,
            int64_t nb, const void *x, int64_t x_stride, void *col, int64_t ld,
            void *planes),
           (be, dtype, geom, nb, x, x_stride, col, ld, planes), (x, col, planes))
LADLE_SLOT(conv_col2im,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_conv_geom *geom,
            int64_t nb, const void *col, int64_t ld, void *dx, int64_t dx_stride,
            void *planes),
           (be, dtype, geom, nb, col, ld, dx, dx_stride, planes), (col, dx, planes))
/* The wide-row columns, for in[0] == 1, k[0] == 1, s[1] == s[2] == 1:
 * with hp, wp as above and Q = (out[1] - 1) wp + out[2], output (oh, ow)
 * is grid column oh wp + ow (the columns with ow >= out[2] are spare),
 * and tap (c, i, j) is one run of image b's zero-padded plane xp_b[c]
 * (hp x wp, x in its middle at (p[1], p[2])):
 *     col[(c k[1] + i) k[2] + j, b Q + q] = xp_b[c, i d[1] wp + j d[2] + q],
 * q < Q, nb Q <= ld. xpad: NULL when p[1] = p[2] = 0 (x is its own
 * padded plane), else scratch of cg hp wp elements zeroed when
 * allocated, whose borders stay zero (only the middle is written). */
LADLE_SLOT(conv_wide_im2col,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_conv_geom *geom,
            int64_t nb, const void *x, int64_t x_stride, void *xpad, void *col, int64_t ld),
           (be, dtype, geom, nb, x, x_stride, xpad, col, ld), (x, xpad, col))
/* Between the wide grid (cog rows of leading dimension ld, image b's Q
 * columns from b Q) and nb images of a tensor t (image b at
 * t + b t_stride, output channel c at + c P): for c < cog, oh < out[1],
 * ow < out[2],
 *     to_tensor:  t_b[c, oh out[2] + ow] = grid[c, b Q + oh wp + ow]
 *     otherwise:  grid[c, b Q + oh wp + ow] = t_b[c, oh out[2] + ow]
 * and nothing else is written (the spare grid columns keep what they
 * hold: zeros, for a spread gradient). */
LADLE_SLOT(conv_wide_grid,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_conv_geom *geom,
            int to_tensor, int64_t nb, void *grid, int64_t ld, void *t, int64_t t_stride),
           (be, dtype, geom, to_tensor, nb, grid, ld, t, t_stride), (grid, t))
/* A bias over channels, for convolutions (inner = positions per
 * channel) and linear layers (inner = 1): y is rows x channels x inner,
 * row-major, and y[r, c, p] += b[c]. */
LADLE_SLOT(bias_add,
           (const ladle_backend *be, ladle_dtype dtype, int64_t rows, int64_t channels,
            int64_t inner, const void *b, void *y),
           (be, dtype, rows, channels, inner, b, y), (b, y))
/* Its gradient, accumulating: db[c] += sum over r, p of dy[r, c, p]. For
 * each (r, c) in order of r, the sum over p is taken in double, rounded
 * to dtype and added to db[c] (for inner = 1 that is db[c] += dy[r, c]
 * row after row). db must not overlap dy. */
LADLE_SLOT(bias_grad,
           (const ladle_backend *be, ladle_dtype dtype, int64_t rows, int64_t channels,
            int64_t inner, const void *dy, void *db),
           (be, dtype, rows, channels, inner, dy, db), (dy, db))

/* --- optimizer updates --- */
/* (CPU: src/backends/cpu/optim.c) */
/* Step t (1, 2, ...) of d's optimizer on n parameters p with gradients g,
 * arithmetic in double, every stored value rounded to dtype:
 *   SGD: g' = g + wd p; with momentum (s0 != NULL) v = g' at t = 1, else
 *     v = mu v + (1 - dampening) g', and g' = g' + mu v (Nesterov) or v;
 *     p -= lr g'.
 *   Adam, AdamW: m = b1 m + (1 - b1) g', v = b2 v + (1 - b2) g'^2 with
 *     g' = g + wd p (Adam) or p -= lr wd p first (AdamW);
 *     p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
 * s0 (momentum or m) and s1 (v) are the state, zero before step 1. */
LADLE_SLOT(optim_step,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_optimizer_desc *d,
            int64_t t, int64_t n, void *p, const void *g, void *s0, void *s1),
           (be, dtype, d, t, n, p, g, s0, s1), (p, g, s0, s1))

/* --- revision 2 --- */
/* Whether the queue has passed the event, into *done (host memory),
 * without waiting (optional: absent means it has). */
LADLE_SLOT(event_query, (const ladle_backend *be, void *event, int *done),
           (be, event, done), ())
/* Whether [ptr, ptr + bytes) is memory this device's kernels can use
 * (optional: absent means any pointer is): LADLE_ERR_DEVICE, saying
 * whose memory it is, for caller memory wrapped as a tensor of a
 * device it is not on. */
LADLE_SLOT(check_pointer, (const ladle_backend *be, const void *ptr, size_t bytes),
           (be, ptr, bytes), ())
/* A failure the device has already reported (a kernel that faulted,
 * which on a GPU fails all later work), as a status, without waiting:
 * checked calls agree on it before they communicate, so a dead device
 * fails every rank instead of leaving the others waiting (optional:
 * absent means none). */
LADLE_SLOT(health, (const ladle_backend *be), (be), ())

/* --- revision 3 --- */
/* (CPU: src/backends/cpu/interp.c) */
/* Interpolation of `planes` planes (ladle_interp_geom): y[o] = the sum
 * over o's taps (ladle__interp_taps: nearest one, linear 2 per
 * dimension) of the product of their weights times x at the tap, in
 * double, for the output box; the backward overwrites dx with the
 * adjoint, dx[i] = sum over the outputs o reading tap i of its weight
 * dy[o]. Every tap of the output box lies in the input box. x, dx hold
 * planes x the input box's elements, y, dy planes x the output box's,
 * contiguous, not overlapping. Optional: absent, the layers refuse the
 * device. */
LADLE_SLOT(interp_forward,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_interp_geom *g,
            int64_t planes, const void *x, void *y),
           (be, dtype, g, planes, x, y), (x, y))
LADLE_SLOT(interp_backward,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_interp_geom *g,
            int64_t planes, const void *dy, void *dx),
           (be, dtype, g, planes, dy, dx), (dy, dx))

/* --- revision 4 --- */
/* (CPU: src/backends/cpu/loss.c) */
/* A classification loss's label scan (synchronous, answers in host
 * memory): *sum = the sum over the n labels that are not ignored (see
 * ladle_loss_plan) of l->weight[label] (1 each without weights), and
 * *first = the index of the first label that is neither ignored nor in
 * 0..l->classes-1 (then *sum is not defined), -1 when there is none.
 * Optional: absent, the losses refuse class weights and ignore_index on
 * the device. */
LADLE_SLOT(loss_weight_sum,
           (const ladle_backend *be, const ladle_loss_plan *l, int64_t n,
            const int64_t *labels, double *sum, int64_t *first),
           (be, l, n, labels, sum, first), (labels))
/* (CPU: src/backends/cpu/adaptive.c) */
/* Adaptive average pooling of `planes` planes (ladle_adaptive_geom): y[o]
 * = the sum of x over o's window (in double) / the window's size, for
 * the output box; the backward overwrites dx with the adjoint, dx[i] =
 * the sum over the outputs o of the box whose window holds i of dy[o] /
 * o's size. Every window of the output box lies in the input box. x, dx
 * hold planes x the input box's elements, y, dy planes x the output
 * box's, contiguous, not overlapping. Optional: absent, the layers
 * refuse the device. */
LADLE_SLOT(adaptive_pool_forward,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_adaptive_geom *g,
            int64_t planes, const void *x, void *y),
           (be, dtype, g, planes, x, y), (x, y))
LADLE_SLOT(adaptive_pool_backward,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_adaptive_geom *g,
            int64_t planes, const void *dy, void *dx),
           (be, dtype, g, planes, dy, dx), (dy, dx))
/* (CPU: src/backends/cpu/norm.c) */
/* Layer norm (rms 0) and RMS norm (rms 1) of `rows` contiguous rows of
 * len values each (x, y, dy, dx rows x len; w, b, dw, db len; mean,
 * invstd, rows doubles of device memory). Per row, with L = len:
 *   layer norm  mean = sum x / L, var = sum (x - mean)^2 / L,
 *               invstd = 1 / sqrt(var + eps), xhat = (x - mean) invstd
 *   RMS norm    invstd = 1 / sqrt(sum x^2 / L + eps), xhat = x invstd
 * Forward: y = xhat w + b (w, b may be NULL: the factor or the term
 * drops); writes invstd, and mean for layer norm (RMS norm leaves mean
 * alone; it may be NULL). Sums and elementwise steps in double (the
 * variance from deviations about a shift near the mean: on the CPU the
 * mean itself for f64, the first 32 values' mean for f32), each result
 * rounded to dtype once; another backend must be at least as accurate. */
LADLE_SLOT(norm_forward,
           (const ladle_backend *be, ladle_dtype dtype, int rms, int64_t rows, int64_t len,
            double eps, const void *x, const void *w, const void *b, void *y, double *mean,
            double *invstd),
           (be, dtype, rms, rows, len, eps, x, w, b, y, mean, invstd),
           (x, w, b, y, mean, invstd))
/* dx = invstd (g - sum g / L - xhat sum(g xhat) / L) with g = dy w (w
 * NULL: g = dy); RMS norm drops the sum g / L term. mean and invstd are
 * the forward's over the same x. */
LADLE_SLOT(norm_backward,
           (const ladle_backend *be, ladle_dtype dtype, int rms, int64_t rows, int64_t len,
            const void *x, const void *w, const void *dy, const double *mean,
            const double *invstd, void *dx),
           (be, dtype, rms, rows, len, x, w, dy, mean, invstd, dx),
           (x, w, dy, mean, invstd, dx))
/* Accumulating: dw[j] += sum over rows of dy xhat, db[j] += sum over
 * rows of dy (either may be NULL), each summed in double in ws (2 len
 * doubles of device memory, scratch) and added once, rounded. */
LADLE_SLOT(norm_weight_grad,
           (const ladle_backend *be, ladle_dtype dtype, int rms, int64_t rows, int64_t len,
            const void *x, const void *dy, const double *mean, const double *invstd,
            void *dw, void *db, double *ws),
           (be, dtype, rms, rows, len, x, dy, mean, invstd, dw, db, ws),
           (x, dy, mean, invstd, dw, db, ws))
/* The token embedding (CPU: norm.c too): y[i, :] = w[ids[i], :] and its
 * adjoint dw[ids[i], :] += dy[i, :] for i = 0 .. n-1 in order (a
 * repeated id adds every row), rows of dim values; ids are n i64 values
 * already checked to lie in w's rows. */
LADLE_SLOT(embed_forward,
           (const ladle_backend *be, ladle_dtype dtype, int64_t n, int64_t dim,
            const int64_t *ids, const void *w, void *y),
           (be, dtype, n, dim, ids, w, y), (ids, w, y))
LADLE_SLOT(embed_backward,
           (const ladle_backend *be, ladle_dtype dtype, int64_t n, int64_t dim,
            const int64_t *ids, const void *dy, void *dw),
           (be, dtype, n, dim, ids, dy, dw), (ids, dy, dw))
/* The five revision 4 slots are optional: absent, the layers refuse the
 * device (LADLE_ERR_DEVICE at creation). */

/* --- revision 5 --- */
/* (CPU: src/backends/cpu/attention.c) */
/* Attention (ladle_attn_geom) for g->batch samples: writes o and lse.
 * The softmax is taken online, tile by tile (a running row maximum and
 * sum rescale the partial output), so no T x T matrix exists; dot
 * products, statistics and the output are accumulated in double and
 * rounded to dtype once (with g->f32_tiles, an f32 call's tile products
 * and the output's accumulator in f32, the statistics and the final
 * scaling in double). ws: ladle__attn_ws_count(g) doubles of scratch.
 * qkv, o, lse and ws must not overlap. */
LADLE_SLOT(attn_forward,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_attn_geom *g,
            const void *qkv, void *o, double *lse, double *ws),
           (be, dtype, g, qkv, o, lse, ws), (qkv, o, lse, ws))
/* Its backward, overwriting dqkv (laid out as qkv) with the gradients
 * of the queries, keys and values for the output gradient dout (laid
 * out as o), given the forward's o and lse over the same qkv. P is
 * recomputed tile by tile from qkv and lse: with D[t] = sum dout[t] o[t],
 *   dV = P^T dO,  dS = P (dO V^T - D),  dQ = scale dS K,  dK = scale dS^T Q,
 * in double (with g->f32_tiles, an f32 call's products and gradient
 * sums in f32, D and lse in double). ws as for the forward; nothing
 * overlaps. */
LADLE_SLOT(attn_backward,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_attn_geom *g,
            const void *qkv, const void *o, const double *lse, const void *dout, void *dqkv,
            double *ws),
           (be, dtype, g, qkv, o, lse, dout, dqkv, ws), (qkv, o, lse, dout, dqkv, ws))
/* The two revision 5 slots are optional: absent, the attention layer
 * refuses the device (LADLE_ERR_DEVICE at creation). */

/* --- revision 6 (its calls' variant: revision 7) --- */
/* (CPU: src/backends/cpu/conv_direct.c) */
/* The direct convolution of one group of nb images, with no column
 * matrix. conv_direct_plan says which passes the backend runs this way
 * for the geometry and dtype (*forward, *weight, and since revision 8
 * *backward, for conv_direct_backward below: 0, or the variant of
 * its kernels it runs, > 0, which the layer hands back to each call;
 * the layer takes its column or wide path where 0) and their scratch:
 * *scratch elements of dtype (zeroed when allocated, given to no other
 * slot; the passes keep what must stay zero zero) and *sums doubles for
 * the weight gradient. It answers 0 and 0 where the slots would not be
 * the faster way, and for any geometry but in[0] == 1, k[0] == 1,
 * s[1] == s[2] == 1.
 * Image b's group is x + b x_stride (cg planes of in[1] x in[2]); w is
 * cog rows of K = cg k[1] k[2] weights, row co's tap (c, i, j) at
 * co K + (c k[1] + i) k[2] + j; y and dy hold image b's cog output
 * planes from b y_stride (b dy_stride), P = out[1] out[2] elements
 * apart. With x_b read as 0 outside its planes (padding p[1], p[2]):
 *   forward: y_b[co, oh, ow] = b[co] + the sum over (c, i, j) of
 *     w[co, (c, i, j)] x_b[c, oh - p[1] + i d[1], ow - p[2] + j d[2]]
 *     (b may be NULL: no term);
 *   weight: dw[co, (c, i, j)] += the sum over b, oh, ow of
 *     dy_b[co, oh, ow] x_b[c, ...], each image's part summed in dtype
 *     (the CPU: per vector lane), the images' parts in double, rounded
 *     to dtype once; ws holds the planned sums.
 * Nothing overlaps. Optional (all three): absent, the convolution takes
 * its column and wide paths. */
LADLE_SLOT(conv_direct_plan,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_conv_geom *geom,
            int *forward, int *weight, int *backward, int64_t *scratch, int64_t *sums),
           (be, dtype, geom, forward, weight, backward, scratch, sums), ())
LADLE_SLOT(conv_direct_forward,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_conv_geom *geom,
            int64_t nb, const void *x, int64_t x_stride, const void *w, const void *b,
            void *scratch, void *y, int64_t y_stride, int variant),
           (be, dtype, geom, nb, x, x_stride, w, b, scratch, y, y_stride, variant),
           (x, w, b, scratch, y))
LADLE_SLOT(conv_direct_weight,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_conv_geom *geom,
            int64_t nb, const void *x, int64_t x_stride, const void *dy, int64_t dy_stride,
            void *scratch, double *ws, void *dw, int variant),
           (be, dtype, geom, nb, x, x_stride, dy, dy_stride, scratch, ws, dw, variant),
           (x, dy, scratch, ws, dw))
/* --- revision 8 --- */
/* The input gradient of the same (CPU: src/backends/cpu/conv_channels.inc),
 * where conv_direct_plan's *backward is a variant (> 0): with dy_b read
 * as 0 outside its planes,
 *   dx_b[c, ih, iw] = the sum over (co, i, j) of w[co, (c, i, j)]
 *     dy_b[co, ih + p[1] - i d[1], iw + p[2] - j d[2]]
 * for every element of image b's cg planes at dx + b dx_stride (written,
 * not added to). Optional: absent (and where the plan answers 0), the
 * layer takes im2col's GEMM and col2im. */
LADLE_SLOT(conv_direct_backward,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_conv_geom *geom,
            int64_t nb, const void *dy, int64_t dy_stride, const void *w, void *scratch,
            void *dx, int64_t dx_stride, int variant),
           (be, dtype, geom, nb, dy, dy_stride, w, scratch, dx, dx_stride, variant),
           (dy, w, scratch, dx))

/* --- revision 9 --- */
/* (CPU: src/backends/cpu/loss.c) */
/* Row statistics of a cross entropy whose classes are spread over ranks
 * (the vocabulary-parallel loss), over `rows` contiguous rows of len
 * values of x; lse, shift and scale are rows doubles of device memory.
 * lse_rows: lse[r] = log sum_c e^{x_rc}, in double and shifted by the
 * row's maximum; NaN where the row holds a NaN or +inf, -inf where all
 * its values are -inf (or len is 0). exp_rows: y_rc = scale[r]
 * e^{x_rc - shift[r]}, rounded to dtype once; for x - shift <= 0 (larger
 * arguments are clamped to 88 in f32 and 709 in f64) within a few ulps
 * of f32 or one of f64, and 0 where the exponential is below e^-87 (f32)
 * or e^-708.39 (f64); y may be x. Optional: absent, the
 * vocabulary-parallel loss refuses the device. */
LADLE_SLOT(lse_rows,
           (const ladle_backend *be, ladle_dtype dtype, int64_t rows, int64_t len,
            const void *x, double *lse),
           (be, dtype, rows, len, x, lse), (x, lse))
LADLE_SLOT(exp_rows,
           (const ladle_backend *be, ladle_dtype dtype, int64_t rows, int64_t len,
            const void *x, const double *shift, const double *scale, void *y),
           (be, dtype, rows, len, x, shift, scale, y), (x, shift, scale, y))

/* --- revision 10 --- */
/* (CPU: src/backends/cpu/adaptive.c) */
/* Adaptive max pooling of `planes` planes (ladle_adaptive_geom; the
 * windows, boxes and layouts of adaptive_pool_forward, every window of the
 * output box inside the input box). Forward: y[o] = the largest x over o's
 * window, scanned in row-major order (z, then y, then x, of the input
 * box): of equal values the first wins, and a NaN wins over any number
 * (the first NaN stays, so y is NaN where the window holds one). Unless idx
 * is NULL, idx[o] = the winner's index within its plane of the input box,
 * (z x_n[1] + y) x_n[2] + x, as int64. Backward: dx is overwritten with
 * zeros plus, at each winner idx[o] of its plane, dy[o] for every output o
 * of the box it won (summed in output order, in double where the kernel
 * gathers). x, dx hold planes x the input box's elements; y, dy and idx
 * planes x the output box's; contiguous, not overlapping. idx is what a
 * forward over the same planes and geometry wrote. Optional: absent, the
 * adaptive max pooling layers refuse the device (LADLE_ERR_DEVICE at
 * creation). */
LADLE_SLOT(adaptive_max_forward,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_adaptive_geom *g,
            int64_t planes, const void *x, void *y, int64_t *idx),
           (be, dtype, g, planes, x, y, idx), (x, y, idx))
LADLE_SLOT(adaptive_max_backward,
           (const ladle_backend *be, ladle_dtype dtype, const ladle_adaptive_geom *g,
            int64_t planes, const void *dy, const int64_t *idx, void *dx),
           (be, dtype, g, planes, dy, idx, dx), (dy, idx, dx))

/* --- revision 11 --- */
/* (CPU: src/backends/cpu/convert.c) */
/* y[i] = x[i] converted from dtype xt to dtype yt, for i < n; xt and yt
 * each f32, f64, bf16 or f16 (the same dtype copies). Narrowing rounds to
 * nearest, ties to even; values past the target's largest finite one
 * become inf, a NaN stays a quiet NaN of its sign, subnormals are kept;
 * from f64 to a 2-byte format the rounding is done once (src/core/half.h
 * defines every case, bit for bit, and every backend gives its bits).
 * Contiguous; x and y do not overlap unless they are the same pointer with
 * xt == yt. */
LADLE_SLOT(convert,
           (const ladle_backend *be, ladle_dtype xt, int64_t n, const void *x, ladle_dtype yt,
            void *y),
           (be, xt, n, x, yt, y), (x, y))

/* --- revision 12 --- */
/* (CPU: src/backends/cpu/gemm_half.c; CUDA: blas.cu, cublasGemmEx) */
/* C = alpha op(A) op(B) + beta C as gemm, row-major, with A and B of the
 * 2-byte dtype ab (LADLE_BF16) and C of dtype ct (LADLE_BF16, or LADLE_F32
 * for the f32 gradients of bf16 weights). Products and sums in f32 or
 * better: each product of two bf16 is exact in f32, the k of them are
 * summed in f32 in any order, alpha and beta C applied in f32, and a bf16 C
 * is rounded once, to nearest even (half.h's rounding). beta 0 does not read
 * C. ws is device memory of at least the bytes gemm_half_ws answered for the
 * same arguments (NULL when it answered 0); its contents are scratch. A
 * pair of dtypes the backend lacks: LADLE_ERR_DTYPE. Optional: absent, the
 * layers refuse bf16 on the device (LADLE_ERR_DTYPE at creation). A backend
 * that fills it also takes bf16 in act_forward and act_backward (computed
 * in f32, each result rounded once) and fill_init (each value rounded once),
 * which the bf16 layers call. */
LADLE_SLOT(gemm_half,
           (const ladle_backend *be, ladle_dtype ab, ladle_dtype ct, int trans_a, int trans_b,
            int64_t m, int64_t n, int64_t k, double alpha, const void *a, int64_t lda,
            const void *b, int64_t ldb, double beta, void *c, int64_t ldc, void *ws),
           (be, ab, ct, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ws),
           (a, b, c, ws))
/* The workspace gemm_half needs for those arguments, in bytes (a host
 * answer, the same for every call of the shape): plan time asks it once. */
LADLE_SLOT(gemm_half_ws,
           (const ladle_backend *be, ladle_dtype ab, ladle_dtype ct, int trans_a, int trans_b,
            int64_t m, int64_t n, int64_t k, size_t *bytes),
           (be, ab, ct, trans_a, trans_b, m, n, k, bytes), ())
