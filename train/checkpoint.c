/* Checkpoints of global tensors (see ladle/checkpoint.h).
 *
 * Every call talks on a private duplicate of the caller's communicator with
 * MPI_ERRORS_RETURN, so its messages never meet the caller's and an MPI
 * failure comes back as a status. Failures that ladle finds (arguments, the
 * file, memory) are agreed on before the messages that depend on them, so
 * every rank returns the same status instead of waiting for a message that
 * is never sent. Payloads travel in chunks of at most c->chunk bytes. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "src/core/tags.h"
#include "src/op/op_impl.h"
#include "train/checkpoint_impl.h"
#include "train/grow.h"

#define MAGIC "LADLECKP"
#define TRAILER "LADLEEND"
#define VERSION 1u
/* A rank's row in the gather of a record: owner flag, offset, shape. */
#define ROW (1 + 2 * LADLE_MAX_NDIM)

enum { REC_PARAM = 0, REC_BUFFER = 1, REC_STATE = 2 };

/* One tensor of a checkpoint: this rank's shard and its place. */
typedef struct record {
    int kind;
    ladle_tensor *t;
    ladle__pinfo info;
} record;

/* One call's communication: its private communicator, this rank, the most
 * bytes one message carries, and the public function it serves. */
typedef struct io {
    MPI_Comm comm;
    int me, size;
    int64_t chunk;
    const char *func;
} io;

static int put(ladle__bytes *b, const void *p, size_t n)
{
    if (n > (size_t)LADLE_MAX_BYTES - b->size) /* the file may not pass 2^60 bytes */
        return 0;
    return ladle__bytes_put(b, p, n);
}

static uint64_t fnv(const char *p, size_t n)
{
    return ladle__hash(LADLE_HASH_INIT, p, n);
}

/* The verdict of the first rank that failed becomes every rank's: the same
 * status, and on the other ranks that rank's message. Collective. */
static ladle_status share_verdict(MPI_Comm comm, ladle_status local, const char *func)
{
    int me = 0, size = 1, first = 0, code = (int)local;
    char msg[512] = {0};
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &size);
    int mine = local != LADLE_OK ? me : size;
    int rc = ladle__allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
    if (rc != MPI_SUCCESS)
        return ladle__raise_mpi(rc, func, "MPI_Allreduce");
    if (first == size)
        return LADLE_OK;
    if (me == first)
        snprintf(msg, sizeof msg, "%s", ladle_error_message());
    rc = MPI_Bcast(&code, 1, MPI_INT, first, comm);
    if (rc == MPI_SUCCESS)
        rc = MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, first, comm);
    if (rc != MPI_SUCCESS)
        return ladle__raise_mpi(rc, func, "MPI_Bcast");
    if (me != first)
        return ladle__raise((ladle_status)code, func, "on rank %d: %s", first, msg);
    return (ladle_status)code;
}

/* Duplicate the caller's communicator for one call (collective over it). */
static ladle_status io_open(MPI_Comm user, int64_t chunk, const char *func, io *c)
{
    MPI_Request req;
    c->comm = MPI_COMM_NULL;
    c->me = 0;
    c->size = 1;
    c->chunk = chunk;
    c->func = func;
    if (user == MPI_COMM_NULL)
        return ladle__raise(LADLE_ERR_ARG, func, "comm is MPI_COMM_NULL");
    if (!ladle__mpi_usable())
        return ladle__raise(LADLE_ERR_MPI, func, "MPI is not initialised");
    /* nonblocking, so the wait can yield the core to other ranks */
    int rc = MPI_Comm_idup(user, &c->comm, &req);
    if (rc == MPI_SUCCESS)
        rc = ladle__wait(&req);
    if (rc != MPI_SUCCESS) {
        c->comm = MPI_COMM_NULL;
        return ladle__raise_mpi(rc, func, "MPI_Comm_idup");
    }
    rc = MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_rank(c->comm, &c->me);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_size(c->comm, &c->size);
    if (rc != MPI_SUCCESS)
        return ladle__raise_mpi(rc, func, "MPI_Comm_set_errhandler");
    if (chunk < 1 || chunk > LADLE_MPI_CHUNK_BYTES)
        return ladle__raise(LADLE_ERR_ARG, func, "chunks of %lld bytes (1 to %lld)",
                            (long long)chunk, (long long)LADLE_MPI_CHUNK_BYTES);
    return LADLE_OK;
}

/* Free the call's communicator; safe after a failed io_open. */
static void io_close(io *c)
{
    if (c->comm != MPI_COMM_NULL && ladle__mpi_usable())
        MPI_Comm_free(&c->comm);
    c->comm = MPI_COMM_NULL;
}

/* A network of sequential layers: every rank holds everything. */
static int replicated_everywhere(const ladle__model *m)
{
    for (int i = 0; i < m->n; i++)
        if (m->ops[i]->x_layout != NULL)
            return 0;
    return 1;
}

/* Every tensor of a checkpoint, in file order. *n gets the count. */
static ladle_status records(const ladle__model *m, const ladle_optimizer *opt, record **out,
                            int *n)
{
    ladle_status st = LADLE_OK;
    int cap = 16, k = 0;
    record *r = ladle__calloc((size_t)cap, sizeof(record));
    LADLE_CHECK(r != NULL, LADLE_ERR_ALLOC, "out of memory");
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && opt == NULL)
            break;
        int states = 0;
        while (pass == 1 && states < 4 && ladle_optimizer_state(opt, 0, states) != NULL)
            states++;
        int q = 0;
        for (int i = 0; i < m->n; i++) {
            const ladle_op *op = m->ops[i];
            int np = ladle_op_num_params(op);
            int nb = pass == 0 && op->vt->num_buffers ? op->vt->num_buffers(op) : 0;
            for (int j = 0; j < np + nb; j++) {
                for (int s = 0; s < (pass == 0 ? 1 : states); s++) {
                    if (j >= np && pass == 1)
                        continue;
                    record *g = ladle__grow_int(r, k, k + 1, &cap, sizeof *g, 16);
                    LADLE_CHECK(g != NULL, LADLE_ERR_ALLOC, "out of memory");
                    r = g;
                    record *rec = &r[k++];
                    if (j < np) {
                        ladle__param_info(op, j, &rec->info);
                        rec->kind = pass == 0 ? REC_PARAM : REC_STATE;
                        rec->t = pass == 0 ? ladle_op_param(op, j)
                                           : ladle_optimizer_state(opt, q, s);
                    } else {
                        rec->kind = REC_BUFFER;
                        rec->t = op->vt->buffer_at(op, j - np, &rec->info);
                    }
                    LADLE_CHECK(rec->t != NULL, LADLE_ERR_ARG,
                                "the optimizer does not hold the network's parameters");
                }
                if (j < np)
                    q++;
            }
        }
    }
    *out = r;
    *n = k;
    return LADLE_OK;
fail:
    ladle__free(r);
    return st;
}

/* The optimizer must hold exactly the network's parameters, in the
 * network's order (as ladle_optimizer_add_network adds them), compared by
 * tensor identity: an optimizer of other tensors, of some of them or of
 * none would save or load state that is not the network's. */
static ladle_status check_optimizer(const ladle__model *m, const ladle_optimizer *opt,
                                    const char *func)
{
    int want = 0, q = 0;
    if (opt == NULL)
        return LADLE_OK;
    for (int i = 0; i < m->n; i++)
        want += ladle_op_num_params(m->ops[i]);
    if (ladle_optimizer_num_params(opt) != want)
        return ladle__raise(LADLE_ERR_ARG, func,
                            "the optimizer holds %d parameters and the network %d: it must "
                            "hold exactly the network's, in order "
                            "(ladle_optimizer_add_network)",
                            ladle_optimizer_num_params(opt), want);
    for (int i = 0; i < m->n; i++) {
        const ladle_op *op = m->ops[i];
        for (int j = 0; j < ladle_op_num_params(op); j++, q++)
            if (ladle__optimizer_param(opt, q) != ladle_op_param(op, j))
                return ladle__raise(LADLE_ERR_ARG, func,
                                    "parameter %d of the optimizer is not the network's "
                                    "(layer %d's %s): it must hold exactly the network's "
                                    "parameters, in order (ladle_optimizer_add_network)",
                                    q, i, ladle_op_param_name(op, j));
    }
    return LADLE_OK;
}

/* Every record's global tensor must fit a file (its shards travel in
 * chunks, so no shard is too large for MPI). */
static ladle_status check_sizes(const record *recs, int n, size_t es, const char *func)
{
    for (int k = 0; k < n; k++) {
        size_t bytes = 0;
        const ladle__pinfo *in = &recs[k].info;
        int64_t v = ladle__volume_within(in->ndim, in->global, LADLE_MAX_ELEMS);
        if (v < 0 || !ladle__bytes_ok(v, es, &bytes))
            return ladle__raise(LADLE_ERR_SHAPE, func,
                                "tensor %d is too large for a checkpoint", k);
    }
    return LADLE_OK;
}

/* The checks of both calls, on every rank before the first message: the
 * arguments, the optimizer, the records. */
static ladle_status preflight(const char *path, const ladle__model *m,
                              const ladle_optimizer *opt, record **recs, int *n,
                              const char *func)
{
    if (path == NULL || m->ops == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "%s is NULL", path ? m->what : "path");
    ladle_status st = check_optimizer(m, opt, func);
    if (st == LADLE_OK)
        st = records(m, opt, recs, n);
    size_t es = ladle_dtype_size(m->dtype);
    if (st == LADLE_OK)
        st = check_sizes(*recs, *n, es, func);
    return st;
}

static int64_t volume(int nd, const int64_t *s)
{
    int64_t v = 1;
    for (int d = 0; d < nd; d++)
        v *= s[d];
    return v;
}

/* Copy a shard (shape, at offset) into (to_global) or out of a global
 * row-major buffer. */
static void place(const int64_t *global, int nd, const int64_t *offset, const int64_t *shape,
                  size_t es, char *g, char *shard, int to_global)
{
    int64_t n = volume(nd, shape), idx[LADLE_MAX_NDIM] = {0};
    for (int64_t k = 0; k < n; k++) {
        int64_t at = 0;
        for (int d = 0; d < nd; d++)
            at = at * global[d] + offset[d] + idx[d];
        if (to_global)
            memcpy(g + (size_t)at * es, shard + (size_t)k * es, es);
        else
            memcpy(shard + (size_t)k * es, g + (size_t)at * es, es);
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < shape[d])
                break;
            idx[d] = 0;
        }
    }
}

/* Send (to rank 0) or receive (from peer) bytes in chunks of at most
 * c->chunk, in order on one tag. A rank that meets an MPI error still posts
 * the rest, so its peer is not left waiting; the first error is returned. */
static ladle_status move_chunks(const io *c, char *p, int64_t bytes, int peer, int recv)
{
    ladle_status st = LADLE_OK;
    for (int64_t at = 0; at < bytes; at += c->chunk) {
        int n = 0;
        ladle_status e = ladle__mpi_count(c->func, "a chunk of a shard",
                                          bytes - at < c->chunk ? bytes - at : c->chunk, &n);
        int rc = MPI_SUCCESS;
        if (e == LADLE_OK && recv)
            rc = MPI_Recv(p + at, n, MPI_BYTE, peer, LADLE_TAG_CHECKPOINT_DATA, c->comm,
                          MPI_STATUS_IGNORE);
        else if (e == LADLE_OK)
            rc = MPI_Send(p + at, n, MPI_BYTE, peer, LADLE_TAG_CHECKPOINT_DATA, c->comm);
        if (e == LADLE_OK && rc != MPI_SUCCESS)
            e = ladle__raise_mpi(rc, c->func, recv ? "MPI_Recv" : "MPI_Send");
        if (st == LADLE_OK)
            st = e;
    }
    return st;
}

/* Rank 0's buffers for record rec: the global tensor and room for the
 * largest shard another rank sends, sized from the gathered rows. */
static ladle_status gather_buffers(const io *c, const record *rec, const int64_t *rows,
                                   size_t es, char **g, char **tmp)
{
    int64_t most = 0;
    for (int r = 1; r < c->size; r++) {
        int64_t v = rows[r * ROW] ? volume(rec->info.ndim, rows + r * ROW + 1 + LADLE_MAX_NDIM)
                                  : 0;
        most = v > most ? v : most;
    }
    /* check_sizes bounded the global tensor, and so every shard of it */
    *g = ladle__calloc((size_t)volume(rec->info.ndim, rec->info.global) * es + 1, 1);
    *tmp = ladle__calloc((size_t)most * es + 1, 1);
    if (*g == NULL || *tmp == NULL)
        return ladle__raise(LADLE_ERR_ALLOC, c->func, "out of memory");
    return LADLE_OK;
}

/* Assemble record rec's global tensor on rank 0 (into *g, allocated there)
 * from the owners' shards. Collective: the ranks gather their rows, agree
 * that everyone is still well (*stop becomes 1 on every rank if not: local
 * holds this rank's first failure), then the owners send their shards. */
static ladle_status gather(const io *c, const record *rec, int everywhere, size_t es,
                           int64_t *rows, ladle_status local, char **g, int *stop)
{
    const ladle__pinfo *in = &rec->info;
    char *tmp = NULL, *mine = NULL;
    int64_t row[ROW] = {0};
    row[0] = everywhere ? c->me == 0 : in->owner && rec->t->numel > 0;
    for (int d = 0; d < in->ndim; d++) {
        row[1 + d] = in->offset[d];
        row[1 + LADLE_MAX_NDIM + d] = rec->t->shape[d];
    }
    int rc = MPI_Gather(row, ROW, MPI_INT64_T, rows, ROW, MPI_INT64_T, 0, c->comm);
    if (rc != MPI_SUCCESS && local == LADLE_OK)
        local = ladle__raise_mpi(rc, c->func, "MPI_Gather");
    if (c->me == 0 && local == LADLE_OK)
        local = gather_buffers(c, rec, rows, es, g, &tmp);
    /* the shard comes to the host through its backend (it may live on a
     * device): MPI and the file see only host memory */
    if (row[0] && local == LADLE_OK) {
        mine = ladle__calloc((size_t)rec->t->numel * es + 1, 1);
        local = mine == NULL ? ladle__raise(LADLE_ERR_ALLOC, c->func, "out of memory")
                             : ladle_tensor_read(rec->t, mine);
    }
    int well = local == LADLE_OK, all = 0;
    rc = ladle__allreduce(&well, &all, 1, MPI_INT, MPI_MIN, c->comm);
    if (rc != MPI_SUCCESS && local == LADLE_OK)
        local = ladle__raise_mpi(rc, c->func, "MPI_Allreduce");
    *stop = rc != MPI_SUCCESS || !all;
    if (*stop)
        goto done;
    if (c->me != 0 && row[0])
        local = move_chunks(c, mine, rec->t->numel * (int64_t)es, 0, 0);
    int64_t covered = 0;
    for (int r = 0; c->me == 0 && r < c->size; r++) {
        const int64_t *m = rows + r * ROW;
        int64_t n = volume(in->ndim, m + 1 + LADLE_MAX_NDIM);
        ladle_status e = LADLE_OK;
        if (!m[0])
            continue;
        if (r != 0)
            e = move_chunks(c, tmp, n * (int64_t)es, r, 1);
        if (e == LADLE_OK)
            place(in->global, in->ndim, m + 1, m + 1 + LADLE_MAX_NDIM, es, *g,
                  r == 0 ? mine : tmp, 1);
        else if (local == LADLE_OK)
            local = e;
        covered += n;
    }
    if (c->me == 0 && local == LADLE_OK && covered != volume(in->ndim, in->global))
        local = ladle__raise(LADLE_ERR_INTERNAL, c->func,
                             "the owners' shards cover %lld of %lld elements",
                             (long long)covered, (long long)volume(in->ndim, in->global));
done:
    ladle__free(tmp);
    ladle__free(mine);
    return local;
}

/* The file's bytes before the trailer, assembled on rank 0. Collective;
 * returns this rank's verdict (the caller shares it). */
static ladle_status assemble(const io *c, const ladle__model *m, const ladle_optimizer *opt,
                             const record *recs, int n, int nmeta, const int64_t *meta,
                             int64_t *rows, ladle__bytes *b)
{
    ladle_status local = LADLE_OK;
    ladle_dtype dt = m->dtype;
    size_t es = ladle_dtype_size(dt);
    int everywhere = replicated_everywhere(m), stop = 0;
    uint32_t head[4] = {VERSION, (uint32_t)dt, (uint32_t)nmeta, (uint32_t)n};
    int64_t steps = opt ? ladle_optimizer_steps(opt) : -1;
    if (c->me == 0 && !(put(b, MAGIC, 8) && put(b, head, sizeof head) &&
                        put(b, &steps, sizeof steps) &&
                        put(b, meta, sizeof(int64_t) * (size_t)nmeta)))
        local = ladle__raise(LADLE_ERR_ALLOC, c->func, "out of memory");
    for (int k = 0; k < n && !stop; k++) {
        char *g = NULL;
        local = gather(c, &recs[k], everywhere, es, rows, local, &g, &stop);
        if (!stop && c->me == 0 && local == LADLE_OK) {
            uint32_t kn[2] = {(uint32_t)recs[k].kind, (uint32_t)recs[k].info.ndim};
            /* check_sizes made sure that this product fits */
            size_t bytes = (size_t)volume(recs[k].info.ndim, recs[k].info.global) * es;
            const ladle__pinfo *in = &recs[k].info;
            if (!(put(b, kn, sizeof kn) &&
                  put(b, in->global, sizeof(int64_t) * (size_t)in->ndim) && put(b, g, bytes)))
                local = ladle__raise(LADLE_ERR_ALLOC, c->func,
                                     "no memory for a checkpoint of more than %zu bytes",
                                     b->size);
        }
        ladle__free(g);
    }
    return local;
}

ladle_status ladle__checkpoint_save_model(const char *path, MPI_Comm comm, const ladle__model *m,
                                          const ladle_optimizer *opt, int nmeta,
                                          const int64_t meta[], int64_t chunk)
{
    const char *func = "ladle_checkpoint_save";
    ladle_status st = LADLE_OK, local = LADLE_OK;
    record *recs = NULL;
    int n = 0;
    int64_t *rows = NULL;
    ladle__bytes b = {0};
    io c;
    LADLE_CALL(io_open(comm, chunk, func, &c));
    /* every check before the first message, so that every rank fails alike */
    if (nmeta < 0 || nmeta > LADLE_CHECKPOINT_MAX_META || (nmeta > 0 && meta == NULL))
        local = ladle__raise(LADLE_ERR_ARG, func, "%d integers (at most %d)", nmeta,
                             LADLE_CHECKPOINT_MAX_META);
    else
        local = preflight(path, m, opt, &recs, &n, func);
    if (local == LADLE_OK && c.me == 0) {
        rows = ladle__calloc((size_t)c.size * ROW, sizeof(int64_t));
        if (rows == NULL)
            local = ladle__raise(LADLE_ERR_ALLOC, func, "out of memory");
    }
    LADLE_CALL(share_verdict(c.comm, local, func));
    local = assemble(&c, m, opt, recs, n, nmeta, meta, rows, &b);
    if (c.me == 0 && local == LADLE_OK) {
        uint64_t tail[2] = {(uint64_t)b.size, fnv(b.data, b.size)};
        const void *pieces[3] = {b.data, TRAILER, tail};
        size_t sizes[3] = {b.size, 8, sizeof tail};
        local = ladle__write_file(func, path, 3, pieces, sizes);
    }
    st = share_verdict(c.comm, local, func);
fail:
    io_close(&c);
    ladle__free(recs);
    ladle__free(rows);
    ladle__free(b.data);
    return st;
}

/* A network's layers as a checkpoint sees them (ops NULL for a NULL net). */
static ladle__model network_model(const ladle_network *net)
{
    ladle__model m = {0, NULL, LADLE_F32, "net"};
    if (net) {
        m.ops = ladle__network_layers(net, &m.n);
        m.dtype = ladle_op_dtype(m.ops[0]);
    }
    return m;
}

ladle_status ladle__checkpoint_save_chunked(const char *path, MPI_Comm comm,
                                            const ladle_network *net,
                                            const ladle_optimizer *opt, int nmeta,
                                            const int64_t meta[], int64_t chunk)
{
    ladle__model m = network_model(net);
    return ladle__checkpoint_save_model(path, comm, &m, opt, nmeta, meta, chunk);
}

ladle_status ladle_checkpoint_save(const char *path, ladle_comm comm_in,
                                   const ladle_network *net, const ladle_optimizer *opt,
                                   int nmeta, const int64_t meta[])
{
    LADLE_COMM_IN(comm, comm_in);
    return ladle__checkpoint_save_chunked(path, comm, net, opt, nmeta, meta,
                                          LADLE_MPI_CHUNK_BYTES);
}

ladle_status ladle_checkpoint_check_path(const char *path, ladle_comm comm_in)
{
    LADLE_COMM_IN(comm, comm_in);
    ladle_status st = LADLE_OK, local = LADLE_OK;
    io c;
    LADLE_CALL(io_open(comm, LADLE_MPI_CHUNK_BYTES, __func__, &c));
    if (path == NULL)
        local = ladle__raise(LADLE_ERR_NULL, __func__, "path is NULL");
    else if (c.me == 0)
        local = ladle__check_writable(__func__, path);
    st = share_verdict(c.comm, local, __func__);
fail:
    io_close(&c);
    return st;
}

/* The smallest file: header, steps, trailer. */
#define MIN_FILE (8 + 16 + 8 + 8 + 16)

/* Rank 0's verdict on the bytes it read: magic, trailer, hash. */
static ladle_status verify(const char *path, const ladle__bytes *b, const char *func)
{
    uint64_t tail[2];
    if (b->size < MIN_FILE)
        return ladle__raise(LADLE_ERR_IO, func,
                            "%s is too short (%zu bytes) to be a checkpoint", path, b->size);
    size_t body = b->size - 24;
    memcpy(tail, b->data + body + 8, sizeof tail);
    if (memcmp(b->data, MAGIC, 8) != 0)
        return ladle__raise(LADLE_ERR_IO, func, "%s is not a ladle checkpoint", path);
    if (memcmp(b->data + body, TRAILER, 8) != 0 || tail[0] != body)
        return ladle__raise(LADLE_ERR_IO, func,
                            "%s is truncated or torn (%zu bytes, no valid trailer)", path,
                            b->size);
    if (tail[1] != fnv(b->data, body))
        return ladle__raise(LADLE_ERR_IO, func,
                            "%s is damaged: its contents do not match their hash", path);
    return LADLE_OK;
}

/* Rank 0 reads and checks the file; every rank gets its bytes (without the
 * trailer), in chunks. Collective; returns this rank's verdict after the
 * broadcast (an MPI error there; the caller shares it). */
static ladle_status read_file(const io *c, const char *path, ladle__bytes *b)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    int64_t size = 0;
    if (c->me == 0) {
        local = ladle__read_file(c->func, path, LADLE_MAX_BYTES, &b->data, &b->size);
        if (local == LADLE_OK)
            local = verify(path, b, c->func);
        if (local == LADLE_OK)
            size = (int64_t)b->size - 24;
    }
    LADLE_CALL(share_verdict(c->comm, local, c->func));
    int rc = MPI_Bcast(&size, 1, MPI_INT64_T, 0, c->comm);
    if (rc != MPI_SUCCESS)
        local = ladle__raise_mpi(rc, c->func, "MPI_Bcast");
    else if (c->me != 0 && (b->data = ladle__calloc((size_t)size + 1, 1)) == NULL)
        local = ladle__raise(LADLE_ERR_ALLOC, c->func, "no memory for %lld bytes",
                             (long long)size);
    LADLE_CALL(share_verdict(c->comm, local, c->func));
    for (int64_t at = 0; at < size; at += c->chunk) {
        int n = (int)(size - at < c->chunk ? size - at : c->chunk); /* io_open bounds chunk */
        rc = MPI_Bcast(b->data + at, n, MPI_BYTE, 0, c->comm);
        if (rc != MPI_SUCCESS && local == LADLE_OK) /* the other chunks still go */
            local = ladle__raise_mpi(rc, c->func, "MPI_Bcast");
    }
    b->size = (size_t)size;
    st = local;
fail:
    return st;
}

/* Check every record of the body from at against the network's (apply 0),
 * or copy them into the shards (apply 1, after a check everywhere): nothing
 * changes on a mismatch. Every rank reads the same bytes, so the checks
 * agree without a message. */
static ladle_status decode(const char *path, const ladle__bytes *b, size_t at,
                           const record *recs, int n, size_t es, int apply)
{
    const char *func = "ladle_checkpoint_load";
    for (int k = 0; k < n; k++) {
        uint32_t kn[2];
        int64_t shape[LADLE_MAX_NDIM];
        if (sizeof kn > b->size - at)
            return ladle__raise(LADLE_ERR_IO, func, "%s ends early", path);
        memcpy(kn, b->data + at, sizeof kn);
        at += sizeof kn;
        int ok = kn[0] == (uint32_t)recs[k].kind && kn[1] == (uint32_t)recs[k].info.ndim &&
                 sizeof(int64_t) * kn[1] <= b->size - at;
        if (ok) {
            memcpy(shape, b->data + at, sizeof(int64_t) * kn[1]);
            at += sizeof(int64_t) * kn[1];
            for (int d = 0; d < (int)kn[1]; d++)
                ok &= shape[d] == recs[k].info.global[d];
        }
        /* the shape is the network's now, whose size check_sizes passed */
        size_t bytes = ok ? (size_t)volume((int)kn[1], shape) * es : 0;
        if (!ok || bytes > b->size - at)
            return ladle__raise(LADLE_ERR_SHAPE, func,
                                "%s: tensor %d does not fit this network's", path, k);
        if (apply && recs[k].t->numel > 0) {
            /* the shard is cut out on the host and written through its
             * backend */
            char *shard = ladle__calloc((size_t)recs[k].t->numel * es, 1);
            if (shard == NULL)
                return ladle__raise(LADLE_ERR_ALLOC, func, "out of memory");
            place(recs[k].info.global, recs[k].info.ndim, recs[k].info.offset,
                  recs[k].t->shape, es, b->data + at, shard, 0);
            ladle_status st = ladle_tensor_write(recs[k].t, shard);
            ladle__free(shard);
            if (st != LADLE_OK)
                return st;
        }
        at += bytes;
    }
    return LADLE_OK;
}

/* The header's verdict on this network (every rank alike); *body gets
 * where the records start. */
static ladle_status check_header(const char *path, const ladle__bytes *b, ladle_dtype dt,
                                 int n, size_t *body)
{
    const char *func = "ladle_checkpoint_load";
    uint32_t head[4];
    memcpy(head, b->data + 8, sizeof head);
    size_t at = 8 + sizeof head + sizeof(int64_t);
    if (head[0] != VERSION || head[1] != (uint32_t)dt || head[2] > LADLE_CHECKPOINT_MAX_META)
        return ladle__raise(LADLE_ERR_SHAPE, func, "%s: version %u, dtype %u; this network is %s",
                            path, head[0], head[1], ladle_dtype_name(dt));
    if (head[3] != (uint32_t)n)
        return ladle__raise(LADLE_ERR_SHAPE, func,
                            "%s holds %u tensors; this network (and optimizer) %d", path,
                            head[3], n);
    if (sizeof(int64_t) * head[2] > b->size - at)
        return ladle__raise(LADLE_ERR_IO, func, "%s ends early", path);
    *body = at + sizeof(int64_t) * head[2];
    return LADLE_OK;
}

ladle_status ladle__checkpoint_load_model(const char *path, MPI_Comm comm, const ladle__model *m,
                                          ladle_optimizer *opt, int max_meta, int64_t meta[],
                                          int *nmeta, int64_t chunk)
{
    const char *func = "ladle_checkpoint_load";
    ladle_status st = LADLE_OK, local = LADLE_OK;
    record *recs = NULL;
    int n = 0;
    ladle__bytes b = {0};
    io c;
    LADLE_CALL(io_open(comm, chunk, func, &c));
    if (max_meta < 0 || (max_meta > 0 && meta == NULL))
        local = ladle__raise(LADLE_ERR_ARG, func, "room for %d integers at %p", max_meta,
                             (void *)meta);
    else
        local = preflight(path, m, opt, &recs, &n, func);
    LADLE_CALL(share_verdict(c.comm, local, func));
    local = read_file(&c, path, &b);
    ladle_dtype dt = m->dtype;
    size_t es = ladle_dtype_size(dt), body = 0;
    if (local == LADLE_OK)
        local = check_header(path, &b, dt, n, &body);
    if (local == LADLE_OK)
        local = decode(path, &b, body, recs, n, es, 0);
    /* a broadcast that failed on one rank stops them all before anything changes */
    LADLE_CALL(share_verdict(c.comm, local, func));
    uint32_t head[4];
    int64_t steps;
    memcpy(head, b.data + 8, sizeof head);
    memcpy(&steps, b.data + 8 + sizeof head, sizeof steps);
    decode(path, &b, body, recs, n, es, 1);
    if (opt && steps >= 0)
        LADLE_CALL(ladle_optimizer_set_steps(opt, steps));
    if (nmeta)
        *nmeta = (int)head[2];
    for (int k = 0; meta && k < (int)head[2] && k < max_meta; k++)
        memcpy(&meta[k], b.data + 8 + sizeof head + 8 + sizeof(int64_t) * (size_t)k,
               sizeof(int64_t));
fail:
    io_close(&c);
    ladle__free(recs);
    ladle__free(b.data);
    return st;
}

ladle_status ladle__checkpoint_load_chunked(const char *path, MPI_Comm comm,
                                            ladle_network *net, ladle_optimizer *opt,
                                            int max_meta, int64_t meta[], int *nmeta,
                                            int64_t chunk)
{
    ladle__model m = network_model(net);
    ladle_status st =
        ladle__checkpoint_load_model(path, comm, &m, opt, max_meta, meta, nmeta, chunk);
    if (st == LADLE_OK && net != NULL)
        st = ladle__network_params_written(net);
    return st;
}

ladle_status ladle_checkpoint_load(const char *path, ladle_comm comm_in, ladle_network *net,
                                   ladle_optimizer *opt, int max_meta, int64_t meta[],
                                   int *nmeta)
{
    LADLE_COMM_IN(comm, comm_in);
    return ladle__checkpoint_load_chunked(path, comm, net, opt, max_meta, meta, nmeta,
                                          LADLE_MPI_CHUNK_BYTES);
}

ladle_status ladle_checkpoint_read_meta(const char *path, ladle_comm comm_in, int max_meta,
                                        int64_t meta[], int *nmeta)
{
    LADLE_COMM_IN(comm, comm_in);
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle__bytes b = {0};
    int64_t got[LADLE_CHECKPOINT_MAX_META + 1] = {0}; /* the count, then the integers */
    io c;
    LADLE_CALL(io_open(comm, LADLE_MPI_CHUNK_BYTES, __func__, &c));
    if (path == NULL || nmeta == NULL)
        local = ladle__raise(LADLE_ERR_NULL, __func__, "%s is NULL", path ? "nmeta" : "path");
    else if (max_meta < 0 || (max_meta > 0 && meta == NULL))
        local = ladle__raise(LADLE_ERR_ARG, __func__, "room for %d integers at %p", max_meta,
                             (void *)meta);
    if (c.me == 0 && local == LADLE_OK) {
        local = ladle__read_file(__func__, path, LADLE_MAX_BYTES, &b.data, &b.size);
        if (local == LADLE_OK)
            local = verify(path, &b, __func__);
        uint32_t head[4];
        if (local == LADLE_OK) {
            memcpy(head, b.data + 8, sizeof head);
            if (head[0] != VERSION || head[2] > LADLE_CHECKPOINT_MAX_META ||
                8 + sizeof head + 8 + sizeof(int64_t) * head[2] > b.size - 24)
                local = ladle__raise(LADLE_ERR_IO, __func__,
                                     "%s: version %u with %u integers is not one this ladle "
                                     "reads",
                                     path, head[0], head[2]);
        }
        if (local == LADLE_OK) {
            got[0] = head[2];
            memcpy(&got[1], b.data + 8 + sizeof head + 8, sizeof(int64_t) * head[2]);
        }
    }
    LADLE_CALL(share_verdict(c.comm, local, __func__));
    int rc = MPI_Bcast(got, LADLE_CHECKPOINT_MAX_META + 1, MPI_INT64_T, 0, c.comm);
    LADLE_CALL(share_verdict(c.comm, rc == MPI_SUCCESS ? LADLE_OK
                                                       : ladle__raise_mpi(rc, __func__,
                                                                          "MPI_Bcast"),
                             __func__));
    *nmeta = (int)got[0];
    for (int k = 0; k < *nmeta && k < max_meta; k++)
        meta[k] = got[1 + k];
fail:
    io_close(&c);
    ladle__free(b.data);
    return st;
}

/* Deprecated: the Fortran-handle twins of 0.1 (every call takes a
 * ladle_comm now). */
ladle_status ladle_checkpoint_save_f(const char *path, MPI_Fint comm, const ladle_network *net,
                                     const ladle_optimizer *opt, int nmeta, const int64_t meta[])
{
    return ladle_checkpoint_save(path, ladle_comm_of_fortran(comm), net, opt, nmeta, meta);
}

ladle_status ladle_checkpoint_load_f(const char *path, MPI_Fint comm, ladle_network *net,
                                     ladle_optimizer *opt, int max_meta, int64_t meta[],
                                     int *nmeta)
{
    return ladle_checkpoint_load(path, ladle_comm_of_fortran(comm), net, opt, max_meta,
                                 meta, nmeta);
}

ladle_status ladle_checkpoint_read_meta_f(const char *path, MPI_Fint comm, int max_meta,
                                          int64_t meta[], int *nmeta)
{
    return ladle_checkpoint_read_meta(path, ladle_comm_of_fortran(comm), max_meta, meta,
                                      nmeta);
}

ladle_status ladle_checkpoint_check_path_f(const char *path, MPI_Fint comm)
{
    return ladle_checkpoint_check_path(path, ladle_comm_of_fortran(comm));
}
