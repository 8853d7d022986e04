/*
 * sxe-http's options: parsed and checked into config, with every request built ahead of the run.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sxe/sxe.h>

#include "response.h"
#include "sxe-http.h"

struct config config = {.queries = 1,
                        .connections = 1,
                        .pipeline = 1,
                        .timeout_ns = 10 * SXE_NS_PER_SEC,
                        .ramp_batch = 1000,
                        .expect_status = 200,
                        .expect_length = -1,
                        .tick_ns = 1000 * SXE_NS_PER_USEC,
                        .ws_size = 20};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: sxe-http {-i IP -p PORT | URL} [-n QUERIES | -d SECONDS] [-c CONNECTIONS] "
            "[-R RATE] [options]\n"
            "\n"
            "Opens CONNECTIONS keep-alive connections to IP:PORT in batches, waits until all are\n"
            "up, then sends QUERIES requests on each, one after another (closed loop) or on a\n"
            "schedule (-R), and reports connect, query and run times and rates, latency\n"
            "percentiles and errors by kind.\n"
            "\n"
            "  -i IP            server address, IPv4 or IPv6\n"
            "  -p PORT          server port\n"
            "  URL              instead of -i and -p: http[s]://HOST[:PORT][/PATH]; a HOST by\n"
            "                   name is looked up once, at start; the URL's HOST[:PORT] is the\n"
            "                   requests' Host, its PATH their path (-u's), https is --tls\n"
            "  -n QUERIES       queries per connection (1)\n"
            "  -c CONNECTIONS   connections (1)\n"
            "  -d SECONDS       run for SECONDS instead of -n queries per connection\n"
            "  -P DEPTH         pipeline DEPTH queries per connection (1, at most %d); with\n"
            "                   -R, the most outstanding per connection (%d)\n"
            "  -R RATE          open loop: send RATE requests per second over all connections\n"
            "                   on a fixed schedule, whether or not answers have come, and\n"
            "                   measure latency from when each was due (coordinated omission\n"
            "                   corrected); a request due on a connection with DEPTH\n"
            "                   outstanding waits for one and counts as a 'cap' error\n"
            "  --tick USEC      with -R, send what comes due within USEC at once, early (1000):\n"
            "                   fewer wake-ups; smaller is smoother and costs more CPU\n"
            "  -m METHOD        request method (GET)\n"
            "  -u PATH          request path (/)\n"
            "  -U FILE          request paths from FILE, one per line as 'PATH [WEIGHT]',\n"
            "                   used in turn (a path of weight 3 three times a round)\n"
            "  --random         with -U, draw each path at random by weight instead\n"
            "  -H 'NAME: VALUE' add a request header (repeatable; a Host replaces the\n"
            "                   target's: a virtual host by name)\n"
            "  -b BODY          request body (sent with Content-Length)\n"
            "  -f FILE          send FILE's bytes as the request, exactly\n"
            "  -s A,B,...       source addresses, used in turn (each gives about %d ports)\n"
            "  -w WORKERS       worker processes (enough for the file descriptor limit)\n"
            "  -t SECONDS       response and connect timeout (10)\n"
            "  -r BATCH         connects outstanding at once while ramping, per worker (1000)\n"
            "  -e STATUS        the status every response must have (200)\n"
            "  --body-length BYTES  the length every response's body must have\n"
            "  --body FILE      every response's body must be FILE's bytes: its length is\n"
            "                   checked for each, its bytes for every 64th\n"
            "  -g               close finished connections with FIN, not reset (leaves\n"
            "                   TIME_WAIT ports behind for a minute)\n"
            "  -v               hex-dump the request before sending; list slow connects\n"
            "  --ws PATH        WebSocket mode: each connection opens a WebSocket to PATH, and\n"
            "                   a query is a binary message the server echoes\n"
            "  --ws-size BYTES  the size of each message in WebSocket mode (20)\n"
            "  --json           print the report as JSON\n"
            "  --timeline       add each second's rate, errors and p99 to the report (the\n"
            "                   last may be shorter, and says how long it was)\n"
            "  --latency-log FILE  write each second's latency histogram to FILE in\n"
            "                   HdrHistogram's interval log format (ns; max in ms)\n"
            "  --http1.0        requests say HTTP/1.0: no keep-alive, each on a new\n"
            "                   connection (reset once answered), timed from its connect\n"
            "  --tls            speak TLS (1.2 or 1.3) on every connection, HTTP or --ws; the\n"
            "                   server's certificate is not checked (a load generator's\n"
            "                   peer is a test server); with --http1.0 each request makes a\n"
            "                   full handshake\n"
            "  --tls-resume     --tls, each connection resuming the session its worker was\n"
            "                   given last (with --http1.0: resumed handshakes)\n"
            "  --warmup SECONDS with -d: load for SECONDS before the measured window and\n"
            "                   count only its errors; say on stderr when the window\n"
            "                   starts and ends ('sxe-http: measuring', 'sxe-http:\n"
            "                   measured'), for a tool that samples the server meanwhile\n"
            "  -h, --help       this text\n"
            "      --version    the versions of sxe-http and of the libsxe it runs on\n"
            "\n"
            "Exit status: 0 when every query got a good response, 1 when any error was counted,\n"
            "2 for a usage error.\n",
            PIPELINE_MAX, RATE_CAP, PORTS_PER_SOURCE);
}

static void __attribute__((format(printf, 1, 2), noreturn)) die_usage(const char *format, ...)
{
    va_list args;

    fprintf(stderr, "sxe-http: ");
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    fprintf(stderr, "\n(sxe-http --help explains the options)\n");
    exit(2);
}

static uint64_t parse_count(const char *text, const char *what, uint64_t min, uint64_t max)
{
    char *end;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < min || value > max) {
        die_usage("%s must be a whole number from %llu to %llu, not '%s'", what,
                  (unsigned long long)min, (unsigned long long)max, text);
    }
    return value;
}

/* A whole file (what it is, for the error). */
static char *read_file(const char *path, size_t *len, const char *what)
{
    FILE *file = fopen(path, "rb");
    char *data = NULL;
    long size;

    if (file == NULL || fseek(file, 0, SEEK_END) != 0 || (size = ftell(file)) < 0 ||
        fseek(file, 0, SEEK_SET) != 0 || (data = malloc((size_t)size + 1)) == NULL ||
        fread(data, 1, (size_t)size, file) != (size_t)size) {
        die_usage("cannot read %s '%s'", what, path);
    }
    fclose(file);
    *len = (size_t)size;
    return data;
}

/* --body FILE: every response's body must be the file's bytes. */
static void expect_body(const char *path)
{
    size_t len;
    char *body = read_file(path, &len, "the body file");

    config.expect_length = (int64_t)len;
    config.expect_hash = response_hash(RESPONSE_HASH_START, body, len);
    config.expect_hash_set = true;
    free(body);
}

/* Whether the -H headers (lines ending in CRLF) give a Host of their own: then it replaces the
 * target's (a virtual host asked for by name), rather than making a second one. */
static bool names_host(const char *headers)
{
    for (const char *line = headers; *line != '\0';) {
        if (strncasecmp(line, "Host:", 5) == 0) {
            return true;
        }
        const char *end = strstr(line, "\r\n");
        line = end != NULL ? end + 2 : line + strlen(line);
    }
    return false;
}

/* Appends "METHOD PATH HTTP/1.1\r\nHost: ...\r\n<headers><Content-Length>\r\n<body>" to
 * config.requests as the next target, of weight (the Host, unless -H gave one). */
static void add_request(const char *method, const char *path, const char *headers, const char *body,
                        uint64_t weight)
{
    size_t body_len = body ? strlen(body) : 0;
    size_t size = strlen(method) + strlen(path) + strlen(headers) + strlen(config.host_header) +
                  body_len + 128;
    size_t at = config.targets == 0 ? 0 : config.offsets[config.targets];

    if (config.targets % 1024 == 0) {
        config.offsets = realloc(config.offsets, (config.targets + 1025) * sizeof(size_t));
        config.weight_ends =
            realloc(config.weight_ends, (config.targets + 1024) * sizeof(uint64_t));
        config.offsets[0] = 0;
    }
    config.requests = realloc(config.requests, at + size);
    if (config.offsets == NULL || config.weight_ends == NULL || config.requests == NULL) {
        die_usage("%s", "out of memory for the requests");
    }
    char *request = config.requests + at;
    bool own_host = names_host(headers);
    int len = snprintf(request, size, "%s %s HTTP/1.%c\r\n%s%s%s%s", method, path,
                       config.http10 ? '0' : '1',
                       own_host ? "" : "Host: ", own_host ? "" : config.host_header,
                       own_host ? "" : "\r\n", headers);
    if (body != NULL) {
        len += snprintf(request + len, size - (size_t)len, "Content-Length: %zu\r\n", body_len);
    }
    len += snprintf(request + len, size - (size_t)len, "\r\n%s", body ? body : "");
    config.weight_ends[config.targets] =
        (config.targets == 0 ? 0 : config.weight_ends[config.targets - 1]) + weight;
    config.offsets[++config.targets] = at + (size_t)len;
    if ((size_t)len > config.request_max) {
        config.request_max = (size_t)len;
    }
    config.head = strcmp(method, "HEAD") == 0;
}

/* -U FILE: one 'PATH [WEIGHT]' a line; blank lines, and anything from a # on, are skipped. */
static void add_targets(const char *file, const char *method, const char *headers, const char *body)
{
    FILE *in = fopen(file, "r");
    char line[8192];
    unsigned long number = 0;

    if (in == NULL) {
        die_usage("-U '%s': %s", file, strerror(errno));
    }
    while (fgets(line, sizeof(line), in) != NULL) {
        number++;
        size_t len = strlen(line);
        if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
            die_usage("-U %s line %lu: longer than %zu bytes", file, number, sizeof(line) - 2);
        }
        char *save = NULL;
        char *comment = strchr(line, '#'); /* a request target has no # */
        if (comment != NULL) {
            *comment = '\0';
        }
        char *path = strtok_r(line, " \t\r\n", &save);
        char *weight = path ? strtok_r(NULL, " \t\r\n", &save) : NULL;
        if (path == NULL) {
            continue;
        }
        if (path[0] != '/' || strtok_r(NULL, " \t\r\n", &save) != NULL) {
            die_usage("-U %s line %lu: want 'PATH [WEIGHT]' with PATH starting with /", file,
                      number);
        }
        if (has_control(path)) {
            die_usage("-U %s line %lu: a control character in the path", file, number);
        }
        char what[64];
        snprintf(what, sizeof(what), "-U line %lu's WEIGHT", number);
        add_request(method, path, headers, body,
                    weight == NULL ? 1 : parse_count(weight, what, 1, 1000000));
    }
    fclose(in);
    if (config.targets == 0) {
        die_usage("-U %s: no paths in it", file);
    }
}

static void parse_sources(const char *list)
{
    char *copy = strdup(list);
    char *save = NULL;

    for (char *item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        socklen_t len;
        if (config.source_count == SOURCES_MAX) {
            die_usage("at most 64 source addresses, not more as in '%s'", list);
        }
        if (sxe_address_parse(item, 0, &config.sources[config.source_count], &len) < 0) {
            die_usage("-s '%s': not an IPv4 or IPv6 address", item);
        }
        config.source_len = len;
        config.source_count++;
    }
    free(copy);
}

/* What the options say that is not in config itself. */
struct parsed {
    const char *ip, *method, *path, *body, *file, *targets;
    bool url_path; /* path is a URL's */
    bool pipeline_set;
    bool tls, tls_resume;
    char headers[8192];
    size_t headers_len;
    long port;
};

/* One option of getopt_long's, into config or parsed: a case per option, hence its length. */
static void take_option(int option, struct parsed *parsed)
{
    switch (option) {
    case 'i':
        parsed->ip = optarg;
        break;
    case 'p':
        parsed->port = (long)parse_count(optarg, "-p PORT", 1, 65535);
        break;
    case 'n':
        config.queries = parse_count(optarg, "-n QUERIES", 1, 1ULL << 40);
        break;
    case 'c':
        config.connections = parse_count(optarg, "-c CONNECTIONS", 1, 10000000);
        break;
    case 'd':
        config.duration_ns = parse_count(optarg, "-d SECONDS", 1, 86400) * SXE_NS_PER_SEC;
        break;
    case 'P':
        config.pipeline = (unsigned)parse_count(optarg, "-P DEPTH", 1, PIPELINE_MAX);
        parsed->pipeline_set = true;
        break;
    case 'R':
        config.rate = (double)parse_count(optarg, "-R RATE", 1, 100000000);
        break;
    case 'U':
        parsed->targets = optarg;
        break;
    case 'X':
        config.random = true;
        break;
    case 'T':
        config.timeline = true;
        break;
    case 'K':
        config.tick_ns = parse_count(optarg, "--tick USEC", 1, 100000) * SXE_NS_PER_USEC;
        break;
    case 'L':
        config.latency_log = optarg;
        break;
    case '0':
        config.http10 = true;
        break;
    case 'M':
        config.warmup_ns = parse_count(optarg, "--warmup SECONDS", 0, 3600) * SXE_NS_PER_SEC;
        config.marks = true;
        break;
    case 'm':
        parsed->method = optarg;
        break;
    case 'u':
        if (has_control(optarg)) {
            die_usage("-u '%s': a space or a control character in the path", optarg);
        }
        parsed->path = optarg;
        break;
    case 'H':
        if (parsed->headers_len + strlen(optarg) + 3 > sizeof(parsed->headers)) {
            die_usage("too many request headers, at '%s'", optarg);
        }
        parsed->headers_len +=
            (size_t)snprintf(parsed->headers + parsed->headers_len,
                             sizeof(parsed->headers) - parsed->headers_len, "%s\r\n", optarg);
        break;
    case 'b':
        parsed->body = optarg;
        break;
    case 'f':
        parsed->file = optarg;
        break;
    case 's':
        parse_sources(optarg);
        break;
    case 'w':
        config.workers = (unsigned)parse_count(optarg, "-w WORKERS", 1, WORKERS_MAX);
        break;
    case 't':
        config.timeout_ns = parse_count(optarg, "-t SECONDS", 1, 3600) * SXE_NS_PER_SEC;
        break;
    case 'r':
        config.ramp_batch = (unsigned)parse_count(optarg, "-r BATCH", 1, 1000000);
        break;
    case 'e':
        config.expect_status = (int)parse_count(optarg, "-e STATUS", 100, 599);
        break;
    case 'Y':
        config.expect_length = (int64_t)parse_count(optarg, "--body-length BYTES", 0, 1ULL << 40);
        break;
    case 'B':
        expect_body(optarg);
        break;
    case 'v':
        config.verbose = true;
        break;
    case 'g':
        config.graceful_close = true;
        break;
    case 'J':
        config.json = true;
        break;
    case 'S':
        parsed->tls = true;
        break;
    case 'E':
        parsed->tls = parsed->tls_resume = true;
        break;
    case 'W':
        if (optarg[0] != '/' || strpbrk(optarg, " \r\n") != NULL) {
            die_usage("--ws '%s': a path starts with / and has no spaces", optarg);
        }
        config.ws_path = optarg;
        break;
    case 'Z':
        config.ws_size = parse_count(optarg, "--ws-size BYTES", 0, 16 << 20);
        break;
    case 'h':
        usage(stdout);
        exit(0);
    case 'V':
        printf("sxe-http %s (libsxe %s)\n", SXE_VERSION, sxe_version());
        exit(0);
    default:
        usage(stderr);
        exit(2);
    }
}

/* A URL instead of -i and -p: its address, its Host, its path, and https's TLS. */
static void take_url(const char *text, struct parsed *parsed)
{
    static struct url url; /* its path is the requests' */
    const char *why;

    if (parsed->ip != NULL || parsed->port >= 0) {
        die_usage("a URL or -i and -p, not both: '%s'", text);
    }
    parse_url(text, &url);
    if (url.error != NULL) {
        die_usage("URL '%s': %s", text, url.error);
    }
    if (resolve_url(&url, &config.target, &config.target_len, &why) < 0) {
        die_usage("URL '%s': cannot find %s: %s", text, url.host, why);
    }
    if (parsed->path != NULL && strcmp(url.path, "/") != 0) {
        die_usage("-u '%s' and the URL's path '%s': give one", parsed->path, url.path);
    }
    if (parsed->path == NULL && strcmp(url.path, "/") != 0) {
        parsed->path = url.path;
        parsed->url_path = true;
    }
    parsed->tls |= url.tls;
    snprintf(config.host_header, sizeof(config.host_header), "%s", url.authority);
}

void parse_options(int argc, char **argv)
{
    static const struct option long_options[] = {{"json", no_argument, NULL, 'J'},
                                                 {"ws", required_argument, NULL, 'W'},
                                                 {"ws-size", required_argument, NULL, 'Z'},
                                                 {"body-length", required_argument, NULL, 'Y'},
                                                 {"body", required_argument, NULL, 'B'},
                                                 {"help", no_argument, NULL, 'h'},
                                                 {"version", no_argument, NULL, 'V'},
                                                 {"random", no_argument, NULL, 'X'},
                                                 {"timeline", no_argument, NULL, 'T'},
                                                 {"tick", required_argument, NULL, 'K'},
                                                 {"latency-log", required_argument, NULL, 'L'},
                                                 {"warmup", required_argument, NULL, 'M'},
                                                 {"http1.0", no_argument, NULL, '0'},
                                                 {"tls", no_argument, NULL, 'S'},
                                                 {"tls-resume", no_argument, NULL, 'E'},
                                                 {NULL, 0, NULL, 0}};
    struct parsed parsed = {.method = "GET", .port = -1};
    int option;

    while ((option = getopt_long(argc, argv, "i:p:n:c:d:P:R:m:u:U:H:b:f:s:w:t:r:e:gvh",
                                 long_options, NULL)) != -1) {
        take_option(option, &parsed);
    }
    if (optind + 1 < argc) {
        die_usage("unexpected argument '%s' (one URL at most)", argv[optind + 1]);
    }
    if (optind < argc) {
        take_url(argv[optind], &parsed);
    } else if (parsed.ip == NULL || parsed.port < 0) {
        die_usage("%s", "-i IP and -p PORT, or a URL, are required");
    } else if (sxe_address_parse(parsed.ip, (int)parsed.port, &config.target, &config.target_len) <
               0) {
        die_usage("-i '%s': not an IPv4 or IPv6 address", parsed.ip);
    }
    char host[INET6_ADDRSTRLEN];
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)&config.target;
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&config.target;
    bool is_v6 = config.target.ss_family == AF_INET6;
    inet_ntop(config.target.ss_family, is_v6 ? (const void *)&v6->sin6_addr : &v4->sin_addr, host,
              sizeof(host));
    snprintf(config.target_text, sizeof(config.target_text), is_v6 ? "[%s]:%d" : "%s:%d", host,
             sxe_address_port((const struct sockaddr *)&config.target));
    if (config.host_header[0] == '\0') {
        snprintf(config.host_header, sizeof(config.host_header), "%s", config.target_text);
    }
    if (config.rate > 0 && !parsed.pipeline_set) {
        config.pipeline = RATE_CAP;
    }
    if (config.http10 && (config.rate > 0 || config.pipeline > 1 || config.ws_path != NULL)) {
        die_usage("%s", "--http1.0 sends one request a connection: not with -R, -P or --ws");
    }
    if (config.marks && config.duration_ns == 0) {
        die_usage("%s", "--warmup comes before a measured window of -d SECONDS: give -d");
    }
    if (config.random && parsed.targets == NULL) {
        die_usage("%s", "--random draws from the paths of -U FILE: give -U");
    }
    if (parsed.targets != NULL &&
        (parsed.path != NULL || parsed.file != NULL || config.ws_path != NULL)) {
        die_usage("-U FILE gives the paths: not with %s", parsed.url_path ? "a URL's path"
                                                          : parsed.path   ? "-u"
                                                          : parsed.file   ? "-f"
                                                                          : "--ws");
    }
    if (parsed.url_path && (parsed.file != NULL || config.ws_path != NULL)) {
        die_usage("%s gives the request: not with a URL's path", parsed.file ? "-f" : "--ws");
    }
    struct sxe_tls_client_options tls = {.no_verify = true, .no_resume = !parsed.tls_resume};
    if (parsed.tls && sxe_tls_client_create(&config.tls, &tls) < 0) {
        die_usage("%s", "--tls: this sxe-http has no TLS (built without OpenSSL)");
    }
    if (config.ws_path != NULL) {
        /* A query is a binary message; the request's length bounds what one queues (its frame). */
        config.request_max = config.ws_size + 14;
        config.requests = calloc(1, config.request_max);
        return;
    }
    if (parsed.file != NULL) {
        size_t len;
        config.requests = read_file(parsed.file, &len, "the request file");
        config.head = strncmp(config.requests, "HEAD ", 5) == 0;
        config.offsets = calloc(2, sizeof(size_t));
        config.weight_ends = calloc(1, sizeof(uint64_t));
        config.offsets[1] = config.request_max = len;
        config.weight_ends[0] = config.targets = 1;
    } else if (parsed.targets != NULL) {
        add_targets(parsed.targets, parsed.method, parsed.headers, parsed.body);
    } else {
        add_request(parsed.method, parsed.path ? parsed.path : "/", parsed.headers, parsed.body, 1);
    }
    if (config.request_max == 0) {
        die_usage("%s", "the request is empty");
    }
}
