/*
 * TLS contexts (tls_context.c), without a connection: each file's problem told apart, the names
 * of sxe_tls_server_add_name() refused, and invalid use. Harness: tls_test.h (its files).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "sxe/tls.h"
#include "sxe_test.h"
#include "sys.h"
#include "tls_test.h"

static sxe_tls_t *tls;

static int group_setup(void **state)
{
    (void)state;
    tls_test_files_make();
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tls_test_files_remove();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sxe_tls_destroy(tls);
    tls = NULL;
    sxe__sys_reset();
    return 0;
}

/* Names refused: not host names, twice, or with files that do not serve. */
static void test_server_name_errors(void **state)
{
    static const char *const invalid[] = {"",   "*.", "*",     "bad name", "a..b",
                                          ".a", "a.", "*.*.a", "a_b",      "é.test"};
    struct sxe_tls_options other = {.certificate = tls_other_certificate, .key = tls_other_key};
    struct sxe_test_capture capture;
    char long_name[SXE_TLS_NAME_MAX + 2];

    (void)state;
    assert_int_equal(
        sxe_tls_server_create(
            &tls, &(struct sxe_tls_options){.certificate = tls_certificate, .key = tls_key}),
        0);
    sxe_test_capture_start(&capture);
    for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
        assert_int_equal(sxe_tls_server_add_name(tls, invalid[i], &other), -EINVAL);
    }
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    assert_int_equal(sxe_tls_server_add_name(tls, long_name, &other), -EINVAL);
    long_name[sizeof(long_name) - 2] = '\0'; /* SXE_TLS_NAME_MAX: taken */
    assert_int_equal(sxe_tls_server_add_name(tls, long_name, &other), 0);
    assert_non_null(strstr(capture.text, "not a host name"));
    assert_int_equal(sxe_tls_server_add_name(tls, "other.test", &other), 0);
    assert_int_equal(sxe_tls_server_add_name(tls, "Other.TEST", &other), -EEXIST);
    assert_non_null(strstr(capture.text, "given a certificate already"));
    assert_int_equal(sxe_tls_server_add_name(
                         tls, "x.test",
                         &(struct sxe_tls_options){.certificate = "/nonexistent", .key = tls_key}),
                     -ENOENT);
    assert_int_equal(
        sxe_tls_server_add_name(
            tls, "x.test",
            &(struct sxe_tls_options){.certificate = tls_certificate, .key = tls_other_key}),
        -EPROTO);
    sxe_test_capture_stop();
    assert_int_equal(sxe_tls_server_add_name(tls, "x.test", &other), 0); /* after the failures */
}

/* The context: each file's problem is told apart. */
static void test_context_errors(void **state)
{
    struct sxe_test_capture capture;
    sxe_tls_t *made = (sxe_tls_t *)&made;

    (void)state;
    assert_true(sxe_tls_available());
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_tls_server_create(
                         &made, &(struct sxe_tls_options){.certificate = "/nonexistent/cert.pem",
                                                          .key = tls_key}),
                     -ENOENT);
    assert_null(made);
    assert_non_null(strstr(capture.text, "TLS certificate /nonexistent/cert.pem"));
    assert_int_equal(
        sxe_tls_server_create(&made, &(struct sxe_tls_options){.certificate = tls_certificate,
                                                               .key = "/nonexistent/key.pem"}),
        -ENOENT);
    assert_int_equal(
        sxe_tls_server_create(
            &made, &(struct sxe_tls_options){.certificate = tls_certificate, .key = tls_other_key}),
        -EPROTO);
    assert_non_null(strstr(capture.text, "not the key of certificate"));
    sxe_test_capture_stop();
    sxe_test_capture_start(&capture); /* a certificate that is none: said so, and nothing more */
    assert_int_equal(sxe_tls_server_create(
                         &made, &(struct sxe_tls_options){.certificate = tls_key, .key = tls_key}),
                     -EPROTO);
    assert_non_null(strstr(capture.text, "not a PEM certificate chain"));
    assert_null(strstr(capture.text, "TLS key"));
    assert_int_equal(
        sxe_tls_server_create(&made, &(struct sxe_tls_options){.certificate = tls_certificate,
                                                               .key = tls_key,
                                                               .ciphers = "NO-SUCH-CIPHER"}),
        -EPROTO);
    assert_non_null(strstr(capture.text, "TLS ciphers: none known"));
    sxe_test_capture_stop();
    assert_int_equal(
        sxe_tls_server_create(
            &made, &(struct sxe_tls_options){.certificate = tls_certificate,
                                             .key = tls_key,
                                             .ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256"}),
        0);
    sxe_tls_destroy(made);
    sxe_tls_destroy(NULL);
}

/* Invalid use: an assertion naming the check in debug builds, -EINVAL in release builds. */
static const struct tls_options_case {
    bool no_out;
    struct sxe_tls_options options;
    bool no_options;
    bool no_name; /* sxe_tls_server_add_name() only */
    const char *check;
} invalid[] = {
    {.no_out = true, .options = {.certificate = "c", .key = "k"}, .check = "tls != NULL"},
    {.no_options = true, .check = "options != NULL"},
    {.options = {.key = "k"}, .check = "options->certificate != NULL"},
    {.options = {.certificate = "c"}, .check = "options->key != NULL"},
    {.no_name = true, .options = {.certificate = "c", .key = "k"}, .check = "name != NULL"},
};

static void create_invalid(void *arg)
{
    const struct tls_options_case *wrong = arg;
    sxe_tls_t *made;

    assert_int_equal(sxe_tls_server_create(wrong->no_out ? NULL : &made,
                                           wrong->no_options ? NULL : &wrong->options),
                     -EINVAL);
}

static void add_name_invalid(void *arg)
{
    const struct tls_options_case *wrong = arg;

    assert_int_equal(sxe_tls_server_add_name(wrong->no_out ? NULL : tls,
                                             wrong->no_name ? NULL : "a.test",
                                             wrong->no_options ? NULL : &wrong->options),
                     -EINVAL);
}

/* sxe_tls_server_offer_h2() of a client's context (arg not NULL), or of none. */
static void offer_h2_invalid(void *arg)
{
    sxe_tls_t *client = NULL;

    if (arg != NULL) {
        assert_int_equal(sxe_tls_client_create(&client, NULL), 0);
    }
    assert_int_equal(sxe_tls_server_offer_h2(client), -EINVAL);
    sxe_tls_destroy(client);
}

static void test_invalid_use(void **state)
{
    (void)state;
#ifdef SXE_DEBUG
    const char *const of_a_client[] = {"assertion failed: ", "!tls->client", NULL};
    const char *const of_none[] = {"assertion failed: ", "tls != NULL", NULL};
    sxe_test_expect_abort(offer_h2_invalid, &tls, of_a_client);
    sxe_test_expect_abort(offer_h2_invalid, NULL, of_none);
#else
    offer_h2_invalid(&tls);
    offer_h2_invalid(NULL);
#endif
    assert_int_equal(
        sxe_tls_server_create(
            &tls, &(struct sxe_tls_options){.certificate = tls_certificate, .key = tls_key}),
        0);
    for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
        void *wrong = (void *)(uintptr_t)&invalid[i];
#ifdef SXE_DEBUG
        const char *const expected[] = {"assertion failed: ", invalid[i].check, NULL};
        if (!invalid[i].no_name) {
            sxe_test_expect_abort(create_invalid, wrong, expected);
        }
        sxe_test_expect_abort(add_name_invalid, wrong, expected);
#else
        if (!invalid[i].no_name) {
            create_invalid(wrong);
        }
        add_name_invalid(wrong);
#endif
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_server_name_errors, teardown),
        cmocka_unit_test(test_context_errors),
        cmocka_unit_test_teardown(test_invalid_use, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
