/*
 * The Redis module's own header: RESP, read and written (resp.c); the client's links and their
 * commands (client.c); set-up, subscriptions and messages (pubsub.c).
 */
#ifndef SXE_REDIS_PRIVATE_H
#define SXE_REDIS_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe/redis.h"
#include "sxe/resolve.h"
#include "sxe/timer.h"

#define SXE__RESP_DEPTH 32 /* aggregates nested deeper are refused as not RESP */

/*
 * Looks at the reply that starts at data: @return the bytes it takes when it is all there (and
 * *nodes the replies it holds, itself included, for sxe__resp_build()), 0 when more must come
 * first, or -EPROTO when the bytes are not RESP.
 */
ssize_t sxe__resp_scan(const char *data, size_t len, size_t *nodes);

/* Builds the reply scanned whole at data into nodes (as many as the scan said): nodes[0] is it. */
void sxe__resp_build(const char *data, size_t len, struct sxe_redis_reply *nodes);

/* Writes a command as RESP (an array of bulk strings) into out if size bytes hold it.
 * @return the bytes it takes (more than size: nothing was written). */
size_t sxe__resp_command(char *out, size_t size, unsigned argc, const char *const *argv,
                         const size_t *len);

/* A copy of reply and all it points to, in one block (free() frees it), or NULL. */
struct sxe_redis_reply *sxe__resp_copy(const struct sxe_redis_reply *reply);

/* The client. */

enum pending_kind { PENDING_USER, PENDING_SETUP };

/* A command out: queued or sent, its reply not yet read. */
struct pending {
    sxe_redis_reply_t done;
    void *arg;
    uint64_t deadline; /* loop ns: its reply is late after this */
    uint32_t bytes;    /* its command's length (while down, its bytes wait in unsent) */
    uint8_t kind;      /* enum pending_kind: a set-up's reply is the client's own */
};

/* A connection to the server, made again when lost. */
struct link {
    sxe_redis_t *redis;
    sxe_conn_t *conn;  /* while connecting or up; NULL while down */
    bool up;           /* connected: commands go to conn */
    bool subscriber;   /* the pub/sub link */
    int down_errno;    /* why it is down (ECONNREFUSED, ...) */
    uint64_t backoff;  /* ns before the next connect */
    uint32_t setup;    /* set-up replies not yet read (at the ring's front); up and 0: set up */
    sxe_timer_t retry; /* the next connect */
    sxe_resolve_query_t *resolving; /* the server's name, asked for this link's connect */
    sxe_timer_t deadline;           /* the oldest command's deadline */
    struct pending *ring;           /* cap entries, count of them from head */
    uint32_t head, count, cap;
    char *unsent; /* bytes of commands not yet given to conn */
    size_t unsent_len, unsent_cap;
    struct sxe_redis_reply *nodes; /* where replies are built */
    size_t nodes_cap;
};

struct subscription {
    char *name; /* NULL: a free entry */
    size_t len;
    bool pattern;
    bool confirmed; /* by the server, on the pub/sub link up now */
    sxe_redis_message_t on_message;
    void *arg;
};

struct sxe_redis {
    sxe_loop_t *loop;
    struct sxe_redis_options options; /* defaults applied; username and password copied */
    struct sockaddr_storage address;  /* the server's, or (named) the one connected to last */
    socklen_t address_len;
    char *name;    /* a server given by name: its name, port and resolver, and which of its */
    uint16_t port; /* addresses the next connect goes to (the next, after one failed) */
    uint32_t prefer;
    sxe_resolver_t *resolver;
    bool own_resolver;
    struct link command, pubsub;
    struct pending *rings; /* both links' */
    struct subscription *subs;
    int busy;        /* the client's callbacks under way */
    bool destroying; /* its memory goes when busy falls to 0 */
    struct sxe_redis_stats stats;
};

/* client.c */
int sxe__redis_send(struct link *link, const char *bytes, size_t len);
void sxe__redis_fail_all(struct link *link, int status);
void sxe__redis_reset(struct link *link, int status);
void sxe__redis_connect(struct link *link);
bool sxe__redis_in_ring(struct link *link, uint32_t n, enum pending_kind kind);

/* pubsub.c */
int sxe__redis_options_copy(sxe_redis_t *redis, const struct sxe_redis_options *options);
void sxe__redis_free(sxe_redis_t *redis);
int sxe__redis_setup(struct link *link);
bool sxe__redis_message(struct link *link, const struct sxe_redis_reply *reply);
uint32_t sxe__redis_confirmed(const sxe_redis_t *redis);

#endif
