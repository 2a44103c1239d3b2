/*
 * Partitions: Cartesian grids over ranks of a parent communicator.
 *
 * ladle_partition_create duplicates the parent once (the "root"); every
 * partition derived from it (subsets, sub-grids, unions) shares that root,
 * so operators can build a private communicator over any union of their
 * partitions with MPI_Comm_create_group, collective only over those ranks.
 */
#include <stdlib.h>
#include <string.h>

#include "src/core/internal.h"
#include "src/core/tags.h"

void ladle__unravel(int ndim, const int *shape, int r, int *coords)
{
    for (int d = ndim - 1; d >= 0; d--) {
        coords[d] = r % shape[d];
        r /= shape[d];
    }
}

int ladle__ravel(int ndim, const int *shape, const int *coords)
{
    int r = 0;
    for (int d = 0; d < ndim; d++)
        r = r * shape[d] + coords[d];
    return r;
}

static void root_release(ladle_root *root)
{
    if (root == NULL || --root->refs > 0)
        return;
    if (ladle__mpi_usable()) {
        if (root->comm != MPI_COMM_NULL)
            MPI_Comm_free(&root->comm);
        if (root->group != MPI_GROUP_NULL)
            MPI_Group_free(&root->group);
    }
    ladle__free(root);
}

ladle_partition *ladle__partition_retain(const ladle_partition *p)
{
    ladle_partition *q = (ladle_partition *)p;
    q->refs++;
    return q;
}

void ladle__partition_release(ladle_partition *p)
{
    if (p == NULL || --p->refs > 0)
        return;
    if (p->comm != MPI_COMM_NULL && ladle__mpi_usable())
        MPI_Comm_free(&p->comm);
    root_release(p->root);
    ladle__free(p->ranks);
    ladle__free(p);
}

int ladle__partition_rank_of_root(const ladle_partition *p, int rr)
{
    for (int r = 0; r < p->size; r++)
        if (p->ranks[r] == rr)
            return r;
    return -1;
}

int ladle__partitions_compatible(const ladle_partition *a, const ladle_partition *b)
{
    int result = MPI_UNEQUAL;
    if (a->root == b->root)
        return 1;
    if (MPI_Group_compare(a->root->group, b->root->group, &result) != MPI_SUCCESS)
        return 0;
    return result == MPI_IDENT;
}

uint64_t ladle__partition_hash(uint64_t h, const ladle_partition *p)
{
    h = ladle__hash(h, &p->ndim, sizeof p->ndim);
    h = ladle__hash(h, p->shape, sizeof(int) * (size_t)p->ndim);
    return ladle__hash(h, p->ranks, sizeof(int) * (size_t)p->size);
}

/* Check ndim and shape; the product goes to *size. */
static ladle_status check_grid(const char *func, int ndim, const int *shape, int *size)
{
    char buf[128];
    if (ndim < 0 || ndim > LADLE_MAX_NDIM)
        return ladle__raise(LADLE_ERR_ARG, func, "ndim %d is outside 0..%d", ndim,
                            LADLE_MAX_NDIM);
    if (ndim > 0 && shape == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "shape is NULL");
    long long n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 1)
            return ladle__raise(LADLE_ERR_ARG, func,
                                "partition shape %s has an extent below 1",
                                ladle__fmt_shape(buf, sizeof buf, ndim, shape));
        /* n <= 2^30 and shape[d] < 2^31 before the product: it fits */
        n *= shape[d];
        if (n > (1 << 30))
            return ladle__raise(LADLE_ERR_ARG, func,
                                "partition shape %s is too large (more than 2^30 ranks)",
                                ladle__fmt_shape(buf, sizeof buf, ndim, shape));
    }
    *size = (int)n;
    return LADLE_OK;
}

/* Check that ranks (or 0..n-1 when NULL) are n distinct values below limit,
 * and write them to out. */
static ladle_status check_ranks(const char *func, int n, const int *ranks, int limit,
                                const char *what, int *out)
{
    ladle_status st = LADLE_OK;
    char *seen = NULL;
    if (n > limit)
        return ladle__raise(LADLE_ERR_PARTITION, func,
                            "the partition needs %d ranks but %s has only %d", n, what,
                            limit);
    seen = ladle__calloc((size_t)limit, 1);
    LADLE_CHECK(seen != NULL, LADLE_ERR_ALLOC, "out of memory");
    for (int r = 0; r < n; r++) {
        int v = ranks ? ranks[r] : r;
        LADLE_CHECK(v >= 0 && v < limit, LADLE_ERR_PARTITION,
                    "rank %d (entry %d) is outside %s's 0..%d", v, r, what, limit - 1);
        LADLE_CHECK(!seen[v], LADLE_ERR_PARTITION, "rank %d is listed twice", v);
        seen[v] = 1;
        out[r] = v;
    }
fail:
    ladle__free(seen);
    return st;
}

/* Agree over comm: the worst status, and whether every rank passed the same
 * hash. Returns the local status if it failed, LADLE_ERR_REMOTE if another
 * rank failed, LADLE_ERR_ARG on disagreement. */
ladle_status ladle__agree(MPI_Comm comm, ladle_status local, uint64_t hash,
                          const char *func)
{
    long long in[3], out[3];
    in[0] = (long long)local;
    in[1] = (long long)(hash >> 1);
    in[2] = -(long long)(hash >> 1);
    int rc = ladle__allreduce(in, out, 3, MPI_LONG_LONG, MPI_MAX, comm);
    if (rc != MPI_SUCCESS)
        return ladle__raise_mpi(rc, func, "MPI_Allreduce");
    if (local != LADLE_OK)
        return local;
    if (out[0] != LADLE_OK)
        return ladle__raise(LADLE_ERR_REMOTE, func,
                            "the call failed on another rank (%s); see that rank's message",
                            ladle_status_name((ladle_status)out[0]));
    if (out[1] != -out[2])
        return ladle__raise(LADLE_ERR_ARG, func,
                            "ranks passed different arguments to a collective call");
    return LADLE_OK;
}

static ladle_partition *partition_alloc(int ndim, const int *shape, int size)
{
    ladle_partition *p = ladle__calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->ranks = ladle__calloc((size_t)size, sizeof(int));
    if (p->ranks == NULL) {
        ladle__free(p);
        return NULL;
    }
    p->refs = 1;
    p->ndim = ndim;
    p->size = size;
    for (int d = 0; d < ndim; d++)
        p->shape[d] = shape[d];
    p->rank = -1;
    p->comm = MPI_COMM_NULL;
    return p;
}

/* Find this rank among p's members and set rank and coords. */
static void locate_self(ladle_partition *p)
{
    p->rank = ladle__partition_rank_of_root(p, p->root->rank);
    if (p->rank >= 0)
        ladle__unravel(p->ndim, p->shape, p->rank, p->coords);
}

static ladle_status member_comm(ladle_partition *p);

static const char *thread_level_name(int level)
{
    return level == MPI_THREAD_SINGLE       ? "MPI_THREAD_SINGLE"
           : level == MPI_THREAD_FUNNELED   ? "MPI_THREAD_FUNNELED"
           : level == MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED"
           : level == MPI_THREAD_MULTIPLE   ? "MPI_THREAD_MULTIPLE"
                                            : "an unknown level";
}

/* What ladle needs of MPI (ladle.h): initialised, not finalised, and below
 * MPI_THREAD_SERIALIZED only the main thread may call. Local: every check
 * is answered without a message, so a failing rank leaves none waiting in
 * the duplication below (a rank that is not the main thread could not take
 * part in it anyway). */
static ladle_status mpi_ready(const char *func)
{
    int level = MPI_THREAD_SINGLE, main_thread = 0;
    ladle_status st = ladle__mpi_ready(func, "create partitions between MPI_Init and "
                                             "MPI_Finalize");
    if (st != LADLE_OK)
        return st;
    if (MPI_Query_thread(&level) != MPI_SUCCESS ||
        MPI_Is_thread_main(&main_thread) != MPI_SUCCESS)
        return ladle__raise(LADLE_ERR_MPI, func, "MPI_Query_thread failed");
    if (level < MPI_THREAD_SERIALIZED && !main_thread)
        return ladle__raise(LADLE_ERR_UNSUPPORTED, func,
                            "called from a thread other than MPI's main thread at %s; call "
                            "ladle from the thread that initialised MPI, or initialise MPI "
                            "with MPI_Init_thread at MPI_THREAD_SERIALIZED or above",
                            thread_level_name(level));
    return LADLE_OK;
}

/* A partition over ranks of a C communicator, the caller's MPI checked. */
static ladle_status create_over(MPI_Comm parent, int ndim, const int shape[],
                                const int ranks[], ladle_partition **out)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle_partition *p = NULL;
    ladle_root *root = NULL;
    int psize = 0;
    uint64_t h = LADLE_HASH_INIT;

    LADLE_NOT_NULL(out);
    LADLE_CHECK(parent != MPI_COMM_NULL, LADLE_ERR_ARG, "parent is MPI_COMM_NULL");
    LADLE_CALL(mpi_ready(__func__));
    root = ladle__calloc(1, sizeof *root);
    LADLE_CHECK(root != NULL, LADLE_ERR_ALLOC, "out of memory");
    root->refs = 1;
    root->comm = MPI_COMM_NULL;
    root->group = MPI_GROUP_NULL;
    {
        /* nonblocking, so the wait can yield the core to other ranks */
        MPI_Request req;
        LADLE_MPI(MPI_Comm_idup(parent, &root->comm, &req));
        LADLE_MPI(ladle__wait(&req));
    }
    LADLE_MPI(MPI_Comm_set_errhandler(root->comm, MPI_ERRORS_RETURN));
    LADLE_MPI(MPI_Comm_group(root->comm, &root->group));
    LADLE_MPI(MPI_Comm_size(root->comm, &root->size));
    LADLE_MPI(MPI_Comm_rank(root->comm, &root->rank));

    /* Local checks; every rank reaches the agreement below either way. */
    local = check_grid(__func__, ndim, shape, &psize);
    if (local == LADLE_OK && psize > root->size) /* before the rank list is allocated */
        local = ladle__raise(LADLE_ERR_PARTITION, __func__,
                             "the partition needs %d ranks but the parent has only %d",
                             psize, root->size);
    if (local == LADLE_OK) {
        p = partition_alloc(ndim, shape, psize);
        local = p ? check_ranks(__func__, psize, ranks, root->size, "the parent", p->ranks)
                  : ladle__raise(LADLE_ERR_ALLOC, __func__, "out of memory");
    }
    if (local == LADLE_OK)
        h = ladle__partition_hash(h, p);
    LADLE_CALL(ladle__agree(root->comm, local, h, __func__));

    p->root = root;
    root = NULL;
    locate_self(p);
    LADLE_CALL(member_comm(p));
    *out = p;
    return LADLE_OK;
fail:
    if (p != NULL && p->root == NULL) {
        p->root = root;
        root = NULL;
    }
    ladle__partition_release(p);
    root_release(root);
    return st;
}

ladle_status ladle_partition_create_mpi(const char *caller_mpi, ladle_comm parent, int ndim,
                                        const int shape[], const int ranks[],
                                        ladle_partition **p)
{
    /* the caller's mpi.h before its communicator: a handle of another MPI
     * must not reach this library's MPI */
    MPI_Comm comm = MPI_COMM_NULL;
    ladle_status st = ladle__mpi_abi_check("ladle_partition_create", caller_mpi);
    if (st == LADLE_OK)
        st = ladle__comm_f2c("ladle_partition_create", parent.fortran, &comm);
    if (st != LADLE_OK)
        return st;
    return create_over(comm, ndim, shape, ranks, p);
}

/* the function itself, not the macro of ladle/partition.h: for bindings,
 * which cannot name their mpi.h */
ladle_status(ladle_partition_create)(ladle_comm parent, int ndim, const int shape[],
                                     const int ranks[], ladle_partition **p)
{
    return ladle_partition_create_mpi(NULL, parent, ndim, shape, ranks, p);
}

/* deprecated: ladle_partition_create takes every communicator as a ladle_comm */
ladle_status ladle_partition_create_f(MPI_Fint parent, int ndim, const int shape[],
                                      const int ranks[], ladle_partition **p)
{
    return ladle_partition_create_mpi(NULL, ladle_comm_of_fortran(parent), ndim, shape,
                                      ranks, p);
}

/* The members' private communicator, made by the members alone (non-members
 * do not take part, and p->rank orders it). */
static ladle_status member_comm(ladle_partition *p)
{
    ladle_status st = LADLE_OK;
    MPI_Group group = MPI_GROUP_NULL;
    if (p->rank < 0)
        return LADLE_OK;
    LADLE_MPI(MPI_Group_incl(p->root->group, p->size, p->ranks, &group));
    LADLE_MPI(MPI_Comm_create_group(p->root->comm, group, LADLE_TAG_PARTITION_COMM, &p->comm));
    LADLE_MPI(MPI_Comm_set_errhandler(p->comm, MPI_ERRORS_RETURN));
fail:
    if (group != MPI_GROUP_NULL)
        MPI_Group_free(&group);
    return st;
}

/* A new partition with members listed as root ranks, sharing root with base. */
static ladle_status derive(const ladle_partition *base, int ndim, const int *shape,
                           int size, const int *root_ranks, ladle_partition **out)
{
    ladle_status st = LADLE_OK;
    ladle_partition *p = partition_alloc(ndim, shape, size);
    LADLE_CHECK(p != NULL, LADLE_ERR_ALLOC, "out of memory");
    memcpy(p->ranks, root_ranks, sizeof(int) * (size_t)size);
    p->root = base->root;
    p->root->refs++;
    locate_self(p);
    LADLE_CALL(member_comm(p));
    *out = p;
    p = NULL;
fail:
    ladle__partition_release(p);
    return st;
}

ladle_status ladle_partition_create_subset(const ladle_partition *base, int ndim,
                                           const int shape[], const int ranks[],
                                           ladle_partition **out)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    int size = 0;
    int *members = NULL, *root_ranks = NULL;
    uint64_t h = LADLE_HASH_INIT;
    LADLE_NOT_NULL(base);
    LADLE_NOT_NULL(out);
    local = check_grid(__func__, ndim, shape, &size);
    if (local == LADLE_OK && size > base->size)
        local =
            ladle__raise(LADLE_ERR_PARTITION, __func__,
                         "the partition needs %d ranks but the base partition has only %d",
                         size, base->size);
    if (local == LADLE_OK) {
        members = ladle__calloc((size_t)size, sizeof(int));
        root_ranks = ladle__calloc((size_t)size, sizeof(int));
        local = members && root_ranks
                    ? check_ranks(__func__, size, ranks, base->size, "the base partition",
                                  members)
                    : ladle__raise(LADLE_ERR_ALLOC, __func__, "out of memory");
    }
    if (local == LADLE_OK) {
        for (int r = 0; r < size; r++)
            root_ranks[r] = base->ranks[members[r]];
        h = ladle__hash(h, shape, sizeof(int) * (size_t)ndim);
        h = ladle__hash(h, root_ranks, sizeof(int) * (size_t)size);
    }
    if (base->comm != MPI_COMM_NULL)
        LADLE_CALL(ladle__agree(base->comm, local, h, __func__));
    else
        LADLE_CALL(local);
    LADLE_CALL(derive(base, ndim, shape, size, root_ranks, out));
fail:
    ladle__free(members);
    ladle__free(root_ranks);
    return st;
}

ladle_status ladle_partition_create_sub(const ladle_partition *p, const int remain[],
                                        ladle_partition **out)
{
    ladle_status st = LADLE_OK;
    int ndim = 0, shape[LADLE_MAX_NDIM], size = 1;
    int coords[LADLE_MAX_NDIM] = {0}, sub[LADLE_MAX_NDIM];
    int *members = NULL;
    ladle_partition *s = NULL;
    LADLE_NOT_NULL(p);
    LADLE_NOT_NULL(out);
    LADLE_CHECK(remain != NULL || p->ndim == 0, LADLE_ERR_NULL, "remain is NULL");
    for (int d = 0; d < p->ndim; d++)
        if (remain[d])
            shape[ndim++] = p->shape[d], size *= p->shape[d];
    members = ladle__calloc((size_t)size, sizeof(int));
    LADLE_CHECK(members != NULL, LADLE_ERR_ALLOC, "out of memory");
    /* this rank's sub-grid (inactive ranks: the one at coordinate 0) */
    if (p->rank >= 0)
        memcpy(coords, p->coords, sizeof(int) * (size_t)p->ndim);
    for (int r = 0; r < size; r++) {
        ladle__unravel(ndim, shape, r, sub);
        for (int d = 0, k = 0; d < p->ndim; d++)
            if (remain[d])
                coords[d] = sub[k++];
        members[r] = p->ranks[ladle__ravel(p->ndim, p->shape, coords)];
    }
    s = partition_alloc(ndim, shape, size);
    LADLE_CHECK(s != NULL, LADLE_ERR_ALLOC, "out of memory");
    memcpy(s->ranks, members, sizeof(int) * (size_t)size);
    s->root = p->root;
    s->root->refs++;
    locate_self(s);
    LADLE_CALL(member_comm(s));
    *out = s;
    s = NULL;
fail:
    ladle__partition_release(s);
    ladle__free(members);
    return st;
}

ladle_status ladle_partition_create_union(const ladle_partition *a,
                                          const ladle_partition *b, ladle_partition **out)
{
    ladle_status st = LADLE_OK;
    int *members = NULL, n = 0;
    LADLE_NOT_NULL(a);
    LADLE_NOT_NULL(b);
    LADLE_NOT_NULL(out);
    LADLE_CHECK(ladle__partitions_compatible(a, b), LADLE_ERR_PARTITION,
                "the partitions were made from different parent communicators");
    members = ladle__calloc((size_t)(a->size + b->size), sizeof(int));
    LADLE_CHECK(members != NULL, LADLE_ERR_ALLOC, "out of memory");
    for (int r = 0; r < a->size; r++)
        members[n++] = a->ranks[r];
    for (int r = 0; r < b->size; r++)
        if (ladle__partition_rank_of_root(a, b->ranks[r]) < 0)
            members[n++] = b->ranks[r];
    LADLE_CALL(derive(a, 1, &n, n, members, out));
fail:
    ladle__free(members);
    return st;
}

ladle_status ladle_partition_destroy(ladle_partition **p)
{
    if (p == NULL || *p == NULL)
        return LADLE_OK;
    ladle__partition_release(*p);
    *p = NULL;
    return LADLE_OK;
}

int ladle_partition_active(const ladle_partition *p) { return p != NULL && p->rank >= 0; }
int ladle_partition_ndim(const ladle_partition *p) { return p ? p->ndim : 0; }
const int *ladle_partition_shape(const ladle_partition *p) { return p ? p->shape : NULL; }
int ladle_partition_size(const ladle_partition *p) { return p ? p->size : 0; }
int ladle_partition_rank(const ladle_partition *p) { return p ? p->rank : -1; }

const int *ladle_partition_coords(const ladle_partition *p)
{
    return p != NULL && p->rank >= 0 ? p->coords : NULL;
}

ladle_status ladle_partition_coords_of(const ladle_partition *p, int rank, int coords[])
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(p);
    LADLE_CHECK(coords != NULL || p->ndim == 0, LADLE_ERR_NULL, "coords is NULL");
    LADLE_CHECK(rank >= 0 && rank < p->size, LADLE_ERR_ARG, "rank %d is outside 0..%d",
                rank, p->size - 1);
    ladle__unravel(p->ndim, p->shape, rank, coords);
fail:
    return st;
}

ladle_status ladle_partition_rank_of(const ladle_partition *p, const int coords[],
                                     int *rank)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(p);
    LADLE_NOT_NULL(rank);
    LADLE_CHECK(coords != NULL || p->ndim == 0, LADLE_ERR_NULL, "coords is NULL");
    for (int d = 0; d < p->ndim; d++)
        LADLE_CHECK(coords[d] >= 0 && coords[d] < p->shape[d], LADLE_ERR_ARG,
                    "coordinate %d of dimension %d is outside 0..%d", coords[d], d,
                    p->shape[d] - 1);
    *rank = ladle__ravel(p->ndim, p->shape, coords);
fail:
    return st;
}

int ladle_partition_neighbor(const ladle_partition *p, int rank, int dim, ladle_direction dir)
{
    int c[LADLE_MAX_NDIM];
    if (p == NULL || rank < 0 || rank >= p->size || dim < 0 || dim >= p->ndim ||
        (dir != LADLE_DIR_LOWER && dir != LADLE_DIR_HIGHER))
        return -1;
    ladle__unravel(p->ndim, p->shape, rank, c);
    c[dim] += dir;
    if (c[dim] < 0 || c[dim] >= p->shape[dim])
        return -1;
    return ladle__ravel(p->ndim, p->shape, c);
}

int ladle_partition_parent_rank(const ladle_partition *p, int r)
{
    if (p == NULL || r < 0 || r >= p->size)
        return -1;
    return p->ranks[r];
}

ladle_comm ladle_partition_comm(const ladle_partition *p)
{
    return ladle_comm_of(p ? p->comm : MPI_COMM_NULL);
}

/* deprecated: ladle_partition_comm gives the same handle */
MPI_Fint ladle_partition_comm_f(const ladle_partition *p)
{
    return ladle_partition_comm(p).fortran;
}
