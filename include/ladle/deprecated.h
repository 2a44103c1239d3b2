/*
 * ladle - the names of the previous release, kept one release.
 *
 * Each name below is a wrapper around its replacement, which its
 * LADLE_DEPRECATED message names; compilers warn at every call. Define
 * LADLE_NO_DEPRECATED before including ladle.h to hide them all and find
 * every old use. They go in the release after 0.2. docs/api.md gives the
 * rules that replaced them; CHANGELOG.md says how to update each call.
 */
#ifndef LADLE_DEPRECATED_H
#define LADLE_DEPRECATED_H

#ifndef LADLE_NO_DEPRECATED

#include "builder.h"
#include "checkpoint.h"
#include "comm.h"
#include "core.h"
#include "data.h"
#include "distributed.h"
#include "layers.h"
#include "models.h"
#include "partition.h"
#include "pipeline.h"
#include "tensor.h"
#include "text.h"

#if defined(__GNUC__) || defined(__clang__)
#define LADLE_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define LADLE_DEPRECATED(msg)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- tensors -------------------------------------------------------------- */

/* ladle_tensor_create takes the device (after the dtype). */
LADLE_API ladle_status ladle_tensor_create_on(ladle_dtype dtype, ladle_device device,
                                              int ndim, const int64_t shape[],
                                              ladle_tensor **t)
    LADLE_DEPRECATED("use ladle_tensor_create, which takes the device after the dtype");

/* ---- layers and distributed layers ---------------------------------------- */

/* The convolution's options are fields of ladle_conv_desc (padding_mode,
 * same, flags). */
typedef struct ladle_conv_opts {
    size_t size; /* sizeof(ladle_conv_opts), set by ladle_conv_opts_init */
    ladle_padding_mode padding_mode; /* LADLE_PAD_ZEROS by default */
    int same;                        /* 0 by default */
} ladle_conv_opts;
LADLE_API void ladle_conv_opts_init(ladle_conv_opts *o)
    LADLE_DEPRECATED("use ladle_conv_desc_init and its padding_mode and same");
LADLE_API ladle_status ladle_conv_create_ex(const ladle_conv_desc *d,
                                            const ladle_conv_opts *o,
                                            const int64_t x_shape[], ladle_dtype dtype,
                                            ladle_device device, uint64_t seed,
                                            ladle_op **op)
    LADLE_DEPRECATED("use ladle_conv_create with the desc's padding_mode and same");
LADLE_API ladle_status ladle_dist_conv_create_ex(const ladle_conv_desc *d,
                                                 const ladle_conv_opts *o,
                                                 const ladle_partition *p_x,
                                                 const int64_t x_shape[], ladle_dtype dtype,
                                                 ladle_device device, uint64_t seed,
                                                 unsigned flags, ladle_op **op)
    LADLE_DEPRECATED(
        "use ladle_dist_conv_create with the desc's padding_mode, same, flags");
/* The losses' _ex forms: ladle_loss_create takes the descriptor, and a
 * distributed loss takes its flags in it and its ndim from p_x. */
LADLE_API ladle_status ladle_loss_create_ex(const ladle_loss_desc *d, int ndim,
                                            const int64_t input_shape[], ladle_dtype dtype,
                                            ladle_device device, ladle_op **op)
    LADLE_DEPRECATED("use ladle_loss_create, which takes the ladle_loss_desc");
LADLE_API ladle_status ladle_dist_loss_create_ex(const ladle_loss_desc *d,
                                                 const ladle_partition *p_x, int ndim,
                                                 const int64_t input_shape[],
                                                 ladle_dtype dtype, ladle_device device,
                                                 unsigned flags, ladle_op **op)
    LADLE_DEPRECATED("use ladle_dist_loss_create(d, p_x, input_shape, dtype, device, op) "
                     "with the flags in d->flags");

/* ---- communicators (the _f twins) ----------------------------------------- */

/* Every communicator is a ladle_comm now: pass ladle_comm_of(comm) from C,
 * ladle_comm_of_fortran(handle) from a Fortran handle. */
LADLE_API LADLE_DEPRECATED("use ladle_partition_create(ladle_comm_of_fortran(parent), ...)")
    ladle_status ladle_partition_create_f(MPI_Fint parent, int ndim, const int shape[],
                                          const int ranks[], ladle_partition **p);
LADLE_API LADLE_DEPRECATED("use ladle_partition_comm(p).fortran") MPI_Fint
    ladle_partition_comm_f(const ladle_partition *p);
LADLE_API LADLE_DEPRECATED(
    "use ladle_checkpoint_save(path, ladle_comm_of_fortran(comm), ...)") ladle_status
    ladle_checkpoint_save_f(const char *path, MPI_Fint comm, const ladle_network *net,
                            const ladle_optimizer *opt, int nmeta, const int64_t meta[]);
LADLE_API LADLE_DEPRECATED(
    "use ladle_checkpoint_load(path, ladle_comm_of_fortran(comm), ...)") ladle_status
    ladle_checkpoint_load_f(const char *path, MPI_Fint comm, ladle_network *net,
                            ladle_optimizer *opt, int max_meta, int64_t meta[], int *nmeta);
LADLE_API LADLE_DEPRECATED(
    "use ladle_checkpoint_read_meta(path, ladle_comm_of_fortran(comm), ...)") ladle_status
    ladle_checkpoint_read_meta_f(const char *path, MPI_Fint comm, int max_meta,
                                 int64_t meta[], int *nmeta);
LADLE_API LADLE_DEPRECATED(
    "use ladle_checkpoint_check_path(path, ladle_comm_of_fortran(comm))") ladle_status
    ladle_checkpoint_check_path_f(const char *path, MPI_Fint comm);
LADLE_API LADLE_DEPRECATED("use ladle_lenet_create(d, ladle_comm_of_fortran(comm), net)")
    ladle_status
    ladle_lenet_create_f(const ladle_lenet_desc *d, MPI_Fint comm, ladle_network **net);
LADLE_API LADLE_DEPRECATED("use ladle_resnet_create(d, ladle_comm_of_fortran(comm), g)")
    ladle_status
    ladle_resnet_create_f(const ladle_resnet_desc *d, MPI_Fint comm, ladle_graph **g);
/* The _on forms of the GPT: ladle_gpt_create, ladle_gpt_layers and
 * ladle_gpt_loss_create take the communicator (MPI_COMM_SELF's: one rank). */
LADLE_API LADLE_DEPRECATED("use ladle_gpt_create(d, ladle_comm_of(comm), g)") ladle_status
    ladle_gpt_create_on(const ladle_gpt_desc *d, MPI_Comm comm, ladle_graph **g);
LADLE_API LADLE_DEPRECATED("use ladle_gpt_layers(d, ladle_comm_of(comm), ...)") ladle_status
    ladle_gpt_layers_on(const ladle_gpt_desc *d, MPI_Comm comm, int first, int count,
                        ladle_op *layers[]);
LADLE_API
    LADLE_DEPRECATED("use ladle_gpt_loss_create(d, ladle_comm_of(comm), loss)") ladle_status
    ladle_gpt_loss_create_on(const ladle_gpt_desc *d, MPI_Comm comm, ladle_op **loss);

/* ---- data and text -------------------------------------------------------- */

/* The augmentation is part of ladle_batch_desc (crop_pad, flip). */
typedef struct ladle_augment_options {
    size_t size;      /* sizeof(ladle_augment_options), set by _init */
    int64_t crop_pad; /* p: 0 (no crop) to the image's larger side */
    int flip;         /* 0 or 1 */
} ladle_augment_options;
LADLE_API void ladle_augment_options_init(ladle_augment_options *o)
    LADLE_DEPRECATED("use ladle_batch_desc_init and its crop_pad and flip");
LADLE_API ladle_status ladle_dataset_batch_ex(const ladle_dataset *ds, uint64_t seed,
                                              int64_t epoch, int64_t step, int64_t batch,
                                              int64_t offset, int64_t row_off, int64_t col_off,
                                              ladle_tensor *x, ladle_tensor *labels,
                                              const ladle_augment_options *aug)
    LADLE_DEPRECATED("use ladle_dataset_batch with a ladle_batch_desc");
/* ladle_text_options is ladle_text_desc. */
typedef ladle_text_desc ladle_text_options;
LADLE_API void ladle_text_options_init(ladle_text_options *o)
    LADLE_DEPRECATED("use ladle_text_desc_init");

/* ---- pipelines ------------------------------------------------------------ */

/* ladle_pipe_sim_opts is ladle_pipe_sim_desc (deprecated: use ladle_pipe_sim_desc). */
typedef ladle_pipe_sim_desc ladle_pipe_sim_opts;
LADLE_API void ladle_pipe_sim_opts_init(ladle_pipe_sim_opts *o)
    LADLE_DEPRECATED("use ladle_pipe_sim_desc_init");
LADLE_API ladle_status ladle_pipe_simulate_ex(const ladle_pipe_schedule *sched,
                                              const ladle_pipe_costs *costs,
                                              const ladle_pipe_sim_opts *opts,
                                              ladle_pipe_sim *sim)
    LADLE_DEPRECATED("use ladle_pipe_simulate, which takes the ladle_pipe_sim_desc");

/* ladle_pipe_plan_opts is folded into ladle_pipe_plan_desc, which also holds
 * n, f, b and w (deprecated: use ladle_pipe_plan_desc). */
typedef ladle_pipe_plan_desc ladle_pipe_plan_opts;
LADLE_API void ladle_pipe_plan_opts_init(ladle_pipe_plan_opts *o)
    LADLE_DEPRECATED("use ladle_pipe_plan_desc_init");
LADLE_API ladle_status ladle_pipe_plan_create_ex(int n, const double *f, const double *b,
                                                 const double *w,
                                                 const ladle_pipe_plan_opts *opts,
                                                 int workers, ladle_pipe_plan *plan)
    LADLE_DEPRECATED("use ladle_pipe_plan_create with a ladle_pipe_plan_desc");
LADLE_API ladle_status ladle_pipe_plan_create_range(int n, const double *f, const double *b,
                                                    const double *w, const double *mem,
                                                    double mem_cap, int workers,
                                                    int min_stages, int max_stages,
                                                    ladle_pipe_plan *plan)
    LADLE_DEPRECATED("use ladle_pipe_plan_create with the desc's min_stages, max_stages");
LADLE_API ladle_status ladle_pipe_plan_explicit_ex(int n, const double *f, const double *b,
                                                   const double *w,
                                                   const ladle_pipe_plan_opts *opts,
                                                   int stages, const int *first,
                                                   const int *replicas,
                                                   ladle_pipe_plan *plan)
    LADLE_DEPRECATED("use ladle_pipe_plan_explicit with a ladle_pipe_plan_desc");

#ifdef __cplusplus
}
#endif

#endif /* LADLE_NO_DEPRECATED */

#endif /* LADLE_DEPRECATED_H */
