/*
 * The dictionary programs' command lines (dictionary.h): --help, a wrong option, a number.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "dictionary.h"

void dictionary_help(const char *text)
{
    fputs(text, stdout);
    exit(0);
}

void dictionary_wrong(const char *program)
{
    fprintf(stderr, "(%s --help explains its options)\n", program);
    exit(2);
}

unsigned long dictionary_number(const char *program, const char *option, const char *text,
                                unsigned long low, unsigned long high)
{
    char *end;

    errno = 0;
    unsigned long value = strtoul(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || value < low ||
        value > high) {
        fprintf(stderr, "%s: %s must be a whole number from %lu to %lu, not '%s'\n", program,
                option, low, high, text);
        dictionary_wrong(program);
    }
    return value;
}
