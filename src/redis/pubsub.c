/*
 * The Redis client's set-up of each connection (HELLO, AUTH, SELECT, and on the pub/sub link the
 * subscriptions again), the messages its subscriptions bring, and the client's memory.
 */
#define SXE_LOG_MODULE redis_log
#include "sxe/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis.h"

static struct sxe_log_module redis_log = SXE_LOG_MODULE_INIT(REDIS);

#define ARGS_MAX 6

int sxe__redis_options_copy(sxe_redis_t *redis, const struct sxe_redis_options *options)
{
    redis->options = *options;
    redis->options.username = NULL;
    redis->options.password = NULL;
    if ((options->username && (redis->options.username = strdup(options->username)) == NULL) ||
        (options->password && (redis->options.password = strdup(options->password)) == NULL)) {
        return -ENOMEM;
    }
    return 0;
}

void sxe__redis_free(sxe_redis_t *redis)
{
    if (redis == NULL) {
        return;
    }
    for (uint32_t i = 0; redis->subs && i < redis->options.subscriptions; i++) {
        free(redis->subs[i].name);
    }
    struct link *links[] = {&redis->command, &redis->pubsub};
    for (size_t i = 0; i < 2; i++) {
        free(links[i]->unsent);
        free(links[i]->nodes);
    }
    if (redis->own_resolver) {
        sxe_resolver_destroy(redis->resolver);
    }
    free(redis->name);
    free((char *)(uintptr_t)redis->options.username);
    free((char *)(uintptr_t)redis->options.password);
    free(redis->subs);
    free(redis->rings);
    free(redis);
}

/* Writes one command: straight to the link's connection (a set-up's, first on a fresh one), or
 * behind what waits to be sent (a subscription's, which may be many: it waits its turn). */
static int write_command(struct link *link, bool first, unsigned argc, const char *const *argv,
                         const size_t *len)
{
    size_t need = sxe__resp_command(NULL, 0, argc, argv, len);
    char *bytes = malloc(need);
    int rc;

    if (bytes == NULL) {
        return -ENOMEM;
    }
    (void)sxe__resp_command(bytes, need, argc, argv, len);
    rc = first ? sxe_conn_write(link->conn, bytes, need) : sxe__redis_send(link, bytes, need);
    free(bytes);
    return rc;
}

/* SUBSCRIBE (or PSUBSCRIBE) every channel (or pattern) of the client in one command. */
static int subscribe_all(struct link *link, bool pattern)
{
    sxe_redis_t *redis = link->redis;
    uint32_t count = 0;
    int rc;

    for (uint32_t i = 0; i < redis->options.subscriptions; i++) {
        count += redis->subs[i].name != NULL && redis->subs[i].pattern == pattern;
    }
    if (count == 0) {
        return 0;
    }
    const char **argv = malloc((count + 1) * sizeof(*argv));
    size_t *len = malloc((count + 1) * sizeof(*len));
    if (argv == NULL || len == NULL) {
        free(argv);
        free(len);
        return -ENOMEM;
    }
    argv[0] = pattern ? "PSUBSCRIBE" : "SUBSCRIBE";
    len[0] = strlen(argv[0]);
    for (uint32_t i = 0, n = 1; i < redis->options.subscriptions; i++) {
        if (redis->subs[i].name != NULL && redis->subs[i].pattern == pattern) {
            argv[n] = redis->subs[i].name;
            len[n++] = redis->subs[i].len;
        }
    }
    rc = write_command(link, false, count + 1, argv, len);
    free(argv);
    free(len);
    return rc;
}

int sxe__redis_setup(struct link *link)
{
    const struct sxe_redis_options *options = &link->redis->options;
    const char *user = options->username ? options->username : "default";
    char database[16];
    uint32_t commands = 0;
    int rc = 0;

    if (options->resp3) { /* HELLO 3 [AUTH user password] */
        const char *argv[] = {"HELLO", "3", "AUTH", user, options->password};
        rc = write_command(link, true, options->password ? 5 : 2, argv, NULL);
        commands++;
    } else if (options->password != NULL) { /* AUTH [user] password */
        const char *argv[] = {"AUTH", user, options->password};
        rc = options->username
                 ? write_command(link, true, 3, argv, NULL)
                 : write_command(link, true, 2, (const char *[]){"AUTH", options->password}, NULL);
        commands++;
    }
    if (rc == 0 && options->database != 0 && !link->subscriber) {
        snprintf(database, sizeof(database), "%u", options->database);
        rc = write_command(link, true, 2, (const char *[]){"SELECT", database}, NULL);
        commands++;
    }
    for (uint32_t i = 0; link->subscriber && i < link->redis->options.subscriptions; i++) {
        link->redis->subs[i].confirmed = false; /* until this connection's say so */
    }
    if (rc == 0 && link->subscriber && (rc = subscribe_all(link, false)) == 0) {
        rc = subscribe_all(link, true);
    }
    if (rc < 0 || !sxe__redis_in_ring(link, commands, PENDING_SETUP)) {
        return rc < 0 ? rc : -ENOBUFS;
    }
    return 0;
}

static bool is(const struct sxe_redis_reply *reply, const char *word)
{
    return (reply->type == SXE_REDIS_STRING || reply->type == SXE_REDIS_STATUS) &&
           reply->len == strlen(word) && strncasecmp(reply->str, word, reply->len) == 0;
}

static struct subscription *find(sxe_redis_t *redis, const char *name, size_t len, bool pattern)
{
    for (uint32_t i = 0; i < redis->options.subscriptions; i++) {
        struct subscription *sub = &redis->subs[i];
        if (sub->name != NULL && sub->pattern == pattern && sub->len == len &&
            memcmp(sub->name, name, len) == 0) {
            return sub;
        }
    }
    return NULL;
}

bool sxe__redis_message(struct link *link, const struct sxe_redis_reply *reply)
{
    const struct sxe_redis_reply *e = reply->element;
    struct subscription *sub;

    if (reply->type != SXE_REDIS_PUSH && (!link->subscriber || reply->type != SXE_REDIS_ARRAY ||
                                          reply->len < 3 || e[0].type != SXE_REDIS_STRING)) {
        return false; /* a reply to a command */
    }
    if (reply->len < 3) { /* a push of another kind, or none: nothing for us */
        return true;
    }
    if (reply->len == 3 && is(&e[0], "message") && e[1].type == SXE_REDIS_STRING &&
        e[2].type == SXE_REDIS_STRING) {
        sub = find(link->redis, e[1].str, e[1].len, false);
    } else if (reply->len == 4 && is(&e[0], "pmessage") && e[1].type == SXE_REDIS_STRING &&
               e[2].type == SXE_REDIS_STRING && e[3].type == SXE_REDIS_STRING) {
        sub = find(link->redis, e[1].str, e[1].len, true);
        e++; /* the channel and the message follow the pattern */
    } else {
        bool pattern = is(&e[0], "psubscribe");
        if (reply->len == 3 && (pattern || is(&e[0], "subscribe")) &&
            e[1].type == SXE_REDIS_STRING &&
            (sub = find(link->redis, e[1].str, e[1].len, pattern)) != NULL) {
            sub->confirmed = true;
        }
        return reply->type == SXE_REDIS_PUSH || link->subscriber; /* (un)subscribed */
    }
    if (sub != NULL) { /* none: one just unsubscribed, whose messages may still come */
        link->redis->stats.messages++;
        sub->on_message(sub->arg, e[1].str, e[1].len, e[2].str, e[2].len);
    }
    return true;
}

int sxe_redis_subscribe(sxe_redis_t *redis, const char *channel, int pattern,
                        sxe_redis_message_t on_message, void *arg)
{
    struct subscription *free_entry = NULL;
    struct link *link = &redis->pubsub;

    if (!SXE_CHECK(redis != NULL && channel != NULL && on_message != NULL)) {
        return -EINVAL;
    }
    if (redis->destroying) {
        return -ESHUTDOWN;
    }
    if (find(redis, channel, strlen(channel), pattern != 0) != NULL) {
        return -EEXIST;
    }
    for (uint32_t i = 0; i < redis->options.subscriptions && free_entry == NULL; i++) {
        free_entry = redis->subs[i].name == NULL ? &redis->subs[i] : NULL;
    }
    if (free_entry == NULL) {
        return -ENOBUFS;
    }
    if ((free_entry->name = strdup(channel)) == NULL) {
        return -ENOMEM;
    }
    free_entry->len = strlen(channel);
    free_entry->pattern = pattern != 0;
    free_entry->confirmed = false;
    free_entry->on_message = on_message;
    free_entry->arg = arg;
    if (link->up) {
        const char *argv[] = {pattern ? "PSUBSCRIBE" : "SUBSCRIBE", channel};
        if (write_command(link, false, 2, argv, NULL) < 0) { /* past queue_bytes: again */
            SXE_LOG_WARN("redis: a subscription could not be sent: reconnecting");
            sxe__redis_reset(link, -ECONNRESET);
        }
    } else if (link->conn == NULL && !sxe_timer_active(&link->retry)) {
        sxe__redis_connect(link); /* the first: the link is made now */
    }
    return 0;
}

int sxe_redis_unsubscribe(sxe_redis_t *redis, const char *channel, int pattern)
{
    struct subscription *sub;

    if (!SXE_CHECK(redis != NULL && channel != NULL)) {
        return -EINVAL;
    }
    if ((sub = find(redis, channel, strlen(channel), pattern != 0)) == NULL) {
        return -ENOENT;
    }
    free(sub->name);
    sub->name = NULL;
    if (redis->pubsub.up) {
        const char *argv[] = {pattern ? "PUNSUBSCRIBE" : "UNSUBSCRIBE", channel};
        if (write_command(&redis->pubsub, false, 2, argv, NULL) < 0) {
            sxe__redis_reset(&redis->pubsub, -ECONNRESET);
        }
    }
    return 0;
}

uint32_t sxe__redis_confirmed(const sxe_redis_t *redis)
{
    uint32_t count = 0;

    for (uint32_t i = 0; redis->pubsub.up && i < redis->options.subscriptions; i++) {
        count += redis->subs[i].name != NULL && redis->subs[i].confirmed;
    }
    return count;
}
