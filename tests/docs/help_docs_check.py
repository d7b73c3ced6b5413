#!/usr/bin/env python3
"""Every binary's --help against its documentation, and --version.

Runs each binary's --help (and every paddockctl subcommand's, recursively), extracts every
--option the help text names, and fails naming the option and the doc file when that file does not
mention it. Then runs --version and expects the project version.

usage: help_docs_check.py --source-dir DIR --version X.Y.Z NAME=BINARY...
NAME is paddockd, paddockctl, paddock-pool, paddock-sandbox-init or paddock.
"""

import argparse
import os
import re
import subprocess
import sys

# The doc files that document each binary's options; an option must appear in one of them.
DOCS = {
    "paddockd": ["docs/broker.md", "docs/configuration.md"],
    "paddockctl": ["docs/cli.md"],
    "paddock-pool": ["docs/pool.md"],
    "paddock-sandbox-init": ["docs/pool.md"],
    "paddock": ["docs/console.md"],
}

OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def run(argv):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout + done.stderr


def subcommands(help_text):
    """Names listed under CLI11's 'Subcommands:' heading."""
    names, inside = [], False
    for line in help_text.splitlines():
        if line.strip().upper() == "SUBCOMMANDS:":
            inside = True
            continue
        if inside:
            if not line.strip():
                break
            match = re.match(r"\s+([a-z][a-z0-9-]*)\b", line)
            if match:
                names.append(match.group(1))
    return names


def help_pages(binary, prefix=()):
    """(command words, help text) for the binary and, recursively, its subcommands."""
    code, text = run([binary, *prefix, "--help"])
    if code != 0:
        raise SystemExit(f"FAIL: {' '.join([os.path.basename(binary), *prefix])} --help exited {code}:\n{text}")
    yield prefix, text
    for name in subcommands(text):
        yield from help_pages(binary, (*prefix, name))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("binaries", nargs="+", help="NAME=PATH")
    args = parser.parse_args()

    failures = []
    for spec in args.binaries:
        name, _, binary = spec.partition("=")
        docs = {doc: open(os.path.join(args.source_dir, doc), encoding="utf-8").read() for doc in DOCS[name]}
        checked = set()
        for words, text in help_pages(binary):
            command = " ".join([name, *words])
            for option in sorted(set(OPTION.findall(text))):
                if (command, option) in checked:
                    continue
                checked.add((command, option))
                pattern = re.compile(r"(?<![\w-])" + re.escape(option) + r"(?![\w-])")
                if not any(pattern.search(doc) for doc in docs.values()):
                    failures.append(f"{command}: option {option} is in --help but not in {' or '.join(DOCS[name])}")
        print(f"{name}: {len(checked)} options checked against {', '.join(DOCS[name])}")

        code, text = run([binary, "--version"])
        if code != 0 or args.version not in text:
            failures.append(f"{name} --version exited {code} and printed {text.strip()!r}; expected the version "
                            f"{args.version}")

    for failure in failures:
        print("FAIL: " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
