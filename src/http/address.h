/* Addresses for the HTTP server and client. */
#pragma once

#include <sys/socket.h>

/* Parses "a.b.c.d:port" or "[v6]:port". @return 0 or -EINVAL. */
int sxe__http_parse_address(const char *text, struct sockaddr_storage *address, socklen_t *len);
