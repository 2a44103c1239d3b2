/*
 * ladle/optim.h - optimizers over parameter tensors, and learning-rate
 * schedules.
 *
 * An optimizer updates a set of (parameter, gradient) pairs in place, with
 * the semantics of the common frameworks' SGD, Adam and AdamW, and keeps its
 * state (momentum and moment buffers) per parameter. Parameters come from
 * layers (ladle_optimizer_add_op) or from the caller. None of these calls
 * is collective: in a distributed network each rank steps the parameters it
 * owns.
 */
#ifndef LADLE_OPTIM_H
#define LADLE_OPTIM_H

#include "comm.h"
#include "core.h"
#include "op.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ladle_optimizer_kind {
    /* p -= lr * v, v = momentum * v + (1 - dampening) * g (v = g at first),
     * g = grad + weight_decay * p; Nesterov uses g + momentum * v */
    LADLE_OPT_SGD = 0,
    /* Adam with L2 weight decay folded into the gradient */
    LADLE_OPT_ADAM = 1,
    /* Adam with decoupled weight decay: p -= lr * weight_decay * p first */
    LADLE_OPT_ADAMW = 2
} ladle_optimizer_kind;

typedef struct ladle_optimizer_desc {
    size_t size; /* sizeof(ladle_optimizer_desc), set by ladle_optimizer_desc_init (checked by the calls that take it) */
    ladle_optimizer_kind kind;
    double lr;
    double momentum, dampening; /* SGD */
    int nesterov;               /* SGD, nonzero: Nesterov momentum; needs
                                   momentum > 0 and dampening 0 */
    double beta1, beta2, eps;   /* Adam, AdamW */
    double weight_decay;
} ladle_optimizer_desc;

/* The frameworks' defaults: SGD without momentum; Adam(W) betas 0.9 and
 * 0.999, eps 1e-8; weight decay 0 (AdamW 0.01). Local. */
LADLE_API void ladle_optimizer_desc_init(ladle_optimizer_desc *d, ladle_optimizer_kind kind,
                                         double lr);

typedef struct ladle_optimizer ladle_optimizer;

/* Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (an unknown kind, naming the
 * value; a negative or non-finite rate,
 * decay, momentum or eps, betas outside [0, 1), Nesterov without momentum),
 * LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_optimizer_create(const ladle_optimizer_desc *d,
                                              ladle_optimizer **opt);
/* Free it (its state buffers, not the parameters) and set *opt to NULL.
 * Accepts NULL. Local. */
LADLE_API ladle_status ladle_optimizer_destroy(ladle_optimizer **opt);

/* Add one parameter and its gradient (same shape and dtype, contiguous,
 * on one device, borrowed: they must outlive the optimizer), or every
 * parameter of a layer (a container's too). State buffers are allocated
 * here, zeroed. A bf16 or f16 parameter (mixed precision) gets an f32
 * master copy, made here from its value, and f32 states; its gradient is
 * of its dtype or f32. Each step updates the master from the gradient
 * (widened to f32 exactly) and rounds it,
 * once, into the parameter, so that updates smaller than the parameter's
 * last bit still add up (ladle_optimizer_master gives the copy). Returns
 * LADLE_ERR_NULL, LADLE_ERR_DTYPE (not f32, f64, bf16 or f16, or two
 * dtypes), LADLE_ERR_SHAPE (the gradient's shape is not the
 * parameter's: same element count is not enough), LADLE_ERR_ARG (not
 * contiguous, or the parameter added twice), LADLE_ERR_DEVICE,
 * LADLE_ERR_ALLOC; the optimizer is unchanged on failure. Local. */
LADLE_API ladle_status ladle_optimizer_add_param(ladle_optimizer *opt, ladle_tensor *param,
                                                 ladle_tensor *grad);
LADLE_API ladle_status ladle_optimizer_add_op(ladle_optimizer *opt, const ladle_op *op);

/* One update of every parameter with the current learning rate; counts the
 * step (Adam's bias correction uses the count). Does not allocate. Local. */
LADLE_API ladle_status ladle_optimizer_step(ladle_optimizer *opt);
/* Zero every gradient. Local. */
LADLE_API ladle_status ladle_optimizer_zero_grad(ladle_optimizer *opt);

/* Set and read the learning rate. Local. Returns LADLE_ERR_NULL,
 * LADLE_ERR_ARG (negative or not finite). */
LADLE_API ladle_status ladle_optimizer_set_lr(ladle_optimizer *opt, double lr);
LADLE_API double ladle_optimizer_lr(const ladle_optimizer *opt);
/* Steps taken so far, and the parameters added. Local. */
LADLE_API int64_t ladle_optimizer_steps(const ladle_optimizer *opt);
LADLE_API int ladle_optimizer_num_params(const ladle_optimizer *opt);

/* The state of parameter i: state buffer k (SGD: 0 the momentum buffer;
 * Adam(W): 0 the first moment, 1 the second), or NULL. For checkpoints.
 * Local. */
LADLE_API ladle_tensor *ladle_optimizer_state(const ladle_optimizer *opt, int i, int k);
/* The f32 master copy of parameter i where the parameter is bf16 or f16
 * (NULL for f32 and f64 parameters, or i out of range): what the steps
 * update, the parameter being its rounding. For checkpoints: save it with
 * the states; after writing it back, ladle_tensor_convert(param, master)
 * brings the parameter along. Local. */
LADLE_API ladle_tensor *ladle_optimizer_master(const ladle_optimizer *opt, int i);
/* Restore the step count (with the state buffers, to resume a run). Local. */
LADLE_API ladle_status ladle_optimizer_set_steps(ladle_optimizer *opt, int64_t steps);

/* ---- dynamic loss scaling ----------------------------------------------
 *
 * With f16 gradients, small values underflow to zero: the loss's gradient
 * is multiplied by a scale S before the backward (ladle_network_set_loss_scale,
 * ladle_graph_set_loss_scale), so every gradient comes out S times too
 * large, and the scaler divides S out before the optimizer's step. Where a
 * gradient overflowed (inf or NaN on any rank of the scaler's communicator)
 * the step is skipped on every rank and S shrinks; after growth_interval
 * good steps in a row S grows. With S a power of two (the defaults keep
 * it one) scaling and unscaling are exact, so f32 and f64 training with a
 * scaler takes the same steps, to the bit, as without one, except for
 * gradients that would overflow or turn subnormal. */
typedef struct ladle_loss_scaler_desc {
    size_t size;            /* sizeof(ladle_loss_scaler_desc), set by ladle_loss_scaler_desc_init */
    double init_scale;      /* 65536 (2^16) */
    double growth_factor;   /* 2: S *= it after growth_interval good steps */
    double backoff_factor;  /* 0.5: S *= it after a skipped step */
    int64_t growth_interval; /* 2000 */
} ladle_loss_scaler_desc;

/* The defaults above (PyTorch's GradScaler's), size set. A field left 0
 * also means its default. Accepts NULL. Local. */
LADLE_API void ladle_loss_scaler_desc_init(ladle_loss_scaler_desc *d);

typedef struct ladle_loss_scaler ladle_loss_scaler;

/* A scaler whose skip decisions are agreed over comm: every rank that
 * holds gradients of the model (all data-parallel replicas and model
 * shards) must be in it, and every member calls ladle_loss_scaler_step
 * together. Local; nothing is sent here. Returns LADLE_ERR_NULL,
 * LADLE_ERR_ARG (a scale not finite and > 0, growth <= 1 or not finite,
 * backoff outside (0, 1), growth_interval < 0), LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_loss_scaler_create(const ladle_loss_scaler_desc *d, ladle_comm comm,
                                                ladle_loss_scaler **s);
/* Free it and set *s to NULL. Accepts NULL. Local. */
LADLE_API ladle_status ladle_loss_scaler_destroy(ladle_loss_scaler **s);

/* The scale to multiply the loss's gradient by for the next backward.
 * Local; 0 for NULL. */
LADLE_API double ladle_loss_scaler_scale(const ladle_loss_scaler *s);

/* Divide the scale out of opt's gradients now, so that they can be read
 * or clipped before the step: checks that every gradient is finite (on
 * every rank of the scaler's communicator) into *finite (may be NULL) and
 * multiplies the f32 and f64 gradients by 1 / S in place (a 2-byte
 * gradient is unscaled in f32 inside the step, as it could not hold the
 * small values). Optional: ladle_loss_scaler_step does it where it was not
 * done. Collective over the scaler's communicator. Returns LADLE_ERR_NULL,
 * LADLE_ERR_ARG (called twice before a step), LADLE_ERR_MPI, a backend's
 * status. */
LADLE_API ladle_status ladle_loss_scaler_unscale(ladle_loss_scaler *s, ladle_optimizer *opt,
                                                 int *finite);
/* Unscale (if not done), then ladle_optimizer_step(opt) where every
 * gradient on every rank is finite, else skip the step (parameters,
 * states and the step count unchanged) and count it; then update S.
 * *stepped (may be NULL) says which. Collective over the scaler's
 * communicator. Returns LADLE_ERR_NULL, LADLE_ERR_MPI, the optimizer's
 * status. */
LADLE_API ladle_status ladle_loss_scaler_step(ladle_loss_scaler *s, ladle_optimizer *opt,
                                              int *stepped);
/* Steps skipped so far, and the good steps since S last changed. Local;
 * 0 for NULL. */
LADLE_API int64_t ladle_loss_scaler_skipped(const ladle_loss_scaler *s);
LADLE_API int64_t ladle_loss_scaler_good_steps(const ladle_loss_scaler *s);
/* Restore the scale and the good-step count (to resume a run from a
 * checkpoint). Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (a scale not
 * finite and > 0, a negative count). */
LADLE_API ladle_status ladle_loss_scaler_set_state(ladle_loss_scaler *s, double scale,
                                                   int64_t good_steps);

/* ---- learning-rate schedules ------------------------------------------- */

typedef enum ladle_lr_kind {
    LADLE_LR_CONSTANT = 0,
    LADLE_LR_STEP = 1,   /* base * gamma^floor(t / step_size) */
    LADLE_LR_COSINE = 2  /* min + (base - min) (1 + cos(pi t / T)) / 2, then min */
} ladle_lr_kind;

typedef struct ladle_lr_schedule {
    size_t size; /* sizeof(ladle_lr_schedule), set by ladle_lr_schedule_init (checked by the calls that take it) */
    ladle_lr_kind kind;
    double base_lr;
    int64_t step_size; /* step */
    double gamma;      /* step */
    int64_t total_steps; /* cosine: T, counted after the warm-up */
    double min_lr;       /* cosine */
    /* linear warm-up from base * warmup_start to base over the first
     * warmup_steps steps; the schedule proper starts after it */
    int64_t warmup_steps;
    double warmup_start;
} ladle_lr_schedule;

/* kind and base_lr; step_size 1, gamma 0.1, total_steps 1, min_lr 0, no
 * warm-up; size set. Accepts NULL. Local. */
LADLE_API void ladle_lr_schedule_init(ladle_lr_schedule *s, ladle_lr_kind kind, double base_lr);
/* The learning rate of step t (0-based); 0 for s NULL or a negative step,
 * NaN for a schedule whose size field is not set (ladle_lr_schedule_init
 * sets it). Local; a pure function. */
LADLE_API double ladle_lr_at(const ladle_lr_schedule *s, int64_t step);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_OPTIM_H */
