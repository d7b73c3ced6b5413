#!/usr/bin/env python3
"""Checks the documentation against the tree and the CLI it describes.

    check_docs.py ROOT PADDOCKCTL [PADDOCKD [PADDOCK_POOL]]
        check README.md, CHANGELOG.md and docs/*.md under ROOT
    check_docs.py --self-test PADDOCKCTL PADDOCKD PADDOCK_POOL
        run the checks on a small tree with one of each mistake and fail unless every mistake is
        reported, and nothing else

What is checked:
- every relative link and image (`[text](path)`, `![alt](path)`, `[ref]: path`, `<img src=...>`)
  outside code points to a file or directory that exists (the `#anchor` part is not checked);
- in the guides (docs/guide-*.md) and the deployment guide, every `paddockctl ...` command, in code
  blocks and in inline code, names real subcommands (as `paddockctl [SUB...] --help` lists them)
  and only options that the command's help, or paddockctl's global help, lists; every
  `paddockd ...` and `paddock-pool ...` command only options their --help lists.

Each problem is printed as FILE:LINE: what is wrong, and the exit status is 1 when there is any.
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
IMG_TAG = re.compile(r"<img\s[^>]*src=\"([^\"]+)\"", re.IGNORECASE)
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
FENCE = re.compile(r"^\s*(```|~~~)")
COMMAND_DOCS = re.compile(r"^(guide-.*|deployment)\.md$")
# Global options of paddockctl that take a value (they may stand before the subcommand).
GLOBAL_WITH_VALUE = {"--broker", "--output", "-o", "--timeout", "--tls-ca", "--token-file"}
SHELL_END = re.compile(r"\s(?:\||;|&&|\|\||#|>|<|2>|\))(?:\s|$)")


def doc_files(root):
    files = [os.path.join(root, name) for name in ("README.md", "CHANGELOG.md")]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        files += sorted(os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))
    return [f for f in files if os.path.isfile(f)]


def split_lines(text):
    """Yields (line number, prose with inline code removed, [inline code spans], [code lines])."""
    in_fence = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            yield number, "", [], [line]
            continue
        spans = [m.group(2) for m in INLINE_CODE.finditer(line)]
        yield number, INLINE_CODE.sub("", line), spans, []


def anchors_of(path):
    """The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces to '-'."""
    anchors = set()
    seen = {}
    in_fence = False
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for line in lines:
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        m = None if in_fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        if slug in seen:
            seen[slug] += 1
            slug = f"{slug}-{seen[slug]}"
        else:
            seen[slug] = 0
        anchors.add(slug)
    return anchors


def check_links(path, text, problems):
    base = os.path.dirname(path)
    for number, prose, _, _ in split_lines(text):
        targets = [m.group(1) for m in LINK.finditer(prose)]
        targets += [m.group(1) for m in IMG_TAG.finditer(prose)]
        ref = REF_DEF.match(prose)
        if ref:
            targets.append(ref.group(1))
        for target in targets:
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                continue  # a URL (https:, mailto:)
            file_part = target.split("#", 1)[0].split("?", 1)[0] or os.path.basename(path)
            if file_part.startswith("/"):
                problems.append(f"{path}:{number}: link to the absolute path '{target}': "
                                "use a path relative to this file")
                continue
            resolved = os.path.normpath(os.path.join(base, file_part))
            if not os.path.exists(resolved):
                problems.append(f"{path}:{number}: link to '{target}', but {resolved} does not exist: "
                                "fix the path or add the file")
                continue
            anchor = target.split("#", 1)[1] if "#" in target else ""
            if anchor and resolved.endswith(".md") and anchor not in anchors_of(resolved):
                problems.append(f"{path}:{number}: link to '{target}', but {file_part} has no heading "
                                f"whose anchor is '#{anchor}': fix the anchor or the heading")


class Cli:
    """Subcommands and options of paddockctl, read from its --help (cached per command path)."""

    def __init__(self, binary):
        self.binary = binary
        self.cache = {}

    def help(self, words):
        key = tuple(words)
        if key not in self.cache:
            result = subprocess.run([self.binary, *words, "--help"], capture_output=True, text=True,
                                    timeout=30)
            if result.returncode != 0:
                raise RuntimeError(f"`{self.binary} {' '.join(words)} --help` exited {result.returncode}: "
                                   f"{result.stderr.strip()}")
            self.cache[key] = result.stdout
        return self.cache[key]

    def subcommands(self, words):
        text = self.help(words)
        if "\nSubcommands:\n" not in text:
            return set()
        block = text.split("\nSubcommands:\n", 1)[1]
        names = set()
        for line in block.splitlines():
            if not line.strip():
                break
            m = re.match(r"^\s{2}(\S+)", line)
            if m:
                names.add(m.group(1))
        return names

    def options(self, words):
        names = set()
        for text in (self.help(words), self.help([])):
            # Only the options list: paddockctl's help ends with notes that mention flags in prose.
            for m in re.finditer(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text.split("\nBroker address:", 1)[0]):
                names.add(m.group(1))
        return names


# Where a command starts: a code line (after an optional `$ ` prompt), an inline code span, or
# after `$(`, a pipe, `;`, `&&` or `=`. Not in the middle of prose or of a diagram ("│ paddockctl
# the CLI"), nor a path such as build/bin/paddockctl (the same binary, but not worth parsing).
PROGRAMS = ("paddockctl", "paddockd", "paddock-pool")
COMMAND_START = {name: re.compile(r"(?:^\s*(?:\$\s+)?|\$\(\s*|[|;&]\s*|=\s*)" + re.escape(name) + r"(?=\s|$)(.*)")
                 for name in PROGRAMS}


def command_lines(text, program):
    """Yields (line number, the words after the program's name) for each of its commands in code."""
    for number, _, spans, code in split_lines(text):
        for piece in spans + code:
            for m in COMMAND_START[program].finditer(piece):
                rest = m.group(1)
                cut = SHELL_END.search(" " + rest + " ")
                if cut:
                    rest = (" " + rest)[:cut.start()]
                rest = re.sub(r"\s#.*$", "", rest)
                try:
                    words = shlex.split(rest)
                except ValueError:
                    words = rest.split()
                yield number, words


def check_daemon_flags(path, text, program, cli, problems):
    """paddockd and paddock-pool: every option must be in their --help, or, in a command with one of
    their few subcommands (`paddockd migrate`), in that subcommand's --help."""
    for number, words in command_lines(text, program):
        known = cli.subcommands([])
        chain = [w for w in words if w in known][:1]
        for word in words:
            if word.startswith("--") or re.fullmatch(r"-[A-Za-z]", word):
                flag = word.split("=", 1)[0]
                if flag not in cli.options(chain):
                    where = " ".join([program, *chain])
                    problems.append(f"{path}:{number}: {where} has no option {flag} (see `{where} --help`)")


def check_commands(path, text, cli, problems):
    for number, words in command_lines(text, "paddockctl"):
        chain = []
        i = 0
        # Global options before the subcommand.
        while i < len(words) and words[i].startswith("-"):
            flag = words[i].split("=", 1)[0]
            if flag not in cli.options([]):
                problems.append(f"{path}:{number}: paddockctl has no option {flag}")
            i += 2 if flag in GLOBAL_WITH_VALUE and "=" not in words[i] else 1
        while i < len(words):
            word = words[i]
            known = cli.subcommands(chain)
            if not known:
                break
            if word in known:
                chain.append(word)
                i += 1
                continue
            if re.fullmatch(r"[a-z][a-z-]*", word):
                where = "paddockctl" + "".join(" " + w for w in chain)
                problems.append(f"{path}:{number}: `{where} {word}` is not a command: `{where} --help` "
                                f"lists {', '.join(sorted(known))}")
                chain = None
            break
        if chain is None:
            continue  # its options belong to a command that does not exist
        if not chain:
            if i < len(words) or not words:
                continue  # prose such as "paddockctl and the console", or a bare `paddockctl`
        options = cli.options(chain)
        for word in words[i:]:
            if not word.startswith("-") or word in ("-", "--") or re.fullmatch(r"-\d.*", word):
                continue
            flag = word.split("=", 1)[0]
            if flag not in options:
                problems.append(f"{path}:{number}: `paddockctl {' '.join(chain)}` has no option {flag} "
                                f"(see `paddockctl {' '.join(chain)} --help`)")


def check_tree(root, binaries):
    """binaries: program name -> path; paddockctl is required, the daemons are checked when given."""
    problems = []
    cli = Cli(binaries["paddockctl"])
    daemons = {name: Cli(path) for name, path in binaries.items() if name != "paddockctl"}
    files = doc_files(root)
    if not files:
        problems.append(f"{root}: no README.md or docs/*.md to check")
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        check_links(path, text, problems)
        if COMMAND_DOCS.match(os.path.basename(path)) and os.path.basename(os.path.dirname(path)) == "docs":
            check_commands(path, text, cli, problems)
            for name, daemon in daemons.items():
                check_daemon_flags(path, text, name, daemon, problems)
    return problems, len(files)


def self_test(binaries):
    """One of each mistake in a scratch tree; every one must be reported, and nothing else."""
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs", "screenshots"))
        open(os.path.join(root, "docs", "screenshots", "there.png"), "wb").close()
        with open(os.path.join(root, "README.md"), "w") as f:
            f.write("# Read me\n[ok](docs/guide-engineer.md) [missing](docs/nowhere.md)\n"
                    "`[in code](docs/not-a-link.md)` and [web](https://example.org)\n")
        with open(os.path.join(root, "docs", "guide-engineer.md"), "w") as f:
            f.write("![there](screenshots/there.png) ![gone](screenshots/gone.png)\n"
                    "[anchor](../README.md#x) [good](#the-guide) [own](guide-engineer.md#the-guide)\n\n"
                    "```sh\n"
                    "paddockctl submit --playbook hello-c --follow   # fine\n"
                    "paddockctl frobnicate ID\n"
                    "paddockctl ls --no-such-flag\n"
                    "paddockctl reviews approve ID --reason ok | cat\n"
                    "paddockctl reviews frob ID\n"
                    "│ paddockctl   the CLI      │   (a diagram, not a command)\n"
                    "ids=$(paddockctl reviews ls --kinds bulk_change --output json)\n"
                    "paddock-pool --listen 10.0.0.2:7701 --tls-cert pool.pem --tls-key pool.key --tls-ca ca.pem\n"
                    "paddockd --config broker.toml --allow-local-execution\n"
                    "paddockd migrate --from broker.db --to postgresql://db/paddock --merge\n"
                    "paddockd migrate --from broker.db --frob\n"
                    "```\n\n"
                    "Run `paddockctl --broker 127.0.0.1:7700 --tls-ca ca.pem whoami` and `paddockctl pools`.\n"
                    "Or `paddockctl pool` in prose, which paddockctl alone does not start.\n\n"
                    "## The guide\n")
        problems, _ = check_tree(root, binaries)
    expected = [
        ("README.md:2", "docs/nowhere.md"),
        ("guide-engineer.md:2", "'#x'"),
        ("guide-engineer.md:1", "screenshots/gone.png"),
        ("guide-engineer.md:6", "frobnicate"),
        ("guide-engineer.md:7", "--no-such-flag"),
        ("guide-engineer.md:9", "reviews frob"),
        ("guide-engineer.md:11", "--kinds"),
        ("guide-engineer.md:12", "paddock-pool has no option --tls-ca"),
        ("guide-engineer.md:15", "paddockd migrate has no option --frob"),
        ("guide-engineer.md:19", "paddockctl pool`"),
    ]
    missing = [e for e in expected if not any(e[0] in p and e[1] in p for p in problems)]
    extra = [p for p in problems if not any(e[0] in p and e[1] in p for e in expected)]
    for p in problems:
        print("self-test saw:", p.split("/", 3)[-1] if p.startswith("/") else p)
    for e in missing:
        print(f"self-test: the mistake at {e[0]} ({e[1]}) was not reported", file=sys.stderr)
    for p in extra:
        print(f"self-test: reported something that is not a mistake: {p}", file=sys.stderr)
    return 0 if not missing and not extra else 1


def main(argv):
    args = argv[1:]
    self_testing = bool(args) and args[0] == "--self-test"
    if self_testing:
        args = args[1:]
    else:
        root, args = (args[0], args[1:]) if args else (None, [])
    if not 1 <= len(args) <= 3:
        print(__doc__, file=sys.stderr)
        return 2
    binaries = dict(zip(PROGRAMS, args))
    for name, path in binaries.items():
        if not os.access(path, os.X_OK):
            print(f"check_docs: {path} is not an executable {name}: build it first "
                  f"(cmake --build build --target {name})", file=sys.stderr)
            return 2
    if self_testing:
        return self_test(binaries)
    problems, count = check_tree(root, binaries)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"check_docs: {len(problems)} problem(s) in the documentation", file=sys.stderr)
        return 1
    print(f"check_docs: {count} file(s): every relative link and image exists; every command of "
          f"{', '.join(binaries)} in the guides is real")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
