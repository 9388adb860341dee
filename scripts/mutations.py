#!/usr/bin/env python
"""Proves the test suite bites: applies each one-line break of tests/MUTATIONS.md to a scratch
copy of the repository (never the working tree), runs the tests the entry names there, and
prints a table: caught / MISSED / target not found / error. Exit status 0 only when every
entry run was caught.

    nice -n 10 python scripts/mutations.py [--only M3 ...] [--baseline] [--keep]

A mutation's `find` text is looked up in every `.py` file under `python/` (so an entry keeps
working when a module moves) and must occur exactly once; otherwise the entry reports
`target not found`, never `caught`. `--baseline` first runs every listed test on the
unmutated copy (one pytest process): they must pass, or a "caught" would mean nothing.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MUTATIONS = REPO / "tests" / "MUTATIONS.md"
SEARCHED = ("python",)   # folders whose .py files a `find` text is looked up in
TIMEOUT_S = 1200


@dataclasses.dataclass
class Mutation:
    key: str          # "M3"
    title: str
    tests: list[str]
    find: str
    replace: str


@dataclasses.dataclass
class Outcome:
    mutation: Mutation
    result: str        # caught, MISSED, target not found, error
    where: str = ""
    seconds: float = 0.0
    detail: str = ""


def parse_mutations(text: str) -> list[Mutation]:
    """The `## Mn.` entries of MUTATIONS.md (their Tests line and find / replace blocks)."""
    sections = re.split(r"^## (?=M\d+\.)", text, flags=re.M)[1:]
    out = []
    for section in sections:
        head, _, body = section.partition("\n")
        key, _, title = head.partition(".")
        tests_line = re.search(r"^Tests:(.*)$", body, flags=re.M)
        blocks = dict(re.findall(r"^```(find|replace)\n(.*?)^```$", body, flags=re.M | re.S))
        if not tests_line or set(blocks) != {"find", "replace"}:
            raise SystemExit(f"{MUTATIONS}: entry {key} needs a Tests: line and a find and a replace block")
        tests = re.findall(r"`([^`]+)`", tests_line.group(1))
        if not tests:
            raise SystemExit(f"{MUTATIONS}: entry {key} names no test")
        out.append(Mutation(key.strip(), title.strip(), tests, blocks["find"], blocks["replace"]))
    if not out:
        raise SystemExit(f"{MUTATIONS}: no entries")
    return out


def scratch_copy(dest: Path) -> None:
    """The working tree's tracked and untracked (not ignored) files, copied to `dest`."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = REPO / name
        if not src.is_file():   # deleted in the working tree but still in the index
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


def locate(root: Path, find: str) -> tuple[Path | None, str]:
    """The one file under `root`'s searched folders that holds `find` exactly once."""
    hits = []
    for folder in SEARCHED:
        for path in sorted((root / folder).rglob("*.py")):
            count = path.read_text(encoding="utf-8").count(find)
            if count:
                hits.append((path, count))
    if len(hits) == 1 and hits[0][1] == 1:
        return hits[0][0], ""
    if not hits:
        return None, "the find text is in no file"
    return None, "the find text occurs more than once: " + ", ".join(f"{p.relative_to(root)} x{n}" for p, n in hits)


def run_tests(root: Path, tests: list[str], log: Path) -> int:
    env = dict(os.environ, PYTHONPATH=str(root / "python"), TPUESTIMATOR_FIXTURES=str(root / "tests" / "fixtures"),
               TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TPUESTIMATOR_FAULT", None)
    with open(log, "w") as out:
        # its own process group: a timeout (or Ctrl-C here) also ends the CLI processes the tests started
        proc = subprocess.Popen([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                                cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return -1
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def apply_and_test(root: Path, mutation: Mutation, logs: Path) -> Outcome:
    path, why = locate(root, mutation.find)
    if path is None:
        return Outcome(mutation, "target not found", detail=why)
    original = path.read_text(encoding="utf-8")
    where = str(path.relative_to(root))
    path.write_text(original.replace(mutation.find, mutation.replace, 1), encoding="utf-8")
    start = time.monotonic()
    try:
        code = run_tests(root, mutation.tests, logs / f"{mutation.key}.log")
    finally:
        path.write_text(original, encoding="utf-8")
    seconds = time.monotonic() - start
    if code == 1:   # pytest: tests ran and some failed
        return Outcome(mutation, "caught", where, seconds)
    if code == 0:
        return Outcome(mutation, "MISSED", where, seconds)
    return Outcome(mutation, "error", where, seconds, f"pytest exit {code} (-1: timeout); see {mutation.key}.log")


def table(outcomes: list[Outcome]) -> str:
    lines = ["| entry | break | file | tests | result | seconds |", "|---|---|---|---|---|---|"]
    for o in outcomes:
        tests = "<br>".join(t.rsplit("/", 1)[-1] for t in o.mutation.tests)
        result = o.result + (f" ({o.detail})" if o.detail else "")
        lines.append(f"| {o.mutation.key} | {o.mutation.title} | {o.where} | {tests} | {result} | {o.seconds:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], metavar="Mn", help="run only these entries")
    parser.add_argument("--baseline", action="store_true", help="first run every listed test unmutated")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy and the logs")
    args = parser.parse_args(argv)
    mutations = parse_mutations(MUTATIONS.read_text(encoding="utf-8"))
    if args.only:
        unknown = set(args.only) - {m.key for m in mutations}
        if unknown:
            raise SystemExit(f"no such entries: {sorted(unknown)}")
        mutations = [m for m in mutations if m.key in args.only]
    work = Path(tempfile.mkdtemp(prefix="tpue-mutations-"))
    root, logs = work / "repo", work / "logs"
    logs.mkdir()
    scratch_copy(root)
    print(f"scratch copy: {root}", file=sys.stderr, flush=True)
    try:
        if args.baseline:
            tests = list(dict.fromkeys(t for m in mutations for t in m.tests))
            code = run_tests(root, tests, logs / "baseline.log")
            print(f"baseline (unmutated, {len(tests)} tests): {'passed' if code == 0 else f'FAILED (exit {code})'}",
                  file=sys.stderr, flush=True)
            if code != 0:
                print((logs / "baseline.log").read_text()[-4000:], file=sys.stderr)
                return 1
        outcomes = []
        for mutation in mutations:
            outcome = apply_and_test(root, mutation, logs)
            outcomes.append(outcome)
            print(f"{mutation.key}: {outcome.result} {outcome.detail}".rstrip(), file=sys.stderr, flush=True)
        print(table(outcomes))
        caught = sum(o.result == "caught" for o in outcomes)
        print(f"\n{caught} of {len(outcomes)} caught")
        return 0 if caught == len(outcomes) else 1
    finally:
        if args.keep:
            print(f"kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
