/*
 * The resolver's private half (src/dns/): what resolve.c and its stand-in, resolve_none.c, share.
 */
#ifndef SXE_DNS_H
#define SXE_DNS_H

#include <stdint.h>

#include "sxe/resolve.h"

/*
 * Reads a name as sxe_resolve() takes it: a numeric IPv4 or IPv6 address, or localhost, fills
 * numeric (with port) and gives 0; a host name is copied in lowercase, without a trailing dot, to
 * lower (SXE_RESOLVE_NAME_MAX + 1 bytes), and gives 1; anything else gives -EINVAL.
 */
int sxe__resolve_name(const char *name, uint16_t port, char *lower,
                      union sxe_resolved_address *numeric);

/* A lowercase name's hash, for the cache. */
uint64_t sxe__resolve_hash(const char *lower);

/* Sets port (host order) on each of an answer's addresses. */
void sxe__resolved_set_port(struct sxe_resolved *answer, uint16_t port);

#endif
