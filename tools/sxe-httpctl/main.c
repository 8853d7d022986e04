/*
 * sxe-httpctl: sends one command to a running sxe-httpd's control socket (--control PATH) and
 * prints the answer: status, reload, reopen, drain, stop, log-level MODULE LEVEL, help. The server
 * words the answers (docs/workers.md, "The control socket"); this program carries them and exits 1
 * when one says "error:".
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
            "  -j, --json             status as JSON, for scripts\n"
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

/* Connects to path, giving up after seconds on anything. @return the socket; exits if it cannot. */
static int reach(const char *path, long seconds)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    struct timeval wait = {.tv_sec = seconds};

    if (strlen(path) >= sizeof(address.sun_path)) {
        wrong("the socket's path is too long: ", path);
    }
    memcpy(address.sun_path, path, strlen(path));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait)) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof(wait)) < 0) {
        fprintf(stderr, "sxe-httpctl: cannot make a socket: %s\n", strerror(errno));
        exit(1);
    }
    if (connect(fd, (struct sockaddr *)&address, sizeof(address)) < 0) {
        int err = errno;
        fprintf(stderr, "sxe-httpctl: %s: %s\n", path,
                err == ENOENT         ? "no such socket (is sxe-httpd running with --control?)"
                : err == ECONNREFUSED ? "nothing answers there (sxe-httpd is not running)"
                : err == EACCES       ? "not allowed (run as the server's user, or root)"
                                      : strerror(err));
        exit(1);
    }
    return fd;
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
        wrong("a command is needed: status, reload, reopen, drain, stop, log-level or help", "");
    }
    if (json && strcmp(argv[optind], "status") != 0) {
        wrong("--json is for status", "");
    }
    char line[256];
    command_line(line, sizeof(line), argc - optind, argv + optind, json);
    int fd = reach(path, seconds);
    /* A server that refuses the peer answers and closes at once: the answer is read all the same */
    int sent = send(fd, line, strlen(line), MSG_NOSIGNAL) == (ssize_t)strlen(line) ? 0 : errno;
    /* The whole answer (status of 256 workers is under 80 KB), then printed: to standard error
     * if a line of it says "error:" (a reload says "ok: reloading", then an error if the program
     * could not be run again). */
    static char answer[128 * 1024];
    size_t total = 0;
    ssize_t got;
    while (total < sizeof(answer) && (got = read(fd, answer + total, sizeof(answer) - total)) > 0) {
        total += (size_t)got;
    }
    if (total == 0) {
        fprintf(stderr, "sxe-httpctl: %s: %s\n", path,
                sent != 0         ? strerror(sent)
                : got == 0        ? "the server closed without an answer"
                : errno == EAGAIN ? "no answer in time"
                                  : strerror(errno));
        return 1;
    }
    bool failed = false;
    for (size_t i = 0; i + 6 <= total; i++) {
        failed =
            failed || ((i == 0 || answer[i - 1] == '\n') && memcmp(answer + i, "error:", 6) == 0);
    }
    fwrite(answer, 1, total, failed ? stderr : stdout);
    close(fd);
    return failed ? 1 : 0;
}
