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

/* ---- layers and distributed layers ---------------------------------------- */

/* ---- communicators (the _f twins) ----------------------------------------- */

/* ---- data and text -------------------------------------------------------- */

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
