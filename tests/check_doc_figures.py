"""The figures the docs quote, checked against the program that they describe,
so that none goes stale: the conformance options docs/cli.md lists, the
cases per category in docs/plugin-guide.md, the suite's size in
docs/conformance.md's example report, the op count and ABI version of
the `backplane ops` example in docs/cli.md, and every place the docs and
the README quote the current ABI version or op count, read from plugin.h
(BP_ABI_MAJOR, BP_ABI_MINOR, BP_OP_COUNT as an enumerator or a #define).

Usage: check_doc_figures.py BACKPLANE_EXE SOURCE_DIR
"""
import collections
import re
import subprocess
import sys


def fail(msg):
    print(f"[docs.figures] {msg}", file=sys.stderr)
    sys.exit(1)


def output(exe, *args):
    run = subprocess.run([exe, *args], capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        fail(f"{' '.join(args)}: exit {run.returncode}\n{run.stderr}")
    return run.stdout


def section(text, heading):
    at = text.find(heading)
    if at < 0:
        fail(f"no section {heading!r}")
    end = text.find("\n### ", at + len(heading))
    return text[at:end if end >= 0 else len(text)]


def header_figures(src):
    text = open(f"{src}/sdk/include/backplane/plugin.h", encoding="utf-8").read()
    figures = {}
    for key in ("BP_ABI_MAJOR", "BP_ABI_MINOR", "BP_OP_COUNT"):
        m = re.search(r"^\s*(?:#define\s+" + key + r"\s+(\d+)|" + key + r"\s*=\s*(\d+)\s*,?)", text, re.M)
        if not m:
            fail(f"plugin.h defines no {key}")
        figures[key] = int(m.group(1) or m.group(2))
    return f"{figures['BP_ABI_MAJOR']}.{figures['BP_ABI_MINOR']}", figures["BP_OP_COUNT"]


# Phrases that quote the current version or count (not "since ABI 2.5",
# which is history): each with the group that must equal the header's.
CURRENT_ABI = [r"this core's (\d+\.\d+)", r"the plugin ABI \(`(\d+\.\d+)`\)",
               r"\d+ in ABI (\d+\.\d+)", r"^plugin ABI (\d+\.\d+)$"]
CURRENT_COUNT = [r"(\d+) in ABI \d+\.\d+", r"(\d+) primitive ops"]


def check_quoted_versions(src):
    import glob
    abi, count = header_figures(src)
    paths = sorted(glob.glob(f"{src}/docs/*.md")) + [f"{src}/README.md"]
    wrong, seen = [], 0
    for path in paths:
        text = open(path, encoding="utf-8").read()
        for patterns, want in ((CURRENT_ABI, abi), (CURRENT_COUNT, str(count))):
            for pattern in patterns:
                for m in re.finditer(pattern, text, re.M):
                    seen += 1
                    if m.group(1) != want:
                        line = text.count("\n", 0, m.start()) + 1
                        wrong.append(f"{path[len(src) + 1:]}:{line}: {m.group(0)!r} (plugin.h: {want})")
    if wrong:
        fail("the docs quote another ABI version or op count than plugin.h:\n  " + "\n  ".join(wrong))
    if seen == 0:
        fail("no quoted ABI version or op count found: the patterns no longer match the docs")
    return seen


def main():
    exe, src = sys.argv[1], sys.argv[2]
    cli = open(f"{src}/docs/cli.md", encoding="utf-8").read()
    guide = open(f"{src}/docs/plugin-guide.md", encoding="utf-8").read()
    checked = 0

    # Every option of `backplane conformance --help` has a row in cli.md.
    help_text = output(exe, "conformance", "--help")
    own = help_text[help_text.index("Options:"):help_text.index("Global options")]
    options = sorted(set(re.findall(r"^\s+(?:-\w \[ )?(--[a-z][a-z-]*)", own, re.M)))
    table = section(cli, "### `conformance`")
    missing = [o for o in options
               if not re.search(r"(\| `|`, `)" + re.escape(o) + r"[` ]", table)]
    if missing:
        fail(f"docs/cli.md's conformance table lacks {missing} (from --help: {options})")
    checked += len(options)

    # The cases per category in the plugin guide are those of --list.
    counts = collections.Counter()
    for line in output(exe, "conformance", "--list").splitlines():
        m = re.match(r"^\S+\s+\[(\w+)\]", line)
        if m:
            counts[m.group(1)] += 1
    documented = dict(re.findall(r"^\| `(\w+)` \| (\d+) \|$", guide, re.M))
    total = re.search(r"^\| all \| (\d+) \|$", guide, re.M)
    if not total:
        fail("docs/plugin-guide.md has no '| all | N |' row of cases per category")
    documented = {k: int(v) for k, v in documented.items()}
    if documented != dict(counts) or int(total.group(1)) != sum(counts.values()):
        fail(f"docs/plugin-guide.md's cases per category {documented} (all {total.group(1)}) "
             f"differ from --list: {dict(counts)} (all {sum(counts.values())})")
    checked += len(counts) + 1

    # The example report of the wrong_add plugin in docs/conformance.md runs
    # the whole suite (other examples there run part of it).
    conformance = open(f"{src}/docs/conformance.md", encoding="utf-8").read()
    for m in re.finditer(r"^conformance of wrong_add:0 against \S+: (\d+) cases|^wrong_add: .*\((\d+) cases\) in ",
                         conformance, re.M):
        n = int(m.group(1) or m.group(2))
        if n != sum(counts.values()):
            fail(f"docs/conformance.md's example report says {n} cases; --list has "
                 f"{sum(counts.values())}")
        checked += 1

    # The ops example quotes the real header line.
    header = output(exe, "--backend", "sim", "ops", "--primitive").splitlines()[0]
    if header not in cli:
        fail(f"docs/cli.md's `backplane ops` example lacks the line {header!r}")
    checked += 1

    checked += check_quoted_versions(src)
    print(f"[docs.figures] {checked} figures agree with {exe}")


if __name__ == "__main__":
    main()
