/* Collective plans from point-to-point steps; see coll.h. */
#include <string.h>

#include "src/comm/coll.h"

/* Messages above this are cut into chunks of about this size so a chain of
 * ranks (or a receive and an add) work as a pipeline. */
#define CHUNK_BYTES (256 * 1024)
/* At or below this a group uses a latency-optimal tree or exchange. */
#define SMALL_BYTES (64 * 1024)

static int clampi(int64_t v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : (int)v; }

ladle_coll_shape ladle__coll_shape(int g, int64_t n, size_t esize, int reduce)
{
    ladle_coll_shape sh = {1, 1};
    int64_t bytes = n * (int64_t)esize;
    if (g <= 2) {
        /* one message: chunks only help a reduction overlap its adds */
        if (reduce && bytes >= 4 * CHUNK_BYTES)
            sh.nchunks = clampi(bytes / CHUNK_BYTES, 1, 16);
        return sh;
    }
    if (bytes <= SMALL_BYTES) {
        sh.chain = 0;
        return sh;
    }
    sh.nchunks = clampi(bytes / CHUNK_BYTES, 1, LADLE_COLL_MAX_CHUNKS);
    return sh;
}

static int tree_parent(ladle_coll_shape sh, int p)
{
    return sh.chain ? p - 1 : (p & (p - 1));
}

/* Children in increasing subtree size; returns how many. */
static int tree_children(ladle_coll_shape sh, int g, int p, int *ch)
{
    int n = 0;
    if (sh.chain) {
        if (p + 1 < g)
            ch[n++] = p + 1;
        return n;
    }
    int low = p == 0 ? g : (p & -p);
    for (int m = 1; m < low && p + m < g; m <<= 1)
        ch[n++] = p + m;
    return n;
}

static void chunk_range(int64_t n, int nchunks, int c, int64_t *off, int64_t *len)
{
    *off = ladle__balanced_start(n, nchunks, c);
    *len = ladle__balanced_size(n, nchunks, c);
}

void ladle__coll_bcast(ladle_sched *s, const int *members, int g, int pos,
                       ladle_coll_shape sh, ladle_ref src, ladle_ref dst, int64_t n,
                       int tagbase, const int *root_after, const int *recv_after)
{
    int ch[32];
    int nch = tree_children(sh, g, pos, ch);
    int parent = pos > 0 ? members[tree_parent(sh, pos)] : -1;
    for (int c = 0; c < sh.nchunks; c++) {
        int64_t off, len;
        chunk_range(n, sh.nchunks, c, &off, &len);
        if (len == 0)
            continue;
        ladle_ref from = pos == 0 ? src : dst;
        int ready = -1;
        if (pos == 0) {
            ready = root_after ? root_after[c] : -1;
        } else {
            ready = ladle_sched_recv(s, ladle_ref_at(dst, off), len, parent, tagbase + c);
            ladle_sched_dep(s, recv_after ? recv_after[c] : -1, ready);
        }
        /* the largest subtree first: it has the longest way to go */
        for (int k = nch - 1; k >= 0; k--) {
            int id = ladle_sched_send(s, ladle_ref_at(from, off), len, members[ch[k]],
                                      tagbase + c);
            ladle_sched_dep(s, ready, id);
        }
    }
}

/* One chunk (len elements from off) at a node with nch children ch: the
 * children's parts received into their slots (tag tag) and added with the
 * node's own (has_own: src) into acc, in a fixed order. Returns the last
 * add's id (the first receive's where that is all). */
static int combine_chunk(ladle_sched *s, const int *members, const int *ch, int nch,
                         const ladle_ref *slot, ladle_ref acc, int has_own, ladle_ref src,
                         int64_t off, int64_t len, int tag)
{
    int recv[32], last;
    for (int k = 0; k < nch; k++)
        recv[k] = ladle_sched_recv(s, ladle_ref_at(slot[k], off), len, members[ch[k]], tag);
    ladle_ref a = ladle_ref_at(acc, off);
    if (slot[0].buf == acc.buf && slot[0].off == acc.off) {
        last = recv[0];
        if (has_own) {
            int id = ladle_sched_add(s, a, ladle_ref_at(src, off), a, len);
            ladle_sched_dep(s, last, id);
            last = id;
        }
    } else {
        last = ladle_sched_add(s, ladle_ref_at(src, off), ladle_ref_at(slot[0], off), a, len);
        ladle_sched_dep(s, recv[0], last);
    }
    /* fixed order: ((child0 + own) + child1) + child2 ... */
    for (int k = 1; k < nch; k++) {
        int id = ladle_sched_add(s, a, ladle_ref_at(slot[k], off), a, len);
        ladle_sched_dep(s, last, id);
        ladle_sched_dep(s, recv[k], id);
        last = id;
    }
    return last;
}

void ladle__coll_reduce(ladle_sched *s, const int *members, int g, int pos,
                        ladle_coll_shape sh, int has_own, ladle_ref src, ladle_ref dst,
                        int64_t n, int tagbase, int alias_safe, int *root_done, int *sent)
{
    int ch[32];
    int nch = tree_children(sh, g, pos, ch);
    int parent = pos > 0 ? members[tree_parent(sh, pos)] : -1;
    if (pos > 0)
        has_own = 1;
    ladle_ref acc = dst;
    ladle_ref slot[32];
    if (pos > 0 && nch > 0)
        acc = ladle_sched_workspace(s, n);
    for (int k = 0; k < nch; k++) {
        /* the first child lands straight in the accumulator, unless the
         * accumulator may be the root's own input */
        int direct = k == 0 && !(pos == 0 && has_own && alias_safe);
        slot[k] = direct ? acc : ladle_sched_workspace(s, n);
    }
    for (int c = 0; c < sh.nchunks; c++) {
        int64_t off, len;
        int last = -1;
        chunk_range(n, sh.nchunks, c, &off, &len);
        if (len == 0)
            continue;
        if (nch == 0) {
            if (pos == 0)
                last =
                    ladle_sched_copy(s, has_own ? LADLE_BOX_COPY : LADLE_BOX_ZERO,
                                     ladle_ref_at(src, off), ladle_ref_at(dst, off), len);
            else
                last =
                    ladle_sched_send(s, ladle_ref_at(src, off), len, parent, tagbase + c);
        } else {
            last = combine_chunk(s, members, ch, nch, slot, acc, has_own, src, off, len,
                                 tagbase + c);
            if (pos > 0) {
                int id = ladle_sched_send(s, ladle_ref_at(acc, off), len, parent, tagbase + c);
                ladle_sched_dep(s, last, id);
                last = id;
            }
        }
        if (pos == 0 && root_done)
            root_done[c] = last;
        if (pos > 0 && sent)
            sent[c] = last;
    }
}

/* Recursive doubling for a power-of-two group: log2(g) exchanges of the
 * whole vector. a + b == b + a in IEEE arithmetic, so partners compute
 * bitwise the same sums. */
static void allreduce_doubling(ladle_sched *s, const int *members, int g, int pos,
                               ladle_ref src, ladle_ref dst, int64_t n, int tagbase)
{
    int prev_add = -1, round = 0;
    for (int mask = 1; mask < g; mask <<= 1, round++) {
        int peer = members[pos ^ mask];
        ladle_ref cur = round == 0 ? src : dst;
        ladle_ref tmp = ladle_sched_workspace(s, n);
        int r = ladle_sched_recv(s, tmp, n, peer, tagbase + round);
        int snd = ladle_sched_send(s, cur, n, peer, tagbase + round);
        ladle_sched_dep(s, prev_add, snd);
        int add = ladle_sched_add(s, cur, tmp, dst, n);
        ladle_sched_dep(s, r, add);
        ladle_sched_dep(s, snd, add); /* dst may be what is being sent */
        prev_add = add;
    }
}

static void allreduce_tree(ladle_sched *s, const int *members, int g, int pos,
                           ladle_coll_shape sh, ladle_ref src, ladle_ref dst, int64_t n,
                           int tagbase)
{
    int done[LADLE_COLL_MAX_CHUNKS], sent[LADLE_COLL_MAX_CHUNKS];
    ladle__coll_reduce(s, members, g, pos, sh, 1, src, dst, n, tagbase, 1, done, sent);
    ladle__coll_bcast(s, members, g, pos, sh, dst, dst, n, tagbase + sh.nchunks,
                      pos == 0 ? done : NULL, pos == 0 ? NULL : sent);
}

/* Chunk c (of nc) of the segments a ring step moves, n elements cut into g
 * balanced segments: this rank sends segment j mod g and receives the one
 * before it. send_at and recv_at are offsets in the whole buffer, recv_in
 * the received chunk's offset in its segment. */
typedef struct ring_chunk {
    int64_t send_at, send_len, recv_at, recv_in, recv_len;
} ring_chunk;

static ring_chunk ring_chunk_of(int64_t n, int g, int j, int nc, int c)
{
    int sj = (j % g + g) % g, rj = ((j - 1) % g + g) % g;
    ring_chunk h;
    int64_t so;
    chunk_range(ladle__balanced_size(n, g, sj), nc, c, &so, &h.send_len);
    chunk_range(ladle__balanced_size(n, g, rj), nc, c, &h.recv_in, &h.recv_len);
    h.send_at = ladle__balanced_start(n, g, sj) + so;
    h.recv_at = ladle__balanced_start(n, g, rj) + h.recv_in;
    return h;
}

/* Ring reduce-scatter then ring all-gather, each segment cut into chunks:
 * bandwidth-optimal, and each segment is summed once, in ring order, so
 * every member ends with the same bits. */
static void allreduce_ring(ladle_sched *s, const int *members, int g, int pos,
                           ladle_ref src, ladle_ref dst, int64_t n, int tagbase, int nc)
{
    int left = members[(pos - 1 + g) % g], right = members[(pos + 1) % g];
    int add[LADLE_COLL_MAX_CHUNKS], rs_send[32][LADLE_COLL_MAX_CHUNKS];
    int ag_recv[LADLE_COLL_MAX_CHUNKS];
    int64_t segmax = ladle__balanced_size(n, g, 0);
    ladle_ref tmp = ladle_sched_workspace(s, segmax * (g - 1));
    for (int c = 0; c < nc; c++)
        add[c] = ag_recv[c] = -1;
    for (int k = 0; k < g - 1; k++) {
        for (int c = 0; c < nc; c++) {
            ring_chunk h = ring_chunk_of(n, g, pos - k, nc, c);
            rs_send[k][c] = -1;
            if (h.send_len > 0) {
                ladle_ref from = ladle_ref_at(k == 0 ? src : dst, h.send_at);
                rs_send[k][c] =
                    ladle_sched_send(s, from, h.send_len, right, tagbase + k * nc + c);
                ladle_sched_dep(s, k == 0 ? -1 : add[c], rs_send[k][c]);
            }
            add[c] = -1;
            if (h.recv_len > 0) {
                ladle_ref t = ladle_ref_at(tmp, segmax * k + h.recv_in);
                int r = ladle_sched_recv(s, t, h.recv_len, left, tagbase + k * nc + c);
                ladle_ref y = ladle_ref_at(dst, h.recv_at);
                add[c] = ladle_sched_add(s, ladle_ref_at(src, h.recv_at), t, y, h.recv_len);
                ladle_sched_dep(s, r, add[c]);
            }
        }
    }
    int agbase = tagbase + (g - 1) * nc;
    for (int k = 0; k < g - 1; k++) {
        for (int c = 0; c < nc; c++) {
            ring_chunk h = ring_chunk_of(n, g, pos + 1 - k, nc, c);
            int prev = k == 0 ? add[c] : ag_recv[c];
            if (h.send_len > 0) {
                int id = ladle_sched_send(s, ladle_ref_at(dst, h.send_at), h.send_len,
                                          right, agbase + k * nc + c);
                ladle_sched_dep(s, prev, id);
            }
            ag_recv[c] = -1;
            if (h.recv_len > 0) {
                ag_recv[c] = ladle_sched_recv(s, ladle_ref_at(dst, h.recv_at), h.recv_len,
                                              left, agbase + k * nc + c);
                /* the segment lands where this rank sent it from (in place) */
                ladle_sched_dep(s, rs_send[k][c], ag_recv[c]);
            }
        }
    }
}

void ladle__coll_allreduce(ladle_sched *s, const int *members, int g, int pos,
                           ladle_ref src, ladle_ref dst, int64_t n, int tagbase)
{
    size_t es = ladle_sched_esize(s);
    if (n == 0)
        return;
    if (g == 1) {
        ladle_sched_copy(s, LADLE_BOX_COPY, src, dst, n);
        return;
    }
    int64_t bytes = n * (int64_t)es;
    if ((bytes <= SMALL_BYTES || n < g) && (g & (g - 1)) == 0) {
        allreduce_doubling(s, members, g, pos, src, dst, n, tagbase);
        return;
    }
    if (bytes <= SMALL_BYTES || n < g || g > 32) {
        allreduce_tree(s, members, g, pos, ladle__coll_shape(g, n, es, 1), src, dst, n,
                       tagbase);
        return;
    }
    int nc = clampi(bytes / g / CHUNK_BYTES, 1, 16);
    allreduce_ring(s, members, g, pos, src, dst, n, tagbase, nc);
}

ladle_status ladle__pairing(const ladle_partition *small, int transpose_small,
                            const ladle_partition *big, int transpose_big, int *source,
                            int reduce, const char *func)
{
    int sd = small->ndim, bd = big->ndim;
    int se[LADLE_MAX_NDIM], be[LADLE_MAX_NDIM];
    char a[128], b[128];
    const char *what = reduce ? "sum-reduce" : "broadcast";
    const ladle_partition *from = reduce ? big : small, *to = reduce ? small : big;
    ladle__fmt_shape(a, sizeof a, from->ndim, from->shape);
    ladle__fmt_shape(b, sizeof b, to->ndim, to->shape);
    if (sd > bd)
        return ladle__raise(LADLE_ERR_PARTITION, func,
                            "cannot %s a %s partition %s a %s one: the %s partition has "
                            "more dimensions",
                            what, a, reduce ? "onto" : "to", b,
                            reduce ? "destination" : "source");
    for (int d = 0; d < bd; d++) {
        int k = d - (bd - sd);
        se[d] = k < 0 ? 1 : small->shape[transpose_small ? sd - 1 - k : k];
        be[d] = big->shape[transpose_big ? bd - 1 - d : d];
    }
    for (int d = 0; d < bd; d++)
        if (se[d] != be[d] && se[d] != 1)
            return ladle__raise(
                LADLE_ERR_PARTITION, func,
                "cannot %s a %s partition %s a %s one: in dimension %d of the matched "
                "shapes the extents are %d and %d, and they must be equal or the %s's "
                "must be 1 (the smaller shape is left-padded with ones; the transpose "
                "flags reverse a shape first)",
                what, a, reduce ? "onto" : "to", b, d, reduce ? be[d] : se[d],
                reduce ? se[d] : be[d], reduce ? "destination" : "source");
    for (int j = 0; j < big->size; j++) {
        int c[LADLE_MAX_NDIM], e[LADLE_MAX_NDIM], sc[LADLE_MAX_NDIM];
        ladle__unravel(bd, big->shape, j, c);
        for (int d = 0; d < bd; d++)
            e[d] = c[transpose_big ? bd - 1 - d : d];
        for (int k = 0; k < sd; k++) {
            int d = k + (bd - sd);
            int v = se[d] == 1 ? 0 : e[d];
            sc[transpose_small ? sd - 1 - k : k] = v;
        }
        source[j] = ladle__ravel(sd, small->shape, sc);
    }
    return LADLE_OK;
}
