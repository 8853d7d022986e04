#!/usr/bin/env python3
"""Turns llhttp-requests.json (llhttp's request corpus, decoded) into a C array for the parser's
conformance test. Usage: vectors.py INPUT.json OUTPUT.h"""
import base64
import json
import sys


def c_string(data):
    return '"' + "".join("\\x%02x" % byte for byte in data) + '"'


def main():
    cases = json.load(open(sys.argv[1]))
    with open(sys.argv[2], "w") as out:
        out.write("/* Generated from %s by tests/http/vectors.py: do not edit. */\n" % sys.argv[1])
        out.write("static const struct vector vectors[] = {\n")
        for case in cases:
            raw = base64.b64decode(case["raw_b64"])
            messages = case.get("messages", 0)
            if isinstance(messages, list):
                messages = 0
            name = case["name"].replace("\\", "\\\\").replace('"', '\\"')
            out.write('    {"%s", %s, %d, "%s", %d},\n' % (name, c_string(raw), len(raw),
                                                           case["verdict"], messages))
        out.write("};\n")


if __name__ == "__main__":
    main()
