/* The HTTP parser's internals that tests reach for. */
#pragma once

#include <stdbool.h>

/*
 * Chooses how token characters are scanned: SSSE3 when use is true and the CPU has it (the
 * default, chosen at start-up), else SSE2. Tests run the parser both ways.
 */
void sxe__http_parser_use_ssse3(bool use);
