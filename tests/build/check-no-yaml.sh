#!/bin/sh
# sxe-httpd without libyaml (-DSXE_YAML=OFF, or no libyaml-dev): tools/sxe-httpd/config_file.c
# compiles cleanly without it, and its reader refuses every file with -ENOTSUP and a reason that
# names the package, which --config prints.
#     tests/build/check-no-yaml.sh SOURCE_DIR [CC]
set -eu
root=$1
cc=${2:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/main.c" <<'C'
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config_file.h"

int main(void)
{
    struct config_file file;
    int rc = config_file_read("/etc/sxe-httpd.yaml", &file);

    printf("%d %zu %u %s\n", rc, file.count, file.line, file.why);
    return rc == -ENOTSUP && file.count == 0 && strstr(file.why, "libyaml-dev") != NULL ? 0 : 1;
}
C
"$cc" -std=gnu11 -Wall -Wextra -Werror -Wmissing-prototypes -I"$root/tools/sxe-httpd" \
  "$root/tools/sxe-httpd/config_file.c" "$tmp/main.c" -o "$tmp/no-yaml"
"$tmp/no-yaml"
echo "check-no-yaml: ok"
