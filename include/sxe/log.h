/**
 * @file sxe/log.h
 * @brief Leveled logging, call-tree tracing, hex dumps and assertions.
 *
 * A log line looks like this:
 *
 *     20261121 213012.345 T  12345 000042 INFO    > sxe_pool_create(count=8)
 *     |                   |        |      |     |
 *     UTC time, ms        thread   object level indentation (two spaces per traced call)
 *
 * The object id is the connection or pool element the thread is working on (see
 * sxe_log_set_id()), or "------" when there is none.
 *
 * Levels are set per module. A module is a name such as POOL; each library source file belongs to
 * one, and code outside the library logs to MAIN unless it defines SXE_LOG_MODULE (see below).
 * The level of module M is, first found wins:
 *   1. the environment variable SXE_LOG_LEVEL_M (for example SXE_LOG_LEVEL_POOL=6);
 *   2. sxe_log_set_module_level("M", ...);
 *   3. the environment variable SXE_LOG_LEVEL (for example SXE_LOG_LEVEL=3);
 *   4. sxe_log_set_level(...), which defaults to SXE_LOG_LEVEL_INFO.
 * Environment values are a number from 0 (nothing) to 7 (everything) or a level name such as
 * "warn". A line is written when its level is at or below its module's level.
 *
 * Every macro checks the level before it evaluates its arguments. In builds without SXE_DEBUG
 * (release builds), SXE_LOG_TRACE, SXE_LOG_DUMP, SXE_LOG_ENTER, SXE_LOG_LEAVE and SXE_ASSERT
 * compile to nothing: their arguments are type-checked but never evaluated, and no call is made.
 *
 * To log to a module of your own, define the module once in the source file, before including
 * this header:
 *
 *     #define SXE_LOG_MODULE app_log
 *     #include <sxe/log.h>
 *     static struct sxe_log_module app_log = SXE_LOG_MODULE_INIT(APP);
 *
 * Thread-safety: all functions may be called from any thread. Each line reaches the sink in one
 * call, so lines from different threads never interleave inside a line.
 */
#ifndef SXE_LOG_H
#define SXE_LOG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Severity of a line. Lower is more severe. */
enum sxe_log_level {
    SXE_LOG_LEVEL_NONE = 0, /**< As a setting only: write nothing. */
    SXE_LOG_LEVEL_FATAL = 1,
    SXE_LOG_LEVEL_ERROR = 2,
    SXE_LOG_LEVEL_WARN = 3,
    SXE_LOG_LEVEL_INFO = 4,
    SXE_LOG_LEVEL_DEBUG = 5,
    SXE_LOG_LEVEL_TRACE = 6, /**< Compiled out of release builds. */
    SXE_LOG_LEVEL_DUMP = 7,  /**< Hex dumps; compiled out of release builds. */
};

/** The level a module starts with until its first line resolves it. */
#define SXE_LOG_LEVEL_UNRESOLVED (-1)

/** The object id printed as "------": no connection or element. */
#define SXE_LOG_NO_ID UINT32_MAX

/** The longest line passed to a sink, newline included; longer lines are cut and end in "...". */
#define SXE_LOG_LINE_MAX 1024

/**
 * A log module: a name and its resolved level. Define one per source file with
 * SXE_LOG_MODULE_INIT; never touch the fields.
 */
struct sxe_log_module {
    const char *name;            /**< Upper case, as in SXE_LOG_LEVEL_<name>. */
    int level;                   /**< Resolved level, or SXE_LOG_LEVEL_UNRESOLVED. */
    struct sxe_log_module *next; /**< Registry of resolved modules. */
};

#define SXE_LOG_MODULE_INIT(NAME)                                                                  \
    {                                                                                              \
        .name = #NAME, .level = SXE_LOG_LEVEL_UNRESOLVED                                           \
    }

/** The module of code that does not define SXE_LOG_MODULE. Its name is MAIN. */
extern struct sxe_log_module sxe_log_module_main;

#ifndef SXE_LOG_MODULE
#define SXE_LOG_MODULE sxe_log_module_main
#endif

/**
 * Receives each complete line, newline included, once its level has passed the filter.
 * @param ctx   The pointer given to sxe_log_set_sink().
 * @param level The line's level.
 * @param line  The formatted line; valid only during the call.
 * @param len   Its length in bytes, newline included.
 * A sink may be called from several threads at once. It must not log.
 */
typedef void (*sxe_log_sink_t)(void *ctx, enum sxe_log_level level, const char *line, size_t len);

/**
 * Sends every line to sink(ctx, ...), or, when sink is NULL, back to the default sink: standard
 * error. Use it to capture lines in tests or to forward them to syslog(3).
 */
void sxe_log_set_sink(sxe_log_sink_t sink, void *ctx);

/**
 * The default sink: writes the line to the file descriptor (intptr_t)ctx, retrying on EINTR and
 * short writes. Errors are dropped: logging never fails the caller.
 */
void sxe_log_sink_fd(void *ctx, enum sxe_log_level level, const char *line, size_t len);

/**
 * Sets the level of every module that neither the environment nor the program set itself.
 * @return 0, or -EINVAL for a level outside NONE..DUMP.
 */
int sxe_log_set_level(enum sxe_log_level level);

/**
 * Sets the level of the module called name (case-sensitive, for example "POOL").
 * @return 0, -EINVAL for a NULL or over-long name or a level outside NONE..DUMP, or -ENOBUFS when
 *         more than 32 modules have been set.
 */
int sxe_log_set_module_level(const char *name, enum sxe_log_level level);

/**
 * Names a library setting in the program's own words, for the library's messages that advise
 * raising it: after sxe_log_name_setting("options.connections", "--connections"), "connection
 * table full (10000): refusing connections; raise --connections ..." in sxe-httpd. Settings named
 * so: options.connections, options.buffers, options.large_buffers, options.timers,
 * options.deferred, sxe_fibers_options.count, SXE_LISTEN_EVICT_IDLE. Call at start-up, before other
 * threads run; words must outlive the program's logging.
 * @return 0, or -ENOBUFS past 16 names.
 */
int sxe_log_name_setting(const char *setting, const char *words);

/** The program's words for setting (see sxe_log_name_setting()), or setting itself. */
const char *sxe_log_setting(const char *setting);

/** The level that applies to the module called name right now. */
enum sxe_log_level sxe_log_get_module_level(const char *name);

/**
 * Sets the object id that this thread's lines show, and returns the previous one. Pass
 * SXE_LOG_NO_ID to show "------". The id is per thread.
 */
uint32_t sxe_log_set_id(uint32_t id);

/** The name of a level, for example "WARN", or "?" for a value out of range. */
const char *sxe_log_level_name(enum sxe_log_level level);

/* The macros below are the interface; what follows is their machinery. */

int sxe__log_module_resolve(struct sxe_log_module *module);

static inline int sxe__log_module_level(struct sxe_log_module *module)
{
    int level = __atomic_load_n(&module->level, __ATOMIC_RELAXED);
    return level != SXE_LOG_LEVEL_UNRESOLVED ? level : sxe__log_module_resolve(module);
}

void sxe__log_line(struct sxe_log_module *module, enum sxe_log_level level, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
void sxe__log_hex(struct sxe_log_module *module, enum sxe_log_level level, const void *data,
                  size_t len);
void sxe__log_trace(struct sxe_log_module *module, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
void sxe__log_dump(struct sxe_log_module *module, const void *data, size_t len);
void sxe__log_enter(struct sxe_log_module *module, const char *function, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
void sxe__log_leave(struct sxe_log_module *module, const char *function, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
void sxe__assert_fail(const char *expression, const char *file, int line, const char *function)
    __attribute__((noreturn));

/* Type-checks a compiled-out macro's format and arguments without generating any code. */
static inline __attribute__((format(printf, 1, 2))) void sxe__log_nothing(const char *format, ...)
{
    (void)format;
}

/** True when a line at level would be written by this file's module. */
#define SXE_LOG_ENABLED(level) ((int)(level) <= sxe__log_module_level(&SXE_LOG_MODULE))

/** Writes a printf-style line at level, if enabled. No newline is needed. */
#define SXE_LOG(level, ...)                                                                        \
    do {                                                                                           \
        if (SXE_LOG_ENABLED(level)) {                                                              \
            sxe__log_line(&SXE_LOG_MODULE, (level), __VA_ARGS__);                                  \
        }                                                                                          \
    } while (0)

#define SXE_LOG_FATAL(...) SXE_LOG(SXE_LOG_LEVEL_FATAL, __VA_ARGS__)
#define SXE_LOG_ERROR(...) SXE_LOG(SXE_LOG_LEVEL_ERROR, __VA_ARGS__)
#define SXE_LOG_WARN(...)  SXE_LOG(SXE_LOG_LEVEL_WARN, __VA_ARGS__)
#define SXE_LOG_INFO(...)  SXE_LOG(SXE_LOG_LEVEL_INFO, __VA_ARGS__)
#define SXE_LOG_DEBUG(...) SXE_LOG(SXE_LOG_LEVEL_DEBUG, __VA_ARGS__)

/**
 * Writes a line at level the first time this statement runs in the process, and never again.
 * For conditions that may repeat at line rate, such as a full connection table.
 */
#define SXE_LOG_ONCE(level, ...)                                                                   \
    do {                                                                                           \
        static int sxe__log_once_done;                                                             \
        if (SXE_LOG_ENABLED(level) &&                                                              \
            !__atomic_exchange_n(&sxe__log_once_done, 1, __ATOMIC_RELAXED)) {                      \
            sxe__log_line(&SXE_LOG_MODULE, (level), __VA_ARGS__);                                  \
        }                                                                                          \
    } while (0)

/**
 * Hex-dumps len bytes at level, if enabled: one line per 16 bytes, with the offset, the bytes in
 * hex and the printable ones as text. Available in every build.
 */
#define SXE_LOG_HEX(level, data, len)                                                              \
    do {                                                                                           \
        if (SXE_LOG_ENABLED(level)) {                                                              \
            sxe__log_hex(&SXE_LOG_MODULE, (level), (data), (len));                                 \
        }                                                                                          \
    } while (0)

#ifdef SXE_DEBUG

/** A TRACE line. Compiled out of release builds. */
#define SXE_LOG_TRACE(...)                                                                         \
    do {                                                                                           \
        if (SXE_LOG_ENABLED(SXE_LOG_LEVEL_TRACE)) {                                                \
            sxe__log_trace(&SXE_LOG_MODULE, __VA_ARGS__);                                          \
        }                                                                                          \
    } while (0)

/** A hex dump at DUMP level. Compiled out of release builds. */
#define SXE_LOG_DUMP(data, len)                                                                    \
    do {                                                                                           \
        if (SXE_LOG_ENABLED(SXE_LOG_LEVEL_DUMP)) {                                                 \
            sxe__log_dump(&SXE_LOG_MODULE, (data), (len));                                         \
        }                                                                                          \
    } while (0)

/**
 * Marks entry to the enclosing function: logs "> function<args>" at TRACE level and indents the
 * thread's following lines. The format describes the arguments, for example
 * SXE_LOG_ENTER("(count=%u)", count), or SXE_LOG_ENTER("()"). Each ENTER needs a matching
 * SXE_LOG_LEAVE on every path out of the function. The entered functions also form the call
 * path that a failed assertion prints, whatever the level. Compiled out of release builds.
 */
#define SXE_LOG_ENTER(...) sxe__log_enter(&SXE_LOG_MODULE, __func__, __VA_ARGS__)

/**
 * Marks a return from the enclosing function: logs "< function<result>" at TRACE level and
 * outdents, for example SXE_LOG_LEAVE(" = %d", rc), or SXE_LOG_LEAVE("()"). Compiled out of
 * release builds.
 */
#define SXE_LOG_LEAVE(...) sxe__log_leave(&SXE_LOG_MODULE, __func__, __VA_ARGS__)

/**
 * Asserts that expr holds. If not, logs the expression, its place and the traced call path at
 * FATAL level, then aborts. Compiled out of release builds: expr is not evaluated there.
 */
#define SXE_ASSERT(expr) ((expr) ? (void)0 : sxe__assert_fail(#expr, __FILE__, __LINE__, __func__))

/**
 * For invalid API use and "impossible" states that must still be survived: in debug builds,
 * asserts that expr holds; in release builds, evaluates to expr so the caller can return an
 * error. Usage: if (!SXE_CHECK(pool != NULL)) { return -EINVAL; }
 */
#define SXE_CHECK(expr) ((expr) ? 1 : (sxe__assert_fail(#expr, __FILE__, __LINE__, __func__), 0))

/**
 * The mirror of SXE_CHECK, for a branch that must never be taken but must be survived:
 * if (SXE_NEVER(rc != 0)) { return 0; }. Asserts in debug builds; evaluates to expr in release.
 */
#define SXE_NEVER(expr)                                                                            \
    ((expr) ? (sxe__assert_fail("never " #expr, __FILE__, __LINE__, __func__), 1) : 0)

#else

#define SXE_LOG_TRACE(...)                                                                         \
    do {                                                                                           \
        if (0) {                                                                                   \
            sxe__log_nothing(__VA_ARGS__);                                                         \
        }                                                                                          \
    } while (0)
#define SXE_LOG_DUMP(data, len)                                                                    \
    do {                                                                                           \
        if (0) {                                                                                   \
            (void)(data);                                                                          \
            (void)(len);                                                                           \
        }                                                                                          \
    } while (0)
#define SXE_LOG_ENTER(...) SXE_LOG_TRACE(__VA_ARGS__)
#define SXE_LOG_LEAVE(...) SXE_LOG_TRACE(__VA_ARGS__)
#define SXE_ASSERT(expr)   ((void)sizeof(!(expr)))
#define SXE_CHECK(expr)    (__builtin_expect(!!(expr), 1))
#define SXE_NEVER(expr)    (__builtin_expect(!!(expr), 0))

#endif

#ifdef __cplusplus
}
#endif

#endif
