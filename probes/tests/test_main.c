#include <stdio.h>

#include "check.h"

int check_failures;

struct test {
    const char *name;
    void (*fn)(void);
};

#define TEST_ENTRY(name) {#name, name},
static const struct test tests[] = {TEST_LIST(TEST_ENTRY)};

int main(void)
{
    int passed = 0, failed = 0;
    for (size_t k = 0; k < sizeof tests / sizeof tests[0]; k++) {
        check_failures = 0;
        tests[k].fn();
        if (check_failures == 0) {
            passed++;
        } else {
            failed++;
            fprintf(stderr, "FAIL %s (%d checks failed)\n", tests[k].name, check_failures);
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
