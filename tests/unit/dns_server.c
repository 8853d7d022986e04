/*
 * The tests' DNS server (dns_server.h). Names it knows, A and AAAA:
 *   a.test        A 127.0.0.1 (TTL 60), no AAAA          six.test   AAAA ::1, no A
 *   other.test    as a.test (the name of tls_test.h's other certificate)
 *   both.test     A 127.0.0.1 and AAAA ::1                many.test  100 A, 10.0.0.1 to .100
 *   moving.test   A 10.9.0.N (TTL 1), N as dns_server_move() last set it (1 at the start)
 *   trunc.test    over UDP a truncated answer (TC, no records); over TCP A 127.0.0.3
 *   wrong.test    an answer for another name               silent.test  no answer at all
 *   fail.test     SERVFAIL                                 anything else: NXDOMAIN
 */
#include "dns_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LOG_MAX 1024

struct dns_server {
    int udp, tcp, stop[2];
    pthread_t thread;
    pthread_mutex_t lock;
    unsigned moving;
    unsigned count;
    char asked[LOG_MAX][64];
};

/* Reads the question's name (dotted, lowercase, 255 bytes with the NUL at most) at 12; @return
 * the offset after its class. */
static size_t question(const uint8_t *q, size_t len, char *name, uint16_t *type)
{
    size_t at = 12, out = 0;

    while (at < len && q[at] != 0 && out < 255) {
        unsigned n = q[at++];
        for (unsigned i = 0; i < n && at < len && out < 255; i++) {
            char c = (char)q[at++];
            name[out++] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
        }
        name[out++] = '.';
    }
    name[out > 0 ? out - 1 : 0] = '\0';
    *type = (uint16_t)(q[at + 1] << 8 | q[at + 2]);
    return at + 5;
}

static size_t put16(uint8_t *p, size_t at, unsigned v)
{
    p[at] = (uint8_t)(v >> 8);
    p[at + 1] = (uint8_t)v;
    return at + 2;
}

/* One answer record, its name a pointer to the question's. */
static size_t record(uint8_t *r, size_t at, uint16_t type, uint32_t ttl, const void *data,
                     size_t len)
{
    at = put16(r, at, 0xC00C);
    at = put16(r, at, type);
    at = put16(r, at, 1);
    at = put16(r, at, ttl >> 16);
    at = put16(r, at, ttl & 0xFFFF);
    at = put16(r, at, (unsigned)len);
    memcpy(r + at, data, len);
    return at + len;
}

/* The answer to q (len bytes) into r; @return its length, 0 for none. */
static size_t answer(struct dns_server *server, const uint8_t *q, size_t len, uint8_t *r, bool tcp)
{
    char name[256];
    uint16_t type;
    size_t end = question(q, len, name, &type);
    unsigned count = 0, rcode = 0, tc = 0;
    struct in_addr a;
    struct in6_addr six;

    pthread_mutex_lock(&server->lock);
    if (server->count < LOG_MAX) {
        snprintf(server->asked[server->count++], 64, "%.63s", name);
    }
    unsigned moving = server->moving;
    pthread_mutex_unlock(&server->lock);
    if (end > len || strcmp(name, "silent.test") == 0) {
        return 0;
    }
    memcpy(r, q, end);
    size_t at = end;
    inet_pton(AF_INET6, "::1", &six);
    if ((strcmp(name, "a.test") == 0 || strcmp(name, "other.test") == 0) && type == 1) {
        inet_pton(AF_INET, "127.0.0.1", &a);
        at = record(r, at, 1, 60, &a, 4), count = 1;
    } else if ((strcmp(name, "six.test") == 0 || strcmp(name, "both.test") == 0) && type == 28) {
        at = record(r, at, 28, 60, &six, 16), count = 1;
    } else if (strcmp(name, "both.test") == 0 && type == 1) {
        inet_pton(AF_INET, "127.0.0.1", &a);
        at = record(r, at, 1, 60, &a, 4), count = 1;
    } else if (strcmp(name, "many.test") == 0 && type == 1) {
        for (count = 0; count < 100; count++) {
            uint8_t ip[4] = {10, 0, 0, (uint8_t)(count + 1)};
            at = record(r, at, 1, 60, ip, 4);
        }
    } else if (strcmp(name, "moving.test") == 0 && type == 1) {
        uint8_t ip[4] = {10, 9, 0, (uint8_t)moving};
        at = record(r, at, 1, 1, ip, 4), count = 1;
    } else if (strcmp(name, "trunc.test") == 0 && type == 1) {
        if (tcp) {
            inet_pton(AF_INET, "127.0.0.3", &a);
            at = record(r, at, 1, 60, &a, 4), count = 1;
        } else {
            tc = 0x02;
        }
    } else if (strcmp(name, "wrong.test") == 0) {
        memcpy(r + 13, "X", 1); /* "xrong.test": another name */
    } else if (strcmp(name, "fail.test") == 0) {
        rcode = 2;
    } else if (strcmp(name, "a.test") != 0 && strcmp(name, "other.test") != 0 &&
               strcmp(name, "six.test") != 0 && strcmp(name, "many.test") != 0 &&
               strcmp(name, "moving.test") != 0 && strcmp(name, "trunc.test") != 0 &&
               strcmp(name, "both.test") != 0) {
        rcode = 3; /* NXDOMAIN */
    }
    r[2] = (uint8_t)(0x80 | tc | (q[2] & 0x01)); /* QR, TC, RD as asked */
    r[3] = (uint8_t)(0x80 | rcode);              /* RA */
    put16(r, 6, count);
    put16(r, 8, 0);
    put16(r, 10, 0);
    return at;
}

static void serve_tcp(struct dns_server *server, int fd)
{
    uint8_t q[512], r[4096];
    ssize_t got = 0, n;

    while ((n = read(fd, q + got, sizeof(q) - (size_t)got)) > 0) {
        got += n;
        while (got >= 2 && got >= 2 + (q[0] << 8 | q[1])) {
            size_t qlen = (size_t)(q[0] << 8 | q[1]);
            size_t rlen = answer(server, q + 2, qlen, r + 2, true);
            if (rlen > 0) {
                put16(r, 0, (unsigned)rlen);
                (void)!write(fd, r, rlen + 2);
            }
            memmove(q, q + 2 + qlen, (size_t)got - 2 - qlen);
            got -= 2 + (ssize_t)qlen;
        }
    }
    close(fd);
}

static void *serve(void *arg)
{
    struct dns_server *server = arg;
    struct pollfd fds[3] = {{.fd = server->udp, .events = POLLIN},
                            {.fd = server->tcp, .events = POLLIN},
                            {.fd = server->stop[0], .events = POLLIN}};

    while (poll(fds, 3, -1) >= 0 && fds[2].revents == 0) {
        if (fds[0].revents & POLLIN) {
            uint8_t q[512], r[4096];
            struct sockaddr_storage from;
            socklen_t from_len = sizeof(from);
            ssize_t n = recvfrom(server->udp, q, sizeof(q), 0, (struct sockaddr *)&from, &from_len);
            size_t rlen = n >= 12 ? answer(server, q, (size_t)n, r, false) : 0;
            if (rlen > 0) {
                (void)sendto(server->udp, r, rlen, 0, (struct sockaddr *)&from, from_len);
            }
        }
        if (fds[1].revents & POLLIN) {
            int fd = accept(server->tcp, NULL, NULL);
            if (fd >= 0) {
                serve_tcp(server, fd);
            }
        }
    }
    return NULL;
}

/* UDP and TCP sockets bound to one free port of 127.0.0.1. */
static int bind_both(struct dns_server *server)
{
    for (int attempt = 0; attempt < 50; attempt++) {
        struct sockaddr_in addr = {.sin_family = AF_INET,
                                   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(addr);
        server->udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        server->tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (bind(server->udp, (struct sockaddr *)&addr, len) == 0 &&
            getsockname(server->udp, (struct sockaddr *)&addr, &len) == 0 &&
            bind(server->tcp, (struct sockaddr *)&addr, len) == 0 && listen(server->tcp, 8) == 0) {
            return ntohs(addr.sin_port);
        }
        close(server->udp);
        close(server->tcp);
    }
    return -1;
}

struct dns_server *dns_server_start(char servers[32])
{
    struct dns_server *server = calloc(1, sizeof(*server));
    int port;

    if (server == NULL || (port = bind_both(server)) < 0 || pipe(server->stop) != 0) {
        fprintf(stderr, "cannot start the test's DNS server\n");
        exit(1);
    }
    server->moving = 1;
    pthread_mutex_init(&server->lock, NULL);
    snprintf(servers, 32, "127.0.0.1:%d", port);
    pthread_create(&server->thread, NULL, serve, server);
    return server;
}

unsigned dns_server_asked(struct dns_server *server, const char *prefix)
{
    unsigned n = 0;

    pthread_mutex_lock(&server->lock);
    for (unsigned i = 0; i < server->count; i++) {
        n += strncmp(server->asked[i], prefix, strlen(prefix)) == 0;
    }
    pthread_mutex_unlock(&server->lock);
    return n;
}

void dns_server_move(struct dns_server *server, unsigned last)
{
    pthread_mutex_lock(&server->lock);
    server->moving = last;
    pthread_mutex_unlock(&server->lock);
}

void dns_server_stop(struct dns_server *server)
{
    (void)!write(server->stop[1], "x", 1);
    pthread_join(server->thread, NULL);
    close(server->udp);
    close(server->tcp);
    close(server->stop[0]);
    close(server->stop[1]);
    pthread_mutex_destroy(&server->lock);
    free(server);
}

/* A name of /etc/hosts other than localhost (the host's own, as containers have), if any. */
bool dns_hosts_name(char name[64], char ip[64])
{
    FILE *hosts = fopen("/etc/hosts", "r");
    char line[512];
    bool found = false;

    while (hosts != NULL && !found && fgets(line, sizeof(line), hosts) != NULL) {
        char *save, *address = strtok_r(line, " \t\n", &save), *host;
        while (address != NULL && address[0] != '#' && strchr(address, '.') != NULL &&
               (host = strtok_r(NULL, " \t\n", &save)) != NULL && host[0] != '#') {
            if (strcmp(host, "localhost") != 0 && strlen(host) < 64) {
                strcpy(name, host), strcpy(ip, address), found = true;
                break;
            }
        }
    }
    if (hosts != NULL) {
        fclose(hosts);
    }
    return found;
}
