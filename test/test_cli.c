/* The command-line parsers of the tools (tools/cli.h), table by table:
 * every row is an input, whether it is accepted, the value it must give
 * (written out by hand) or a piece of the message it must give. The tools'
 * own use of them is tested end to end by test/tool_test.sh. */
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>

#include "../tools/cli.h"
#include "harness.h"

typedef struct int_case {
    const char *text;
    int64_t lo, hi;
    int ok;
    int64_t value;
    const char *says; /* in the message when refused */
} int_case;

START_TEST(whole_numbers)
{
    static const int_case cases[] = {
        {"3", 1, 10, 1, 3, NULL},
        {"+7", 1, 10, 1, 7, NULL},
        {"-5", -10, 10, 1, -5, NULL},
        {"0010", 0, 100, 1, 10, NULL},
        {"9223372036854775807", 0, INT64_MAX, 1, INT64_MAX, NULL},
        {"-9223372036854775808", INT64_MIN, 0, 1, INT64_MIN, NULL},
        {"1.5", 1, 10, 0, 0, "'1.5' is not a whole number (expected 1 to 10)"},
        {"1e30", 1, 10, 0, 0, "'1e30' is not a whole number"},
        {"4abc", 1, 64, 0, 0, "'4abc' is not a whole number"},
        {"abc", 0, 9, 0, 0, "'abc' is not a whole number"},
        {" 4", 1, 9, 0, 0, "is not a whole number"},
        {"4 ", 1, 9, 0, 0, "is not a whole number"},
        {"", 1, 9, 0, 0, "needs a value"},
        {"-", 1, 9, 0, 0, "is not a whole number"},
        {"0x10", 0, 99, 0, 0, "is not a whole number"},
        {"0", 1, 10, 0, 0, "0 is out of range (expected 1 to 10)"},
        {"11", 1, 10, 0, 0, "11 is out of range"},
        {"4294967297", 1, 4, 0, 0, "4294967297 is out of range (expected 1 to 4)"},
        {"9223372036854775808", 0, INT64_MAX, 0, 0, "is out of range"},
        {"-9223372036854775809", INT64_MIN, 0, 0, 0, "is out of range"},
        {"99999999999999999999999", 0, INT64_MAX, 0, 0, "is out of range"},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int_case *c = &cases[i];
        char why[CLI_WHY] = "";
        int64_t v = -42;
        int rc = cli_int("--opt", c->text, c->lo, c->hi, &v, why);
        int ok = c->ok
                     ? rc == 0 && v == c->value
                     : rc == -1 && v == -42 && strstr(why, c->says) && strstr(why, "--opt");
        if (!ok) {
            fprintf(stderr, "cli_int('%s'): rc %d, value %lld, message '%s'\n", c->text, rc,
                    (long long)v, why);
            bad++;
        }
    }
    /* the int variant refuses what does not fit an int instead of wrapping */
    char why[CLI_WHY];
    int x = -1;
    bad += cli_int32("--n", "4294967297", 1, 64, &x, why) != -1 || x != -1;
    bad += cli_int32("--n", "64", 1, 64, &x, why) != 0 || x != 64;
    LT_ASSERT(bad == 0, "%d whole-number cases failed", bad);
}
END_TEST

START_TEST(seeds)
{
    char why[CLI_WHY];
    uint64_t v = 7;
    int bad = cli_u64("--seed", "18446744073709551615", &v, why) != 0 || v != UINT64_MAX;
    bad += cli_u64("--seed", "0", &v, why) != 0 || v != 0;
    v = 7;
    bad += cli_u64("--seed", "18446744073709551616", &v, why) != -1 || v != 7 ||
           !strstr(why, "out of range");
    bad += cli_u64("--seed", "abc", &v, why) != -1 || !strstr(why, "'abc' is not a whole");
    bad += cli_u64("--seed", "-1", &v, why) != -1 || v != 7;
    bad += cli_u64("--seed", "", &v, why) != -1;
    LT_ASSERT(bad == 0, "%d seed cases failed", bad);
}
END_TEST

typedef struct real_case {
    const char *text;
    double lo, hi;
    unsigned open;
    int ok;
    double value;
    const char *says;
} real_case;

START_TEST(reals)
{
    static const real_case cases[] = {
        {"0.03", 0, HUGE_VAL, CLI_OPEN_LO | CLI_OPEN_HI, 1, 0.03, NULL},
        {"1e-3", 0, HUGE_VAL, CLI_OPEN_LO | CLI_OPEN_HI, 1, 0.001, NULL},
        {"-2.5", -3, 3, 0, 1, -2.5, NULL},
        {"0", 0, 1, CLI_OPEN_HI, 1, 0, NULL},
        {"1", 0, 1, 0, 1, 1, NULL},
        {"1", 0, 1, CLI_OPEN_HI, 0, 0, "1 is out of range (expected a number in [0, 1))"},
        {"0", 0, HUGE_VAL, CLI_OPEN_LO | CLI_OPEN_HI, 0, 0,
         "out of range (expected a number in (0, inf))"},
        {"-1", 0, 10, 0, 0, 0, "-1 is out of range"},
        {"1e400", 0, HUGE_VAL, CLI_OPEN_HI, 0, 0, "1e400 is out of range"},
        {"inf", 0, HUGE_VAL, CLI_OPEN_HI, 0, 0, "inf is out of range"},
        {"nan", 0, 10, 0, 0, 0, "'nan' is not a number"},
        {"0.5x", 0, 10, 0, 0, 0, "'0.5x' is not a number"},
        {"", 0, 10, 0, 0, 0, "is not a number"},
        {" 1", 0, 10, 0, 0, 0, "is not a number"},
        {"1,2", 0, 10, 0, 0, 0, "is not a number"},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const real_case *c = &cases[i];
        char why[CLI_WHY] = "";
        double v = -42;
        int rc = cli_real("--lr", c->text, c->lo, c->hi, c->open, &v, why);
        int ok = c->ok
                     ? rc == 0 && v == c->value
                     : rc == -1 && v == -42 && strstr(why, c->says) && strstr(why, "--lr");
        if (!ok) {
            fprintf(stderr, "cli_real('%s'): rc %d, value %g, message '%s'\n", c->text, rc,
                    v, why);
            bad++;
        }
    }
    LT_ASSERT(bad == 0, "%d real cases failed", bad);
}
END_TEST

START_TEST(lists_and_shapes)
{
    char why[CLI_WHY];
    int64_t v[8] = {0};
    int n = 0, bad = 0;
    bad += cli_ints("--kernel", "1,3,5", 1, 9, v, 8, &n, why) != 0 || n != 3 || v[0] != 1 ||
           v[1] != 3 || v[2] != 5;
    bad += cli_ints("--kernel", "1,,5", 1, 9, v, 8, &n, why) != -1 ||
           !strstr(why, "'' in '1,,5' is not a whole number");
    bad += cli_ints("--kernel", "1,2,", 1, 9, v, 8, &n, why) != -1;
    bad += cli_ints("--kernel", "1,99", 1, 9, v, 8, &n, why) != -1 ||
           !strstr(why, "99 in '1,99' is out of range (expected 1 to 9)");
    bad += cli_ints("--kernel", "1,2,3", 1, 9, v, 2, &n, why) != -1 ||
           !strstr(why, "more than 2 values");
    double r[4];
    bad += cli_reals("--f", "1,2.5", 0, HUGE_VAL, CLI_OPEN_HI, r, 4, &n, why) != 0 ||
           n != 2 || r[0] != 1 || r[1] != 2.5;
    bad += cli_reals("--f", "1,-2", 0, HUGE_VAL, CLI_OPEN_HI, r, 4, &n, why) != -1 ||
           !strstr(why, "-2 is out of range");
    int64_t sh[LADLE_MAX_NDIM];
    bad += cli_shape("--shape", "7x11", 0, 100, 8, &n, sh, why) != 0 || n != 2 ||
           sh[0] != 7 || sh[1] != 11;
    bad += cli_shape("--shape", "5", 0, 100, 8, &n, sh, why) != 0 || n != 1 || sh[0] != 5;
    bad +=
        cli_shape("--px", "4294967297", 1, 4, 8, &n, sh, why) != -1 ||
        !strstr(why,
                "the extent 4294967297 in '4294967297' is out of range (expected 1 to 4)");
    bad += cli_shape("--shape", "3x", 0, 100, 8, &n, sh, why) != -1;
    bad += cli_shape("--shape", "x3", 0, 100, 8, &n, sh, why) != -1;
    bad += cli_shape("--shape", "3x-1", 0, 100, 8, &n, sh, why) != -1;
    bad += cli_shape("--shape", "1x1x1", 0, 100, 2, &n, sh, why) != -1 ||
           !strstr(why, "more than 2 dimensions");
    LT_ASSERT(bad == 0, "%d list or shape cases failed", bad);
}
END_TEST

START_TEST(rank_lists)
{
    char why[CLI_WHY];
    int r[16], n = 0, bad = 0;
    bad += cli_ranks("--px", "0-2,5", 6, r, 16, &n, why) != 0 || n != 4 || r[0] != 0 ||
           r[2] != 2 || r[3] != 5;
    bad += cli_ranks("--px", "4294967296", 2, r, 16, &n, why) != -1 ||
           !strstr(why, "rank 4294967296 in '4294967296' does not exist (ranks 0 to 1)");
    bad +=
        cli_ranks("--px", "6", 6, r, 16, &n, why) != -1 || !strstr(why, "does not exist");
    bad +=
        cli_ranks("--px", "3-1", 6, r, 16, &n, why) != -1 || !strstr(why, "runs backwards");
    bad += cli_ranks("--px", "-1", 6, r, 16, &n, why) != -1;
    bad += cli_ranks("--px", "0-", 6, r, 16, &n, why) != -1;
    bad += cli_ranks("--px", "0,,1", 6, r, 16, &n, why) != -1;
    bad += cli_ranks("--px", "0-5", 6, r, 3, &n, why) != -1 || !strstr(why, "more than 3");
    /* a range too large to list is refused before a single rank is stored */
    bad += cli_ranks("--px", "0-99999999999", 6, r, 16, &n, why) != -1;
    LT_ASSERT(bad == 0, "%d rank-list cases failed", bad);
}
END_TEST

START_TEST(choices_and_outputs)
{
    static const char *const names[] = {"f32", "f64", NULL};
    char why[CLI_WHY], dir[64], path[128];
    int k = -1, bad = 0;
    bad += cli_choice("--dtype", "f64", names, &k, why) != 0 || k != 1;
    bad += cli_choice("--dtype", "f16", names, &k, why) != -1 ||
           !strstr(why, "--dtype: 'f16' is not one of f32, f64");
    /* output paths: a missing directory, a directory, a file under a file */
    snprintf(dir, sizeof dir, "/tmp/ladle-cli-%d-XXXXXX", lt_rank);
    LT_ASSERT(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/missing/out.txt", dir);
    bad += cli_output_ok("--summary", path, why) != -1 ||
           !strstr(why, "No such file or directory");
    bad +=
        cli_output_ok("--checkpoint", dir, why) != -1 || !strstr(why, "is a directory");
    snprintf(path, sizeof path, "%s/file", dir);
    FILE *f = fopen(path, "w");
    fputs("kept", f);
    fclose(f);
    char under[160];
    snprintf(under, sizeof under, "%s/x", path);
    bad +=
        cli_output_ok("--timeline", under, why) != -1 || !strstr(why, "Not a directory");
    /* a writable path passes, and the probe leaves nothing behind (and an
     * existing file as it was) */
    snprintf(under, sizeof under, "%s/new", dir);
    struct stat sb;
    bad += cli_output_ok("--checkpoint", under, why) != 0 || stat(under, &sb) == 0;
    bad += cli_output_ok("--summary", path, why) != 0 || stat(path, &sb) != 0 ||
           sb.st_size != 4;
    /* everything written must reach the file: /dev/full takes none */
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        fputs("x", full);
        bad += cli_close_ok(full, "/dev/full", why) != -1 || !strstr(why, "No space left");
    }
    remove(path);
    rmdir(dir);
    LT_ASSERT(bad == 0, "%d choice or output cases failed", bad);
}
END_TEST

LT_SUITE("cli", "cli", LT_CHECK_TIMEOUT, whole_numbers, seeds, reals, lists_and_shapes,
         rank_lists, choices_and_outputs)
