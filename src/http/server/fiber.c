/*
 * Fiber routes (SXE_HTTP_ROUTE_FIBER): the request is held (request.c) and its handler runs on a
 * fiber of the server's pool, so it may sleep, or wait for a client's answer, between reading the
 * request and answering it, while the loop serves everything else. A handler that returns without
 * answering is answered 500, as a plain handler is.
 */
#define SXE_LOG_MODULE http_log
#include "sxe/log.h"

#include "server.h"

static struct sxe_log_module http_log = SXE_LOG_MODULE_INIT(HTTP);

int sxe__http_fibers_make(sxe_http_server_t *server)
{
    return sxe_fibers_create(&server->fibers, server->loop, &server->config.fiber_options);
}

static void run(void *arg)
{
    sxe_http_t *held = arg;
    uint64_t serial = held->serial;
    const struct route *route = held->route;

    route->handler(held, route->arg);
    if (held->serial != serial || sxe__http_defer_check(held) < 0) {
        return; /* answered (its slot may hold another request by now), or cancelled */
    }
    if (held->status == 0) {
        SXE_LOG_ERROR("the fiber handler for %.*s returned without answering; answering 500",
                      (int)held->request->target_len, held->request->target);
        held->keep_alive = false;
        (void)sxe_http_respond(held, 500, "text/plain", "500 Internal Server Error\n", 26);
    } else if (!held->finished) {
        (void)sxe_http_finish(held);
    }
}

bool sxe__http_run_fiber(sxe_http_server_t *server, sxe_http_t *http, const struct route *route)
{
    sxe_http_t *held = http;

    /* The pool was made with the first fiber route, or with a worker's copy of the server. */
    if (sxe_http_defer(http, NULL, NULL) < 0) {
        sxe_http_respond(http, 503, "text/plain", "503 Service Unavailable\n", 24);
        return false;
    }
    held->route = route;
    if (sxe_fiber_start(server->fibers, run, held, NULL) < 0) { /* every fiber is busy: said */
        (void)sxe_http_respond(held, 503, "text/plain", "503 Service Unavailable\n", 24);
    }
    return true;
}
