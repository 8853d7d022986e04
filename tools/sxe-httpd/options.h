/*
 * sxe-httpd's configuration: the command line and the configuration file (--config), read once at
 * start (options.c).
 */
#ifndef SXE_HTTPD_OPTIONS_H
#define SXE_HTTPD_OPTIONS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sxe/workers.h>

#include "proxy.h"

#define HTTPD_TLS_NAMES 64 /* --tls NAME=CERT,KEY given at most this often */

/* --tls NAME=CERT,KEY[,OCSP], cut into its parts (in argv's own text). */
struct httpd_tls_name {
    const char *name;
    const char *certificate;
    const char *key;
    const char *ocsp; /* or NULL */
};

struct httpd_config {
    const char *listen;
    const char *https;    /* --https: an HTTPS listener beside --listen, or NULL */
    bool redirect_https;  /* --redirect-https: plain requests are sent to the HTTPS listener */
    int https_port;       /* --https's port, for --redirect-https's Location */
    const char *tls_cert; /* --tls-cert, --tls-key: with them, --listen (or --https) is HTTPS */
    const char *tls_key;
    struct httpd_tls_name tls_names[HTTPD_TLS_NAMES];
    unsigned tls_name_count;
    bool tls_no_tickets;        /* --tls-no-tickets */
    const char *tls_ticket_key; /* --tls-ticket-key FILE */
    const char *tls_client_ca;  /* --tls-client-ca FILE: clients must show a certificate */
    bool tls_client_optional;   /* --tls-client-optional: ... or none */
    const char *tls_ocsp;       /* --tls-ocsp FILE: stapled */
    bool precompressed;         /* --precompressed: FILE.br, FILE.zst, FILE.gz beside FILE */
    int gzip;                   /* --gzip LEVEL: 1-9, or 0 for none */
    int brotli;                 /* --brotli LEVEL: 1-11, or 0 for none */
    uint64_t compress_min;      /* --compress-min BYTES */
    const char *metrics;        /* --metrics PATH, or NULL */
    uint32_t connections;
    unsigned workers; /* 0 until given: the CPUs */
    enum sxe_workers_kind kind;
    enum sxe_workers_spread spread;
    unsigned listen_flags;
    unsigned header_timeout;        /* seconds; 0: the module's 10 */
    unsigned idle_timeout;          /* seconds; 0: the module's 60 */
    unsigned write_timeout;         /* seconds; 0: the module's 30 */
    unsigned body_rate;             /* bytes a second; 0: the module's 4096 */
    struct sxe_http2_options http2; /* --http2-streams, --http2-window, --no-http2 */
    size_t log_buffer;              /* --access-log-buffer: bytes; 0: a write per line */
    int cache;           /* 1: one file cache for every worker thread; 0: one each; -1: not said */
    const char *file;    /* -c, --config FILE, or NULL */
    const char *control; /* --control PATH: the control socket, or NULL */
    bool test;           /* -t, --test: check the configuration and exit */
    struct proxy_options proxy;
    uint64_t proxy_max_body; /* bytes; 0: no limit */
};

extern struct httpd_config config;

/* Reads the configuration file (--config) and then the command line into config and the hosts
 * (hosts.h), opening the access logs: the command line's values override the file's (its
 * repeated options, --proxy, --header and --tls, and its hosts add to the file's). Exits on --help,
 * --version (0), a wrong option (2), a wrong file, or a root or log that cannot be opened (1),
 * saying why (a file's mistake at its line). */
void options_parse(int argc, char **argv);

#endif
