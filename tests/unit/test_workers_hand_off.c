/*
 * Workers' hand-off spreading (SXE_SPREAD_HAND_OFF): the supervisor accepts and passes each
 * connection to the least loaded worker, counting its open connections and those passed to it but
 * not yet taken. Held connections spread evenly, a full worker and a stalled one are passed over,
 * a burst waits for room, and accept and poll failures are tried again (workers_harness.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sxe_test.h"
#include "sxe/workers.h"
#include "sys.h"
#include "workers_harness.h"

/* Hand-off spreads held connections evenly (threads here), and the stop ends every thread. */
static void test_hand_off_threads_spread_evenly(void **state)
{
    struct server server = {0};
    int fds[40], served[2] = {0};

    (void)state;
    server_start(&server, &(struct sxe_workers_options){.count = 2,
                                                        .kind = SXE_WORKERS_THREADS,
                                                        .spread = SXE_SPREAD_HAND_OFF});
    for (int i = 0; i < 40; i++) {
        fds[i] = client(server.port);
        int index = ask(fds[i]);
        assert_true(index == 0 || index == 1);
        served[index]++;
    }
    assert_in_range(served[0], 18, 22); /* within 10% of even */
    assert_true(wait_stats(server.set, 0, open_is, (uint64_t)served[0]));
    assert_true(wait_stats(server.set, 1, open_is, (uint64_t)served[1]));
    for (int i = 0; i < 40; i++) {
        close(fds[i]);
    }
    assert_int_equal(server_stop(&server), 0);
}

/* A worker whose table is full is passed over: every connection goes to the other, none lost. */
static void test_hand_off_passes_over_a_full_worker(void **state)
{
    struct server server = {.behaviour = {.fill_first = true}};
    int fds[30];

    (void)state;
    server_start(&server, &(struct sxe_workers_options){.count = 2,
                                                        .spread = SXE_SPREAD_HAND_OFF,
                                                        .loop = {.connections = 64}});
    assert_true(wait_stats(server.set, 0, open_is, 63)); /* its table, less its channel */
    for (int i = 0; i < 30; i++) {
        fds[i] = client(server.port);
        assert_int_equal(ask(fds[i]), 1);
    }
    struct sxe_worker_stats stats;
    sxe_workers_stats(server.set, 0, &stats);
    assert_int_equal(stats.connections, 0); /* none was passed to it */
    assert_true(stats.table_full >= 1);     /* the fill's last tries */
    for (int i = 0; i < 30; i++) {
        close(fds[i]);
    }
    assert_int_equal(server_stop(&server), 0);
}

/*
 * A burst larger than the workers' channels hold (a few hundred passed fds each) while neither
 * worker reads them: the supervisor stops accepting until a channel has room, and the rest wait in
 * the kernel's backlog. None is dropped.
 */
static void test_hand_off_burst_waits_for_room(void **state)
{
    struct server server = {.behaviour = {.slow_ms = 500}};
    enum { BURST = 1500 };
    static int fds[BURST];

    (void)state;
    server_start(&server, &(struct sxe_workers_options){.count = 2,
                                                        .spread = SXE_SPREAD_HAND_OFF,
                                                        .loop = {.connections = 2000}});
    for (int i = 0; i < BURST; i++) {
        fds[i] = client(server.port);
    }
    for (int i = 0; i < BURST; i++) {
        int index = ask(fds[i]);
        assert_true(index == 0 || index == 1);
        close(fds[i]);
    }
    assert_int_equal(server_stop(&server), 0);
}

/*
 * The hand-off supervisor, forked with one failure armed in its seam: an interrupted accept4 or
 * poll (EINTR) is called again without a word; an accept4 failing otherwise, with an errno below
 * EINTR's (EPERM, a firewall's) or above it (EMFILE), is logged once and tried again on the next
 * turn. Each time the connection is served, and the set stops cleanly.
 */
static void test_hand_off_accept_and_poll_failures(void **state)
{
    static const struct {
        enum sxe__sys_call call;
        int err;
        const char *logged; /* NULL: no "accept failed" line */
    } faults[] = {
        {SXE_SYS_accept4, EINTR, NULL},
        {SXE_SYS_accept4, EPERM, "accept failed: Operation not permitted"},
        {SXE_SYS_accept4, EMFILE, "accept failed: Too many open files"},
        {SXE_SYS_poll, EINTR, NULL},
    };

    (void)state;
    for (unsigned i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
        char path[] = "/tmp/sxe-test-workers-log-XXXXXX";
        struct server server = {.log_fd = mkstemp(path)};
        static char log[1 << 20]; /* room for every line, tracing included */
        assert_true(server.log_fd > 0);
        unlink(path);
        memset(log, 0, sizeof(log));
        sxe__sys_fail(faults[i].call, 1, 1, faults[i].err);
        server_start(&server, &(struct sxe_workers_options){.count = 2,
                                                            .kind = SXE_WORKERS_THREADS,
                                                            .spread = SXE_SPREAD_HAND_OFF});
        sxe__sys_reset();
        int fd = client(server.port);
        int index = ask(fd);
        assert_true(pread(server.log_fd, log, sizeof(log) - 1, 0) >= 0); /* written before */
        bool said = strstr(log, "accept failed") != NULL;
        if (index < 0 || index > 1 || said != (faults[i].logged != NULL) ||
            (said && strstr(log, faults[i].logged) == NULL)) {
            fail_msg("errno %d: served by %d, log: %s", faults[i].err, index, log);
        }
        close(fd);
        assert_int_equal(server_stop(&server), 0);
        close(server.log_fd);
    }
}

/*
 * A worker that stalls after it has taken connections: what is passed to it and not yet taken
 * counts as its load, one each. Worker 1 holds 5 connections; worker 0 took some and closed them,
 * then stalls on one it holds. The next four go to it (a load of 1 to 4 against 5, each waiting in
 * its channel), and once its open and pending pass worker 1's, the rest go to worker 1.
 */
static void test_hand_off_counts_what_a_stalled_worker_has_not_taken(void **state)
{
    struct server server = {0};
    int fds[32], served[32], count = 0, held = 0, late[8];

    (void)state;
    server_start(&server, &(struct sxe_workers_options){.count = 2,
                                                        .kind = SXE_WORKERS_THREADS,
                                                        .spread = SXE_SPREAD_HAND_OFF});
    while (held < 5) { /* worker 1 holds 5; worker 0 took the others */
        assert_true(count < 32);
        fds[count] = client(server.port);
        served[count] = ask(fds[count]);
        assert_true(served[count] == 0 || served[count] == 1);
        held += served[count++] == 1;
    }
    for (int i = 0; i < count; i++) {
        if (served[i] == 0) {
            close(fds[i]);
        }
    }
    assert_true(wait_stats(server.set, 0, open_is, 0));
    int stalled = client(server.port);
    assert_int_equal(ask(stalled), 0); /* 0 against 5 */
    assert_int_equal(write(stalled, "s", 1), 1);
    sleep_ms(200); /* worker 0 reads it, and stalls */
    for (int i = 0; i < 8; i++) {
        late[i] = client(server.port);
    }
    sleep_ms(300); /* the supervisor passes them all while worker 0 stalls */
    int to_1 = 0;
    for (int i = 0; i < 8; i++) {
        int index = ask(late[i]);
        assert_true(index == 0 || index == 1);
        if (i < 4 && index != 0) {
            fail_msg("connection %d after the stall went to worker %d, not 0", i, index);
        }
        to_1 += index == 1;
        close(late[i]);
    }
    assert_in_range(to_1, 2, 4); /* of the last four, at loads of 5 against 5: about half */
    char reply[4];
    assert_true(read(stalled, reply, sizeof(reply)) > 0); /* answered after its stall */
    close(stalled);
    for (int i = 0; i < count; i++) {
        if (served[i] == 1) {
            close(fds[i]);
        }
    }
    assert_int_equal(server_stop(&server), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_off_threads_spread_evenly),
        cmocka_unit_test(test_hand_off_passes_over_a_full_worker),
        cmocka_unit_test(test_hand_off_burst_waits_for_room),
        cmocka_unit_test(test_hand_off_counts_what_a_stalled_worker_has_not_taken),
        cmocka_unit_test(test_hand_off_accept_and_poll_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
