/*
 * hiredis's side of bench/redis: its asynchronous client on libuv (hiredis's own adapter, as its
 * users attach it), SET and GET of a 3-byte value in turn, 16 kept in flight (each callback sends
 * the next) and then one at a time; commands a second and the process's CPU per command, each
 * reply checked. Commands are given as argument vectors (redisAsyncCommandArgv), as bench/redis
 * gives them, so neither formats a string. Prints what bench/redis --json prints.
 * Usage: hiredis-uv [--json] [--quick] PORT [COMMANDS (1000000)] [ROUNDS (1)]
 */
#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <uv.h>

#define PIPELINED 16

static uv_loop_t *loop;
static redisAsyncContext *context;
static uint64_t sent, finished, wanted;

static const char *set[] = {"SET", "key:000000000001", "xxx"}; /* hiredis takes const char ** */
static const char *get[] = {"GET", "key:000000000001"};
static const size_t set_len[] = {3, 16, 3}, get_len[] = {3, 16};

static void send_one(void);

static void replied(redisAsyncContext *c, void *r, void *arg)
{
    redisReply *reply = r;
    bool was_set = arg != NULL;

    (void)c;
    if (reply == NULL || (was_set && (reply->type != REDIS_REPLY_STATUS || reply->len != 2)) ||
        (!was_set && (reply->type != REDIS_REPLY_STRING || reply->len != 3 ||
                      memcmp(reply->str, "xxx", 3) != 0))) {
        fprintf(stderr, "hiredis-uv: a wrong reply\n");
        exit(1);
    }
    if (++finished == wanted) {
        uv_stop(loop);
    } else if (sent < wanted) {
        send_one();
    }
}

static void send_one(void)
{
    bool is_set = sent++ % 2 == 0;

    if (redisAsyncCommandArgv(context, replied, is_set ? (void *)1 : NULL, is_set ? 3 : 2,
                              is_set ? set : get, is_set ? set_len : get_len) != REDIS_OK) {
        fprintf(stderr, "hiredis-uv: a command was refused\n");
        exit(1);
    }
}

static double cpu_us(void)
{
    struct rusage usage;

    getrusage(RUSAGE_SELF, &usage);
    return (double)usage.ru_utime.tv_sec * 1e6 + (double)usage.ru_utime.tv_usec +
           (double)usage.ru_stime.tv_sec * 1e6 + (double)usage.ru_stime.tv_usec;
}

static double run(uint64_t count, uint64_t in_flight, double *cpu)
{
    double before = cpu_us();
    uint64_t start = uv_hrtime();

    sent = finished = 0;
    wanted = count;
    while (sent < in_flight && sent < count) {
        send_one();
    }
    uv_run(loop, UV_RUN_DEFAULT);
    *cpu = (cpu_us() - before) / (double)count;
    return (double)count * 1e9 / (double)(uv_hrtime() - start);
}

static bool option(int *argc, char **argv, const char *name)
{
    bool seen = false;
    int kept = 1;

    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], name) == 0) {
            seen = true;
        } else {
            argv[kept++] = argv[i];
        }
    }
    *argc = kept;
    return seen;
}

static void row(const char *name, const char *unit, const char *better, const double *values,
                unsigned rounds, bool last)
{
    printf("{\"name\": \"%s\", \"unit\": \"%s\", \"better\": \"%s\", \"rounds\": [", name, unit,
           better);
    for (unsigned r = 0; r < rounds; r++) {
        printf("%s%.6g", r ? ", " : "", values[r]);
    }
    printf("]}%s", last ? "" : ", ");
}

int main(int argc, char **argv)
{
    bool json = option(&argc, argv, "--json");
    bool quick = option(&argc, argv, "--quick");
    uint64_t count = argc > 2 ? strtoull(argv[2], NULL, 10) : quick ? 100000 : 1000000;
    unsigned rounds = argc > 3 ? (unsigned)atoi(argv[3]) : 1;
    double rate[2][64], cpu[2][64];

    if (argc < 2 || count < 10 || rounds == 0 || rounds > 64) {
        fprintf(stderr, "usage: hiredis-uv [--json] [--quick] PORT [COMMANDS] [ROUNDS]\n");
        return 1;
    }
    loop = uv_default_loop();
    context = redisAsyncConnect("127.0.0.1", atoi(argv[1]));
    if (context == NULL || context->err || redisLibuvAttach(context, loop) != REDIS_OK) {
        fprintf(stderr, "hiredis-uv: cannot connect\n");
        return 1;
    }
    for (unsigned r = 0; r < rounds; r++) {
        fprintf(stderr, "hiredis-uv: round %u of %u\n", r + 1, rounds);
        rate[0][r] = run(count, PIPELINED, &cpu[0][r]);
        rate[1][r] = run(count / 10, 1, &cpu[1][r]);
    }
    if (!json) {
        for (unsigned r = 0; r < rounds; r++) {
            printf("round %u: %.0f commands/s and %.2f us CPU each with %d in flight; %.0f/s and "
                   "%.2f us one at a time\n",
                   r + 1, rate[0][r], cpu[0][r], PIPELINED, rate[1][r], cpu[1][r]);
        }
    } else {
        printf("{\"bench\": \"redis\", \"params\": {\"client\": \"hiredis %d.%d.%d on libuv\", "
               "\"commands\": %llu}, \"rows\": [",
               HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH, (unsigned long long)count);
        row("GET/SET, 16 in flight", "commands/s", "higher", rate[0], rounds, false);
        row("CPU per command, 16 in flight", "us", "lower", cpu[0], rounds, false);
        row("GET/SET, one at a time", "commands/s", "higher", rate[1], rounds, false);
        row("CPU per command, one at a time", "us", "lower", cpu[1], rounds, true);
        printf("]}\n");
    }
    redisAsyncDisconnect(context);
    uv_run(loop, UV_RUN_DEFAULT);
    return 0;
}
