#!/usr/bin/env python3
"""Rewrites every snippet block in README.md and docs/*.md from the code region it
names (the inverse of check-snippets.sh, which the tests run): after changing a
snippet's source, run  test/docs/sync-snippets.py SOURCE_DIR  and review the diff."""
import re, sys, pathlib

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
marker = re.compile(r"<!-- snippet: ([^ #]+)#([^ ]+) -->")


def region(path, name):
    lines, on = [], False
    for line in (root / path).read_text().splitlines():
        if re.search(r"(//|#) snippet-begin: " + re.escape(name) + "$", line):
            on = True
            continue
        if on and re.search(r"(//|#) snippet-end", line):
            break
        if on:
            lines.append(line)
    indent = min((len(l) - len(l.lstrip(" ")) for l in lines if l.strip()), default=0)
    return [l[indent:] for l in lines]


for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
    text = doc.read_text().splitlines()
    out, i = [], 0
    while i < len(text):
        out.append(text[i])
        m = marker.search(text[i])
        i += 1
        if not m:
            continue
        while i < len(text) and not text[i].startswith("```"):
            out.append(text[i])
            i += 1
        out.append(text[i])  # opening fence
        i += 1
        while i < len(text) and not text[i].startswith("```"):
            i += 1
        out.extend(region(m.group(1), m.group(2)))
    new = "\n".join(out) + "\n"
    if new != doc.read_text():
        doc.write_text(new)
        print("updated", doc.relative_to(root))
