/*
 * HTTP/2 answers: what response.c's calls become on a stream. sxe_http_start() submits the head
 * (":status", the length, the type, the handler's lines split into fields) with the body's data
 * source, or alone when the answer can have no body. The body's pieces wait on the stream until
 * its window and the connection's take them: the session asks for them, and writes the frames, in
 * sxe__h2_flush(), after each read and after each answer given outside one, so that an answer
 * given whole at once leaves as HEADERS and one DATA frame, in one send.
 */
#define SXE_LOG_MODULE http_log
#include "sxe/log.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h2.h"
#include "sys.h"

static struct sxe_log_module http_log = SXE_LOG_MODULE_INIT(HTTP);

/* Whether more bytes fit in the connection's memory and in the server's (all of its loop's HTTP/2
 * connections'): past either, an allocation fails. */
static bool room(struct h2 *h2, size_t more)
{
    if (h2->memory + more <= SXE__H2_MEMORY_MAX &&
        h2->server->h2_memory + more <= SXE__H2_SERVER_MEMORY_MAX) {
        return true;
    }
    SXE_LOG_ONCE(SXE_LOG_LEVEL_WARN,
                 "HTTP/2 memory: a connection reached its %u bytes, or the server its %u",
                 SXE__H2_MEMORY_MAX, SXE__H2_SERVER_MEMORY_MAX);
    return false;
}

static void count(struct h2 *h2, size_t added, size_t taken)
{
    h2->memory = h2->memory + added - taken;
    h2->server->h2_memory = h2->server->h2_memory + added - taken;
}

void *sxe__h2_alloc(struct h2 *h2, size_t size)
{
    void *p = room(h2, size) ? malloc(size) : NULL;

    if (p != NULL) {
        count(h2, malloc_usable_size(p), 0);
    }
    return p;
}

void *sxe__h2_realloc(struct h2 *h2, void *p, size_t size)
{
    size_t before = p != NULL ? malloc_usable_size(p) : 0;

    if (size > before && !room(h2, size - before)) {
        return NULL;
    }
    void *moved = realloc(p, size);
    if (moved != NULL || size == 0) {
        count(h2, moved != NULL ? malloc_usable_size(moved) : 0, before);
    }
    return moved;
}

void sxe__h2_free(struct h2 *h2, void *p)
{
    if (p != NULL) {
        count(h2, 0, malloc_usable_size(p));
        free(p);
    }
}

/* A piece is done with: its file closed, or its owner told. */
static void piece_free(struct h2 *h2, struct h2_piece *piece)
{
    if (piece->close_fd) {
        sxe_fd_close(piece->fd);
    }
    if (piece->release != NULL) {
        piece->release(piece->arg);
    }
    sxe__h2_free(h2, piece);
}

struct slot *sxe__h2_holder(struct h2_stream *stream)
{
    struct slot *held = stream->slot;

    return held != NULL && held->state != SLOT_FREE && held->http.serial == stream->serial &&
                   held->http.h2 == stream
               ? held
               : NULL;
}

void sxe__h2_stream_free(struct h2_stream *stream)
{
    struct h2 *h2 = stream->h2;

    while (stream->first != NULL) {
        struct h2_piece *piece = stream->first;
        stream->first = piece->next;
        piece_free(h2, piece);
    }
    if (stream->fields != (char *)(stream + 1)) { /* grown out of the stream's own room */
        sxe__h2_free(h2, stream->fields);
    }
    sxe__h2_free(h2, stream->body);
    sxe__h2_free(h2, stream->head);
    sxe__h2_free(h2, stream);
}

/*
 * The session asks for the next DATA frame's bytes (at most length): copied from the pieces, read
 * from a file range. None yet and the body not ended: the stream waits (resumed by the next piece
 * or the end).
 */
static ssize_t read_body(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *source, void *user)
{
    struct h2_stream *stream = source->ptr;
    size_t filled = 0;

    (void)session, (void)id, (void)user;
    while (filled < length && stream->first != NULL) {
        struct h2_piece *piece = stream->first;
        size_t part = piece->len < length - filled ? piece->len : length - filled;
        if (piece->fd >= 0) {
            ssize_t got = sxe__sys.pread(piece->fd, buf + filled, part, piece->offset);
            if (got <= 0) { /* the file shrank, or failed: the client cannot get what was owed */
                SXE_LOG_WARN("cannot read a file being sent over HTTP/2: %s; resetting the stream",
                             got < 0 ? sxe_strerror(-errno) : "it ended early");
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
            }
            piece->offset += got;
            part = (size_t)got;
        } else {
            memcpy(buf + filled, piece->data, part);
            piece->data += part;
        }
        piece->len -= part;
        filled += part;
        stream->queued -= part;
        if (piece->len == 0) {
            stream->first = piece->next;
            stream->last = stream->first != NULL ? stream->last : NULL;
            piece_free(stream->h2, piece);
        }
    }
    if (stream->backed && stream->queued == 0) { /* its holder may send more (after the flush) */
        stream->backed = false;
        stream->drained = stream->h2->drained = true;
    }
    if (stream->first == NULL && stream->ended) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    } else if (filled == 0) {
        stream->waiting = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    return (ssize_t)filled;
}

/* A stream waiting for its body's next bytes has them (or its end). */
static void wake(struct h2_stream *stream)
{
    if (stream->waiting) {
        stream->waiting = false;
        (void)nghttp2_session_resume_data(stream->h2->session, stream->id);
    }
    sxe__h2_flush(stream->h2);
}

/* A field for the head, copied to *at: its name in lower case, as HTTP/2 wants names. */
static size_t add_field(nghttp2_nv *nv, char **at, const char *name, size_t name_len,
                        const char *value, size_t value_len)
{
    char *out = *at;
    for (size_t i = 0; i < name_len; i++) {
        char c = name[i];
        out[i] = c >= 'A' && c <= 'Z' ? (char)(c + 'a' - 'A') : c;
    }
    memcpy(out + name_len, value, value_len);
    *nv = (nghttp2_nv){.name = (uint8_t *)out,
                       .namelen = name_len,
                       .value = (uint8_t *)out + name_len,
                       .valuelen = value_len,
                       .flags = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE};
    *at = out + name_len + value_len;
    return 1;
}

/* Fields HTTP/2 forbids (RFC 9113 §8.2.2): the connection's own, which it replaces. */
static bool connection_specific(const char *name, size_t len)
{
    static const char *const names[] = {"connection", "keep-alive", "proxy-connection",
                                        "transfer-encoding", "upgrade"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strlen(names[i]) == len && strncasecmp(names[i], name, len) == 0) {
            return true;
        }
    }
    return false;
}

/* The fields of "Name: value" lines, each ending in CRLF: what sxe_http_start() was given. */
static size_t add_lines(nghttp2_nv *nv, char **text, const char *lines)
{
    size_t count = 0;

    for (const char *line = lines; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        const char *colon = end != NULL ? memchr(line, ':', (size_t)(end - line)) : NULL;
        if (colon == NULL) {
            break; /* not a line: sxe_http_start()'s contract was broken; the rest is dropped */
        }
        const char *value = colon + 1, *value_end = end;
        while (value < value_end && (*value == ' ' || *value == '\t')) {
            value++;
        }
        while (value_end > value && (value_end[-1] == '\r' || value_end[-1] == ' ')) {
            value_end--;
        }
        if (!connection_specific(line, (size_t)(colon - line))) {
            count += add_field(&nv[count], text, line, (size_t)(colon - line), value,
                               (size_t)(value_end - value));
        }
        line = end + 1;
    }
    return count;
}

static size_t count_lines(const char *lines)
{
    size_t count = 0;
    for (const char *at = lines; at != NULL && (at = strchr(at, '\n')) != NULL; at++) {
        count++;
    }
    return count;
}

/* A number in decimal at out (20 digits at most): its length. */
static size_t decimal(char *out, uint64_t number)
{
    char digits[20];
    size_t len = 0;

    do {
        digits[len++] = (char)('0' + number % 10);
        number /= 10;
    } while (number != 0);
    for (size_t i = 0; i < len; i++) {
        out[i] = digits[len - 1 - i];
    }
    return len;
}

/*
 * The head's fields go after the nv array, in one allocation: :status, content-length,
 * content-type, date and server (built here, with no parsing: this runs for every answer), then
 * the handler's lines.
 */
int sxe__h2_start(sxe_http_t *http, int status, const char *content_type, const char *date,
                  size_t date_len, const char *headers, int64_t content_length)
{
    struct h2_stream *stream = http->h2;
    size_t type_len = content_type != NULL ? strlen(content_type) : 0;
    size_t text_len = (headers != NULL ? strlen(headers) : 0) + type_len + date_len + 96;
    size_t lines = 5 + count_lines(headers); /* :status, length, type, date, server */
    nghttp2_nv *nv = sxe__h2_alloc(stream->h2, lines * sizeof(nghttp2_nv) + text_len);
    if (nv == NULL) {
        return -ENOBUFS;
    }
    char *text = (char *)(nv + lines), number[20];
    size_t count = 0;
    count += add_field(&nv[count], &text, ":status", 7, number, decimal(number, (uint64_t)status));
    if (content_length >= 0 && status != 204 && status != 304) {
        count += add_field(&nv[count], &text, "content-length", 14, number,
                           decimal(number, (uint64_t)content_length));
    }
    if (content_type != NULL) {
        count += add_field(&nv[count], &text, "content-type", 12, content_type, type_len);
    }
    count += add_field(&nv[count], &text, "date", 4, date, date_len);
    count += add_field(&nv[count], &text, "server", 6, "sxe", 3);
    count += add_lines(&nv[count], &text, headers);
    /* The session points at the fields, not copying them: they stay the stream's until it is
     * freed (the HEADERS frame goes before). An answer that can have no body ends with its head. */
    nghttp2_data_provider source = {.source.ptr = stream, .read_callback = read_body};
    bool body = !http->head_only && status != 204 && status != 304 && content_length != 0;
    int rc =
        nghttp2_submit_response(stream->h2->session, stream->id, nv, count, body ? &source : NULL);
    http->sent += (size_t)(text - (char *)(nv + lines));
    stream->head = nv; /* a stream is answered once: sxe_http_start() refuses a second */
    if (rc != 0) {     /* GCOVR_EXCL_LINE: a stream the session no longer has; its close frees it */
        SXE_LOG_DEBUG("cannot answer HTTP/2 stream %d: %s", stream->id, nghttp2_strerror(rc));
        return -EPIPE;
    }
    sxe__h2_flush(stream->h2); /* a held answer's head leaves now; in a read, at its end */
    return 0;
}

/* Adds a piece of the body, and wakes the stream if it waits for one. */
static int add_piece(sxe_http_t *http, struct h2_piece *piece)
{
    struct h2_stream *stream = http->h2;

    piece->next = NULL;
    if (stream->last != NULL) {
        stream->last->next = piece;
    } else {
        stream->first = piece;
    }
    stream->last = piece;
    http->sent += piece->len;
    stream->queued += piece->len;
    stream->backed = stream->backed || stream->queued >= SXE__H2_STREAM_HIGH_WATER;
    wake(stream);
    return 0;
}

int sxe__h2_data(sxe_http_t *http, const void *data, size_t len, bool copy,
                 sxe_conn_release_t release, void *arg)
{
    struct h2_stream *stream = http->h2;
    struct h2_piece *piece = sxe__h2_alloc(stream->h2, sizeof(*piece) + (copy ? len : 0));

    if (piece == NULL) {
        if (release != NULL) {
            release(arg);
        }
        return -ENOBUFS;
    }
    *piece = (struct h2_piece){.data = data, .len = len, .fd = -1, .release = release, .arg = arg};
    if (copy) {
        memcpy(piece + 1, data, len);
        piece->data = (const char *)(piece + 1);
    }
    return add_piece(http, piece);
}

int sxe__h2_file(sxe_http_t *http, int fd, off_t offset, size_t len, bool close_when_sent,
                 sxe_conn_release_t release, void *arg)
{
    struct h2_piece *piece = sxe__h2_alloc(http->h2->h2, sizeof(*piece));

    if (piece == NULL) {
        if (close_when_sent) {
            sxe_fd_close(fd);
        }
        if (release != NULL) {
            release(arg);
        }
        return -ENOBUFS;
    }
    *piece = (struct h2_piece){.len = len,
                               .fd = fd,
                               .close_fd = close_when_sent,
                               .offset = offset,
                               .release = release,
                               .arg = arg};
    return add_piece(http, piece);
}

void sxe__h2_end(sxe_http_t *http)
{
    http->h2->ended = true;
    wake(http->h2);
}

void sxe__h2_reset(struct h2_stream *stream)
{
    (void)nghttp2_submit_rst_stream(stream->h2->session, NGHTTP2_FLAG_NONE, stream->id,
                                    NGHTTP2_INTERNAL_ERROR);
    sxe__h2_flush(stream->h2);
}

/*
 * Sends what the session has while the connection takes it, in one corked batch. The uncork's
 * send may drain the output at once, and its on_drained asks for a flush while this one is busy:
 * then this one goes round again, or the rest would wait for the client's next frame.
 */
static void send_frames(struct h2 *h2)
{
    h2->busy = true;
    do {
        h2->again = false;
        bool corked = sxe_conn_cork(h2->conn);
        const uint8_t *frames;
        ssize_t len;
        while (!sxe_conn_backed_up(h2->conn) &&
               (len = nghttp2_session_mem_send(h2->session, &frames)) != 0) {
            if (len < 0 || sxe_conn_write(h2->conn, frames, (size_t)len) < 0) {
                SXE_LOG_DEBUG("HTTP/2: %s; closing the connection",
                              len < 0 ? nghttp2_strerror((int)len) : "cannot write");
                sxe_conn_close(h2->conn);
                break;
            }
        }
        if (corked) {
            sxe_conn_uncork(h2->conn);
        }
    } while (h2->again && !sxe_conn_closed(h2->conn) && !sxe_conn_backed_up(h2->conn));
    h2->busy = false;
}

/*
 * Streams that were backed up and have given the session all their pieces: their holders'
 * on_drained (sxe_http_set_drained()) may send more. The session stays busy meanwhile, so that no
 * stream ends under the walk; what they send goes in the next send_frames(). @return false if a
 * holder closed the connection (the session is gone).
 */
static bool tell_drained(struct h2 *h2)
{
    sxe_conn_t *conn = h2->conn;

    h2->drained = false;
    h2->busy = true;
    for (struct h2_stream *stream = h2->all; stream != NULL; stream = stream->next) {
        struct slot *held = stream->drained ? sxe__h2_holder(stream) : NULL;
        stream->drained = false;
        if (held != NULL && held->state == SLOT_HELD && held->on_drained != NULL) {
            held->on_drained(&held->http, held->drained_arg);
            if (sxe_conn_closed(conn)) {
                return false;
            }
        }
    }
    h2->busy = false;
    return true;
}

void sxe__h2_flush(struct h2 *h2)
{
    if (h2->busy || sxe_conn_closed(h2->conn)) {
        h2->again = h2->busy;
        return;
    }
    do {
        send_frames(h2);
    } while (h2->drained && !sxe_conn_closed(h2->conn) && tell_drained(h2));
    if (sxe_conn_closed(h2->conn)) {
        return;
    }
    if (sxe_conn_backed_up(h2->conn)) { /* held answers that stream wait for on_drained */
        sxe__http_state(h2->server, h2->conn)->full = true;
    }
    if (!h2->ending && !nghttp2_session_want_read(h2->session) &&
        !nghttp2_session_want_write(h2->session)) {
        /* GOAWAY given and taken: done. Our side ends once the queue is out, and what the client
         * still sends (a PING behind its GOAWAY) is read and dropped until its end, as HTTP/1.1's
         * closing connections do: a close with unread bytes would reset the connection. */
        h2->ending = true;
        (void)sxe_conn_shutdown(h2->conn);
    }
}

bool sxe__h2_backed_up(const struct h2_stream *stream)
{
    return stream->queued >= SXE__H2_STREAM_HIGH_WATER;
}
