/*
 * Logging in a minute. Try:
 *   ./log                          INFO and above
 *   SXE_LOG_LEVEL=7 ./log          everything (TRACE and the dump need an SXE_DEBUG build)
 *   SXE_LOG_LEVEL_MAIN=2 ./log     only errors from this program
 */
#include <sxe/sxe.h>

static int add(int a, int b)
{
    SXE_LOG_ENTER("(a=%d, b=%d)", a, b);
    SXE_LOG_TRACE("adding");
    SXE_LOG_LEAVE(" = %d", a + b);
    return a + b;
}

int main(void)
{
    const char request[] = "GET / HTTP/1.1\r\nHost: example\r\n\r\n";

    SXE_LOG_INFO("starting: 2 + 3 = %d", add(2, 3));
    sxe_log_set_id(42);
    SXE_LOG_WARN("this line belongs to object 42");
    SXE_LOG_HEX(SXE_LOG_LEVEL_INFO, request, sizeof(request) - 1);
    SXE_LOG_ERROR("%s", sxe_strerror(-ENOBUFS));
    return 0;
}
