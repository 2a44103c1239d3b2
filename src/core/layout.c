/* Layouts: boxes of a global index space per rank of a partition. */
#include <string.h>

#include "src/core/internal.h"

int64_t ladle__balanced_size(int64_t n, int parts, int i)
{
    return n / parts + (i < n % parts ? 1 : 0);
}

int64_t ladle__balanced_start(int64_t n, int parts, int i)
{
    int64_t r = n % parts;
    return (n / parts) * i + (i < r ? i : r);
}

static void layout_free(ladle_layout *l)
{
    if (l == NULL)
        return;
    for (int d = 0; d < LADLE_MAX_NDIM; d++) {
        ladle__free(l->start[d]);
        ladle__free(l->size[d]);
    }
    ladle__free(l->off);
    ladle__free(l->ext);
    ladle__partition_release(l->p);
    ladle__free(l);
}

ladle_layout *ladle__layout_retain(const ladle_layout *l)
{
    ladle_layout *m = (ladle_layout *)l;
    m->refs++;
    return m;
}

ladle_status ladle_layout_destroy(ladle_layout **l)
{
    if (l == NULL || *l == NULL)
        return LADLE_OK;
    if (--(*l)->refs == 0)
        layout_free(*l);
    *l = NULL;
    return LADLE_OK;
}

/* Allocate a layout over p with ndim dimensions and, unless block, the
 * per-dimension tables. */
static ladle_status layout_new(const char *func, const ladle_partition *p, int ndim,
                               const int64_t *global, int block, ladle_layout **out)
{
    ladle_status st = LADLE_OK;
    ladle_layout *l = NULL;
    int64_t numel;
    char a[128], b[128];
    LADLE_CHECK(p != NULL, LADLE_ERR_NULL, "partition is NULL");
    LADLE_CHECK(out != NULL, LADLE_ERR_NULL, "output handle is NULL");
    LADLE_CALL(ladle__check_shape(func, ndim, global, &numel));
    LADLE_CHECK(block || ndim == p->ndim, LADLE_ERR_SHAPE,
                "a %d-dimensional shape %s cannot be decomposed over the %d-dimensional "
                "partition %s",
                ndim, ladle__fmt_shape64(a, sizeof a, ndim, global), p->ndim,
                ladle__fmt_shape(b, sizeof b, p->ndim, p->shape));
    l = ladle__calloc(1, sizeof *l);
    LADLE_CHECK(l != NULL, LADLE_ERR_ALLOC, "out of memory");
    l->refs = 1;
    l->p = ladle__partition_retain(p);
    l->ndim = ndim;
    l->block = block;
    for (int d = 0; d < ndim; d++)
        l->global[d] = global[d];
    if (!block) {
        for (int d = 0; d < ndim; d++) {
            l->start[d] = ladle__calloc((size_t)p->shape[d], sizeof(int64_t));
            l->size[d] = ladle__calloc((size_t)p->shape[d], sizeof(int64_t));
            LADLE_CHECK(l->start[d] && l->size[d], LADLE_ERR_ALLOC, "out of memory");
        }
    }
    *out = l;
    return LADLE_OK;
fail:
    layout_free(l);
    return st;
}

/* Decide whether a rectilinear layout tiles [0, global) exactly: along each
 * dimension the boxes must be consecutive from 0 to the extent. */
static int tiles(const ladle_layout *l)
{
    for (int d = 0; d < l->ndim; d++) {
        int64_t at = 0;
        for (int i = 0; i < l->p->shape[d]; i++) {
            if (l->start[d][i] != at || l->size[d][i] < 0)
                return 0;
            at += l->size[d][i];
        }
        if (at != l->global[d])
            return 0;
    }
    return 1;
}

ladle_status ladle_layout_create_balanced(const ladle_partition *p, int ndim,
                                          const int64_t global_shape[], ladle_layout **l)
{
    ladle_status st = LADLE_OK;
    ladle_layout *n = NULL;
    LADLE_CALL(layout_new(__func__, p, ndim, global_shape, 0, &n));
    for (int d = 0; d < ndim; d++)
        for (int i = 0; i < p->shape[d]; i++) {
            n->start[d][i] = ladle__balanced_start(global_shape[d], p->shape[d], i);
            n->size[d][i] = ladle__balanced_size(global_shape[d], p->shape[d], i);
        }
    n->decomposition = 1;
    *l = n;
fail:
    return st;
}

ladle_status ladle_layout_create_split(const ladle_partition *p, int ndim,
                                       const int64_t global_shape[],
                                       const int64_t *const sizes[], ladle_layout **l)
{
    ladle_status st = LADLE_OK;
    ladle_layout *n = NULL;
    LADLE_CALL(layout_new(__func__, p, ndim, global_shape, 0, &n));
    LADLE_CHECK(sizes != NULL || ndim == 0, LADLE_ERR_NULL, "sizes is NULL");
    for (int d = 0; d < ndim; d++) {
        int64_t at = 0;
        LADLE_CHECK(sizes[d] != NULL, LADLE_ERR_NULL, "sizes[%d] is NULL", d);
        for (int i = 0; i < p->shape[d]; i++) {
            LADLE_CHECK(sizes[d][i] >= 0, LADLE_ERR_SHAPE,
                        "split size %lld (dimension %d, block %d) is negative",
                        (long long)sizes[d][i], d, i);
            /* compared before it is added: the running sum never overflows */
            LADLE_CHECK(sizes[d][i] <= global_shape[d] - at, LADLE_ERR_SHAPE,
                        "the split sizes of dimension %d pass the extent %lld at block %d "
                        "(size %lld)",
                        d, (long long)global_shape[d], i, (long long)sizes[d][i]);
            n->start[d][i] = at;
            n->size[d][i] = sizes[d][i];
            at += sizes[d][i];
        }
        LADLE_CHECK(at == global_shape[d], LADLE_ERR_SHAPE,
                    "the split sizes of dimension %d add up to %lld, not to the extent "
                    "%lld",
                    d, (long long)at, (long long)global_shape[d]);
    }
    n->decomposition = 1;
    *l = n;
    return LADLE_OK;
fail:
    layout_free(n);
    return st;
}

ladle_status ladle_layout_create_block(const ladle_partition *p, int ndim,
                                       const int64_t block_shape[], ladle_layout **l)
{
    ladle_status st = LADLE_OK;
    ladle_layout *n = NULL;
    LADLE_CALL(layout_new(__func__, p, ndim, block_shape, 1, &n));
    n->decomposition = p->size == 1;
    *l = n;
fail:
    return st;
}

ladle_status ladle__layout_create_boxes(const ladle_partition *p, int ndim,
                                        const int64_t *global, const int64_t *const *starts,
                                        const int64_t *const *sizes, ladle_layout **l)
{
    ladle_status st = LADLE_OK;
    ladle_layout *n = NULL;
    LADLE_CALL(layout_new(__func__, p, ndim, global, 0, &n));
    for (int d = 0; d < ndim; d++)
        for (int i = 0; i < p->shape[d]; i++) {
            n->start[d][i] = starts[d][i];
            n->size[d][i] = sizes[d][i];
        }
    n->decomposition = tiles(n);
    *l = n;
fail:
    return st;
}

ladle_status ladle__layout_create_explicit(const ladle_partition *p, int ndim,
                                           const int64_t *global, const int64_t *offsets,
                                           const int64_t *shapes, ladle_layout **l)
{
    ladle_status st = LADLE_OK;
    ladle_layout *n = NULL;
    size_t cells = (size_t)p->size * (size_t)(ndim > 0 ? ndim : 1);
    LADLE_CALL(layout_new(__func__, p, ndim, global, 1, &n));
    n->block = 0;
    n->off = ladle__calloc(cells, sizeof(int64_t));
    n->ext = ladle__calloc(cells, sizeof(int64_t));
    LADLE_CHECK(n->off && n->ext, LADLE_ERR_ALLOC, "out of memory");
    for (size_t i = 0; i < (size_t)p->size * (size_t)ndim; i++) {
        LADLE_CHECK(shapes[i] >= 0, LADLE_ERR_SHAPE, "a negative box extent");
        n->off[i] = offsets[i];
        n->ext[i] = shapes[i];
    }
    /* a decomposition when the boxes lie inside, do not overlap and their
     * volumes add up to the whole */
    int64_t total = 0, whole = 1;
    int inside = 1;
    for (int d = 0; d < ndim; d++)
        whole *= global[d];
    for (int r = 0; r < p->size; r++) {
        int64_t v = 1;
        for (int d = 0; d < ndim; d++) {
            int64_t o = n->off[r * ndim + d], e = n->ext[r * ndim + d];
            v *= e;
            if (e > 0 && (o < 0 || o + e > global[d]))
                inside = 0;
        }
        total += v;
    }
    n->decomposition = inside && total == whole;
    for (int a = 0; n->decomposition && a < p->size; a++)
        for (int b = a + 1; n->decomposition && b < p->size; b++) {
            int meet = 1;
            for (int d = 0; d < ndim && meet; d++) {
                int64_t oa = n->off[a * ndim + d], ea = n->ext[a * ndim + d];
                int64_t ob = n->off[b * ndim + d], eb = n->ext[b * ndim + d];
                meet = ea > 0 && eb > 0 && oa < ob + eb && ob < oa + ea;
            }
            if (meet)
                n->decomposition = 0;
        }
    *l = n;
    return LADLE_OK;
fail:
    layout_free(n);
    return st;
}

uint64_t ladle__layout_hash(uint64_t h, const ladle_layout *l)
{
    h = ladle__partition_hash(h, l->p);
    h = ladle__hash(h, &l->ndim, sizeof l->ndim);
    h = ladle__hash(h, &l->block, sizeof l->block);
    h = ladle__hash(h, l->global, sizeof(int64_t) * (size_t)l->ndim);
    if (l->off) {
        h = ladle__hash(h, l->off, sizeof(int64_t) * (size_t)(l->p->size * l->ndim));
        h = ladle__hash(h, l->ext, sizeof(int64_t) * (size_t)(l->p->size * l->ndim));
    } else if (!l->block)
        for (int d = 0; d < l->ndim; d++) {
            h = ladle__hash(h, l->start[d], sizeof(int64_t) * (size_t)l->p->shape[d]);
            h = ladle__hash(h, l->size[d], sizeof(int64_t) * (size_t)l->p->shape[d]);
        }
    return h;
}

const ladle_partition *ladle_layout_partition(const ladle_layout *l)
{
    return l ? l->p : NULL;
}
int ladle_layout_ndim(const ladle_layout *l) { return l ? l->ndim : 0; }
const int64_t *ladle_layout_global_shape(const ladle_layout *l)
{
    return l ? l->global : NULL;
}
int ladle_layout_is_block(const ladle_layout *l) { return l ? l->block : 0; }
int ladle_layout_is_decomposition(const ladle_layout *l)
{
    return l ? l->decomposition : 0;
}

ladle_status ladle_layout_box(const ladle_layout *l, int rank, int64_t offset[],
                              int64_t shape[])
{
    ladle_status st = LADLE_OK;
    int c[LADLE_MAX_NDIM];
    LADLE_NOT_NULL(l);
    LADLE_CHECK(rank == LADLE_SELF || (rank >= 0 && rank < l->p->size), LADLE_ERR_ARG,
                "rank %d is outside 0..%d", rank, l->p->size - 1);
    if (rank == LADLE_SELF)
        rank = l->p->rank;
    if (rank >= 0)
        ladle__unravel(l->p->ndim, l->p->shape, rank, c);
    for (int d = 0; d < l->ndim; d++) {
        int64_t o = 0, s = 0;
        if (rank >= 0 && l->off) {
            o = l->off[(size_t)rank * (size_t)l->ndim + (size_t)d];
            s = l->ext[(size_t)rank * (size_t)l->ndim + (size_t)d];
        } else if (rank >= 0) {
            o = l->block ? 0 : l->start[d][c[d]];
            s = l->block ? l->global[d] : l->size[d][c[d]];
        }
        if (offset)
            offset[d] = o;
        if (shape)
            shape[d] = s;
    }
fail:
    return st;
}

int64_t ladle_layout_local_volume(const ladle_layout *l, int rank)
{
    int64_t shape[LADLE_MAX_NDIM], v = 1;
    if (ladle_layout_box(l, rank, NULL, shape) != LADLE_OK)
        return 0;
    for (int d = 0; d < l->ndim; d++)
        v *= shape[d];
    return v;
}

ladle_status ladle_layout_overlap(const ladle_layout *a, int ra, const ladle_layout *b,
                                  int rb, int64_t offset[], int64_t shape[],
                                  int64_t *volume)
{
    ladle_status st = LADLE_OK;
    int64_t ao[LADLE_MAX_NDIM], as[LADLE_MAX_NDIM], bo[LADLE_MAX_NDIM], bs[LADLE_MAX_NDIM];
    int64_t v = 1;
    LADLE_NOT_NULL(a);
    LADLE_NOT_NULL(b);
    LADLE_CHECK(a->ndim == b->ndim, LADLE_ERR_ARG, "the layouts have %d and %d dimensions",
                a->ndim, b->ndim);
    LADLE_CALL(ladle_layout_box(a, ra, ao, as));
    LADLE_CALL(ladle_layout_box(b, rb, bo, bs));
    for (int d = 0; d < a->ndim; d++) {
        int64_t lo = ao[d] > bo[d] ? ao[d] : bo[d];
        int64_t hi = ao[d] + as[d] < bo[d] + bs[d] ? ao[d] + as[d] : bo[d] + bs[d];
        int64_t e = hi > lo ? hi - lo : 0;
        if (offset)
            offset[d] = lo;
        if (shape)
            shape[d] = e;
        v *= e;
    }
    if (volume)
        *volume = v;
fail:
    return st;
}
