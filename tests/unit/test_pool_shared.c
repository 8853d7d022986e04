/*
 * Shared pools: attached twice and at different addresses, attach errors, recovery from a process
 * that dies holding the lock, a bounded race of 8 processes and 8 threads on one pool, and
 * processes killed at random that lose nothing. Harness: pool_test.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pool.h"
#include "sxe/clock.h"
#include "sxe_test.h"
#include "sys.h"

#include "pool_test.h"

static char *temp_path(const char *tag)
{
    static char path[128];
    snprintf(path, sizeof(path), "/dev/shm/sxe-test-pool-%d-%s", (int)getpid(), tag);
    unlink(path);
    return path;
}

/* Two mappings of one shared pool, at different addresses, see the same pool. */
static void test_attach_twice_at_different_addresses(void **state)
{
    struct sxe_pool_options opts = options(8, 0);
    char *path = temp_path("twice");
    sxe_pool_t *first;
    sxe_pool_t *second;

    (void)state;
    assert_int_equal(sxe_pool_attach(&first, path, &opts, SXE_POOL_CREATE), 0);
    assert_int_equal(sxe_pool_attach(&second, path, &opts, 0), 0);
    assert_ptr_not_equal(first, second);
    assert_int_equal(sxe_pool_set_state(first, 3, FREE, BUSY, 77), 0);
    ((struct conn *)sxe_pool_array(first))[3].fd = 33;
    assert_int_equal(sxe_pool_state(second, 3), BUSY);
    assert_int_equal(sxe_pool_time(second, 3), 77);
    assert_int_equal(((struct conn *)sxe_pool_array(second))[3].fd, 33);
    assert_int_equal(sxe_pool_oldest(second, BUSY, NULL), 3);
    assert_int_equal(sxe_pool_set_oldest_state(second, BUSY, IDLE, 78), 3);
    assert_int_equal(sxe_pool_count(first, IDLE), 1);
    assert_int_equal(sxe__pool_validate(first), 0);
    assert_int_equal(sxe__pool_validate(second), 0);
    sxe_pool_detach(first);
    sxe_pool_detach(second);
    sxe_pool_detach(NULL);
    unlink(path);
}

static void write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

/* Every way attaching can fail is a clear error, logged, with nothing left open or mapped. */
static void test_attach_errors(void **state)
{
    struct sxe_pool_options opts = options(8, 0);
    struct sxe_pool_options other = options(9, 0);
    struct sxe_test_capture capture;
    char *path = temp_path("errors");
    unsigned fds = open_fds();
    sxe_pool_t *pool = NULL;
    char junk[8192];

    (void)state;
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, 0), -ENOENT);
    assert_non_null(strstr(capture.text, "cannot open it: No such file or directory"));

    assert_int_equal(sxe_pool_attach(&pool, path, &opts, SXE_POOL_CREATE), 0);
    sxe_pool_detach(pool);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, SXE_POOL_CREATE), -EEXIST);
    assert_int_equal(sxe_pool_attach(&pool, path, &other, 0), -EMSGSIZE);
    assert_non_null(strstr(capture.text, "holds 8 elements of 16 bytes in 3 states"));

    /* A pool of another format version. */
    int fd = open(path, O_RDWR);
    uint32_t version = 999;
    assert_int_equal(pwrite(fd, &version, sizeof(version), 8), sizeof(version));
    close(fd);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, 0), -EPROTO);
    assert_non_null(strstr(capture.text, "has format version 999"));

    /* Not a pool at all, too small, empty, or not finished by its creator. */
    memset(junk, 'x', sizeof(junk));
    write_file(path, junk, sizeof(junk));
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, 0), -EPROTO);
    assert_non_null(strstr(capture.text, "is not an sxe pool"));
    write_file(path, junk, 10);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, 0), -EPROTO);
    write_file(path, junk, 0);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, 0), -EAGAIN);
    memset(junk, 0, sizeof(junk));
    write_file(path, junk, sizeof(junk));
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, 0), -EAGAIN);
    assert_non_null(strstr(capture.text, "is still being made by its creator"));
    unlink(path);

    /* The system says no at each step: a full disk, no memory, an I/O error. */
    sxe__sys_fail(SXE_SYS_open, 1, 1, EMFILE);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, SXE_POOL_CREATE), -EMFILE);
    sxe__sys_fail(SXE_SYS_ftruncate, 1, 1, ENOSPC);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, SXE_POOL_CREATE), -ENOSPC);
    assert_non_null(strstr(capture.text, "cannot size it"));
    unlink(path);
    sxe__sys_fail(SXE_SYS_mmap, 1, 1, ENOMEM);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, SXE_POOL_CREATE), -ENOMEM);
    unlink(path);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, SXE_POOL_CREATE), 0);
    sxe_pool_detach(pool);
    sxe__sys_fail(SXE_SYS_fstat, 1, 1, EIO);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, 0), -EIO);
    assert_non_null(strstr(capture.text, "cannot stat it: Input/output error"));
    sxe_test_capture_stop();
    unlink(path);
    assert_int_equal(open_fds(), fds);
}

static void die_holding_the_lock(void *arg)
{
    sxe_pool_t *pool = arg;

    sxe__pool_lock(pool);
    /* Half of a move: the element is out of its queue, and its state still says FREE. */
    unlink_node(pool, 2);
    raise(SIGKILL);
}

/* A process killed while it holds the pool, mid-operation: the next locker rebuilds. */
static void test_recovery_after_death_holding_lock(void **state)
{
    sxe_pool_t *pool = make_pool(6, SXE_POOL_SHARED);
    struct sxe_test_capture capture;
    int status;

    (void)state;
    assert_int_equal(sxe_pool_set_state(pool, 4, FREE, BUSY, 10), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        die_holding_the_lock(pool);
    }
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_pool_set_oldest_state(pool, FREE, IDLE, 20), 0);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "a process died holding the lock; queues rebuilt"));
    assert_int_equal(pool->recoveries, 1);
    assert_int_equal(sxe__pool_validate(pool), 0);
    assert_int_equal(
        sxe_pool_count(pool, FREE) + sxe_pool_count(pool, IDLE) + sxe_pool_count(pool, BUSY), 6);
    assert_int_equal(sxe_pool_count(pool, FREE), 4);
    assert_int_equal(sxe_pool_state(pool, 2), FREE);
    assert_int_equal(sxe_pool_state(pool, 4), BUSY);

    /* Age order survives the rebuild: FREE is 1, 2, 3, 5 oldest first. */
    uint32_t expected_order[] = {1, 2, 3, 5};
    for (unsigned i = 0; i < 4; i++) {
        assert_int_equal(sxe_pool_set_oldest_state(pool, FREE, IDLE, 30), expected_order[i]);
    }
    assert_int_equal(sxe__pool_validate(pool), 0);
    sxe_pool_destroy(pool);
}

/*
 * The race: workers claim elements FREE -> BUSY, check that nobody else owns them, mark them, and
 * give them back, mixing in tries on random elements, touches and walks. Any element handed to
 * two workers at once, or lost, shows up.
 */
struct race {
    sxe_pool_t *pool;
    const char *path; /* processes attach here, each at its own address */
    uint64_t deadline_ns;
    unsigned worker;
    unsigned long operations;
    unsigned long conflicts;
};

static void race_run(struct race *race)
{
    sxe_pool_t *pool = race->pool;
    struct conn *conns = sxe_pool_array(pool);
    unsigned seed = race->worker * 7919u + 1;

    while (sxe_clock_mono_ns() < race->deadline_ns) {
        for (int batch = 0; batch < 64; batch++) {
            uint64_t now = sxe_clock_mono_ns();
            uint32_t index = sxe_pool_set_oldest_state(pool, FREE, BUSY, now);
            if (index == SXE_POOL_NONE) {
                continue;
            }
            if (__atomic_exchange_n(&conns[index].owner, race->worker, __ATOMIC_ACQ_REL) != 0) {
                race->conflicts++;
            }
            conns[index].uses++;
            sxe_pool_touch(pool, index, now);
            uint32_t other = (uint32_t)rand_r(&seed) % sxe_pool_capacity(pool);
            if (sxe_pool_try_set_state(pool, other, IDLE, FREE, now) == IDLE) {
                race->operations++;
            }
            if (__atomic_exchange_n(&conns[index].owner, 0, __ATOMIC_ACQ_REL) != race->worker) {
                race->conflicts++;
            }
            unsigned to = rand_r(&seed) % 2 ? FREE : IDLE;
            if (sxe_pool_set_state(pool, index, BUSY, to, now) != 0) {
                race->conflicts++;
            }
            race->operations += 4;
        }
    }
}

static void *race_thread(void *arg)
{
    race_run(arg);
    return NULL;
}

#define RACE_WORKERS 8

static void test_race_8_processes_8_threads(void **state)
{
    struct sxe_pool_options opts = options(64, 0);
    char *path = temp_path("race");
    struct race threads[RACE_WORKERS];
    pthread_t ids[RACE_WORKERS];
    pid_t children[RACE_WORKERS];
    int pipes[2];
    sxe_pool_t *pool;

    (void)state;
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, SXE_POOL_CREATE), 0);
    assert_int_equal(pipe(pipes), 0);
    uint64_t deadline = sxe_clock_mono_ns() + 1500 * SXE_NS_PER_MSEC;

    for (unsigned i = 0; i < RACE_WORKERS; i++) {
        children[i] = fork();
        assert_true(children[i] >= 0);
        if (children[i] == 0) {
            struct race race = {.path = path, .deadline_ns = deadline, .worker = 100 + i};
            if (sxe_pool_attach(&race.pool, path, &opts, 0) != 0) {
                sxe_test_exit(2);
            }
            race_run(&race);
            unsigned long result[2] = {race.operations, race.conflicts};
            sxe_test_exit(write(pipes[1], result, sizeof(result)) == sizeof(result) ? 0 : 3);
        }
    }
    for (unsigned i = 0; i < RACE_WORKERS; i++) {
        threads[i] = (struct race){.pool = pool, .deadline_ns = deadline, .worker = 1 + i};
        assert_int_equal(pthread_create(&ids[i], NULL, race_thread, &threads[i]), 0);
    }

    unsigned long operations = 0;
    unsigned long conflicts = 0;
    for (unsigned i = 0; i < RACE_WORKERS; i++) {
        int status;
        unsigned long result[2];
        assert_int_equal(pthread_join(ids[i], NULL), 0);
        operations += threads[i].operations;
        conflicts += threads[i].conflicts;
        assert_int_equal(waitpid(children[i], &status, 0), children[i]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_int_equal(read(pipes[0], result, sizeof(result)), sizeof(result));
        operations += result[0];
        conflicts += result[1];
    }
    close(pipes[0]);
    close(pipes[1]);

    /* Every element is accounted for, none was handed out twice, and the queues are sound. */
    assert_int_equal(conflicts, 0);
    assert_true(operations > 1000);
    assert_int_equal(sxe__pool_validate(pool), 0);
    assert_int_equal(sxe_pool_count(pool, BUSY), 0);
    assert_int_equal(sxe_pool_count(pool, FREE) + sxe_pool_count(pool, IDLE), 64);
    uint64_t uses = 0;
    for (uint32_t i = 0; i < 64; i++) {
        uses += ((struct conn *)sxe_pool_array(pool))[i].uses;
        assert_int_equal(((struct conn *)sxe_pool_array(pool))[i].owner, 0);
    }
    assert_true(uses > 0);
    print_message("race: %lu operations by 8 processes and 8 threads, 0 conflicts\n", operations);
    sxe_pool_detach(pool);
    unlink(path);
}

/*
 * Dies holding the lock after scribbling over the links of every queue, as if at the worst instant
 * of some operation: every queue now looks empty, and only the elements' state fields are left to
 * rebuild from. Unlike a half move, nothing the racers do afterwards can mend this by chance.
 */
static void die_holding_the_lock_with_links_lost(sxe_pool_t *pool)
{
    struct sxe__pool_node *nodes = sxe__pool_nodes(pool);

    sxe__pool_lock(pool);
    for (uint32_t i = 0; i < sxe_pool_capacity(pool) + STATE_COUNT; i++) {
        nodes[i].prev = i;
        nodes[i].next = i;
    }
    raise(SIGKILL);
}

/* Kills a racer and takes it back, adding up what it counted before it died. */
static void kill_racer(pid_t child, const struct race *counted, unsigned long *operations,
                       unsigned long *conflicts)
{
    int status;

    kill(child, SIGKILL);
    assert_int_equal(waitpid(child, &status, 0), child);
    /* A racer ends only by SIGKILL: one that could not attach would have exited first. */
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
    *operations += counted->operations;
    *conflicts += counted->conflicts;
}

/*
 * Processes racing on a shared pool are killed with SIGKILL at random instants, some of them
 * while holding the lock, and one more dies holding it on purpose, with the queues' links lost;
 * the survivors and their replacements carry on. At the end every element is in exactly one state,
 * no element was ever handed to two racers, and the pool recovered at least once (the death on
 * purpose) and at most once per death.
 */
static void test_random_kills_lose_nothing(void **state)
{
    struct sxe_pool_options opts = options(32, 0);
    char *path = temp_path("kills");
    pid_t children[4];
    sxe_pool_t *pool;
    unsigned kills = 0;
    unsigned seed = 12345;
    unsigned long operations = 0;
    unsigned long conflicts = 0;

    (void)state;
    /* Each racer counts into memory the parent shares, so its counts outlive its SIGKILL. */
    struct race *counted =
        mmap(NULL, 4 * sizeof(*counted), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(counted != MAP_FAILED);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, SXE_POOL_CREATE), 0);
    uint64_t end = sxe_clock_mono_ns() + 1500 * SXE_NS_PER_MSEC;

    for (unsigned i = 0; i < 4; i++) {
        children[i] = 0;
    }
    while (sxe_clock_mono_ns() < end) {
        for (unsigned i = 0; i < 4; i++) {
            if (children[i] != 0) {
                continue;
            }
            children[i] = fork();
            assert_true(children[i] >= 0);
            if (children[i] == 0) {
                struct race *race = &counted[i];
                *race = (struct race){.deadline_ns = end + 10 * SXE_NS_PER_SEC, .worker = 1 + i};
                if (sxe_pool_attach(&race->pool, path, &opts, 0) != 0) {
                    sxe_test_exit(2);
                }
                race_run(race);
                sxe_test_exit(0);
            }
        }
        /* The random instants of the kills are the test, so this sleep stays. */
        usleep(1000 + rand_r(&seed) % 20000);
        if (kills == 0) {
            pid_t dier = fork();
            assert_true(dier >= 0);
            if (dier == 0) {
                sxe_pool_t *attached;
                if (sxe_pool_attach(&attached, path, &opts, 0) != 0) {
                    sxe_test_exit(2);
                }
                die_holding_the_lock_with_links_lost(attached);
            }
            int status;
            assert_int_equal(waitpid(dier, &status, 0), dier);
            assert_true(WIFSIGNALED(status));
            assert_int_equal(WTERMSIG(status), SIGKILL);
            kills++;
        }
        unsigned victim = rand_r(&seed) % 4;
        kill_racer(children[victim], &counted[victim], &operations, &conflicts);
        children[victim] = 0;
        kills++;
    }
    for (unsigned i = 0; i < 4; i++) {
        if (children[i] != 0) {
            kill_racer(children[i], &counted[i], &operations, &conflicts);
            kills++;
        }
    }

    /* The parent can still lock the pool (no deadlock), and nothing is lost. */
    assert_int_equal(sxe__pool_validate(pool), 0);
    assert_int_equal(
        sxe_pool_count(pool, FREE) + sxe_pool_count(pool, IDLE) + sxe_pool_count(pool, BUSY), 32);
    /* Only a BUSY element has an owner: a racer that died with it may have left its name. */
    struct conn *conns = sxe_pool_array(pool);
    for (uint32_t i = 0; i < 32; i++) {
        if (sxe_pool_state(pool, i) != BUSY) {
            assert_int_equal(conns[i].owner, 0);
        }
    }
    assert_int_equal(conflicts, 0);
    assert_true(operations > 1000);
    /* At least the death on purpose was recovered from, and no death more than once. */
    assert_in_range(pool->recoveries, 1, kills);
    print_message("kills: %u processes killed, one of them holding the lock on purpose; "
                  "%llu recoveries from a held lock, %lu operations, 0 conflicts\n",
                  kills, (unsigned long long)pool->recoveries, operations);
    sxe_pool_detach(pool);
    munmap(counted, 4 * sizeof(*counted));
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_attach_twice_at_different_addresses, reset),
        cmocka_unit_test_teardown(test_attach_errors, reset),
        cmocka_unit_test_teardown(test_recovery_after_death_holding_lock, reset),
        cmocka_unit_test_teardown(test_race_8_processes_8_threads, reset),
        cmocka_unit_test_teardown(test_random_kills_lose_nothing, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
