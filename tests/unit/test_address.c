/* Addresses from text (sxe_address_parse), and a raw server listening on one (sxe_conn_listen_at).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sys.h"
#include "sxe_test.h"

/* Parses text and says what it holds, as "v4 1.2.3.4 80" or "v6 ::1 443", or the error. */
static const char *parsed(const char *text, int default_port)
{
    static char said[96];
    struct sockaddr_storage address;
    socklen_t len = 0;
    char host[INET6_ADDRSTRLEN];
    int rc = sxe_address_parse(text, default_port, &address, &len);

    if (rc < 0) {
        snprintf(said, sizeof(said), "error %d", rc);
        return said;
    }
    if (address.ss_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&address;
        assert_int_equal(len, sizeof(*v6));
        inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
        snprintf(said, sizeof(said), "v6 %s %u", host, ntohs(v6->sin6_port));
    } else {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)&address;
        assert_int_equal(address.ss_family, AF_INET);
        assert_int_equal(len, sizeof(*v4));
        inet_ntop(AF_INET, &v4->sin_addr, host, sizeof(host));
        snprintf(said, sizeof(said), "v4 %s %u", host, ntohs(v4->sin_port));
    }
    return said;
}

static void test_addresses_as_people_write_them(void **state)
{
    static const struct {
        const char *text;
        int default_port;
        const char *said;
    } cases[] = {
        {"127.0.0.1:8080", -1, "v4 127.0.0.1 8080"},
        {"[::1]:443", -1, "v6 ::1 443"},
        {"[fe80::1:2]:0", -1, "v6 fe80::1:2 0"},
        {"localhost:80", -1, "v4 127.0.0.1 80"},
        {":8080", -1, "v4 0.0.0.0 8080"},
        {"127.0.0.2", 9, "v4 127.0.0.2 9"},
        {"::1", 9, "v6 ::1 9"},
        {"[::1]", 9, "v6 ::1 9"},
        {"localhost", 9, "v4 127.0.0.1 9"},
        {"127.0.0.1:65535", -1, "v4 127.0.0.1 65535"},
        /* The longest an IPv6 address is written (45 characters): the host's buffer holds it. */
        {"[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:1", -1,
         "v6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 1"},
        {"ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255", 2,
         "v6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 2"},
        {"127.0.0.1", -1, "error -22"},
        {"::1", -1, "error -22"},
        {"127.0.0.1:65536", -1, "error -22"},
        {"127.0.0.1:99999", -1, "error -22"},
        {"127.0.0.1:", -1, "error -22"},
        {"127.0.0.1:8x", -1, "error -22"},
        {"127.0.0.1:-1", -1, "error -22"},
        {"127.0.0.1:+80", -1, "error -22"},
        {"nowhere:80", -1, "error -22"},
        {"nowhere", 80, "error -22"},
        {"[127.0.0.1]:80", -1, "error -22"},
        {"[::1]x:80", -1, "error -22"},
        {"[::1:80", -1, "error -22"},
        {"", -1, "error -22"},
        {"1.2.3.4.5:80", -1, "error -22"},
        {"[0000:0000:0000:0000:0000:0000:0000:0000:0000]:80", -1, "error -22"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *said = parsed(cases[i].text, cases[i].default_port);
        if (strcmp(said, cases[i].said) != 0) {
            fail_msg("%s (%d): expected %s, got %s", cases[i].text, cases[i].default_port,
                     cases[i].said, said);
        }
    }
}

static void test_the_host_of_an_address(void **state)
{
    static const struct {
        const char *text, *host;
    } cases[] = {
        {"127.0.0.1:8080", "127.0.0.1"},
        {"[::1]:443", "::1"},
        {"[::1]", "::1"},
        {"::1", "::1"},
        {"localhost:80", "localhost"},
        {":8080", ""},
        {"example.com:8443", "example.com"},
        {"example.com", "example.com"},
        {"[::1:80", "[::1:80"},
    };
    char host[16];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(host, 'x', sizeof(host));
        assert_int_equal(sxe_address_host(cases[i].text, host, sizeof(host)), 0);
        assert_string_equal(host, cases[i].host);
    }
    /* The whole host and its NUL must fit: 15 bytes of name in 16, not 16. */
    assert_int_equal(sxe_address_host("[1111:2222:3333:4444]:1", host, sizeof(host)), -EINVAL);
    assert_int_equal(sxe_address_host("abcdefghijklmno:1", host, sizeof(host)), 0);
    assert_string_equal(host, "abcdefghijklmno");
    assert_int_equal(sxe_address_host("abcdefghijklmnop:1", host, sizeof(host)), -EINVAL);
}

static size_t echo(sxe_conn_t *conn, const char *data, size_t len)
{
    assert_true(sxe_conn_write(conn, data, len) >= 0);
    return len;
}

/* The port of a parsed address, either family; another family has none. */
static void test_the_port_of_an_address(void **state)
{
    struct sockaddr_storage address;
    socklen_t len;

    (void)state;
    assert_int_equal(sxe_address_parse("127.0.0.1:8443", -1, &address, &len), 0);
    assert_int_equal(sxe_address_port((struct sockaddr *)&address), 8443);
    assert_int_equal(sxe_address_parse("[::1]:65535", -1, &address, &len), 0);
    assert_int_equal(sxe_address_port((struct sockaddr *)&address), 65535);
    assert_int_equal(sxe_address_parse(":0", -1, &address, &len), 0);
    assert_int_equal(sxe_address_port((struct sockaddr *)&address), 0);
    address.ss_family = AF_UNIX;
    assert_int_equal(sxe_address_port((struct sockaddr *)&address), -EAFNOSUPPORT);
}

static void test_a_raw_server_listens_on_text(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_read = echo};
    sxe_loop_t *loop;
    sxe_conn_t *listener;
    struct sockaddr_in bound;
    socklen_t len = sizeof(bound);
    char got[8];

    (void)state;
    assert_int_equal(sxe_loop_create(&loop, &(struct sxe_loop_options){.connections = 8}), 0);
    assert_int_equal(sxe_conn_listen_at(loop, &listener, "no-such-host:1", NULL, &handlers, NULL),
                     -EINVAL);
    /* The port is required: an address without one is refused, not bound to a port of chance. */
    assert_int_equal(sxe_conn_listen_at(loop, &listener, "127.0.0.1", NULL, &handlers, NULL),
                     -EINVAL);
    assert_int_equal(sxe_conn_listen_at(loop, &listener, "localhost:0", NULL, &handlers, NULL), 0);
    assert_int_equal(getsockname(sxe_conn_fd(listener), (struct sockaddr *)&bound, &len), 0);
    assert_int_equal(bound.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
    int fd = sxe_test_client(ntohs(bound.sin_port));
    assert_int_equal(send(fd, "ping", 4, 0), 4);
    ssize_t have = 0;
    for (int turns = 0; turns < 1000 && have < 4; turns++) {
        assert_true(sxe_loop_run_once(loop, SXE_NS_PER_MSEC) >= 0);
        ssize_t n = recv(fd, got + have, sizeof(got) - (size_t)have, MSG_DONTWAIT);
        have += n > 0 ? n : 0;
    }
    assert_int_equal(have, 4);
    assert_memory_equal(got, "ping", 4);
    close(fd);
    sxe_loop_destroy(loop);
}

/* Each system call a listener needs fails in turn: its error comes back, and nothing leaks. */
static void test_listening_fails_cleanly_at_every_call(void **state)
{
    static const struct {
        enum sxe__sys_call call;
        int err;
    } faults[] = {
        {SXE_SYS_socket, EMFILE},
        {SXE_SYS_setsockopt, ENOPROTOOPT},
        {SXE_SYS_bind, EADDRINUSE},
        {SXE_SYS_listen, EADDRINUSE},
    };
    static const struct sxe_conn_handlers handlers = {.on_read = echo};
    sxe_loop_t *loop;
    sxe_conn_t *listener;

    (void)state;
    assert_int_equal(sxe_loop_create(&loop, &(struct sxe_loop_options){.connections = 8}), 0);
    unsigned fds = sxe_test_open_fds();
    for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
        sxe__sys_fail(faults[i].call, 1, 1, faults[i].err);
        assert_int_equal(sxe_conn_listen_at(loop, &listener, "127.0.0.1:0", NULL, &handlers, NULL),
                         -faults[i].err);
        assert_int_equal(sxe_test_open_fds(), fds);
        sxe__sys_reset();
    }
    assert_int_equal(sxe_conn_listen_at(loop, &listener, "127.0.0.1:0", NULL, &handlers, NULL), 0);
    sxe_loop_destroy(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_addresses_as_people_write_them),
        cmocka_unit_test(test_the_host_of_an_address),
        cmocka_unit_test(test_the_port_of_an_address),
        cmocka_unit_test(test_a_raw_server_listens_on_text),
        cmocka_unit_test(test_listening_fails_cleanly_at_every_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
