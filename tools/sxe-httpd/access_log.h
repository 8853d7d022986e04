/* sxe-httpd's access log (access_log.c). */
#ifndef SXE_HTTPD_ACCESS_LOG_H
#define SXE_HTTPD_ACCESS_LOG_H

#include <stdbool.h>

#include <sxe/http.h>

/* The formats of a line: nginx's common and combined, or a JSON object. */
enum access_log_format { ACCESS_LOG_COMMON, ACCESS_LOG_COMBINED, ACCESS_LOG_JSON };

#define ACCESS_LOGS_MOST 257 /* files: the default host's and each of 256 hosts' */

/* Opens the log at path ("-": standard output) in format (the same for every log), each line
 * written as it comes (buffer_bytes 0) or gathered in a buffer of that size. A path opened
 * already is the same log. @return the log's number (from 0), or -errno. */
int access_log_open(const char *path, enum access_log_format format, size_t buffer_bytes);

/* Whether a log is open. */
bool access_log_on(void);

/* The HTTP server's log hook (sxe_http_server_options.on_log): one line per request, in the first
 * log. Only while a log is open (access_log_on()). */
void access_log_write(const sxe_http_t *http, void *arg);

/* One line for the request in the log of this number (an open one). */
void access_log_write_to(unsigned number, const sxe_http_t *http);

/* Opens every log's path again (after logrotate moved the files). @return 0, or the -errno of
 * the last that failed (its old file is kept). */
int access_log_reopen(void);

/* Writes what the buffers hold. */
void access_log_flush(void);

/* The HTTP server's loop hooks (on_loop_start, on_loop_stop): a buffer's timer, its last lines. */
void access_log_loop_start(sxe_loop_t *loop, void *arg);
void access_log_loop_stop(void *arg);

#endif
