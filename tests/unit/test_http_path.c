/*
 * Request paths in normal form (src/http/parser/path.c): each rule on its own, the errors, the fast
 * check that tells a normal path from one to rewrite, in-place use, and properties over random
 * paths (the result is normal, normalizing it again changes nothing, and a path the fast check
 * calls normal is left as it is). Routing by the normal path is in test_http_server.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/server/server.h"
#include "sxe/http.h"
#include "sxe_test.h"

/* Normalizes path and checks the result (NULL: the error expected). */
static void expect(const char *path, const char *normal, ssize_t error)
{
    char out[256];
    ssize_t len = sxe_http_path_normalize(path, strlen(path), out, sizeof(out));

    if (normal == NULL) {
        if (len != error) {
            fail_msg("%s: expected %zd, got %zd", path, error, len);
        }
        return;
    }
    if (len < 0 || strcmp(out, normal) != 0 || (size_t)len != strlen(normal)) {
        fail_msg("%s: expected %s, got %s (%zd)", path, normal, len < 0 ? "an error" : out, len);
    }
}

static void test_each_rule(void **state)
{
    (void)state;
    expect("/", "/", 0);
    expect("/a/b", "/a/b", 0);
    expect("/a/b/", "/a/b/", 0);
    /* Dot segments, wherever they are. */
    expect("/a/./b", "/a/b", 0);
    expect("/a/../b", "/b", 0);
    expect("/a/b/..", "/a/", 0);
    expect("/a/b/.", "/a/b/", 0);
    expect("/a/..", "/", 0);
    expect("/.", "/", 0);
    expect("/a/b/../../c", "/c", 0);
    expect("/api/../admin/s.txt", "/admin/s.txt", 0);
    /* Names that only start with dots are names. */
    expect("/.well-known/x", "/.well-known/x", 0);
    expect("/a/..b/.c/...", "/a/..b/.c/...", 0);
    /* Escapes of unreserved bytes are those bytes, so dots hidden in them count. */
    expect("/api/%2e%2e/admin/s.txt", "/admin/s.txt", 0);
    expect("/api/%2E./admin", "/admin", 0);
    expect("/%7euser/%41%5a%30%2d%5f", "/~user/AZ0-_", 0);
    /* Other escapes keep their meaning, with upper-case digits: %2F is no separator. */
    expect("/a%2fb/%2e%2e%2fc", "/a%2Fb/..%2Fc", 0);
    expect("/caf%c3%a9", "/caf%C3%A9", 0);
    expect("/nul%00", "/nul%00", 0);
    expect("/sp%20ace", "/sp%20ace", 0);
    /* Empty segments collapse, wherever they are: "//host" can never lead a path. */
    expect("//evil.example/%2e%2e/sub", "/sub", 0);
    expect("//", "/", 0);
    expect("///a//b///", "/a/b/", 0);
    expect("/a//../b", "/b", 0);
    /* Above the root, malformed, not a path. */
    expect("/..", NULL, -EACCES);
    expect("/../a", NULL, -EACCES);
    expect("/a/../..", NULL, -EACCES);
    expect("/%2e%2e/x", NULL, -EACCES);
    expect("/a/%2", NULL, -EINVAL);
    expect("/a/%", NULL, -EINVAL);
    expect("/a%zz", NULL, -EINVAL);
    expect("/a%0g", NULL, -EINVAL);
    expect("a/b", NULL, -EINVAL);
    expect("", NULL, -EINVAL);
    expect("*", NULL, -EINVAL);
}

static void test_room_and_in_place(void **state)
{
    char out[8];
    char path[] = "/a/./b/%7e/../c//d";

    (void)state;
    /* The result may be as long as the path, and the NUL needs a byte more. */
    assert_int_equal(sxe_http_path_normalize("/abc", 4, out, 4), -ENOBUFS);
    assert_int_equal(sxe_http_path_normalize("/abc", 4, out, 5), 4);
    assert_string_equal(out, "/abc");
    /* in and out the same buffer: writing never overtakes reading. */
    assert_int_equal(sxe_http_path_normalize(path, strlen(path), path, sizeof(path)), 8);
    assert_string_equal(path, "/a/b/c/d");
}

static void test_the_fast_check(void **state)
{
    static const char *const normal[] = {"/",      "/a",  "/a/b/",   "/.well-known/x",
                                         "/a/..b", "/a.", "/a/b.c/", "/..a/b"};
    static const char *const not_normal[] = {"//",  "/a//b",   "/a/.", "/a/./b", "/a/..",
                                             "/..", "/a/../b", "/%41", "/a%2f",  "/a/b/."};

    (void)state;
    for (size_t i = 0; i < sizeof(normal) / sizeof(normal[0]); i++) {
        if (!sxe_http_path_is_normal(normal[i], strlen(normal[i]))) {
            fail_msg("%s should be normal", normal[i]);
        }
    }
    for (size_t i = 0; i < sizeof(not_normal) / sizeof(not_normal[0]); i++) {
        if (sxe_http_path_is_normal(not_normal[i], strlen(not_normal[i]))) {
            fail_msg("%s should not be normal", not_normal[i]);
        }
    }
    /* Only the bytes given count: cut short, a name that starts with a dot is a dot segment. */
    assert_true(sxe_http_path_is_normal("/a/.b", 5));
    assert_false(sxe_http_path_is_normal("/a/.b", 4));
    assert_true(sxe_http_path_is_normal("/a/..b", 6));
    assert_false(sxe_http_path_is_normal("/a/..b", 5));
}

/* A random path of '/', '.', '%', hex digits and letters, up to 24 bytes. */
static size_t random_path(char *out)
{
    static const char alphabet[] = "/./.%2e%2fa%2E.b/";
    size_t len = 1 + (size_t)(rand() % 24);

    out[0] = '/';
    for (size_t i = 1; i < len; i++) {
        out[i] = alphabet[rand() % (int)(sizeof(alphabet) - 1)];
    }
    out[len] = '\0';
    return len;
}

static void test_properties_of_random_paths(void **state)
{
    char path[32], normal[32], again[32];

    (void)state;
    srand(46);
    for (int round = 0; round < 200000; round++) {
        size_t len = random_path(path);
        ssize_t normal_len = sxe_http_path_normalize(path, len, normal, sizeof(normal));
        if (normal_len < 0) {
            continue;
        }
        /* No empty or dot segment is left (escapes may be: those of reserved bytes stay). */
        char unescaped[32];
        memcpy(unescaped, normal, (size_t)normal_len + 1);
        for (char *percent = unescaped; (percent = strchr(percent, '%')) != NULL;) {
            *percent = 'x';
        }
        if (!sxe_http_path_is_normal(unescaped, (size_t)normal_len)) {
            fail_msg("%s gave %s, which is not normal", path, normal);
        }
        if (sxe_http_path_normalize(normal, (size_t)normal_len, again, sizeof(again)) !=
                normal_len ||
            strcmp(normal, again) != 0) {
            fail_msg("%s gave %s, and that gave %s", path, normal, again);
        }
        if (sxe_http_path_is_normal(path, len) && strcmp(path, normal) != 0) {
            fail_msg("%s is normal, but became %s", path, normal);
        }
        if ((size_t)normal_len > len || normal[0] != '/') {
            fail_msg("%s gave %s", path, normal);
        }
    }
}

static void test_encoding(void **state)
{
    char out[32];

    (void)state;
    assert_int_equal(sxe_http_path_encode("/a b/\"c\"\r\n", 10, out, sizeof(out)), 20);
    assert_string_equal(out, "/a%20b/%22c%22%0D%0A");
    assert_int_equal(sxe_http_path_encode("/~x-y_z.9", 9, out, sizeof(out)), 9);
    assert_string_equal(out, "/~x-y_z.9");
    assert_int_equal(sxe_http_path_encode("/\xc3\xa9%", 4, out, sizeof(out)), 10);
    assert_string_equal(out, "/%C3%A9%25");
    /* Room for every byte and the NUL, or nothing. */
    assert_int_equal(sxe_http_path_encode("/ab", 3, out, 3), -ENOBUFS);
    assert_int_equal(sxe_http_path_encode("/ab", 3, out, 4), 3);
    assert_int_equal(sxe_http_path_encode("/ ", 2, out, 4), -ENOBUFS);
    assert_int_equal(sxe_http_path_encode("/ ", 2, out, 5), 4);
    assert_int_equal(sxe_http_path_encode("", 0, out, 0), -ENOBUFS);
    assert_int_equal(sxe_http_path_encode("", 0, out, 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_rule),      cmocka_unit_test(test_room_and_in_place),
        cmocka_unit_test(test_the_fast_check), cmocka_unit_test(test_properties_of_random_paths),
        cmocka_unit_test(test_encoding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
