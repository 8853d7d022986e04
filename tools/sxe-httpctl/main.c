/*
 * sxe-httpctl: sends one command to a running sxe-httpd's control socket (--control PATH) and
 * prints the answer: status, connections, reload, reopen, drain, stop, log-level MODULE LEVEL,
 * help. The server words the answers (docs/workers.md, "The control socket"); this program carries
 * them and exits 1 when one says "error:".
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <sxe/version.h>

#define DEFAULT_PATH "/run/sxe-httpd/control"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: sxe-httpctl [OPTION]... COMMAND [ARGUMENT]...\n"
            "Tells a running sxe-httpd (started with --control PATH) what to do, and prints\n"
            "its answer.\n"
            "\n"
            "Commands:\n"
            "  status                 uptime, workers, connections, requests, bytes, table-full\n"
            "                         events and evictions, per worker\n"
            "  connections            each worker's open connections (64 at most), the\n"
            "                         longest in their state first: peer, state, time in it,\n"
            "                         bytes queued, the request under way\n"
            "  reload                 as SIGHUP: check the configuration, then run it\n"
            "  reopen                 as SIGUSR1: reopen the access log\n"
            "  drain                  as SIGQUIT: finish what is under way, then stop\n"
            "  stop                   as SIGTERM\n"
            "  log-level MODULE LEVEL a module's log level (HTTP, WORKERS... or all) in every\n"
            "                         process: error, warn, info, debug...\n"
            "  help                   the server's list of commands\n"
            "\n"
            "Options:\n"
            "  -s, --socket PATH      the control socket ($SXE_HTTPD_CONTROL, else " DEFAULT_PATH
            ")\n"
            "  -j, --json             status or connections as JSON, for scripts\n"
            "  -w, --wait SECS        give up on an answer after SECS (15; a reload's check\n"
            "                         may take up to 10)\n"
            "  -h, --help             this text\n"
            "      --version          the version\n"
            "\n"
            "Exit status: 0 done, 1 refused or failed (the answer says why), 2 wrong usage.\n");
}

static void __attribute__((noreturn)) wrong(const char *why, const char *what)
{
    fprintf(stderr, "sxe-httpctl: %s%s\nTry 'sxe-httpctl --help' for more.\n", why, what);
    exit(2);
}

/* The command line to send, words joined by spaces, ending in a newline. */
static void command_line(char *line, size_t size, int argc, char **argv, bool json)
{
    size_t len = 0;

    for (int i = 0; i < argc; i++) {
        int n = snprintf(line + len, size - len, "%s%s", i ? " " : "", argv[i]);
        if (n < 0 || (size_t)n >= size - len - 7 || strpbrk(argv[i], "\n\r") != NULL) {
            wrong("a command line of at most 240 bytes, on one line", "");
        }
        len += (size_t)n;
    }
    snprintf(line + len, size - len, "%s\n", json ? " json" : "");
}

/* One exchange: connects to path (each step given up after seconds), sends line, reads the whole
 * answer into answer. @return its length, or -errno: -ECONNRESET (or -EPIPE) when the server closed
 * without an answer, -EAGAIN when none came in time. */
static ssize_t exchange(const char *path, long seconds, const char *line, char *answer, size_t size)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    struct timeval wait = {.tv_sec = seconds};
    size_t total = 0;
    ssize_t got = 0;

    memcpy(address.sun_path, path, strlen(path));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait)) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof(wait)) < 0 ||
        connect(fd, (struct sockaddr *)&address, sizeof(address)) < 0) {
        int err = errno;
        if (fd >= 0) {
            close(fd);
        }
        return -err;
    }
    /* A server that refuses the peer answers and closes at once: the answer is read all the
     * same. */
    int sent = send(fd, line, strlen(line), MSG_NOSIGNAL) == (ssize_t)strlen(line) ? 0 : errno;
    while (total < size && (got = read(fd, answer + total, size - total)) > 0) {
        total += (size_t)got;
    }
    int err = got < 0 ? errno : sent != 0 ? sent : ECONNRESET;
    close(fd);
    return total > 0 ? (ssize_t)total : -err;
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"socket", required_argument, NULL, 's'}, {"json", no_argument, NULL, 'j'},
        {"wait", required_argument, NULL, 'w'},   {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},      {NULL, 0, NULL, 0}};
    const char *path = getenv("SXE_HTTPD_CONTROL");
    bool json = false;
    long seconds = 15;
    char *end;
    int option;

    path = path != NULL && path[0] != '\0' ? path : DEFAULT_PATH;
    opterr = 0;
    while ((option = getopt_long(argc, argv, "+s:jw:h", options, NULL)) != -1) {
        switch (option) {
        case 's':
            path = optarg;
            break;
        case 'j':
            json = true;
            break;
        case 'w':
            seconds = strtol(optarg, &end, 10);
            if (*end != '\0' || seconds < 1 || seconds > 3600) {
                wrong("--wait takes 1 to 3600 seconds, not ", optarg);
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("sxe-httpctl %s\n", SXE_VERSION);
            return 0;
        default:
            wrong("unknown option ", argv[optind - 1]);
        }
    }
    if (optind == argc) {
        wrong("a command is needed: status, connections, reload, reopen, drain, stop, log-level "
              "or help",
              "");
    }
    if (json && strcmp(argv[optind], "status") != 0 && strcmp(argv[optind], "connections") != 0) {
        wrong("--json is for status and connections", "");
    }
    char line[256];
    command_line(line, sizeof(line), argc - optind, argv + optind, json);
    if (strlen(path) >= sizeof(((struct sockaddr_un *)NULL)->sun_path)) {
        wrong("the socket's path is too long: ", path);
    }
    /* The whole answer (status of 256 workers is under 80 KB, a list of connections 200 KB). A
     * reload runs the server again: for a few milliseconds its socket is gone, refused, or closes
     * on a command not yet read (which then did not run), so those are tried again for a second. */
    static char answer[256 * 1024];
    ssize_t total;
    for (int tries = 0;; tries++) {
        total = exchange(path, seconds, line, answer, sizeof(answer));
        if (total > 0 || tries == 50 ||
            (total != -ENOENT && total != -ECONNREFUSED && total != -ECONNRESET &&
             total != -EPIPE)) {
            break;
        }
        nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
    }
    if (total < 0) {
        int err = (int)-total;
        fprintf(stderr, "sxe-httpctl: %s: %s\n", path,
                err == ENOENT         ? "no such socket (is sxe-httpd running with --control?)"
                : err == ECONNREFUSED ? "nothing answers there (sxe-httpd is not running)"
                : err == EACCES       ? "not allowed (run as the server's user, or root)"
                : err == EAGAIN       ? "no answer in time"
                : err == ECONNRESET || err == EPIPE ? "the server closed without an answer"
                                                    : strerror(err));
        return 1;
    }
    /* Printed to standard error if a line says "error:" (a reload says "ok: reloading", then an
     * error if the program could not be run again). */
    bool failed = false;
    for (size_t i = 0; i + 6 <= (size_t)total; i++) {
        failed =
            failed || ((i == 0 || answer[i - 1] == '\n') && memcmp(answer + i, "error:", 6) == 0);
    }
    fwrite(answer, 1, (size_t)total, failed ? stderr : stdout);
    return failed ? 1 : 0;
}
