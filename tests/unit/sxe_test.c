#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "sxe_test.h"

#ifdef SXE_COVERAGE
/* libgcov's: writes the coverage counters out, which abort() would otherwise lose. */
void __gcov_dump(void);
#endif

void sxe_test_exit(int status)
{
#ifdef SXE_COVERAGE
    __gcov_dump();
#endif
    _exit(status);
}

static void dump_coverage_and_abort(int signal_number)
{
#ifdef SXE_COVERAGE
    __gcov_dump();
#endif
    signal(signal_number, SIG_DFL);
    raise(signal_number);
}

/*
 * Worker threads log at the same time (test_workers): without the lock two lines could be copied
 * to the same place and one of them lost, which CI once saw as a missing "worker 0" line.
 */
static pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;

static void capture_sink(void *ctx, enum sxe_log_level level, const char *line, size_t len)
{
    struct sxe_test_capture *capture = ctx;

    (void)level;
    pthread_mutex_lock(&capture_lock);
    if (capture->len + len < sizeof(capture->text)) {
        memcpy(capture->text + capture->len, line, len);
        capture->len += len;
        capture->text[capture->len] = '\0';
    }
    capture->lines++;
    pthread_mutex_unlock(&capture_lock);
}

void sxe_test_capture_start(struct sxe_test_capture *capture)
{
    capture->len = 0;
    capture->lines = 0;
    capture->text[0] = '\0';
    sxe_log_set_sink(capture_sink, capture);
}

void sxe_test_capture_stop(void)
{
    sxe_log_set_sink(NULL, NULL);
}

const char *sxe_test_expect_abort(void (*body)(void *arg), void *arg, const char *const *expected)
{
    static char log[64 * 1024];
    size_t used = 0;
    int fds[2];
    int status;

    assert_int_equal(pipe(fds), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        close(fds[0]);
        signal(SIGABRT, dump_coverage_and_abort);
        sxe_log_set_sink(sxe_log_sink_fd, (void *)(intptr_t)fds[1]);
        body(arg);
        _exit(0); /* Not reached when the body aborts, as it must. */
    }
    close(fds[1]);
    for (ssize_t got; (got = read(fds[0], log + used, sizeof(log) - 1 - used)) > 0;) {
        used += (size_t)got;
    }
    log[used] = '\0';
    close(fds[0]);
    assert_int_equal(waitpid(child, &status, 0), child);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT) {
        fail_msg("child did not abort (status 0x%x); its log:\n%s", status, log);
    }
    for (; expected != NULL && *expected != NULL; expected++) {
        if (strstr(log, *expected) == NULL) {
            fail_msg("abort log lacks \"%s\"; it is:\n%s", *expected, log);
        }
    }
    return log;
}

#ifdef SXE_DEBUG
static void make_invalid_use(void *arg)
{
    ((const struct sxe_test_invalid_use *)arg)->call();
}
#endif

void sxe_test_invalid_uses(const struct sxe_test_invalid_use *uses, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        print_message("%s\n", uses[i].what);
#ifdef SXE_DEBUG
        const char *const expected[] = {"assertion failed: ", uses[i].check, NULL};
        (void)sxe_test_expect_abort(make_invalid_use, (void *)(uintptr_t)&uses[i], expected);
#else
        uses[i].call();
#endif
    }
}

bool sxe_test_uring(void)
{
    const char *backend = getenv("SXE_BACKEND");
    return backend != NULL && strcmp(backend, "io_uring") == 0;
}

void sxe_test_skip_on_uring(const char *why)
{
    if (sxe_test_uring()) {
        print_message("skipped on io_uring: %s\n", why);
        skip();
    }
}

void sxe_test_skip_or_fail_in_ci(const char *why)
{
    const char *ci = getenv("CI");

    if (ci != NULL && ci[0] != '\0' && strcmp(ci, "0") != 0 && strcasecmp(ci, "false") != 0) {
        fail_msg("CI must run every test, and this machine cannot run this one: %s", why);
    }
    print_message("skipped: %s\n", why);
    skip();
}

int sxe_test_client(int port)
{
    struct sockaddr_in address = {.sin_family = AF_INET,
                                  .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_int_equal(connect(fd, (struct sockaddr *)&address, sizeof(address)), 0);
    return fd;
}

void sxe_test_say(int fd, const char *text)
{
    assert_int_equal(send(fd, text, strlen(text), MSG_NOSIGNAL), (ssize_t)strlen(text));
}

ssize_t sxe_test_heard(int fd, char *out, size_t size)
{
    size_t have = strlen(out);
    ssize_t got = recv(fd, out + have, size - 1 - have, MSG_DONTWAIT);

    if (got == 0) {
        return -1;
    }
    out[have + (got > 0 ? (size_t)got : 0)] = '\0';
    return got > 0 ? got : 0;
}

void sxe_test_run_until(sxe_loop_t *loop, const int *counter, int count)
{
    uint64_t deadline = sxe_clock_mono_ns() + 5 * SXE_NS_PER_SEC;

    while (*counter < count) {
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
        assert_true(sxe_clock_mono_ns() < deadline);
    }
}

unsigned sxe_test_open_fds(void)
{
    return sxe_test_open_fds_of(0);
}

unsigned sxe_test_open_fds_of(pid_t pid)
{
    char path[64];
    DIR *dir;
    unsigned count = 0;

    if (pid == 0) {
        snprintf(path, sizeof(path), "/proc/self/fd");
    } else {
        snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    }
    dir = opendir(path);

    assert_non_null(dir);
    while (readdir(dir) != NULL) {
        count++;
    }
    closedir(dir);
    return count;
}

/* What smaps says of the mapping at memory: the kB of field (e.g. "ShmemPmdMapped:"). */
long sxe_test_smaps_kb(const void *memory, const char *field)
{
    FILE *smaps = fopen("/proc/self/smaps", "r");
    char line[256];
    bool inside = false;
    long kb = -1;

    assert_non_null(smaps);
    while (fgets(line, sizeof(line), smaps) != NULL) {
        unsigned long from, to;
        if (sscanf(line, "%lx-%lx ", &from, &to) == 2 && strchr(line, ':') != NULL &&
            strstr(line, "kB") == NULL) {
            inside = (uintptr_t)memory >= from && (uintptr_t)memory < to;
        } else if (inside && strncmp(line, field, strlen(field)) == 0) {
            kb = strtol(line + strlen(field), NULL, 10);
            break;
        }
    }
    fclose(smaps);
    return kb;
}

/* Whether this kernel makes huge pages of shared memory on request (MADV_COLLAPSE, Linux 6.1),
 * asked outside the seam. */
bool sxe_test_kernel_collapses(void)
{
    size_t huge = 2u << 20;
    unsigned char *reserve =
        mmap(NULL, 2 * huge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    unsigned char *aligned = (unsigned char *)(((uintptr_t)reserve + huge - 1) & ~(huge - 1));

    assert_true(reserve != MAP_FAILED);
    assert_true(mmap(aligned, huge, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED,
                     -1, 0) == aligned);
    aligned[0] = 1;
    bool collapses = madvise(aligned, huge, 25 /* MADV_COLLAPSE */) == 0;
    assert_int_equal(munmap(reserve, 2 * huge), 0);
    return collapses;
}

uint64_t sxe_test_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
