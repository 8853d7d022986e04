/* Hello World as a web service through the full HTTP module. Usage: http-hello [IP:PORT [WORKERS]]
 * (127.0.0.1:8080, 0): one loop, or WORKERS processes, each with its own, on the port. */
#include <stdlib.h>
#include <sxe/http.h>

static void hello(sxe_http_t *http, void *arg)
{
    (void)arg;
    sxe_http_respond(http, 200, "text/plain", "Hello World\n", 12);
}

int main(int argc, char **argv)
{
    const char *address = argc > 1 ? argv[1] : "127.0.0.1:8080";
    return sxe_http_serve(address, "/", hello, NULL, argc > 2 ? (unsigned)atoi(argv[2]) : 0) < 0;
}
