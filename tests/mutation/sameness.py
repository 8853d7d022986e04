"""Which mutants are the same program: by the runner's rules, or listed in equivalent.txt."""
import glob
import os
import re
import sys

import places
from places import EQUIVALENT

TOKEN = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|[A-Za-z_]\w*|\.?\d[\w.]*'
                   r'|->|\+\+|--|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|\S')
COMMENT = re.compile(r'//[^\n]*|/\*.*?\*/|("(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')', re.S)


def tokens(text):
    """The C tokens of text, comments left out (strings are kept whole), and each integer
    constant as its value (0x00 is 0)."""
    return [constant(token) for token in
            TOKEN.findall(COMMENT.sub(lambda m: m.group(1) or " ", text))]


def constant(token):
    """An integer constant's value as text (suffixes kept), or the token as it is."""
    match = re.fullmatch(r"(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)([uUlL]*)", token)
    if not match:
        return token
    digits = match.group(1)
    base = 16 if digits[:2] in ("0x", "0X") else 8 if digits.startswith("0") else 10
    return str(int(digits, base)) + match.group(2).lower()


def same_code(mutant):
    """Why the mutant is the same program by rule, or None. The rules:
    - a statement inserted right after a return, break, continue or goto (braces are always
      written, so that line is a statement of its own): it is never reached;
    - no code changes (the change is in a comment, or only spacing, or a constant written
      another way, 0x00 as 0): the same tokens;
    - a continue inserted where only closing braces follow up to the end of a loop's body, or
      before the break of a switch that is the last statement of a loop's body: the loop goes
      on as it would; a statement inserted right
      before the same statement: it does what that one does;
    - NULL or 0 became (0==1), or 1 became (1==1): an integer constant expression of the same
      value (and of value 0, a null pointer constant), so the comparison or argument is the same;
    - a pointer compared with NULL by order where the original tested (in)equality: p > NULL is
      p != NULL and p <= NULL is p == NULL (NULL is the lowest address), which no test can tell
      apart (p < NULL and p >= NULL are not the same, and are judged);
    - likewise a value compared with a maximum (UINT32_MAX, or a macro defined as one, such as
      SXE_NONE): x < MAX is x != MAX and x >= MAX is x == MAX, for a value of that type or
      narrower (the sentinels are compared with values of their own type);
    - a number changed in the [ ] of a function's parameter: C takes an array parameter as a
      pointer and ignores its size;
    - the mode of an open() whose flags have neither O_CREAT nor O_TMPFILE: the kernel reads no
      mode then."""
    if mutant.inserted and re.match(r"(return\b|break;|continue;|goto )", mutant.original.strip()) \
            and mutant.original.rstrip().endswith(";"):
        return "a statement inserted after a return, break, continue or goto: never reached"
    with open(os.path.join(places.SOURCE, mutant.name)) as file:
        text = file.read()
    lines = text.splitlines()
    following = lines[mutant.line - 1].strip() if mutant.inserted and \
        mutant.line - 1 < len(lines) else None
    if following is not None and following == mutant.mutated.strip():
        return "the statement inserted is the one that follows it: the same"
    if mutant.inserted and mutant.mutated.strip() == "continue;" and ends_loop_body(text, mutant):
        return "a continue where only closing braces follow to a loop's end: the loop goes on"
    if mutant.inserted and mutant.mutated.strip() == "continue;" and following == "break;" and \
            switch_ends_loop_body(lines, mutant.line - 1):
        return "a continue inserted before the break of a switch that ends a loop's body: the " \
               "loop goes on the same"
    if not mutant.inserted and open_mode_only(mutant.original, mutant.mutated):
        return "the mode of an open() without O_CREAT or O_TMPFILE, which the kernel ignores"
    before = tokens(text)
    with open(mutant.path) as file:
        after = tokens(file.read())
    if before == after:
        return "no code changes (a comment or spacing)"

    def value(sequence):
        return " ".join("0" if token == "NULL" else token for token in sequence).replace(
            "( 0 == 1 )", "0").replace("( 1 == 1 )", "1")

    if value(before) == value(after):
        return "NULL or 0 became (0==1), or 1 became (1==1): the same value"
    if len(before) == len(after):
        diff = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
        if len(diff) == 1:
            i = diff[0]
            pair = (before[i], after[i])
            right = i + 1 < len(after) and after[i + 1] == "NULL"
            left = i > 0 and after[i - 1] == "NULL"
            if (right and pair in (("!=", ">"), ("==", "<="))) or \
                    (left and pair in (("!=", "<"), ("==", ">="))):
                return "a pointer compared with NULL by order: p > NULL is p != NULL, " \
                       "p <= NULL is p == NULL"
            maxima = maximum_names(mutant.name)
            ends = (")", "&&", "||", ";", "?", ":", ",", "]", "}")
            starts = ("(", "&&", "||", "?", ":", ",", "return", "=", "!")
            if (i + 2 < len(after) and after[i + 1] in maxima and after[i + 2] in ends and
                    pair in (("!=", "<"), ("==", ">="))) or \
                    (i > 1 and after[i - 1] in maxima and after[i - 2] in starts and
                     pair in (("!=", ">"), ("==", "<="))):
                return "a value compared with its type's maximum (a sentinel such as " \
                       "UINT32_MAX) by order: x < MAX is x != MAX, x >= MAX is x == MAX"
            if array_parameter(before, i, mutant):
                return "the size of an array parameter, which C ignores (it is a pointer)"
    return None


OPEN_CALL = re.compile(r"\bopen\((.*),\s*([^,]*)\)")  # open(path, flags, mode): its flags, mode


def open_mode_only(original, mutated):
    """Whether the lines differ only in the mode of an open() that creates no file."""
    was, now = OPEN_CALL.search(original), OPEN_CALL.search(mutated)
    if was is None or now is None or re.search(r"\bO_(CREAT|TMPFILE)\b", was.group(1)):
        return False
    return was.group(1) == now.group(1) and was.group(2) != now.group(2) and \
        original[:was.start()] == mutated[:now.start()] and \
        original[was.end():] == mutated[now.end():]


def maximum_names(name):
    """The names that stand for an unsigned type's maximum in name: the <stdint.h> ones and the
    macros defined as one of them, in the file itself or in the headers of src/ and include/."""
    if name not in maximum_names.cache:
        found = {"UINT8_MAX", "UINT16_MAX", "UINT32_MAX", "UINT64_MAX", "SIZE_MAX", "UINT_MAX",
                 "ULONG_MAX", "ULLONG_MAX"}
        own = os.path.join(places.SOURCE, name)
        headers = [path for pattern in ("src/**/*.h", "include/**/*.h")
                   for path in glob.glob(os.path.join(places.SOURCE, pattern), recursive=True)]
        definitions = []
        for path in [own] + headers:
            with open(path) as file:
                for match in re.finditer(r"^#define\s+(\w+)\s+\(?(\w+)\)?\s*(?:/[*/].*)?$",
                                         file.read(), re.M):
                    definitions.append((path == own, match.group(1), match.group(2)))
        ownnames = {macro for local, macro, _ in definitions if local}
        for _ in range(3):  # a macro defined as such a macro
            for local, macro, value in definitions:
                if value in found and (local or macro not in ownnames):
                    found.add(macro)
        maximum_names.cache[name] = found
    return maximum_names.cache[name]


maximum_names.cache = {}


def array_parameter(code, i, mutant):
    """Whether token i of the file's tokens is inside [ ] in the parameters of a function's
    head (a line at column 0 naming a function)."""
    head = mutant.original
    if mutant.inserted or not re.match(r"[A-Za-z_][\w\s\*]*\(", head) or "=" in head:
        return False
    depth = 0
    for at in range(i, max(i - 6, -1), -1):
        if code[at] == "]":
            return False
        if code[at] == "[":
            depth = 1
            break
    return depth == 1 and "(" in code[max(0, i - 40):i]


def file_scope(name, line):
    """Whether line (1-based, outside any function) is part of a definition that only its own
    file sees: a static variable or table, a macro, a type. Code of that file alone uses it, so
    only the tests that run the file can see it change."""
    with open(os.path.join(places.SOURCE, name)) as file:
        text = file.read().splitlines()
    at = line - 1
    while at > 0 and (not text[at] or text[at][0].isspace() or text[at].startswith("}") or
                      text[at - 1].endswith("\\")):
        at -= 1  # up to the line the definition starts on
    return text[at].startswith(("static ", "#define ", "struct ", "enum ", "union ", "typedef "))


def ends_loop_body(text, mutant):
    """Whether only closing braces follow the inserted line up to the end of a for, while or do
    loop's body (closing an if or a switch on the way): a continue there goes where the loop
    would go anyway."""
    lines = text.splitlines()
    at = mutant.line - 1  # the original line that follows the inserted statement (0-based)
    while at < len(lines) and lines[at].strip() == "}":
        head = opener(lines, at)
        if head is None:
            return False
        if lines[head].strip().startswith(("for (", "while (", "do {")):
            return True
        at += 1
    return False


def opener(lines, at):
    """The index of the line that opens the block line at (0-based) is in, or None."""
    depth = 0
    for above in range(at - 1, -1, -1):
        code = tokens(lines[above])
        for token in reversed(code):
            if token == "}":
                depth += 1
            elif token == "{":
                if depth == 0:
                    return above
                depth -= 1
    return None


def closer(lines, at):
    """The index of the line that closes the block opened on line at (0-based), or None."""
    depth = 0
    for below in range(at, len(lines)):
        for token in tokens(lines[below]):
            if token == "{":
                depth += 1
            elif token == "}":
                depth -= 1
                if depth == 0:
                    return below
    return None


def switch_ends_loop_body(lines, at):
    """Whether line at (0-based) is in a switch whose end is the end of a loop's body."""
    head = opener(lines, at)
    if head is None or not lines[head].strip().startswith("switch ("):
        return False
    end = closer(lines, head)
    if end is None or end + 1 >= len(lines) or lines[end + 1].strip() != "}":
        return False
    loop = opener(lines, end + 1)
    return loop is not None and lines[loop].strip().startswith(("for (", "while (", "do {"))


def unreachable_in_debug(name, line):
    """Whether line (1-based) of name is in the body of `if (!SXE_CHECK(...))` or
    `if (SXE_NEVER(...))`: the assertion aborts first in the debug build the mutants are judged
    in, so no test there can reach it (the release build's tests check those returns)."""
    with open(os.path.join(places.SOURCE, name)) as file:
        text = file.read().splitlines()
    opened = False  # a line ending the condition with "{" lies between: line is in the body
    for above in range(line - 2, max(line - 10, -1), -1):
        stripped = text[above].strip()
        if stripped == "}":
            return False
        opened = opened or stripped.endswith("{")
        if stripped.startswith(("if (!SXE_CHECK(", "if (SXE_NEVER(")):
            return opened
    return False


def equivalent_entries():
    """The entries of equivalent.txt: (file, line hint, original line, mutated line, reason)."""
    entries = []
    if os.path.exists(EQUIVALENT):
        with open(EQUIVALENT) as file:
            for number, line in enumerate(file, 1):
                if not line.strip() or line.startswith("#"):
                    continue
                fields = line.rstrip("\n").split("\t")
                if len(fields) != 4:
                    sys.exit(f"mutation: {EQUIVALENT}:{number}: want 4 tab-separated fields")
                where, original, mutated, reason = fields
                name, hint = where.rsplit(":", 1)
                entries.append((name, int(hint), original.strip(), mutated.strip(), reason))
    return entries


def match_equivalents(entries, mutants_by_file):
    """The mutants the entries name, as {id(mutant): entry}. An entry names the mutant of its file
    with its original and mutated lines; if several lines of the file give that same pair, the
    one nearest the line number it gives (a hint, so that an entry survives edits elsewhere in
    its file). Also returns the entries that name no mutant (stale: the code changed)."""
    named = {}
    stale = []
    for entry in entries:
        name, hint, original, mutated, _ = entry
        candidates = [m for m in mutants_by_file(name)
                      if (m.original.strip(), m.mutated.strip()) == (original, mutated)
                      and id(m) not in named]
        if not candidates:
            stale.append(entry)
            continue
        best = min(candidates, key=lambda m: abs(m.line - hint))
        named[id(best)] = entry
    return named, stale
