/*
 * ladle/core.h - version, status codes, errors, element types and devices.
 *
 * Every fallible ladle call returns a ladle_status. LADLE_OK is zero; every
 * other value names a class of failure, and ladle_error_message() returns the
 * calling thread's last message, which names the rank, the function and the
 * failing detail. Every call in this header is local (none communicates).
 */
#ifndef LADLE_CORE_H
#define LADLE_CORE_H

#include <stddef.h>
#include <stdint.h>

#if defined(LADLE_BUILDING) && defined(__GNUC__)
#define LADLE_API __attribute__((visibility("default")))
#else
#define LADLE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define LADLE_VERSION_MAJOR 0
#define LADLE_VERSION_MINOR 2
#define LADLE_VERSION_PATCH 0
#define LADLE_VERSION_STRING "0.2.0"
/* One integer that increases with every release: major*10000 + minor*100 + patch. */
#define LADLE_VERSION_NUMBER                                                               \
    (LADLE_VERSION_MAJOR * 10000 + LADLE_VERSION_MINOR * 100 + LADLE_VERSION_PATCH)

/* The version of the library actually linked, as a string and as a number
 * (compare with LADLE_VERSION_NUMBER to detect a header/library mismatch).
 * Local. */
LADLE_API const char *ladle_version(void);
LADLE_API int ladle_version_number(void);

/* The MPI implementation and version this libladle was built with, as the
 * build's mpi.h names it: "MPICH 4.0.2", "Open MPI 4.1.4". A program (or a
 * binding: mpi4py's MPI.Get_library_version()) must run the same family of
 * MPI; ladle_partition_create refuses another one (LADLE_ERR_MPI). Never
 * NULL, static storage. Local; callable before MPI_Init. */
LADLE_API const char *ladle_mpi_library(void);

/*
 * Status codes. The list is append-only: a value, once released, keeps its
 * number. X(name, value, description)
 */
#define LADLE_STATUS_LIST(X)                                                               \
    X(LADLE_OK, 0, "success")                                                              \
    X(LADLE_ERR_ARG, 1, "invalid argument")                                                \
    X(LADLE_ERR_NULL, 2, "null pointer argument")                                          \
    X(LADLE_ERR_SHAPE, 3, "shape mismatch")                                                \
    X(LADLE_ERR_DTYPE, 4, "element type mismatch")                                         \
    X(LADLE_ERR_DEVICE, 5, "device mismatch or device failure")                            \
    X(LADLE_ERR_PARTITION, 6, "invalid or incompatible partitions")                        \
    X(LADLE_ERR_MPI, 7, "MPI call failed")                                                 \
    X(LADLE_ERR_ALLOC, 8, "out of memory")                                                 \
    X(LADLE_ERR_UNSUPPORTED, 9, "not supported")                                           \
    X(LADLE_ERR_STATE, 10, "call out of order")                                            \
    X(LADLE_ERR_REMOTE, 11, "the call failed on another rank")                             \
    X(LADLE_ERR_IO, 12, "input/output failure")                                            \
    X(LADLE_ERR_INTERNAL, 13, "internal error")                                            \
    X(LADLE_ERR_NUMERIC, 14, "non-finite or diverging value")                              \
    X(LADLE_ERR_CALLBACK, 15, "a user callback failed")

typedef enum ladle_status {
#define LADLE_STATUS_ENUM_(name, value, text) name = value,
    LADLE_STATUS_LIST(LADLE_STATUS_ENUM_)
#undef LADLE_STATUS_ENUM_
} ladle_status;

/* A fixed description of a status code ("shape mismatch"); never NULL.
 * Local. */
LADLE_API const char *ladle_status_string(ladle_status status);

/* The symbolic name of a status code ("LADLE_ERR_SHAPE"); never NULL.
 * Local. */
LADLE_API const char *ladle_status_name(ladle_status status);

/* The calling thread's last error message, e.g.
 * "[rank 3] ladle_broadcast_create: partition 1x3 cannot broadcast to 3x1 ...".
 * Empty when no error has been raised on this thread. The text stays valid
 * until the thread's next failing ladle call. Local. */
LADLE_API const char *ladle_error_message(void);

/* Forget the calling thread's last error message. Local. */
LADLE_API void ladle_error_clear(void);

/* Element types. LADLE_I64 holds integer class labels (for classification
 * losses and data sets); the primitives and layers compute in f32 or f64.
 * LADLE_BF16 (bfloat16: 8 exponent bits, 8 significant) and LADLE_F16 (IEEE
 * binary16) are storage formats, 2 bytes an element as raw bits, the
 * layouts PyTorch's bfloat16 and float16 use: tensors of them are made,
 * copied, read, written, filled and converted (ladle_tensor_convert), on
 * every device; the layers and primitives refuse them (LADLE_ERR_DTYPE)
 * until their mixed-precision forms land (CHANGELOG says which do). */
typedef enum ladle_dtype {
    LADLE_F32 = 1,
    LADLE_F64 = 2,
    LADLE_I64 = 3,
    LADLE_BF16 = 4,
    LADLE_F16 = 5
} ladle_dtype;

/* Bytes per element, or 0 for an unknown type. Local. */
LADLE_API size_t ladle_dtype_size(ladle_dtype dtype);
/* "f32", "f64", "i64", "bf16", "f16", or "unknown". Local. */
LADLE_API const char *ladle_dtype_name(ladle_dtype dtype);

/* Where a tensor's memory lives. The device is a field of the tensor, never
 * guessed from a pointer. LADLE_GUARDED is the test device: host memory that
 * only its own kernels may touch (under AddressSanitizer any other access is
 * reported), so a run on it proves that nothing reaches device memory around
 * the backend. */
typedef enum ladle_device { LADLE_CPU = 0, LADLE_CUDA = 1, LADLE_GUARDED = 2 } ladle_device;

/* "cpu", "cuda", "guarded", or "unknown". Local. */
LADLE_API const char *ladle_device_name(ladle_device device);

/* The largest number of tensor or partition dimensions ladle handles. */
#define LADLE_MAX_NDIM 8

#ifdef __cplusplus
}
#endif

#endif /* LADLE_CORE_H */
