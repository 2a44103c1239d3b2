/*
 * ladle/device.h - the devices a process computes on: how many there are,
 * which one it uses, and the options of a device's backend.
 *
 * A tensor's device is a field of the tensor (ladle/core.h: LADLE_CPU,
 * LADLE_CUDA, LADLE_GUARDED). A process uses one device of each kind; for
 * CUDA that is one GPU, chosen when the process first makes a tensor or an
 * op there (or first calls ladle_device_index): the one ladle_device_select
 * named, else the one LADLE_CUDA_DEVICE names, else the node-local rank the
 * launcher sets (MPI_LOCALRANKID, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID,
 * PMI_LOCAL_RANK) modulo the GPUs there are, else the world rank modulo them.
 * Several ranks may share one GPU. Every call here is local.
 */
#ifndef LADLE_DEVICE_H
#define LADLE_DEVICE_H

#include "ladle/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How many devices of this kind the process can use: 1 for LADLE_CPU and
 * LADLE_GUARDED, the visible GPUs for LADLE_CUDA (0, with LADLE_OK, when
 * there is none). LADLE_ERR_DEVICE when ladle was built without the
 * device's backend; LADLE_ERR_NULL for a NULL count. Local. */
LADLE_API ladle_status ladle_device_count(ladle_device device, int *count);

/* Use device `index` (0 .. count - 1) of this kind, or -1 for the default
 * choice above. Only before the device is first used: once it is, choosing
 * another index is LADLE_ERR_STATE (choosing the one in use is fine).
 * LADLE_ERR_ARG for an index out of range, LADLE_ERR_DEVICE as above.
 * Local. */
LADLE_API ladle_status ladle_device_select(ladle_device device, int index);

/* The index in use, opening the device if it is not yet (LADLE_ERR_DEVICE
 * with the driver's reason when it cannot be opened: no GPU, no driver).
 * Local. */
LADLE_API ladle_status ladle_device_index(ladle_device device, int *index);

/* One line on the device in use, into buf (cap bytes, always
 * NUL-terminated, cut if longer), e.g. "cuda:0 NVIDIA H200 (sm_90, 132
 * SMs, 139.8 GiB), messages staged through pinned host memory, TF32 off".
 * Opens the device as ladle_device_index does. Local. */
LADLE_API ladle_status ladle_device_describe(ladle_device device, char *buf, size_t cap);

/* Wait until everything queued on the device has finished (kernels and
 * copies run asynchronously on a GPU: ladle waits by itself wherever the
 * host or MPI must see data, so this is for timing and for handing
 * tensors to other code). Returns the failure of any queued work, e.g.
 * LADLE_ERR_DEVICE with CUDA's text for a kernel that faulted. A no-op on
 * the CPU, and on a device not yet opened. Local; it waits for this
 * process's device only, not for other ranks. */
LADLE_API ladle_status ladle_device_synchronize(ladle_device device);

/* The options of a device's backend. */
typedef enum ladle_device_option {
    /* 1: f32 GEMMs (linear layers, convolutions) may use TF32 tensor cores,
     * faster and accurate to about 1e-3 relative; 0 (the default): they
     * round as the CPU does, to f32. Environment: LADLE_CUDA_TF32=1. */
    LADLE_DEVICE_TF32 = 1,
    /* 1: MPI is handed device memory directly (a device-aware MPI);
     * 0: every message is staged through pinned host memory. The default
     * is what the MPI says of itself when the device opens (Debian's MPICH
     * and Open MPI: staged). Takes effect for ops created afterwards.
     * Environment: LADLE_CUDA_MPI=direct|staged. Reading it opens the
     * device. */
    LADLE_DEVICE_MPI_DIRECT = 2
} ladle_device_option;

/* Set or read an option. LADLE_ERR_UNSUPPORTED for an option the device
 * does not have (the CPU has neither: its GEMM is f32 and MPI reads its
 * memory), LADLE_ERR_ARG for a value other than 0 or 1. Local. */
LADLE_API ladle_status ladle_device_set(ladle_device device, ladle_device_option option,
                                        int value);
LADLE_API ladle_status ladle_device_get(ladle_device device, ladle_device_option option,
                                        int *value);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_DEVICE_H */
