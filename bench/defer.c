/*
 * The cost of answering later: HTTP Hello World answered by the handler (direct), or held with
 * sxe_http_defer() and answered from a timer of 0 ms on the loop's next turn (deferred). For
 * bench/ab.py:
 *
 *     bench/ab.py "direct=build/release/bench/defer {port} direct" \
 *                 "deferred=build/release/bench/defer {port} deferred"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sxe/sxe.h>

#define HELD_MAX 1024

static struct later {
    sxe_http_t *held;
    sxe_timer_t timer;
    struct later *next_free;
} laters[HELD_MAX], *free_laters;
static sxe_loop_t *loop;

static void hello(sxe_http_t *http, void *arg)
{
    (void)arg;
    sxe_http_respond(http, 200, "text/plain", "Hello World\n", 12);
}

static void answer(sxe_timer_t *timer, void *arg)
{
    struct later *later = arg;

    (void)timer;
    sxe_http_respond(later->held, 200, "text/plain", "Hello World\n", 12);
    later->next_free = free_laters;
    free_laters = later;
}

static void hold(sxe_http_t *http, void *arg)
{
    struct later *later = free_laters;

    (void)arg;
    if (later == NULL || sxe_http_defer(http, NULL, NULL) < 0) {
        sxe_http_respond(http, 503, "text/plain", "busy\n", 5);
        return;
    }
    later->held = http;
    free_laters = later->next_free;
    if (sxe_timer_start(loop, &later->timer, 0, 0) < 0) {
        answer(&later->timer, later);
    }
}

int main(int argc, char **argv)
{
    struct sxe_http_server_options options = {.loop = {.connections = 10000}, .deferred = HELD_MAX};
    sxe_http_server_t *server;
    char address[64];
    bool deferred = argc > 2 && strcmp(argv[2], "deferred") == 0;

    snprintf(address, sizeof(address), "127.0.0.1:%s", argc > 1 ? argv[1] : "8080");
    for (int i = 0; i < HELD_MAX; i++) {
        sxe_timer_init(&laters[i].timer, answer, &laters[i]);
        laters[i].next_free = free_laters;
        free_laters = &laters[i];
    }
    if (sxe_http_server_create(&server, NULL, &options) < 0 ||
        sxe_http_server_route(server, "GET", "/", 0, deferred ? hold : hello, NULL) < 0 ||
        sxe_http_server_listen(server, address) < 0) {
        return 1;
    }
    loop = sxe_http_server_loop(server);
    int rc = sxe_http_server_run(server);
    sxe_http_server_destroy(server);
    return rc < 0;
}
