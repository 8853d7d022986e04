/*
 * Workers' reload (workers_reload.c): the sockets a reload passes on in SXE_WORKERS_INHERIT are
 * taken back by the listener of their address (or place, for a port of 0), a group larger than
 * the set is shared out, sockets no listener takes are closed, a spread that changed binds anew,
 * and a reload that is refused or whose exec fails leaves the set serving. Each case runs in a
 * process of its own: the passed sockets are read once a process.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sxe_test.h"
#include "sys.h"
#include "workers_harness.h"

/* In a child process: a failure ends it, with its line (cmocka's asserts would go on to run the
 * other tests in it). */
#define CHECK(condition)                                                                           \
    do {                                                                                           \
        if (!(condition)) {                                                                        \
            fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #condition);                \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

static struct sockaddr_in loopback(const char *ip, int port)
{
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};

    inet_pton(AF_INET, ip, &address.sin_addr);
    return address;
}

/* A listening socket on ip:port, of a reuseport group or not, blocking (as a program passing its
 * own might make it). */
static int listening(const char *ip, int port, bool reuseport)
{
    struct sockaddr_in address = loopback(ip, port);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int on = 1;

    CHECK(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (reuseport) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on));
    }
    CHECK(bind(fd, (struct sockaddr *)&address, sizeof(address)) == 0);
    CHECK(listen(fd, 64) == 0);
    return fd;
}

static int port_of(int fd)
{
    struct sockaddr_in address;
    socklen_t len = sizeof(address);

    CHECK(getsockname(fd, (struct sockaddr *)&address, &len) == 0);
    return ntohs(address.sin_port);
}

/* Runs body in a child process; the test fails unless it exits 0. */
static void in_child(void (*body)(void))
{
    pid_t pid = fork();
    int status;

    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        body();
        sxe_test_exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* Runs the set's supervisor in a child; @return its pid. */
static pid_t run_set(sxe_workers_t *set)
{
    static struct behaviour behaviour;
    pid_t pid = fork();

    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        sxe_test_exit(sxe_workers_run(set, start_worker, NULL, &behaviour) == 0 ? 0 : 1);
    }
    return pid;
}

static int stop_set(pid_t pid)
{
    int status;

    kill(pid, SIGTERM);
    CHECK(waitpid(pid, &status, 0) == pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A group of three passed on to a set of two, listening with a port of 0 in the first place:
 * worker 0 takes sockets 0 and 2, worker 1 socket 1, so every socket is served. */
static void shrunk_group_body(void)
{
    int fds[3];
    char text[64];
    sxe_workers_t *set;

    fds[0] = listening("127.0.0.1", 0, true);
    int port = port_of(fds[0]);
    fds[1] = listening("127.0.0.1", port, true);
    fds[2] = listening("127.0.0.1", port, true);
    snprintf(text, sizeof(text), "%d,%d,%d;", fds[0], fds[1], fds[2]);
    setenv("SXE_WORKERS_INHERIT", text, 1);
    CHECK(sxe_workers_create(&set, &(struct sxe_workers_options){.count = 2}) == 0);
    struct sockaddr_in any = loopback("127.0.0.1", 0);
    CHECK(sxe_workers_listen(set, (struct sockaddr *)&any, sizeof(any), NULL) == 0);
    CHECK(sxe_workers_port(set, 0) == port);
    CHECK(fcntl(fds[1], F_GETFD) & FD_CLOEXEC); /* for the set's own again */
    CHECK(fcntl(fds[2], F_GETFL) & O_NONBLOCK); /* made blocking, as this test does */
    pid_t pid = run_set(set);
    for (unsigned i = 0; i < 3; i++) {
        close(fds[i]); /* the set's now: only its processes hold them */
    }
    unsigned answered[2] = {0, 0};
    /* the kernel hashes them over the three sockets: 300 make a tie a chance of 1 in 10^8 (60
     * tied now and then) */
    for (int i = 0; i < 300; i++) {
        int fd = client(port);
        int worker = ask(fd);
        if (worker != 0 && worker != 1) {
            fprintf(stderr, "connection %d: answered by %d\n", i, worker);
        }
        CHECK(worker == 0 || worker == 1);
        answered[worker]++;
        close(fd);
    }
    CHECK(answered[0] > answered[1]); /* two sockets of three */
    CHECK(stop_set(pid) == 0);
    sxe_workers_destroy(set);
}

static void test_a_group_larger_than_the_set_is_shared_out(void **state)
{
    (void)state;
    in_child(shrunk_group_body);
}

/* A socket no listener takes is closed when the set runs; a listener elsewhere binds its own; one
 * whose spread changed (a plain socket for a reuseport set) is closed at once and bound again. */
static void unclaimed_body(void)
{
    int kept = listening("127.0.0.1", 0, false); /* a hand-off set's socket */
    int gone = listening("127.0.0.1", 0, true);
    int kept_port = port_of(kept), gone_port = port_of(gone);
    char text[64];
    sxe_workers_t *set;

    snprintf(text, sizeof(text), "%d;%d", kept, gone);
    setenv("SXE_WORKERS_INHERIT", text, 1);
    CHECK(sxe_workers_create(&set, &(struct sxe_workers_options){.count = 1}) == 0);
    struct sockaddr_in same = loopback("127.0.0.1", kept_port);
    CHECK(sxe_workers_listen(set, (struct sockaddr *)&same, sizeof(same), NULL) == 0);
    struct sockaddr_in other = loopback("127.0.0.2", 0);
    CHECK(sxe_workers_listen(set, (struct sockaddr *)&other, sizeof(other), NULL) == 1);
    pid_t pid = run_set(set);
    close(gone);
    int fd = client(kept_port); /* bound anew, and served */
    CHECK(ask(fd) == 0);
    close(fd);
    struct sockaddr_in to_gone = loopback("127.0.0.1", gone_port);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    for (int i = 0; i < 100 && connect(fd, (struct sockaddr *)&to_gone, sizeof(to_gone)) == 0;
         i++) {
        close(fd); /* the child may not have closed it yet */
        sleep_ms(10);
        fd = socket(AF_INET, SOCK_STREAM, 0);
    }
    CHECK(errno == ECONNREFUSED);
    close(fd);
    CHECK(stop_set(pid) == 0);
    sxe_workers_destroy(set);
}

static void test_sockets_no_listener_takes_are_closed(void **state)
{
    (void)state;
    in_child(unclaimed_body);
}

/* What does not parse is said and left: the listener binds as if nothing was passed. */
static void garbage_body(void)
{
    static const char *const garbage[] = {"x", "5,", "7+", "-3;", ";"};
    sxe_workers_t *set;

    setenv("SXE_WORKERS_INHERIT", garbage[getpid() % 5], 1);
    CHECK(sxe_workers_create(&set, &(struct sxe_workers_options){.count = 1}) == 0);
    struct sockaddr_in any = loopback("127.0.0.1", 0);
    CHECK(sxe_workers_listen(set, (struct sockaddr *)&any, sizeof(any), NULL) == 0);
    CHECK(sxe_workers_port(set, 0) > 0);
    sxe_workers_destroy(set);
}

static void test_what_does_not_parse_is_left(void **state)
{
    (void)state;
    for (int i = 0; i < 5; i++) {
        in_child(garbage_body);
    }
}

/* A reuseport socket passed to a hand-off set: the set keeps reuseport (the old workers hold the
 * group, so a plain socket could not bind); a second listener that disagrees is bound anew. Other
 * descriptors named (a socket pair's end, a connection as a listener) are not taken. */
static void spread_body(void)
{
    int group = listening("127.0.0.1", 0, true);
    int plain = listening("127.0.0.1", 0, false);
    int pair[2];
    char text[96];
    sxe_workers_t *set;

    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
    snprintf(text, sizeof(text), "%d;%d", group, plain);
    setenv("SXE_WORKERS_INHERIT", text, 1);
    setenv("SXE_WORKERS_DRAINING", "1,999999999,x", 1); /* not this process's children */
    CHECK(sxe_workers_create(
              &set, &(struct sxe_workers_options){.count = 2, .spread = SXE_SPREAD_HAND_OFF}) == 0);
    struct sockaddr_in first = loopback("127.0.0.1", port_of(group));
    CHECK(sxe_workers_listen(set, (struct sockaddr *)&first, sizeof(first), NULL) == 0);
    struct sockaddr_in second = loopback("127.0.0.1", port_of(plain));
    int plain_port = port_of(plain);
    CHECK(sxe_workers_listen(set, (struct sockaddr *)&second, sizeof(second), NULL) == 1);
    CHECK(sxe_workers_port(set, 1) == plain_port);
    int group_port = port_of(group);
    pid_t pid = run_set(set);
    close(group);
    for (int i = 0; i < 10; i++) { /* the group serves, by reuseport (the harness's workers take
                                    * listener 0 only: the other is bound, not served) */
        int fd = client(group_port);
        CHECK(ask(fd) >= 0);
        close(fd);
    }
    CHECK(stop_set(pid) == 0); /* and no wait for the processes named as draining */
    CHECK(fcntl(pair[1], F_GETFD) >= 0);
    sxe_workers_destroy(set);
}

static void test_a_changed_spread_keeps_the_sockets_one(void **state)
{
    (void)state;
    in_child(spread_body);
}

/* Descriptors that are not listening sockets are named: nothing is taken, nothing closed. */
static void not_listeners_body(void)
{
    int pair[2];
    char text[64];
    sxe_workers_t *set;

    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
    snprintf(text, sizeof(text), "%d", pair[0]);
    setenv("SXE_WORKERS_INHERIT", text, 1);
    CHECK(sxe_workers_create(&set, &(struct sxe_workers_options){.count = 1}) == 0);
    struct sockaddr_in any = loopback("127.0.0.1", 0);
    CHECK(sxe_workers_listen(set, (struct sockaddr *)&any, sizeof(any), NULL) == 0);
    pid_t pid = run_set(set);
    int fd = client(sxe_workers_port(set, 0)); /* serving: its signals are read */
    CHECK(ask(fd) == 0);
    close(fd);
    CHECK(stop_set(pid) == 0);
    CHECK(fcntl(pair[0], F_GETFD) >= 0); /* still open: not ours */
    sxe_workers_destroy(set);
}

static void test_what_is_not_a_listener_is_left_alone(void **state)
{
    (void)state;
    in_child(not_listeners_body);
}

/* The reload's exec, seen by the seam: what it passes, then a failure. */
struct exec_seen {
    int calls;
    char argv0[64];
    char inherit[128];
    int cloexec; /* the listener's descriptor flag when it was called */
};
static struct exec_seen *seen;
static int refuse;

static int execv_fails(const char *path, char *const argv[])
{
    (void)path;
    seen->calls++;
    snprintf(seen->argv0, sizeof(seen->argv0), "%s", argv[0]);
    const char *inherit = getenv("SXE_WORKERS_INHERIT");
    snprintf(seen->inherit, sizeof(seen->inherit), "%s", inherit ? inherit : "");
    int fd = atoi(seen->inherit);
    seen->cloexec = fcntl(fd, F_GETFD) & FD_CLOEXEC;
    errno = ENOENT;
    return -1;
}

static int on_reload(void *arg)
{
    (void)arg;
    return refuse ? -EPERM : 0;
}

/* A set of count workers on 127.0.0.1 that reloads with argv after check, run in a child whose
 * exec is execv_fails (counted in seen, cleared here); a client connected and answered.
 * @return the child's pid; *set, *port and *fd for the rest. */
static pid_t reloadable(sxe_workers_t **set, unsigned count, char *const *argv,
                        int (*check)(void *arg), int *port, int *fd)
{
    memset(seen, 0, sizeof(*seen));
    sxe__sys.execv = execv_fails; /* the supervisor, forked, has this seam */
    assert_int_equal(sxe_workers_create(set, &(struct sxe_workers_options){.count = count,
                                                                           .reload_argv = argv,
                                                                           .on_reload = check}),
                     0);
    struct sockaddr_in any = loopback("127.0.0.1", 0);
    assert_int_equal(sxe_workers_listen(*set, (struct sockaddr *)&any, sizeof(any), NULL), 0);
    *port = sxe_workers_port(*set, 0);
    pid_t pid = run_set(*set);
    sxe__sys_reset();
    *fd = client(*port);
    assert_true(ask(*fd) >= 0);
    return pid;
}

static void test_a_reload_refused_or_failed_serves_on(void **state)
{
    static char program[] = "the-program", option[] = "-c", file[] = "file";
    static char *const argv[] = {program, option, file, NULL};
    sxe_workers_t *set;

    (void)state;
    seen = mmap(NULL, sizeof(*seen), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(seen != MAP_FAILED);
    for (refuse = 1; refuse >= 0; refuse--) {
        int port, fd;
        pid_t pid = reloadable(&set, 2, argv, on_reload, &port, &fd);
        kill(pid, SIGHUP);
        sleep_ms(200); /* a refusal has no sign but time; an exec is waited for (a busy host) */
        for (unsigned waited = 0; !refuse && seen->calls == 0 && waited < 500; waited++) {
            sleep_ms(10);
        }
        assert_int_equal(seen->calls, refuse ? 0 : 1);
        if (!refuse) {
            assert_string_equal(seen->argv0, "the-program");
            assert_non_null(strchr(seen->inherit, ',')); /* the group of two */
            assert_int_equal(seen->cloexec, 0);          /* kept through the exec */
        }
        assert_true(ask(fd) >= 0); /* the workers were never told to drain */
        close(fd);
        fd = client(port);
        assert_true(ask(fd) >= 0);
        close(fd);
        assert_int_equal(stop_set(pid), 0);
        sxe_workers_destroy(set);
    }
    munmap(seen, sizeof(*seen));
}

static int slow_check(void *arg)
{
    (void)arg;
    sleep_ms(400);
    return 0;
}

/* The check runs in a child: the set serves meanwhile, a second SIGHUP is not made, and the one
 * check that passed reloads once; a stop during a check ends it, and nothing is executed. */
static void test_a_check_runs_beside_the_set(void **state)
{
    static char program[] = "the-program";
    static char *const argv[] = {program, NULL};
    sxe_workers_t *set;

    (void)state;
    seen = mmap(NULL, sizeof(*seen), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(seen != MAP_FAILED);
    for (int stop_first = 0; stop_first < 2; stop_first++) {
        int port, fd;
        pid_t pid = reloadable(&set, 1, argv, slow_check, &port, &fd);
        kill(pid, SIGHUP);
        sleep_ms(100);
        kill(pid, SIGHUP); /* during the check: not made */
        int other = client(port);
        assert_true(ask(other) >= 0); /* served meanwhile */
        close(other);
        if (stop_first) {
            assert_int_equal(stop_set(pid), 0);
            assert_int_equal(seen->calls, 0);
        } else {
            for (unsigned waited = 0; seen->calls == 0 && waited < 500; waited++) {
                sleep_ms(10); /* the check's 400 ms, then the exec: longer on a busy host */
            }
            assert_int_equal(seen->calls, 1);
            assert_true(ask(fd) >= 0); /* the exec failed: the set serves on */
            assert_int_equal(stop_set(pid), 0);
        }
        close(fd);
        sxe_workers_destroy(set);
    }
    munmap(seen, sizeof(*seen));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_group_larger_than_the_set_is_shared_out),
        cmocka_unit_test(test_sockets_no_listener_takes_are_closed),
        cmocka_unit_test(test_what_does_not_parse_is_left),
        cmocka_unit_test(test_a_changed_spread_keeps_the_sockets_one),
        cmocka_unit_test(test_what_is_not_a_listener_is_left_alone),
        cmocka_unit_test(test_a_reload_refused_or_failed_serves_on),
        cmocka_unit_test(test_a_check_runs_beside_the_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
