/* The operator interface: argument checks, dispatch, setup shared by all ops. */
#include <stdlib.h>
#include <string.h>

#include "src/core/tags.h"
#include "src/op/op_impl.h"

unsigned ladle__op_flags_from_env(unsigned flags)
{
    const char *v = getenv("LADLE_CHECKED");
    if (v != NULL && v[0] != '\0' && strcmp(v, "0") != 0)
        flags |= LADLE_CHECKED;
    return flags;
}

static void local_shape(const ladle_layout *l, int *ndim, int64_t *shape, int64_t *numel)
{
    *ndim = l->ndim;
    ladle_layout_box(l, LADLE_SELF, NULL, shape);
    *numel = 1;
    for (int d = 0; d < l->ndim; d++)
        *numel *= shape[d];
}

ladle_status ladle__op_alloc(const ladle_op_vtable *vt, ladle_dtype dtype, ladle_device device,
                             const char *func, const char *who, ladle_op **out)
{
    const ladle_backend *be = NULL;
    ladle_status st = ladle__backend_get(device, func, &be);
    if (st != LADLE_OK)
        return st;
    ladle_op *op = ladle__calloc(1, sizeof *op);
    if (op == NULL)
        return ladle__raise(LADLE_ERR_ALLOC, who, "out of memory");
    op->vt = vt;
    op->dtype = dtype;
    op->comm = MPI_COMM_NULL;
    op->be = be;
    *out = op;
    return LADLE_OK;
}

ladle_status ladle__op_new(const ladle_op_vtable *vt, ladle_dtype dtype, ladle_device device,
                           unsigned flags, const ladle_layout *x, const ladle_layout *y,
                           ladle_op **out, const char *func)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    LADLE_CALL(ladle__op_alloc(vt, dtype, device, func, __func__, &op));
    op->flags = ladle__op_flags_from_env(flags);
    op->x_layout = ladle__layout_retain(x);
    op->y_layout = ladle__layout_retain(y);
    local_shape(x, &op->x_ndim, op->x_shape, &op->x_numel);
    local_shape(y, &op->y_ndim, op->y_shape, &op->y_numel);
    op->active = x->p->rank >= 0 || y->p->rank >= 0;
    LADLE_CALL(ladle_sched_create(dtype, &op->fwd));
    LADLE_CALL(ladle_sched_create(dtype, &op->adj));
    *out = op;
    return LADLE_OK;
fail:
    ladle_op_destroy(&op);
    return st;
}

ladle_status ladle__op_comm_list(int np, const ladle_partition *const *ps, MPI_Comm *comm,
                                 int **to_comm)
{
    ladle_status st = LADLE_OK;
    int n = 0, total = 0, *members = NULL, *map = NULL;
    MPI_Group group = MPI_GROUP_NULL;
    const ladle_root *root = ps[0]->root;
    *comm = MPI_COMM_NULL;
    *to_comm = NULL;
    for (int k = 0; k < np; k++)
        total += ps[k] ? ps[k]->size : 0;
    members = ladle__calloc((size_t)total + 1, sizeof(int));
    map = ladle__calloc((size_t)root->size, sizeof(int));
    LADLE_CHECK(members && map, LADLE_ERR_ALLOC, "out of memory");
    for (int r = 0; r < root->size; r++)
        map[r] = -1;
    for (int k = 0; k < np; k++)
        for (int r = 0; ps[k] != NULL && r < ps[k]->size; r++)
            if (map[ps[k]->ranks[r]] < 0) {
                map[ps[k]->ranks[r]] = n;
                members[n++] = ps[k]->ranks[r];
            }
    if (map[root->rank] >= 0) {
        LADLE_MPI(MPI_Group_incl(root->group, n, members, &group));
        LADLE_MPI(MPI_Comm_create_group(root->comm, group, LADLE_TAG_OP_COMM, comm));
        LADLE_MPI(MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN));
    }
    *to_comm = map;
    map = NULL;
fail:
    if (group != MPI_GROUP_NULL)
        MPI_Group_free(&group);
    ladle__free(members);
    ladle__free(map);
    return st;
}

ladle_status ladle__op_comm(const ladle_partition *a, const ladle_partition *b,
                            MPI_Comm *comm, int **to_comm)
{
    const ladle_partition *ps[2] = {a, b};
    return ladle__op_comm_list(b != NULL ? 2 : 1, ps, comm, to_comm);
}

ladle_status ladle__op_finish(ladle_op **pop, MPI_Comm *pcomm, ladle_status local,
                              uint64_t hash, ladle_op **out, const char *func)
{
    ladle_status st = local;
    ladle_op *op = *pop;
    MPI_Comm comm = *pcomm;
    *pcomm = MPI_COMM_NULL;
    if (op != NULL) {
        op->comm = comm;
        comm = MPI_COMM_NULL;
    }
    if (st == LADLE_OK)
        st = ladle_sched_finalize(op->fwd, op->comm, op->be);
    if (st == LADLE_OK)
        st = ladle_sched_finalize(op->adj, op->comm, op->be);
    if (st == LADLE_OK) {
        int64_t a = ladle_sched_workspace_elems(op->fwd);
        int64_t b = ladle_sched_workspace_elems(op->adj);
        if (!ladle__bytes_ok(a > b ? a : b, ladle_dtype_size(op->dtype), &op->ws_bytes))
            st = ladle__raise(LADLE_ERR_SHAPE, func,
                              "the workspace (%lld elements) is too large",
                              (long long)(a > b ? a : b));
        else
            st = ladle__alloc_as(op->be, LADLE_MEM_COMM, op->ws_bytes, &op->ws);
    }
    if (st == LADLE_OK) {
        /* every rank must stage and cut messages alike, or they would not
         * match: the device and the environment decide, so agree on it */
        int64_t cut[2] = {ladle_sched_staging_chunk(op->fwd), ladle_sched_staging_chunk(op->adj)};
        hash = ladle__hash(hash, cut, sizeof cut);
    }
    MPI_Comm agree_on = op != NULL ? op->comm : comm;
    if (agree_on != MPI_COMM_NULL)
        st = ladle__agree(agree_on, st, hash, func);
    if (comm != MPI_COMM_NULL)
        MPI_Comm_free(&comm);
    if (st == LADLE_OK)
        *out = op;
    else
        ladle_op_destroy(&op);
    *pop = NULL;
    return st;
}

int ladle__tag_ub(MPI_Comm comm)
{
    /* the predefined attribute is reliably cached on MPI_COMM_WORLD */
    int *ub = NULL, flag = 0;
    (void)comm;
    if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag) != MPI_SUCCESS || !flag)
        return 32767;
    return *ub;
}

ladle_status ladle_op_destroy(ladle_op **pop)
{
    if (pop == NULL || *pop == NULL)
        return LADLE_OK;
    ladle_op *op = *pop;
    if (op->vt && op->vt->destroy)
        op->vt->destroy(op);
    if (op->layer)
        ladle__layer_destroy(op);
    ladle_sched_destroy(&op->fwd);
    ladle_sched_destroy(&op->adj);
    if (op->ws && !op->ws_caller)
        op->be->fn->free(op->be, op->ws);
    if (op->comm != MPI_COMM_NULL && ladle__mpi_usable())
        MPI_Comm_free(&op->comm);
    ladle_layout_destroy(&op->x_layout);
    ladle_layout_destroy(&op->y_layout);
    ladle__free(op);
    *pop = NULL;
    return LADLE_OK;
}

static ladle_status check_tensor(const ladle_op *op, const ladle_tensor *t,
                                 const char *role, int ndim, const int64_t *shape,
                                 int64_t numel, const char *func)
{
    char a[160], b[160];
    if (t == NULL)
        return ladle__raise(LADLE_ERR_NULL, func,
                            "%s is NULL (pass a zero-volume tensor "
                            "on ranks that hold nothing)",
                            role);
    if (t->dtype != op->dtype)
        return ladle__raise(LADLE_ERR_DTYPE, func, "%s is %s but the %s op is %s", role,
                            ladle_dtype_name(t->dtype), op->vt->name,
                            ladle_dtype_name(op->dtype));
    if (t->device != op->be->device)
        return ladle__raise(LADLE_ERR_DEVICE, func, "%s is on %s, the op on %s", role,
                            ladle_device_name(t->device),
                            ladle_device_name(op->be->device));
    int same = numel == 0 ? t->numel == 0 : t->ndim == ndim;
    for (int d = 0; same && numel > 0 && d < ndim; d++)
        same = t->shape[d] == shape[d];
    if (!same)
        return ladle__raise(LADLE_ERR_SHAPE, func,
                            "%s has shape %s; this rank's %s of the "
                            "%s op has shape %s",
                            role, ladle__fmt_shape64(a, sizeof a, t->ndim, t->shape), role,
                            op->vt->name, ladle__fmt_shape64(b, sizeof b, ndim, shape));
    if (!ladle_tensor_is_contiguous(t))
        return ladle__raise(LADLE_ERR_ARG, func, "%s is not contiguous", role);
    return LADLE_OK;
}

static int overlaps(const ladle_tensor *a, const ladle_tensor *b, size_t es)
{
    if (a->numel == 0 || b->numel == 0)
        return 0;
    const char *a0 = a->data, *b0 = b->data;
    const char *a1 = a0 + (size_t)a->numel * es, *b1 = b0 + (size_t)b->numel * es;
    return a0 < b1 && b0 < a1;
}

ladle_status ladle__op_check_io(ladle_op *op, const ladle_tensor *in, int in_is_x,
                                const ladle_tensor *out, const char *func)
{
    ladle_status st = LADLE_OK;
    LADLE_CHECK(op != NULL, LADLE_ERR_NULL, "op is NULL");
    if (in_is_x) {
        st = check_tensor(op, in, "x", op->x_ndim, op->x_shape, op->x_numel, func);
        if (st == LADLE_OK)
            st = check_tensor(op, out, "y", op->y_ndim, op->y_shape, op->y_numel, func);
    } else {
        st = check_tensor(op, in, "dy", op->y_ndim, op->y_shape, op->y_numel, func);
        if (st == LADLE_OK)
            st = check_tensor(op, out, "dx", op->x_ndim, op->x_shape, op->x_numel, func);
    }
    if (st == LADLE_OK && overlaps(in, out, ladle_dtype_size(op->dtype)) &&
        !(op->in_place && in->data == out->data && in->numel == out->numel))
        st = ladle__raise(LADLE_ERR_ARG, func,
                          "the input and output tensors overlap and "
                          "the %s op does not work in place",
                          op->vt->name);
    if (st == LADLE_OK && op->busy)
        st =
            ladle__raise(LADLE_ERR_STATE, func, "a begin/end call of this op is in flight");
    if ((op->flags & LADLE_CHECKED) && op->comm != MPI_COMM_NULL) {
        if (st == LADLE_OK)
            st = ladle__be_health(op->be);
        st = ladle__agree(op->comm, st, 0, func);
    }
fail:
    return st;
}

ladle_status ladle_op_forward(ladle_op *op, const ladle_tensor *x, ladle_tensor *y)
{
    ladle_status st = LADLE_OK;
    if (op != NULL && op->layer)
        return ladle__layer_op_forward(op, x, y);
    LADLE_CALL(ladle__op_check_io(op, x, 1, y, __func__));
    if (op->vt->forward)
        return op->vt->forward(op, x, y);
    return ladle_sched_run(op->fwd, x->data, y->data, op->ws);
fail:
    return st;
}

ladle_status ladle_op_adjoint(ladle_op *op, const ladle_tensor *dy, ladle_tensor *dx)
{
    ladle_status st = LADLE_OK;
    if (op != NULL && op->layer)
        return ladle__layer_op_adjoint(op, dy, dx);
    LADLE_CALL(ladle__op_check_io(op, dy, 0, dx, __func__));
    if (op->vt->adjoint)
        return op->vt->adjoint(op, dy, dx);
    return ladle_sched_run(op->adj, dy->data, dx->data, op->ws);
fail:
    return st;
}

const ladle_layout *ladle_op_x_layout(const ladle_op *op)
{
    return op ? op->x_layout : NULL;
}
const ladle_layout *ladle_op_y_layout(const ladle_op *op)
{
    return op ? op->y_layout : NULL;
}

static ladle_status get_shape(const ladle_op *op, int which, int *ndim, int64_t shape[])
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(op);
    LADLE_NOT_NULL(ndim);
    int n = which ? op->y_ndim : op->x_ndim;
    LADLE_CHECK(shape != NULL || n == 0, LADLE_ERR_NULL, "shape is NULL");
    *ndim = n;
    memcpy(shape, which ? op->y_shape : op->x_shape, sizeof(int64_t) * (size_t)n);
fail:
    return st;
}

ladle_status ladle_op_x_shape(const ladle_op *op, int *ndim, int64_t shape[])
{
    return get_shape(op, 0, ndim, shape);
}

ladle_status ladle_op_y_shape(const ladle_op *op, int *ndim, int64_t shape[])
{
    return get_shape(op, 1, ndim, shape);
}

ladle_dtype ladle_op_dtype(const ladle_op *op) { return op ? op->dtype : (ladle_dtype)0; }
ladle_device ladle_op_device(const ladle_op *op) { return op ? op->be->device : LADLE_CPU; }
const char *ladle_op_name(const ladle_op *op) { return op ? op->vt->name : "none"; }
ladle_op_kind ladle_op_kind_of(const ladle_op *op) { return op ? op->vt->kind : LADLE_OP_NONE; }

const char *ladle_op_kind_name(ladle_op_kind kind)
{
    switch (kind) {
#define LADLE_OP_KIND_CASE_(name, value, text)                                             \
    case name:                                                                             \
        return text;
        LADLE_OP_KIND_LIST(LADLE_OP_KIND_CASE_)
#undef LADLE_OP_KIND_CASE_
    }
    return "unknown";
}
int ladle_op_active(const ladle_op *op) { return op ? op->active : 0; }

int ladle_op_is_local(const ladle_op *op)
{
    return op == NULL ||
           (ladle_sched_messages(op->fwd) == 0 && ladle_sched_messages(op->adj) == 0);
}

size_t ladle_op_workspace_bytes(const ladle_op *op) { return op ? op->ws_bytes : 0; }

ladle_status ladle__op_start(ladle_op *op, ladle_tensor *x, ladle_tensor *y)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(ladle__op_check_io(op, x, 1, y, "ladle_op_forward"));
    LADLE_CHECK(op->vt->forward == NULL, LADLE_ERR_UNSUPPORTED, "the %s op has no split call",
                op->vt->name);
    st = ladle_sched_start(op->fwd, x->data, y->data, op->ws);
    if (st == LADLE_OK)
        op->busy = 1;
fail:
    return st;
}

ladle_status ladle__op_progress(ladle_op *op, int *done)
{
    return ladle_sched_progress(op->fwd, done);
}

ladle_status ladle__op_wait(ladle_op *op)
{
    op->busy = 0;
    return ladle_sched_finish(op->fwd);
}

ladle_status ladle_op_set_workspace(ladle_op *op, void *mem, size_t bytes)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(op);
    LADLE_CHECK(!op->busy, LADLE_ERR_STATE, "a split call of the %s op is in flight",
                op->vt->name);
    if (op->ws_bytes == 0)
        return LADLE_OK;
    LADLE_CHECK(mem != NULL, LADLE_ERR_NULL, "mem is NULL (the %s op needs %zu bytes)",
                op->vt->name, op->ws_bytes);
    LADLE_CHECK(bytes >= op->ws_bytes, LADLE_ERR_ARG,
                "the workspace of %zu bytes is too small: the %s op needs %zu", bytes,
                op->vt->name, op->ws_bytes);
    LADLE_CALL(ladle__be_check_pointer(op->be, mem, op->ws_bytes));
    if (op->ws && !op->ws_caller)
        op->be->fn->free(op->be, op->ws);
    op->ws = mem;
    op->ws_caller = 1;
    op->ws_tags = NULL; /* other ops may write the caller's memory unseen */
    if (op->vt->ws_bound)
        op->vt->ws_bound(op);
fail:
    return st;
}

/* Whether op may join a shared scratch workspace on backend on (NULL: any). */
static int shareable(const ladle_op *op, const ladle_backend *on)
{
    return op != NULL && op->ws_scratch && op->ws_bytes > 0 && op->ws_tags != NULL &&
           (on == NULL || op->be == on);
}

ladle_status ladle__share_scratch(int n, ladle_op *const ops[], void **mem,
                                  const ladle_backend **be, ladle__ws_tags *tags)
{
    size_t most = 0;
    int count = 0;
    const ladle_backend *on = NULL;
    *mem = NULL;
    *be = NULL;
    for (int i = 0; i < n; i++) {
        if (!shareable(ops[i], on))
            continue;
        on = ops[i]->be;
        most = ops[i]->ws_bytes > most ? ops[i]->ws_bytes : most;
        count++;
    }
    if (count < 2)
        return LADLE_OK;
    ladle_status st = ladle__alloc_as(on, LADLE_MEM_WORKSPACE, most, mem);
    if (st != LADLE_OK)
        return st;
    *be = on;
    memset(tags, 0, sizeof *tags);
    for (int i = 0; i < n; i++)
        if (shareable(ops[i], on))
            ladle__op_share_ws(ops[i], *mem, tags);
    return LADLE_OK;
}

ladle_status ladle__op_block(ladle_op *op, ladle_memory_kind kind, size_t bytes, void **out)
{
    ladle_status st = ladle__alloc_as(op->be, kind, bytes, out);
    if (st == LADLE_OK && *out != NULL)
        op->held[kind] += bytes;
    return st;
}

void ladle__op_share_ws(ladle_op *op, void *mem, ladle__ws_tags *tags)
{
    if (op->ws && !op->ws_caller)
        op->be->fn->free(op->be, op->ws);
    op->ws = mem;
    op->ws_caller = 1;
    op->ws_tags = tags;
    if (op->vt->ws_bound)
        op->vt->ws_bound(op);
}
