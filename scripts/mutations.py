#!/usr/bin/env python
"""Proves the test suite bites: applies each one-line break of tests/MUTATIONS.md to a scratch
copy of the repository (never the working tree), runs the tests the entry names there, reads
which of them failed, and prints a table: caught / partly / MISSED / target not found / error.
Exit status 0 only when every entry run was caught.

    nice -n 10 python scripts/mutations.py [--only M3 ...] [--no-baseline] [--keep] [--list]

Where a break goes: an entry's `find` text is looked up in every `.py`, `.R` and `.sh` file under
`python/`, `R/`, `inst/`, `scripts/` and `benchmarks/` (so an entry keeps working when a module
moves; scripts/ holds this runner, whose own promises have entries too; benchmarks/ the scripts
that write figures into the pages), and in README.md and docs/*.md (the
promises about the pages themselves break by an edit of a page); it must occur
exactly once; otherwise the entry reports `target not found`, never `caught`.

Which tests: the `Tests:` line names pytest ids (`tests/python/test_x.py::test_name[param]`)
and testthat ids (`tests/testthat/test-x.R::<the test_that description, exactly>`). The pytest
ids run in one pytest process (`--junitxml`; run again without the ids pytest did not find,
which stop it). The testthat ids run in one R process: `testthat::test_local()` on the scratch
copy, filtered to the named files, each reduced to its named test_that() blocks (testthat 3.1.6
selects files only; the driver blanks the other blocks, the runner restores the files); the
package is loaded from the scratch copy's source, its Python bridge from the scratch copy's
inst/python and the Python core from its python/ (PYTHONPATH), all three checked after the run.
Each test's outcome is read from those reports, never from an exit status.

A break must leave the code importable: a mutated Python module is imported (a script compiled)
before its tests run, and one that no longer imports (it did before) is an `error`, as is an entry
whose tests failed on an ImportError or SyntaxError: a crash on import is not a caught behaviour.

The verdict: `caught` only when EVERY named test failed (or errored in its body); `partly`
when some failed and others passed (the detail names those that passed); `MISSED` when none
failed; `error` when a named test is not in the report (no such test, a collection error, a
file that stops before its tests, a timeout) or errored in a pytest fixture's set-up, with the
reason. A skipped test counts as not failed (TPUESTIMATOR_FORCE_TESTS is unset for the runs: it
would turn a skip into a failure that reads as caught).

The baseline runs by default, once, before the mutations: every named test on the unmutated
copy. An entry with a test that does not pass there reports `error: fails unmutated` and is not
mutated (`--no-baseline` skips this check).

Child R processes the tests start (`library(tpuestimatorr)` in an Rscript, callr, rpy2) use the
scratch copy's R package too: it is installed into `<scratch>/.rlib` (`R CMD INSTALL
--no-test-load`), put first by `R_LIBS`, and reinstalled whenever the package's files differ
from what was installed last (a break of an `.R` file or of inst/, and its undoing).
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MUTATIONS = REPO / "tests" / "MUTATIONS.md"
SEARCHED = ("python", "R", "inst", "scripts", "benchmarks")  # folders whose files a `find` text is looked up in
SUFFIXES = (".py", ".R", ".sh")
# the pages whose promises are about the pages themselves (every block marked, README one
# screen, a substituted text still on its page): their breaks are edits of the page
PAGES = ("README.md", "docs/*.md")
R_PACKAGE_FILES = ("DESCRIPTION", "NAMESPACE", "R", "inst")   # what an install of the R package reads
PRIVATE_R_LIBRARY = ".rlib"
TIMEOUT_S = 1200
# Set in the environment of every test run: what the tests started in sessions of their own (a
# local cluster's tasks, TensorBoard), which the run's process group does not reach, carry it.
RUN_MARK = "TPUESTIMATOR_MUTATION_RUN"

# A test's outcome, read from pytest's junit report or testthat's results.
PASSED, FAILED, ERRORED, SKIPPED, SETUP_ERROR, MISSING = (
    "passed", "failed", "errored", "skipped", "setup error", "not in the report")
CAUGHT_STATUSES = (FAILED, ERRORED)
NO_SUCH_TEST = "no such test"


@dataclasses.dataclass
class Mutation:
    key: str          # "M3"
    title: str
    tests: list[str]
    find: str
    replace: str


@dataclasses.dataclass
class ReportedOutcome:
    status: str       # one of PASSED ... MISSING
    message: str = ""


@dataclasses.dataclass
class Outcome:
    mutation: Mutation
    result: str        # caught, partly, MISSED, target not found, error
    where: str = ""
    seconds: float = 0.0
    detail: str = ""


# --- MUTATIONS.md ------------------------------------------------------------------------------

CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")   # Markdown code spans: ``a `b` c`` holds a backquote


def code_spans(text: str) -> list[str]:
    spans = []
    for match in CODE_SPAN.finditer(text):
        spans.append(match.group(2).strip())   # ``a `b` `` needs a space before its closing run
    return spans


def parse_mutations(text: str, source: Path = MUTATIONS) -> list[Mutation]:
    """The `## Mn.` entries of MUTATIONS.md (their Tests line and find / replace blocks)."""
    sections = re.split(r"^## (?=M\d+\.)", text, flags=re.M)[1:]
    out = []
    for section in sections:
        head, _, body = section.partition("\n")
        key, _, title = head.partition(".")
        tests_line = re.search(r"^Tests:(.*)$", body, flags=re.M)
        blocks = dict(re.findall(r"^```(find|replace)\n(.*?)^```$", body, flags=re.M | re.S))
        if not tests_line or set(blocks) != {"find", "replace"}:
            raise SystemExit(f"{source}: entry {key} needs a Tests: line and a find and a replace block")
        tests = code_spans(tests_line.group(1))
        if not tests:
            raise SystemExit(f"{source}: entry {key} names no test")
        for test in tests:
            try:
                split_test_id(test)
            except ValueError as exc:
                raise SystemExit(f"{source}: entry {key}: {exc}") from None
        out.append(Mutation(key.strip(), title.strip(), tests, blocks["find"], blocks["replace"]))
    if not out:
        raise SystemExit(f"{source}: no entries")
    keys = [m.key for m in out]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise SystemExit(f"{source}: entries numbered twice: {duplicates}")
    return out


def split_test_id(test_id: str) -> tuple[str, str, str]:
    """("pytest" | "testthat", file, name) of a test id of a Tests: line."""
    file, sep, name = test_id.partition("::")
    if not sep or not name:
        raise ValueError(f"{test_id!r} is not a test id (expected FILE::NAME)")
    if file.startswith("tests/testthat/") and file.endswith(".R"):
        return "testthat", file, name
    if file.endswith(".py"):
        return "pytest", file, name
    raise ValueError(f"{test_id!r}: expected a pytest id (tests/python/test_x.py::test_name) "
                     f"or a testthat id (tests/testthat/test-x.R::description)")


# --- the scratch copy and the break ------------------------------------------------------------

def scratch_copy(dest: Path, repo: Path = REPO) -> None:
    """The working tree's tracked and untracked (not ignored) files, copied to `dest`."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if name.split("/", 1)[0] == PRIVATE_R_LIBRARY:   # someone's installed package, not the repository
            continue
        src = repo / name
        if not src.is_file():   # deleted in the working tree but still in the index; a link to a folder (.venv)
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        # a relative link stays a link (inst/schema/run_columns.json -> python/...): a break of its
        # target is a break of both, as in the repository
        relative_link = src.is_symlink() and not os.path.isabs(os.readlink(src))
        shutil.copy2(src, target, follow_symlinks=not relative_link)


def link_shared(work: Path, repo: Path = REPO) -> Path | None:
    """`<work>/shared`: the `shared/` folder beside the checkout (the vendored real tfruns that
    tests/testthat/helper-tfruns-real.R looks for two levels above tests/fixtures), so the scratch
    copy `<work>/repo` finds it as the checkout does. For a git worktree, the main checkout's."""
    candidates = [repo.parent / "shared"]
    common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=repo,
                            capture_output=True, text=True).stdout.strip()
    if common:
        candidates.append(Path(common).parent.parent / "shared")
    for candidate in candidates:
        if candidate.is_dir():
            (work / "shared").symlink_to(candidate.resolve(), target_is_directory=True)
            return candidate
    return None


def searched_files(root: Path) -> list[Path]:
    code = [path for folder in SEARCHED if (root / folder).is_dir()
            for path in (root / folder).rglob("*") if path.suffix in SUFFIXES and path.is_file()]
    return sorted(code + [path for pattern in PAGES for path in root.glob(pattern) if path.is_file()])


def locate(root: Path, find: str) -> tuple[Path | None, str]:
    """The one file under `root`'s searched folders that holds `find` exactly once."""
    hits = []
    for path in searched_files(root):
        count = path.read_text(encoding="utf-8").count(find)
        if count:
            hits.append((path, count))
    if len(hits) == 1 and hits[0][1] == 1:
        return hits[0][0], ""
    if not hits:
        return None, "the find text is in no file"
    return None, "the find text occurs more than once: " + ", ".join(f"{p.relative_to(root)} x{n}" for p, n in hits)


# --- reading the reports -----------------------------------------------------------------------

def junit_key(test_id: str) -> tuple[str, str]:
    """(classname, name) pytest's junit report gives the test `test_id` (as pytest mangles a node id)."""
    path, _, rest = test_id.partition("::")
    bracket = rest.find("[")   # a parameter's id may hold "::" itself
    names, param = (rest, "") if bracket < 0 else (rest[:bracket], rest[bracket:])
    parts = names.split("::")
    return ".".join([junit_module(path), *parts[:-1]]), parts[-1] + param


def junit_module(path: str) -> str:
    """A test file's name in pytest's junit report ("tests.python.test_x")."""
    return re.sub(r"\.py$", "", path).replace("/", ".")


def first_line(text: str | None, limit: int = 200) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    line = lines[0] if lines else ""
    return line if len(line) <= limit else line[:limit - 3] + "..."


def read_junit(xml_text: str) -> tuple[dict[tuple[str, str], ReportedOutcome], list[str]]:
    """Each test case of a pytest junit report, and the collection errors (a file's name and message)."""
    cases: dict[tuple[str, str], ReportedOutcome] = {}
    collection_errors = []
    for case in ET.fromstring(xml_text).iter("testcase"):
        key = (case.get("classname", ""), case.get("name", ""))
        failure, error, skipped = case.find("failure"), case.find("error"), case.find("skipped")
        if error is not None and "collection failure" in (error.get("message") or ""):
            collection_errors.append(f"{key[1]}: {first_line(error.text)}")
            continue
        if error is not None:   # pytest reports an exception in a test's body as a failure; errors are fixtures'
            outcome = ReportedOutcome(SETUP_ERROR, f"{error.get('message', '')}: {first_line(error.text)}")
        elif failure is not None:
            outcome = ReportedOutcome(FAILED, first_line(failure.get("message") or failure.text))
        elif skipped is not None:
            outcome = ReportedOutcome(SKIPPED, first_line(skipped.get("message")))
        else:
            outcome = ReportedOutcome(PASSED)
        cases[key] = outcome
    return cases, collection_errors


def parametrized_cases(test: str, cases: dict[tuple[str, str], ReportedOutcome]) -> ReportedOutcome | None:
    """The outcome of a parametrized test named without its parameters, as pytest reports the
    function: failed when any case failed (a setup error when one errored in set-up and none
    failed), skipped when every case skipped, else passed; None when it has no such cases."""
    classname, name = junit_key(test)
    if "[" in name:
        return None
    mine = [o for (c, n), o in cases.items() if c == classname and n.startswith(name + "[")]
    if not mine:
        return None
    for status in (FAILED, SETUP_ERROR):
        hit = [o for o in mine if o.status == status]
        if hit:
            return ReportedOutcome(status, f"{len(hit)} of {len(mine)} cases: {hit[0].message}")
    if all(o.status == SKIPPED for o in mine):
        return ReportedOutcome(SKIPPED, mine[0].message)
    return ReportedOutcome(PASSED)


def pytest_outcomes(tests: list[str], xml_text: str | None, log_text: str,
                    why_no_report: str = "") -> dict[str, ReportedOutcome]:
    """The outcome of each pytest id in `tests`, from the junit report and pytest's output."""
    not_found = {m.group(1).strip() for m in re.finditer(r"^ERROR: (?:file or directory )?not found: (.+?)(?: \(|$)", log_text, flags=re.M)}
    cases, collection_errors = read_junit(xml_text) if xml_text else ({}, [])
    out = {}
    for test in tests:
        if junit_key(test) in cases:
            out[test] = cases[junit_key(test)]
            continue
        params = parametrized_cases(test, cases)
        if params:
            out[test] = params
            continue
        file = test.partition("::")[0]
        if any(found.endswith(test) for found in not_found):
            reason = NO_SUCH_TEST
        elif collection_errors:
            mine = [e for e in collection_errors if e.startswith(junit_module(file) + ":")]
            reason = "collection error: " + "; ".join(mine or collection_errors)
        elif not_found:
            reason = "not run: pytest stopped on a missing test id (" + ", ".join(sorted(not_found)) + ")"
        elif why_no_report:
            reason = why_no_report
        else:
            reason = "no such test (pytest ran without it)"
        out[test] = ReportedOutcome(MISSING, reason)
    return out


def read_testthat(json_text: str) -> tuple[dict[tuple[str, str], ReportedOutcome], dict]:
    """Each test of the R driver's report, by (file, description), and its facts about the R session."""
    report = json.loads(json_text)
    cases: dict[tuple[str, str], ReportedOutcome] = {}
    for row in report["tests"]:
        key = (row["file"], row["test"])
        outcome = ReportedOutcome(row["status"], row.get("message") or "")
        previous = cases.get(key)
        # a description used twice in one file: the pair is caught only if both copies are
        if previous is None or previous.status in CAUGHT_STATUSES:
            cases[key] = outcome
    return cases, report.get("session", {})


OUTSIDE_TESTS = "(code run outside of `test_that()`)"


def testthat_outcomes(tests: list[str], json_text: str | None, why_no_report: str = "",
                      existing_files: set[str] | None = None) -> dict[str, ReportedOutcome]:
    cases, _ = read_testthat(json_text) if json_text else ({}, {})
    out = {}
    for test in tests:
        _, file, name = split_test_id(test)
        base = Path(file).name
        if (base, name) in cases:
            out[test] = cases[(base, name)]
            continue
        outside = cases.get((base, OUTSIDE_TESTS))
        if existing_files is not None and file not in existing_files:
            reason = "no such test file"
        elif outside is not None and outside.status != PASSED:
            reason = f"the file stopped outside its tests: {outside.message}"
        elif why_no_report:
            reason = why_no_report
        else:
            reason = "no such test in the file"
        out[test] = ReportedOutcome(MISSING, reason)
    return out


def classify(outcomes: dict[str, ReportedOutcome]) -> tuple[str, str]:
    """(result, detail) of one entry from its tests' outcomes."""
    short = {test: test.rsplit("/", 1)[-1] for test in outcomes}
    broken = [f"{short[t]}: {o.status}" + (f" ({o.message})" if o.message else "")
              for t, o in outcomes.items() if o.status in (MISSING, SETUP_ERROR)]
    if broken:
        return "error", "; ".join(broken)
    not_caught = [t for t, o in outcomes.items() if o.status not in CAUGHT_STATUSES]
    if not not_caught:
        return "caught", ""
    names = ", ".join(short[t] + (" (skipped)" if outcomes[t].status == SKIPPED else "") for t in not_caught)
    if len(not_caught) == len(outcomes):
        return "MISSED", f"passed: {names}"
    return "partly", f"passed: {names}"


def baseline_failures(tests: list[str], outcomes: dict[str, ReportedOutcome]) -> str:
    """Why the tests of an entry do not all pass unmutated ('' when they do)."""
    bad = [f"{t.rsplit('/', 1)[-1]}: {outcomes[t].status}" + (f" ({outcomes[t].message})" if outcomes[t].message
                                                                 else "")
           for t in tests if outcomes[t].status != PASSED]
    return "; ".join(bad)


# --- running the tests -------------------------------------------------------------------------

R_DRIVER = r"""
# Runs the named tests of the named testthat files of the scratch copy; writes each test's outcome
# and facts about the session as JSON. testthat 3.1.6 selects files, not tests: each named file
# is rewritten in place first with the other test_that() blocks blanked out (line numbers kept,
# top-level helpers kept); the Python runner restores the files afterwards.
args <- commandArgs(trailingOnly = TRUE)
root <- args[[1]]; spec <- jsonlite::read_json(args[[2]]); out <- args[[3]]; filter <- args[[4]]
description <- function(e) {
  if (!is.call(e) || length(e) < 2L) return(NULL)
  f <- e[[1]]
  if (!(identical(f, quote(test_that)) || identical(f, quote(testthat::test_that)))) return(NULL)
  d <- if (!is.null(names(e)) && "desc" %in% names(e)) e[["desc"]] else e[[2]]
  if (is.character(d) && length(d) == 1L) d else NULL
}
selected <- list()
for (f in spec$files) {
  wanted <- unlist(f$tests)
  exprs <- tryCatch(parse(f$path, keep.source = TRUE), error = function(e) NULL)
  if (is.null(exprs)) next   # left whole: its parse error is the file's result
  refs <- attr(exprs, "srcref")
  lines <- readLines(f$path, warn = FALSE)
  dropped <- integer(); kept <- integer(); found <- character()
  for (i in seq_along(exprs)) {
    span <- refs[[i]][[1]]:refs[[i]][[3]]
    d <- description(exprs[[i]])
    if (!is.null(d) && !(d %in% wanted)) dropped <- c(dropped, span) else kept <- c(kept, span)
    if (!is.null(d) && d %in% wanted) found <- c(found, d)
  }
  lines[setdiff(dropped, kept)] <- ""
  writeLines(lines, f$path)
  selected[[basename(f$path)]] <- as.list(found)
}
results <- testthat::test_local(root, filter = filter, reporter = testthat::SummaryReporter$new(),
                                stop_on_failure = FALSE, stop_on_warning = FALSE)
message_of <- function(e) substr(paste(conditionMessage(e), collapse = " "), 1, 300)
tests <- lapply(results, function(t) {
  kinds <- vapply(t$results, function(e) {
    if (inherits(e, "expectation_skip")) "skip" else if (inherits(e, "expectation_error")) "error"
    else if (inherits(e, "expectation_failure")) "failure" else "other"
  }, "")
  status <- if ("skip" %in% kinds) "skipped" else if ("failure" %in% kinds) "failed"
            else if ("error" %in% kinds) "errored" else "passed"
  bad <- t$results[kinds %in% c("failure", "error", "skip")]
  list(file = t$file, test = t$test, status = status,
       message = if (length(bad)) message_of(bad[[1]]) else "")
})
session <- list(lib_paths = .libPaths(), selected = selected)
if ("tpuestimatorr" %in% loadedNamespaces()) {
  session$bridge_dir <- evalq(system.file("python", package = "tpuestimatorr"), asNamespace("tpuestimatorr"))
  session$package_dir <- getNamespaceInfo("tpuestimatorr", "path")
}
if (reticulate::py_available(initialize = FALSE)) {
  session$core_file <- tryCatch(reticulate::import("tpuestimator")$`__file__`, error = function(e) NULL)
}
writeLines(jsonlite::toJSON(list(tests = tests, session = session), auto_unbox = TRUE, null = "null"), out)
"""


def r_regex_escape(text: str) -> str:
    return re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", text)


def testthat_filter(files: list[str]) -> str:
    """test_dir()'s `filter` that selects exactly these files (it matches the name without test- and .R)."""
    names = [re.sub(r"^test[-_]", "", re.sub(r"\.[rR]$", "", Path(f).name)) for f in files]
    return "^(" + "|".join(r_regex_escape(n) for n in names) + ")$"


def session_problems(root: Path, session: dict, installed: bool) -> str:
    """Why the R session did not run the scratch copy's code ('' when it did)."""
    def inside(path: str | None, folder: Path) -> bool:
        return bool(path) and Path(path).resolve().is_relative_to(folder.resolve())

    problems = []
    if session.get("package_dir") and not inside(session["package_dir"], root):
        problems.append(f"the R package came from {session['package_dir']}")
    if session.get("bridge_dir") and not inside(session["bridge_dir"], root / "inst" / "python"):
        problems.append(f"the R bridge came from {session['bridge_dir']}")
    if session.get("core_file") and not inside(session["core_file"], root / "python"):
        problems.append(f"the Python core came from {session['core_file']}")
    libs = session.get("lib_paths") or []
    if installed and (not libs or not inside(libs[0], root / PRIVATE_R_LIBRARY)):
        problems.append(f"child R processes would not use {PRIVATE_R_LIBRARY} (.libPaths(): {libs})")
    return "; ".join(problems)


def r_package_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for name in R_PACKAGE_FILES:
        target = root / name
        for path in sorted([target] if target.is_file() else target.rglob("*") if target.is_dir() else []):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def processes_marked(name: str, value: str) -> list[int]:
    """Pids of the live processes (zombies left out) whose environment holds NAME=VALUE (/proc)."""
    wanted, pids = f"{name}={value}".encode(), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                environ = fh.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if wanted in environ and state != "Z":
            pids.append(int(pid))
    return pids


class Runner:
    """Runs named tests on the scratch copy `root`; keeps its private R library current."""

    def __init__(self, root: Path, logs: Path):
        self.root, self.logs = root, logs
        self.mark = f"{os.getpid()}-{time.time_ns()}"  # RUN_MARK's value for this runner's test runs
        self.r_available = shutil.which("R") is not None and (root / "DESCRIPTION").is_file()
        self.installed_digest: str | None = None
        self.install_error = ""
        self.imports_unmutated: dict[str, str] = {}   # module -> its import problem before any break

    def env(self) -> dict[str, str]:
        env = dict(os.environ, TPUESTIMATOR_FIXTURES=str(self.root / "tests" / "fixtures"),
                   TF_CPP_MIN_LOG_LEVEL="2", NOT_CRAN="true", **{RUN_MARK: self.mark})
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.root / "python"), os.environ.get("PYTHONPATH")]))
        env.setdefault("TPUESTIMATORR_PYTHON", sys.executable)
        # a skip must stay a skip (not a failure that would read as "caught"); no injected faults
        for name in ("TPUESTIMATOR_FAULT", "TPUESTIMATOR_FORCE_TESTS", "TPUESTIMATOR_STRESS"):
            env.pop(name, None)
        if self.installed_digest is not None:
            env["R_LIBS"] = os.pathsep.join(filter(None, [str(self.root / PRIVATE_R_LIBRARY), os.environ.get("R_LIBS")]))
        return env

    def ensure_r_package(self) -> None:
        """Installs the scratch copy's R package into its private library if it changed since."""
        if not self.r_available:
            return
        digest = r_package_digest(self.root)
        if digest == self.installed_digest:
            return
        lib = self.root / PRIVATE_R_LIBRARY
        lib.mkdir(exist_ok=True)
        log = self.logs / "r-install.log"
        with open(log, "a") as out:
            code = subprocess.run(["R", "CMD", "INSTALL", "--no-test-load", "-l", str(lib), str(self.root)],
                                  cwd=self.root, stdout=out, stderr=subprocess.STDOUT).returncode
        if code != 0:
            self.installed_digest, self.install_error = None, f"R CMD INSTALL of the scratch copy failed (see {log})"
            shutil.rmtree(lib / "tpuestimatorr", ignore_errors=True)
        else:
            self.installed_digest, self.install_error = digest, ""

    def import_problem(self, module: str | None, path: Path) -> str:
        """The last line of the error importing `module` (or compiling the script `path`), "" when it loads."""
        code = ("import importlib, sys; importlib.import_module(sys.argv[1])" if module
                else "import sys; compile(open(sys.argv[1], encoding='utf-8').read(), sys.argv[1], 'exec')")
        env = self.env()
        env["PYTHONPATH"] = os.pathsep.join([str(self.root / "inst" / "python"), env["PYTHONPATH"]])
        proc = subprocess.run([sys.executable, "-c", code, module or str(path)], cwd=self.root, env=env,
                              capture_output=True, text=True, timeout=600)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        return "" if proc.returncode == 0 else (lines[-1] if lines else f"exit {proc.returncode}")

    def _run(self, cmd: list[str], log: Path) -> tuple[int | None, float]:
        """Exit status (None: timed out) of `cmd`, in its own process group, killed on a timeout."""
        start = time.monotonic()
        with open(log, "w") as out:
            # its own process group: a timeout (or Ctrl-C here) also ends the processes the tests started
            proc = subprocess.Popen(cmd, cwd=self.root, env=self.env(), stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                code: int | None = proc.wait(TIMEOUT_S)
            except subprocess.TimeoutExpired:
                code = None
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                else:   # the tests' own leftovers (an orphaned CLI child)
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                # leftovers in sessions of their own: a mutant that breaks stopping a cluster's
                # tasks left one training on after its run (M604)
                for pid in processes_marked(RUN_MARK, self.mark):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
        return code, time.monotonic() - start

    def run_pytest(self, tests: list[str], name: str) -> dict[str, ReportedOutcome]:
        outcomes = self._pytest_once(tests, name)
        # pytest runs nothing when one id is missing: the others run again without the missing ones
        missing = [t for t, o in outcomes.items() if o.status == MISSING and o.message == NO_SUCH_TEST]
        rest = [t for t in tests if t not in missing]
        if missing and rest:
            outcomes.update(self._pytest_once(rest, f"{name}.rerun"))
        return outcomes

    def _pytest_once(self, tests: list[str], name: str) -> dict[str, ReportedOutcome]:
        report, log = self.logs / f"{name}.pytest.xml", self.logs / f"{name}.pytest.log"
        report.unlink(missing_ok=True)
        # --rootdir: the junit report names tests relative to it (tests.python.test_x), as the ids are;
        # --continue-on-collection-errors: a file that cannot be imported does not stop the others
        code, _ = self._run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--rootdir={self.root}",
                             "--continue-on-collection-errors", f"--junitxml={report}", *tests], log)
        why = f"timed out after {TIMEOUT_S} s" if code is None else f"pytest exit {code} without a report; see {log}"
        xml_text = report.read_text() if report.is_file() and report.stat().st_size else None
        return pytest_outcomes(tests, xml_text, log.read_text(errors="replace"), why)

    def run_testthat(self, tests: list[str], name: str) -> dict[str, ReportedOutcome]:
        files = list(dict.fromkeys(split_test_id(t)[1] for t in tests))
        existing = [f for f in files if (self.root / f).is_file()]
        if not self.r_available:
            return {t: ReportedOutcome(MISSING, "R is not installed") for t in tests}
        if self.install_error:
            return {t: ReportedOutcome(MISSING, self.install_error) for t in tests}
        if not existing:
            return testthat_outcomes(tests, None, existing_files=set(existing))
        driver, spec, report, log = (self.logs / "run_testthat.R", self.logs / f"{name}.testthat-spec.json",
                                     self.logs / f"{name}.testthat.json", self.logs / f"{name}.testthat.log")
        driver.write_text(R_DRIVER)
        spec.write_text(json.dumps({"files": [
            {"path": str(self.root / f), "tests": [split_test_id(t)[2] for t in tests if split_test_id(t)[1] == f]}
            for f in existing]}))
        report.unlink(missing_ok=True)
        originals = {f: (self.root / f).read_bytes() for f in existing}   # the driver blanks the other tests
        try:
            code, _ = self._run(["Rscript", str(driver), str(self.root), str(spec), str(report),
                                 testthat_filter(existing)], log)
        finally:
            for f, data in originals.items():
                (self.root / f).write_bytes(data)
        if code is None:
            return testthat_outcomes(tests, None, f"timed out after {TIMEOUT_S} s", set(existing))
        if not report.is_file():
            return testthat_outcomes(tests, None, f"R exit {code} without a report; see {log}", set(existing))
        text = report.read_text()
        problems = session_problems(self.root, read_testthat(text)[1], self.installed_digest is not None)
        if problems:
            return {t: ReportedOutcome(MISSING, f"not the scratch copy's code: {problems}") for t in tests}
        return testthat_outcomes(tests, text, existing_files=set(existing))

    def run(self, tests: list[str], name: str) -> dict[str, ReportedOutcome]:
        """The outcome of each test id in `tests` on the scratch copy as it is now."""
        self.ensure_r_package()
        outcomes = {}
        pytest_ids = [t for t in tests if split_test_id(t)[0] == "pytest"]
        testthat_ids = [t for t in tests if split_test_id(t)[0] == "testthat"]
        if pytest_ids:
            outcomes.update(self.run_pytest(pytest_ids, name))
        if testthat_ids:
            outcomes.update(self.run_testthat(testthat_ids, name))
        return {t: outcomes[t] for t in tests}


def python_module(root: Path, path: Path) -> str | None:
    """The dotted name `path` is imported by (from python/ or inst/python/), None for a script."""
    for folder in (root / "python", root / "inst" / "python"):
        if path.is_relative_to(folder):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return None


IMPORT_FAILURE = re.compile(r"^(?:E\s+)?(ImportError|ModuleNotFoundError|SyntaxError|IndentationError)\b")


def import_failures(outcomes: dict[str, ReportedOutcome]) -> list[str]:
    """The named tests that failed because code did not import, not because behaviour broke."""
    return [f"{t.rsplit('/', 1)[-1]} ({o.message})" for t, o in outcomes.items()
            if o.status in CAUGHT_STATUSES and IMPORT_FAILURE.match(o.message)]


def apply_and_test(runner: Runner, mutation: Mutation) -> Outcome:
    root = runner.root
    path, why = locate(root, mutation.find)
    if path is None:
        return Outcome(mutation, "target not found", detail=why)
    original = path.read_text(encoding="utf-8")
    where = str(path.relative_to(root))
    module = python_module(root, path) if path.suffix == ".py" else None
    if module and module not in runner.imports_unmutated:
        runner.imports_unmutated[module] = runner.import_problem(module, path)
    path.write_text(original.replace(mutation.find, mutation.replace, 1), encoding="utf-8")
    start = time.monotonic()
    try:
        # a mutant that does not import fails every test that touches it: that is a broken
        # mutation, not a caught one (a behaviour break must leave the code importable)
        problem = runner.import_problem(module, path) if path.suffix == ".py" else ""
        if problem and not runner.imports_unmutated.get(module or ""):
            return Outcome(mutation, "error", where, time.monotonic() - start,
                           f"the mutant does not import: {problem}")
        outcomes = runner.run(mutation.tests, mutation.key)
    finally:
        path.write_text(original, encoding="utf-8")
    result, detail = classify(outcomes)
    crashed = import_failures(outcomes)
    if result in ("caught", "partly") and crashed:
        result, detail = "error", "failed on an import, not on behaviour: " + "; ".join(crashed)
    return Outcome(mutation, result, where, time.monotonic() - start, detail)


def table(outcomes: list[Outcome]) -> str:
    lines = ["| entry | break | file | result | seconds | detail |", "|---|---|---|---|---|---|"]
    for o in outcomes:
        detail = o.detail.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {o.mutation.key} | {o.mutation.title} | {o.where} | {o.result} | {o.seconds:.0f} | {detail} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], metavar="Mn", help="run only these entries")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the first run of every named test on the unmutated copy")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy and the logs")
    parser.add_argument("--list", action="store_true", help="print the entries and their tests, run nothing")
    args = parser.parse_args(argv)
    mutations = parse_mutations(MUTATIONS.read_text(encoding="utf-8"))
    if args.only:
        unknown = set(args.only) - {m.key for m in mutations}
        if unknown:
            raise SystemExit(f"no such entries: {sorted(unknown)}")
        mutations = [m for m in mutations if m.key in args.only]
    if args.list:
        for m in mutations:
            print(f"{m.key}. {m.title}")
            for test in m.tests:
                print(f"    {test}")
        return 0
    work = Path(tempfile.mkdtemp(prefix="tpue-mutations-"))
    root, logs = work / "repo", work / "logs"
    logs.mkdir()
    scratch_copy(root)
    link_shared(work)
    print(f"scratch copy: {root}", file=sys.stderr, flush=True)
    runner = Runner(root, logs)
    try:
        outcomes, to_mutate = [], mutations
        if not args.no_baseline:
            tests = list(dict.fromkeys(t for m in mutations for t in m.tests))
            start = time.monotonic()
            baseline = runner.run(tests, "baseline")
            passing = sum(o.status == PASSED for o in baseline.values())
            print(f"baseline (unmutated): {passing} of {len(tests)} tests passed in {time.monotonic() - start:.0f} s",
                  file=sys.stderr, flush=True)
            to_mutate = []
            for m in mutations:
                why = baseline_failures(m.tests, baseline)
                if why:
                    outcomes.append(Outcome(m, "error", detail=f"fails unmutated: {why}"))
                    print(f"{m.key}: error fails unmutated: {why}", file=sys.stderr, flush=True)
                else:
                    to_mutate.append(m)
        for mutation in to_mutate:
            outcome = apply_and_test(runner, mutation)
            outcomes.append(outcome)
            print(f"{mutation.key}: {outcome.result} {outcome.detail}".rstrip(), file=sys.stderr, flush=True)
        outcomes.sort(key=lambda o: mutations.index(o.mutation))
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
