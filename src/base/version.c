/* The library's own version, for programs linked against a shared library built apart from them. */
#include "sxe/version.h"

const char *sxe_version(void)
{
    return SXE_VERSION;
}
