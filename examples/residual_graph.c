/* A residual block as a graph network (docs/graphs.md), data parallel over
 * every rank: y = relu(bn(conv(relu(bn(conv x)))) + x), an MSE loss, a few
 * SGD steps. Prints "residual graph ok" when the loss went down. */
#include <ladle.h>
#include <stdio.h>

#define CALL(x)                                                                            \
    do {                                                                                   \
        if ((x) != LADLE_OK) {                                                             \
            fprintf(stderr, "%s: %s\n", #x, ladle_error_message());                        \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                  \
        }                                                                                  \
    } while (0)

/* The block as a graph over the partition p of the batch: input x (lx,
 * this rank's block mine of the global xs), the layers, the skip and the
 * loss. */
static ladle_graph *build_block(ladle_partition *p, const ladle_layout *lx,
                                const int64_t *xs, const int64_t *mine)
{
    ladle_graph *g = NULL;
    ladle_conv_desc cd;
    ladle_batchnorm_desc bd;
    ladle_loss_desc ld;
    ladle_op *op = NULL;
    int x, v, sum, y;
    ladle_conv_desc_init(&cd, 2, 8, 8, 3);
    cd.padding[0] = cd.padding[1] = 1;
    ladle_batchnorm_desc_init(&bd, 8); /* statistics over the whole batch */
    ladle_loss_desc_init(&ld, LADLE_LOSS_MSE, LADLE_REDUCE_MEAN);
    CALL(ladle_graph_create(LADLE_F64, LADLE_CPU, 0, &g));
    CALL(ladle_graph_add_input(g, "x", lx, 0, NULL, &x));
    CALL(ladle_dist_conv_create(&cd, p, xs, LADLE_F64, LADLE_CPU, 1, &op));
    CALL(ladle_graph_add_layer(g, "block.conv1", op, x, &v));
    CALL(ladle_dist_batchnorm_create(&bd, p, xs, LADLE_F64, LADLE_CPU, &op));
    CALL(ladle_graph_add_layer(g, "block.bn1", op, v, &v));
    CALL(ladle_activation_create(LADLE_RELU, 0, 4, mine, LADLE_F64, LADLE_CPU, &op));
    CALL(ladle_graph_add_layer(g, "block.relu1", op, v, &v));
    CALL(ladle_dist_conv_create(&cd, p, xs, LADLE_F64, LADLE_CPU, 2, &op));
    CALL(ladle_graph_add_layer(g, "block.conv2", op, v, &v));
    CALL(ladle_dist_batchnorm_create(&bd, p, xs, LADLE_F64, LADLE_CPU, &op));
    CALL(ladle_graph_add_layer(g, "block.bn2", op, v, &v));
    CALL(ladle_graph_add_add(g, "block.add", 2, (int[]){v, x}, &sum)); /* the skip */
    CALL(ladle_activation_create(LADLE_RELU, 0, 4, mine, LADLE_F64, LADLE_CPU, &op));
    CALL(ladle_graph_add_layer(g, "block.relu2", op, sum, &y));
    CALL(ladle_dist_loss_create(&ld, p, xs, LADLE_F64, LADLE_CPU, &op));
    CALL(ladle_graph_add_loss(g, "mse", op, y, 1.0, NULL));
    CALL(ladle_graph_finalize(g)); /* collective: order, buffers, buckets */
    return g;
}

/* Five SGD steps of g from input in towards target: the first step's loss
 * in *first, the last one's in *loss. */
static void train(ladle_graph *g, ladle_tensor *in, ladle_tensor *target, double *first,
                  double *loss)
{
    ladle_optimizer_desc od;
    ladle_optimizer *opt = NULL;
    ladle_optimizer_desc_init(&od, LADLE_OPT_SGD, 0.05);
    CALL(ladle_optimizer_create(&od, &opt));
    CALL(ladle_optimizer_add_graph(opt, g));
    for (int step = 0; step < 5; step++) {
        CALL(ladle_graph_zero_grad(g));
        CALL(ladle_graph_forward(g, 1, (const ladle_tensor *[]){in}, NULL));
        CALL(ladle_graph_loss(g, 1, (const ladle_tensor *[]){target}, loss));
        CALL(ladle_graph_backward(g, 1)); /* gradients summed over the ranks */
        CALL(ladle_optimizer_step(opt));
        if (step == 0)
            *first = *loss;
    }
    ladle_optimizer_destroy(&opt);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int64_t xs[4] = {4 * size, 8, 12, 12}; /* N x C x H x W, the batch split over the ranks */
    ladle_partition *p = NULL;
    ladle_layout *lx = NULL;
    CALL(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 4, (int[]){size, 1, 1, 1},
                                NULL, &p));
    CALL(ladle_layout_create_balanced(p, 4, xs, &lx));
    int64_t mine[4];
    CALL(ladle_layout_box(lx, LADLE_SELF, NULL, mine));
    ladle_graph *g = build_block(p, lx, xs, mine);

    /* this rank's block of an input and of a target */
    ladle_tensor *in = NULL, *target = NULL;
    CALL(ladle_tensor_create(LADLE_F64, LADLE_CPU, 4, mine, &in));
    CALL(ladle_tensor_create(LADLE_F64, LADLE_CPU, 4, mine, &target));
    CALL(ladle_tensor_fill_random(in, 7, 0));
    CALL(ladle_tensor_fill_random(target, 8, 0));
    double first = 0, loss = 0;
    train(g, in, target, &first, &loss);
    const char *name;
    CALL(ladle_graph_param(g, 0, &name, NULL, NULL));
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        printf("%s: %d layers, first parameter %s, loss %.4f -> %.4f\n",
               loss < first ? "residual graph ok" : "residual graph FAILED",
               ladle_graph_num_layers(g), name, first, loss);
    ladle_tensor_destroy(&in);
    ladle_tensor_destroy(&target);
    ladle_graph_destroy(&g);
    ladle_layout_destroy(&lx);
    ladle_partition_destroy(&p);
    MPI_Finalize();
    return loss < first ? 0 : 1;
}
