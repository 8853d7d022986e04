/**
 * @file sxe/error.h
 * @brief How sxe reports errors.
 *
 * Every sxe function that can fail returns 0 (or a count) on success and a negative errno value
 * on failure, for example -ENOBUFS when a fixed capacity is exhausted. sxe never sets errno for
 * the caller to inspect. Functions whose result must be checked are marked SXE_MUST_CHECK, so the
 * compiler warns when a caller drops it.
 */
#ifndef SXE_ERROR_H
#define SXE_ERROR_H

#include <errno.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Marks a function whose return value the caller must not ignore. */
#define SXE_MUST_CHECK __attribute__((warn_unused_result))

/**
 * Describes an sxe result code.
 *
 * @param rc 0, or a negative errno value as returned by an sxe function. A positive errno value
 *           is described as its negation, so sxe_strerror(EPIPE) == sxe_strerror(-EPIPE).
 * @return A static, immutable string that is safe to use from any thread. It is never NULL: an
 *         unknown code yields "Unknown error".
 */
const char *sxe_strerror(int rc);

#ifdef __cplusplus
}
#endif

#endif
