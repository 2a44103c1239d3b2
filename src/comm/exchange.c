/* Box exchanges; see exchange.h. */
#include "src/comm/exchange.h"
#include "src/core/tags.h"

/* Pieces above this are cut into chunks along their outermost dimension, so
 * packing, sending, receiving and unpacking of consecutive chunks overlap. */
#define CHUNK_BYTES (256 * 1024)
#define MAX_CHUNKS LADLE_TAG_CHUNKS

ladle_side ladle__side_own(const ladle_layout *l, ladle_ref buf)
{
    ladle_side s;
    s.boxes = l;
    s.buf = buf;
    ladle_layout_box(l, LADLE_SELF, s.origin, s.shape);
    return s;
}

/* The global box [lo, lo+ext) as a box of the side's local tensor. */
static ladle_box local_box(const ladle_side *side, const int64_t *lo, const int64_t *ext)
{
    int64_t rel[LADLE_MAX_NDIM];
    int nd = side->boxes->ndim;
    for (int d = 0; d < nd; d++)
        rel[d] = lo[d] - side->origin[d];
    return ladle_box_in(nd, side->shape, rel, ext);
}

static int64_t overlap(const ladle_side *from, int i, const ladle_side *to, int j,
                       int64_t *lo, int64_t *ext)
{
    int64_t v = 0;
    ladle_layout_overlap(from->boxes, i, to->boxes, j, lo, ext, &v);
    return v;
}

/* How a piece is cut: along dimension `dim` into `n` slabs. */
typedef struct cut {
    int dim, n;
} cut;

static cut cut_of(const ladle_box *b, size_t esize)
{
    cut c = {0, 1};
    int64_t bytes = ladle_box_volume(b) * (int64_t)esize;
    while (c.dim < b->ndim - 1 && b->ext[c.dim] == 1)
        c.dim++;
    if (b->ndim == 0 || bytes < 2 * CHUNK_BYTES)
        return c;
    int64_t want = bytes / CHUNK_BYTES;
    c.n = (int)(want < b->ext[c.dim] ? want : b->ext[c.dim]);
    if (c.n > MAX_CHUNKS)
        c.n = MAX_CHUNKS;
    return c;
}

/* Slab k of a box cut as c, and the element offset of that slab in the
 * piece's packed (contiguous) form. */
static ladle_box slab(const ladle_box *b, cut c, int k, int64_t *packed_off)
{
    ladle_box s = *b;
    int64_t lo = ladle__balanced_start(b->ext[c.dim], c.n, k);
    s.ext[c.dim] = ladle__balanced_size(b->ext[c.dim], c.n, k);
    s.off = b->off + lo * b->str[c.dim];
    *packed_off = lo * (ladle_box_volume(b) / (b->ext[c.dim] ? b->ext[c.dim] : 1));
    return s;
}

static ladle_box packed_box(const ladle_box *b)
{
    ladle_box p = {.ndim = b->ndim, .off = 0};
    for (int d = 0; d < b->ndim; d++)
        p.ext[d] = b->ext[d];
    ladle__contiguous_strides(b->ndim, b->ext, p.str);
    return p;
}

static void plan_receives(ladle_sched *s, const ladle_side *from, const ladle_side *to,
                          const int *to_comm, ladle_exchange_opts o, int me)
{
    const ladle_partition *pf = from->boxes->p, *pt = to->boxes->p;
    int j = pt->rank, last = -1;
    int64_t lo[LADLE_MAX_NDIM], ext[LADLE_MAX_NDIM];
    for (int i = 0; i < pf->size; i++) {
        int64_t v = overlap(from, i, to, j, lo, ext), poff;
        if (v == 0 || pf->ranks[i] == me)
            continue;
        ladle_box b = local_box(to, lo, ext);
        int peer = to_comm[pf->ranks[i]];
        cut c = cut_of(&b, ladle_sched_esize(s));
        int direct = o.mode == LADLE_BOX_COPY && ladle_box_is_contiguous(&b);
        ladle_ref w = direct ? to->buf : ladle_sched_workspace(s, v);
        for (int k = 0; k < c.n; k++) {
            ladle_box sb = slab(&b, c, k, &poff);
            int64_t n = ladle_box_volume(&sb);
            if (direct) {
                ladle_sched_recv(s, ladle_ref_at(to->buf, sb.off), n, peer,
                                 o.tag + k);
                continue;
            }
            int r =
                ladle_sched_recv(s, ladle_ref_at(w, poff), n, peer, o.tag + k);
            ladle_box packed = packed_box(&sb);
            int u =
                ladle_sched_box(s, o.mode, ladle_ref_at(w, poff), &packed, to->buf, &sb);
            ladle_sched_dep(s, r, u);
            if (o.mode == LADLE_BOX_ADD) { /* sums in a fixed order */
                ladle_sched_dep(s, last, u);
                last = u;
            }
        }
    }
}

static void plan_sends(ladle_sched *s, const ladle_side *from, const ladle_side *to,
                       const int *to_comm, ladle_exchange_opts o, int me)
{
    const ladle_partition *pf = from->boxes->p, *pt = to->boxes->p;
    int i = pf->rank;
    int64_t lo[LADLE_MAX_NDIM], ext[LADLE_MAX_NDIM];
    for (int j = 0; j < pt->size; j++) {
        int64_t v = overlap(from, i, to, j, lo, ext), poff;
        if (v == 0 || pt->ranks[j] == me)
            continue;
        ladle_box b = local_box(from, lo, ext);
        int peer = to_comm[pt->ranks[j]];
        cut c = cut_of(&b, ladle_sched_esize(s));
        int direct = ladle_box_is_contiguous(&b);
        ladle_ref w = direct ? from->buf : ladle_sched_workspace(s, v);
        for (int k = 0; k < c.n; k++) {
            ladle_box sb = slab(&b, c, k, &poff);
            int64_t n = ladle_box_volume(&sb);
            int last;
            if (direct) {
                last = ladle_sched_send(s, ladle_ref_at(from->buf, sb.off), n, peer,
                                        o.tag + k);
            } else {
                ladle_box packed = packed_box(&sb);
                int pk = ladle_sched_box(s, LADLE_BOX_COPY, from->buf, &sb,
                                         ladle_ref_at(w, poff), &packed);
                last = ladle_sched_send(s, ladle_ref_at(w, poff), n, peer,
                                        o.tag + k);
                ladle_sched_dep(s, pk, last);
                if (o.zero_sent)
                    last = pk; /* once packed, the slab may be cleared */
            }
            if (o.zero_sent) {
                int z = ladle_sched_box(s, LADLE_BOX_ZERO, from->buf, &sb, from->buf, &sb);
                ladle_sched_dep(s, last, z);
            }
        }
    }
}

static void plan_self(ladle_sched *s, const ladle_side *from, const ladle_side *to,
                      ladle_exchange_opts o)
{
    const ladle_partition *pf = from->boxes->p, *pt = to->boxes->p;
    int64_t lo[LADLE_MAX_NDIM], ext[LADLE_MAX_NDIM];
    if (!o.self || pf->rank < 0 || pt->rank < 0)
        return;
    if (overlap(from, pf->rank, to, pt->rank, lo, ext) == 0)
        return;
    ladle_box a = local_box(from, lo, ext), b = local_box(to, lo, ext);
    ladle_sched_box(s, o.mode, from->buf, &a, to->buf, &b);
}

void ladle__plan_exchange(ladle_sched *s, const ladle_side *from, const ladle_side *to,
                          const int *to_comm, ladle_exchange_opts o)
{
    int me = from->boxes->p->root->rank;
    if (to->boxes->p->rank >= 0)
        plan_receives(s, from, to, to_comm, o, me);
    if (from->boxes->p->rank >= 0)
        plan_sends(s, from, to, to_comm, o, me);
    plan_self(s, from, to, o);
}
