/*
 * A scripted DNS server for the tests, on 127.0.0.1, UDP and TCP on one port, in a thread: it
 * answers by the name asked (see dns_server.c for the names it knows) and counts the questions.
 */
#ifndef SXE_TEST_DNS_SERVER_H
#define SXE_TEST_DNS_SERVER_H

#include <stdbool.h>
#include <stdint.h>

struct dns_server;

/* Starts it (or exits 1); servers is "127.0.0.1:PORT", for sxe_resolver_options.servers. */
struct dns_server *dns_server_start(char servers[32]);

/* Questions it was asked (A and AAAA count apart) for names that begin with prefix. */
unsigned dns_server_asked(struct dns_server *server, const char *prefix);

/* What "moving.test" answers from now: 10.9.0.last. */
void dns_server_move(struct dns_server *server, unsigned last);

void dns_server_stop(struct dns_server *server);

/* A name of /etc/hosts other than localhost (the host's own, as containers have) and its address,
 * if there is one: c-ares answers it from the file, and asks no server. */
bool dns_hosts_name(char name[64], char ip[64]);

#endif
