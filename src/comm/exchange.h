/*
 * Box exchanges: every rank of one layout sends each rank of another the
 * intersection of their boxes. Repartition is one exchange; a halo exchange
 * is one from the bulk boxes to the padded boxes (and back, adding).
 */
#ifndef LADLE_EXCHANGE_H
#define LADLE_EXCHANGE_H

#include "src/comm/schedule.h"

/* One side of an exchange on the calling rank: the layout whose boxes say
 * what each rank holds (sends) or wants (receives), and this rank's local
 * tensor (its global origin and shape) with the buffer it lives in. */
typedef struct ladle_side {
    const ladle_layout *boxes;
    int64_t origin[LADLE_MAX_NDIM];
    int64_t shape[LADLE_MAX_NDIM];
    ladle_ref buf;
} ladle_side;

/* A side whose local tensor is exactly this rank's box of l. */
ladle_side ladle__side_own(const ladle_layout *l, ladle_ref buf);

typedef struct ladle_exchange_opts {
    int self;            /* 1: copy pieces whose sender is the receiver */
    ladle_box_mode mode; /* what a receiver does with a piece: copy or add */
    int zero_sent;       /* 1: zero each sent piece in the sender's tensor */
    int tag;             /* the first of LADLE_TAG_CHUNKS tags: slab k takes tag + k */
} ladle_exchange_opts;

/* Plan this rank's part of the exchange from `from` to `to`. to_comm maps
 * root ranks to ranks of the op's communicator. Received pieces that are
 * added are applied in a fixed order (by sender), so sums do not depend on
 * arrival order. */
void ladle__plan_exchange(ladle_sched *s, const ladle_side *from, const ladle_side *to,
                          const int *to_comm, ladle_exchange_opts opts);

#endif /* LADLE_EXCHANGE_H */
