/*
 * sxe-httpd's compression as files are served: see compress.h. zlib and libbrotli do the work;
 * this file chooses when, keeps the small results, and paces the large ones.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#if defined(SXE_HAVE_BROTLI)
#include <brotli/encode.h>
#endif

#include <sxe/clock.h>
#include <sxe/sxe.h>
#include <sxe/timer.h>

#include "compress.h"
#include "fields.h"
#include "options.h"
#include "precompressed.h"
#include "send.h"

#define STREAM_IN      (64 * 1024)  /* bytes of the file read at a time */
#define STREAM_OUT     (64 * 1024)  /* bytes of coded output sent at a time */
#define STREAM_TURN    (256 * 1024) /* bytes of files coded per turn of the loop, by all streams */
#define STREAM_TURN_NS (2 * SXE_NS_PER_MSEC) /* ... or this long */
/* A stream whose client takes nothing this long is cut off: --write-timeout, as the module does
 * for answers it sends itself (30 s by default). */
#define STREAM_STALL_NS                                                                            \
    ((config.write_timeout > 0 ? config.write_timeout : 30) * (uint64_t)SXE_NS_PER_SEC)

bool compress_has_brotli(void)
{
#if defined(SXE_HAVE_BROTLI)
    return true;
#else
    return false;
#endif
}

bool compress_type(const char *type)
{
    static const char *const types[] = {"application/javascript",
                                        "application/json",
                                        "application/xml",
                                        "application/wasm",
                                        "application/x-javascript",
                                        "application/xhtml+xml",
                                        "application/rss+xml",
                                        "application/atom+xml",
                                        "application/manifest+json",
                                        "application/ld+json",
                                        "image/svg+xml",
                                        "image/x-icon",
                                        "image/vnd.microsoft.icon",
                                        "font/ttf",
                                        "font/otf",
                                        "application/vnd.ms-fontobject",
                                        "application/x-font-ttf"};
    size_t len = strcspn(type, ";");

    if (strncmp(type, "text/", 5) == 0) {
        return true;
    }
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (strlen(types[i]) == len && strncmp(type, types[i], len) == 0) {
            return true;
        }
    }
    return false;
}

/* One coder's state, gzip or brotli, as a stream uses it. */
struct coder {
    unsigned which; /* CODING_GZIP or CODING_BR */
    z_stream z;
#if defined(SXE_HAVE_BROTLI)
    BrotliEncoderState *br;
#endif
};

static int coder_level(unsigned which)
{
    return which == CODING_GZIP ? config.gzip : config.brotli;
}

/* @return 0, or -1 if memory is short. */
static int coder_init(struct coder *coder, unsigned which, uint64_t size)
{
    coder->which = which;
    if (which == CODING_GZIP) { /* windowBits 15 + 16: the gzip wrapper, as browsers expect */
        return deflateInit2(&coder->z, config.gzip, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) ==
                       Z_OK
                   ? 0
                   : -1;
    }
#if defined(SXE_HAVE_BROTLI)
    if ((coder->br = BrotliEncoderCreateInstance(NULL, NULL, NULL)) == NULL) {
        return -1;
    }
    BrotliEncoderSetParameter(coder->br, BROTLI_PARAM_QUALITY, (uint32_t)config.brotli);
    BrotliEncoderSetParameter(coder->br, BROTLI_PARAM_MODE, BROTLI_MODE_TEXT);
    /* A 256 KiB window, not 4 MiB: a stream's coder holds a few hundred KiB, not megabytes */
    BrotliEncoderSetParameter(coder->br, BROTLI_PARAM_LGWIN, 18);
    BrotliEncoderSetParameter(coder->br, BROTLI_PARAM_SIZE_HINT,
                              (uint32_t)(size < UINT32_MAX ? size : UINT32_MAX));
    return 0;
#else
    (void)size;
    return -1; /* GCOVR_EXCL_LINE: brotli is never chosen without it */
#endif
}

static void coder_end(struct coder *coder)
{
    if (coder->which == CODING_GZIP) {
        deflateEnd(&coder->z);
        return;
    }
#if defined(SXE_HAVE_BROTLI)
    BrotliEncoderDestroyInstance(coder->br);
#endif
}

/*
 * Codes in (len bytes; last: the file's end) into out, as much as out takes: *used says how much
 * of in was taken, *made how much of out was written, and the return whether the coder has more
 * to give for this input (call again with what is left, and the same last). brotli flushes at
 * the end of each piece, so that it never holds more than a piece's output (at quality 5 it
 * would gather megabytes, then give them at once). -1 on a coder's failure.
 */
static int coder_run(struct coder *coder, const void *in, size_t len, bool last, size_t *used,
                     unsigned char *out, size_t room, size_t *made)
{
    if (coder->which == CODING_GZIP) {
        coder->z.next_in = (Bytef *)(uintptr_t)in;
        coder->z.avail_in = (uInt)len;
        coder->z.next_out = out;
        coder->z.avail_out = (uInt)room;
        int rc = deflate(&coder->z, last ? Z_FINISH : Z_NO_FLUSH);
        *used = len - coder->z.avail_in;
        *made = room - coder->z.avail_out;
        if (rc == Z_STREAM_ERROR) {
            return -1; /* GCOVR_EXCL_LINE: only for a state zlib never gave */
        }
        return last ? rc != Z_STREAM_END : coder->z.avail_out == 0;
    }
#if defined(SXE_HAVE_BROTLI)
    const uint8_t *next_in = in;
    uint8_t *next_out = out;
    size_t avail_in = len, avail_out = room;
    if (!BrotliEncoderCompressStream(coder->br,
                                     last ? BROTLI_OPERATION_FINISH : BROTLI_OPERATION_FLUSH,
                                     &avail_in, &next_in, &avail_out, &next_out, NULL)) {
        return -1; /* GCOVR_EXCL_LINE: only for memory the coder could not get */
    }
    *used = len - avail_in;
    *made = room - avail_out;
    return last ? !BrotliEncoderIsFinished(coder->br) : BrotliEncoderHasMoreOutput(coder->br);
#else
    (void)in, (void)len, (void)last, (void)used, (void)out, (void)room, (void)made;
    return -1; /* GCOVR_EXCL_LINE: brotli is never chosen without it */
#endif
}

/* The whole of a small file's bytes, coded into malloc's memory: @return it (*len its length),
 * or NULL if memory is short or the file cannot be read. */
static char *code_whole(const struct file *file, unsigned which, size_t *len)
{
    char *in = file->content, *out = NULL;
    struct coder coder = {0};
    size_t room = file->size + file->size / 8 + 1024, used = 0, made = 0;

    if (in == NULL && ((in = malloc(file->size + 1)) == NULL ||
                       pread(file->fd, in, file->size, 0) != (ssize_t)file->size)) {
        free(in);
        return NULL;
    }
    if ((out = malloc(room)) != NULL && coder_init(&coder, which, file->size) == 0) {
        if (coder_run(&coder, in, file->size, true, &used, (unsigned char *)out, room, &made) !=
            0) {
            free(out); /* GCOVR_EXCL_LINE: room is more than any coding needs for this much */
            out = NULL;
        }
        coder_end(&coder);
    } else {
        free(out);
        out = NULL;
    }
    if (in != file->content) {
        free(in);
    }
    *len = made;
    return out;
}

/* A large file's answer as it is coded. */
struct stream {
    sxe_http_t *held;
    sxe_loop_t *loop;
    struct file *file; /* the original, referenced until the end */
    uint64_t at;       /* where the next read starts */
    struct coder coder;
    struct stream *next, *prev;         /* in the queue of streams that may send */
    struct stream *next_all, *prev_all; /* among the thread's streams */
    bool queued;
    bool piece;         /* in holds a piece not wholly coded and sent */
    bool piece_last;    /* ... the file's last */
    size_t piece_len;   /* its bytes */
    size_t piece_taken; /* ... taken by the coder so far */
    uint64_t progress;  /* the loop's now when the client last kept up */
    unsigned char in[STREAM_IN];
    unsigned char out[STREAM_OUT];
};

/*
 * The thread's streams that may send, first come first served: each in turn codes a piece and
 * goes to the back, until the turn's share is spent (in bytes or in time: a slow coder's pieces
 * take longer); the next turn goes on (a timer). A stream whose client backs up leaves the queue
 * until on_drained. So every client is served at the same pace, and other connections between
 * the turns, however many streams there are. A held request's answer has no write timeout of the
 * module's: a sweep once a second cuts off the streams whose client has taken nothing for
 * STREAM_STALL_NS, as the module does for answers it sends itself.
 */
static __thread struct {
    struct stream *head, *tail; /* the queue */
    struct stream *all;         /* every stream alive */
    sxe_timer_t turn;
    sxe_timer_t sweep;
    unsigned streams; /* alive, queued or not */
} queue;

static void on_turn(sxe_timer_t *timer, void *arg);
static void on_sweep(sxe_timer_t *timer, void *arg);

/* A stream's response headers (the thread's: a handler's stack may be a fiber's). */
static __thread char stream_headers[512 + 64 + FIELDS_ROOM];

static void timer_due(sxe_loop_t *loop, sxe_timer_t *timer, uint64_t delay, uint64_t period)
{
    if (!sxe_timer_active(timer) && sxe_timer_start(loop, timer, delay, period) < 0) {
        SXE_LOG_WARN("no timer free: compressed answers wait for the next one");
    }
}

static void enqueue(struct stream *stream)
{
    if (stream->queued) {
        return;
    }
    stream->queued = true;
    stream->next = NULL;
    stream->prev = queue.tail;
    *(queue.tail != NULL ? &queue.tail->next : &queue.head) = stream;
    queue.tail = stream;
    /* 1 ns, not 0: a timer due now would fire again in this turn's run of timers */
    timer_due(stream->loop, &queue.turn, 1, 0);
}

static void dequeue(struct stream *stream)
{
    if (!stream->queued) {
        return;
    }
    stream->queued = false;
    *(stream->prev != NULL ? &stream->prev->next : &queue.head) = stream->next;
    *(stream->next != NULL ? &stream->next->prev : &queue.tail) = stream->prev;
}

/* Counts the stream among the thread's (and starts the sweep with the first). */
static void stream_begin(struct stream *stream)
{
    if (queue.turn.callback == NULL) { /* the thread's first: zeroed, not yet stopped timers */
        sxe_timer_init(&queue.turn, on_turn, stream->loop);
        sxe_timer_init(&queue.sweep, on_sweep, stream->loop);
    }
    stream->next_all = queue.all;
    if (queue.all != NULL) {
        queue.all->prev_all = stream;
    }
    queue.all = stream;
    queue.streams++;
    stream->progress = sxe_loop_now(stream->loop);
    timer_due(stream->loop, &queue.sweep, SXE_NS_PER_SEC, SXE_NS_PER_SEC);
}

static void stream_end(struct stream *stream)
{
    dequeue(stream);
    *(stream->prev_all != NULL ? &stream->prev_all->next_all : &queue.all) = stream->next_all;
    if (stream->next_all != NULL) {
        stream->next_all->prev_all = stream->prev_all;
    }
    if (--queue.streams == 0) {
        sxe_timer_stop(stream->loop, &queue.sweep);
    }
    coder_end(&stream->coder);
    file_unref(stream->file);
    free(stream);
}

static void on_cancel(sxe_http_t *held, void *arg)
{
    (void)held;
    stream_end(arg);
}

static void on_drained(sxe_http_t *held, void *arg)
{
    struct stream *stream = arg;

    (void)held;
    stream->progress = sxe_loop_now(stream->loop); /* the client took all it was sent */
    enqueue(stream);
}

/* Cuts off the streams whose client has taken nothing for too long. */
static void on_sweep(sxe_timer_t *timer, void *arg)
{
    sxe_loop_t *loop = arg;
    uint64_t now = sxe_loop_now(loop);

    (void)timer;
    for (struct stream *stream = queue.all, *next; stream != NULL; stream = next) {
        next = stream->next_all; /* read first: the abort may end the stream at once */
        if (now - stream->progress >= STREAM_STALL_NS) {
            SXE_LOG_INFO("%s: its client took nothing for %llu s; cutting its answer off",
                         stream->file->resolved,
                         (unsigned long long)(now - stream->progress) / SXE_NS_PER_SEC);
            (void)sxe_http_abort(stream->held);
        }
    }
}

/* Reads the next piece of the file into in: @return its length, or -1 if the file shrank or
 * cannot be read (the answer is cut off: its length was never promised). */
static ssize_t stream_read(struct stream *stream)
{
    size_t want = stream->file->size - stream->at < STREAM_IN
                      ? (size_t)(stream->file->size - stream->at)
                      : STREAM_IN;
    ssize_t got = pread(stream->file->fd, stream->in, want, (off_t)stream->at);

    if (got != (ssize_t)want) {
        SXE_LOG_WARN("%s: changed or unreadable while compressed", stream->file->resolved);
        return -1;
    }
    stream->at += want;
    return got;
}

/* Codes a piece of the file (the next, or the rest of one the client backed up in) and sends what
 * comes of it, STREAM_OUT bytes at a time, until the piece is done or the connection backs up: a
 * coder may give much more than it is given (brotli's flush), and the connection takes no more
 * than its write_limit. @return 1 when the answer is whole, 0 to go on, -1 when it failed (cut off
 * or closing: on_cancel follows). */
static int pump_piece(struct stream *stream)
{
    if (!stream->piece) {
        ssize_t len = stream_read(stream);
        if (len < 0) {
            (void)sxe_http_abort(stream->held);
            return -1;
        }
        stream->piece = true;
        stream->piece_len = (size_t)len;
        stream->piece_taken = 0;
        stream->piece_last = stream->at == stream->file->size;
    }
    do {
        size_t used, made;
        int more = coder_run(&stream->coder, stream->in + stream->piece_taken,
                             stream->piece_len - stream->piece_taken, stream->piece_last, &used,
                             stream->out, sizeof(stream->out), &made);
        if (more < 0) {
            (void)sxe_http_abort(stream->held); /* GCOVR_EXCL_LINE: see coder_run() */
            return -1;                          /* GCOVR_EXCL_LINE */
        }
        stream->piece_taken += used;
        if (made > 0 && sxe_http_send(stream->held, stream->out, made) < 0) {
            return -1;
        }
        if (more == 0 && stream->piece_taken == stream->piece_len) {
            stream->piece = false;
            return stream->piece_last ? 1 : 0;
        }
    } while (!sxe_http_backed_up(stream->held));
    return 0; /* the rest of the piece when the connection drains */
}

/* A turn's share of the queue: a piece from each stream in turn, up to STREAM_TURN bytes of the
 * files or STREAM_TURN_NS of coding. */
static void on_turn(sxe_timer_t *timer, void *arg)
{
    sxe_loop_t *loop = arg;
    uint64_t began = sxe_clock_mono_ns();

    (void)timer;
    for (size_t coded = 0;
         queue.head != NULL && coded < STREAM_TURN && sxe_clock_mono_ns() - began < STREAM_TURN_NS;
         coded += STREAM_IN) {
        struct stream *stream = queue.head;
        dequeue(stream);
        int rc = pump_piece(stream);
        if (rc < 0) {
            continue; /* the stream may be gone already (an abort cancels at once) */
        }
        if (rc > 0) {
            (void)sxe_http_finish(stream->held); /* the handle is done: on_cancel is not called */
            stream_end(stream);
        } else if (sxe_http_backed_up(stream->held)) {
            (void)sxe_http_set_drained(stream->held, on_drained, stream);
        } else {
            stream->progress = sxe_loop_now(loop); /* the client keeps up */
            enqueue(stream);                       /* to the back */
        }
    }
    if (queue.head != NULL) { /* streams left for the next turn */
        timer_due(loop, &queue.turn, 1, 0);
    }
}

/* Starts a large file's coded answer with headers. @return false when it cannot (streams or
 * memory are short, or the request cannot be held): the caller serves the file as it is. */
static bool stream_start(sxe_http_t *http, struct file *file, unsigned which, const char *headers)
{
    struct stream *stream;

    if (queue.streams >= COMPRESS_STREAMS_MOST || (stream = malloc(sizeof(*stream))) == NULL) {
        return false;
    }
    memset(stream, 0, offsetof(struct stream, in));
    if (coder_init(&stream->coder, which, file->size) < 0) {
        free(stream);
        return false;
    }
    if (sxe_http_defer(http, on_cancel, stream) < 0) {
        coder_end(&stream->coder);
        free(stream);
        return false;
    }
    stream->held = http;
    stream->loop = sxe_conn_loop(sxe_http_conn(http));
    stream->file = file;
    stream_begin(stream);
    if (sxe_http_start(http, 200, headers, -1) < 0) {
        return true; /* the connection closes: on_cancel ends the stream */
    }
    const struct sxe_http_request_head *request = sxe_http_request_head(http);
    if (request->method_len == 4 && memcmp(request->method, "HEAD", 4) == 0) {
        (void)sxe_http_finish(http);
        stream_end(stream);
        return true;
    }
    enqueue(stream);
    return true;
}

/* The coded copy of a small file, cached (or made for this answer alone), or NULL. */
static struct file *whole(struct file *file, unsigned which)
{
    char key[CACHE_KEY_MAX];
    const char *name = precompressed_coding(which);
    int key_len = snprintf(key, sizeof(key), "%s+%s", name, file->key);
    bool cacheable = file->key_len > 0 && key_len < (int)sizeof(key);
    struct file *copy = cacheable ? cache_find(key, (size_t)key_len) : NULL;

    if (copy != NULL && copy->inode == file->inode && copy->mtime_ns == file->mtime_ns &&
        copy->origin_size == file->size) {
        return copy;
    }
    if (copy != NULL) {
        file_unref(copy);
    }
    size_t len;
    char *content = code_whole(file, which, &len);
    if (content == NULL || (copy = file_made(cacheable ? key : "", file, name, coder_level(which),
                                             content, len)) == NULL) {
        return NULL; /* memory is short: the original will do */
    }
    if (cacheable) {
        cache_keep(copy);
    }
    return copy;
}

bool compress_serve(sxe_http_t *http, struct file *file)
{
    const struct sxe_http_request_head *request = sxe_http_request_head(http);
    unsigned offered =
        (config.gzip > 0 ? 1u << CODING_GZIP : 0) | (config.brotli > 0 ? 1u << CODING_BR : 0);
    int which;

    if (offered == 0 || file->coding != NULL || file->size < config.compress_min ||
        !compress_type(file->type) || sxe_http_request_header(request, "Range") != NULL ||
        (which = precompressed_choose(request, offered)) < 0) {
        return false;
    }
    if (file->size <= CACHE_INLINE_MAX) {
        struct file *copy = whole(file, (unsigned)which);
        if (copy == NULL) {
            return false;
        }
        file_unref(file);
        send_file(http, copy);
        return true;
    }
    char etag[sizeof(file->etag) + 16];
    const char *name = precompressed_coding((unsigned)which);
    file_coded_etag(file, name, coder_level((unsigned)which), etag, sizeof(etag));
    if (send_not_modified(http, file, etag)) {
        file_unref(file);
        return true;
    }
    snprintf(stream_headers, sizeof(stream_headers),
             "Content-Type: %s\r\nContent-Encoding: %s\r\nETag: %s\r\nLast-Modified: %s\r\n%s",
             file->type, name, etag, file->modified, file->added);
    return file->fd >= 0 && stream_start(http, file, (unsigned)which, stream_headers);
}
