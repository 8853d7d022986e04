/* Hello World as a web service through the full HTTP module. Usage: http-hello [IP:PORT]. */
#include <sxe/http.h>

static void hello(sxe_http_t *http, void *arg)
{
    (void)arg;
    sxe_http_respond(http, 200, "text/plain", "Hello World\n", 12);
}

int main(int argc, char **argv)
{
    return sxe_http_serve(argc > 1 ? argv[1] : "127.0.0.1:8080", "/", hello, NULL) < 0;
}
