/*
 * Server-sent events: GET /events holds its request and streams one event a second to every
 * subscriber, from one timer, until each client leaves; a client that leaves is told to the
 * program (on_cancel), which forgets it. Try: curl -N http://127.0.0.1:8080/events
 *
 *     sse [IP:PORT [INTERVAL_MS]]        (127.0.0.1:8080, 1000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <sxe/sxe.h>

#define SUBSCRIBERS_MAX 256

static sxe_http_t *subscribers[SUBSCRIBERS_MAX];
static unsigned long ticks;

static void forget(sxe_http_t *held, void *arg)
{
    (void)held;
    subscribers[(uintptr_t)arg] = NULL;
}

static void subscribe(sxe_http_t *http, void *arg)
{
    uintptr_t slot = 0;

    (void)arg;
    while (slot < SUBSCRIBERS_MAX && subscribers[slot] != NULL) {
        slot++;
    }
    if (slot == SUBSCRIBERS_MAX || sxe_http_defer(http, forget, (void *)slot) < 0) {
        sxe_http_respond(http, 503, "text/plain", "too many subscribers\n", 21);
        return;
    }
    subscribers[slot] = http;
    if (sxe_http_start(http, 200, "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n",
                       -1) < 0) {
        subscribers[slot] = NULL; /* the client went away: its hold is gone */
    }
}

static void tick(sxe_timer_t *timer, void *arg)
{
    char event[64];
    int len = snprintf(event, sizeof(event), "data: tick %lu\n\n", ++ticks);

    (void)timer;
    (void)arg;
    for (unsigned i = 0; i < SUBSCRIBERS_MAX; i++) {
        if (subscribers[i] != NULL) {
            if (sxe_http_send(subscribers[i], event, (size_t)len) < 0) {
                subscribers[i] = NULL; /* gone, or too slow to keep up: its connection closes */
            }
        }
    }
}

int main(int argc, char **argv)
{
    uint64_t interval = (argc > 2 ? strtoull(argv[2], NULL, 10) : 1000) * SXE_NS_PER_MSEC;
    struct sxe_http_server_options options = {.deferred = SUBSCRIBERS_MAX};
    const char *address = argc > 1 ? argv[1] : "127.0.0.1:8080";
    sxe_http_server_t *server = NULL;
    sxe_timer_t timer;
    int rc;

    if ((rc = sxe_http_server_create(&server, NULL, &options)) < 0 ||
        (rc = sxe_http_server_route(server, "GET", "/events", 0, subscribe, NULL)) < 0 ||
        (rc = sxe_http_server_listen(server, address)) < 0) {
        fprintf(stderr, "sse: cannot serve on %s: %s\n", address, sxe_strerror(rc));
    } else {
        sxe_timer_init(&timer, tick, NULL);
        if ((rc = sxe_timer_start(sxe_http_server_loop(server), &timer, interval, interval)) == 0) {
            rc = sxe_http_server_run(server);
        }
    }
    sxe_http_server_destroy(server);
    return rc < 0;
}
