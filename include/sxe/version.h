/**
 * @file sxe/version.h
 * @brief Which sxe: the version a program was built against, and the one it runs with.
 */
#ifndef SXE_VERSION_H
#define SXE_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

/* The one place the version is written: CMakeLists.txt reads it from here. */
#define SXE_VERSION_MAJOR 0
#define SXE_VERSION_MINOR 1
#define SXE_VERSION_PATCH 0

#define SXE__STRING(x)        #x
#define SXE__VERSION(a, b, c) SXE__STRING(a) "." SXE__STRING(b) "." SXE__STRING(c)

/** The version the program was compiled against, as text: "0.1.0". */
#define SXE_VERSION SXE__VERSION(SXE_VERSION_MAJOR, SXE_VERSION_MINOR, SXE_VERSION_PATCH)

/**
 * The version of the library the program runs with, as text: SXE_VERSION of the library's own
 * build, which differs from the program's when a newer shared library was installed under it.
 */
const char *sxe_version(void);

#ifdef __cplusplus
}
#endif

#endif
