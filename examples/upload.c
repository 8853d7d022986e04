/*
 * Uploads of any size, read as sequential code: PUT /NAME stores the request body as DIR/NAME,
 * reading it from the client only as fast as the disk takes it, through one buffer of the
 * connection's, however large the file. The handler runs on a fiber; sxe_http_body_read() waits
 * for the next bytes while the loop serves everyone else. (The writes themselves block the loop:
 * fine for a local disk; a server for slow disks would hand them to a thread.)
 *
 *     upload [IP:PORT [DIR]]        (127.0.0.1:8080, .)
 *     curl -T big.iso http://127.0.0.1:8080/big.iso
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sxe/sxe.h>
#include <unistd.h>

static int dir_fd;

static void put(sxe_http_t *http, void *arg)
{
    char name[256], buf[65536], text[128];
    size_t path_len;
    const char *path = sxe_http_path(http, &path_len);
    unsigned long long total = 0;
    ssize_t got;

    (void)arg;
    if (path_len < 2 || path_len > sizeof(name) || path[1] == '.' ||
        memchr(path + 1, '/', path_len - 1) != NULL) {
        sxe_http_respond(http, 400, "text/plain", "PUT /NAME: a plain file name\n", 29);
        return;
    }
    snprintf(name, sizeof(name), "%.*s", (int)path_len - 1, path + 1);
    int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        sxe_http_respond(http, 403, "text/plain", "cannot create that file\n", 24);
        return;
    }
    while ((got = sxe_http_body_read(http, buf, sizeof(buf))) > 0) {
        if (write(fd, buf, (size_t)got) != got) { /* a full disk: say so, and keep nothing */
            close(fd);
            unlinkat(dir_fd, name, 0);
            sxe_http_respond(http, 507, "text/plain", "the disk said no\n", 17);
            return;
        }
        total += (unsigned long long)got;
    }
    if (close(fd) < 0 || got < 0) { /* got < 0: the client went away mid-body */
        unlinkat(dir_fd, name, 0);
        return;
    }
    int len = snprintf(text, sizeof(text), "stored %s: %llu bytes\n", name, total);
    sxe_http_respond(http, 201, "text/plain", text, (size_t)len);
}

int main(int argc, char **argv)
{
    struct sxe_http_server_options options = {.fibers = 64, .fiber_stack_size = 131072};
    const char *address = argc > 1 ? argv[1] : "127.0.0.1:8080";
    unsigned flags = SXE_HTTP_ROUTE_PREFIX | SXE_HTTP_ROUTE_FIBER | SXE_HTTP_ROUTE_STREAM;
    sxe_http_server_t *server = NULL;

    if ((dir_fd = open(argc > 2 ? argv[2] : ".", O_RDONLY | O_DIRECTORY)) < 0) {
        perror(argc > 2 ? argv[2] : ".");
        return 1;
    }
    int rc;
    if ((rc = sxe_http_server_create(&server, NULL, &options)) < 0 ||
        (rc = sxe_http_server_route(server, "PUT", "/", flags, put, NULL)) < 0 ||
        (rc = sxe_http_server_listen(server, address)) < 0) {
        fprintf(stderr, "upload: cannot serve on %s: %s\n", address, sxe_strerror(rc));
    } else {
        rc = sxe_http_server_run(server);
    }
    sxe_http_server_destroy(server);
    return rc < 0;
}
