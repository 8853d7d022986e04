/*
 * The workers' control socket (workers_control.c): the commands and their answers, peers that send
 * too much, nothing or too slowly, the faults of opening it (a
 * path too long, a file of another kind, a program answering, socket, bind and listen failing),
 * a stale socket replaced, the file removed at the end, and SIGUSR1 calling on_reopen in the
 * supervisor and every worker.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sxe_test.h"
#include "sys.h"
#include "workers_harness.h"

static char path[108];

static void make_path(const char *name)
{
    snprintf(path, sizeof(path), "/tmp/sxe-test-control-%d-%s", (int)getpid(), name);
    unlink(path);
}

static struct sockaddr_un address_of(const char *at)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};

    memcpy(address.sun_path, at, strlen(at));
    return address;
}

/* Connects to the control socket (waiting up to 5 s for it). @return the socket. */
static int peer(void)
{
    struct sockaddr_un address = address_of(path);
    struct timeval wait = {.tv_sec = 5};

    for (int tries = 0; tries < 500; tries++) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
        if (connect(fd, (struct sockaddr *)&address, sizeof(address)) == 0) {
            return fd;
        }
        close(fd);
        sleep_ms(10);
    }
    fail_msg("no control socket at %s", path);
    return -1;
}

/* Sends line (len bytes) and reads the answer to its end, into answer. */
static const char *command(const char *line, size_t len, char *answer, size_t size)
{
    int fd = peer();
    size_t got = 0;
    ssize_t n;

    if (len > 0) {
        assert_int_equal(write(fd, line, len), (ssize_t)len);
    } else {
        shutdown(fd, SHUT_WR); /* nothing to say */
    }
    while (got + 1 < size && (n = read(fd, answer + got, size - got - 1)) > 0) {
        got += (size_t)n;
    }
    answer[got] = '\0';
    close(fd);
    return answer;
}

#define ASK(line, answer) command(line, sizeof(line) - 1, answer, sizeof(answer))

static void start(struct server *server, unsigned count)
{
    *server = (struct server){0};
    server_start(server, &(struct sxe_workers_options){.count = count, .control_path = path});
}

static void test_commands(void **state)
{
    struct server server;
    char answer[8192];

    (void)state;
    make_path("commands");
    /* the server's environment, forked: one module set there, and no level for all (the run
     * with every level on sets one) */
    char *every = getenv("SXE_LOG_LEVEL") != NULL ? strdup(getenv("SXE_LOG_LEVEL")) : NULL;
    setenv("SXE_LOG_LEVEL_ENVSET", "warn", 1);
    unsetenv("SXE_LOG_LEVEL");
    start(&server, 2);
    unsetenv("SXE_LOG_LEVEL_ENVSET");
    if (every != NULL) {
        setenv("SXE_LOG_LEVEL", every, 1);
        free(every);
    }
    assert_non_null(strstr(ASK("help\n", answer), "log-level MODULE LEVEL"));
    int fd = client(server.port);
    assert_int_equal(ask(fd), ask(fd)); /* two requests on one connection */
    ASK("status\n", answer);
    assert_non_null(strstr(answer, ": 2 worker processes (reuseport), up "));
    assert_non_null(strstr(answer, "\ntotal "));
    ASK("status json\r\n", answer);
    assert_non_null(strstr(answer, "\"workers\":2,\"kind\":\"processes\""));
    assert_non_null(strstr(answer, "\"total\":{\"open\":1,\"connections\":1,\"requests\":2"));
    /* the client's connection, idle between requests, listed by the worker that holds it */
    struct sockaddr_in local;
    socklen_t local_len = sizeof(local);
    char peer_text[32];
    assert_int_equal(getsockname(fd, (struct sockaddr *)&local, &local_len), 0);
    snprintf(peer_text, sizeof(peer_text), "127.0.0.1:%u ", ntohs(local.sin_port));
    ASK("connections\n", answer);
    assert_memory_equal(answer, "worker peer ", 12);
    assert_non_null(strstr(answer, peer_text));
    assert_non_null(strstr(answer, " idle "));
    ASK("connections json\n", answer);
    assert_memory_equal(answer, "{\"connections\":[{\"worker\":", 26);
    assert_non_null(strstr(answer, "\"state\":\"idle\""));
    assert_non_null(strstr(answer, "\"workers\":[{\"index\":0,\"running\":true,\"answered\":true"));
    assert_non_null(strstr(ASK("connections now\n", answer), "is not a command"));
    close(fd);
    assert_string_equal(ASK("log-level conn 5\n", answer),
                        "ok: CONN at DEBUG in the supervisor and 2 worker processes\n");
    assert_string_equal(ASK("log-level all warn\n", answer),
                        "ok: every module not set by name at WARN in the supervisor and 2 worker "
                        "processes\n");
    assert_string_equal(ASK("log-level conn warn\n", answer), /* the same slot again */
                        "ok: CONN at WARN in the supervisor and 2 worker processes\n");
    assert_non_null(strstr(ASK("log-level conn 9\n", answer), "error: no level \"9\""));
    assert_non_null(strstr(ASK("log-level conn \x1b[2J\n", answer), "error: no level \"?[2J\""));
    assert_non_null(
        strstr(ASK("log-level b@d info\n", answer), "error: a module is named in 1 to"));
    assert_non_null(strstr(ASK("log-level envset info\n", answer),
                           "error: SXE_LOG_LEVEL_ENVSET in the server's environment sets that "
                           "level; it wins"));
    /* the table of modules set by name fills; "all" has a place of its own */
    for (unsigned i = 0; i < 15; i++) { /* with CONN, the 16 places (ENVSET was refused) */
        char line[40];
        snprintf(line, sizeof(line), "log-level m%u warn\n", i);
        assert_memory_equal(command(line, strlen(line), answer, sizeof(answer)), "ok: M", 5);
    }
    assert_non_null(strstr(ASK("log-level m99 warn\n", answer), "error: cannot set M99's level"));
    assert_string_equal(ASK("log-level conn info\n", answer), /* its own place again */
                        "ok: CONN at INFO in the supervisor and 2 worker processes\n");
    assert_string_equal(ASK("reopen\n", answer),
                        "ok: nothing to reopen here: counters written to the log\n");
    assert_string_equal(ASK("reload\n", answer), "error: SIGHUP is ignored here (no hook)\n");
    assert_string_equal(ASK("what\tnow\n", answer), /* the line as sent, its bytes printable */
                        "error: \"what?now\" is not a command (help lists them)\n");
    /* the peer shuts its side: its line ends there */
    int half = peer();
    assert_int_equal(write(half, "help", 4), 4);
    shutdown(half, SHUT_WR);
    assert_true(read(half, answer, sizeof(answer)) > 0);
    close(half);
    assert_string_equal(ASK("stop\n", answer), "ok: stopping\n");
    assert_int_equal(server_wait(&server), 0);
    assert_int_equal(access(path, F_OK), -1); /* removed at the end */
}

static void test_hostile_peers(void **state)
{
    struct server server;
    char answer[512], line[400];

    (void)state;
    make_path("hostile");
    start(&server, 1);
    memset(line, 'x', sizeof(line));
    assert_string_equal(command(line, sizeof(line), answer, sizeof(answer)),
                        "error: a command is one line of at most 255 bytes\n");
    assert_string_equal(ASK("", answer), ""); /* nothing said: closed */
    int silent = peer();
    assert_true(read(silent, answer, sizeof(answer)) > 0);
    assert_non_null(strstr(answer, "no command line came within a second"));
    close(silent);
    /* more peers than are read at once: each is answered in turn */
    int many[20];
    for (unsigned i = 0; i < 20; i++) {
        many[i] = peer();
        assert_int_equal(write(many[i], "status\n", 7), 7);
    }
    for (unsigned i = 0; i < 20; i++) {
        assert_true(read(many[i], answer, sizeof(answer)) > 0);
        assert_memory_equal(answer, "pid ", 4);
        close(many[i]);
    }
    /* a drain that a connection holds open: a stop does not cut it short, and says so */
    int held = client(server.port);
    assert_true(ask(held) >= 0);
    assert_string_equal(ASK("drain\n", answer), "ok: draining, then stopping\n");
    assert_string_equal(ASK("stop\n", answer),
                        "error: already draining (a stop does not cut it short)\n");
    assert_string_equal(ASK("drain\n", answer),
                        "ok: already draining (a stop does not cut it short)\n");
    close(held);
    assert_int_equal(server_wait(&server), 0);
}

/* A socket bound at path: listening (a program answering), or not (once closed, stale). */
static int stale_socket(bool listening)
{
    struct sockaddr_un address = address_of(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_int_equal(bind(fd, (struct sockaddr *)&address, sizeof(address)), 0);
    if (listening) {
        assert_int_equal(listen(fd, 1), 0);
    }
    return fd;
}

/* A set that listens on 127.0.0.1, to run with path as its control socket. */
static int run_with(const char *at)
{
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct behaviour behaviour = {0};
    sxe_workers_t *set;

    assert_int_equal(
        sxe_workers_create(&set, &(struct sxe_workers_options){.count = 1, .control_path = at}), 0);
    assert_int_equal(sxe_workers_listen(set, (struct sockaddr *)&address, sizeof(address), NULL),
                     0);
    int rc = sxe_workers_run(set, start_worker, NULL, &behaviour);
    sxe_workers_destroy(set);
    return rc;
}

static void test_open_faults(void **state)
{
    char long_path[200];
    unsigned fds = sxe_test_open_fds();

    (void)state;
    memset(long_path, 'p', sizeof(long_path) - 1);
    long_path[sizeof(long_path) - 1] = '\0';
    assert_int_equal(run_with(long_path), -ENAMETOOLONG);
    assert_int_equal(run_with(""), -ENAMETOOLONG);
    make_path("file");
    int file = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    assert_true(file >= 0);
    close(file);
    assert_int_equal(run_with(path), -EEXIST); /* never replaced */
    assert_int_equal(access(path, F_OK), 0);
    unlink(path);
    assert_int_equal(run_with("/nonexistent-directory/control"), -ENOENT);
    /* a program answering on it */
    make_path("taken");
    int taken = stale_socket(true);
    assert_int_equal(run_with(path), -EADDRINUSE);
    close(taken);
    /* a stale one: the faults of replacing it */
    static const struct {
        enum sxe__sys_call call;
        unsigned nth;
        int err;
    } faults[] = {{SXE_SYS_socket, 2, EMFILE}, /* the probe (the listener's socket is 1) */
                  {SXE_SYS_socket, 3, EMFILE}, /* the control socket */
                  {SXE_SYS_connect, 1, EACCES},
                  {SXE_SYS_bind, 2, EACCES},
                  {SXE_SYS_listen, 2, ENOMEM}};
    for (unsigned i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
        unlink(path);
        close(stale_socket(false));
        sxe__sys_fail(faults[i].call, faults[i].nth, 1, faults[i].err);
        assert_int_equal(run_with(path), -faults[i].err);
        sxe__sys_reset();
    }
    unlink(path);
    assert_int_equal(sxe_test_open_fds(), fds);
}

static void test_stale_socket_replaced(void **state)
{
    struct server server;
    char answer[512];

    (void)state;
    make_path("stale");
    close(stale_socket(false)); /* its file stays: a server that was killed */
    start(&server, 1);
    assert_memory_equal(ASK("status\n", answer), "pid ", 4);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(server_stop(&server), 0);
}

/* SIGUSR1 with on_reopen: called in the supervisor and in each worker, counted in shared memory. */
static unsigned *reopened;

static void count_reopen(void *arg)
{
    (void)arg;
    __atomic_add_fetch(reopened, 1, __ATOMIC_RELAXED);
}

/* Waits up to 5 s for the hooks to have been called count times. @return the count reached. */
static unsigned reopened_reach(unsigned count)
{
    for (int waited = 0; waited < 500 && __atomic_load_n(reopened, __ATOMIC_RELAXED) < count;
         waited++) {
        sleep_ms(10);
    }
    return __atomic_load_n(reopened, __ATOMIC_RELAXED);
}

static void test_reopen(void **state)
{
    struct server server = {0};
    char answer[512];

    (void)state;
    reopened =
        mmap(NULL, sizeof(*reopened), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(reopened != MAP_FAILED);
    make_path("reopen");
    server_start(&server, &(struct sxe_workers_options){.count = 2,
                                                        .control_path = path,
                                                        .on_reopen = count_reopen,
                                                        .on_hangup = count_reopen});
    /* up, and its workers forked: they hold SIGUSR1 blocked until their loops read it */
    assert_memory_equal(ASK("status\n", answer), "pid ", 4);
    kill(server.pid, SIGUSR1);
    assert_int_equal(reopened_reach(3), 3);
    assert_string_equal(ASK("reopen\n", answer),
                        "ok: reopening, in the supervisor and every worker\n");
    assert_int_equal(reopened_reach(6), 6);
    /* no reload here: SIGHUP's hook, passed on the same way */
    assert_string_equal(ASK("reload\n", answer),
                        "ok: passed on as SIGHUP (this program reloads in place)\n");
    assert_int_equal(reopened_reach(9), 9);
    assert_int_equal(server_stop(&server), 0);
    munmap(reopened, sizeof(*reopened));
}

/* Threads: one process, so the levels need no passing on, and a reload goes to on_hangup. */
static void test_threads(void **state)
{
    struct server server = {0};
    char answer[2048];

    (void)state;
    make_path("threads");
    server_start(&server, &(struct sxe_workers_options){
                              .count = 2, .kind = SXE_WORKERS_THREADS, .control_path = path});
    assert_non_null(strstr(ASK("status\n", answer), ": 2 worker threads (reuseport), up "));
    assert_string_equal(ASK("log-level workers info\n", answer),
                        "ok: WORKERS at INFO in the supervisor and 0 worker processes\n");
    /* each thread's loop, woken by a byte on its pair, lists its one connection */
    int fd = client(server.port);
    assert_int_equal(ask(fd), ask(fd));
    ASK("connections json\n", answer);
    assert_non_null(strstr(answer, "\"state\":\"idle\""));
    assert_null(strstr(answer, "\"answered\":false"));
    close(fd);
    assert_string_equal(ASK("stop\n", answer), "ok: stopping\n");
    assert_int_equal(server_wait(&server), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_commands),    cmocka_unit_test(test_hostile_peers),
        cmocka_unit_test(test_open_faults), cmocka_unit_test(test_stale_socket_replaced),
        cmocka_unit_test(test_reopen),      cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
