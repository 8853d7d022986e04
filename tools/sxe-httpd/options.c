/*
 * sxe-httpd's command line: its options, their help, and their checks (options.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sxe/http.h>
#include <sxe/sxe.h>

#include "access_log.h"
#include "compress.h"
#include "config_file.h"
#include "fields.h"
#include "hosts.h"
#include "metrics.h"
#include "mime.h"
#include "options.h"

struct httpd_config config = {.listen = "127.0.0.1:8080",
                              .connections = 10000,
                              .compress_min = COMPRESS_MIN_DEFAULT,
                              .cache = -1,
                              .proxy = {.connections = 256,
                                        .timeout = 30 * SXE_NS_PER_SEC,
                                        .fail_timeout = 10 * SXE_NS_PER_SEC}};

static const struct option options[] = {{"host", required_argument, NULL, '3'},
                                        {"root", required_argument, NULL, 'r'},
                                        {"listen", required_argument, NULL, 'l'},
                                        {"tls-cert", required_argument, NULL, 'k'},
                                        {"tls-key", required_argument, NULL, 'K'},
                                        {"tls", required_argument, NULL, 'n'},
                                        {"tls-no-tickets", no_argument, NULL, 'Y'},
                                        {"tls-ticket-key", required_argument, NULL, 'y'},
                                        {"tls-client-ca", required_argument, NULL, 'x'},
                                        {"tls-client-optional", no_argument, NULL, 'o'},
                                        {"tls-ocsp", required_argument, NULL, 'e'},
                                        {"https", required_argument, NULL, 'S'},
                                        {"redirect-https", no_argument, NULL, 'j'},
                                        {"index", required_argument, NULL, 'i'},
                                        {"list", no_argument, NULL, 'L'},
                                        {"no-list", no_argument, NULL, '4'},
                                        {"precompressed", no_argument, NULL, 'z'},
                                        {"gzip", required_argument, NULL, 'g'},
                                        {"brotli", required_argument, NULL, 'b'},
                                        {"compress-min", required_argument, NULL, 'J'},
                                        {"metrics", required_argument, NULL, 'p'},
                                        {"metrics-allow", required_argument, NULL, 'v'},
                                        {"header", required_argument, NULL, 'd'},
                                        {"mime-types", required_argument, NULL, 'm'},
                                        {"type", required_argument, NULL, '5'},
                                        {"access-log", required_argument, NULL, 'a'},
                                        {"log-format", required_argument, NULL, 'f'},
                                        {"access-log-buffer", required_argument, NULL, 'A'},
                                        {"connections", required_argument, NULL, 'Z'},
                                        {"workers", required_argument, NULL, 'w'},
                                        {"threads", no_argument, NULL, 'T'},
                                        {"cache", required_argument, NULL, 'C'},
                                        {"spread", required_argument, NULL, 's'},
                                        {"fastopen", no_argument, NULL, 'F'},
                                        {"defer-accept", no_argument, NULL, 'D'},
                                        {"evict-idle", no_argument, NULL, 'E'},
                                        {"header-timeout", required_argument, NULL, 'H'},
                                        {"idle-timeout", required_argument, NULL, 'I'},
                                        {"write-timeout", required_argument, NULL, '1'},
                                        {"body-rate", required_argument, NULL, 'R'},
                                        {"http2-streams", required_argument, NULL, 'q'},
                                        {"http2-window", required_argument, NULL, 'W'},
                                        {"no-http2", no_argument, NULL, 'X'},
                                        {"proxy", required_argument, NULL, 'P'},
                                        {"balance", required_argument, NULL, 'B'},
                                        {"proxy-timeout", required_argument, NULL, 'O'},
                                        {"proxy-connections", required_argument, NULL, 'N'},
                                        {"proxy-pipeline", required_argument, NULL, 'Q'},
                                        {"proxy-max-body", required_argument, NULL, 'M'},
                                        {"proxy-underscores", no_argument, NULL, 'U'},
                                        {"proxy-ca", required_argument, NULL, 'G'},
                                        {"resolver", required_argument, NULL, '6'},
                                        {"control", required_argument, NULL, 'u'},
                                        {"config", required_argument, NULL, 'c'},
                                        {"test", no_argument, NULL, 't'},
                                        {"help", no_argument, NULL, 'h'},
                                        {"version", no_argument, NULL, 'V'},
                                        {NULL, 0, NULL, 0}};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: sxe-httpd --root DIR [--listen IP:PORT] [options]\n"
            "\n"
            "Serves the files under DIR over HTTP/1.1 and HTTP/2 (h2 by ALPN over TLS, h2c with\n"
            "prior knowledge): sendfile, MIME types by extension, index files, ETag and\n"
            "Last-Modified conditional requests, single byte ranges. Requests for paths\n"
            "outside DIR get 400 (.., %%2e%%2e above the root) or 403 (symbolic links leading\n"
            "out, encoded separators).\n"
            "Stops cleanly on SIGTERM or SIGINT; SIGHUP reopens the access log and reloads\n"
            "the TLS files (the old ones serve on if the new fail).\n"
            "\n"
            "  -c, --config FILE     read options from FILE, a YAML mapping whose keys are\n"
            "                        the long options (root: /srv/www); the command line\n"
            "                        overrides it\n"
            "  -t, --test            check the configuration, its files and certificates,\n"
            "                        say whether it is good, and exit (0 if it is)\n"
            "  --root DIR            the directory to serve (required)\n"
            "  --host NAME[,NAME...] the options after it, until the next --host, are for\n"
            "                        requests whose Host is NAME (*.example.com: any name\n"
            "                        under it): --root, --index, --[no-]list, --header (beside\n"
            "                        the default host's), --type, --proxy, --access-log; the\n"
            "                        options before the first are the default host's, which\n"
            "                        serves every other name\n"
            "  --listen IP:PORT      where to listen, [IPv6]:PORT too (127.0.0.1:8080)\n"
            "  --tls-cert FILE       with --tls-key: serve HTTPS (TLS 1.2 and 1.3) on --listen,\n"
            "                        or on --https beside plain HTTP on --listen; FILE is PEM,\n"
            "                        the certificate then its chain\n"
            "  --tls-key FILE        the certificate's private key (PEM)\n"
            "  --tls NAME=CERT,KEY[,OCSP]\n"
            "                        another certificate and key (and OCSP response), for\n"
            "                        clients that ask for server NAME (SNI; *.example.com:\n"
            "                        one label under it); may be repeated; --tls-cert's\n"
            "                        serves the others\n"
            "  --tls-ocsp FILE       staple FILE (DER, from `openssl ocsp -respout`) to\n"
            "                        --tls-cert's handshakes\n"
            "  --tls-client-ca FILE  clients must show a certificate FILE's authorities\n"
            "                        issued (PEM); its subject goes to proxied upstreams\n"
            "                        as X-Client-Subject\n"
            "  --tls-client-optional with --tls-client-ca: a client may show none\n"
            "  --tls-no-tickets      no TLS session tickets: every connection's handshake\n"
            "                        is a full one\n"
            "  --tls-ticket-key FILE derive the tickets' keys (new each hour) from FILE's\n"
            "                        bytes (32 or more): servers given the same file resume\n"
            "                        each other's sessions\n"
            "  --https IP:PORT       an HTTPS listener beside --listen's plain one\n"
            "  --redirect-https      with --https: every plain request is answered 301 to\n"
            "                        the same path on the HTTPS listener's port\n"
            "  --index NAME          the file a directory serves (index.html)\n"
            "  --list                list directories that have no index file (--no-list:\n"
            "                        a host does not, whatever the default host does)\n"
            "  --precompressed       send FILE.br, FILE.zst or FILE.gz, compressed ahead of\n"
            "                        time, to clients that accept it (not for ranges; a\n"
            "                        sidecar older than FILE is not used)\n"
            "  --gzip LEVEL          compress text files (HTML, CSS, scripts, JSON, SVG...)\n"
            "                        with gzip at LEVEL (1-9; 0, the default: off) for\n"
            "                        clients that accept it (not for ranges); the result\n"
            "                        for a file of up to 64 KiB is cached\n"
            "  --brotli LEVEL        the same with brotli (1-9; 10 and 11, 20 to 100 times\n"
            "                        slower, are for --precompressed files), preferred\n"
            "                        where a client takes both; if built with libbrotli\n"
            "  --compress-min BYTES  leave files smaller than BYTES as they are (256)\n"
            "  --metrics PATH        answer GET PATH with counters in Prometheus's text\n"
            "                        format: requests, bytes and times by what served\n"
            "                        them, per upstream, connections per worker\n"
            "  --metrics-allow ADDR[/BITS]\n"
            "                        the clients that may read them (repeatable; loopback\n"
            "                        only when not given); others get 403\n"
            "  --mime-types FILE     the types of files by extension, as /etc/mime.types\n"
            "                        (/etc/mime.types if there is one; a table built in\n"
            "                        for what it does not name)\n"
            "  --type EXT=TYPE       files ending in .EXT are TYPE, whatever the table says\n"
            "                        (repeatable; a host's own, or the default host's for\n"
            "                        every host)\n"
            "  --header 'PREFIX Name: value'\n"
            "                        add the field to answers for paths under PREFIX\n"
            "                        (2xx and 3xx, files and proxied alike; repeatable,\n"
            "                        in order: Cache-Control, CORS, security fields)\n"
            "  --access-log FILE     log requests to FILE (- for standard output); off by default\n"
            "  --log-format FORMAT   common (default), combined or json (a JSON object a\n"
            "                        line, with the request's time)\n"
            "  --access-log-buffer BYTES\n"
            "                        gather log lines in a buffer of BYTES, written when\n"
            "                        full and every second (nginx's buffer=); 0: a write\n"
            "                        per line (0)\n"
            "  --connections N       the most connections at once, per worker (10000)\n"
            "  --workers N           worker processes, each with its own loop and connections\n"
            "                        (the CPUs it may run on; more to pass the file limit)\n"
            "  --threads             workers are threads of one process, not processes\n"
            "  --cache MODE          with --threads: shared (one file cache for all, each\n"
            "                        file held once) or per-worker (each thread its own,\n"
            "                        nothing locked) (shared; processes: per-worker)\n"
            "  --spread MODE         how connections reach workers: reuseport (each its own\n"
            "                        socket, the kernel's hash), cpu (reuseport, steered to\n"
            "                        the worker of the receiving CPU) or hand-off (one\n"
            "                        acceptor passes each to the least loaded) (reuseport)\n"
            "  --fastopen            TCP Fast Open on the listener\n"
            "  --defer-accept        wake a worker only once a request's bytes have come\n"
            "  --evict-idle          when the table is full, close the oldest idle connection\n"
            "                        to make room, instead of refusing the new one\n"
            "  --header-timeout SECS answer 408 to a request whose head and body have not\n"
            "                        all come in this long (10)\n"
            "  --idle-timeout SECS   close a kept-alive connection idle this long (60)\n"
            "  --write-timeout SECS  close a connection whose client takes nothing of its\n"
            "                        answer this long (30)\n"
            "  --body-rate BYTES     answer 408 to a proxied body that comes at under this\n"
            "                        many bytes a second, over three seconds or more (4096)\n"
            "  --http2-streams N     HTTP/2 streams a client may have open at once (100)\n"
            "  --http2-window BYTES  each HTTP/2 stream's initial window (262144)\n"
            "  --no-http2            HTTP/1.1 only: TLS names http/1.1 alone in ALPN, and the\n"
            "                        HTTP/2 preface is refused (505)\n"
            "  --proxy PREFIX=HOST:PORT[,HOST:PORT...]\n"
            "                        forward requests whose path starts with PREFIX to\n"
            "                        these upstreams, over kept-alive connections (repeatable;\n"
            "                        the longest prefix wins; static files for the rest);\n"
            "                        HOST is an IP address or a name, resolved again as its\n"
            "                        answer's TTL runs out;\n"
            "                        https://HOST:PORT: over TLS, the certificate checked\n"
            "  --proxy-ca FILE       the authorities https:// upstreams' certificates are\n"
            "                        checked against (PEM; the system's by default)\n"
            "  --resolver IP[:PORT][,IP[:PORT]...]\n"
            "                        the name servers that resolve upstreams given by name\n"
            "                        (/etc/resolv.conf's by default; /etc/hosts first)\n"
            "  --balance MODE        among a prefix's upstreams: least (connections) or\n"
            "                        round-robin (least)\n"
            "  --proxy-timeout SECS  an upstream silent this long gets 504 (30)\n"
            "  --proxy-connections N the most connections to each upstream, per worker (256)\n"
            "  --proxy-pipeline N    send up to N requests at once on an upstream connection\n"
            "                        (GETs; only to upstreams that frame answers right) (1)\n"
            "  --proxy-max-body BYTES  a proxied request body longer than this gets 413\n"
            "                        (0: no limit; bodies stream, whatever their size) (0)\n"
            "  --proxy-underscores   pass on request fields whose names have '_' (dropped by\n"
            "                        default: CGI upstreams read X_A and X-A as one)\n"
            "  --control PATH        answer sxe-httpctl on a Unix socket at PATH (mode 0600):\n"
            "                        status, connections, reload, reopen, drain, stop,\n"
            "                        log-level\n"
            "  -h, --help            this text\n"
            "      --version         the versions of sxe-httpd and of the libsxe it runs on\n"
            "\n"
            "SIGHUP with -c FILE reloads: checks FILE, then runs again with the same\n"
            "listening sockets while the old workers finish what they hold (without a file,\n"
            "or with --threads, it reopens the access log and reads the TLS files again).\n"
            "SIGUSR1 reopens the access log (after logrotate moved it); SIGQUIT drains, then\n"
            "stops; SIGTERM stops. Counters: sxe-httpctl status. A worker process that dies\n"
            "is restarted; the others serve on.\n");
}

/* "FILE:LINE" while the configuration file's entries are applied, else NULL. */
static const char *source;
static unsigned file_lines[128]; /* by option: the file's line that set it, or 0 */

/* Says what is wrong and exits: 2 for a wrong command line, 1 for the rest. A configuration
 * file's mistake is told at its line, the option named as its key is (workers, not --workers). */
static void __attribute__((format(printf, 2, 3), noreturn)) die(int status, const char *format, ...)
{
    char *text;
    va_list args;

    va_start(args, format);
    if (vasprintf(&text, format, args) < 0) {
        text = (char *)(uintptr_t)format; /* memory is short: the words without their values */
    }
    va_end(args);
    if (source != NULL) {
        fprintf(stderr, "sxe-httpd: %s: %s\n", source, text + 2 * (strncmp(text, "--", 2) == 0));
        exit(1);
    }
    fprintf(stderr, "sxe-httpd: %s\n", text);
    exit(status);
}

static unsigned long number(const char *text, unsigned long low, unsigned long high,
                            const char *option)
{
    char *end;
    errno = 0;
    unsigned long value = strtoul(text, &end, 10);

    if (*end != '\0' || end == text || strchr(text, '-') != NULL || errno == ERANGE ||
        value < low || value > high) {
        die(2, "%s must be a number from %lu to %lu, not '%s'", option, low, high, text);
    }
    return value;
}

static enum sxe_workers_spread spread_mode(const char *text)
{
    static const char *const names[] = {[SXE_SPREAD_REUSEPORT] = "reuseport",
                                        [SXE_SPREAD_REUSEPORT_CPU] = "cpu",
                                        [SXE_SPREAD_HAND_OFF] = "hand-off"};

    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(text, names[i]) == 0) {
            return (enum sxe_workers_spread)i;
        }
    }
    die(2, "--spread must be reuseport, cpu or hand-off, not '%s'", text);
}

/* --tls NAME=CERT,KEY[,OCSP]: cut into its parts (optarg, in argv). */
static void tls_name(char *text)
{
    char *equals = strchr(text, '='), *comma = equals != NULL ? strchr(equals, ',') : NULL;
    char *ocsp = comma != NULL ? strchr(comma + 1, ',') : NULL;

    if (equals == NULL || comma == NULL || equals == text || comma == equals + 1 ||
        comma[1] == '\0' || comma[1] == ',' ||
        (ocsp != NULL && (ocsp[1] == '\0' || strchr(ocsp + 1, ',') != NULL))) {
        die(2, "--tls %s: give NAME=CERT,KEY or NAME=CERT,KEY,OCSP (see --help)", text);
    }
    if (config.tls_name_count == HTTPD_TLS_NAMES) {
        die(2, "--tls: at most %d names", HTTPD_TLS_NAMES);
    }
    *equals = *comma = '\0';
    if (ocsp != NULL) {
        *ocsp++ = '\0';
    }
    config.tls_names[config.tls_name_count++] = (struct httpd_tls_name){
        .name = text, .certificate = equals + 1, .key = comma + 1, .ocsp = ocsp};
}

/* The command line's values and the file's, until options_parse() checks them together. */
static struct {
    const char *mime_path;
    enum access_log_format log_format;
} given;

#define HOST_OPTIONS "riL4dPa5" /* the options a host may have of its own */

/* The long name of an option, by its value. */
static const char *named(int option)
{
    const struct option *at = options;

    while (at->name != NULL && at->val != option) {
        at++;
    }
    return at->name;
}

/* One option, from the command line or the file: a case each, as getopt gives them (long for
 * that reason). Those of HOST_OPTIONS go to the current host. */
static void apply(int option, char *arg)
{
    struct host *host = hosts_current();
    const char *why;

    if (host->index != 0 && option != '3' && strchr(HOST_OPTIONS, option) == NULL) {
        die(2, "--%s is the whole server's: give it before the first --host", named(option));
    }
    switch (option) {
    case '3':
        if ((why = hosts_add(arg, NULL)) != NULL) {
            die(2, "--host %s: %s", arg, why);
        }
        break;
    case 'r':
        host->given = arg;
        break;
    case 'l':
        config.listen = arg;
        break;
    case 'k':
        config.tls_cert = arg;
        break;
    case 'K':
        config.tls_key = arg;
        break;
    case 'n':
        tls_name(arg);
        break;
    case 'Y':
        config.tls_no_tickets = true;
        break;
    case 'y':
        config.tls_ticket_key = arg;
        break;
    case 'x':
        config.tls_client_ca = arg;
        break;
    case 'o':
        config.tls_client_optional = true;
        break;
    case 'e':
        config.tls_ocsp = arg;
        break;
    case 'S':
        config.https = arg;
        break;
    case 'j':
        config.redirect_https = true;
        break;
    case 'i':
        host->index_file = arg;
        break;
    case 'L':
        host->list = 1;
        break;
    case '4':
        host->list = 0;
        break;
    case 'z':
        config.precompressed = true;
        break;
    case 'g':
        config.gzip = (int)number(arg, 0, 9, "--gzip");
        break;
    case 'b':
        if (!compress_has_brotli()) {
            die(2, "--brotli: this sxe-httpd was built without libbrotli");
        }
        config.brotli = (int)number(arg, 0, 9, "--brotli");
        break;
    case 'J':
        config.compress_min = number(arg, 0, ULONG_MAX, "--compress-min");
        break;
    case 'p':
        /* as requests' paths are matched: normal (no "//", dot segment or escape to decode) */
        if (arg[0] != '/' || arg[1] == '\0' || strlen(arg) > 255 || strpbrk(arg, "?#% \t") ||
            !sxe_http_path_is_normal(arg, strlen(arg))) {
            die(2, "--metrics takes a path of its own in normal form (/metrics), not '%s'", arg);
        }
        config.metrics = arg;
        break;
    case 'v':
        if ((why = metrics_allow(arg)) != NULL) {
            die(2, "--metrics-allow %s: %s", arg, why);
        }
        break;
    case 'a':
        host->access_log = arg;
        break;
    case 'f':
        if (strcmp(arg, "common") == 0) {
            given.log_format = ACCESS_LOG_COMMON;
        } else if (strcmp(arg, "combined") == 0) {
            given.log_format = ACCESS_LOG_COMBINED;
        } else if (strcmp(arg, "json") == 0) {
            given.log_format = ACCESS_LOG_JSON;
        } else {
            die(2, "--log-format must be common, combined or json, not '%s'", arg);
        }
        break;
    case 'A':
        config.log_buffer = number(arg, 0, 64u << 20, "--access-log-buffer");
        break;
    case 'Z':
        config.connections = (uint32_t)number(arg, 16, 1000000, "--connections");
        break;
    case 'w':
        config.workers = (unsigned)number(arg, 1, SXE_WORKERS_MAX, "--workers");
        break;
    case 'T':
        config.kind = SXE_WORKERS_THREADS;
        break;
    case 'C':
        if (strcmp(arg, "shared") != 0 && strcmp(arg, "per-worker") != 0) {
            die(2, "--cache must be per-worker or shared, not '%s'", arg);
        }
        config.cache = strcmp(arg, "shared") == 0;
        break;
    case 's':
        config.spread = spread_mode(arg);
        break;
    case 'F':
        config.listen_flags |= SXE_LISTEN_FASTOPEN;
        break;
    case 'D':
        config.listen_flags |= SXE_LISTEN_DEFER_ACCEPT;
        break;
    case 'E':
        config.listen_flags |= SXE_LISTEN_EVICT_IDLE;
        break;
    case 'H':
        config.header_timeout = (unsigned)number(arg, 1, 86400, "--header-timeout");
        break;
    case 'I':
        config.idle_timeout = (unsigned)number(arg, 1, 86400, "--idle-timeout");
        break;
    case '1':
        config.write_timeout = (unsigned)number(arg, 1, 86400, "--write-timeout");
        break;
    case 'R':
        config.body_rate = (unsigned)number(arg, 1, 1u << 30, "--body-rate");
        break;
    case 'q':
        config.http2.max_streams = (uint32_t)number(arg, 1, 1u << 20, "--http2-streams");
        break;
    case 'W':
        config.http2.window = (uint32_t)number(arg, 65535, INT32_MAX, "--http2-window");
        break;
    case 'X':
        config.http2.off = true;
        break;
    case 'P':
        if ((why = proxy_add(host->index, arg)) != NULL) {
            die(2, "--proxy %s: %s", arg, why);
        }
        break;
    case 'G':
        config.proxy.ca_file = arg;
        break;
    case '6':
        if ((why = proxy_resolvers(arg)) != NULL) {
            die(2, "--resolver %s: %s", arg, why);
        }
        config.proxy.resolvers = arg;
        break;
    case 'B':
        if (strcmp(arg, "least") != 0 && strcmp(arg, "round-robin") != 0) {
            die(2, "--balance must be least or round-robin, not '%s'", arg);
        }
        config.proxy.round_robin = strcmp(arg, "round-robin") == 0;
        break;
    case 'O':
        config.proxy.timeout = number(arg, 1, 3600, "--proxy-timeout") * SXE_NS_PER_SEC;
        break;
    case 'N':
        config.proxy.connections = (uint32_t)number(arg, 1, 65536, "--proxy-connections");
        break;
    case 'M':
        config.proxy_max_body = number(arg, 0, ULONG_MAX, "--proxy-max-body");
        break;
    case 'm':
        given.mime_path = arg;
        break;
    case '5':
        if ((why = mime_add(host->index, arg)) != NULL) {
            die(2, "--type %s %s", arg, why);
        }
        break;
    case 'd':
        if ((why = fields_add(host->index, arg)) != NULL) {
            die(2, "--header '%s' %s", arg, why);
        }
        break;
    case 'u':
        config.control = arg;
        break;
    case 'Q':
        config.proxy.pipeline = (uint32_t)number(arg, 1, 64, "--proxy-pipeline");
        break;
    case 'U':
        config.proxy.underscores = true;
        break;
    }
}

static bool boolean(const char *text, bool *value)
{
    static const char *const words[] = {"false", "no", "off", "true", "yes", "on"};

    for (unsigned i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (strcasecmp(text, words[i]) == 0) {
            *value = i >= 3;
            return true;
        }
    }
    return false;
}

/* Begins one of the file's hosts (its entries come together, in the file's order). */
static void begin_host(const char *path, const struct config_host *named_host)
{
    char *place;
    const char *why;

    if (asprintf(&place, "%s:%u", path, named_host->line) < 0) {
        die(1, "%s", "out of memory");
    }
    if ((why = hosts_add(named_host->names, place)) != NULL) {
        source = place;
        die(1, "the host '%s': %s", named_host->names, why);
    }
}

/* Applies the file's entries, each told at its line if it is wrong. Its strings stay: the
 * configuration points into them. */
static void read_file(const char *path)
{
    static struct config_file file;
    char place[PATH_MAX + 16];
    unsigned host = 0;

    if (config_file_read(path, &file) < 0) {
        if (file.line == 0) {
            die(1, "--config %s: %s", path, file.why);
        }
        die(1, "%s:%u: %s", path, file.line, file.why);
    }
    for (size_t i = 0; i < file.count; i++) {
        const struct config_entry *entry = &file.entries[i];
        const struct option *option = options;

        if (entry->host != host) { /* a host's entries come together */
            hosts_reset();
            if ((host = entry->host) != 0) {
                begin_host(path, &file.hosts[host - 1]);
            }
        }
        snprintf(place, sizeof(place), "%s:%u", path, entry->key_line);
        source = place;
        while (option->name != NULL && strcmp(option->name, entry->key) != 0) {
            option++;
        }
        if (option->name == NULL) {
            die(1, "unknown key '%s' (the keys are the long options: see --help)", entry->key);
        }
        if (strchr("ctVh3", option->val) != NULL) {
            die(1, "'%s' is an option of the command line only%s", entry->key,
                option->val == '3' ? " (hosts: maps names to their keys)" : "");
        }
        if (entry->host != 0 && strchr(HOST_OPTIONS, option->val) == NULL) {
            die(1, "'%s' is the whole server's: give it outside hosts", entry->key);
        }
        if (entry->listed && strchr("nPdv5", option->val) == NULL) {
            die(1, "'%s' takes one value, not a list", entry->key);
        }
        snprintf(place, sizeof(place), "%s:%u", path, entry->line);
        bool on = true;
        if (option->has_arg == no_argument && !boolean(entry->value, &on)) {
            die(1, "'%s' is true or false, not '%s'", entry->key, entry->value);
        }
        if (on || option->val == 'L') { /* list: false turns a host's listings off */
            apply(on ? option->val : '4', option->has_arg == no_argument ? NULL : entry->value);
        }
        if (on && entry->host == 0) { /* a host's mistakes are told at its own line */
            file_lines[option->val] = entry->line;
        }
    }
    source = NULL;
    hosts_reset(); /* the command line's options are the default host's until its --host */
}

/* For a check of what the options say together: the file's line of the option named (source
 * set, so that die() tells it there and exits 1), or nothing when the command line gave it. */
static void blame(int option)
{
    static char place[PATH_MAX + 16];

    source = NULL;
    if (config.file != NULL && file_lines[option] != 0) {
        snprintf(place, sizeof(place), "%s:%u", config.file, file_lines[option]);
        source = place;
    }
}

/* Resolves a host's root and opens its access log, each told where it was given if it fails;
 * what it leaves unsaid is the default host's. */
static void host_check(struct host *host)
{
    const struct host *main_host = hosts_at(0);
    char resolved[PATH_MAX];
    struct stat status;
    int rc = -1;

    if (host->index == 0) {
        blame('r');
        host->index_file = host->index_file != NULL ? host->index_file : "index.html";
        host->list = host->list == 1;
    } else {
        source = host->place;
        host->index_file = host->index_file ? host->index_file : main_host->index_file;
        host->list = host->list == -1 ? main_host->list : host->list;
        if (host->given == NULL && !proxy_covers(host->index, "/")) {
            die(1, "the host '%s' has no root: give it one, or a proxy for /", host->names);
        }
    }
    if (host->given != NULL) {
        const char *why = realpath(host->given, resolved) == NULL || stat(resolved, &status) < 0
                              ? strerror(errno)
                          : !S_ISDIR(status.st_mode) ? "not a directory"
                                                     : NULL;
        if (why != NULL && host->index == 0) {
            die(1, "--root %s: %s", host->given, why);
        } else if (why != NULL) {
            die(1, "the host '%s': root %s: %s", host->names, host->given, why);
        }
        host->root_len = strcmp(resolved, "/") == 0 ? 0 : strlen(resolved);
        if ((host->root = strndup(resolved, host->root_len)) == NULL) {
            die(1, "%s", "out of memory");
        }
    }
    if (host->index == 0) {
        blame('a');
    }
    if (host->access_log != NULL &&
        (rc = access_log_open(host->access_log, given.log_format, config.log_buffer)) < 0) {
        die(1, "--access-log %s: %s", host->access_log, sxe_strerror(rc));
    }
    host->log = host->access_log != NULL ? rc : main_host->log;
}

void options_parse(int argc, char **argv)
{
    struct {
        int option;
        char *arg;
    } *line = calloc((size_t)argc, sizeof(*line));
    size_t count = 0;
    int option;

    if (line == NULL) {
        die(1, "%s", "out of memory");
    }
    /* The command line is read first and applied last: its values override the file's. */
    while ((option = getopt_long(argc, argv, "hc:t", options, NULL)) != -1) {
        switch (option) {
        case 'h':
            usage(stdout);
            exit(0);
        case 'V':
            printf("sxe-httpd %s (libsxe %s)\n", SXE_VERSION, sxe_version());
            exit(0);
        case 'c':
            config.file = optarg;
            break;
        case 't':
            config.test = true;
            break;
        case '?': /* getopt said which, in a line of its own */
            fprintf(stderr, "(sxe-httpd --help lists the options)\n");
            exit(2);
        default:
            line[count].option = option;
            line[count++].arg = optarg;
        }
    }
    if (optind < argc) {
        free(line);
        die(2, "unexpected argument '%s' (see --help)", argv[optind]);
    }
    if (config.file != NULL) {
        read_file(config.file);
    }
    for (size_t i = 0; i < count; i++) {
        apply(line[i].option, line[i].arg);
        file_lines[line[i].option] = 0; /* the command line's value, not the file's */
    }
    free(line);
    if (config.cache == 1 && config.kind != SXE_WORKERS_THREADS) {
        blame('C');
        die(2, "%s", "--cache shared needs --threads (worker processes share no memory)");
    }
    if (config.cache == -1) { /* threads share one by default: measured, docs/benchmarks.md */
        config.cache = config.kind == SXE_WORKERS_THREADS;
    }
    if ((config.tls_cert == NULL) != (config.tls_key == NULL) ||
        ((config.https != NULL || config.tls_name_count > 0 || config.tls_no_tickets ||
          config.tls_ticket_key != NULL || config.tls_client_ca != NULL ||
          config.tls_ocsp != NULL) &&
         config.tls_cert == NULL)) {
        blame(config.tls_cert != NULL ? 'k' : config.tls_key != NULL ? 'K' : 'S');
        die(2, "%s", "HTTPS needs both --tls-cert FILE and --tls-key FILE (see --help)");
    }
    if (config.tls_client_optional && config.tls_client_ca == NULL) {
        blame('o');
        die(2, "%s", "--tls-client-optional goes with --tls-client-ca FILE");
    }
    struct sockaddr_storage https;
    if (config.redirect_https &&
        (config.https == NULL ||
         sxe_address_parse(config.https, -1, &https, &(socklen_t){0}) < 0)) {
        blame('j');
        die(2, "%s", "--redirect-https sends plain requests to --https IP:PORT: give it");
    }
    config.https_port = config.redirect_https ? sxe_address_port((struct sockaddr *)&https) : 0;
    if (config.tls_cert != NULL && !sxe_tls_available()) {
        blame('k');
        die(2, "%s", "this sxe-httpd was built without TLS (OpenSSL 3's libssl-dev)");
    }
    if (hosts_at(0)->given == NULL) {
        die(2, "%s", "--root DIR is required (see --help)");
    }
    if (config.control != NULL && (config.control[0] == '\0' || strlen(config.control) > 107)) {
        blame('u');
        die(2, "--control %s: a Unix socket's path has 1 to 107 bytes", config.control);
    }
    blame('m');
    const char *types = given.mime_path != NULL ? given.mime_path : "/etc/mime.types";
    int loaded = mime_load(types, given.mime_path != NULL);
    if (loaded < 0) {
        die(1, "--mime-types %s: %s", types, strerror(-loaded));
    }
    for (unsigned i = 0; i <= hosts_count(); i++) {
        host_check(hosts_at(i));
    }
    hosts_ready();
    source = NULL;
}
