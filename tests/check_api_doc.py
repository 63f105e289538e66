"""docs/api.md against the public headers, in both directions: every public
member function of class Tensor (core/include/backplane/tensor.h) and every
free function of namespace bp in core/include/backplane/ops.h is mentioned
in the doc's code as `name(`, and every `name(` in the doc's code (inline
spans and fenced blocks) is declared in some public header
(core/include/backplane/, sdk/include/backplane/).

Usage: check_api_doc.py SOURCE_DIR
"""
import pathlib
import re
import sys

# `name(` or `operator<symbols>(`, as declared or called.
CALL = re.compile(r"(operator\s*(?:\(\)|\[\]|[-+*/%^&|~!=<>]+)|\b[A-Za-z_]\w*)\s*\(")
ACCESS = re.compile(r"\b(public|private|protected)\s*:(?!:)")
# Words followed by '(' that are C++ syntax, not names a header declares.
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "alignof", "decltype",
            "catch", "static_assert", "noexcept", "alignas"}


def fail(msg):
    print(f"[docs.api] {msg}", file=sys.stderr)
    sys.exit(1)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)  # string literals hold no code


def declarations(text, start, access):
    """The statements of the scope whose '{' is at text[start - 1], each with
    the access in force where it begins; nested blocks (function bodies,
    nested classes and namespaces) are skipped, not descended into. Returns
    (statements, index after the scope's closing brace)."""
    out, cur, depth, i = [], [], 0, start
    while i < len(text):
        c = text[i]
        if c == "{":
            if depth == 0:
                out.append((access, "".join(cur)))
                cur = []
            depth += 1
        elif c == "}":
            if depth == 0:
                return out, i + 1
            depth -= 1
        elif depth == 0:
            if c == ";":
                out.append((access, "".join(cur)))
                cur = []
            else:
                cur.append(c)
                m = ACCESS.search("".join(cur[-12:]))
                if m:
                    access = m.group(1)
                    cur = []
        i += 1
    fail("unbalanced braces")


def function_name(statement):
    s = " ".join(statement.split())
    if not s or re.match(r"(struct|class|enum|union|using|namespace|typedef|friend)\b", s):
        return None
    s = re.sub(r"^template\s*<[^()]*?>\s*", "", s)
    m = CALL.search(s)
    if not m or "=" in s[:m.start()]:  # a variable initialised by a call
        return None
    return re.sub(r"\s+", "", m.group(1))


def tensor_methods(header):
    text = strip_comments(header.read_text(encoding="utf-8"))
    m = re.search(r"\bclass\s+Tensor\s*\{", text)
    if not m:
        fail(f"no class Tensor in {header}")
    stmts, _ = declarations(text, m.end(), "private")
    names = {function_name(s) for a, s in stmts if a == "public"}
    return names - {None}


def namespace_functions(header):
    text = strip_comments(header.read_text(encoding="utf-8"))
    m = re.search(r"\bnamespace\s+bp\s*\{", text)
    if not m:
        fail(f"no namespace bp in {header}")
    stmts, _ = declarations(text, m.end(), "public")
    return {function_name(s) for _, s in stmts} - {None}


def code_of(doc):
    """The text of the doc's fenced blocks and inline code spans."""
    parts = re.findall(r"^```[^\n]*\n(.*?)^```", doc, flags=re.M | re.S)
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", doc, flags=re.M | re.S)
    # Inline spans may run over a line break, as in Markdown.
    parts += re.findall(r"``(.+?)``|`([^`]+)`", prose, flags=re.S)
    # Parts kept apart, so that a span ending in a name and one starting
    # with "(" do not read as a call.
    return "\n;\n".join(p if isinstance(p, str) else "".join(p) for p in parts)


def called(code):
    return {re.sub(r"\s+", "", m.group(1)) for m in CALL.finditer(code)} - KEYWORDS


def main():
    if len(sys.argv) != 2:
        fail("usage: check_api_doc.py SOURCE_DIR")
    src = pathlib.Path(sys.argv[1])
    core = src / "core/include/backplane"
    doc_path = src / "docs/api.md"
    code = code_of(doc_path.read_text(encoding="utf-8"))
    mentioned = called(code)

    methods = tensor_methods(core / "tensor.h")
    functions = namespace_functions(core / "ops.h")
    if len(methods) < 50 or len(functions) < 50:
        fail(f"parsed only {len(methods)} Tensor methods and {len(functions)} ops.h functions: "
             "the headers' form changed, so this check needs updating")
    problems = []
    for what, names in (("Tensor methods", methods), ("ops.h functions", functions)):
        missing = sorted(names - mentioned)
        if missing:
            problems.append(f"docs/api.md does not mention these {what} (as `name(`): "
                            + ", ".join(f"{n}(" for n in missing))

    headers = sorted(p for d in (core, src / "sdk/include/backplane")
                     for p in d.rglob("*") if p.suffix in (".h", ".hpp"))
    declared = set()
    for h in headers:
        declared |= called(strip_comments(h.read_text(encoding="utf-8")))
    unknown = sorted(mentioned - declared)
    if unknown:
        problems.append("docs/api.md's code names what no public header declares: "
                        + ", ".join(f"{n}(" for n in unknown))
    if problems:
        fail("\n".join(problems))
    print(f"[docs.api] docs/api.md mentions all {len(methods)} Tensor methods and "
          f"{len(functions)} ops.h functions; its {len(mentioned)} names are all in "
          f"{len(headers)} public headers")


if __name__ == "__main__":
    main()
