#!/usr/bin/env python3
"""check_docs.py -- the documentation is tested (docs/internals.md, "Tested docs").

Against a real redis-server and gateway on free loopback ports (in a
temporary directory, stopped at the end), for README.md and docs/*.md:

  * every fenced block marked <!-- runnable --> is run: `sh` with bash
    (-e, pipefail) in a fresh temporary directory, `python` with python3;
    localhost:8080 / 127.0.0.1:8080 become the test gateway, build/lockctl
    and lockctl the built one.  It must exit 0, and when an ```output
    block follows, its stdout must match it line by line (`...` matches
    any text within a line; a line of only `...` any one line).  Redis is
    emptied before each block, so blocks do not see each other;
  * every ```sh / ```console / ```python block carries a marker: runnable,
    or <!-- not run: REASON --> with a reason;
  * every relative link ([text](path#heading)) names a file that exists and,
    for a .md file, a heading in it (GitHub's anchor rule);
  * docs/internals.md's "Layout" names every source file of server/
    handlers/ idgen/ common/ cli/ lua/;
  * every flag of `lockgate --help` and `lockctl --help` is in the docs
    (docs/configuration.md, docs/lockctl.md) and every flag those tables
    name is in --help; a flag named anywhere else in the docs is one of
    them (or of a program listed in OTHER_FLAGS).

Prints one line per failure and `docs: N passed, M failed`; exits 1 on any
failure.  BUILD (default build) says where the binaries are.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from pyharness import BUILD, ROOT, Count, Servers, redis_cmd  # noqa: E402

DOCS = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
RUN_LANGS = {"sh", "console", "python"}
BLOCK_TIMEOUT = 60
count = Count("docs")
check = count.check


def rel(path):
    return os.path.relpath(path, ROOT)


# ---- markdown -----------------------------------------------------------

class Block:
    def __init__(self, path, line, lang, text, marker):
        self.path, self.line, self.lang, self.text, self.marker = path, line, lang, text, marker
        self.output = None  # the ```output block right after it, if any

    def where(self):
        return f"{rel(self.path)}:{self.line}"


def parse_blocks(path):
    """The fenced blocks of a file, each with the marker comment on the
    nearest non-blank line above it, and its ```output block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, i, last_text = [], 0, ""
    while i < len(lines):
        m = re.match(r"^(\s*)```(\S*)", lines[i])
        if not m:
            if lines[i].strip():
                last_text = lines[i].strip()
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2), i
        body = []
        i += 1
        while i < len(lines) and not lines[i].startswith(indent + "```"):
            body.append(lines[i][len(indent):])
            i += 1
        i += 1
        marker = last_text if last_text.startswith("<!--") else ""
        b = Block(path, start + 1, lang, "\n".join(body) + "\n", marker)
        if lang == "output" and blocks and blocks[-1].output is None and blocks[-1].end == start - 1:
            blocks[-1].output = b.text
        else:
            b.end = i - 1
            blocks.append(b)
        last_text = ""
    return blocks


def slug(heading):
    """GitHub's anchor for a heading: lower case, markup and punctuation
    dropped, spaces to hyphens."""
    h = re.sub(r"`|\*\*|\[|\]\([^)]*\)", "", heading.strip()).lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path):
    out, seen, fence = set(), {}, False
    for line in open(path, encoding="utf-8"):
        if line.lstrip().startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"^#+\s+(.*?)\s*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def links(path):
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    for n, line in enumerate(text.split("\n"), 1):
        line = re.sub(r"`[^`]*`", "", line)
        for m in re.finditer(r"\]\(([^)\s]+)\)", line):
            yield n, m.group(1)


# ---- running a block --------------------------------------------------------

def localize(text, port):
    text = re.sub(r"\b(localhost|127\.0\.0\.1):8080\b", f"127.0.0.1:{port}", text)
    return re.sub(r"(?<![\w/])build/lockctl\b", os.path.join(BUILD, "lockctl"), text)


def matches(want, got):
    w, g = want.rstrip("\n").split("\n"), got.rstrip("\n").split("\n")
    if len(w) != len(g):
        return False
    for a, b in zip(w, g):
        pattern = ".*" if a == "..." else ".*".join(re.escape(p) for p in a.split("..."))
        if not re.fullmatch(pattern, b):
            return False
    return True


# Each block starts from an empty Redis, but for the id marks and era, and
# the gateway's marker and layout keys: a Redis that loses those is a Redis that lost
# data (docs/ids.md, docs/redis-modes.md), which the gateway, kept between
# blocks, rightly meets with 503 ids_behind, or redis_data_lost once its
# marker check (every 10 s) falls after a block's start.
EMPTY_BUT_IDS = ("for _, k in ipairs(redis.call('KEYS', '*')) do "
                 "if not string.find(k, ':id:', 1, true) and k:sub(-7) ~= ':marker' "
                 "and k:sub(-7) ~= ':layout' "
                 "then redis.call('DEL', k) end end")


def run_block(b, servers):
    redis_cmd(servers.redis_port, "EVAL", EMPTY_BUT_IDS, "0")
    code = localize(b.text, servers.port)
    env = dict(os.environ, PATH=BUILD + os.pathsep + os.environ["PATH"],
               LOCKGATE_URL=f"http://127.0.0.1:{servers.port}")
    if b.lang == "python":
        argv = [sys.executable or "python3", "-"]
    else:
        argv = ["bash", "-e", "-o", "pipefail", "-s"]
    with tempfile.TemporaryDirectory(prefix="lockgate-doc-block.") as cwd:
        try:
            r = subprocess.run(argv, input=code, capture_output=True, text=True, cwd=cwd, env=env,
                               timeout=BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired:
            return check(False, f"{b.where()}: the example ran over {BLOCK_TIMEOUT} s")
    if not check(r.returncode == 0, f"{b.where()}: the example exited {r.returncode}\n"
                 f"  stdout: {r.stdout.strip()}\n  stderr: {r.stderr.strip()}"):
        return False
    if b.output is not None:
        return check(matches(b.output, r.stdout),
                     f"{b.where()}: output differs\n  shown:\n{b.output}  got:\n{r.stdout}")
    return True


# ---- the checks -------------------------------------------------------------

def check_blocks(servers):
    for path in DOCS:
        for b in parse_blocks(path):
            runnable = b.marker == "<!-- runnable -->"
            not_run = re.fullmatch(r"<!-- not run: \S.* -->", b.marker) is not None
            if b.lang in RUN_LANGS:
                check(runnable or not_run,
                      f"{b.where()}: a ```{b.lang} block needs <!-- runnable --> or "
                      f"<!-- not run: REASON --> on the line above")
            if runnable:
                if check(b.lang in ("sh", "python"), f"{b.where()}: runnable ```{b.lang}?"):
                    run_block(b, servers)


def check_links():
    for path in DOCS:
        for n, target in links(path):
            if re.match(r"^[a-z]+:", target):
                continue  # http:, https:, mailto:: not followed (no network)
            file, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            where = f"{rel(path)}:{n}: link {target}"
            if not check(os.path.exists(dest), f"{where}: no file {rel(dest)}"):
                continue
            if frag and dest.endswith(".md"):
                check(frag in anchors(dest), f"{where}: no heading #{frag} in {rel(dest)}")


def section(path, title):
    """The text under the heading title, subsections included."""
    out, level, fence = [], 0, False
    for line in open(path, encoding="utf-8").read().split("\n"):
        if line.startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"^(#+) (.*)", line)
        if m and level and len(m.group(1)) <= level:
            level = 0
        if m and not level and m.group(2).strip().lower() == title.lower():
            level = len(m.group(1))
        elif level:
            out.append(line)
    return "\n".join(out)


def check_layout():
    layout = section(os.path.join(ROOT, "docs", "internals.md"), "Layout")
    check(layout.strip() != "", "docs/internals.md has a Layout section")
    for d in ("server", "handlers", "idgen", "common", "cli", "lua"):
        for f in sorted(os.listdir(os.path.join(ROOT, d))):
            if not re.search(r"\.(c|h|inc|lua|1)$", f):
                continue
            stem = os.path.splitext(f)[0]
            # a .c and its .h are named together as `x.c` or `x.h`
            named = re.search(r"`" + re.escape(f) + r"`", layout) or \
                (f.endswith(".h") and re.search(r"`" + re.escape(stem) + r"\.c`", layout)) or \
                (f.endswith(".c") and re.search(r"`" + re.escape(stem) + r"\.h`", layout))
            check(named, f"docs/internals.md Layout names {d}/{f}")


FLAG = r"(?<![\w-])(--[a-z][a-z0-9-_]*|-[a-zA-Z])(?![\w-])"
# Every help text a binary prints: lockgate's and its keygen's usage,
# lockctl's and each of its commands'.
HELPS = {"lockgate": [["--help"], ["keygen"]],
         "lockctl": [["--help"]] + [[c, "--help"] for c in
                                    ("run", "acquire", "extend", "release", "status", "ls",
                                     "watch", "id")]}


def help_flags(binary):
    """The flags binary's help texts name."""
    out = set()
    for args in HELPS[binary]:
        r = subprocess.run([os.path.join(BUILD, binary)] + args, capture_output=True, text=True)
        out |= set(re.findall(FLAG, r.stdout + r.stderr))
    return out


def doc_flags(path, heading):
    """Flags a doc names within one section: code spans that start with
    one (`--x`, `-x`, `--x VALUE`, `--x FILE, --y FILE`)."""
    out = set()
    for code in re.findall(r"`([^`]*)`", section(path, heading)):
        if re.match(r"-", code):
            out |= set(re.findall(FLAG, code))
    return out


# Flags of other programs the docs mention: bench/redis_cost.py's,
# bench/sessions.py's and redis-cli's.
OTHER_FLAGS = {"--paths", "--callgrind", "--cluster"}


def check_flags_named_anywhere(known):
    """A flag the docs name anywhere (a code span starting with --x) is
    one of the binaries' or a listed other program's: no stale flag."""
    for path in DOCS:
        text = open(path, encoding="utf-8").read()
        for f in sorted(set(re.findall(r"`(--[a-z][a-z0-9-]*)", text))):
            check(f in known or f in OTHER_FLAGS,
                  f"{rel(path)} names {f}, which neither lockgate nor lockctl takes")


def check_flags():
    pairs = [("lockgate", os.path.join(ROOT, "docs", "configuration.md"), "Flags"),
             ("lockctl", os.path.join(ROOT, "docs", "lockctl.md"), "Options")]
    for binary, path, heading in pairs:
        in_help, in_docs = help_flags(binary), doc_flags(path, heading)
        check(len(in_help) > 3, f"{binary} --help lists flags")
        for f in sorted(in_help - in_docs):
            check(False, f"{binary} --help names {f}, {rel(path)} \"{heading}\" does not")
        for f in sorted(in_docs - in_help):
            check(False, f"{rel(path)} \"{heading}\" names {f}, {binary} --help does not")
        check(in_help == in_docs, f"{binary} --help and {rel(path)} name the same flags")
    check_flags_named_anywhere(help_flags("lockgate") | help_flags("lockctl"))


class Gateway:
    """The one Redis and gateway the examples run against."""

    def __init__(self):
        self.servers = Servers("docs")
        self.redis_port, _, ok = self.servers.redis()
        self.port, _, self.log, ready = self.servers.gateway(redis_port=self.redis_port)
        self.ok = ok and ready


def main():
    start = time.monotonic()
    check_links()
    check_layout()
    check_flags()
    gw = Gateway()
    try:
        if check(gw.ok, "redis-server and the gateway started"):
            check_blocks(gw)
    finally:
        gw.servers.stop()
    print(f"docs: took {time.monotonic() - start:.1f} s", file=sys.stderr)
    return count.summary()


if __name__ == "__main__":
    sys.exit(main())
