/*
 * sxe-httpd's access log (tools/sxe-httpd/access_log.c, compiled into this program) when a write
 * to its file fails. It calls libc's write, not the library's seam, so this program is linked
 * with write wrapped (-Wl,--wrap=write): a test makes the next write to the log's file fail with a
 * chosen errno. The lines come from a server of the library whose log hook is the access log's.
 */
#define _GNU_SOURCE /* the seam's struct mmsghdr (sys.h) */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access_log.h"
#include "http_test.h"
#include "proxy.h"

/* The proxy is not part of this program: no request here reached an upstream (the system tests
 * log proxied ones). */
bool proxy_upstream(const sxe_http_t *http, unsigned *id, uint64_t *ns, bool *ended)
{
    (void)http, (void)id, (void)ns, (void)ended;
    return false;
}

const char *proxy_upstream_name(unsigned id)
{
    (void)id;
    return NULL;
}

ssize_t __real_write(int fd, const void *buf, size_t len);
ssize_t __wrap_write(int fd, const void *buf, size_t len);

static struct stat log_file; /* the log's file, told from other descriptors by its inode */
static int failing_err;      /* the next write to it fails with this, once (0: none) */
static unsigned log_writes;  /* the writes to it */

ssize_t __wrap_write(int fd, const void *buf, size_t len)
{
    struct stat status;

    if (fstat(fd, &status) == 0 && status.st_dev == log_file.st_dev &&
        status.st_ino == log_file.st_ino) {
        log_writes++;
        if (failing_err != 0) {
            errno = failing_err;
            failing_err = 0;
            return -1;
        }
    }
    return __real_write(fd, buf, len);
}

static void hello(sxe_http_t *http, void *arg)
{
    (void)arg;
    sxe_http_respond(http, 200, "text/plain", "hello\n", 6);
}

/* Asks for / on a connection of its own and reads the answer: the server logs the request. */
static void ask(void)
{
    static const char request[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    char reply[256];
    int fd = sxe_test_client(port);

    assert_int_equal(send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL), sizeof(request) - 1);
    http_test_turn(0);
    assert_true(recv(fd, reply, sizeof(reply), MSG_DONTWAIT) > 0);
    close(fd);
    http_test_turn(0);
}

/* The lines in the file open at fd. */
static unsigned lines_in(int fd)
{
    char text[4096];
    unsigned lines = 0;
    ssize_t len = pread(fd, text, sizeof(text), 0);

    assert_true(len >= 0 && len < (ssize_t)sizeof(text));
    for (ssize_t i = 0; i < len; i++) {
        lines += text[i] == '\n';
    }
    return lines;
}

/*
 * A line whose write is interrupted (EINTR) is written again, whole; one whose write fails with
 * an errno below EINTR's (EPERM) or above it (ENOSPC, a full disk) is dropped after that write, as
 * nginx drops it, and the next line goes out as usual.
 */
static void test_a_failed_write_drops_its_line_and_an_interrupted_one_is_made_again(void **state)
{
    static const struct {
        int err;
        unsigned writes; /* to the log's file, for the request */
        unsigned lines;  /* in the file after it */
    } requests[] = {{0, 1, 1}, {EINTR, 2, 2}, {EPERM, 1, 2}, {ENOSPC, 1, 2}, {0, 1, 3}};
    char path[] = "/tmp/sxe-test-access-log-XXXXXX";
    int fd = mkstemp(path);

    (void)state;
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &log_file), 0);
    assert_int_equal(access_log_open(path, ACCESS_LOG_COMMON, 0), 0);
    unlink(path); /* both descriptors keep the file */
    assert_int_equal(
        sxe_http_server_create(&server, NULL,
                               &(struct sxe_http_server_options){.on_log = access_log_write}),
        0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/", 0, hello, NULL), 0);
    http_test_listen();
    for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++) {
        failing_err = requests[i].err;
        log_writes = 0;
        ask();
        unsigned lines = lines_in(fd);
        if (log_writes != requests[i].writes || lines != requests[i].lines) {
            fail_msg("errno %d: %u writes, %u lines", requests[i].err, log_writes, lines);
        }
    }
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(
            test_a_failed_write_drops_its_line_and_an_interrupted_one_is_made_again, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
