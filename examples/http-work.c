/*
 * Blocking work off the loop: GET /resolve?name=HOST looks HOST up with getaddrinfo, which blocks
 * (it reads /etc/hosts and may ask DNS), on a thread of a work pool. The handler runs on a fiber
 * and reads as a plain call; the loop serves everyone else meanwhile, as GET / shows.
 *
 *     http-work [IP:PORT]        (127.0.0.1:8080)
 *     curl 'http://127.0.0.1:8080/resolve?name=localhost'
 */
#include <netdb.h>
#include <stdio.h>
#include <sxe/sxe.h>

static sxe_work_pool_t *pool;

struct lookup {
    char name[256];
    char answer[1024];
    int len;
    int status;
};

static void resolve(void *arg) /* on a pool thread: it may block */
{
    struct lookup *lookup = arg;
    struct addrinfo *found, hints = {.ai_socktype = SOCK_STREAM};
    int rc = getaddrinfo(lookup->name, NULL, &hints, &found);

    if (rc != 0) {
        lookup->status = 404;
        lookup->len = snprintf(lookup->answer, sizeof(lookup->answer), "%s\n", gai_strerror(rc));
        return;
    }
    lookup->status = 200;
    for (struct addrinfo *at = found; at != NULL && lookup->len < 900; at = at->ai_next) {
        char host[NI_MAXHOST];
        if (getnameinfo(at->ai_addr, at->ai_addrlen, host, sizeof(host), NULL, 0, NI_NUMERICHOST) ==
            0) {
            lookup->len += snprintf(lookup->answer + lookup->len, 100, "%.98s\n", host);
        }
    }
    freeaddrinfo(found);
}

static void lookup_route(sxe_http_t *http, void *arg) /* on a fiber */
{
    struct lookup lookup = {.len = 0};

    (void)arg;
    if (sxe_http_query_param(http, "name", lookup.name, sizeof(lookup.name)) <= 0) {
        sxe_http_respond(http, 400, "text/plain", "ask /resolve?name=HOST\n", 23);
    } else if (sxe_work_call(pool, resolve, &lookup) < 0) { /* the pool's queue is full */
        sxe_http_respond(http, 503, "text/plain", "busy\n", 5);
    } else {
        sxe_http_respond(http, lookup.status, "text/plain", lookup.answer, (size_t)lookup.len);
    }
}

static void hello(sxe_http_t *http, void *arg)
{
    (void)arg;
    sxe_http_respond(http, 200, "text/plain", "Hello World\n", 12);
}

int main(int argc, char **argv)
{
    struct sxe_http_server_options options = {.fibers = 1024, .deferred = 1024};
    const char *address = argc > 1 ? argv[1] : "127.0.0.1:8080";
    sxe_http_server_t *server = NULL;
    int rc;

    if ((rc = sxe_http_server_create(&server, NULL, &options)) < 0 ||
        (rc = sxe_work_pool_create(&pool, sxe_http_server_loop(server), NULL)) < 0 ||
        (rc = sxe_http_server_route(server, "GET", "/resolve", SXE_HTTP_ROUTE_FIBER, lookup_route,
                                    NULL)) < 0 ||
        (rc = sxe_http_server_route(server, "GET", "/", 0, hello, NULL)) < 0 ||
        (rc = sxe_http_server_listen(server, address)) < 0) {
        fprintf(stderr, "http-work: cannot serve on %s: %s\n", address, sxe_strerror(rc));
    } else {
        rc = sxe_http_server_run(server);
    }
    sxe_work_pool_destroy(pool);
    sxe_http_server_destroy(server);
    return rc < 0;
}
