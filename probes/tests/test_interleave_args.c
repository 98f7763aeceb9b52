#include "check.h"
#include "interleave.h"
#include "rtprobe.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

void test_interleave_arms_and_order(void)
{
    struct interleave_config c;
    char *a[] = {"interleave", "--block", "2", "--order", "0,1,1,0,2,2",
                 "--arm", "exec", "sum", "--iterations", "4", "--pause-ms", "0", "--output", "a0",
                 "--arm", "exec", "sum", "--n", "8000", "--iterations", "4", "--pause-ms", "0", "--priority", "5",
                 "--output", "a1",
                 "--arm", "exec", "fib", "--iterations", "4", "--pause-ms", "0", "--cpu", "0", "--output", "a2"};
    CHECK(interleave_parse_args(ARGC(a), a, &c) == 0);
    CHECK_I64(c.block, 2);
    CHECK(c.narms == 3 && c.norder == 6 && !c.help);
    CHECK(c.order[0] == 0 && c.order[1] == 1 && c.order[2] == 1 && c.order[3] == 0 && c.order[4] == 2);
    CHECK(strcmp(c.arms[0].variant->name, "sum") == 0 && c.arms[0].n == 4000);
    CHECK(c.arms[1].n == 8000 && c.arms[1].rt.priority == 5 && c.arms[0].rt.priority == 0);
    CHECK(strcmp(c.arms[2].variant->name, "fib") == 0 && c.arms[2].rt.cpu == 0);
    CHECK_STR(c.arms[2].output, "a2");
    interleave_config_free(&c);

    char *h[] = {"interleave", "--arm", "exec", "sum", "--help"};
    CHECK(interleave_parse_args(ARGC(h), h, &c) == 0 && c.help);
    interleave_config_free(&c);
}

/* Each bad command line: exit 2 (the messages are checked by tests/test_interleave.sh). */
void test_interleave_bad_arguments(void)
{
    struct interleave_config c;
    fprintf(stderr, "(expected usage messages follow)\n");
#define ARM0 "--arm", "exec", "sum", "--iterations", "4", "--pause-ms", "0", "--output", "a0"
#define ARM1 "--arm", "exec", "sum", "--iterations", "4", "--pause-ms", "0", "--output", "a1"
    char *no_block[] = {"interleave", "--order", "0,1,1,0", ARM0, ARM1};
    char *no_order[] = {"interleave", "--block", "2", ARM0, ARM1};
    char *one_arm[] = {"interleave", "--block", "2", "--order", "0,0", ARM0};
    char *unbalanced[] = {"interleave", "--block", "2", "--order", "0,0,1,1,1", ARM0, ARM1};
    char *too_few[] = {"interleave", "--block", "2", "--order", "0,1,1", ARM0, ARM1};
    char *bad_index[] = {"interleave", "--block", "2", "--order", "0,1,2,0", ARM0, ARM1};
    char *bad_entry[] = {"interleave", "--block", "2", "--order", "0,1,,0", ARM0, ARM1};
    char *not_multiple[] = {"interleave", "--block", "3", "--order", "0,1", ARM0, ARM1};
    char *zero_block[] = {"interleave", "--block", "0", "--order", "0,1", ARM0, ARM1};
    char *same_output[] = {"interleave", "--block", "2", "--order", "0,1,1,0", ARM0, ARM0};
    char *iterations[] = {"interleave", "--block", "2", "--order", "0,1,1,0", ARM0,
                          "--arm", "exec", "sum", "--iterations", "6", "--pause-ms", "0", "--output", "a1"};
    char *pause[] = {"interleave", "--block", "2", "--order", "0,1,1,0", ARM0,
                     "--arm", "exec", "sum", "--iterations", "4", "--output", "a1"};
    char *mlock[] = {"interleave", "--block", "2", "--order", "0,1,1,0", ARM0, ARM1, "--mlock"};
    char *start_times[] = {"interleave", "--block", "2", "--order", "0,1,1,0", ARM0, ARM1, "--start-times"};
    char *mark_worst[] = {"interleave", "--block", "2", "--order", "0,1,1,0", ARM0, ARM1, "--mark-worst", "3"};
    char *touch[] = {"interleave", "--block", "2", "--order", "0,1,1,0", ARM0,
                     "--arm", "exec", "touch", "--iterations", "4", "--pause-ms", "0", "--output", "a1"};
    char *timer[] = {"interleave", "--block", "2", "--order", "0,1,1,0", ARM0, "--arm", "timer", "--output", "a1"};
    char *empty_arm[] = {"interleave", "--block", "2", "--order", "0,1,1,0", ARM0, "--arm"};
    char *bad_arm[] = {"interleave", "--block", "2", "--order", "0,1,1,0", ARM0, ARM1, "--n", "x"};
    char *unknown[] = {"interleave", "--blocks", "2", ARM0, ARM1};
    char *stray[] = {"interleave", "sum", ARM0, ARM1};
    char **bad[] = {no_block, no_order, one_arm, unbalanced, too_few, bad_index, bad_entry, not_multiple,
                    zero_block, same_output, iterations, pause, mlock, start_times, mark_worst, touch, timer,
                    empty_arm, bad_arm, unknown, stray};
    int argcs[] = {ARGC(no_block), ARGC(no_order), ARGC(one_arm), ARGC(unbalanced), ARGC(too_few),
                   ARGC(bad_index), ARGC(bad_entry), ARGC(not_multiple), ARGC(zero_block), ARGC(same_output),
                   ARGC(iterations), ARGC(pause), ARGC(mlock), ARGC(start_times), ARGC(mark_worst), ARGC(touch),
                   ARGC(timer), ARGC(empty_arm), ARGC(bad_arm), ARGC(unknown), ARGC(stray)};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        int rc = interleave_parse_args(argcs[k], bad[k], &c);
        interleave_config_free(&c);
        if (rc != RTP_EXIT_USAGE) {
            fprintf(stderr, "bad command line %zu accepted (rc %d)\n", k, rc);
            CHECK(rc == RTP_EXIT_USAGE);
        }
    }
#undef ARM0
#undef ARM1
}
