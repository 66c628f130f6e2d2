#!/usr/bin/env python3
"""Lists the functions longer than --max-function lines and the source files longer than
--max-file lines under src/ and tools/ (issue 18: a function fits on a screen, a file is one
topic). Exits 1 when it found any, so CI can run it.

Functions are found by matching braces in the source with comments, string and character
literals blanked out: a brace at namespace or class scope whose head (the text since the last
';', '{' or '}') holds a parameter list opens a function; everything inside it, lambdas and local
classes included, counts toward that function. A constructor's member-initializer braces
(`a_{x}, b_(y) {`) are joined to its body. A function's length is its lines from the first line
of its signature to its closing brace. Good enough for C++ written to the repo's style; not a
C++ parser.

  python3 scripts/check_sizes.py                 # the offenders, longest first
  python3 scripts/check_sizes.py --exclude tools/longhaul-train --exclude src/train/trainer
"""
import argparse
import pathlib
import re
import sys

SOURCE_SUFFIXES = {".cpp", ".hpp", ".h", ".cc", ".cu", ".cuh"}
SCOPE_HEAD = re.compile(
    r"^\s*(?:(?:export|inline)\s+)*(?:class|struct|union|enum(?:\s+class)?|namespace|extern)\b"
)
TEMPLATE_PREFIX = re.compile(r"^\s*template\s*<")


def blank_literals_and_comments(text):
    """The text with comments, string/char literals and preprocessor lines replaced by spaces
    (newlines kept, so positions and line numbers do not move)."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#":
            # A preprocessor directive, with its continuation lines.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        if c == "/" and text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
            continue
        if c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        raw = re.match(r'R"([^(\s]*)\(', text[i:i + 20]) if c == "R" else None
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find(")" + raw.group(1) + '"', i)
            end = n if end < 0 else end + len(raw.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        if c in "\"'":
            # A digit separator (1'000'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
            continue
        out.append(c)
        at_line_start = c == "\n" or (at_line_start and c in " \t")
        i += 1
    return "".join(out)


def head_kind(head):
    """What a brace opened after `head` (at namespace or class scope) is."""
    h = head.strip()
    if TEMPLATE_PREFIX.match(h):
        # Drop the template parameter list: `template <class T> struct X` is a scope.
        depth, k = 0, h.index("<")
        while k < len(h):
            depth += {"<": 1, ">": -1}.get(h[k], 0)
            k += 1
            if depth == 0:
                break
        h = h[k:].strip()
    if SCOPE_HEAD.match(h) and "(" not in h.split("{")[0].rsplit(":", 1)[0]:
        return "scope"
    paren = h.find("(")
    equals = re.search(r"(?<![=!<>])=(?!=)", h)
    if equals and (paren < 0 or equals.start() < paren) and "operator" not in h[:equals.start()]:
        return "data"
    return "function" if paren >= 0 else "data"


def function_name(head):
    m = re.search(r"((?:[\w~]+\s*::\s*)*(?:operator\s*\S+?|~?\w+))\s*\(", head)
    return re.sub(r"\s+", "", m.group(1)) if m else "?"


def long_functions(path, limit):
    text = blank_literals_and_comments(path.read_text(errors="replace"))
    line_of = [0] * (len(text) + 1)
    line = 1
    for k, c in enumerate(text):
        line_of[k] = line
        if c == "\n":
            line += 1
    found = []
    stack = []  # kinds of the open braces: scope, function, data, block
    head_start = 0
    pending = None  # (start, name) of a constructor whose initializer braces just closed
    for k, c in enumerate(text):
        if c in ";":
            if not stack or stack[-1] == "scope":
                head_start = k + 1
                pending = None
            continue
        if c == "{":
            if stack and stack[-1] != "scope":
                stack.append("block")
                continue
            head = text[head_start:k]
            kind = head_kind(head)
            if pending:
                kind = "function"
            if kind == "function":
                if pending:
                    start, name = pending
                else:
                    offset = len(head) - len(head.lstrip())
                    start, name = line_of[head_start + offset], function_name(head)
                stack.append(("function", start, name))
                pending = None
            else:
                stack.append(kind)
            head_start = k + 1
            continue
        if c == "}":
            if not stack:
                continue
            top = stack.pop()
            if isinstance(top, tuple):
                _, start, name = top
                rest = text[k + 1:].lstrip()
                if rest[:1] in (",", "{") or (rest[:1].isalpha() and re.match(r"\w+\s*[({]", rest)
                                              and head_kind(text[head_start:k]) == "function"
                                              and ":" in text[head_start:k]):
                    # A member initializer `b_{x}` of a constructor: its body is still to come.
                    pending = (start, name)
                else:
                    length = line_of[k] - start + 1
                    if length > limit:
                        found.append((length, f"{path}:{start}", name))
            if not stack or stack[-1] == "scope":
                head_start = k + 1
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--max-function", type=int, default=80)
    ap.add_argument("--max-file", type=int, default=500)
    ap.add_argument("--exclude", action="append", default=[], help="a path prefix to skip")
    ap.add_argument("roots", nargs="*", default=["src", "tools"])
    args = ap.parse_args()
    files = sorted(
        p for root in args.roots for p in pathlib.Path(root).rglob("*")
        if p.suffix in SOURCE_SUFFIXES and not any(str(p).startswith(e) for e in args.exclude))
    big_files = []
    functions = []
    for p in files:
        lines = p.read_text(errors="replace").count("\n")
        if lines > args.max_file:
            big_files.append((lines, str(p)))
        functions += long_functions(p, args.max_function)
    print(f"files over {args.max_file} lines: {len(big_files)}")
    for lines, p in sorted(big_files, reverse=True):
        print(f"  {lines:5d}  {p}")
    print(f"functions over {args.max_function} lines: {len(functions)}")
    for length, where, name in sorted(functions, reverse=True):
        print(f"  {length:5d}  {name}  ({where})")
    return 1 if big_files or functions else 0


if __name__ == "__main__":
    sys.exit(main())
