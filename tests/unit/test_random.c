/*
 * Randomness: sxe_random_bytes() over the kernel's getrandom (through the system call seam: short
 * answers, interruptions, failures, and an answer of nothing), and the WebSocket masks' generator,
 * SplitMix64, against its reference outputs.
 */
#include <errno.h>
#include <string.h>

#include "sxe/random.h"
#include "sxe_test.h"
#include "sys.h"
#include "websocket/ws.h"

/* getrandom as the test scripts it: each call gives the next count of bytes (0xa5 each), or fails
 * with the next errno when the count is negative. */
static ssize_t answers[8];
static unsigned answered;
static size_t asked[8];

static ssize_t scripted_getrandom(void *buf, size_t len, unsigned flags)
{
    (void)flags;
    assert_true(answered < 8);
    asked[answered] = len;
    ssize_t answer = answers[answered++];
    if (answer < 0) {
        errno = (int)-answer;
        return -1;
    }
    assert_true((size_t)answer <= len);
    memset(buf, 0xa5, (size_t)answer);
    return answer;
}

static void script(const ssize_t *list, unsigned count)
{
    memset(answers, 0, sizeof(answers));
    memcpy(answers, list, count * sizeof(list[0]));
    answered = 0;
    sxe__sys.getrandom = scripted_getrandom;
}

static int teardown(void **state)
{
    (void)state;
    sxe__sys_reset();
    return 0;
}

static void test_short_answers_are_asked_again_for_the_rest(void **state)
{
    unsigned char bytes[10];

    (void)state;
    memset(bytes, 0, sizeof(bytes));
    script((const ssize_t[]){3, -EINTR, 6, 1}, 4);
    assert_int_equal(sxe_random_bytes(bytes, sizeof(bytes)), 0);
    assert_int_equal(answered, 4);
    assert_int_equal(asked[0], 10);
    assert_int_equal(asked[1], 7);
    assert_int_equal(asked[2], 7); /* the interruption took nothing */
    assert_int_equal(asked[3], 1);
    for (size_t i = 0; i < sizeof(bytes); i++) {
        assert_int_equal(bytes[i], 0xa5);
    }
}

static void test_failures_and_an_answer_of_nothing(void **state)
{
    unsigned char bytes[4];

    (void)state;
    script((const ssize_t[]){0}, 1);
    assert_int_equal(sxe_random_bytes(bytes, sizeof(bytes)), -EIO);
    script((const ssize_t[]){2, 0}, 2);
    assert_int_equal(sxe_random_bytes(bytes, sizeof(bytes)), -EIO);
    script((const ssize_t[]){-ENOSYS}, 1);
    assert_int_equal(sxe_random_bytes(bytes, sizeof(bytes)), -ENOSYS);
    script((const ssize_t[]){-EPERM}, 1);
    assert_int_equal(sxe_random_bytes(bytes, sizeof(bytes)), -EPERM);
    script((const ssize_t[]){1, -EAGAIN}, 2);
    assert_int_equal(sxe_random_bytes(bytes, sizeof(bytes)), -EAGAIN);
    script((const ssize_t[]){0}, 1);
    assert_int_equal(sxe_random_bytes(bytes, 0), 0); /* nothing asked: getrandom is not called */
    assert_int_equal(answered, 0);
}

/* The masks and keys of WebSocket clients come from SplitMix64 (Steele, Lea and Flood), seeded
 * from getrandom: from state 0 its outputs are the published ones. */
static void test_the_mask_generator_is_splitmix64(void **state)
{
    sxe_ws_server_t set;

    (void)state;
    memset(&set, 0, sizeof(set));
    set.random = 0;
    assert_true(sxe__ws_random(&set) == 0xe220a8397b1dcdafULL);
    assert_true(sxe__ws_random(&set) == 0x6e789e6aa1b965f4ULL);
    assert_true(sxe__ws_random(&set) == 0x06c45d188009454fULL);
    set.random = 0x123456789abcdef0ULL;
    uint64_t first = sxe__ws_random(&set);
    assert_true(first != sxe__ws_random(&set));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_short_answers_are_asked_again_for_the_rest, teardown),
        cmocka_unit_test_teardown(test_failures_and_an_answer_of_nothing, teardown),
        cmocka_unit_test(test_the_mask_generator_is_splitmix64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
