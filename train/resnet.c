/* ResNets over a layout, made with the builder (see ladle/models.h). */
#include <stdio.h>
#include <string.h>

#include "ladle/builder.h"
#include "layers/distributed/dist.h"

ladle_status ladle_resnet_desc_init(ladle_resnet_desc *d, ladle_resnet_kind kind)
{
    static const struct {
        int stages, blocks, bottleneck;
        int64_t width;
    } kinds[] = {{3, 3, 0, 16}, {4, 2, 0, 64}, {3, 1, 0, 4}, {3, 1, 1, 2}};
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(d);
    LADLE_CHECK((int)kind >= 0 && (int)kind < (int)(sizeof kinds / sizeof kinds[0]),
                LADLE_ERR_ARG, "ResNet kind %d", (int)kind);
    memset(d, 0, sizeof *d);
    d->size = sizeof *d;
    d->stages = kinds[kind].stages;
    for (int s = 0; s < d->stages; s++)
        d->blocks[s] = kinds[kind].blocks;
    d->width = kinds[kind].width;
    d->bottleneck = kinds[kind].bottleneck;
    d->batch = 64;
    d->image = 28;
    d->in_channels = 1;
    d->classes = 10;
    d->data_ways = d->channel_ways = 1;
    d->spatial[0] = d->spatial[1] = 1;
    d->bn_sync = LADLE_BN_SYNC_GLOBAL;
    d->dtype = LADLE_F32;
    d->device = LADLE_CPU;
    d->seed = 1;
fail:
    return st;
}

/* The numbers of d that the builder does not check itself (global facts:
 * every rank decides alike). */
static ladle_status check(const ladle_resnet_desc *d)
{
    ladle_status st = LADLE_OK;
    const int64_t big = (int64_t)1 << 20;
    LADLE_CHECK(d->stages >= 1 && d->stages <= LADLE_RESNET_MAX_STAGES, LADLE_ERR_ARG,
                "%d stages (1 to %d)", d->stages, LADLE_RESNET_MAX_STAGES);
    for (int s = 0; s < d->stages; s++)
        LADLE_CHECK(d->blocks[s] >= 1 && d->blocks[s] <= 256, LADLE_ERR_ARG,
                    "%d blocks in stage %d (1 to 256)", d->blocks[s], s + 1);
    LADLE_CHECK(d->width >= 1 && d->width <= (int64_t)1 << 16 && d->in_channels >= 1 &&
                    d->in_channels <= big && d->classes >= 1 && d->classes <= big,
                LADLE_ERR_ARG, "width %lld, %lld input channels, %lld classes",
                (long long)d->width, (long long)d->in_channels, (long long)d->classes);
    LADLE_CHECK(d->batch >= 1 && d->batch <= ((int64_t)1 << 30) && d->image >= 1 &&
                    d->image <= big,
                LADLE_ERR_ARG, "a batch of %lld images of %lld x %lld", (long long)d->batch,
                (long long)d->image, (long long)d->image);
    if (d->sequential)
        return LADLE_OK;
    int D = d->data_ways, C = d->channel_ways, Ph = d->spatial[0], Pw = d->spatial[1];
    int64_t side = d->image;
    for (int s = 1; s < d->stages; s++)
        side = (side - 1) / 2 + 1;
    LADLE_CHECK(D < 1 || d->batch >= D, LADLE_ERR_ARG, "a batch of %lld over %d blocks",
                (long long)d->batch, D);
    LADLE_CHECK(C < 1 || d->width >= C, LADLE_ERR_ARG,
                "width %lld: fewer channels than the %d channel ways", (long long)d->width, C);
    LADLE_CHECK(side >= Ph && side >= Pw, LADLE_ERR_ARG,
                "images of %lld come out %lld x %lld after the strides: too small for %d x %d "
                "tiles",
                (long long)d->image, (long long)side, (long long)side, Ph, Pw);
fail:
    return st;
}

/* Stem, stages, head. */
static ladle_status build(const ladle_resnet_desc *d, ladle_builder *b, int *logits)
{
    ladle_status st = LADLE_OK;
    char name[LADLE_GRAPH_NAME_MAX];
    int x = -1;
    int64_t shape[4] = {d->batch, d->in_channels, d->image, d->image};
    LADLE_CALL(ladle_builder_input(b, "images", shape, &x));
    LADLE_CALL(ladle_builder_conv_bn(b, "stem", x, d->width, 3, 1, &x));
    LADLE_CALL(ladle_builder_relu(b, "stem", x, &x));
    for (int s = 0; s < d->stages; s++)
        for (int k = 0; k < d->blocks[s]; k++) {
            int stride = s > 0 && k == 0 ? 2 : 1;
            snprintf(name, sizeof name, "stage%d.block%d", s + 1, k + 1);
            if (d->bottleneck)
                LADLE_CALL(ladle_builder_bottleneck(b, name, x, d->width << s, stride, &x));
            else
                LADLE_CALL(ladle_builder_basic_block(b, name, x, d->width << s, stride, &x));
        }
    LADLE_CALL(ladle_builder_global_avg_pool(b, "pool", x, &x));
    LADLE_CALL(ladle_builder_classifier(b, "fc", x, d->classes, &x));
    LADLE_CALL(ladle_builder_loss(b, "loss", x, NULL));
    *logits = x;
fail:
    return st;
}

ladle_status ladle_resnet_create(const ladle_resnet_desc *d, ladle_comm comm,
                                 ladle_graph **g)
{
    ladle_status st = LADLE_OK;
    ladle_builder *b = NULL;
    ladle_graph *out = NULL;
    ladle_builder_desc bd;
    int logits = -1;
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(g);
    LADLE_CHECK_SIZE(d);
    LADLE_CALL(check(d));
    ladle_builder_desc_init(&bd);
    bd.sequential = d->sequential;
    bd.data_ways = d->data_ways;
    bd.spatial[0] = d->spatial[0];
    bd.spatial[1] = d->spatial[1];
    bd.channel_ways = d->channel_ways;
    bd.bn_sync = d->bn_sync;
    bd.bn_group = d->bn_group;
    bd.dtype = d->dtype;
    bd.device = d->device;
    bd.seed = d->seed;
    LADLE_CALL(ladle_builder_create(&bd, comm, &b));
    LADLE_CALL(build(d, b, &logits));
    LADLE_CALL(ladle_builder_finish(b, logits, &out));
    LADLE_CALL(ladle_graph_set_training(out, 1));
    *g = out;
    out = NULL;
fail:
    ladle_graph_destroy(&out);
    ladle_builder_destroy(&b);
    return st;
}

/* deprecated: ladle_resnet_create takes a ladle_comm */
ladle_status ladle_resnet_create_f(const ladle_resnet_desc *d, MPI_Fint comm, ladle_graph **g)
{
    return ladle_resnet_create(d, ladle_comm_of_fortran(comm), g);
}
