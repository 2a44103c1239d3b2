/*
 * HaloExchange for windowed kernels (convolution, pooling) on decomposed
 * tensors.
 *
 * Along each dimension, the output of a window (kernel k, stride s, padding
 * p, dilation d) is split in balance over the partition; a rank whose output
 * block is [b, b+c) needs input [s*b - p, s*(b+c-1) + d*(k-1) - p]. Its
 * padded tensor is the hull of that range and its own block; the halo is the
 * rest. Every halo cell inside the global index space is owned by exactly one
 * rank, so the exchange is a box exchange from the bulk boxes to the padded
 * boxes: all neighbours at once (corners and edges included, in one round),
 * and halos wider than a neighbour's block simply reach further ranks. Cells
 * outside the global index space are the kernel's padding and are never
 * touched.
 *
 * Along periodic dimensions the cells beyond an edge wrap around. Shifting
 * every padded box by sigma * S (sigma in {-1, 0, 1} per periodic dimension
 * of extent S) lands its wrapped cells on the bulk cells they copy, so each
 * nonzero shift is one more box exchange, from the bulk boxes to the
 * shifted padded boxes, on tags of its own, all in the same round as the
 * plain one (a rank's own cells included: an unsplit dimension wraps onto
 * itself). The adjoint's shifted exchanges land in workspace copies of the
 * bulk region they reach, zeroed first, which are added into the bulk after
 * the plain exchange's sums and one after the other: the sum of a bulk cell
 * is then made in one fixed order whatever order messages arrive in.
 */
#include <stdio.h>
#include <string.h>

#include "primitives/primitives_impl.h"
#include "src/core/tags.h"
#include "src/op/make.h"

typedef struct halo_impl {
    ladle_layout *bulk, *out;
    ladle_halo_geometry geo;
    unsigned periodic;
    int64_t wrap_left[LADLE_MAX_NDIM], wrap_right[LADLE_MAX_NDIM];
} halo_impl;

static ladle_status halo_forward(ladle_op *op, const ladle_tensor *x, ladle_tensor *y);
static ladle_status halo_adjoint(ladle_op *op, const ladle_tensor *dy, ladle_tensor *dx);
static void halo_destroy(ladle_op *op);

static const ladle_op_vtable halo_vt = {.kind = LADLE_OP_HALO_EXCHANGE,
                                        .name = "halo-exchange",
                                        .forward = halo_forward,
                                        .adjoint = halo_adjoint,
                                        .destroy = halo_destroy};

void ladle_window_init(ladle_window *w, int ndim)
{
    if (w == NULL)
        return;
    memset(w, 0, sizeof *w);
    w->size = sizeof *w;
    w->ndim = ndim;
    for (int d = 0; d < LADLE_MAX_NDIM; d++) {
        w->kernel[d] = 1;
        w->stride[d] = 1;
        w->padding[d] = 0;
        w->dilation[d] = 1;
    }
}

static int identity_window(const ladle_window *w, int d)
{
    return w->kernel[d] == 1 && w->stride[d] == 1 && w->padding[d] == 0 &&
           w->dilation[d] == 1;
}

/* Check the window against x and compute the output length of every
 * dimension into m (the input extent for an identity window). */
static ladle_status check_window(const ladle_layout *x, const ladle_window *w, int64_t *m)
{
    const char *f = "ladle_halo_exchange_create";
    char what[32];
    if (w->ndim != x->ndim)
        return ladle__raise(LADLE_ERR_ARG, f, "the window has %d dimensions, x has %d",
                            w->ndim, x->ndim);
    if (!x->decomposition)
        return ladle__raise(LADLE_ERR_ARG, f, "x is not a decomposition");
    for (int d = 0; d < w->ndim; d++) {
        snprintf(what, sizeof what, "dimension %d", d);
        ladle_status st =
            ladle__window_length(f, what, x->global[d], w->kernel[d], w->stride[d],
                                 w->padding[d], w->dilation[d], w->ceil_mode, &m[d]);
        if (st != LADLE_OK)
            return st;
        if (identity_window(w, d))
            m[d] = x->global[d];
        else if (m[d] < 1)
            return ladle__raise(
                LADLE_ERR_SHAPE, f,
                "dimension %d: the dilated kernel (%lld) is larger than the "
                "padded input (%lld)",
                d, (long long)(w->dilation[d] * (w->kernel[d] - 1) + 1),
                (long long)(x->global[d] + 2 * w->padding[d]));
    }
    return LADLE_OK;
}

/* Per dimension and coordinate: the padded box, the needed box and the
 * output split. Arrays are [d][i]. */
typedef struct halo_tables {
    int64_t m[LADLE_MAX_NDIM];
    int64_t *pad_start[LADLE_MAX_NDIM], *pad_size[LADLE_MAX_NDIM];
    int64_t *need_start[LADLE_MAX_NDIM], *need_size[LADLE_MAX_NDIM];
    int64_t *out_size[LADLE_MAX_NDIM];
} halo_tables;

static void tables_free(halo_tables *t)
{
    for (int d = 0; d < LADLE_MAX_NDIM; d++) {
        ladle__free(t->pad_start[d]);
        ladle__free(t->pad_size[d]);
        ladle__free(t->need_start[d]);
        ladle__free(t->need_size[d]);
        ladle__free(t->out_size[d]);
    }
}

static ladle_status tables_make(const ladle_layout *x, const ladle_window *w,
                                const int64_t *m, halo_tables *t)
{
    memset(t, 0, sizeof *t);
    for (int d = 0; d < x->ndim; d++) {
        int P = x->p->shape[d];
        int64_t *arr[5];
        for (int k = 0; k < 5; k++) {
            arr[k] = ladle__calloc((size_t)P, sizeof(int64_t));
            if (arr[k] == NULL) {
                for (int q = 0; q <= k; q++)
                    ladle__free(arr[q]);
                return ladle__raise(LADLE_ERR_ALLOC, "ladle_halo_exchange_create",
                                    "out of memory");
            }
        }
        t->pad_start[d] = arr[0], t->pad_size[d] = arr[1];
        t->need_start[d] = arr[2], t->need_size[d] = arr[3], t->out_size[d] = arr[4];
        int identity = identity_window(w, d);
        t->m[d] = m[d];
        for (int i = 0; i < P; i++) {
            int64_t a = x->start[d][i], l = x->size[d][i];
            int64_t b = ladle__balanced_start(t->m[d], P, i);
            int64_t c = identity ? l : ladle__balanced_size(t->m[d], P, i);
            int64_t lo = a, hi = a + l, ps = a, pe = a + l;
            if (!identity && c > 0) {
                lo = w->stride[d] * b - w->padding[d];
                hi = w->stride[d] * (b + c - 1) + w->dilation[d] * (w->kernel[d] - 1) -
                     w->padding[d] + 1;
                ps = l > 0 && a < lo ? a : lo;
                pe = l > 0 && a + l > hi ? a + l : hi;
            } else if (!identity) {
                lo = hi = a; /* needs nothing */
            }
            t->pad_start[d][i] = ps;
            t->pad_size[d][i] = pe - ps;
            t->need_start[d][i] = lo;
            t->need_size[d][i] = hi - lo;
            t->out_size[d][i] = c;
        }
    }
    return LADLE_OK;
}

/* The global output and the largest padded shard must be tensors ladle can
 * hold: a huge padding or kernel makes them too large long before any
 * index overflows. Every rank judges every shard alike. */
static ladle_status check_sizes(const ladle_layout *x, const halo_tables *t)
{
    const char *f = "ladle_halo_exchange_create";
    char a[160];
    int64_t most[LADLE_MAX_NDIM];
    if (ladle__volume_within(x->ndim, t->m, LADLE_MAX_ELEMS) < 0)
        return ladle__raise(LADLE_ERR_ARG, f,
                            "the output, %s, is too large (more than 2^57 elements): the "
                            "padding is too large",
                            ladle__fmt_shape64(a, sizeof a, x->ndim, t->m));
    for (int d = 0; d < x->ndim; d++) {
        most[d] = 0;
        for (int i = 0; i < x->p->shape[d]; i++)
            most[d] = t->pad_size[d][i] > most[d] ? t->pad_size[d][i] : most[d];
    }
    if (ladle__volume_within(x->ndim, most, LADLE_MAX_ELEMS) < 0)
        return ladle__raise(LADLE_ERR_ARG, f,
                            "the largest padded shard, %s, is too large (more than 2^57 "
                            "elements): the kernel or the padding is too large",
                            ladle__fmt_shape64(a, sizeof a, x->ndim, most));
    return LADLE_OK;
}

/* 3^n, the shifts of n wrapping dimensions (n <= LADLE_MAX_NDIM). */
static int shifts_of(int n)
{
    int c = 1;
    for (int i = 0; i < n; i++)
        c *= 3;
    return c;
}

/* The periodic dimensions: the bits name dimensions of x, no halo is
 * wider than the extent it wraps, and the tags of the shifted exchanges
 * exist. Lists in wd the dimensions with cells beyond an edge (on any
 * rank). Every rank judges every shard alike. */
static ladle_status check_periodic(const ladle_layout *x, unsigned periodic,
                                   const halo_tables *t, int *wd, int *nw)
{
    const char *f = "ladle_halo_exchange_create";
    *nw = 0;
    if (x->ndim < (int)(8 * sizeof periodic) && (periodic >> x->ndim) != 0)
        return ladle__raise(LADLE_ERR_ARG, f,
                            "periodic is 0x%x: it names a dimension at or above %d, the "
                            "window's number of dimensions", periodic, x->ndim);
    for (int d = 0; d < x->ndim; d++) {
        int64_t S = x->global[d], wide = 0;
        if (!(periodic & (1u << d)))
            continue;
        for (int i = 0; i < x->p->shape[d]; i++) {
            int64_t l = -t->pad_start[d][i], r = t->pad_start[d][i] + t->pad_size[d][i] - S;
            wide = l > wide ? l : wide;
            wide = r > wide ? r : wide;
        }
        if (wide > S)
            return ladle__raise(LADLE_ERR_ARG, f,
                                "dimension %d is periodic with a halo of %lld cells beyond "
                                "its edge, wider than its global extent %lld",
                                d, (long long)wide, (long long)S);
        if (wide > 0)
            wd[(*nw)++] = d;
    }
    int64_t top = LADLE_TAG_HALO + (int64_t)(shifts_of(*nw) + 1) * LADLE_TAG_CHUNKS - 1;
    if (top > ladle__tag_ub(MPI_COMM_WORLD))
        return ladle__raise(LADLE_ERR_UNSUPPORTED, f,
                            "%d periodic dimensions wrap: their %d exchanges need tags up to "
                            "%lld, above the MPI's largest tag %d",
                            *nw, shifts_of(*nw) - 1, (long long)top,
                            ladle__tag_ub(MPI_COMM_WORLD));
    return LADLE_OK;
}

/* This rank's wrapped halo widths per side (zeros outside the partition). */
static void fill_wrap(const ladle_layout *x, const halo_tables *t, unsigned periodic,
                      halo_impl *impl)
{
    impl->periodic = periodic;
    for (int d = 0; d < x->ndim && x->p->rank >= 0; d++) {
        int i = x->p->coords[d];
        int64_t ps = t->pad_start[d][i], r = ps + t->pad_size[d][i] - x->global[d];
        if (!(periodic & (1u << d)))
            continue;
        impl->wrap_left[d] = ps < 0 ? -ps : 0;
        impl->wrap_right[d] = r > 0 ? r : 0;
    }
}

static void fill_geometry(const ladle_layout *x, const halo_tables *t,
                          ladle_halo_geometry *g)
{
    memset(g, 0, sizeof *g);
    g->ndim = x->ndim;
    for (int d = 0; d < x->ndim; d++)
        g->global_output_shape[d] = t->m[d];
    if (x->p->rank < 0)
        return;
    for (int d = 0; d < x->ndim; d++) {
        int i = x->p->coords[d];
        int64_t ps = t->pad_start[d][i];
        g->padded_shape[d] = t->pad_size[d][i];
        g->padded_offset[d] = ps;
        g->bulk_offset[d] = x->start[d][i] - ps;
        g->bulk_shape[d] = x->size[d][i];
        g->halo_left[d] = g->bulk_offset[d];
        g->halo_right[d] = g->padded_shape[d] - g->bulk_offset[d] - g->bulk_shape[d];
        g->needed_offset[d] = t->need_size[d][i] > 0 ? t->need_start[d][i] - ps : 0;
        g->needed_shape[d] = t->need_size[d][i];
        g->output_shape[d] = t->out_size[d][i];
        int64_t o = 0;
        for (int k = 0; k < i; k++)
            o += t->out_size[d][k];
        g->output_offset[d] = o;
    }
}

static void plan(ladle_op *op, const ladle_layout *bulk, const ladle_layout *padded,
                 const int *to_comm)
{
    ladle_ref Y = ladle_ref_make(LADLE_BUF_Y, 0);
    ladle_side b = ladle__side_own(padded, Y), q = b;
    b.boxes = bulk; /* owned cells, addressed inside the padded tensor */
    ladle_exchange_opts fwd = {0, LADLE_BOX_COPY, 0, LADLE_TAG_HALO};
    ladle_exchange_opts adj = {0, LADLE_BOX_ADD, 1, LADLE_TAG_HALO};
    ladle__plan_exchange(op->fwd, &b, &q, to_comm, fwd);
    ladle__plan_exchange(op->adj, &q, &b, to_comm, adj);
}

/* The wrap-around of one shift: the padded boxes moved by off (sigma * S
 * on the wrapping dimensions), the layout of what each rank's shifted
 * halo reads. */
typedef struct wrap {
    const ladle_layout *bulk, *padded, *moved;
    int64_t off[LADLE_MAX_NDIM];
    int tag;
} wrap;

/* A side on this rank's padded tensor whose boxes are the moved ones. */
static ladle_side moved_side(const wrap *s)
{
    ladle_side q = ladle__side_own(s->padded, ladle_ref_make(LADLE_BUF_Y, 0));
    q.boxes = s->moved;
    for (int d = 0; d < s->bulk->ndim; d++)
        q.origin[d] += s->off[d];
    return q;
}

/* The global box [lo, lo + ext) inside the local tensor of side q. */
static ladle_box box_of(const ladle_side *q, const int64_t *lo, const int64_t *ext)
{
    int64_t rel[LADLE_MAX_NDIM];
    for (int d = 0; d < q->boxes->ndim; d++)
        rel[d] = lo[d] - q->origin[d];
    return ladle_box_in(q->boxes->ndim, q->shape, rel, ext);
}

static void dep_range(ladle_sched *s, int first, int end, int after)
{
    for (int id = first; id < end; id++)
        ladle_sched_dep(s, id, after);
}

/* Step `sum` adds into the bulk: after the last such sum *tail, or after
 * every step of the plain exchange [0, plain) when it is the first; it is
 * the last one now. */
static void chain_sum(ladle_sched *s, int plain, int *tail, int sum)
{
    if (*tail < 0)
        dep_range(s, 0, plain, sum);
    else
        ladle_sched_dep(s, *tail, sum);
    *tail = sum;
}

/* The hull of the bulk cells other ranks' shifted halos add into here:
 * where the adjoint's pieces of this shift land. */
static int64_t landing_hull(const wrap *s, int64_t *lo, int64_t *ext)
{
    const ladle_partition *p = s->bulk->p;
    int64_t hi[LADLE_MAX_NDIM], o[LADLE_MAX_NDIM], e[LADLE_MAX_NDIM], v, vol = 1;
    int nd = s->bulk->ndim, any = 0;
    for (int j = 0; j < p->size; j++) {
        ladle_layout_overlap(s->moved, j, s->bulk, p->rank, o, e, &v);
        if (v == 0 || j == p->rank)
            continue;
        for (int d = 0; d < nd; d++) {
            lo[d] = any && lo[d] < o[d] ? lo[d] : o[d];
            hi[d] = any && hi[d] > o[d] + e[d] ? hi[d] : o[d] + e[d];
        }
        any = 1;
    }
    for (int d = 0; d < nd; d++) {
        ext[d] = any ? hi[d] - lo[d] : 0;
        lo[d] = any ? lo[d] : 0;
        vol *= ext[d];
    }
    return vol;
}

/* The adjoint of one shift: the pieces land in a zeroed workspace box (W),
 * W is added into the bulk, then this rank's own wrapped cells are, and
 * zeroed; both after *tail (the last sum into the bulk, or -1: every step
 * of the plain exchange, [0, plain)). */
static void plan_wrap_adjoint(ladle_sched *a, const wrap *s, const int *to_comm, int plain,
                              int *tail)
{
    ladle_side q = moved_side(s), bulk = ladle__side_own(s->padded, q.buf), w = bulk;
    int64_t lo[LADLE_MAX_NDIM], ext[LADLE_MAX_NDIM], v = landing_hull(s, lo, ext);
    int nd = s->bulk->ndim, z = -1, first = ladle_sched_steps(a);
    ladle_exchange_opts o = {0, LADLE_BOX_ADD, 1, s->tag};
    bulk.boxes = w.boxes = s->bulk;
    for (int d = 0; d < nd; d++)
        w.origin[d] = lo[d], w.shape[d] = ext[d];
    w.buf = v > 0 ? ladle_sched_workspace(a, v) : q.buf;
    ladle_box wb = box_of(&w, lo, ext);
    if (v > 0)
        z = ladle_sched_box(a, LADLE_BOX_ZERO, w.buf, &wb, w.buf, &wb);
    int begin = ladle_sched_steps(a);
    ladle__plan_exchange(a, &q, &w, to_comm, o);
    int end = ladle_sched_steps(a);
    if (v > 0) {
        for (int id = begin; id < end; id++)
            ladle_sched_dep(a, z, id);
        ladle_box into = box_of(&bulk, lo, ext);
        int add = ladle_sched_box(a, LADLE_BOX_ADD, w.buf, &wb, bulk.buf, &into);
        dep_range(a, first, end, add);
        chain_sum(a, plain, tail, add);
    }
    int me = s->bulk->p->rank;
    v = 0;
    if (me >= 0)
        ladle_layout_overlap(s->moved, me, s->bulk, me, lo, ext, &v);
    if (v == 0)
        return;
    ladle_box from = box_of(&q, lo, ext), into = box_of(&bulk, lo, ext);
    int self = ladle_sched_box(a, LADLE_BOX_ADD, q.buf, &from, bulk.buf, &into);
    chain_sum(a, plain, tail, self);
    int zero = ladle_sched_box(a, LADLE_BOX_ZERO, q.buf, &from, q.buf, &from);
    ladle_sched_dep(a, self, zero);
}

/* Every shift's exchanges, forward (copies from the bulk boxes, this
 * rank's own included) and adjoint. */
static ladle_status plan_wraps(ladle_op *op, const ladle_layout *bulk,
                               const ladle_layout *padded, const halo_tables *t,
                               const int *wd, int nw, const int *to_comm)
{
    ladle_status st = LADLE_OK;
    int nd = bulk->ndim, count = shifts_of(nw), plain = ladle_sched_steps(op->adj), tail = -1;
    int64_t *moved_start[LADLE_MAX_NDIM] = {0};
    const int64_t *starts[LADLE_MAX_NDIM];
    ladle_layout *moved = NULL;
    for (int j = 0; j < nw; j++) {
        moved_start[wd[j]] = ladle__calloc((size_t)bulk->p->shape[wd[j]], sizeof(int64_t));
        LADLE_CHECK(moved_start[wd[j]] != NULL, LADLE_ERR_ALLOC, "out of memory");
    }
    for (int k = 0; k < count; k++) {
        wrap s = {bulk, padded, NULL, {0}, ladle__tag_halo_wrap(k)};
        if (k == count / 2)
            continue; /* every sigma 0: the plain exchange */
        for (int d = 0; d < nd; d++)
            starts[d] = t->pad_start[d];
        for (int j = 0, rest = k; j < nw; j++, rest /= 3) {
            int d = wd[j];
            s.off[d] = (rest % 3 - 1) * bulk->global[d];
            for (int i = 0; i < bulk->p->shape[d]; i++)
                moved_start[d][i] = t->pad_start[d][i] + s.off[d];
            starts[d] = moved_start[d];
        }
        LADLE_CALL(ladle__layout_create_boxes(bulk->p, nd, bulk->global, starts,
                                              (const int64_t *const *)t->pad_size, &moved));
        s.moved = moved;
        ladle_side b = ladle__side_own(padded, ladle_ref_make(LADLE_BUF_Y, 0)),
                   q = moved_side(&s);
        b.boxes = bulk;
        ladle_exchange_opts fwd = {1, LADLE_BOX_COPY, 0, s.tag};
        ladle__plan_exchange(op->fwd, &b, &q, to_comm, fwd);
        plan_wrap_adjoint(op->adj, &s, to_comm, plain, &tail);
        ladle_layout_destroy(&moved);
    }
fail:
    ladle_layout_destroy(&moved);
    for (int d = 0; d < LADLE_MAX_NDIM; d++)
        ladle__free(moved_start[d]);
    return st;
}

ladle_status ladle_halo_exchange_create(const ladle_layout *x, const ladle_window *w,
                                        ladle_dtype dtype, ladle_device device, unsigned flags,
                                        ladle_op **out)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle_op *op = NULL;
    ladle_layout *padded = NULL;
    halo_impl *impl = NULL;
    halo_tables t;
    int64_t m[LADLE_MAX_NDIM];
    int *to_comm = NULL, wd[LADLE_MAX_NDIM], nw = 0;
    MPI_Comm comm = MPI_COMM_NULL;
    uint64_t h = LADLE_HASH_INIT;

    memset(&t, 0, sizeof t);
    LADLE_NOT_NULL(out);
    LADLE_NOT_NULL(x);
    LADLE_NOT_NULL(w);
    LADLE_CHECK_SIZE(w);
    local = ladle__make_check_kind(dtype, flags, __func__);
    if (local == LADLE_OK)
        local = check_window(x, w, m);
    if (local == LADLE_OK)
        local = tables_make(x, w, m, &t);
    if (local == LADLE_OK)
        local = check_sizes(x, &t);
    if (local == LADLE_OK)
        local = check_periodic(x, w->periodic, &t, wd, &nw);
    if (local == LADLE_OK)
        local = ladle__layout_create_boxes(x->p, x->ndim, x->global,
                                           (const int64_t *const *)t.pad_start,
                                           (const int64_t *const *)t.pad_size, &padded);
    if (local == LADLE_OK) {
        impl = ladle__calloc(1, sizeof *impl);
        if (impl == NULL)
            local = ladle__raise(LADLE_ERR_ALLOC, __func__, "out of memory");
    }
    if (local == LADLE_OK)
        local = ladle_layout_create_split(x->p, x->ndim, t.m,
                                          (const int64_t *const *)t.out_size, &impl->out);
    if (local == LADLE_OK)
        local = ladle__op_new(&halo_vt, dtype, device, flags, padded, padded, &op, __func__);
    if (local == LADLE_OK) {
        op->in_place = 1;
        op->impl = impl;
        impl->bulk = ladle__layout_retain(x);
        fill_geometry(x, &t, &impl->geo);
        fill_wrap(x, &t, w->periodic, impl);
        impl = NULL;
    }
    st = ladle__op_comm(x->p, NULL, &comm, &to_comm);
    if (st == LADLE_OK && local == LADLE_OK && comm != MPI_COMM_NULL) {
        plan(op, x, padded, to_comm);
        local = plan_wraps(op, x, padded, &t, wd, nw, to_comm);
    }
    if (local == LADLE_OK) {
        h = ladle__layout_hash(h, x);
        h = ladle__hash(h, w, sizeof *w);
        h = ladle__prim_hash(h, dtype, device, flags);
    }
    st = ladle__prim_finish(st, &op, &comm, &to_comm, local, h, out, __func__);
fail:
    if (impl != NULL) {
        ladle_layout_destroy(&impl->out);
        ladle__free(impl);
    }
    ladle_layout_destroy(&padded);
    tables_free(&t);
    return st;
}

static void halo_destroy(ladle_op *op)
{
    halo_impl *impl = op->impl;
    if (impl == NULL)
        return;
    ladle_layout_destroy(&impl->bulk);
    ladle_layout_destroy(&impl->out);
    ladle__free(impl);
    op->impl = NULL;
}

static ladle_status copy_if_distinct(ladle_op *op, const ladle_tensor *from, ladle_tensor *to)
{
    if (from->data != to->data)
        return op->be->fn->copy(op->be, op->dtype, from->numel, from->data, to->data);
    return LADLE_OK;
}

static ladle_status halo_forward(ladle_op *op, const ladle_tensor *x, ladle_tensor *y)
{
    ladle_status st = copy_if_distinct(op, x, y);
    return st != LADLE_OK ? st : ladle_sched_run(op->fwd, y->data, y->data, op->ws);
}

static ladle_status halo_adjoint(ladle_op *op, const ladle_tensor *dy, ladle_tensor *dx)
{
    ladle_status st = copy_if_distinct(op, dy, dx);
    return st != LADLE_OK ? st : ladle_sched_run(op->adj, dx->data, dx->data, op->ws);
}

/* Shared checks of the begin/end calls. */
static ladle_status split_call(ladle_op *op, ladle_tensor *t, int adjoint, int begin,
                               const char *func)
{
    ladle_status st = LADLE_OK;
    LADLE_CHECK(op != NULL, LADLE_ERR_NULL, "op is NULL");
    LADLE_CHECK(op->vt == &halo_vt, LADLE_ERR_ARG, "op is a %s, not a halo exchange",
                op->vt->name);
    ladle_sched *s = adjoint ? op->adj : op->fwd;
    if (begin) {
        LADLE_CHECK(!op->busy, LADLE_ERR_STATE, "an exchange of this op is in flight");
        LADLE_CALL(ladle__op_check_io(op, t, 1, t, func));
        LADLE_CALL(ladle_sched_start(s, t->data, t->data, op->ws));
        op->busy = adjoint ? 2 : 1;
    } else {
        LADLE_CHECK(op->busy == (adjoint ? 2 : 1), LADLE_ERR_STATE,
                    "no %s exchange of this op is in flight",
                    adjoint ? "adjoint" : "forward");
        LADLE_CHECK(t != NULL, LADLE_ERR_NULL, "t is NULL");
        op->busy = 0;
        LADLE_CALL(ladle_sched_finish(s));
    }
fail:
    return st;
}

ladle_status ladle_halo_exchange_begin(ladle_op *op, ladle_tensor *t)
{
    return split_call(op, t, 0, 1, __func__);
}

ladle_status ladle_halo_exchange_end(ladle_op *op, ladle_tensor *t)
{
    return split_call(op, t, 0, 0, __func__);
}

ladle_status ladle_halo_exchange_adjoint_begin(ladle_op *op, ladle_tensor *t)
{
    return split_call(op, t, 1, 1, __func__);
}

ladle_status ladle_halo_exchange_adjoint_end(ladle_op *op, ladle_tensor *t)
{
    return split_call(op, t, 1, 0, __func__);
}

ladle_status ladle_halo_exchange_progress(ladle_op *op, int *done)
{
    ladle_status st = LADLE_OK;
    int d = 0;
    LADLE_NOT_NULL(op);
    LADLE_CHECK(op->vt == &halo_vt, LADLE_ERR_ARG, "op is a %s, not a halo exchange",
                op->vt->name);
    LADLE_CHECK(op->busy == 1 || op->busy == 2, LADLE_ERR_STATE,
                "no exchange of this op is in flight");
    LADLE_CALL(ladle_sched_progress(op->busy == 2 ? op->adj : op->fwd, &d));
fail:
    if (done != NULL)
        *done = d;
    return st;
}

ladle_status ladle_halo_exchange_geometry(const ladle_op *op, ladle_halo_geometry *g)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(op);
    LADLE_NOT_NULL(g);
    LADLE_CHECK(op->vt == &halo_vt, LADLE_ERR_ARG, "op is a %s, not a halo exchange",
                op->vt->name);
    *g = ((const halo_impl *)op->impl)->geo;
fail:
    return st;
}

ladle_status ladle_halo_exchange_wrap(const ladle_op *op, unsigned *periodic,
                                      int64_t wrap_left[], int64_t wrap_right[])
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(op);
    LADLE_CHECK(op->vt == &halo_vt, LADLE_ERR_ARG, "op is a %s, not a halo exchange",
                op->vt->name);
    const halo_impl *impl = op->impl;
    if (periodic != NULL)
        *periodic = impl->periodic;
    for (int d = 0; d < LADLE_MAX_NDIM; d++) {
        if (wrap_left != NULL)
            wrap_left[d] = impl->wrap_left[d];
        if (wrap_right != NULL)
            wrap_right[d] = impl->wrap_right[d];
    }
fail:
    return st;
}

const ladle_layout *ladle_halo_exchange_bulk_layout(const ladle_op *op)
{
    return op && op->vt == &halo_vt ? ((const halo_impl *)op->impl)->bulk : NULL;
}

const ladle_layout *ladle_halo_exchange_output_layout(const ladle_op *op)
{
    return op && op->vt == &halo_vt ? ((const halo_impl *)op->impl)->out : NULL;
}
