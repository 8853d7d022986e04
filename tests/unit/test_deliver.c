/*
 * A stream's input handed to on_read (src/core/deliver.c), when on_read closes its connection: the
 * value it returns is then ignored (sxe/conn.h), so input it left unconsumed is not kept, in the
 * closed slot or, when a new connection took that slot inside the callback, in the new one. Input
 * arriving in the scratch area and input already kept in the connection's own buffer, on either
 * backend; and on_drained closing it in the flush that follows on_read.
 *
 * The connections are adopted ends of socketpairs whose other ends are the test's blocking peers;
 * the connection table and the buffers are validated after every turn.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loop.h"
#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe_test.h"

#define HIGH_WATER 64 /* queued bytes at which the output is backed up */

/* What the callbacks saw. */
static struct {
    int connects;    /* on_connect, of the first connection */
    int reads;       /* on_read, of the first connection */
    int closes;      /* on_close, of the first connection */
    int after_close; /* any other callback of the first connection (none may run) */
    int drains;      /* on_drained, of the first connection */
    int keep_reads;  /* on_read calls that keep everything before the one that closes */
    size_t lens[4];  /* len of each on_read call */
    enum sxe_close_reason reason;
    uint32_t index; /* the first connection's slot */
    uint64_t id;    /* and its id while it was open */
    int reuse_fd;   /* >= 0: the second connection, adopted once the first has closed */
    sxe_conn_t *second;
    int second_connects;
    int second_reads;
    char second_input[256]; /* everything the second connection's on_read was given, in order */
    size_t second_len;
} seen;

static sxe_loop_t *loop;
static int peer = -1;        /* the test's end of the first connection */
static int second_peer = -1; /* the test's end of the second connection */

/* Turns the loop a few times without waiting long, validating the table after each turn. */
static void turn(void)
{
    for (int i = 0; i < 5; i++) {
        assert_true(sxe_loop_run_once(loop, SXE_NS_PER_MSEC) >= 0);
        assert_int_equal(sxe__conn_validate(loop), 0);
    }
}

/* Turns the loop until *counter reaches count (5 s at most), then validates the table. */
static void turn_until(const int *counter, int count)
{
    sxe_test_run_until(loop, counter, count);
    assert_int_equal(sxe__conn_validate(loop), 0);
}

static void second_on_connect(sxe_conn_t *conn)
{
    (void)conn;
    seen.second_connects++;
}

/* Keeps a copy of everything and consumes it all. */
static size_t second_on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    (void)conn;
    assert_true(seen.second_len + len < sizeof(seen.second_input)); /* and a NUL after */
    memcpy(seen.second_input + seen.second_len, data, len);
    seen.second_len += len;
    seen.second_reads++;
    return len;
}

static const struct sxe_conn_handlers second_handlers = {.on_connect = second_on_connect,
                                                         .on_read = second_on_read};

static void first_on_connect(sxe_conn_t *conn)
{
    seen.connects++;
    seen.index = sxe_conn_index(conn);
    seen.id = sxe_conn_id(conn);
}

/* A close in a callback holds the slot until the callback returns: a connection adopted now
 * cannot have it (the loop owns the descriptor even so). */
static void adopt_fails_while_closing(sxe_conn_t *conn)
{
    sxe_conn_t *second = NULL;

    assert_null(sxe_conn_from_id(loop, seen.id)); /* closed for the program at once */
    assert_ptr_equal(sxe_conn_loop(conn), loop);  /* though the slot is still its own */
    assert_int_equal(sxe_conn_adopt(loop, &second, dup(seen.reuse_fd), &second_handlers, NULL),
                     -ENOBUFS);
    assert_int_equal(seen.closes, 0); /* on_close comes once the callback has returned */
}

/*
 * Keeps everything for keep_reads calls, then closes the connection and consumes nothing; with
 * reuse_fd, a new connection cannot be adopted before the callback returns.
 */
static size_t first_on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    (void)data;
    assert_true(seen.reads < 4);
    seen.lens[seen.reads++] = len;
    if (seen.reads <= seen.keep_reads) {
        return 0;
    }
    sxe_conn_close(conn);
    if (seen.reuse_fd >= 0) {
        adopt_fails_while_closing(conn);
    }
    return 0;
}

static void first_on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    (void)conn;
    assert_int_equal(err, 0);
    seen.closes++;
    seen.reason = reason;
}

static void first_on_eof(sxe_conn_t *conn)
{
    (void)conn;
    seen.after_close++;
}

static void first_on_drained(sxe_conn_t *conn)
{
    (void)conn;
    seen.after_close++;
}

static void first_on_overflow(sxe_conn_t *conn)
{
    (void)conn;
    seen.after_close++;
}

static const struct sxe_conn_handlers first_handlers = {.on_connect = first_on_connect,
                                                        .on_read = first_on_read,
                                                        .on_eof = first_on_eof,
                                                        .on_drained = first_on_drained,
                                                        .on_close = first_on_close,
                                                        .on_overflow = first_on_overflow};

/* A loop of one connection (so a new connection must take the slot a close frees), and the
 * first connection, adopted and connected, with handlers. */
static void start_with(const struct sxe_conn_handlers *handlers)
{
    struct sxe_loop_options options = {.connections = 1,
                                       .buffers = 4,
                                       .buffer_size = 1024,
                                       .write_limit = 4096,
                                       .high_water = HIGH_WATER};
    int fds[2];
    sxe_conn_t *first;

    memset(&seen, 0, sizeof(seen));
    seen.reuse_fd = -1;
    assert_int_equal(sxe_loop_create(&loop, &options), 0);
    assert_string_equal(sxe_loop_backend(loop), sxe_test_uring() ? "io_uring" : "epoll");
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    peer = fds[1];
    /* The slot's generation is about to wrap: the close makes it 0, so a new connection in the
     * slot is told from the old one by a generation that differs, not by one that is larger. */
    loop->conns[0].generation = UINT32_MAX;
    assert_int_equal(sxe_conn_adopt(loop, &first, fds[0], handlers, NULL), 0);
    turn_until(&seen.connects, 1);
    assert_ptr_equal(sxe_conn_from_id(loop, seen.id), first);
}

static void start(void)
{
    start_with(&first_handlers);
}

static int teardown(void **state)
{
    (void)state;
    if (loop != NULL) {
        assert_int_equal(sxe__conn_validate(loop), 0);
        sxe_loop_destroy(loop);
        loop = NULL;
    }
    if (seen.reuse_fd >= 0) {
        close(seen.reuse_fd);
        seen.reuse_fd = -1;
    }
    if (peer >= 0) {
        close(peer);
        peer = -1;
    }
    if (second_peer >= 0) {
        close(second_peer);
        second_peer = -1;
    }
    return 0;
}

/*
 * The first connection is closed for good: closed once and by the program, no longer found by
 * its id, nothing else called for it, no buffer held for it, and its peer sees the end.
 */
static void expect_first_closed(int reads)
{
    struct sxe_loop_stats stats;
    char byte;

    turn();
    assert_int_equal(seen.reads, reads);
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.reason, SXE_CLOSE_LOCAL);
    assert_int_equal(seen.after_close, 0);
    assert_null(sxe_conn_from_id(loop, seen.id));
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.closed, 1);
    assert_int_equal(stats.buffers_in_use, 0);
    assert_int_equal(stats.no_buffer, 0);
    assert_int_equal(recv(peer, &byte, 1, MSG_DONTWAIT), 0);
}

/* on_read closes the connection and consumes none of the input (read into the scratch area). */
static void test_on_read_closes_with_input_unconsumed(void **state)
{
    struct sxe_loop_stats stats;

    (void)state;
    start();
    sxe_test_say(peer, "unconsumed");
    turn_until(&seen.reads, 1);
    assert_int_equal(seen.lens[0], 10);
    expect_first_closed(1);
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.open, 0);
}

/* The same with input kept from an earlier call: it is offered from the connection's own buffer,
 * which the close gives back, and nothing takes it again. */
static void test_on_read_closes_with_kept_input_unconsumed(void **state)
{
    struct sxe_loop_stats stats;

    (void)state;
    start();
    seen.keep_reads = 1;
    sxe_test_say(peer, "kept");
    turn_until(&seen.reads, 1);
    turn();
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.buffers_in_use, 1); /* "kept", in the connection's buffer */
    sxe_test_say(peer, " and more");
    turn_until(&seen.reads, 2);
    assert_int_equal(seen.lens[0], 4);
    assert_int_equal(seen.lens[1], 13);
    expect_first_closed(2);
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.open, 0);
}

/* A socketpair whose one end is adopted once the first connection has closed. */
static void give_on_read_a_second_connection(void)
{
    int fds[2];

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    seen.reuse_fd = fds[0];
    second_peer = fds[1];
}

/* The second connection, adopted into the old one's slot, hears its own peer and nothing else. */
static void second_hears_only_its_peer(void)
{
    struct sxe_loop_stats stats;
    int fd = seen.reuse_fd;

    seen.reuse_fd = -1; /* the loop owns it from here, even on failure */
    assert_int_equal(sxe_conn_adopt(loop, &seen.second, fd, &second_handlers, NULL), 0);
    assert_int_equal(sxe_conn_index(seen.second), seen.index);
    assert_true(sxe_conn_id(seen.second) != seen.id);
    turn_until(&seen.second_connects, 1);
    sxe_test_say(second_peer, "new");
    turn_until(&seen.second_reads, 1);
    turn();
    assert_string_equal(seen.second_input, "new");
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.buffers_in_use, 0);
}

/*
 * on_read closes the connection, whose slot stays its own until on_read returns; a new
 * connection adopted after takes the slot, inherits none of the input the old one left, and hears
 * only its own peer.
 */
static void test_a_new_connection_in_the_slot_gets_none_of_the_old_input(void **state)
{
    struct sxe_loop_stats stats;

    (void)state;
    start();
    give_on_read_a_second_connection();
    sxe_test_say(peer, "old input");
    turn_until(&seen.reads, 1);
    expect_first_closed(1);
    second_hears_only_its_peer();
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.open, 1);
    assert_int_equal(seen.reads, 1);
}

/* The same with input the old connection had kept in its own buffer. */
static void test_a_new_connection_in_the_slot_gets_none_of_the_kept_input(void **state)
{
    (void)state;
    start();
    give_on_read_a_second_connection();
    seen.keep_reads = 1;
    sxe_test_say(peer, "kept");
    turn_until(&seen.reads, 1);
    turn();
    sxe_test_say(peer, " and more");
    turn_until(&seen.reads, 2);
    expect_first_closed(2);
    second_hears_only_its_peer();
}

/* Fills the output queue (so on_drained is asked for) and keeps all of the input. */
static size_t write_full_and_keep(sxe_conn_t *conn, const char *data, size_t len)
{
    static const char block[HIGH_WATER] = {0};

    (void)data;
    assert_true(seen.reads < 4);
    seen.lens[seen.reads++] = len;
    assert_int_equal(sxe_conn_write(conn, block, sizeof(block)), 0);
    assert_true(sxe_conn_backed_up(conn));
    return 0;
}

static void close_when_drained(sxe_conn_t *conn)
{
    seen.drains++;
    sxe_conn_close(conn);
}

/*
 * on_read leaves its input and a full queue; on_drained, which on epoll runs in the flush right
 * after on_read (on io_uring once the ring's send completes), closes the connection: the input
 * left is not kept in the closed slot either, and the peer gets the whole reply, then the end.
 */
static void test_on_drained_closes_after_on_read_left_input(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = first_on_connect,
                                                      .on_read = write_full_and_keep,
                                                      .on_eof = first_on_eof,
                                                      .on_drained = close_when_drained,
                                                      .on_close = first_on_close,
                                                      .on_overflow = first_on_overflow};
    char reply[HIGH_WATER];

    (void)state;
    start_with(&handlers);
    sxe_test_say(peer, "left");
    turn_until(&seen.drains, 1);
    assert_int_equal(seen.lens[0], 4);
    assert_int_equal(recv(peer, reply, sizeof(reply), MSG_WAITALL), HIGH_WATER);
    expect_first_closed(1);
}

/* Keeps all its input until the test lets it go; then consumes everything, counting it. */
static struct {
    sxe_conn_t *conn;
    char *kept; /* where the kept input is: it must not move */
    bool let_go;
    size_t consumed;
    int overflows;
} keeper;

static size_t keep_until_let_go(sxe_conn_t *conn, const char *data, size_t len)
{
    keeper.conn = conn;
    if (keeper.let_go) {
        keeper.consumed += len;
        return len;
    }
    if (keeper.kept == NULL) {
        assert_int_equal(sxe_conn_keep(conn, data, len, 0, &keeper.kept), 0);
        assert_non_null(keeper.kept);
    } else {
        assert_ptr_equal(data, keeper.kept); /* more, after the same kept bytes */
    }
    return 0;
}

static void count_overflow(sxe_conn_t *conn)
{
    (void)conn;
    keeper.overflows++;
}

/*
 * Kept input that fills its buffer neither overflows nor moves: reading waits, the peer is held
 * back by TCP, and what it sent comes once the input is let go. (A held HTTP request's pointers
 * once pointed into a buffer an overflow had given back.)
 */
static void test_kept_input_that_fills_its_buffer_waits(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = first_on_connect,
                                                      .on_read = keep_until_let_go,
                                                      .on_close = first_on_close,
                                                      .on_overflow = count_overflow};
    char block[3000];

    (void)state;
    memset(&keeper, 0, sizeof(keeper));
    start_with(&handlers);
    memset(block, 'a', 1024);
    memset(block + 1024, 'b', sizeof(block) - 1024);
    assert_int_equal(send(peer, block, 100, 0), 100);
    turn();
    assert_non_null(keeper.kept);
    assert_int_equal(send(peer, block + 100, sizeof(block) - 100, 0), (ssize_t)sizeof(block) - 100);
    turn();
    turn();
    assert_int_equal(keeper.overflows, 0);
    assert_int_equal(seen.closes, 0);
    assert_memory_equal(keeper.kept, block, 1024); /* the buffer is full, and still its own */
    keeper.let_go = true;
    sxe_conn_unkeep(keeper.conn);
    for (int i = 0; i < 100 && keeper.consumed < sizeof(block); i++) {
        turn();
    }
    assert_int_equal(keeper.consumed, sizeof(block));
    assert_int_equal(seen.closes, 0);
}

static void close_when_drained_and_adopt(sxe_conn_t *conn)
{
    close_when_drained(conn);
    adopt_fails_while_closing(conn);
}

/*
 * on_drained closes the connection in the flush after on_read, and a new one adopted after takes
 * the same slot: the new connection gets none of the input the old one left, on epoll (where
 * on_drained runs inside that flush) and on io_uring.
 */
static void test_on_drained_closes_and_a_new_connection_takes_the_slot(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = first_on_connect,
                                                      .on_read = write_full_and_keep,
                                                      .on_eof = first_on_eof,
                                                      .on_drained = close_when_drained_and_adopt,
                                                      .on_close = first_on_close,
                                                      .on_overflow = first_on_overflow};
    char reply[HIGH_WATER];

    (void)state;
    start_with(&handlers);
    give_on_read_a_second_connection();
    sxe_test_say(peer, "left");
    turn_until(&seen.drains, 1);
    assert_int_equal(recv(peer, reply, sizeof(reply), MSG_WAITALL), HIGH_WATER);
    expect_first_closed(1);
    assert_int_equal(seen.second_reads, 0);
    second_hears_only_its_peer();
}

/* on_read keeping more than it was given: invalid use (-EINVAL in release builds). */
static size_t keep_past_the_input(sxe_conn_t *conn, const char *data, size_t len)
{
    seen.reads++;
    assert_int_equal(sxe_conn_keep(conn, data, len, len + 1, NULL), -EINVAL);
    return len;
}

static void keep_past_the_input_on_read(void *arg)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = first_on_connect, .on_read = keep_past_the_input, .on_close = first_on_close};

    (void)arg;
    start_with(&handlers);
    sxe_test_say(peer, "four");
    turn_until(&seen.reads, 1);
}

static void test_keeping_more_than_the_input_is_invalid(void **state)
{
    (void)state;
#ifdef SXE_DEBUG
    const char *const expected[] = {"assertion failed: ", "consumed <= len", NULL};
    sxe_test_expect_abort(keep_past_the_input_on_read, NULL, expected);
#else
    keep_past_the_input_on_read(NULL);
    assert_int_equal(seen.reads, 1);
#endif
}

#ifdef SXE_DEBUG
/* sxe_conn_keep() from outside on_read (the input it would keep is gone by then): invalid use. */
static void keep_outside_on_read(void *arg)
{
    sxe_conn_t *conn;

    (void)arg;
    start();
    assert_non_null(conn = sxe_conn_from_id(loop, seen.id));
    (void)!sxe_conn_keep(conn, "data", 4, 0, NULL);
}
#endif

static void test_keeping_outside_on_read_is_invalid(void **state)
{
    (void)state;
#ifdef SXE_DEBUG
    const char *const expected[] = {"assertion failed: ", "SXE__CONN_CORKED", NULL};
    sxe_test_expect_abort(keep_outside_on_read, NULL, expected);
#else
    start();
    assert_int_equal(sxe_conn_keep(sxe_conn_from_id(loop, seen.id), "data", 4, 0, NULL), -EINVAL);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_on_read_closes_with_input_unconsumed, teardown),
        cmocka_unit_test_teardown(test_on_read_closes_with_kept_input_unconsumed, teardown),
        cmocka_unit_test_teardown(test_a_new_connection_in_the_slot_gets_none_of_the_old_input,
                                  teardown),
        cmocka_unit_test_teardown(test_a_new_connection_in_the_slot_gets_none_of_the_kept_input,
                                  teardown),
        cmocka_unit_test_teardown(test_on_drained_closes_after_on_read_left_input, teardown),
        cmocka_unit_test_teardown(test_keeping_more_than_the_input_is_invalid, teardown),
        cmocka_unit_test_teardown(test_kept_input_that_fills_its_buffer_waits, teardown),
        cmocka_unit_test_teardown(test_on_drained_closes_and_a_new_connection_takes_the_slot,
                                  teardown),
        cmocka_unit_test_teardown(test_keeping_outside_on_read_is_invalid, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
