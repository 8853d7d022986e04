/**
 * @file sxe/redis.h
 * @brief A Redis client on the loop: RESP2 and RESP3, pipelining, pub/sub, reconnection with
 * backoff, AUTH and SELECT, timeouts, and a plain call from fibers.
 *
 *     static void got(void *arg, int status, const struct sxe_redis_reply *reply)
 *     {
 *         if (status < 0)                             // -ETIMEDOUT, -ECONNRESET, ...
 *             answer(arg, 503);
 *         else if (reply->type == SXE_REDIS_NIL)      // no such key
 *             answer(arg, 404);
 *         else
 *             answer(arg, 200);                       // reply->str, reply->len bytes
 *     }
 *     ...
 *     if (sxe_redis_create(&redis, loop, "127.0.0.1:6379", NULL) < 0)
 *         return 1;
 *     const char *get[] = {"GET", "greeting"};
 *     if (sxe_redis_command(redis, got, request, 2, get, NULL) < 0)   // -ENOBUFS: too many out
 *         answer(request, 503);
 *
 * Commands go out as they are given, without waiting for earlier replies (pipelining), and each
 * reply comes back to its own callback, in order. While the connection is down (the server
 * restarting, say) commands wait in a bounded queue and go out once it is up again; the client
 * reconnects by itself, sooner first and then less often (options.backoff_*), and says AUTH,
 * HELLO and SELECT again each time. A command already sent when the connection is lost fails
 * with -ECONNRESET: it may or may not have run, and it is never sent again. A command whose reply
 * is later than options.timeout_ns fails with -ETIMEDOUT, and so does everything sent after it:
 * the connection is closed and made again, since replies come in order.
 *
 * Subscriptions (sxe_redis_subscribe()) use a second connection of their own, made on the first,
 * and are made again on each reconnection. Pub/sub is at most once: a message published while
 * that connection is down is lost (Redis keeps none).
 *
 * A reply must fit in one of the loop's buffers (sxe_loop_options.buffer_size, or
 * large_buffer_size when the loop has large buffers); a bigger one fails its command with
 * -EMSGSIZE, and the connection is made again.
 *
 * Rules: every call on the loop's thread. The address is an IP address with its port
 * ("127.0.0.1:6379", "[::1]:6379", "localhost:6379"), a name with its port
 * ("redis.internal:6379"), or a Unix socket's path ("/run/redis/redis.sock"). A name is resolved
 * before each connect (sxe/resolve.h: from the cache while its TTL holds), so a server that moves
 * is followed when the connection is made again; a connect that fails moves the next one to the
 * name's next address; a name that does not resolve is a connection down (-ENOENT, say), asked
 * again after the backoff.
 */
#ifndef SXE_REDIS_H
#define SXE_REDIS_H

#include <stddef.h>
#include <stdint.h>

#include "sxe/error.h"
#include "sxe/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sxe_redis sxe_redis_t; /**< A client of one Redis server. */

/** What a reply is: RESP2's five kinds, and RESP3's. */
enum sxe_redis_type {
    SXE_REDIS_STRING,   /**< A bulk string ($): str, len. */
    SXE_REDIS_STATUS,   /**< A simple string (+, "OK"): str, len. */
    SXE_REDIS_ERROR,    /**< An error (- or !, "WRONGTYPE ..."): str, len. */
    SXE_REDIS_INTEGER,  /**< An integer (:): integer. */
    SXE_REDIS_NIL,      /**< No value ($-1, *-1, or RESP3's _). */
    SXE_REDIS_ARRAY,    /**< An array (*): len elements. */
    SXE_REDIS_MAP,      /**< RESP3 (%): len elements, key then value, len / 2 pairs. */
    SXE_REDIS_SET,      /**< RESP3 (~): len elements. */
    SXE_REDIS_PUSH,     /**< RESP3 (>): len elements, out of band (a pub/sub message). */
    SXE_REDIS_DOUBLE,   /**< RESP3 (,): number, and its text in str, len. */
    SXE_REDIS_BOOLEAN,  /**< RESP3 (#): integer 1 or 0. */
    SXE_REDIS_BIGNUM,   /**< RESP3 ((): its digits in str, len. */
    SXE_REDIS_VERBATIM, /**< RESP3 (=): str, len, after its format ("txt:"). */
};

/**
 * A reply. Its strings are not NUL-terminated (a value may hold any byte): use len. A reply given
 * to a callback lives until the callback returns; one from sxe_redis_call() until
 * sxe_redis_reply_free().
 */
struct sxe_redis_reply {
    enum sxe_redis_type type;
    size_t len;                            /**< Bytes of str, or elements of an aggregate. */
    const char *str;                       /**< The bytes of a string, status, error, ... */
    int64_t integer;                       /**< INTEGER, BOOLEAN. */
    double number;                         /**< DOUBLE. */
    const struct sxe_redis_reply *element; /**< An aggregate's elements. */
};

/** Zero fields take the defaults shown. */
struct sxe_redis_options {
    const char *username;    /**< AUTH's user (NULL: "default", or no AUTH without password). */
    const char *password;    /**< AUTH's password (NULL: no AUTH). */
    uint32_t database;       /**< SELECT this database after each connect (0: none needed). */
    int resp3;               /**< Nonzero: speak RESP3 (HELLO 3), for maps, sets, doubles... */
    uint32_t pending;        /**< Commands out at most, queued or sent (1024). */
    uint32_t queue_bytes;    /**< Bytes of commands queued while disconnected, at most (1 MiB). */
    uint64_t timeout_ns;     /**< A command's reply is late after this long (5 s). */
    uint64_t backoff_min_ns; /**< First wait before reconnecting (100 ms); doubles each time. */
    uint64_t backoff_max_ns; /**< Longest wait before reconnecting (5 s). */
    uint32_t subscriptions;  /**< Channels and patterns subscribed at once, at most (64). */
    /**
     * For a server given by name: the resolver that finds its addresses; NULL makes one for this
     * client (two of the loop's timers). It must outlive the client.
     */
    struct sxe_resolver *resolver;
};

/**
 * Runs when a command is over: status 0 and its reply (of type SXE_REDIS_ERROR when Redis refused
 * it), or a negative errno and NULL: -ETIMEDOUT (late; or, while disconnected, the reason the
 * connection is down, such as -ECONNREFUSED), -ECONNRESET (the connection was lost after it was
 * sent), -EMSGSIZE (its reply outgrew the buffers), -EPROTO (the server's bytes are not RESP),
 * -EACCES (AUTH, HELLO or SELECT was refused), -ECANCELED (the client was destroyed).
 */
typedef void (*sxe_redis_reply_t)(void *arg, int status, const struct sxe_redis_reply *reply);

/** Runs for each message on a subscribed channel (or one matching a subscribed pattern). */
typedef void (*sxe_redis_message_t)(void *arg, const char *channel, size_t channel_len,
                                    const char *message, size_t len);

/**
 * Makes a client of the server at address on loop, and starts connecting.
 * @return 0, -EINVAL for an address that does not parse or invalid options, -ENOMEM, -ENOBUFS
 *         (no timer or connection free in the loop), or for a name what sxe_resolver_create()
 *         says (-ENOTSUP when built without c-ares).
 */
SXE_MUST_CHECK int sxe_redis_create(sxe_redis_t **redis, sxe_loop_t *loop, const char *address,
                                    const struct sxe_redis_options *options);

/**
 * Closes the client's connections; every command still out is called back with -ECANCELED
 * (before this returns), and may not give the client new ones. May be called from the client's
 * own callbacks.
 */
void sxe_redis_destroy(sxe_redis_t *redis);

/**
 * Sends a command of argc arguments (argv[i], of len[i] bytes; len NULL: each NUL-terminated);
 * done(arg, status, reply) follows with its reply, never from inside this call.
 * @return 0; -ENOBUFS when options.pending commands are out, or options.queue_bytes are queued
 *         while disconnected; -ESHUTDOWN while the client is being destroyed; -EINVAL (asserts in
 *         debug builds) for no argument or a NULL one.
 */
SXE_MUST_CHECK int sxe_redis_command(sxe_redis_t *redis, sxe_redis_reply_t done, void *arg,
                                     unsigned argc, const char *const *argv, const size_t *len);

/**
 * From a fiber: sends the command and waits for its reply, while the loop runs on. *reply is the
 * reply (free it with sxe_redis_reply_free()), or NULL on an error.
 * @return 0, the status a callback would have had, -EPERM outside a fiber, or an error of
 *         sxe_redis_command().
 */
int sxe_redis_call(sxe_redis_t *redis, struct sxe_redis_reply **reply, unsigned argc,
                   const char *const *argv, const size_t *len);

/** Frees a reply of sxe_redis_call() (NULL is ignored). */
void sxe_redis_reply_free(struct sxe_redis_reply *reply);

/**
 * Subscribes to channel (or, with pattern nonzero, to the channels that match it, as PSUBSCRIBE),
 * calling on_message for each message, until sxe_redis_unsubscribe(). Kept across reconnections.
 * @return 0; -EEXIST if already subscribed; -ENOBUFS past options.subscriptions; -ESHUTDOWN
 *         while the client is being destroyed; -ENOMEM.
 */
SXE_MUST_CHECK int sxe_redis_subscribe(sxe_redis_t *redis, const char *channel, int pattern,
                                       sxe_redis_message_t on_message, void *arg);

/** Ends a subscription. @return 0, or -ENOENT if there is none of that name. */
int sxe_redis_unsubscribe(sxe_redis_t *redis, const char *channel, int pattern);

/** Counters of a client. */
struct sxe_redis_stats {
    uint64_t commands;   /**< Commands accepted. */
    uint64_t replies;    /**< Replies given to callbacks (errors included). */
    uint64_t failed;     /**< Commands called back with a negative status. */
    uint64_t messages;   /**< Pub/sub messages delivered. */
    uint64_t connects;   /**< Connections made (and set up) to the server, both kinds. */
    uint32_t out;        /**< Commands out now. */
    int connected;       /**< Whether the command connection is up and set up now. */
    uint32_t subscribed; /**< Subscriptions the server has confirmed on the connection up now. */
};

/** The client's counters. */
void sxe_redis_stats(const sxe_redis_t *redis, struct sxe_redis_stats *stats);

#ifdef __cplusplus
}
#endif

#endif
