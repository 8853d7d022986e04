/*
 * A handler that waits, written as sequential code: it runs on a fiber of its own, sleeps (as it
 * would wait for a database or another service), then answers, while the loop serves everyone
 * else. 10,000 requests at once, each waiting 100 ms, all finish in about 100 ms.
 *
 *     http-fiber [IP:PORT [SLEEP_MS]]        (127.0.0.1:8080, 100)
 */
#include <stdio.h>
#include <stdlib.h>
#include <sxe/sxe.h>

static uint64_t sleep_ns = 100 * SXE_NS_PER_MSEC;

static void hello(sxe_http_t *http, void *arg)
{
    (void)arg;
    if (sleep_ns > 0) {
        sxe_fiber_sleep(sleep_ns); /* the loop serves others meanwhile */
    }
    sxe_http_respond(http, 200, "text/plain", "Hello World\n", 12);
}

int main(int argc, char **argv)
{
    struct sxe_http_server_options options = {.loop = {.connections = 10000},
                                              .deferred = 10000,
                                              .fibers = 10000,
                                              .fiber_stack_size = 32768};
    const char *address = argc > 1 ? argv[1] : "127.0.0.1:8080";
    sxe_http_server_t *server = NULL;

    if (argc > 2) {
        sleep_ns = strtoull(argv[2], NULL, 10) * SXE_NS_PER_MSEC;
    }
    int rc;
    if ((rc = sxe_http_server_create(&server, NULL, &options)) < 0 ||
        (rc = sxe_http_server_route(server, "GET", "/", SXE_HTTP_ROUTE_FIBER, hello, NULL)) < 0 ||
        (rc = sxe_http_server_listen(server, address)) < 0) {
        fprintf(stderr, "http-fiber: cannot serve on %s: %s\n", address, sxe_strerror(rc));
    } else {
        rc = sxe_http_server_run(server);
    }
    sxe_http_server_destroy(server);
    return rc < 0;
}
