/*
 * What a Redis command's callback saw, for the Redis client's tests (test_redis.c against a real
 * server, test_redis_resp.c against a scripted one): got() as the callback, a struct got as its
 * arg, got_count counting every callback.
 */
#ifndef SXE_TEST_REDIS_GOT_H
#define SXE_TEST_REDIS_GOT_H

#include <string.h>

#include "sxe/redis.h"

struct got {
    int called, status;
    enum sxe_redis_type type;
    int64_t integer;
    size_t len;
    char text[128]; /* the reply's bytes, NULs too, cut to fit, NUL-terminated */
};

static int got_count;

static void got(void *arg, int status, const struct sxe_redis_reply *reply)
{
    struct got *g = arg;

    g->called++;
    g->status = status;
    if (reply != NULL) {
        size_t len = reply->len < sizeof(g->text) - 1 ? reply->len : sizeof(g->text) - 1;
        g->type = reply->type;
        g->integer = reply->integer;
        g->len = reply->len;
        if (reply->str != NULL) {
            memcpy(g->text, reply->str, len);
            g->text[len] = '\0';
        }
    }
    got_count++;
}

#endif
