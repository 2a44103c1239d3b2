/*
 * Private declarations shared by the library's sources. Never installed.
 */
#ifndef LADLE_INTERNAL_H
#define LADLE_INTERNAL_H

#include <mpi.h>
#include <stdint.h>
#include <string.h>

#include "ladle.h"

/* The CUDA backend's C++ sources include this header too. */
#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define LADLE_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define LADLE_PRINTF(f, a)
#endif

/* Record an error for the calling thread ("[rank R] func: message") and
 * return its status. */
ladle_status ladle__raise(ladle_status status, const char *func, const char *fmt, ...)
    LADLE_PRINTF(3, 4);

/* The same, keeping the calling thread's last message as the reason:
 * "[rank R] func: <fmt>: <the last message without its own prefix>". For a
 * caller that adds what it was doing to a callee's failure. */
ladle_status ladle__raise_after(ladle_status status, const char *func, const char *fmt, ...)
    LADLE_PRINTF(3, 4);

/* The same without the "[rank R]" prefix, for a failure that means MPI
 * itself cannot be asked (another MPI's calls would fault on ours). */
ladle_status ladle__raise_plain(ladle_status status, const char *func, const char *fmt, ...)
    LADLE_PRINTF(3, 4);

/* Turn an MPI error code into a recorded LADLE_ERR_MPI. */
ladle_status ladle__raise_mpi(int mpi_code, const char *func, const char *call);

/*
 * The error-handling idiom: a function declares `ladle_status st = LADLE_OK;`
 * and ends with a `fail:` label that cleans up and returns st.
 * LADLE_CHECK raises, LADLE_CALL propagates a callee's status, LADLE_MPI
 * wraps an MPI call.
 */
#define LADLE_CHECK(cond, code, ...)                                                       \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            st = ladle__raise((code), __func__, __VA_ARGS__);                              \
            goto fail;                                                                     \
        }                                                                                  \
    } while (0)

#define LADLE_CALL(expr)                                                                   \
    do {                                                                                   \
        st = (expr);                                                                       \
        if (st != LADLE_OK)                                                                \
            goto fail;                                                                     \
    } while (0)

#define LADLE_MPI(expr)                                                                    \
    do {                                                                                   \
        int ladle_mpi_rc_ = (expr);                                                        \
        if (ladle_mpi_rc_ != MPI_SUCCESS) {                                                \
            st = ladle__raise_mpi(ladle_mpi_rc_, __func__, #expr);                         \
            goto fail;                                                                     \
        }                                                                                  \
    } while (0)

#define LADLE_NOT_NULL(ptr) LADLE_CHECK((ptr) != NULL, LADLE_ERR_NULL, "%s is NULL", #ptr)

/* A caller's descriptor struct: its first field, size, must be at least
 * first (the struct's size in the release that introduced it; ladle reads
 * only fields that lie within size). LADLE_ERR_ARG "descriptor size N,
 * expected M" otherwise. Local. */
ladle_status ladle__check_size(const char *func, const char *what, size_t size, size_t first);
#define LADLE_CHECK_SIZE(d)                                                                \
    LADLE_CALL(ladle__check_size(__func__, #d, (d)->size, sizeof *(d)))

/* The start of every descriptor's _init: 0 for a NULL d (the init then does
 * nothing), else 1 with *d zeroed and its size set (what LADLE_CHECK_SIZE
 * reads). */
#define LADLE_DESC_START(d)                                                                \
    ((d) != NULL && (memset((d), 0, sizeof *(d)), (d)->size = sizeof *(d), 1))

/* 1 for the floating-point dtypes the operators compute in. */
int ladle__is_real(ladle_dtype dtype);
/* bf16 or f16: the 2-byte storage formats (src/core/half.h) */
int ladle__is_half(ladle_dtype dtype);

/* Memory accounting (src/core/memtrack.c). A counted block's header holds
 * its acct: the tracker that counted it (NULL: none) and its bytes and kind.
 * ladle__mem_count fills one from the calling thread's tracker under the
 * kind of the innermost ladle__mem_kind_begin (OTHER without one, and for
 * host objects always); ladle__mem_uncount takes it off again. */
typedef struct ladle__mem_acct {
    ladle_memory_tracker *tracker;
    uint64_t bytes_kind;
} ladle__mem_acct;
void ladle__mem_count(ladle__mem_acct *a, size_t bytes, int host_object);
void ladle__mem_uncount(const ladle__mem_acct *a);
/* What the calling thread allocates until ladle__mem_kind_end(prev) is of
 * kind (nested scopes: the innermost wins). Returns prev. */
int ladle__mem_kind_begin(ladle_memory_kind kind);
void ladle__mem_kind_end(int prev);

/* Allocation helpers: zeroed memory, or NULL (the caller raises). */
void *ladle__calloc(size_t count, size_t size);
void ladle__free(void *p);
/* Grow or shrink a block of ladle__calloc (NULL: a new one); the old block
 * stays on failure. */
void *ladle__realloc(void *p, size_t bytes);
/* The calling thread's allocator, or NULL for ladle's own (the C library
 * and the backends' own memory). */
const ladle_allocator *ladle__allocator(void);

/* Families of MPI implementations that share one binary interface. */
typedef enum ladle__mpi_family {
    LADLE__MPI_UNKNOWN = 0,
    LADLE__MPI_MPICH = 1, /* MPICH and its derivatives (Intel MPI, MVAPICH...) */
    LADLE__MPI_OPENMPI = 2
} ladle__mpi_family;

/* The family an MPI's name or version text belongs to ("MPICH 4.0.2",
 * "Open MPI v4.1.4, package...", "Intel(R) MPI Library..."). */
ladle__mpi_family ladle__mpi_family_of(const char *name);

/* 1 if a program of MPI `other` can use a libladle built with MPI `build`
 * (one family; two unknown names only when their first words agree). */
int ladle__mpi_compatible(const char *build, const char *other);

/* Refuse another MPI than the build's, before any MPI call that takes a
 * handle: caller_header (LADLE_MPI_HEADER of the caller's compile; NULL
 * when unknown) and the running MPI's MPI_Get_library_version. Raises
 * LADLE_ERR_MPI without a rank (MPI cannot be asked for one). Local. */
ladle_status ladle__mpi_abi_check(const char *func, const char *caller_header);

/* The status for "MPI is not initialised": LADLE_ERR_STATE, or
 * LADLE_ERR_MPI naming the other MPI when another family's library is
 * loaded in the process (the program initialised that one). */
ladle_status ladle__mpi_not_initialised(const char *func);

/* MPI usable now, for func: ladle's own MPI (ladle__mpi_abi_check first, as
 * another MPI's library would misread every handle), initialised and not
 * finalised (LADLE_ERR_STATE "MPI has been finalised: " and why_not). */
ladle_status ladle__mpi_ready(const char *func, const char *why_not);

/* The communicator of a Fortran handle (MPI_Comm_f2c), after the ABI
 * check and a check that MPI is initialised and not finalised (f2c needs
 * both). Local. */
ladle_status ladle__comm_f2c(const char *func, MPI_Fint handle, MPI_Comm *comm);
/* The first statement of a public call that takes a ladle_comm: declares
 * the MPI_Comm var of the caller's handle, or returns ladle__comm_f2c's
 * failure before the call has made anything. */
#define LADLE_COMM_IN(var, handle)                                                         \
    MPI_Comm var = MPI_COMM_NULL;                                                          \
    do {                                                                                   \
        ladle_status ladle_comm_st_ = ladle__comm_f2c(__func__, (handle).fortran, &var);   \
        if (ladle_comm_st_ != LADLE_OK)                                                    \
            return ladle_comm_st_;                                                         \
    } while (0)

/* 1 when MPI is initialised and not yet finalised. */
int ladle__mpi_usable(void);

/* Waiting on MPI requests. MPI's blocking waits busy-poll: the fastest
 * choice when every rank has its own core, and a disaster (milliseconds per
 * message) when ranks outnumber cores, since the waiting ranks burn the
 * time slices the working ones need. ladle decides per process: SPIN (MPI's
 * own blocking waits) when the launcher says the node's ranks fit its cores,
 * YIELD (poll, then give the core away) when they do not, and HYBRID (spin
 * 50 us, then yield) when it cannot tell. LADLE_WAIT=spin|yield overrides. */
typedef enum { LADLE_WAIT_SPIN, LADLE_WAIT_YIELD, LADLE_WAIT_HYBRID } ladle_wait_policy;
ladle_wait_policy ladle__wait_policy(void);
/* One back-off step of a polling loop; *since starts at 0 and remembers when
 * the loop began to wait. */
void ladle__poll_pause(ladle_wait_policy policy, double *since);
/* Wait for one request under the process's policy. */
int ladle__wait(MPI_Request *req);
/* A collective all-reduce that waits politely (MPI_Iallreduce + ladle__wait). */
int ladle__allreduce(const void *in, void *out, int count, MPI_Datatype type, MPI_Op op,
                     MPI_Comm comm);
/* The count n of one MPI message as MPI's int, for func: raises
 * LADLE_ERR_ARG for a negative n and LADLE_ERR_UNSUPPORTED, naming `what`
 * and n, for one above INT_MAX (such a message must be cut into chunks, or
 * refused). *out is set only on success. Local. */
ladle_status ladle__mpi_count(const char *func, const char *what, int64_t n, int *out);
/* The most bytes ladle moves in one MPI message it cuts itself (checkpoint
 * payloads): 1 GiB, safely below the 2 GiB that int byte counts reach. */
#define LADLE_MPI_CHUNK_BYTES ((int64_t)1 << 30)

/*
 * Checked arithmetic for sizes that come from outside (shapes, headers,
 * windows, buffer lengths): each stores the result and returns 1, or returns
 * 0 when the exact result does not fit in int64_t. Callers raise a status
 * that names the quantity that was too large.
 */
static inline int ladle__add_ok(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}
static inline int ladle__mul_ok(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
/* The product of n non-negative extents, or -1 when one is negative or the
 * product exceeds limit (pass INT64_MAX for "fits in int64_t"). */
int64_t ladle__volume_within(int n, const int64_t *extents, int64_t limit);
/* count elements of es bytes as a byte count; 0 when it exceeds
 * LADLE_MAX_BYTES, the largest buffer ladle allocates or moves in one piece. */
int ladle__bytes_ok(int64_t count, size_t es, size_t *bytes);
#define LADLE_MAX_BYTES ((int64_t)1 << 60)
/* The most elements of a tensor (a byte count of the widest dtype that
 * still fits LADLE_MAX_BYTES), and so the largest extent, stride, window
 * or padding any size computation of ladle takes. */
#define LADLE_MAX_ELEMS (LADLE_MAX_BYTES / 8)

/* The output length of a window along one dimension, as the frameworks
 * compute it: (n + 2p - d(k-1) - 1) / s + 1, rounded down (up in ceil mode,
 * where the last window must still start inside the input or its left
 * padding); 0 when the dilated kernel d(k-1)+1 is larger than the padded
 * input n + 2p. Raises LADLE_ERR_ARG, naming `what` (e.g. "dimension 2")
 * and the value, for k, s or d below 1, p below 0, or a padded input, a
 * dilated kernel or a stride above LADLE_MAX_ELEMS; below that bound no
 * sum or product of the planners (s*b - p, s*(b+c-1) + d(k-1) - p + 1 for
 * output blocks [b, b+c)) can overflow. */
ladle_status ladle__window_length(const char *func, const char *what, int64_t n, int64_t k,
                                  int64_t s, int64_t p, int64_t d, int ceil_mode,
                                  int64_t *m);

/* The system's text for errno value err, into buf (thread-safe). */
const char *ladle__strerror(int err, char *buf, size_t cap);
/* Read the regular file at path, at most max bytes, whole into *data
 * (NUL-terminated; *size bytes without the NUL; release with ladle__free).
 * Raises, for func, LADLE_ERR_IO with the step that failed and the
 * system's reason (a missing file, a directory, a device, a read error),
 * or LADLE_ERR_ALLOC. Local. */
ladle_status ladle__read_file(const char *func, const char *path, int64_t max, char **data,
                              size_t *size);

/* Write n pieces (data[k], sizes[k] bytes) as the file at path, safely:
 * into path.tmp, synced to the disk, then renamed over path, so a reader
 * sees the old file or the new one, never a part. On failure path.tmp is
 * removed and an existing file at path is left untouched; the status
 * (LADLE_ERR_IO, raised for func) names the step that failed (create,
 * write, flush, close, rename) and the system's reason. A path that is a
 * directory is refused. Local. */
ladle_status ladle__write_file(const char *func, const char *path, int n,
                               const void *const *data, const size_t *sizes);
/* Whether ladle__write_file could write path: not a directory, path.tmp
 * can be created (and is removed again). Raises LADLE_ERR_IO with the
 * reason. Local. */
ladle_status ladle__check_writable(const char *func, const char *path);

/* Format "AxBxC" into buf (size cap). */
const char *ladle__fmt_shape64(char *buf, size_t cap, int ndim, const int64_t *shape);
const char *ladle__fmt_shape(char *buf, size_t cap, int ndim, const int *shape);

/* 64-bit FNV-1a, for agreeing on arguments across ranks. */
uint64_t ladle__hash(uint64_t h, const void *data, size_t bytes);
#define LADLE_HASH_INIT 1469598103934665603ull

/* Counter-based random numbers (src/core/random.h, where the definitions
 * are, so that device code can use them too). */
uint64_t ladle__random_bits(uint64_t seed, uint64_t stream, uint64_t counter);
double ladle__random_uniform(uint64_t seed, uint64_t stream, uint64_t counter);
double ladle__random_normal(uint64_t seed, uint64_t stream, uint64_t counter);

/* Parameter i of an optimizer (borrowed), or NULL: for checking that an
 * optimizer holds a network's parameters. */
ladle_tensor *ladle__optimizer_param(const ladle_optimizer *opt, int i);
/* For the loss scaler (train/scaler.c): whether every gradient of opt is
 * finite (local); every gradient multiplied by inv (the f32 and f64 ones
 * now, in place; the 2-byte ones once widened in the next step); and that
 * pending factor dropped (a skipped step). */
ladle_status ladle__optimizer_grads_finite(ladle_optimizer *opt, int *finite);
ladle_status ladle__optimizer_unscale(ladle_optimizer *opt, double inv);
void ladle__optimizer_forget_scale(ladle_optimizer *opt);

/* ---- tensors ---- */
struct ladle_tensor {
    ladle_dtype dtype;
    ladle_device device;
    int ndim;
    int owned;
    int64_t numel;
    int64_t shape[LADLE_MAX_NDIM];
    int64_t strides[LADLE_MAX_NDIM];
    void *data;
};

/* Element i of an i64 tensor, exactly (ladle_tensor_get's doubles round
 * above 2^53): for a failing label. */
ladle_status ladle__tensor_get_i64(const ladle_tensor *t, int64_t i, int64_t *v);
/* A contiguous tensor of the shape that owns no memory, its data NULL: a
 * view whose data the caller points into other tensors' memory (t->data,
 * unchecked) before each use, so that a call makes views without
 * allocating. Destroying it frees the struct alone. Local. */
/* ladle_tensor_create, its memory counted as kind (ladle_memory_track). */
ladle_status ladle__tensor_create_as(ladle_memory_kind kind, ladle_dtype dtype,
                                     ladle_device device, int ndim, const int64_t shape[],
                                     ladle_tensor **t);
ladle_status ladle__tensor_view(ladle_dtype dtype, ladle_device device, int ndim,
                                const int64_t shape[], ladle_tensor **t);
/* Let contiguous t live in caller memory data (of t's device, as far as
 * its backend can tell; aligned to its elements; NULL only for zero
 * volume): with apply 0 only check, raising for func; with apply 1 also
 * free t's own memory and borrow data from then on. Local. */
ladle_status ladle__tensor_adopt(ladle_tensor *t, void *data, int apply, const char *func);
/* t *= alpha through t's backend (contiguous t). */
ladle_status ladle__tensor_scale(ladle_tensor *t, double alpha);

/* Row-major strides of shape. */
void ladle__contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
/* Check a shape (ndim in range, extents non-negative, volume fits) and
 * return its volume in *numel. */
ladle_status ladle__check_shape(const char *func, int ndim, const int64_t *shape,
                                int64_t *numel);

/* ---- partitions ---- */

/* What every partition made from one ladle_partition_create shares: a
 * private duplicate of the parent communicator. */
typedef struct ladle_root {
    int refs;
    MPI_Comm comm;
    MPI_Group group;
    int size;
    int rank;
} ladle_root;

struct ladle_partition {
    int refs;
    ladle_root *root;
    int ndim;
    int shape[LADLE_MAX_NDIM];
    int size;
    int *ranks; /* ranks[r]: root-communicator rank of partition rank r */
    int rank;   /* this rank's partition rank, or -1 */
    int coords[LADLE_MAX_NDIM];
    MPI_Comm comm;
};

ladle_partition *ladle__partition_retain(const ladle_partition *p);
void ladle__partition_release(ladle_partition *p);
/* Row-major unravel / ravel of partition ranks. */
void ladle__unravel(int ndim, const int *shape, int r, int *coords);
int ladle__ravel(int ndim, const int *shape, const int *coords);
/* Partition rank of root rank rr, or -1 (a linear scan). */
int ladle__partition_rank_of_root(const ladle_partition *p, int rr);
/* 1 if a and b may be combined in one operator (same parent process set). */
int ladle__partitions_compatible(const ladle_partition *a, const ladle_partition *b);
/* Agree over comm on the outcome of a collective call: returns local if it
 * failed, LADLE_ERR_REMOTE if another rank failed, LADLE_ERR_ARG if the ranks
 * passed different hashes of their arguments, else LADLE_OK. */
ladle_status ladle__agree(MPI_Comm comm, ladle_status local, uint64_t hash,
                          const char *func);
/* Fold a partition's shape and members into a hash. */
uint64_t ladle__partition_hash(uint64_t h, const ladle_partition *p);

/* ---- layouts ---- */
struct ladle_layout {
    int refs;
    ladle_partition *p;
    int ndim;
    int block;         /* every member holds the whole block */
    int decomposition; /* boxes tile the global index space */
    int64_t global[LADLE_MAX_NDIM];
    /* Decomposed layouts: along dim d, coordinate i has box [start, start+size). */
    int64_t *start[LADLE_MAX_NDIM];
    int64_t *size[LADLE_MAX_NDIM];
    /* Explicit layouts: rank r's box is off[r*ndim + d], ext[r*ndim + d]. */
    int64_t *off, *ext;
};

/* A layout from one box per partition rank (offsets and shapes, ndim
 * entries each, rank-major): any tensor dimension may follow any partition
 * dimension, or none (replicated). Boxes may overlap. */
ladle_status ladle__layout_create_explicit(const ladle_partition *p, int ndim,
                                           const int64_t *global, const int64_t *offsets,
                                           const int64_t *shapes, ladle_layout **l);

/* A rectilinear layout from explicit starts and sizes per dimension and
 * coordinate (boxes may overlap or leave the global index space). */
ladle_status ladle__layout_create_boxes(const ladle_partition *p, int ndim,
                                        const int64_t *global, const int64_t *const *starts,
                                        const int64_t *const *sizes, ladle_layout **l);
ladle_layout *ladle__layout_retain(const ladle_layout *l);
uint64_t ladle__layout_hash(uint64_t h, const ladle_layout *l);
/* Balanced split of n over parts: size and start of block i. */
int64_t ladle__balanced_size(int64_t n, int parts, int i);
int64_t ladle__balanced_start(int64_t n, int parts, int i);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_INTERNAL_H */
