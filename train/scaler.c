/* Dynamic loss scaling (see ladle/optim.h): the skip decision agreed over
 * a communicator, the scale's growth and backoff. */
#include <math.h>

#include "src/op/op_impl.h"

struct ladle_loss_scaler {
    ladle_loss_scaler_desc d;
    MPI_Comm comm;
    double scale;
    int64_t good, skipped;
    /* the optimizer unscaled since its last step, and what was found */
    const ladle_optimizer *unscaled;
    int finite;
};

void ladle_loss_scaler_desc_init(ladle_loss_scaler_desc *d)
{
    if (!LADLE_DESC_START(d))
        return;
    d->init_scale = 65536.0;
    d->growth_factor = 2.0;
    d->backoff_factor = 0.5;
    d->growth_interval = 2000;
}

static int good_scale(double s) { return isfinite(s) && s > 0; }

ladle_status ladle_loss_scaler_create(const ladle_loss_scaler_desc *d, ladle_comm comm,
                                      ladle_loss_scaler **out)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    LADLE_NOT_NULL(out);
    ladle_loss_scaler_desc e = *d;
    ladle_loss_scaler_desc def;
    ladle_loss_scaler_desc_init(&def);
    if (e.init_scale == 0)
        e.init_scale = def.init_scale;
    if (e.growth_factor == 0)
        e.growth_factor = def.growth_factor;
    if (e.backoff_factor == 0)
        e.backoff_factor = def.backoff_factor;
    if (e.growth_interval == 0)
        e.growth_interval = def.growth_interval;
    LADLE_CHECK(good_scale(e.init_scale), LADLE_ERR_ARG,
                "the initial scale %g must be finite and > 0", e.init_scale);
    LADLE_CHECK(isfinite(e.growth_factor) && e.growth_factor > 1, LADLE_ERR_ARG,
                "the growth factor %g must be finite and > 1", e.growth_factor);
    LADLE_CHECK(e.backoff_factor > 0 && e.backoff_factor < 1, LADLE_ERR_ARG,
                "the backoff factor %g must lie in (0, 1)", e.backoff_factor);
    LADLE_CHECK(e.growth_interval > 0, LADLE_ERR_ARG,
                "the growth interval %lld must be > 0", (long long)e.growth_interval);
    LADLE_CHECK(ladle_comm_mpi(comm) != MPI_COMM_NULL, LADLE_ERR_ARG,
                "the scaler needs a communicator, not MPI_COMM_NULL");
    ladle_loss_scaler *s = ladle__calloc(1, sizeof *s);
    LADLE_CHECK(s != NULL, LADLE_ERR_ALLOC, "out of memory");
    s->d = e;
    s->comm = ladle_comm_mpi(comm);
    s->scale = e.init_scale;
    *out = s;
fail:
    return st;
}

ladle_status ladle_loss_scaler_destroy(ladle_loss_scaler **s)
{
    if (s == NULL || *s == NULL)
        return LADLE_OK;
    ladle__free(*s);
    *s = NULL;
    return LADLE_OK;
}

double ladle_loss_scaler_scale(const ladle_loss_scaler *s) { return s ? s->scale : 0.0; }
int64_t ladle_loss_scaler_skipped(const ladle_loss_scaler *s) { return s ? s->skipped : 0; }
int64_t ladle_loss_scaler_good_steps(const ladle_loss_scaler *s) { return s ? s->good : 0; }

ladle_status ladle_loss_scaler_set_state(ladle_loss_scaler *s, double scale, int64_t good)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(s);
    LADLE_CHECK(good_scale(scale) && good >= 0, LADLE_ERR_ARG,
                "scale %g must be finite and > 0 and the good-step count %lld >= 0", scale,
                (long long)good);
    s->scale = scale;
    s->good = good;
fail:
    return st;
}

ladle_status ladle_loss_scaler_unscale(ladle_loss_scaler *s, ladle_optimizer *opt, int *finite)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(s);
    LADLE_NOT_NULL(opt);
    LADLE_CHECK(s->unscaled == NULL, LADLE_ERR_ARG,
                "the gradients were unscaled already since the last step");
    int local = 1, all = 1;
    ladle_status lst = ladle__optimizer_grads_finite(opt, &local);
    /* every rank learns every rank's outcome: a failure anywhere fails
     * the call everywhere rather than leaving ranks apart */
    LADLE_CALL(ladle__agree(s->comm, lst, 0, __func__));
    LADLE_CHECK(MPI_Allreduce(&local, &all, 1, MPI_INT, MPI_MIN, s->comm) == MPI_SUCCESS,
                LADLE_ERR_MPI, "MPI_Allreduce of the finiteness failed");
    if (all)
        LADLE_CALL(ladle__optimizer_unscale(opt, 1.0 / s->scale));
    s->unscaled = opt;
    s->finite = all;
    if (finite)
        *finite = all;
fail:
    return st;
}

ladle_status ladle_loss_scaler_step(ladle_loss_scaler *s, ladle_optimizer *opt, int *stepped)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(s);
    LADLE_NOT_NULL(opt);
    if (stepped)
        *stepped = 0;
    if (s->unscaled != opt) {
        s->unscaled = NULL;
        LADLE_CALL(ladle_loss_scaler_unscale(s, opt, NULL));
    }
    s->unscaled = NULL;
    if (!s->finite) {
        ladle__optimizer_forget_scale(opt);
        s->skipped++;
        s->good = 0;
        s->scale *= s->d.backoff_factor;
        /* the smallest normal double: a scale cannot shrink to zero */
        if (s->scale < 0x1p-1022)
            s->scale = 0x1p-1022;
        return LADLE_OK;
    }
    LADLE_CALL(ladle_optimizer_step(opt));
    if (stepped)
        *stepped = 1;
    if (++s->good >= s->d.growth_interval) {
        s->good = 0;
        double next = s->scale * s->d.growth_factor;
        if (isfinite(next))
            s->scale = next;
    }
fail:
    return st;
}
