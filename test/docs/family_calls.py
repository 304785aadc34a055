#!/usr/bin/env python3
"""Checks that the families of the code call each other only as docs/architecture.md
says ("Which family calls which"): every #include "rdma_asio/..." of a family's detail
headers, sources and public headers names its own family or one the page allows;
that none of them but asio_flavour.hpp uses Asio's internals (asio::detail); and that
no two units (a header and its source) need each other, through any path.
A public header belongs to the family whose src/<family>/README.md lists it after
"Public:". Prints each include that breaks the rule and exits 1, else prints the
edges it saw and exits 0."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
page = (root / "docs/architecture.md").read_text()
block = re.search(r"### Which family calls which.*?```text\n(.*?)```", page, re.S)
if not block:
    sys.exit("docs/architecture.md: no 'Which family calls which' text block")
allowed = {}
for line in block.group(1).splitlines():
    m = re.match(r"(\w+)\s+(?:uses no other family|->\s*(.*))$", line.strip())
    if not m:
        sys.exit(f"docs/architecture.md: cannot read the line {line!r}")
    calls = m.group(2) or ""
    calls = re.sub(r"\(.*?\)", "", calls)
    allowed[m.group(1)] = {c.strip() for c in calls.split(",") if c.strip()}

public = {}  # header stem -> family
for readme in sorted((root / "src").glob("*/README.md")):
    family = readme.parent.name
    for line in readme.read_text().split("\n\n")[1:2]:
        head = line.split("; detail")[0]
        if head.startswith("Public:"):
            for name in re.findall(r"`([a-z_]+)`", head):
                public[name] = family
public["testing"] = "testing"

def family_of_include(path):
    m = re.match(r"rdma_asio/detail/(\w+)/", path)
    if m:
        return m.group(1)
    m = re.match(r"rdma_asio/testing/", path)
    if m:
        return "testing"
    m = re.match(r"rdma_asio/(\w+)\.hpp$", path)
    if m:
        return public.get(m.group(1))
    return None

files = []
for family in allowed:
    files += [(family, p) for p in (root / "include/rdma_asio/detail" / family).glob("*.hpp")]
    files += [(family, p) for p in (root / "src" / family).glob("*.cpp")]
files += [(family, root / "include/rdma_asio" / f"{name}.hpp") for name, family in public.items()
          if (root / "include/rdma_asio" / f"{name}.hpp").exists()]
files += [("testing", p) for p in (root / "include/rdma_asio/testing").glob("*.hpp")]

bad, edges, unknown = [], set(), []
for family, path in files:
    if family not in allowed:
        unknown.append(f"{path.relative_to(root)}: family {family} is not on the page")
        continue
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = re.match(r'#include\s+[<"](rdma_asio/[^">]+)[">]', line)
        if not m:
            continue
        callee = family_of_include(m.group(1))
        if callee is None:
            continue  # config.hpp, asio.hpp, error.hpp and other headers of no family
        if callee != family:
            edges.add((family, callee))
            if callee not in allowed[family]:
                bad.append(f"{path.relative_to(root)}:{n}: {family} includes {m.group(1)} "
                           f"({callee}), which docs/architecture.md does not allow it")
# Asio's internals (asio::detail, <asio/detail/...>) are met in one place only,
# asio_flavour.hpp, so that a change of Asio's internals is mended there.
flavour = root / "include/rdma_asio/detail/core/asio_flavour.hpp"
internals = re.compile(r"(?<!rdma_)asio::detail::|[<\"](?:boost/)?asio/detail/")
for family, path in files:
    if path == flavour:
        continue
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if internals.search(line.split("//")[0]):
            bad.append(f"{path.relative_to(root)}:{n}: uses Asio's internals outside "
                       f"asio_flavour.hpp: {line.strip()}")
# No two files need each other: a header and its source (X.hpp, src/<family>/X.cpp)
# are one unit, X; X needs Y when a file of X includes Y's header. A cycle of
# units (X needs Y, and Y, through any others, needs X) means neither can be read,
# changed or tested without the other; each is reported with its path.
def unit_of(path):
    return path.stem

needs = {}
for family, path in files:
    for line in path.read_text().splitlines():
        m = re.match(r'#include\s+[<"]rdma_asio/(?:[\w/]+/)?(\w+)\.hpp[">]', line)
        if m and m.group(1) != unit_of(path):
            needs.setdefault(unit_of(path), set()).add(m.group(1))

def cycle_through(start):
    """A shortest path of needs from start back to start, or None."""
    paths, seen = [[start]], {start}
    while paths:
        nxt = []
        for p in paths:
            for n in sorted(needs.get(p[-1], ())):
                if n == start:
                    return p + [start]
                if n not in seen:
                    seen.add(n)
                    nxt.append(p + [n])
        paths = nxt
    return None

reported = set()
for start in sorted(needs):
    cycle = cycle_through(start)
    if cycle and frozenset(cycle) not in reported:
        reported.add(frozenset(cycle))
        bad.append("units that need each other: " + " -> ".join(cycle))
for line in unknown + bad:
    print(line)
if bad or unknown:
    sys.exit(1)
for family in allowed:
    print(f"{family} -> {', '.join(sorted(c for f, c in edges if f == family)) or '(none)'}")
print(f"{len(files)} files read; every include between families is one the page allows, "
      f"and no two units need each other")
