/* Box exchanges; see exchange.h. */
#include "exchange.h"

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

static void plan_receives(ladle_sched *s, const ladle_side *from, const ladle_side *to,
                          const int *to_comm, ladle_exchange_opts o, int me)
{
    const ladle_partition *pf = from->boxes->p, *pt = to->boxes->p;
    int j = pt->rank, last = -1;
    int64_t lo[LADLE_MAX_NDIM], ext[LADLE_MAX_NDIM];
    for (int i = 0; i < pf->size; i++) {
        int64_t v = overlap(from, i, to, j, lo, ext);
        if (v == 0 || pf->ranks[i] == me)
            continue;
        ladle_box b = local_box(to, lo, ext);
        int peer = to_comm[pf->ranks[i]];
        if (o.mode == LADLE_BOX_COPY && ladle_box_is_contiguous(&b)) {
            ladle_sched_recv(s, ladle_ref_at(to->buf, b.off), v, peer, o.tag);
            continue;
        }
        ladle_ref w = ladle_sched_workspace(s, v);
        int r = ladle_sched_recv(s, w, v, peer, o.tag);
        ladle_box packed = {.ndim = b.ndim, .off = 0};
        ladle__contiguous_strides(b.ndim, b.ext, packed.str);
        for (int d = 0; d < b.ndim; d++)
            packed.ext[d] = b.ext[d];
        int u = ladle_sched_box(s, o.mode, w, &packed, to->buf, &b);
        ladle_sched_dep(s, r, u);
        if (o.mode == LADLE_BOX_ADD) {
            ladle_sched_dep(s, last, u);
            last = u;
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
        int64_t v = overlap(from, i, to, j, lo, ext);
        if (v == 0 || pt->ranks[j] == me)
            continue;
        ladle_box b = local_box(from, lo, ext);
        int peer = to_comm[pt->ranks[j]], last;
        if (ladle_box_is_contiguous(&b)) {
            last = ladle_sched_send(s, ladle_ref_at(from->buf, b.off), v, peer, o.tag);
        } else {
            ladle_ref w = ladle_sched_workspace(s, v);
            ladle_box packed = {.ndim = b.ndim, .off = 0};
            ladle__contiguous_strides(b.ndim, b.ext, packed.str);
            for (int d = 0; d < b.ndim; d++)
                packed.ext[d] = b.ext[d];
            int pk = ladle_sched_box(s, LADLE_BOX_COPY, from->buf, &b, w, &packed);
            last = ladle_sched_send(s, w, v, peer, o.tag);
            ladle_sched_dep(s, pk, last);
            if (o.zero_sent)
                last = pk; /* once packed, the piece may be cleared */
        }
        if (o.zero_sent) {
            int z = ladle_sched_box(s, LADLE_BOX_ZERO, from->buf, &b, from->buf, &b);
            ladle_sched_dep(s, last, z);
        }
    }
}

static void plan_self(ladle_sched *s, const ladle_side *from, const ladle_side *to,
                      ladle_exchange_opts o, int me)
{
    const ladle_partition *pf = from->boxes->p, *pt = to->boxes->p;
    int64_t lo[LADLE_MAX_NDIM], ext[LADLE_MAX_NDIM];
    if (!o.self || pf->rank < 0 || pt->rank < 0)
        return;
    if (overlap(from, pf->rank, to, pt->rank, lo, ext) == 0)
        return;
    (void)me;
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
    plan_self(s, from, to, o, me);
}
