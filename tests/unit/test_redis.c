/*
 * The Redis client against a real redis-server, started by the test on a free port (and checked
 * to be the one answering): commands and replies, a thousand pipelined, values of any byte, RESP3
 * maps and pushes, AUTH and SELECT, pub/sub and its resubscription when its connection is killed,
 * the server killed in the middle of a pipeline and started again, a late reply, a reply past the
 * loop's buffers, commands queued while the server is down and how they end, a fiber's plain
 * call, a client destroyed from its own callback, a full queue, invalid use.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <netinet/in.h>

#include "sxe/clock.h"
#include "sxe/fiber.h"
#include "sxe/redis.h"
#include "redis_got.h"
#include "dns_server.h"
#include "sxe/resolve.h"
#include "sxe_test.h"

static sxe_loop_t *loop;
static pid_t server_pid;
static int server_port;
static char address[64];

static int free_port(void)
{
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(in);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&in, sizeof(in)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&in, &len), 0);
    close(fd);
    return ntohs(in.sin_port);
}

/* Asks the server at the port for INFO over a plain socket: whether its process_id is pid. */
static bool answers_as(int port, pid_t pid, const char *password)
{
    struct sockaddr_in in = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    char ask[128], text[8192] = "", want[32];
    size_t got = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (connect(fd, (struct sockaddr *)&in, sizeof(in)) < 0) {
        close(fd);
        return false;
    }
    snprintf(ask, sizeof(ask), "%s%s%sINFO server\r\n", password ? "AUTH " : "",
             password ? password : "", password ? "\r\n" : "");
    assert_int_equal(write(fd, ask, strlen(ask)), strlen(ask));
    snprintf(want, sizeof(want), "process_id:%d\r", (int)pid);
    while (got < sizeof(text) - 1 && strstr(text, "\r\n\r\n") == NULL) {
        ssize_t n = read(fd, text + got, sizeof(text) - 1 - got);
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
        text[got] = '\0';
    }
    close(fd);
    return strstr(text, want) != NULL;
}

/* Starts redis-server on port (0: a free one), with password if not NULL. */
static void server_start(int port, const char *password)
{
    char port_text[16];

    if (access("/usr/bin/redis-server", X_OK) != 0) {
        sxe_test_skip_or_fail_in_ci("redis-server is not installed (apt-get install redis-server)");
    }
    server_port = port ? port : free_port();
    snprintf(port_text, sizeof(port_text), "%d", server_port);
    snprintf(address, sizeof(address), "127.0.0.1:%d", server_port);
    server_pid = fork();
    assert_true(server_pid >= 0);
    if (server_pid == 0) {
        const char *argv[] = {"redis-server",
                              "--port",
                              port_text,
                              "--bind",
                              "127.0.0.1",
                              "--save",
                              "",
                              "--appendonly",
                              "no",
                              "--dir",
                              "/tmp",
                              "--loglevel",
                              "warning",
                              "--enable-debug-command",
                              "local",
                              password ? "--requirepass" : NULL,
                              password,
                              NULL};
        int null = open("/dev/null", O_WRONLY);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a test that dies takes its server with it */
        dup2(null, 1);
        dup2(null, 2);
        execv("/usr/bin/redis-server", (char **)(uintptr_t)argv);
        _exit(127);
    }
    for (int i = 0; i < 500 && !answers_as(server_port, server_pid, password); i++) {
        assert_int_equal(waitpid(server_pid, NULL, WNOHANG), 0); /* it runs (its port was free) */
        usleep(10 * 1000);
    }
    assert_true(answers_as(server_port, server_pid, password));
}

static void server_stop(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, NULL, 0);
        server_pid = 0;
    }
}

static int setup(void **state)
{
    (void)state;
    assert_int_equal(sxe_loop_create(&loop, &(struct sxe_loop_options){.connections = 64}), 0);
    server_start(0, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    server_stop();
    sxe_loop_destroy(loop);
    return 0;
}

static void turn_until_got(int count, uint64_t seconds)
{
    uint64_t deadline = sxe_clock_mono_ns() + seconds * SXE_NS_PER_SEC;

    while (got_count < count) {
        assert_true(sxe_clock_mono_ns() < deadline);
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
    }
}

/* Sends a command of NUL-terminated words and waits for its reply. */
static struct got say(sxe_redis_t *redis, unsigned argc, const char *const *argv)
{
    struct got g = {0};
    int before = got_count;

    assert_int_equal(sxe_redis_command(redis, got, &g, argc, argv, NULL), 0);
    turn_until_got(before + 1, 10);
    return g;
}

#define SAY(redis, ...)                                                                            \
    say(redis, sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *),                       \
        (const char *[]){__VA_ARGS__})

static void test_commands_and_replies(void **state)
{
    sxe_redis_t *redis;
    struct got g;

    (void)state;
    got_count = 0;
    assert_int_equal(sxe_redis_create(&redis, loop, address, NULL), 0);
    g = SAY(redis, "SET", "greeting", "hello");
    assert_int_equal(g.status, 0);
    assert_int_equal(g.type, SXE_REDIS_STATUS);
    assert_string_equal(g.text, "OK");
    g = SAY(redis, "GET", "greeting");
    assert_int_equal(g.type, SXE_REDIS_STRING);
    assert_string_equal(g.text, "hello");
    g = SAY(redis, "GET", "nothing");
    assert_int_equal(g.type, SXE_REDIS_NIL);
    g = SAY(redis, "INCRBY", "n", "41");
    assert_int_equal(g.type, SXE_REDIS_INTEGER);
    assert_int_equal(g.integer, 41);
    g = SAY(redis, "LPUSH", "greeting", "x");
    assert_int_equal(g.status, 0); /* Redis refused it: a reply all the same */
    assert_int_equal(g.type, SXE_REDIS_ERROR);
    assert_non_null(strstr(g.text, "WRONGTYPE"));
    g = SAY(redis, "NOSUCHCOMMAND");
    assert_int_equal(g.type, SXE_REDIS_ERROR);

    /* any byte in a value */
    const char *set[] = {"SET", "bytes", "a\0\r\nb"};
    size_t lens[] = {3, 5, 5};
    struct got binary = {0};
    assert_int_equal(sxe_redis_command(redis, got, &binary, 3, set, lens), 0);
    turn_until_got(got_count + 1, 5);
    g = SAY(redis, "STRLEN", "bytes");
    assert_int_equal(g.integer, 5);
    g = SAY(redis, "GET", "bytes");
    assert_int_equal(g.len, 5);
    assert_memory_equal(g.text, "a\0\r\nb", 5);
    sxe_redis_destroy(redis);
}

static void test_a_thousand_pipelined(void **state)
{
    enum { COMMANDS = 1000 };
    static struct got g[COMMANDS];
    sxe_redis_t *redis;
    char value[32];

    (void)state;
    got_count = 0;
    assert_int_equal(sxe_redis_create(&redis, loop, address, NULL), 0);
    for (int i = 0; i < COMMANDS; i++) { /* all given before the first reply is read */
        g[i] = (struct got){0};
        snprintf(value, sizeof(value), "%d", i);
        const char *argv[] = {i % 2 ? "RPUSH" : "INCR", i % 2 ? "list" : "counter", value};
        assert_int_equal(sxe_redis_command(redis, got, &g[i], i % 2 ? 3 : 2, argv, NULL), 0);
    }
    struct sxe_redis_stats stats;
    sxe_redis_stats(redis, &stats);
    assert_int_equal(stats.out, COMMANDS);
    turn_until_got(COMMANDS, 10);
    for (int i = 0; i < COMMANDS; i++) { /* each its own reply, in order */
        assert_int_equal(g[i].called, 1);
        assert_int_equal(g[i].status, 0);
        assert_int_equal(g[i].integer, i / 2 + 1);
    }
    struct got last = SAY(redis, "LINDEX", "list", "-1");
    assert_string_equal(last.text, "999");
    sxe_redis_stats(redis, &stats);
    assert_int_equal(stats.commands, COMMANDS + 1);
    assert_int_equal(stats.replies, COMMANDS + 1);
    assert_int_equal(stats.failed, 0);
    assert_int_equal(stats.out, 0);
    sxe_redis_destroy(redis);
}

static void test_big_values_pipelined_past_the_write_limit(void **state)
{
    enum { VALUES = 200 };
    static char value[8192];
    static struct got g[VALUES];
    sxe_redis_t *redis;
    char key[16];

    (void)state;
    got_count = 0;
    memset(value, 'v', sizeof(value));
    assert_int_equal(sxe_redis_create(&redis, loop, address, NULL), 0);
    assert_string_equal(SAY(redis, "PING").text, "PONG"); /* up */
    for (int i = 0; i < VALUES; i++) { /* 1.6 MB given at once: the connection takes 64 KB */
        snprintf(key, sizeof(key), "big:%d", i);
        const char *set[] = {"SET", key, value};
        size_t lens[] = {3, strlen(key), sizeof(value)};
        g[i] = (struct got){0};
        assert_int_equal(sxe_redis_command(redis, got, &g[i], 3, set, lens), 0);
    }
    turn_until_got(VALUES + 1, 10);
    for (int i = 0; i < VALUES; i++) {
        assert_string_equal(g[i].text, "OK");
    }
    assert_int_equal(SAY(redis, "STRLEN", "big:199").integer, sizeof(value));
    sxe_redis_destroy(redis);
}

static void test_the_queue_while_down(void **state)
{
    struct got g[3] = {{0}};
    sxe_redis_t *redis;
    char big[200];

    (void)state;
    got_count = 0;
    memset(big, 'q', sizeof(big));
    /* a Unix socket that is not there: down from the start */
    assert_int_equal(
        sxe_redis_create(&redis, loop, "/tmp/no-such-redis.sock",
                         &(struct sxe_redis_options){.queue_bytes = 100, .timeout_ns = 50000000}),
        0);
    const char *set[] = {"SET", "k", big};
    size_t lens[] = {3, 1, sizeof(big)};
    assert_int_equal(sxe_redis_command(redis, got, &g[0], 3, set, lens), -ENOBUFS); /* too big */
    assert_int_equal(
        sxe_redis_command(redis, got, &g[0], 2, (const char *[]){"GET", "a-key"}, NULL), 0);
    assert_int_equal(
        sxe_redis_command(redis, got, &g[1], 2, (const char *[]){"GET", "a-key"}, NULL), 0);
    lens[2] = 60;
    assert_int_equal(sxe_redis_command(redis, got, &g[2], 3, set, lens), -ENOBUFS); /* full */
    turn_until_got(2, 5);
    assert_int_equal(g[0].status, -ENOENT); /* the reason it is down */
    assert_int_equal(g[1].status, -ENOENT);
    sxe_redis_destroy(redis);
}

/* A server given by name, resolved by the tests' DNS server (dns_server.c). */
static void test_a_server_by_name(void **state)
{
    char servers[32], named[80];
    struct dns_server *dns = dns_server_start(servers);
    struct sxe_resolver_options resolve = {.servers = servers, .timeout_ms = 200, .tries = 1};
    sxe_resolver_t *resolver;
    sxe_redis_t *redis;
    struct got down = {0};

    (void)state;
    got_count = 0;
    if (sxe_resolver_create(&resolver, loop, &resolve) == -ENOTSUP) {
        dns_server_stop(dns);
        skip(); /* built without c-ares */
    }
    snprintf(named, sizeof(named), "a.test:%d", server_port);
    assert_int_equal(
        sxe_redis_create(&redis, loop, named, &(struct sxe_redis_options){.resolver = resolver}),
        0);
    struct got pong = SAY(redis, "PING");
    assert_int_equal(pong.type, SXE_REDIS_STATUS);
    assert_string_equal(pong.text, "PONG");
    sxe_redis_destroy(redis);

    /* a name that is not there: the connection is down for it, and the command says so */
    snprintf(named, sizeof(named), "nx.test:%d", server_port);
    struct sxe_redis_options late = {.resolver = resolver, .timeout_ns = 300 * SXE_NS_PER_MSEC};
    assert_int_equal(sxe_redis_create(&redis, loop, named, &late), 0);
    assert_int_equal(sxe_redis_command(redis, got, &down, 1, (const char *[]){"PING"}, NULL), 0);
    turn_until_got(got_count + 1, 5);
    assert_int_equal(down.status, -ENOENT);
    sxe_redis_destroy(redis);

    /* destroyed while its name is asked; and a name in brackets */
    snprintf(named, sizeof(named), "silent.test:%d", server_port);
    assert_int_equal(
        sxe_redis_create(&redis, loop, named, &(struct sxe_redis_options){.resolver = resolver}),
        0);
    sxe_redis_destroy(redis);
    assert_int_equal(sxe_redis_create(&redis, loop, "[a.test]:80", NULL), -EINVAL);
    sxe_resolver_destroy(resolver);
    dns_server_stop(dns);
}

static void test_resp3(void **state)
{
    sxe_redis_t *redis;
    struct sxe_redis_reply *reply = NULL;

    (void)state;
    got_count = 0;
    assert_int_equal(
        sxe_redis_create(&redis, loop, address, &(struct sxe_redis_options){.resp3 = 1}), 0);
    assert_int_equal(SAY(redis, "HSET", "h", "a", "1", "b", "2").integer, 2);
    struct got g = SAY(redis, "HGETALL", "h");
    assert_int_equal(g.type, SXE_REDIS_MAP);
    assert_int_equal(g.len, 4); /* two pairs */
    g = SAY(redis, "SMEMBERS", "nothing");
    assert_int_equal(g.type, SXE_REDIS_SET);
    g = SAY(redis, "GET", "nothing");
    assert_int_equal(g.type, SXE_REDIS_NIL);
    (void)reply;
    sxe_redis_destroy(redis);
}

static void test_auth_and_select(void **state)
{
    struct sxe_test_capture capture;
    sxe_redis_t *redis, *other;
    struct got g;

    (void)state;
    server_stop();
    server_start(0, "sesame");
    got_count = 0;
    /* the right password, and database 3 */
    assert_int_equal(
        sxe_redis_create(&redis, loop, address,
                         &(struct sxe_redis_options){.password = "sesame", .database = 3}),
        0);
    assert_int_equal(SAY(redis, "SET", "where", "three").status, 0);
    assert_int_equal(
        sxe_redis_create(&other, loop, address,
                         &(struct sxe_redis_options){.password = "sesame", .resp3 = 1}),
        0);
    assert_int_equal(SAY(other, "GET", "where").type, SXE_REDIS_NIL); /* database 0 */
    sxe_redis_destroy(other);
    assert_int_equal(
        sxe_redis_create(&other, loop, address,
                         &(struct sxe_redis_options){.username = "default", .password = "sesame"}),
        0); /* AUTH user password, as an ACL user */
    assert_int_equal(SAY(other, "SELECT", "3").status, 0);
    assert_string_equal(SAY(other, "GET", "where").text, "three");
    sxe_redis_destroy(other);
    sxe_redis_destroy(redis);
    /* a wrong one: the command fails, saying why in the log */
    sxe_test_capture_start(&capture);
    assert_int_equal(
        sxe_redis_create(&redis, loop, address, &(struct sxe_redis_options){.password = "wrong"}),
        0);
    g = SAY(redis, "GET", "where");
    sxe_test_capture_stop();
    assert_int_equal(g.status, -EACCES);
    assert_non_null(strstr(capture.text, "the connection's set-up was refused: WRONGPASS"));
    sxe_redis_destroy(redis);
    /* none: Redis's own refusal */
    assert_int_equal(sxe_redis_create(&redis, loop, address, NULL), 0);
    g = SAY(redis, "GET", "where");
    assert_int_equal(g.type, SXE_REDIS_ERROR);
    assert_non_null(strstr(g.text, "NOAUTH"));
    sxe_redis_destroy(redis);
}

static char heard[16][64];
static int messages;

static void on_message(void *arg, const char *channel, size_t channel_len, const char *message,
                       size_t len)
{
    (void)arg;
    if (messages < 16) {
        snprintf(heard[messages], sizeof(heard[0]), "%.*s:%.*s", (int)channel_len, channel,
                 (int)len, message);
    }
    messages++;
}

/* Publishes until a subscriber has heard one more message than before (a subscription takes a
 * turn or two to be made). */
static void publish_until_heard(sxe_redis_t *publisher, const char *channel, const char *message)
{
    int before = messages;
    uint64_t deadline = sxe_clock_mono_ns() + 10 * SXE_NS_PER_SEC;

    while (messages == before) {
        assert_true(sxe_clock_mono_ns() < deadline);
        (void)SAY(publisher, "PUBLISH", channel, message);
        for (int i = 0; i < 5 && messages == before; i++) {
            assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
        }
    }
}

static void pubsub(int resp3)
{
    sxe_redis_t *redis, *publisher;
    struct got g;

    messages = 0;
    got_count = 0;
    assert_int_equal(
        sxe_redis_create(&redis, loop, address,
                         &(struct sxe_redis_options){.resp3 = resp3, .backoff_min_ns = 1000000}),
        0);
    assert_int_equal(sxe_redis_create(&publisher, loop, address, NULL), 0);
    assert_int_equal(sxe_redis_subscribe(redis, "news", 0, on_message, NULL), 0);
    assert_int_equal(sxe_redis_subscribe(redis, "news", 0, on_message, NULL), -EEXIST);
    assert_int_equal(sxe_redis_subscribe(redis, "sport.*", 1, on_message, NULL), 0);
    publish_until_heard(publisher, "news", "first");
    assert_string_equal(heard[messages - 1], "news:first");
    publish_until_heard(publisher, "sport.chess", "mate");
    assert_string_equal(heard[messages - 1], "sport.chess:mate");
    struct sxe_redis_stats stats;
    sxe_redis_stats(redis, &stats);
    assert_int_equal(stats.subscribed, 2); /* both confirmed by the server */
    assert_int_equal(stats.messages, 2);
    /* the command connection is not the subscriber's: commands go on beside */
    g = SAY(redis, "PING");
    assert_string_equal(g.text, "PONG");
    /* the subscriber's connection killed: it comes back, subscribed again */
    g = SAY(publisher, "CLIENT", "KILL", "TYPE", "pubsub");
    assert_int_equal(g.integer, 1);
    publish_until_heard(publisher, "news", "again");
    assert_string_equal(heard[messages - 1], "news:again");
    assert_int_equal(sxe_redis_subscribe(redis, "late", 0, on_message, NULL), 0); /* while up */
    publish_until_heard(publisher, "late", "but there");
    assert_string_equal(heard[messages - 1], "late:but there");
    assert_int_equal(sxe_redis_unsubscribe(redis, "late", 0), 0);
    assert_int_equal(sxe_redis_unsubscribe(redis, "news", 0), 0);
    assert_int_equal(sxe_redis_unsubscribe(redis, "news", 0), -ENOENT);
    publish_until_heard(publisher, "sport.go", "atari"); /* the pattern still holds */
    assert_string_equal(heard[messages - 1], "sport.go:atari");
    sxe_redis_stats(redis, &stats);
    assert_int_equal(stats.subscribed, 1);
    sxe_redis_destroy(publisher);
    sxe_redis_destroy(redis);
}

static void test_pubsub_and_resubscription(void **state)
{
    sxe_redis_t *redis;

    (void)state;
    pubsub(0);
    pubsub(1);
    assert_int_equal(
        sxe_redis_create(&redis, loop, address, &(struct sxe_redis_options){.subscriptions = 1}),
        0);
    assert_int_equal(sxe_redis_subscribe(redis, "one", 0, on_message, NULL), 0);
    assert_int_equal(sxe_redis_subscribe(redis, "two", 0, on_message, NULL), -ENOBUFS);
    sxe_redis_destroy(redis);
}

static uint32_t confirmed(sxe_redis_t *redis)
{
    struct sxe_redis_stats stats;

    sxe_redis_stats(redis, &stats);
    return stats.subscribed;
}

static void turn_until_confirmed(sxe_redis_t *redis, uint32_t count)
{
    uint64_t deadline = sxe_clock_mono_ns() + 10 * SXE_NS_PER_SEC;

    while (confirmed(redis) != count) {
        assert_true(sxe_clock_mono_ns() < deadline);
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
    }
}

static void test_three_thousand_subscriptions_made_again(void **state)
{
    enum { CHANNELS = 3000 };
    sxe_redis_t *redis, *killer;
    char name[64];

    (void)state;
    got_count = 0;
    assert_int_equal(sxe_redis_create(&redis, loop, address,
                                      &(struct sxe_redis_options){.subscriptions = CHANNELS,
                                                                  .backoff_min_ns = 1000000}),
                     0);
    assert_int_equal(sxe_redis_create(&killer, loop, address, NULL), 0);
    for (int i = 0; i < CHANNELS; i++) {
        snprintf(name, sizeof(name), "a-channel-of-thirty-two-bytes-%04d", i);
        assert_int_equal(sxe_redis_subscribe(redis, name, 0, on_message, NULL), 0);
    }
    turn_until_confirmed(redis, CHANNELS);
    /* again in one go, past the connection's write limit (64 KiB): queued, not refused */
    assert_int_equal(SAY(killer, "CLIENT", "KILL", "TYPE", "pubsub").integer, 1);
    turn_until_confirmed(redis, CHANNELS);
    messages = 0;
    publish_until_heard(killer, "a-channel-of-thirty-two-bytes-2999", "still here");
    assert_string_equal(heard[0], "a-channel-of-thirty-two-bytes-2999:still here");
    sxe_redis_destroy(killer);
    sxe_redis_destroy(redis);
}

static void test_the_server_killed_mid_pipeline_and_started_again(void **state)
{
    struct got g[3] = {{0}}, later = {0};
    struct sxe_redis_stats stats;
    sxe_redis_t *redis;

    (void)state;
    got_count = 0;
    assert_int_equal(sxe_redis_create(&redis, loop, address,
                                      &(struct sxe_redis_options){.backoff_min_ns = 10000000}),
                     0);
    assert_int_equal(SAY(redis, "SET", "k", "v").status, 0);
    int before = got_count;
    assert_int_equal(
        sxe_redis_command(redis, got, &g[0], 3, (const char *[]){"DEBUG", "SLEEP", "2"}, NULL), 0);
    assert_int_equal(sxe_redis_command(redis, got, &g[1], 2, (const char *[]){"GET", "k"}, NULL),
                     0);
    assert_int_equal(sxe_redis_command(redis, got, &g[2], 2, (const char *[]){"GET", "k"}, NULL),
                     0);
    for (int i = 0; i < 10; i++) { /* they reach the server, which sleeps */
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
    }
    int port = server_port;
    server_stop();
    turn_until_got(before + 3, 5);
    for (int i = 0; i < 3; i++) { /* every one sent fails, none is sent again */
        assert_int_equal(g[i].status, -ECONNRESET);
    }
    sxe_redis_destroy(redis);
    /* while it is down: a command waits, and fails with the reason when late */
    assert_int_equal(sxe_redis_create(&redis, loop, address,
                                      &(struct sxe_redis_options){.backoff_min_ns = 10000000,
                                                                  .timeout_ns = 200000000}),
                     0);
    before = got_count;
    assert_int_equal(sxe_redis_command(redis, got, &later, 1, (const char *[]){"PING"}, NULL), 0);
    turn_until_got(before + 1, 5);
    assert_int_equal(later.status, -ECONNREFUSED);
    /* a command given while it is down goes once it is up again */
    later = (struct got){0};
    assert_int_equal(sxe_redis_command(redis, got, &later, 1, (const char *[]){"PING"}, NULL), 0);
    server_start(port, NULL);
    turn_until_got(before + 2, 5);
    assert_int_equal(later.status, 0);
    assert_string_equal(later.text, "PONG");
    sxe_redis_stats(redis, &stats);
    assert_int_equal(stats.connected, 1);
    assert_int_equal(stats.failed, 1);
    sxe_redis_destroy(redis);
}

static void test_a_late_reply(void **state)
{
    struct got slow = {0}, behind = {0};
    struct sxe_test_capture capture;
    sxe_redis_t *redis;

    (void)state;
    got_count = 0;
    assert_int_equal(sxe_redis_create(&redis, loop, address,
                                      &(struct sxe_redis_options){.timeout_ns = 100000000,
                                                                  .backoff_min_ns = 1000000}),
                     0);
    assert_string_equal(SAY(redis, "PING").text, "PONG");
    sxe_test_capture_start(&capture);
    uint64_t began = sxe_clock_mono_ns();
    assert_int_equal(
        sxe_redis_command(redis, got, &slow, 3, (const char *[]){"DEBUG", "SLEEP", "1"}, NULL), 0);
    assert_int_equal(sxe_redis_command(redis, got, &behind, 1, (const char *[]){"PING"}, NULL), 0);
    turn_until_got(got_count + 2, 5);
    sxe_test_capture_stop();
    uint64_t took = sxe_clock_mono_ns() - began;
    assert_int_equal(slow.status, -ETIMEDOUT);
    assert_int_equal(behind.status, -ETIMEDOUT); /* replies come in order: behind it, late too */
    /* At its 100 ms, not at the reply's 1 s (with room for an ASan build on a loaded machine). */
    assert_true(took >= 100 * SXE_NS_PER_MSEC && took < 800 * SXE_NS_PER_MSEC);
    assert_non_null(strstr(capture.text, "a reply is later than 100 ms"));
    for (int i = 0; i < 100; i++) { /* the server sleeps on: let it wake */
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
    }
    struct got again = SAY(redis, "PING"); /* on a new connection */
    assert_int_equal(again.status, 0);
    sxe_redis_destroy(redis);
}

static void test_a_reply_past_the_loops_buffers(void **state)
{
    static char big[100000];
    struct sxe_test_capture capture;
    sxe_redis_t *redis;

    (void)state;
    got_count = 0;
    memset(big, 'b', sizeof(big));
    assert_int_equal(sxe_redis_create(&redis, loop, address,
                                      &(struct sxe_redis_options){.backoff_min_ns = 1000000}),
                     0);
    const char *set[] = {"SET", "big", big};
    size_t lens[] = {3, 3, sizeof(big)};
    struct got g = {0};
    assert_int_equal(sxe_redis_command(redis, got, &g, 3, set, lens), 0); /* out in pieces */
    turn_until_got(1, 5);
    assert_string_equal(g.text, "OK");
    sxe_test_capture_start(&capture);
    g = SAY(redis, "GET", "big"); /* 100 KB: the loop's buffers are 16 KB */
    sxe_test_capture_stop();
    assert_int_equal(g.status, -EMSGSIZE);
    assert_non_null(strstr(capture.text, "a reply outgrew the loop's buffers"));
    assert_int_equal(SAY(redis, "STRLEN", "big").integer, sizeof(big)); /* and it goes on */
    sxe_redis_destroy(redis);
}

static sxe_redis_t *fiber_redis;
static int call_rc = 1;
static char call_text[32];

static void caller(void *arg)
{
    struct sxe_redis_reply *reply;

    (void)arg;
    call_rc =
        sxe_redis_call(fiber_redis, &reply, 2, (const char *[]){"ECHO", "from a fiber"}, NULL);
    snprintf(call_text, sizeof(call_text), "%s", reply ? reply->str : "");
    sxe_redis_reply_free(reply);
    got_count++;
}

static void test_a_fiber_calls_as_if_it_were_plain(void **state)
{
    struct sxe_redis_reply *reply = (struct sxe_redis_reply *)&call_rc;
    sxe_fibers_t *fibers;

    (void)state;
    got_count = 0;
    assert_int_equal(sxe_redis_create(&fiber_redis, loop, address, NULL), 0);
    assert_int_equal(sxe_redis_call(fiber_redis, &reply, 1, (const char *[]){"PING"}, NULL),
                     -EPERM);
    assert_null(reply);
    assert_int_equal(sxe_fibers_create(&fibers, loop, NULL), 0);
    assert_int_equal(sxe_fiber_start(fibers, caller, NULL, NULL), 0);
    assert_int_equal(call_rc, 1); /* it waits; the loop goes on */
    turn_until_got(1, 5);
    assert_int_equal(call_rc, 0);
    assert_string_equal(call_text, "from a fiber");
    sxe_redis_destroy(fiber_redis); /* a call refused: no reply */
    assert_int_equal(
        sxe_redis_create(&fiber_redis, loop, address, &(struct sxe_redis_options){.pending = 1}),
        0);
    struct got busy = {0};
    assert_int_equal(sxe_redis_command(fiber_redis, got, &busy, 1, (const char *[]){"PING"}, NULL),
                     0);
    assert_int_equal(sxe_fiber_start(fibers, caller, NULL, NULL), 0);
    assert_int_equal(call_rc, -ENOBUFS);
    assert_string_equal(call_text, "");
    sxe_redis_destroy(fiber_redis);
    sxe_fibers_destroy(fibers);
}

static sxe_redis_t *doomed;

static void destroy_in_callback(void *arg, int status, const struct sxe_redis_reply *reply)
{
    got(arg, status, reply);
    sxe_redis_destroy(doomed); /* the ones behind it are called back with -ECANCELED */
    assert_int_equal(sxe_redis_command(doomed, got, arg, 1, (const char *[]){"PING"}, NULL),
                     -ESHUTDOWN);
}

static void test_destroyed_from_its_own_callback_and_a_full_queue(void **state)
{
    struct got first = {0}, rest[3] = {{0}};
    sxe_redis_t *redis;

    (void)state;
    got_count = 0;
    assert_int_equal(sxe_redis_create(&doomed, loop, address, NULL), 0);
    assert_int_equal(
        sxe_redis_command(doomed, destroy_in_callback, &first, 1, (const char *[]){"PING"}, NULL),
        0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(
            sxe_redis_command(doomed, got, &rest[i], 1, (const char *[]){"PING"}, NULL), 0);
    }
    turn_until_got(4, 5);
    assert_int_equal(first.status, 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(rest[i].called, 1);
        assert_int_equal(rest[i].status, -ECANCELED);
    }
    /* a full queue refuses at once */
    assert_int_equal(
        sxe_redis_create(&redis, loop, address, &(struct sxe_redis_options){.pending = 2}), 0);
    assert_int_equal(sxe_redis_command(redis, got, &rest[0], 1, (const char *[]){"PING"}, NULL), 0);
    assert_int_equal(sxe_redis_command(redis, got, &rest[1], 1, (const char *[]){"PING"}, NULL), 0);
    assert_int_equal(sxe_redis_command(redis, got, &rest[2], 1, (const char *[]){"PING"}, NULL),
                     -ENOBUFS);
    sxe_redis_destroy(redis); /* what was out: -ECANCELED, before this returns */
    assert_int_equal(rest[0].status, -ECANCELED);
    assert_int_equal(rest[1].status, -ECANCELED);
}

static void invalid_no_argument(void)
{
    sxe_redis_t *redis;
    struct got g;

    assert_int_equal(sxe_redis_create(&redis, loop, "127.0.0.1:1", NULL), 0);
    assert_int_equal(sxe_redis_command(redis, got, &g, 0, (const char *[]){"PING"}, NULL), -EINVAL);
    sxe_redis_destroy(redis);
}

static void invalid_options(void)
{
    sxe_redis_t *redis;

    assert_int_equal(sxe_redis_create(&redis, loop, "127.0.0.1:1",
                                      &(struct sxe_redis_options){.username = "who"}),
                     -EINVAL); /* a user without a password */
}

static void test_invalid_use(void **state)
{
    static const struct sxe_test_invalid_use uses[] = {
        {"a command of no argument", invalid_no_argument, "argc > 0"},
        {"a user without a password", invalid_options, "options_valid"},
    };
    sxe_redis_t *redis;

    (void)state;
    sxe_test_invalid_uses(uses, sizeof(uses) / sizeof(uses[0]));
    assert_int_equal(sxe_redis_create(&redis, loop, "not an address", NULL), -EINVAL);
    assert_int_equal(sxe_redis_create(&redis, loop,
                                      "/a/unix/path/that/is/far/too/long/for/a/"
                                      "sockaddr_un/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                                      NULL),
                     -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_commands_and_replies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_thousand_pipelined, setup, teardown),
        cmocka_unit_test_setup_teardown(test_big_values_pipelined_past_the_write_limit, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_the_queue_while_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_server_by_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resp3, setup, teardown),
        cmocka_unit_test_setup_teardown(test_auth_and_select, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pubsub_and_resubscription, setup, teardown),
        cmocka_unit_test_setup_teardown(test_three_thousand_subscriptions_made_again, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_the_server_killed_mid_pipeline_and_started_again,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_late_reply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_reply_past_the_loops_buffers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_fiber_calls_as_if_it_were_plain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroyed_from_its_own_callback_and_a_full_queue,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_use, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
