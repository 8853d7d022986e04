/*
 * What the Redis client costs (sxe/redis.h): SET and GET of a 3-byte value (redis-benchmark's
 * default) in turn against a redis-server, 16 kept in flight (each callback sends the next) and
 * then one at a time: commands a second, and the process's CPU per command, the figure that says
 * what the client itself costs (the server runs on another CPU). Every reply is checked: +OK for
 * a SET, the 3 bytes for a GET. bench/peers/hiredis-uv.c measures hiredis's async client on libuv
 * the same way; bench/all's "redis" suite runs the two and redis-benchmark in turn.
 *
 *     taskset -c 1 bench/redis [--json] [--quick] PORT [COMMANDS (1000000)] [ROUNDS (1)]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sxe/clock.h"
#include "sxe/loop.h"
#include "sxe/redis.h"

#include "bench_json.h"
#include "bench_progress.h"

#define PIPELINED 16

static sxe_loop_t *loop;
static sxe_redis_t *redis;
static uint64_t sent, finished, wanted;

static const char *const set[] = {"SET", "key:000000000001", "xxx"};
static const char *const get[] = {"GET", "key:000000000001"};

static void send_one(void);

static void replied(void *arg, int status, const struct sxe_redis_reply *reply)
{
    bool was_set = arg != NULL;

    if (status != 0 || (was_set && (reply->type != SXE_REDIS_STATUS || reply->len != 2)) ||
        (!was_set && (reply->type != SXE_REDIS_STRING || reply->len != 3 ||
                      memcmp(reply->str, "xxx", 3) != 0))) {
        fprintf(stderr, "redis: a wrong reply (status %d)\n", status);
        exit(1);
    }
    if (++finished == wanted) {
        sxe_loop_stop(loop);
    } else if (sent < wanted) {
        send_one();
    }
}

static void send_one(void)
{
    bool is_set = sent++ % 2 == 0; /* SET, GET, SET, ... */

    if (sxe_redis_command(redis, replied, is_set ? (void *)1 : NULL, is_set ? 3 : 2,
                          is_set ? set : get, NULL) < 0) {
        fprintf(stderr, "redis: a command was refused\n");
        exit(1);
    }
}

/* Runs count commands with in_flight out at once: their rate, and *cpu the µs of CPU each. */
static double run(uint64_t count, uint64_t in_flight, double *cpu)
{
    double before = bench_cpu_us();
    uint64_t start = sxe_clock_mono_ns();

    sent = finished = 0;
    wanted = count;
    while (sent < in_flight && sent < count) {
        send_one();
    }
    if (sxe_loop_run(loop) < 0) {
        exit(1);
    }
    *cpu = (bench_cpu_us() - before) / (double)count;
    return (double)count * 1e9 / (double)(sxe_clock_mono_ns() - start);
}

int main(int argc, char **argv)
{
    bool json = bench_option(&argc, argv, "--json");
    bool quick = bench_option(&argc, argv, "--quick");
    uint64_t count = argc > 2 ? strtoull(argv[2], NULL, 10) : quick ? 100000 : 1000000;
    unsigned rounds = argc > 3 ? (unsigned)atoi(argv[3]) : 1;
    double rate[2][64], cpu[2][64];
    char address[32];
    struct bench_progress progress;

    snprintf(address, sizeof(address), "127.0.0.1:%s", argc > 1 ? argv[1] : "");
    if (argc < 2 || count < 10 || rounds == 0 || rounds > 64 || sxe_loop_create(&loop, NULL) < 0 ||
        sxe_redis_create(&redis, loop, address, NULL) < 0) {
        fprintf(stderr, "usage: redis [--json] [--quick] PORT [COMMANDS] [ROUNDS]\n");
        return 1;
    }
    bench_progress_begin(&progress, "redis");
    for (unsigned r = 0; r < rounds; r++) {
        bench_progress(&progress, "round %u of %u: %llu commands, %d in flight", r + 1, rounds,
                       (unsigned long long)count, PIPELINED);
        rate[0][r] = run(count, PIPELINED, &cpu[0][r]);
        bench_progress(&progress, "round %u of %u: %llu commands, one at a time", r + 1, rounds,
                       (unsigned long long)count / 10);
        rate[1][r] = run(count / 10, 1, &cpu[1][r]);
    }
    sxe_redis_destroy(redis);
    sxe_loop_destroy(loop);
    if (!json) {
        for (unsigned r = 0; r < rounds; r++) {
            printf("round %u: %.0f commands/s and %.2f us CPU each with %d in flight; %.0f/s and "
                   "%.2f us one at a time\n",
                   r + 1, rate[0][r], cpu[0][r], PIPELINED, rate[1][r], cpu[1][r]);
        }
        return 0;
    }
    struct bench_json out;
    bench_json_begin(&out, "redis");
    bench_json_param_text(&out, "client", "sxe_redis");
    bench_json_param(&out, "commands", count);
    bench_json_row(&out, "commands/s", BENCH_HIGHER, rate[0], rounds, "GET/SET, %d in flight",
                   PIPELINED);
    bench_json_row(&out, "us", BENCH_LOWER, cpu[0], rounds, "CPU per command, %d in flight",
                   PIPELINED);
    bench_json_row(&out, "commands/s", BENCH_HIGHER, rate[1], rounds, "GET/SET, one at a time");
    bench_json_row(&out, "us", BENCH_LOWER, cpu[1], rounds, "CPU per command, one at a time");
    return bench_json_end(&out);
}
