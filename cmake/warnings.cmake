# The one warning list. It applies to every target in the tree: library, tests, tools, examples
# and benchmarks. CI adds -Werror (SXE_WERROR=ON).
set(SXE_WARNINGS
  -Wall
  -Wextra
  -Wshadow
  -Wstrict-prototypes
  -Wmissing-prototypes
  -Wmissing-declarations
  -Wold-style-definition
  -Wformat=2
  -Wformat-overflow=2
  -Wvla
  -Wpointer-arith
  -Wwrite-strings
  -Wundef
  -Wcast-align
  -Wimplicit-fallthrough
  -Wnull-dereference
  -Wredundant-decls
  -Wnested-externs
)
if(SXE_WERROR)
  list(APPEND SXE_WARNINGS -Werror)
endif()
add_compile_options(${SXE_WARNINGS})
