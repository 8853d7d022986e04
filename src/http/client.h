/* The HTTP client's internals shared by client.c and client_fiber.c. */
#pragma once

#include "sxe/http_client.h"

/* From a gathered call's done callback: the memory holding its head and body, now the caller's
 * (free() it). */
char *sxe__http_call_take_store(sxe_http_call_t *call);
