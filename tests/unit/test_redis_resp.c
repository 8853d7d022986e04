/*
 * RESP read and written, and the client against a scripted server of the test's own: every kind of
 * RESP2 and RESP3 reply, attributes, nesting, a reply in pieces byte by byte, bytes that are not
 * RESP (each refused, none crashing), a reply cut by the server's close, a reply for no command,
 * commands pipelined in one write, commands queued before the server is up.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/redis.h"
#include "sxe/conn.h"
#include "sxe/redis.h"
#include "redis_got.h"
#include "sxe_test.h"

/* Scans and builds text; returns the root (in static nodes) or NULL with *rc the scan's answer. */
static struct sxe_redis_reply nodes[256];

static const struct sxe_redis_reply *parse(const char *text, ssize_t *rc)
{
    size_t count = 0;

    *rc = sxe__resp_scan(text, strlen(text), &count);
    if (*rc <= 0) {
        return NULL;
    }
    assert_true(count <= 256);
    sxe__resp_build(text, (size_t)*rc, nodes);
    return nodes;
}

static const struct sxe_redis_reply *whole(const char *text)
{
    ssize_t rc;
    const struct sxe_redis_reply *reply = parse(text, &rc);

    assert_int_equal(rc, strlen(text));
    return reply;
}

static void assert_str(const struct sxe_redis_reply *reply, enum sxe_redis_type type,
                       const char *text)
{
    assert_int_equal(reply->type, type);
    assert_int_equal(reply->len, strlen(text));
    assert_memory_equal(reply->str, text, reply->len);
}

static void test_every_kind_of_reply(void **state)
{
    const struct sxe_redis_reply *r;

    (void)state;
    assert_str(whole("+OK\r\n"), SXE_REDIS_STATUS, "OK");
    assert_str(whole("-WRONGTYPE no\r\n"), SXE_REDIS_ERROR, "WRONGTYPE no");
    assert_str(whole("$5\r\nhe\r\no\r\n"), SXE_REDIS_STRING, "he\r\no"); /* any byte inside */
    assert_str(whole("$0\r\n\r\n"), SXE_REDIS_STRING, "");
    assert_int_equal(whole("$-1\r\n")->type, SXE_REDIS_NIL);
    assert_int_equal(whole("*-1\r\n")->type, SXE_REDIS_NIL);
    assert_int_equal(whole("_\r\n")->type, SXE_REDIS_NIL);
    r = whole(":-9223372036854775808\r\n");
    assert_int_equal(r->type, SXE_REDIS_INTEGER);
    assert_true(r->integer == INT64_MIN);
    assert_true(whole(":9223372036854775807\r\n")->integer == INT64_MAX);
    r = whole(",3.25\r\n");
    assert_int_equal(r->type, SXE_REDIS_DOUBLE);
    assert_true(r->number == 3.25);
    assert_true(whole(",-inf\r\n")->number < -1e308);
    r = whole("#t\r\n");
    assert_int_equal(r->type, SXE_REDIS_BOOLEAN);
    assert_int_equal(r->integer, 1);
    assert_int_equal(whole("#f\r\n")->integer, 0);
    assert_str(whole("(3492890328409238509324850943850943825024385\r\n"), SXE_REDIS_BIGNUM,
               "3492890328409238509324850943850943825024385");
    assert_str(whole("!21\r\nSYNTAX invalid syntax\r\n"), SXE_REDIS_ERROR, "SYNTAX invalid syntax");
    assert_str(whole("=15\r\ntxt:Some string\r\n"), SXE_REDIS_VERBATIM, "Some string");
    r = whole("*3\r\n:1\r\n*2\r\n+a\r\n$1\r\nb\r\n_\r\n");
    assert_int_equal(r->type, SXE_REDIS_ARRAY);
    assert_int_equal(r->len, 3);
    assert_int_equal(r->element[0].integer, 1);
    assert_int_equal(r->element[1].len, 2);
    assert_str(&r->element[1].element[1], SXE_REDIS_STRING, "b");
    assert_int_equal(r->element[2].type, SXE_REDIS_NIL);
    r = whole("%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n");
    assert_int_equal(r->type, SXE_REDIS_MAP);
    assert_int_equal(r->len, 4);
    assert_str(&r->element[2], SXE_REDIS_STATUS, "second");
    assert_int_equal(r->element[3].integer, 2);
    assert_int_equal(whole("~2\r\n+a\r\n+b\r\n")->type, SXE_REDIS_SET);
    r = whole(">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
    assert_int_equal(r->type, SXE_REDIS_PUSH);
    assert_str(&r->element[2], SXE_REDIS_STRING, "hi");
    assert_int_equal(whole("*0\r\n")->len, 0);
    /* an attribute is read and dropped: the reply is what follows it */
    r = whole("|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n*2\r\n:2039123\r\n:9543892\r\n");
    assert_int_equal(r->type, SXE_REDIS_ARRAY);
    assert_int_equal(r->element[1].integer, 9543892);
}

static void test_a_reply_not_yet_whole(void **state)
{
    static const char *const replies[] = {
        "+OK\r\n",           "$5\r\nhello\r\n",          "*2\r\n$1\r\na\r\n:12\r\n", ",1.5\r\n",
        "%1\r\n+k\r\n_\r\n", "|1\r\n+a\r\n+b\r\n:7\r\n", "=8\r\ntxt:abcd\r\n",       "$-1\r\n",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
        size_t len = strlen(replies[i]), count;
        for (size_t cut = 0; cut < len; cut++) { /* every prefix: more must come */
            assert_int_equal(sxe__resp_scan(replies[i], cut, &count), 0);
        }
        assert_int_equal(sxe__resp_scan(replies[i], len, &count), (ssize_t)len);
    }
}

static void test_bytes_that_are_not_resp(void **state)
{
    static const char *const bad[] = {
        "?\r\n",                     /* no such kind */
        "+OK\rx",                    /* a CR without its LF */
        ":12a\r\n",                  /* not digits */
        ":\r\n",                     /* no digits */
        ":9223372036854775808\r\n",  /* past int64 */
        ":-9223372036854775809\r\n", /* past int64 */
        "$3\r\nabcd\r\n",            /* longer than said */
        "$-2\r\n",                   /* no such length */
        "$?\r\n",                    /* streamed: Redis never sends one */
        "*-2\r\n",                   /* no such count */
        "~-1\r\n",                   /* only arrays may be null */
        "!-1\r\n",                   /* nor errors */
        "#x\r\n",                    /* true or false only */
        "#tt\r\n",                   /* one letter */
        ",abc\r\n",                  /* not a number */
        ",\r\n",                     /* no number */
        "(12x\r\n",                  /* not digits */
        "(\r\n",                     /* no digits */
        "_x\r\n",                    /* null says nothing */
        "=3\r\ntxt\r\n",             /* no format */
        "=5\r\ntxtxy\r\n",           /* no colon */
        "*268435457\r\n",            /* more than any buffer holds */
        "%134217729\r\n",            /* the same, in pairs */
        "|134217729\r\n",            /* and an attribute's */
        "$2147483648\r\n",           /* a string too long */
        ":1234567890123456789012345678901234567890123456789012345678901234567890123456789012345678"
        "901234567890", /* a number's line too long, ending nowhere */
    };
    char deep[200] = "";
    size_t count;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ssize_t rc = sxe__resp_scan(bad[i], strlen(bad[i]), &count);
        if (rc != -EPROTO) {
            fail_msg("\"%s\" gave %zd", bad[i], rc);
        }
    }
    for (int i = 0; i <= SXE__RESP_DEPTH; i++) { /* one level too deep */
        strcat(deep, "*1\r\n");
    }
    strcat(deep, ":1\r\n");
    assert_int_equal(sxe__resp_scan(deep, strlen(deep), &count), -EPROTO);
    deep[0] = '\0'; /* attributes chained past the limit: refused, not recursed into */
    for (int i = 0; i <= SXE__RESP_DEPTH; i++) {
        strcat(deep, "|0\r\n");
    }
    strcat(deep, ":1\r\n");
    assert_int_equal(sxe__resp_scan(deep, strlen(deep), &count), -EPROTO);
}

static void test_nesting_to_the_limit(void **state)
{
    char deep[400] = "";
    ssize_t rc;

    (void)state;
    for (int i = 0; i < SXE__RESP_DEPTH; i++) {
        strcat(deep, "*1\r\n");
    }
    strcat(deep, "+x\r\n");
    const struct sxe_redis_reply *r = parse(deep, &rc);
    assert_int_equal(rc, strlen(deep));
    for (int i = 0; i < SXE__RESP_DEPTH; i++) {
        assert_int_equal(r->type, SXE_REDIS_ARRAY);
        r = &r->element[0];
    }
    assert_str(r, SXE_REDIS_STATUS, "x");
}

static void test_commands_written_and_replies_copied(void **state)
{
    char out[128];
    const char *argv[] = {"SET", "k", "a\0b"};
    size_t len[] = {3, 1, 3};

    (void)state;
    assert_int_equal(sxe__resp_command(out, 10, 3, argv, len), 29); /* too small: nothing */
    assert_int_equal(sxe__resp_command(out, sizeof(out), 3, argv, len), 29);
    assert_memory_equal(out, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\na\0b\r\n", 29);
    assert_int_equal(sxe__resp_command(out, sizeof(out), 1, (const char *[]){"PING"}, NULL), 14);

    struct sxe_redis_reply *copy =
        sxe__resp_copy(whole("*3\r\n$2\r\nab\r\n%1\r\n+k\r\n:5\r\n*0\r\n"));
    memset(nodes, 0, sizeof(nodes)); /* the copy stands alone */
    assert_non_null(copy);
    assert_int_equal(copy->type, SXE_REDIS_ARRAY);
    assert_str(&copy->element[0], SXE_REDIS_STRING, "ab");
    assert_string_equal(copy->element[0].str, "ab"); /* and NUL-terminated */
    assert_int_equal(copy->element[1].type, SXE_REDIS_MAP);
    assert_string_equal(copy->element[1].element[0].str, "k");
    assert_int_equal(copy->element[1].element[1].integer, 5);
    assert_int_equal(copy->element[2].len, 0);
    sxe_redis_reply_free(copy);
}

/* The scripted server: one listener in the test's loop; what the client sends is kept in heard,
 * and the test writes the replies. */
static sxe_loop_t *loop;
static sxe_conn_t *listener, *served;
static char heard[8192];
static size_t heard_len;
static int accepted;

static void served_connect(sxe_conn_t *conn)
{
    served = conn;
    accepted++;
}

static size_t served_read(sxe_conn_t *conn, const char *data, size_t len)
{
    (void)conn;
    if (heard_len + len < sizeof(heard)) {
        memcpy(heard + heard_len, data, len);
        heard_len += len;
        heard[heard_len] = '\0';
    }
    return len;
}

static void served_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    (void)reason, (void)err;
    if (served == conn) {
        served = NULL;
    }
}

static const struct sxe_conn_handlers server_handlers = {
    .on_connect = served_connect, .on_read = served_read, .on_close = served_close};

static char address[64];

static int setup(void **state)
{
    struct sockaddr_storage local;
    socklen_t len = sizeof(local);

    (void)state;
    assert_int_equal(sxe_loop_create(&loop, &(struct sxe_loop_options){.connections = 16}), 0);
    assert_int_equal(
        sxe_conn_listen_at(loop, &listener, "127.0.0.1:0", NULL, &server_handlers, NULL), 0);
    assert_int_equal(sxe_conn_local(listener, (struct sockaddr *)&local, &len), 0);
    snprintf(address, sizeof(address), "127.0.0.1:%d", sxe_address_port((struct sockaddr *)&local));
    served = NULL;
    heard_len = 0;
    heard[0] = '\0';
    accepted = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sxe_loop_destroy(loop);
    return 0;
}

static void turn_until(bool (*done)(void))
{
    for (int i = 0; i < 500 && !done(); i++) {
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
    }
    assert_true(done());
}

static bool is_served(void)
{
    return served != NULL;
}

static size_t wanted_heard;

static bool heard_enough(void)
{
    return heard_len >= wanted_heard;
}

static int wanted_got;

static bool got_enough(void)
{
    return got_count >= wanted_got;
}

static void say(const char *bytes, size_t len)
{
    assert_non_null(served);
    assert_int_equal(sxe_conn_write(served, bytes, len), 0);
}

static void test_pipelined_replies_in_pieces(void **state)
{
    static const char replies[] = "+OK\r\n$5\r\nhello\r\n*2\r\n:1\r\n_\r\n-ERR no\r\n";
    struct got g[4] = {{0}};
    sxe_redis_t *redis;

    (void)state;
    got_count = 0;
    /* queued before the server has even accepted: they go once it has */
    assert_int_equal(sxe_redis_create(&redis, loop, address, NULL), 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(
            sxe_redis_command(redis, got, &g[i], 2, (const char *[]){"GET", "k"}, NULL), 0);
    }
    turn_until(is_served);
    wanted_heard = 4 * 20;
    turn_until(heard_enough);
    assert_int_equal(heard_len, 4 * 20); /* four commands, nothing more (no set-up asked) */
    assert_memory_equal(heard, "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", 20);
    for (size_t i = 0; i < sizeof(replies) - 1; i++) { /* a byte at a time */
        say(&replies[i], 1);
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
    }
    wanted_got = 4;
    turn_until(got_enough);
    assert_int_equal(g[0].type, SXE_REDIS_STATUS);
    assert_string_equal(g[0].text, "OK");
    assert_string_equal(g[1].text, "hello");
    assert_int_equal(g[2].type, SXE_REDIS_ARRAY);
    assert_int_equal(g[3].type, SXE_REDIS_ERROR);
    assert_string_equal(g[3].text, "ERR no");
    for (int i = 0; i < 4; i++) {
        assert_int_equal(g[i].called, 1);
        assert_int_equal(g[i].status, 0);
    }
    struct sxe_redis_stats stats;
    sxe_redis_stats(redis, &stats);
    assert_int_equal(stats.commands, 4);
    assert_int_equal(stats.replies, 4);
    assert_int_equal(stats.out, 0);
    assert_int_equal(stats.connected, 1);
    sxe_redis_destroy(redis);
}

/* A fault of the server's: what the client is told, and that it connects again. */
static void server_fault(const char *bytes, bool close_after, int expected)
{
    struct got g[2] = {{0}};
    sxe_redis_t *redis;

    got_count = 0;
    served = NULL;
    assert_int_equal(sxe_redis_create(&redis, loop, address,
                                      &(struct sxe_redis_options){.backoff_min_ns = 1000}),
                     0);
    assert_int_equal(sxe_redis_command(redis, got, &g[0], 1, (const char *[]){"PING"}, NULL), 0);
    assert_int_equal(sxe_redis_command(redis, got, &g[1], 1, (const char *[]){"PING"}, NULL), 0);
    turn_until(is_served);
    say(bytes, strlen(bytes));
    if (close_after) {
        sxe_conn_close(served);
    }
    wanted_got = 2;
    turn_until(got_enough);
    assert_int_equal(g[0].status, expected);
    assert_int_equal(g[1].status, expected);
    int before = accepted;
    served = NULL;
    turn_until(is_served); /* made again, by itself */
    assert_int_equal(accepted, before + 1);
    sxe_redis_destroy(redis);
}

static void test_faults_of_the_server(void **state)
{
    struct sxe_test_capture capture;

    (void)state;
    server_fault("$10\r\nabc", true, -ECONNRESET); /* cut in the middle of a value */
    sxe_test_capture_start(&capture);
    server_fault("%%%\r\n", false, -EPROTO); /* not RESP */
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "the server's bytes are not RESP"));
    sxe_test_capture_start(&capture);
    server_fault("+OK\r\n+OK\r\n+OK\r\n", false, 0); /* one reply more than asked for */
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "a reply for no command"));
}

/* What an outside attack found. */

static void no_message(void *arg, const char *channel, size_t channel_len, const char *message,
                       size_t len)
{
    (void)arg, (void)channel, (void)channel_len, (void)message, (void)len;
}

static sxe_redis_t *doomed;

static void destroy_then_subscribe(void *arg, int status, const struct sxe_redis_reply *reply)
{
    got(arg, status, reply);
    sxe_redis_destroy(doomed);
    assert_int_equal(sxe_redis_subscribe(doomed, "late", 0, no_message, NULL), -ESHUTDOWN);
}

static int resent;
static sxe_redis_t *resender;

static void resend_on_failure(void *arg, int status, const struct sxe_redis_reply *reply)
{
    got(arg, status, reply);
    if (status == -ECONNRESET && resent++ == 0) { /* given again while the link is down */
        assert_int_equal(sxe_redis_command(resender, got, arg, 1, (const char *[]){"PING"}, NULL),
                         0);
    }
}

static bool two_accepted(void)
{
    return accepted >= 2 && served != NULL;
}

static void test_what_an_outside_attack_found(void **state)
{
    struct got g[8] = {{0}};
    sxe_redis_t *redis;

    (void)state;
    /* the pending bound counts commands, not the set-up queued before them */
    got_count = 0;
    assert_int_equal(sxe_redis_create(&redis, loop, address,
                                      &(struct sxe_redis_options){.pending = 4, .database = 1}),
                     0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(sxe_redis_command(redis, got, &g[i], 1, (const char *[]){"PING"}, NULL),
                         0);
    }
    turn_until(is_served); /* SELECT goes first, the four behind it */
    assert_int_equal(sxe_redis_command(redis, got, &g[4], 1, (const char *[]){"PING"}, NULL),
                     -ENOBUFS);
    say(">0\r\n+OK\r\n:0\r\n:1\r\n:2\r\n:3\r\n", 25); /* an empty push first: ignored */
    wanted_got = 4;
    turn_until(got_enough);
    for (int i = 0; i < 4; i++) { /* each its own reply: SELECT's went to no one */
        assert_int_equal(g[i].called, 1);
        assert_int_equal(g[i].integer, i);
    }
    sxe_redis_destroy(redis);

    /* a subscription asked for while the client is being destroyed */
    got_count = 0;
    served = NULL;
    assert_int_equal(sxe_redis_create(&doomed, loop, address, NULL), 0);
    assert_int_equal(
        sxe_redis_command(doomed, destroy_then_subscribe, &g[5], 1, (const char *[]){"PING"}, NULL),
        0);
    turn_until(is_served);
    say("+PONG\r\n", 7);
    wanted_got = 1;
    turn_until(got_enough);
    for (int i = 0; i < 20; i++) { /* no connection is made for a client that is gone */
        assert_true(sxe_loop_run_once(loop, 1 * SXE_NS_PER_MSEC) >= 0);
    }

    /* a command given again from its failure's callback waits for the next connection */
    got_count = 0;
    served = NULL;
    accepted = 0;
    heard_len = 0;
    assert_int_equal(sxe_redis_create(&resender, loop, address,
                                      &(struct sxe_redis_options){.backoff_min_ns = 1000000}),
                     0);
    assert_int_equal(
        sxe_redis_command(resender, resend_on_failure, &g[6], 1, (const char *[]){"PING"}, NULL),
        0);
    turn_until(is_served);
    wanted_heard = 14;
    turn_until(heard_enough); /* the PING is out: the connection is lost with it */
    sxe_conn_close(served);
    turn_until(two_accepted);
    wanted_heard = 14 * 2; /* the first PING, then the one given again */
    turn_until(heard_enough);
    say("+PONG\r\n", 7);
    wanted_got = 2;
    turn_until(got_enough);
    assert_int_equal(g[6].status, 0);
    assert_string_equal(g[6].text, "PONG");
    sxe_redis_destroy(resender);
}

static size_t close_at_once(sxe_conn_t *conn, const char *data, size_t len)
{
    (void)data;
    sxe_conn_close(conn);
    return len;
}

static void accept_and_close(sxe_conn_t *conn)
{
    accepted++;
    sxe_conn_close(conn);
}

static void test_a_server_that_closes_at_once_is_tried_less_and_less_often(void **state)
{
    static const struct sxe_conn_handlers closing = {.on_connect = accept_and_close,
                                                     .on_read = close_at_once};
    sxe_redis_t *redis;

    (void)state;
    accepted = 0;
    assert_int_equal(sxe_conn_set_handlers(listener, &closing), 0);
    assert_int_equal(sxe_redis_create(&redis, loop, address,
                                      &(struct sxe_redis_options){.backoff_min_ns = 10000000}),
                     0);
    uint64_t until = sxe_clock_mono_ns() + 1 * SXE_NS_PER_SEC;
    while (sxe_clock_mono_ns() < until) {
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
    }
    /* 10, 20, 40 ... 640 ms: seven tries in a second, not a hundred */
    assert_true(accepted >= 5 && accepted <= 8);
    sxe_redis_destroy(redis);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kind_of_reply),
        cmocka_unit_test(test_a_reply_not_yet_whole),
        cmocka_unit_test(test_bytes_that_are_not_resp),
        cmocka_unit_test(test_nesting_to_the_limit),
        cmocka_unit_test(test_commands_written_and_replies_copied),
        cmocka_unit_test_setup_teardown(test_pipelined_replies_in_pieces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_faults_of_the_server, setup, teardown),
        cmocka_unit_test_setup_teardown(test_what_an_outside_attack_found, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_server_that_closes_at_once_is_tried_less_and_less_often, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
