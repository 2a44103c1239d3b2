/* The output length of a sliding window, checked (see internal.h): the one
 * formula behind the halo exchange, convolution and pooling. */
#include "src/core/internal.h"

static ladle_status too_large(const char *func, const char *what, const char *name,
                              int64_t value)
{
    return ladle__raise(
        LADLE_ERR_ARG, func,
        "%s: %s %lld is too large (the padded input, the dilated kernel and "
        "the stride may not pass 2^57)",
        what, name, (long long)value);
}

ladle_status ladle__window_length(const char *func, const char *what, int64_t n, int64_t k,
                                  int64_t s, int64_t p, int64_t d, int ceil_mode,
                                  int64_t *m)
{
    int64_t reach = 0;
    if (k < 1 || s < 1 || p < 0 || d < 1)
        return ladle__raise(
            LADLE_ERR_ARG, func,
            "%s: kernel %lld, stride %lld, padding %lld, dilation %lld (need "
            "k>=1, s>=1, p>=0, d>=1)",
            what, (long long)k, (long long)s, (long long)p, (long long)d);
    if (n < 0 || n > LADLE_MAX_ELEMS)
        return too_large(func, what, "input extent", n);
    if (s > LADLE_MAX_ELEMS)
        return too_large(func, what, "stride", s);
    /* once p is bounded, n + 2p cannot overflow */
    if (p > LADLE_MAX_ELEMS || n + 2 * p > LADLE_MAX_ELEMS)
        return too_large(func, what, "padding", p);
    if (k > LADLE_MAX_ELEMS)
        return too_large(func, what, "kernel", k);
    if (d > LADLE_MAX_ELEMS)
        return too_large(func, what, "dilation", d);
    if (!ladle__mul_ok(d, k - 1, &reach) || reach >= LADLE_MAX_ELEMS)
        return ladle__raise(
            LADLE_ERR_ARG, func,
            "%s: the dilated kernel (dilation %lld, kernel %lld) is too large "
            "(it may not pass 2^57)",
            what, (long long)d, (long long)k);
    int64_t span = n + 2 * p - reach - 1;
    if (span < 0) {
        *m = 0;
        return LADLE_OK;
    }
    int64_t len = ceil_mode ? (span + s - 1) / s + 1 : span / s + 1;
    if (ceil_mode && (len - 1) * s >= n + p)
        len--;
    *m = len;
    return LADLE_OK;
}
