/*
 * Logging: line format, levels per module from the environment and the program, hex dumps,
 * call-tree tracing, assertions and the fd sink.
 */
#define SXE_LOG_MODULE test_module
#include "sxe/log.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "sxe_test.h"
#include "sys.h"

static struct sxe_log_module test_module = SXE_LOG_MODULE_INIT(TEST);
static struct sxe_test_capture capture;

/* 2026-11-21 21:30:12.345 UTC */
#define WALL_NS (1795296612ULL * SXE_NS_PER_SEC + 345 * SXE_NS_PER_MSEC)

static int setup(void **state)
{
    (void)state;
    unsetenv("SXE_LOG_LEVEL");
    unsetenv("SXE_LOG_LEVEL_TEST");
    unsetenv("SXE_LOG_LEVEL_MAIN");
    sxe__sys_reset();
    sxe__sys_clock_fake(SXE_NS_PER_SEC, WALL_NS);
    assert_int_equal(sxe_log_set_level(SXE_LOG_LEVEL_INFO), 0);
    sxe_log_set_id(SXE_LOG_NO_ID);
    sxe_test_capture_start(&capture);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sxe_test_capture_stop();
    sxe__sys_reset();
    return 0;
}

/* The prefix every line of this thread carries at the fake time, up to the level. */
static const char *prefix(const char *id, const char *level)
{
    static char text[128];
    snprintf(text, sizeof(text), "20261121 213012.345 T %6d %s %-5s ", (int)gettid(), id, level);
    return text;
}

static void test_line_format(void **state)
{
    char expected[256];

    (void)state;
    SXE_LOG_INFO("hello %d", 7);
    snprintf(expected, sizeof(expected), "%shello 7\n", prefix("------", "INFO"));
    assert_string_equal(capture.text, expected);

    capture.len = 0;
    sxe__sys_clock_advance(1001 * SXE_NS_PER_MSEC);
    SXE_LOG_ERROR("later");
    assert_memory_equal(capture.text, "20261121 213013.346 T", 21);
}

static void test_object_id(void **state)
{
    char expected[256];

    (void)state;
    assert_int_equal(sxe_log_set_id(42), SXE_LOG_NO_ID);
    SXE_LOG_WARN("conn");
    snprintf(expected, sizeof(expected), "%sconn\n", prefix("000042", "WARN"));
    assert_string_equal(capture.text, expected);
    assert_int_equal(sxe_log_set_id(1234567), 42);
    assert_int_equal(sxe_log_set_id(SXE_LOG_NO_ID), 1234567);
}

/* Counts the lines that each level macro writes right now. */
static unsigned lines_written(void)
{
    unsigned before = capture.lines;

    SXE_LOG_FATAL("f");
    SXE_LOG_ERROR("e");
    SXE_LOG_WARN("w");
    SXE_LOG_INFO("i");
    SXE_LOG_DEBUG("d");
    return capture.lines - before;
}

static void test_levels_and_precedence(void **state)
{
    (void)state;
    assert_int_equal(lines_written(), 4); /* default INFO */

    setenv("SXE_LOG_LEVEL", "3", 1);
    assert_int_equal(sxe_log_set_level(SXE_LOG_LEVEL_INFO), 0); /* re-reads the environment */
    assert_int_equal(lines_written(), 3);
    assert_int_equal(sxe_log_get_module_level("MAIN"), SXE_LOG_LEVEL_WARN);

    setenv("SXE_LOG_LEVEL_TEST", "debug", 1);
    assert_int_equal(sxe_log_set_level(SXE_LOG_LEVEL_INFO), 0);
    assert_int_equal(lines_written(), 5);
    assert_int_equal(sxe_log_get_module_level("TEST"), SXE_LOG_LEVEL_DEBUG);
    assert_int_equal(sxe_log_get_module_level("MAIN"), SXE_LOG_LEVEL_WARN);

    /* The module's environment variable beats the program's module setting... */
    assert_int_equal(sxe_log_set_module_level("TEST", SXE_LOG_LEVEL_ERROR), 0);
    assert_int_equal(lines_written(), 5);

    /* ...which beats SXE_LOG_LEVEL, which beats the program's default. */
    unsetenv("SXE_LOG_LEVEL_TEST");
    assert_int_equal(sxe_log_set_level(SXE_LOG_LEVEL_DUMP), 0);
    assert_int_equal(lines_written(), 2);
    assert_int_equal(sxe_log_set_module_level("TEST", SXE_LOG_LEVEL_FATAL), 0);
    assert_int_equal(lines_written(), 1);
    assert_int_equal(sxe_log_set_module_level("TEST", SXE_LOG_LEVEL_NONE), 0);
    assert_int_equal(lines_written(), 0);
    assert_int_equal(sxe_log_get_module_level("MAIN"), SXE_LOG_LEVEL_WARN);
    unsetenv("SXE_LOG_LEVEL");
    assert_int_equal(sxe_log_set_level(SXE_LOG_LEVEL_DUMP), 0);
    assert_int_equal(sxe_log_get_module_level("MAIN"), SXE_LOG_LEVEL_DUMP);
    assert_int_equal(sxe_log_set_module_level("TEST", SXE_LOG_LEVEL_INFO), 0);
}

static void test_bad_environment_value(void **state)
{
    (void)state;
    setenv("SXE_LOG_LEVEL_TEST", "loud", 1);
    assert_int_equal(sxe_log_set_level(SXE_LOG_LEVEL_INFO), 0);
    SXE_LOG_INFO("still logs at the level that applies without the variable");
    assert_non_null(strstr(capture.text, "ignoring SXE_LOG_LEVEL_TEST=loud: expected 0-7"));
    assert_non_null(strstr(capture.text, "still logs"));
    setenv("SXE_LOG_LEVEL_TEST", "8", 1);
    assert_int_equal(sxe_log_get_module_level("TEST"), SXE_LOG_LEVEL_INFO);
    setenv("SXE_LOG_LEVEL_TEST", "WaRn", 1);
    assert_int_equal(sxe_log_get_module_level("TEST"), SXE_LOG_LEVEL_WARN);
}

static void set_null_module(void *arg)
{
    (void)arg;
    (void)sxe_log_set_module_level(NULL, SXE_LOG_LEVEL_INFO);
}

static void set_level_eight(void *arg)
{
    (void)arg;
    (void)sxe_log_set_level((enum sxe_log_level)8);
}

/* Invalid API use: a clear assertion in debug builds, -EINVAL in release builds. */
static void test_invalid_settings(void **state)
{
    (void)state;
#ifdef SXE_DEBUG
    const char *const null_expected[] = {"assertion failed: name != NULL", "log.c", NULL};
    const char *const level_expected[] = {"assertion failed: level_is_valid", NULL};
    sxe_test_expect_abort(set_null_module, NULL, null_expected);
    sxe_test_expect_abort(set_level_eight, NULL, level_expected);
#else
    (void)set_null_module;
    (void)set_level_eight;
    assert_int_equal(sxe_log_set_module_level(NULL, SXE_LOG_LEVEL_INFO), -EINVAL);
    assert_int_equal(sxe_log_set_module_level("A_NAME_THAT_IS_FAR_TOO_LONG_TO_KEEP", 1), -EINVAL);
    assert_int_equal(sxe_log_set_module_level("TEST", (enum sxe_log_level)8), -EINVAL);
    assert_int_equal(sxe_log_set_level((enum sxe_log_level) - 1), -EINVAL);
#endif
}

/* The program may set at most 32 modules; updating one already set always works. */
static void test_module_settings_are_bounded(void **state)
{
    char name[16];
    int rc = 0;
    unsigned set;

    (void)state;
    for (set = 0; set < 40 && rc == 0; set++) {
        snprintf(name, sizeof(name), "MOD%u", set);
        rc = sxe_log_set_module_level(name, SXE_LOG_LEVEL_DEBUG);
    }
    assert_int_equal(rc, -ENOBUFS);
    /* TEST holds one of the 32 settings already (test_levels_and_precedence): 31 more fit, the next
     * fails. */
    assert_int_equal(set, 32);
    assert_int_equal(sxe_log_get_module_level("MOD30"), SXE_LOG_LEVEL_DEBUG);
    assert_int_equal(sxe_log_set_module_level("MOD0", SXE_LOG_LEVEL_ERROR), 0);
    assert_int_equal(sxe_log_get_module_level("MOD0"), SXE_LOG_LEVEL_ERROR);
}

static void test_hex_dump(void **state)
{
    const char request[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    char expected[512];

    (void)state;
    SXE_LOG_HEX(SXE_LOG_LEVEL_INFO, request, sizeof(request) - 1);
    snprintf(expected, sizeof(expected),
             "%s0000  47 45 54 20 2f 20 48 54  54 50 2f 31 2e 31 0d 0a  |GET / HTTP/1.1..|\n"
             "%s0010  48 6f 73 74 3a 20 78 0d  0a 0d 0a                 |Host: x....     |\n",
             prefix("------", "INFO"), prefix("------", "INFO"));
    assert_string_equal(capture.text, expected);

    capture.len = 0;
    capture.text[0] = '\0';
    SXE_LOG_HEX(SXE_LOG_LEVEL_DEBUG, request, sizeof(request) - 1); /* below the level */
    SXE_LOG_HEX(SXE_LOG_LEVEL_INFO, request, 0);                    /* nothing to dump */
    assert_string_equal(capture.text, "");
}

static unsigned evaluations;

static int counted(int value)
{
    evaluations++;
    return value;
}

static int inner(int value)
{
    SXE_LOG_ENTER("(value=%d)", counted(value));
    SXE_LOG_DEBUG("inside");
    SXE_LOG_TRACE("trace %d", counted(value));
    SXE_LOG_LEAVE(" = %d", counted(value + 1));
    return value + 1;
}

static int outer(void)
{
    SXE_LOG_ENTER("()");
    int result = inner(1);
    SXE_LOG_LEAVE(" = %d", result);
    return result;
}

/* In debug builds ENTER/LEAVE draw a call tree; in release builds the macros are nothing at all. */
static void test_tracing_macros(void **state)
{
    (void)state;
    assert_int_equal(sxe_log_set_module_level("TEST", SXE_LOG_LEVEL_DUMP), 0);
    evaluations = 0;
    assert_int_equal(outer(), 2);
#ifdef SXE_DEBUG
    assert_int_equal(evaluations, 3);
    assert_int_equal(capture.lines, 6);
    assert_non_null(strstr(capture.text, "TRACE > outer()\n"));
    assert_non_null(strstr(capture.text, "TRACE   > inner(value=1)\n"));
    assert_non_null(strstr(capture.text, "DEBUG     inside\n"));
    assert_non_null(strstr(capture.text, "TRACE     trace 1\n"));
    assert_non_null(strstr(capture.text, "TRACE   < inner = 2\n"));
    assert_non_null(strstr(capture.text, "TRACE < outer = 2\n"));
#else
    assert_int_equal(evaluations, 0);
    assert_int_equal(capture.lines, 1);
    assert_non_null(strstr(capture.text, "DEBUG inside\n"));
#endif

    /* Below TRACE, the tree still indents what is written but writes no enter/leave lines. */
    capture.len = 0;
    capture.lines = 0;
    capture.text[0] = '\0';
    assert_int_equal(sxe_log_set_module_level("TEST", SXE_LOG_LEVEL_DEBUG), 0);
    assert_int_equal(outer(), 2);
    assert_int_equal(capture.lines, 1);
#ifdef SXE_DEBUG
    assert_non_null(strstr(capture.text, "DEBUG     inside\n"));
#endif
    assert_int_equal(sxe_log_set_module_level("TEST", SXE_LOG_LEVEL_INFO), 0);
}

/* The machinery behind the macros exists in every build: nesting, healing and stray leaves. */
static void test_call_tree_machinery(void **state)
{
    (void)state;
    assert_int_equal(sxe_log_set_module_level("TEST", SXE_LOG_LEVEL_TRACE), 0);
    sxe__log_enter(&test_module, "a", "()");
    sxe__log_enter(&test_module, "b", "(%d)", 1);
    sxe__log_enter(&test_module, "c", "()");
    /* c returns without a leave: leaving b heals the tree. */
    sxe__log_leave(&test_module, "b", "()");
    sxe__log_trace(&test_module, "in a");
    sxe__log_leave(&test_module, "a", " = %s", "done");
    /* A leave with no enter changes nothing. */
    sxe__log_leave(&test_module, "stray", "()");
    sxe__log_trace(&test_module, "top");
    assert_non_null(strstr(capture.text, "TRACE > a()\n"));
    assert_non_null(strstr(capture.text, "TRACE   > b(1)\n"));
    assert_non_null(strstr(capture.text, "TRACE     > c()\n"));
    assert_non_null(strstr(capture.text, "TRACE   < b()\n"));
    assert_non_null(strstr(capture.text, "TRACE   in a\n"));
    assert_non_null(strstr(capture.text, "TRACE < a = done\n"));
    assert_non_null(strstr(capture.text, "TRACE < stray()\n"));
    assert_non_null(strstr(capture.text, "TRACE top\n"));

    /* Deeper than the indentation and the stack keep: the depth still balances. */
    capture.len = 0;
    for (int i = 0; i < 80; i++) {
        sxe__log_enter(&test_module, "deep", "()");
    }
    for (int i = 0; i < 80; i++) {
        sxe__log_leave(&test_module, "deep", "()");
    }
    sxe__log_trace(&test_module, "back");
    assert_non_null(strstr(capture.text, "TRACE back\n"));
    assert_int_equal(sxe_log_set_module_level("TEST", SXE_LOG_LEVEL_INFO), 0);
}

static void test_dump_macro(void **state)
{
    (void)state;
    assert_int_equal(sxe_log_set_module_level("TEST", SXE_LOG_LEVEL_DUMP), 0);
    SXE_LOG_DUMP("abc", 3);
#ifdef SXE_DEBUG
    assert_int_equal(capture.lines, 1);
    assert_non_null(strstr(capture.text, "DUMP  0000  61 62 63"));
#else
    assert_int_equal(capture.lines, 0);
#endif
    sxe__log_dump(&test_module, "xyz", 3);
    assert_non_null(strstr(capture.text, "DUMP  0000  78 79 7a"));
    assert_int_equal(sxe_log_set_module_level("TEST", SXE_LOG_LEVEL_INFO), 0);
}

static void failing_assertion(void *arg)
{
    int value = *(int *)arg;

    sxe__log_enter(&test_module, "outer_call", "()");
    sxe__log_enter(&test_module, "inner_call", "()");
    SXE_ASSERT(value == 2);
    if (!SXE_CHECK(value == 3)) {
        sxe__assert_fail("reached in release builds", "test_log.c", __LINE__, __func__);
    }
}

/* An assertion logs the expression, where, the traced call path and a backtrace, then aborts. */
static void test_assertion_report(void **state)
{
    int one = 1;

    (void)state;
#ifdef SXE_DEBUG
    const char *const expected[] = {
        "FATAL assertion failed: value == 2 (",        "test_log.c:", " in failing_assertion)",
        "traced call path: outer_call > inner_call\n", "FATAL   #0 ", NULL};
#else
    const char *const expected[] = {"FATAL assertion failed: reached in release builds",
                                    "traced call path: outer_call > inner_call\n", NULL};
#endif
    sxe_test_expect_abort(failing_assertion, &one, expected);

    int two = 2;
#ifdef SXE_DEBUG
    const char *const check_expected[] = {"assertion failed: value == 3", NULL};
    sxe_test_expect_abort(failing_assertion, &two, check_expected);
#else
    sxe_test_expect_abort(failing_assertion, &two, expected);
#endif
}

static void untraced_assertion(void *arg)
{
    (void)arg;
    sxe__assert_fail("x", "f.c", 1, "g");
}

static void test_assertion_without_trace(void **state)
{
    const char *const expected[] = {"traced call path: (nothing traced", NULL};

    (void)state;
    sxe_test_expect_abort(untraced_assertion, NULL, expected);
}

static void asserting_sink(void *ctx, enum sxe_log_level level, const char *line, size_t len)
{
    (void)ctx;
    (void)level;
    (void)line;
    (void)len;
    sxe__assert_fail("in the sink", "sink.c", 1, "asserting_sink");
}

static void assertion_in_sink(void *arg)
{
    (void)arg;
    sxe_log_set_sink(asserting_sink, NULL);
    sxe__assert_fail("first", "f.c", 1, "g");
}

/* An assertion that fails while a report is written aborts at once instead of recursing. */
static void test_assertion_inside_report(void **state)
{
    (void)state;
    sxe_test_expect_abort(assertion_in_sink, NULL, NULL);
}

static void test_long_line_is_cut(void **state)
{
    char long_text[3000];

    (void)state;
    memset(long_text, 'x', sizeof(long_text) - 1);
    long_text[sizeof(long_text) - 1] = '\0';
    SXE_LOG_INFO("%s", long_text);
    assert_int_equal(capture.len, SXE_LOG_LINE_MAX - 1);
    assert_memory_equal(capture.text + capture.len - 5, "x...\n", 5);
}

static ssize_t write_three_bytes(int fd, const void *buf, size_t len)
{
    return write(fd, buf, len < 3 ? len : 3);
}

/*
 * The fd sink survives EINTR and short writes, and gives up quietly on any other error, whether
 * its number is below EINTR's (EPERM) or above it (EBADF, ENOSPC): that line is dropped after one
 * write, and the next line goes out alone.
 */
static void test_fd_sink(void **state)
{
    static const int hard_errors[] = {EPERM, EBADF, ENOSPC};
    int fds[2];
    char got[256] = {0};
    char expected[256];

    (void)state;
    assert_int_equal(pipe(fds), 0);
    sxe_log_set_sink(sxe_log_sink_fd, (void *)(intptr_t)fds[1]);
    sxe__sys.write = write_three_bytes;
    sxe__sys_fail(SXE_SYS_write, 1, 2, EINTR);
    SXE_LOG_WARN("through the pipe");
    assert_true(sxe__sys_calls(SXE_SYS_write) > 2);
    snprintf(expected, sizeof(expected), "%sthrough the pipe\n", prefix("------", "WARN"));
    assert_int_equal(read(fds[0], got, sizeof(got) - 1), strlen(expected));
    assert_string_equal(got, expected);

    for (size_t i = 0; i < sizeof(hard_errors) / sizeof(hard_errors[0]); i++) {
        sxe__sys_fail(SXE_SYS_write, 1, 1, hard_errors[i]);
        SXE_LOG_WARN("dropped");
        if (sxe__sys_calls(SXE_SYS_write) != 1) {
            fail_msg("errno %d: %u writes", hard_errors[i], sxe__sys_calls(SXE_SYS_write));
        }
    }
    SXE_LOG_WARN("after");
    snprintf(expected, sizeof(expected), "%safter\n", prefix("------", "WARN"));
    memset(got, 0, sizeof(got));
    assert_int_equal(read(fds[0], got, sizeof(got) - 1), strlen(expected));
    assert_string_equal(got, expected);
    close(fds[0]);
    close(fds[1]);
}

static void test_log_once(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) {
        SXE_LOG_ONCE(SXE_LOG_LEVEL_WARN, "table full (%d)", i);
    }
    assert_int_equal(capture.lines, 1);
    assert_non_null(strstr(capture.text, "table full (0)"));
}

static void test_level_names(void **state)
{
    static const char *const names[] = {"NONE", "FATAL", "ERROR", "WARN",
                                        "INFO", "DEBUG", "TRACE", "DUMP"};

    (void)state;
    for (int level = SXE_LOG_LEVEL_NONE; level <= SXE_LOG_LEVEL_DUMP; level++) {
        assert_string_equal(sxe_log_level_name((enum sxe_log_level)level), names[level]);
    }
    assert_string_equal(sxe_log_level_name((enum sxe_log_level)8), "?");
    assert_string_equal(sxe_log_level_name((enum sxe_log_level) - 1), "?");
}

/* A forked child shows its own thread id, not its parent's cached one. */
static void test_tid_after_fork(void **state)
{
    int fds[2];
    char got[256] = {0};
    char expected[32];
    int status;

    (void)state;
    SXE_LOG_INFO("parent caches its tid");
    assert_int_equal(pipe(fds), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        sxe_log_set_sink(sxe_log_sink_fd, (void *)(intptr_t)fds[1]);
        SXE_LOG_INFO("child");
        sxe_test_exit(0);
    }
    close(fds[1]);
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(read(fds[0], got, sizeof(got) - 1) > 0);
    close(fds[0]);
    snprintf(expected, sizeof(expected), " T %6d ", (int)child);
    assert_non_null(strstr(got, expected));
}

/* Settings in the program's own words, for the library's advice. */
static void test_settings_named_in_the_programs_words(void **state)
{
    char names[20][24];

    (void)state;
    assert_string_equal(sxe_log_setting("options.connections"), "options.connections");
    assert_int_equal(sxe_log_name_setting("options.connections", "--conns"), 0);
    assert_int_equal(sxe_log_name_setting("options.connections", "--connections"), 0);
    assert_string_equal(sxe_log_setting("options.connections"), "--connections");
    for (int i = 1; i < 16; i++) {
        snprintf(names[i], sizeof(names[i]), "setting.%d", i);
        assert_int_equal(sxe_log_name_setting(names[i], "words"), 0);
    }
    assert_int_equal(sxe_log_name_setting("one.too.many", "words"), -ENOBUFS);
    assert_string_equal(sxe_log_setting("one.too.many"), "one.too.many");
    assert_string_equal(sxe_log_setting("setting.15"), "words");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_line_format, setup, teardown),
        cmocka_unit_test_setup_teardown(test_object_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_levels_and_precedence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_environment_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_settings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_module_settings_are_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hex_dump, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tracing_macros, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_tree_machinery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dump_macro, setup, teardown),
        cmocka_unit_test_setup_teardown(test_assertion_report, setup, teardown),
        cmocka_unit_test_setup_teardown(test_assertion_without_trace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_assertion_inside_report, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_line_is_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fd_sink, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_level_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tid_after_fork, setup, teardown),
        cmocka_unit_test(test_settings_named_in_the_programs_words),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
