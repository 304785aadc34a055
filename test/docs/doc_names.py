#!/usr/bin/env python3
"""Checks that the names README.md and docs/*.md give for the library exist in its
public headers, and that the README's summary of what the library has names every
I/O object:

    doc_names.py SOURCE_DIR BUILD_DIR [--cxx CLANG++] [--isystem DIR]... [--list]

The names come from clang's AST of one generated file that includes every public
header (include/rdma_asio/*.hpp, include/rdma_asio/testing/*.hpp; BUILD_DIR/include
holds the generated rdma_asio/config.hpp; --isystem adds Asio's directory when it is
not a system one): every declaration inside namespace rdma_asio, namespace
rdma_asio::detail excepted (only the bases of public classes are looked up there,
for the members they inherit). Kept: namespaces, classes, structs and class
templates with their public fields, methods, constructors, nested types and aliases
(also those a public base gives), enums and their enumerators, free functions,
function templates, variables, concepts and type aliases (an alias of a class is
looked through: queue_pair = basic_queue_pair<>). --list prints them and exits.

The documents are read in their inline code spans and in fenced blocks that are not
snippets (a snippet, the fenced block after `<!-- snippet: PATH#NAME -->`, is compiled
code already: test/docs/check-snippets.sh). What is checked there:

  (a) every qualified name rdma_asio::a::b...: each part must be a public member of
      the one before it (template arguments are skipped: basic_x<E>::y is looked up
      as basic_x::y);
  (b) Type::member and Type.member, where Type is a public class, struct, enum or
      alias of rdma_asio or rdma_asio::testing written without rdma_asio:: (and
      testing::Type::member);
  (c) variable.member, which names no type, in three cases only: a variable a
      fenced block declares with a public type (`rdma_asio::queue_pair qp(...)`,
      then `qp.async_send`); the variable names the docs use by convention for one
      kind of object (VARIABLES below: `info.immediate` must be a member of
      receive_info or devx_event_info); and in prose, "`Type`'s `member`"
      (`receive_info`'s `immediate`);
  (d) an unqualified call `async_x(...)`: some public class (or namespace) of
      rdma_asio must have an async_x. Asio's are written asio::async_x, which is
      not read as ours.

Not checked, and why:
  - names under rdma_asio::detail (implementation, free to change; the profiles in
    docs/performance*.md quote them as they were when measured) and under
    rdma_asio::asio (Asio's own, through the namespace alias);
  - a member of what a member returns or holds (`conn.queue_pair().async_send`,
    `info.immediate.value`): that would need the member's type, which the docs do
    not give;
  - other unqualified names (`async_send` without a call, `qp_options`, `max_wr`):
    a bare word in a code span may be anything (a C name, a sample's, a shell
    word), so only the forms above are read as the library's;
  - variables the docs name other than those of VARIABLES or a fenced block's
    declarations, and names in prose outside code spans;
  - whether a name is used rightly (argument lists, return types: the snippets and
    unit.docs.testing_signatures compile those);
  - a name cut short in a quoted profile (`rdma_asio::b...`): its last part.

The README's summary, the paragraph that begins "Today the library has": every
rdma_asio::X it names must exist (check (a)), and it must name every I/O object:
each class or class template declared directly in namespace rdma_asio (not in
detail or testing) that has a public get_executor(), its own or from a public base
(the io_object base of the class templates; connection declares its own), by its
alias without basic_ when there is one (`using queue_pair = basic_queue_pair<>`)
or else by its own name, as rdma_asio::name in a code span.

Each failure prints FILE:LINE: NAME: what was not found, and the script exits 1; 0
when every name was found; 77 when it cannot run (no clang++, a tree configured
without mlx5 direct verbs, whose DEVX headers do not compile)."""
import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77

# Names the docs write that are deliberately not declarations of the headers: the
# whole written name (as reported), and why.
ALLOWED = {
    # The CMake target the package exports, written as CMake writes it.
    "rdma_asio::rdma_asio": "the CMake target (find_package, target_link_libraries)",
    # architecture.md shows the form of the string an operation names itself with.
    "rdma_asio::x::async_y": "a placeholder for an object and an operation",
}

# Variable names the docs use, by convention, for one kind of object each, without a
# declaration: `qp.async_send`, `info.immediate`. A member after one of these must be
# a public member of at least one of its types. Not `subnet`: also a ctest label
# (`subnet.sample.sm_watch`).
VARIABLES = {
    "qp": ["queue_pair", "datagram_queue_pair"],
    "srq": ["shared_receive_queue"],
    "cq": ["completion_queue"],
    "ctx": ["context"],
    "id": ["cm_id"],
    "listener": ["cm_id"],
    "conn": ["connection"],
    "events": ["async_event_stream"],
    "ev": ["async_event"],
    "ref": ["async_event_stream_ref"],
    "info": ["receive_info", "devx_event_info"],
    "mr": ["memory_region"],
}

SUMMARY_START = "Today the library has"


# ---------------------------------------------------------------------------
# The headers' names


class Node:
    __slots__ = ("name", "kind", "parent", "children", "bases", "target", "public")

    def __init__(self, name, kind, parent, public=True):
        self.name, self.kind, self.parent, self.public = name, kind, parent, public
        self.children = {}
        self.bases = []  # type names, as written, of public bases
        self.target = None  # an alias's type; a namespace alias's namespace

    def qualified(self):
        parts, n = [], self
        while n is not None and n.name:
            parts.append(n.name)
            n = n.parent
        return "::".join(reversed(parts))

    def add(self, name, kind, public=True):
        """The child name, made if new; public None: as declared before (an
        out-of-line definition)."""
        child = self.children.get(name)
        if child is None:
            child = self.children[name] = Node(name, kind, self, public is not False)
        else:
            # Overloads, redeclarations, a template and its specializations: one name.
            if child.kind == "class_forward" and kind == "class":
                child.kind = kind
            child.public = child.public or bool(public)
        return child


EXTERNAL = Node("(outside rdma_asio)", "external", None)

RECORD_KINDS = {"CXXRecordDecl", "ClassTemplateDecl", "ClassTemplateSpecializationDecl",
                "ClassTemplatePartialSpecializationDecl"}
FUNCTION_KINDS = {"FunctionDecl", "CXXMethodDecl", "CXXConstructorDecl", "CXXDestructorDecl",
                  "CXXConversionDecl", "FunctionTemplateDecl"}


def last_part(name):
    """The last ::-separated part of a name, outside template arguments."""
    depth, start = 0, 0
    for i, c in enumerate(name):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif depth == 0 and name.startswith("::", i):
            start = i + 2
    return name[start:]


def strip_template_args(name):
    out, depth = [], 0
    for c in name:
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif depth == 0:
            out.append(c)
    return "".join(out)


DECLS = {}  # clang's id of a namespace or class declaration: its node
ASYNC_MEMBERS = {}  # clang's id of each public async_ member function (each overload)


def add_members(record, node, tag):
    """A class's members, public or not: clang's JSON gives a member's access only
    through the access specifiers before it."""
    access = "private" if tag == "class" else "public"
    for member in record.get("inner", []):
        if member.get("kind") == "AccessSpecDecl":
            access = member.get("access", access)
        else:
            add_decl(member, node, access)


def add_decl(decl, scope, access=None):
    """Adds decl to scope; access is the member's in a class, None in a namespace."""
    kind = decl.get("kind")
    name = strip_template_args(decl.get("name") or "").strip()
    if decl.get("isImplicit") or kind in ("FriendDecl", "CXXDeductionGuideDecl") \
            or name.startswith("<"):
        return
    public = access in (None, "public")
    # An out-of-line definition (`class device_list::iterator {`, `device_list::begin()`
    # at namespace scope) belongs to its class, with the access declared there.
    owner = DECLS.get(decl.get("parentDeclContextId"))
    if owner is not None and owner is not scope:
        scope, public, access = owner, None, "public"
    if kind == "NamespaceDecl":
        if not name:
            return  # an anonymous namespace
        node = DECLS[decl["id"]] = scope.add(name, "namespace")
        for inner in decl.get("inner", []):
            add_decl(inner, node)
    elif kind in RECORD_KINDS:
        if not name:
            return
        complete = decl.get("completeDefinition") or kind == "ClassTemplateDecl"
        node = DECLS[decl["id"]] = scope.add(name, "class" if complete else "class_forward",
                                             public)
        for inner in decl.get("inner", []):
            if inner.get("kind") == "CXXRecordDecl" and inner.get("name") == name:
                DECLS[inner["id"]] = node  # a template's class
        if complete:
            node.kind = "class"
        for base in decl.get("bases", []):
            if base.get("access") == "public":
                node.bases.append(base["type"]["qualType"])
        if kind == "ClassTemplateDecl":
            # Its class (not its template parameters, nor the instantiations it lists).
            for inner in decl.get("inner", []):
                if inner.get("kind") == "CXXRecordDecl" and inner.get("name") == name:
                    for base in inner.get("bases", []):
                        if base.get("access") == "public":
                            node.bases.append(base["type"]["qualType"])
                    add_members(inner, node, inner.get("tagUsed"))
        else:
            add_members(decl, node, decl.get("tagUsed"))
    elif kind in FUNCTION_KINDS:
        if name:
            scope.add(name, "function", public)
            if access is not None and public and name.startswith("async_") \
                    and name != scope.name \
                    and "::detail" not in "::" + scope.qualified():
                ASYNC_MEMBERS[decl["id"]] = f"{scope.qualified()}::{name}"
    elif kind in ("FieldDecl", "VarDecl"):
        if name:
            scope.add(name, "field" if kind == "FieldDecl" else "variable", public)
    elif kind == "EnumDecl":
        if not name:
            return
        node = scope.add(name, "enum", public)
        for inner in decl.get("inner", []):
            if inner.get("kind") == "EnumConstantDecl":
                node.add(inner["name"], "enumerator")
                if not decl.get("scopedEnumTag"):
                    scope.add(inner["name"], "enumerator", public)
    elif kind in ("TypedefDecl", "TypeAliasDecl"):
        if name:
            node = scope.add(name, "alias", public)
            t = decl.get("type", {})
            node.target = t.get("qualType")
    elif kind == "TypeAliasTemplateDecl":
        for inner in decl.get("inner", []):
            if inner.get("kind") == "TypeAliasDecl":
                add_decl(inner, scope, access)
    elif kind == "VarTemplateDecl":
        if name:
            scope.add(name, "variable", public)
    elif kind == "ConceptDecl":
        scope.add(name, "concept", public)
    elif kind == "NamespaceAliasDecl":
        node = scope.add(name, "namespace_alias", public)
        node.target = decl.get("aliasedNamespace", {}).get("name")
    elif kind in ("UsingDecl", "UnresolvedUsingValueDecl", "UnresolvedUsingTypenameDecl"):
        member = last_part(name or "")
        if member and "<" not in member:
            # `using base::executor_type;` (not `using base::base;`, a base's
            # constructors, written with its template arguments)
            scope.add(member, "using", public)


def collect(source, build, cxx, isystem):
    """The tree of names under namespace rdma_asio (the root's only child)."""
    headers = sorted((source / "include/rdma_asio").glob("*.hpp")) + \
        sorted((source / "include/rdma_asio/testing").glob("*.hpp"))
    config = build / "include/rdma_asio/config.hpp"
    if not config.exists():
        print(f"doc_names: {config} does not exist: configure {build} first")
        sys.exit(1)
    if not re.search(r"^#define RDMA_ASIO_HAVE_MLX5DV\b", config.read_text(), re.M):
        print(f"doc_names: skipped: {build} was configured without mlx5 direct verbs, so "
              "the DEVX headers (devx_*.hpp), which the docs describe, do not compile")
        sys.exit(SKIP)
    if not re.search(r"^#define RDMA_ASIO_USE_BOOST_ASIO 1", config.read_text(), re.M):
        # Boost.Beast's teardown says with an #error that it needs Boost.Asio.
        headers = [h for h in headers if h.name != "beast.hpp"]
    with tempfile.TemporaryDirectory() as tmp:
        tu = pathlib.Path(tmp) / "all_public_headers.cpp"
        tu.write_text("".join(f'#include "{h.relative_to(source / "include")}"\n'
                              for h in headers))
        command = [cxx, "-std=c++20", "-DASIO_HAS_CO_AWAIT=1", "-fsyntax-only",
                   f"-I{source / 'include'}", f"-I{build / 'include'}"]
        for d in isystem:
            command += ["-isystem", d]
        # Only the declarations whose qualified name holds rdma_asio (its
        # namespaces, whole): the full dump is over a gigabyte of JSON.
        command += ["-Xclang", "-ast-dump=json", "-Xclang", "-ast-dump-filter=rdma_asio",
                    str(tu)]
        run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        print("doc_names: the public headers do not compile:\n  " + " ".join(command))
        print(run.stderr[:4000])
        sys.exit(1)
    root = Node("", "namespace", None)
    decoder, text, pos = json.JSONDecoder(), run.stdout, 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        decl, pos = decoder.raw_decode(text, pos)
        # The filter also prints specializations of other namespaces' templates for
        # rdma_asio's types (std::is_error_code_enum<rdma_asio::errc>): not ours.
        if decl.get("kind") == "NamespaceDecl" and decl.get("name") == "rdma_asio":
            add_decl(decl, root)
    if "rdma_asio" not in root.children:
        print("doc_names: clang's AST holds no namespace rdma_asio")
        sys.exit(1)
    return root.children["rdma_asio"], len(headers)


# ---------------------------------------------------------------------------
# Looking names up


def lookup_type(name, scope, top):
    """The node a type name (as the AST writes a base or an alias's target) names,
    looked up from scope outwards; EXTERNAL for anything outside rdma_asio."""
    name = re.sub(r"\b(const|volatile|typename|struct|class|enum)\b|[&*]", " ", name)
    name = strip_template_args(name).strip()
    parts = [p.strip() for p in name.split("::")]
    if parts and parts[0] == "":
        parts = parts[1:]
    if not parts or not all(re.fullmatch(r"\w+", p) for p in parts):
        return EXTERNAL
    if parts[0] == "rdma_asio":
        node, parts = top, parts[1:]
    else:
        node = scope
        while node is not None and parts[0] not in node.children:
            node = node.parent if node is not top else None
        if node is None:
            return EXTERNAL
    for part in parts:
        found = member(node, part, top, public_only=False)
        if found is None:
            return EXTERNAL  # a dependent name (typename Impl::x): not ours to check
        node = found
    return node


def through_aliases(node, top, depth=0):
    while node.kind in ("alias", "namespace_alias") and depth < 20:
        if node.kind == "namespace_alias" or not node.target:
            return EXTERNAL
        node = lookup_type(node.target, node.parent, top)
        depth += 1
    return node


def member(node, name, top, public_only=True, depth=0):
    """A member name of node (through aliases and public bases), None if it has none,
    EXTERNAL if node is not rdma_asio's (nothing to check)."""
    node = through_aliases(node, top)
    if node is EXTERNAL:
        return EXTERNAL
    child = node.children.get(name)
    if child is not None and (child.public or not public_only):
        return child
    if node.kind == "class":
        if name == node.name or name == "~" + node.name:
            return Node(name, "function", node)  # a constructor, the destructor
        if depth < 10:
            for base in node.bases:
                b = lookup_type(base, node.parent, top)
                if b is EXTERNAL:
                    continue
                found = member(b, name, top, public_only, depth + 1)
                if found is not None and found is not EXTERNAL:
                    return found
    return None


def describe(node):
    return {"namespace": "namespace", "class": "class", "class_forward": "class",
            "enum": "enum", "alias": "type", "function": "function", "field": "field",
            "variable": "variable", "enumerator": "enumerator", "concept": "concept",
            "using": "member"}.get(node.kind, node.kind)


def check_chain(start, start_name, parts, top):
    """Follows parts from start; the first part not found, as a message, or None."""
    node, shown = start, start_name
    for part in parts:
        if node is EXTERNAL:
            return None
        if node.name == "detail" and node.kind == "namespace":
            return None  # implementation: not checked
        if part == "operator":
            return None  # operator==, operator bool: not split further
        target = through_aliases(node, top)
        if target is EXTERNAL:
            return None
        if target.kind in ("function", "field", "variable", "enumerator", "concept",
                           "using"):
            what = describe(target)
            article = "an" if what[0] in "aeiou" else "a"
            return f"{shown} is {article} {what}, which has no members"
        found = member(node, part, top)
        if found is None:
            # The alias's own name is its class's constructor name too.
            if part == node.name and target.kind == "class":
                return None
            hidden = target.children.get(part)
            why = " (it is not public)" if hidden is not None and not hidden.public else ""
            return f"{shown} has no member {part}{why}"
        node, shown = found, part
    return None


# ---------------------------------------------------------------------------
# The documents


IDENT = r"~?[A-Za-z_]\w*"


def parse_chain(text, pos):
    """From pos (just after an identifier): [(separator, name, end)], template
    arguments skipped. Stops at anything else, and after a '.'."""
    parts = []
    while True:
        if pos < len(text) and text[pos] == "<":
            depth, i = 0, pos
            while i < len(text):
                if text[i] == "<":
                    depth += 1
                elif text[i] == ">":
                    depth -= 1
                    if depth == 0:
                        break
                elif text[i] in ";{}\n" or text.startswith("<<", i):
                    break
                i += 1
            if depth != 0 or i >= len(text):
                return parts
            pos = i + 1
        for sep in ("::", ".", "->"):
            if text.startswith(sep, pos):
                m = re.compile(IDENT).match(text, pos + len(sep))
                break
        else:
            return parts
        if not m:
            return parts
        parts.append((sep, m.group(0), m.end()))
        pos = m.end()
        if sep != "::":
            return parts


def truncated(text, end):
    return text.startswith("...", end) or text.startswith("\u2026", end)


# After a type's name and a dot, a file name's suffix: `queue_pair.hpp`.
FILE_SUFFIX = re.compile(r"(hpp|cpp|h|md|sh|py|cmake|txt|json|supp|pc|so|a|o|log|in|c|d|"
                         r"service|conf|ready|list|ctl)\b(?![(\w])")


class Doc:
    def __init__(self, rel, text):
        self.rel = rel
        self.lines = text.split("\n")

    def fragments(self):
        """[(kind, text, first line)]: the paragraphs of prose (kind 'prose', whose
        code spans are read) and the fenced blocks that are not snippets (kind
        'fence:LANGUAGE')."""
        out, prose, prose_start = [], [], None
        pending_snippet, fence, fence_lines, fence_start, lang, snippet = \
            False, None, [], 0, "", False

        def flush():
            nonlocal prose, prose_start
            if prose:
                out.append(("prose", "\n".join(prose), prose_start))
            prose, prose_start = [], None

        for n, line in enumerate(self.lines, 1):
            m = re.match(r"\s*(```+|~~~+)\s*([\w+-]*)", line)
            if fence is not None:
                if m and m.group(1).startswith(fence) and not line.strip()[len(m.group(1)):]:
                    if not snippet:
                        out.append(("fence:" + lang, "\n".join(fence_lines), fence_start))
                    fence, fence_lines = None, []
                else:
                    fence_lines.append(line)
                continue
            if m:
                flush()
                fence, lang, fence_start = m.group(1), m.group(2), n + 1
                snippet, pending_snippet = pending_snippet, False
                continue
            if "<!-- snippet:" in line:
                pending_snippet = True
            if not line.strip():
                flush()
                continue
            if prose_start is None:
                prose_start = n
            prose.append(line)
        flush()
        return out


class Checker:
    def __init__(self, top):
        self.top = top
        self.failures = []
        self.seen = set()
        self.checked = 0
        # Type names a doc may write without rdma_asio::, and where they lead.
        self.types = {}
        for scope in (top, top.children.get("testing")):
            if scope is None:
                continue
            for name, node in scope.children.items():
                if node.public and node.kind in ("class", "enum", "alias", "class_forward"):
                    self.types.setdefault(name, node)
        self.types["testing"] = top.children["testing"]
        self.async_names = set()
        self.gather_async(top)

    def gather_async(self, node):
        for name, child in node.children.items():
            if name == "detail" or not child.public:
                continue
            if name.startswith("async_") and child.kind in ("function", "using"):
                self.async_names.add(name)
            if child.kind in ("class", "namespace"):
                self.gather_async(child)
                for base in child.bases:
                    b = lookup_type(base, child.parent, self.top)
                    if b is not EXTERNAL:
                        for bname, bchild in b.children.items():
                            if bname.startswith("async_") and bchild.public:
                                self.async_names.add(bname)

    def trace(self, doc, line, name):
        if os.environ.get("DOC_NAMES_TRACE"):
            print(f"{doc.rel}:{line}: checked {name}", file=sys.stderr)

    def fail(self, doc, line, name, why):
        key = (doc.rel, line, name)
        if key not in self.seen:
            self.seen.add(key)
            self.failures.append(f"{doc.rel}:{line}: {name}: {why}")

    def code(self, doc, text, first_line, declared=None):
        """Checks one piece of code (a code span, a fenced block)."""
        def line_of(pos):
            return first_line + text.count("\n", 0, pos)

        # (a) rdma_asio::...
        for m in re.finditer(r"(?<![\w:.])(?:::)?rdma_asio\b", text):
            parts = parse_chain(text, m.end())
            names = []
            for sep, name, end in parts:
                if sep != "::":
                    break
                names.append((name, end))
            if names and truncated(text, names[-1][1]):
                names.pop()
            written = "::".join(["rdma_asio"] + [n for n, _ in names])
            if not names or written in ALLOWED or names[0][0] in ("detail", "asio"):
                continue  # detail, asio: not checked (see above)
            self.checked += 1
            self.trace(doc, line_of(m.start()), written)
            why = check_chain(self.top, "rdma_asio", [n for n, _ in names], self.top)
            if why:
                self.fail(doc, line_of(m.start()), written, why)

        # (b) Type::member, Type.member, testing::Type::member; (c) variable.member
        for m in re.finditer(r"(?<![\w:.>/~-])([A-Za-z_]\w*)", text):
            word = m.group(1)
            if declared and word in declared:
                start, is_type = declared[word], False
            elif word in self.types:
                start, is_type = [self.types[word]], True
            elif word in VARIABLES:
                start, is_type = [self.types[t] for t in VARIABLES[word] if t in self.types], False
            else:
                continue
            parts = parse_chain(text, m.end())
            if not parts or not start:
                continue
            if parts[0][0] == "->" or (not is_type and parts[0][0] != "."):
                continue  # a pointer's member; a variable's name followed by ::
            if parts[0][0] == "." and FILE_SUFFIX.match(parts[0][1]):
                continue  # a file name: queue_pair.hpp
            names = [n for _, n, _ in parts]
            if truncated(text, parts[-1][2]):
                names.pop()
            if not names:
                continue
            written = word + "".join(s + n for (s, _, _), n in zip(parts, names))
            if written in ALLOWED:
                continue
            self.checked += 1
            self.trace(doc, line_of(m.start()), written)
            whys = [check_chain(node, word if is_type else node.name, names, self.top)
                    for node in start]
            if all(whys):
                why = whys[0]
                if not is_type:
                    kinds = " or ".join(n.name for n in start)
                    why = f"{word} (a {kinds}): " + why
                self.fail(doc, line_of(m.start()), written, why)

        # (d) a bare async_x(...)
        for m in re.finditer(r"(?<![\w:.>~])(async_\w+)\s*(?:<[^<>()]*>)?\(", text):
            name = m.group(1)
            self.checked += 1
            self.trace(doc, line_of(m.start()), name + "(")
            if name in self.async_names:
                continue
            self.fail(doc, line_of(m.start()), name,
                      "no public class of rdma_asio has an operation of that name")

    def fenced(self, doc, lang, text, first_line):
        # Variables the block declares with a public type: `rdma_asio::queue_pair qp(`,
        # `rdma_asio::testing::loopback_pair pair{`, `queue_pair& qp,`.
        declared = {}
        decl = re.compile(r"(?<![\w:.])(?:rdma_asio::)?(?:testing::)?([A-Za-z_]\w*)"
                          r"(?:<[^<>;()]*(?:<[^<>;()]*>[^<>;()]*)*>)?\s*[&*]?\s*"
                          r"([a-z_]\w*)\s*[({=;,)]")
        for m in decl.finditer(text):
            if m.group(1) in self.types and m.group(2) not in self.types:
                declared[m.group(2)] = [self.types[m.group(1)]]
        self.code(doc, text, first_line, declared)

    def prose(self, doc, text, first_line):
        for m in re.finditer(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", text, re.S):
            span_line = first_line + text.count("\n", 0, m.start(2))
            self.code(doc, m.group(2), span_line)
        # (c) "`Type`'s `member`"
        for m in re.finditer(r"`(?:rdma_asio::)?(\w+)`'s `(~?\w+)(?:\(\))?`", text):
            if m.group(1) not in self.types:
                continue
            self.checked += 1
            self.trace(doc, first_line + text.count("\n", 0, m.start()),
                       f"{m.group(1)}'s {m.group(2)}")
            why = check_chain(self.types[m.group(1)], m.group(1), [m.group(2)], self.top)
            if why:
                self.fail(doc, first_line + text.count("\n", 0, m.start()),
                          f"{m.group(1)}'s {m.group(2)}", why)

    def document(self, doc):
        before = len(self.failures)
        for kind, text, first_line in doc.fragments():
            if kind == "prose":
                self.prose(doc, text, first_line)
            else:
                self.fenced(doc, kind.split(":", 1)[1], text, first_line)
        # In the document's order.
        self.failures[before:] = sorted(self.failures[before:],
                                        key=lambda f: int(f.split(":")[1]))


def io_objects(top):
    """{name the README must write: the class's qualified name}: see the docstring."""
    aliases = {}
    for name, node in top.children.items():
        if node.kind == "alias" and node.public:
            target = through_aliases(node, top)
            if target is not EXTERNAL and target.parent is top and target.kind == "class" \
                    and name == re.sub(r"^basic_", "", target.name):
                aliases[target.name] = name
    out = {}
    for name, node in top.children.items():
        if node.kind == "class" and node.public:
            found = member(node, "get_executor", top)
            if found is not None and found is not EXTERNAL:
                out[aliases.get(name, name)] = node.qualified()
    return out


def check_summary(checker, top, readme):
    lines = readme.lines
    start = next((i for i, l in enumerate(lines) if l.startswith(SUMMARY_START)), None)
    if start is None:
        checker.failures.append(f"{readme.rel}: no paragraph begins \"{SUMMARY_START}\"")
        return set()
    end = start
    while end < len(lines) and lines[end].strip():
        end += 1
    paragraph = "\n".join(lines[start:end])
    named = set()
    for span in re.findall(r"`([^`]+)`", paragraph):
        named.update(re.findall(r"(?<![\w:])rdma_asio::(\w+)", span))
    for name, qualified in sorted(io_objects(top).items()):
        if name not in named:
            checker.failures.append(
                f"{readme.rel}:{start + 1}: rdma_asio::{name}: the summary (\"{SUMMARY_START}"
                f"...\") does not name it, an I/O object ({qualified} has get_executor())")
    return named


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=pathlib.Path)
    parser.add_argument("build", type=pathlib.Path)
    parser.add_argument("--cxx", default="clang++-14")
    parser.add_argument("--isystem", action="append", default=[])
    parser.add_argument("--list", action="store_true", help="print the headers' names")
    args = parser.parse_args()
    began = time.monotonic()
    cxx = shutil.which(args.cxx)
    if not cxx:
        print(f"doc_names: skipped: {args.cxx} not found (the names come from its AST)")
        sys.exit(SKIP)
    isystem = [d for d in args.isystem
               if d and os.path.realpath(d) not in ("/usr/include", "/usr/local/include")]
    top, header_count = collect(args.source.resolve(), args.build.resolve(), cxx, isystem)

    if args.list:
        def show(node, depth):
            for name in sorted(node.children):
                child = node.children[name]
                if name == "detail" or not child.public:
                    continue
                print("  " * depth + f"{child.qualified()} ({describe(child)})")
                if child.kind in ("class", "namespace", "enum"):
                    show(child, depth + 1)
        show(top, 0)
        return

    # A count the docs state that the headers give: architecture.md's async_ members.
    arch = (args.source / "docs/architecture.md").read_text()
    stated = re.search(r"Counted over the (\d+) `async_` member functions", arch)
    count_failures = []
    if not stated:
        count_failures.append("docs/architecture.md: no 'Counted over the N `async_` member "
                              "functions' to check")
    elif int(stated.group(1)) != len(ASYNC_MEMBERS):
        count_failures.append(f"docs/architecture.md: counts {stated.group(1)} `async_` member "
                              f"functions; the public headers declare {len(ASYNC_MEMBERS)}: " +
                              ", ".join(f"{n} ({list(ASYNC_MEMBERS.values()).count(n)})"
                                        for n in sorted(set(ASYNC_MEMBERS.values()))))

    checker = Checker(top)
    checker.failures.extend(count_failures)
    docs = [args.source / "README.md"] + sorted((args.source / "docs").glob("*.md"))
    readme = None
    for path in docs:
        doc = Doc(str(path.relative_to(args.source)), path.read_text())
        checker.document(doc)
        if path.name == "README.md" and path.parent == args.source:
            readme = doc
    named = check_summary(checker, top, readme)
    for line in checker.failures:
        print(line)
    took = time.monotonic() - began
    if checker.failures:
        print(f"doc_names: {len(checker.failures)} failures: names the docs give that the "
              f"public headers do not declare, I/O objects the README's summary does not "
              f"name ({took:.1f} s)")
        sys.exit(1)
    print(f"doc_names: {checker.checked} names in {len(docs)} documents found in "
          f"{header_count} public headers; the README's summary names all "
          f"{len(io_objects(top))} I/O objects ({len(named)} rdma_asio:: names) "
          f"({took:.1f} s)")


if __name__ == "__main__":
    main()
