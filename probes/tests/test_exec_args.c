#include "check.h"
#include "exec.h"
#include "rtprobe.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

void test_exec_defaults(void)
{
    struct exec_config c;
    char *a[] = {"exec", "sum", "--output", "x.rts"};
    CHECK(exec_parse_args(ARGC(a), a, &c) == 0);
    CHECK(c.variant && strcmp(c.variant->name, "sum") == 0);
    CHECK_I64(c.n, 4000);
    CHECK_I64(c.iterations, 10000);
    CHECK(c.pause_ms == 5.0);
    CHECK_STR(c.output, "x.rts");
    CHECK(c.rt.priority == 0 && c.rt.cpu == -1 && !c.rt.mlock && !c.help);

    char *h[] = {"exec", "--help"};
    CHECK(exec_parse_args(ARGC(h), h, &c) == 0 && c.help);
}

void test_exec_variants_and_n(void)
{
    struct exec_config c;
    char *fib[] = {"exec", "--workload", "fib", "--output=o"};
    CHECK(exec_parse_args(ARGC(fib), fib, &c) == 0 && strcmp(c.variant->name, "fib") == 0);
    CHECK_I64(c.n, 20);
    char *sleep[] = {"exec", "--output", "o", "sleep", "--ms", "3", "--pause-ms", "0.5"};
    CHECK(exec_parse_args(ARGC(sleep), sleep, &c) == 0 && strcmp(c.variant->name, "sleep") == 0);
    CHECK_I64(c.n, 3);
    CHECK(c.pause_ms == 0.5);
    char *sleep_default[] = {"exec", "sleep", "--output", "o"};
    CHECK(exec_parse_args(ARGC(sleep_default), sleep_default, &c) == 0);
    CHECK_I64(c.n, 5);
    char *nothing[] = {"exec", "nothing", "--output", "o", "--iterations", "200000",
                       "--pause-ms", "0", "--priority", "90", "--cpu", "1", "--mlock"};
    CHECK(exec_parse_args(ARGC(nothing), nothing, &c) == 0);
    CHECK(strcmp(c.variant->name, "nothing") == 0 && c.n == 0 && c.iterations == 200000);
    CHECK(c.pause_ms == 0.0 && c.rt.priority == 90 && c.rt.cpu == 1 && c.rt.mlock);
    char *sum_n[] = {"exec", "sum", "--n", "0", "--output", "o", "--iterations", "1"};
    CHECK(exec_parse_args(ARGC(sum_n), sum_n, &c) == 0 && c.n == 0 && c.iterations == 1);
    CHECK(exec_find_variant("sum") && exec_find_variant("fib") && exec_find_variant("sleep") &&
          exec_find_variant("nothing") && !exec_find_variant("SUM"));
}

void test_exec_bad_arguments(void)
{
    struct exec_config c;
    fprintf(stderr, "(expected usage messages follow)\n");
    char *unknown[] = {"exec", "summ", "--output", "o"};
    CHECK(exec_parse_args(ARGC(unknown), unknown, &c) == RTP_EXIT_USAGE);
    char *none[] = {"exec", "--output", "o"};
    CHECK(exec_parse_args(ARGC(none), none, &c) == RTP_EXIT_USAGE);
    char *no_output[] = {"exec", "sum"};
    CHECK(exec_parse_args(ARGC(no_output), no_output, &c) == RTP_EXIT_USAGE);
    char *empty_output[] = {"exec", "sum", "--output="};
    CHECK(exec_parse_args(ARGC(empty_output), empty_output, &c) == RTP_EXIT_USAGE);
    char *zero_iter[] = {"exec", "sum", "--output", "o", "--iterations", "0"};
    CHECK(exec_parse_args(ARGC(zero_iter), zero_iter, &c) == RTP_EXIT_USAGE);
    char *neg_iter[] = {"exec", "sum", "--output", "o", "--iterations", "-3"};
    CHECK(exec_parse_args(ARGC(neg_iter), neg_iter, &c) == RTP_EXIT_USAGE);
    char *garbage_iter[] = {"exec", "sum", "--output", "o", "--iterations", "10k"};
    CHECK(exec_parse_args(ARGC(garbage_iter), garbage_iter, &c) == RTP_EXIT_USAGE);
    char *huge_iter[] = {"exec", "sum", "--output", "o", "--iterations", "99999999999999999999"};
    CHECK(exec_parse_args(ARGC(huge_iter), huge_iter, &c) == RTP_EXIT_USAGE);
    char *neg_pause[] = {"exec", "sum", "--output", "o", "--pause-ms", "-1"};
    CHECK(exec_parse_args(ARGC(neg_pause), neg_pause, &c) == RTP_EXIT_USAGE);
    char *nan_pause[] = {"exec", "sum", "--output", "o", "--pause-ms", "nan"};
    CHECK(exec_parse_args(ARGC(nan_pause), nan_pause, &c) == RTP_EXIT_USAGE);
    char *fib_big[] = {"exec", "fib", "--output", "o", "--n", "51"};
    CHECK(exec_parse_args(ARGC(fib_big), fib_big, &c) == RTP_EXIT_USAGE);
    char *nothing_n[] = {"exec", "nothing", "--output", "o", "--n", "5"};
    CHECK(exec_parse_args(ARGC(nothing_n), nothing_n, &c) == RTP_EXIT_USAGE);
    char *sum_ms[] = {"exec", "sum", "--output", "o", "--ms", "5"};
    CHECK(exec_parse_args(ARGC(sum_ms), sum_ms, &c) == RTP_EXIT_USAGE);
    char *two[] = {"exec", "sum", "fib", "--output", "o"};
    CHECK(exec_parse_args(ARGC(two), two, &c) == RTP_EXIT_USAGE);
    char *unknown_opt[] = {"exec", "sum", "--output", "o", "--fast"};
    CHECK(exec_parse_args(ARGC(unknown_opt), unknown_opt, &c) == RTP_EXIT_USAGE);
    char *missing_value[] = {"exec", "sum", "--output", "o", "--iterations"};
    CHECK(exec_parse_args(ARGC(missing_value), missing_value, &c) == RTP_EXIT_USAGE);
    char *bad_prio[] = {"exec", "sum", "--output", "o", "--priority", "0"};
    CHECK(exec_parse_args(ARGC(bad_prio), bad_prio, &c) == RTP_EXIT_USAGE);
    char *bad_cpu[] = {"exec", "sum", "--output", "o", "--cpu", "one"};
    CHECK(exec_parse_args(ARGC(bad_cpu), bad_cpu, &c) == RTP_EXIT_USAGE);
}
