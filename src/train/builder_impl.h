/*
 * The builder's global average pooling (src/train/builder_gap.c). Never
 * installed.
 */
#ifndef LADLE_BUILDER_IMPL_H
#define LADLE_BUILDER_IMPL_H

#include "ladle/builder.h"

/* Global average pooling N x C x H x W -> N x C as a custom op whose x is
 * laid out in balance over p_images (D x 1 x 1 x 1: each batch block's
 * images whole on one rank) and y over p_head (D x 1, the same ranks); each
 * of those ranks runs the sequential ladle_global_avg_pool_create on its
 * block. A graph reading a tiled or channel-split value into it inserts the
 * repartition that gathers the images. Collective over the partitions'
 * ranks (ladle_custom_create). Returns the codes of ladle_custom_create,
 * ladle_global_avg_pool_create and ladle_layout_create_balanced. */
ladle_status ladle__gap_whole_images(const ladle_partition *p_images, const ladle_partition *p_head,
                                     const int64_t xs[4], ladle_dtype dtype, ladle_device device,
                                     ladle_op **op);

#endif /* LADLE_BUILDER_IMPL_H */
