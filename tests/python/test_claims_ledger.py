"""tests/CLAIMS.md, the ledger of what the docs promise, names only what exists: each test id
an existing pytest function (parametrized ids allowed) or testthat description, each mutation
an entry of tests/MUTATIONS.md, each `where` an existing file; ids unique. And the reverse for
tests/MUTATIONS.md: every test an entry names exists. No TensorFlow: text only."""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLAIMS = REPO / "tests" / "CLAIMS.md"
MUTATIONS = REPO / "tests" / "MUTATIONS.md"
TEST_ID = re.compile(r"`(tests/[^`]+)`")
CLAIM_ID = re.compile(r"^C-[A-Z]+-\d{2}$")
NONE_YET = "none yet"


def claim_rows(text: str) -> list[dict]:
    """The ledger's table rows: {id, claim, where, tests (ids), mutations (ids), line}."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("| C-"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(cells) == 5, f"CLAIMS.md line {number}: 5 cells expected, got {len(cells)}: {line}"
        ident, claim, where, tests, mutations = cells
        assert tests == NONE_YET or TEST_ID.sub("", tests).strip() == "", \
            f"CLAIMS.md line {number}: tests must be backquoted ids or '{NONE_YET}': {tests}"
        assert mutations == NONE_YET or re.fullmatch(r"M\d+( M\d+)*", mutations), \
            f"CLAIMS.md line {number}: mutations must be ids such as M15 or '{NONE_YET}': {mutations}"
        rows.append({"id": ident, "claim": claim, "where": where, "line": number,
                     "tests": [] if tests == NONE_YET else TEST_ID.findall(tests),
                     "mutations": [] if mutations == NONE_YET else mutations.split()})
    return rows


def mutation_entries(text: str) -> dict[str, list[str]]:
    """MUTATIONS.md's entries: id -> the test ids of its `Tests:` line."""
    entries: dict[str, list[str]] = {}
    for block in re.split(r"^## ", text, flags=re.M)[1:]:
        ident = re.match(r"(M\d+)\.", block)
        if not ident:
            continue
        assert ident.group(1) not in entries, f"MUTATIONS.md: {ident.group(1)} twice"
        tests_line = re.search(r"^Tests:(.*)$", block, flags=re.M)
        assert tests_line, f"MUTATIONS.md {ident.group(1)}: no Tests: line"
        entries[ident.group(1)] = TEST_ID.findall(tests_line.group(1))
        assert entries[ident.group(1)], f"MUTATIONS.md {ident.group(1)}: the Tests: line names no test"
    return entries


# Read once per file and process: the ledger and MUTATIONS.md name about 750 test ids in 105
# files, and each check reads them all (parsing the files again for each id cost ~20 CPU s a run).
@functools.cache
def _pytest_functions(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text())
    return frozenset(node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and node.name.startswith("test_"))


@functools.cache
def _testthat_descriptions(path: Path) -> frozenset[str]:
    # as R reads the string: an escaped quote in the description is a quote in the test's name
    found = re.findall(r'test_that\(\s*"((?:[^"\\]|\\.)*)"', path.read_text())
    return frozenset(re.sub(r"\\(.)", r"\1", description) for description in found)


def missing_test(test_id: str, root: Path = REPO) -> str | None:
    """Why `test_id` names no existing test, or None when it does."""
    if "::" not in test_id:
        return f"{test_id}: no '::' between the file and the test"
    file, name = test_id.split("::", 1)
    path = root / file
    if not path.is_file():
        return f"{test_id}: no file {file}"
    if file.startswith("tests/python/") and file.endswith(".py"):
        function = name.split("[", 1)[0]
        if name.count("[") != name.count("]") or ("[" in name and not name.endswith("]")):
            return f"{test_id}: a malformed parametrized id"
        return None if function in _pytest_functions(path) else f"{test_id}: no function {function} in {file}"
    if file.startswith("tests/testthat/") and file.endswith(".R"):
        return None if name in _testthat_descriptions(path) else f"{test_id}: no test_that(\"{name}\" in {file}"
    return f"{test_id}: neither a tests/python/*.py nor a tests/testthat/*.R file"


def where_file(where: str) -> str:
    return where.split(" § ", 1)[0].strip()


def where_section_missing(where: str, root: Path) -> bool:
    """A Markdown page's `§ section` is one of its headings (the text moves between pages; the
    ledger must follow it). A man page's section is not checked."""
    path = root / where_file(where)
    if path.suffix != ".md":
        return False
    section = where.split(" § ", 1)[1].strip()
    section = re.sub(r"\s*\(intro\)$", "", section)
    headings = {h.strip() for h in re.findall(r"^#+ (.*)$", path.read_text(), flags=re.M)}
    return section not in headings


def ledger_problems(claims_text: str, mutations_text: str, root: Path = REPO) -> list[str]:
    """Everything wrong with the ledger and MUTATIONS.md's test ids, one line each."""
    problems = []
    rows = claim_rows(claims_text)
    entries = mutation_entries(mutations_text)
    seen: set[str] = set()
    for row in rows:
        at = f"CLAIMS.md line {row['line']} ({row['id']})"
        if not CLAIM_ID.match(row["id"]):
            problems.append(f"{at}: an id like C-TAB-01 expected")
        if row["id"] in seen:
            problems.append(f"{at}: the id is used twice")
        seen.add(row["id"])
        if not row["claim"]:
            problems.append(f"{at}: no claim")
        if " § " not in row["where"] or not (root / where_file(row["where"])).is_file():
            problems.append(f"{at}: where {row['where']!r} is no 'FILE § section' of an existing file")
        elif where_section_missing(row["where"], root):
            problems.append(f"{at}: where {row['where']!r}: the page has no such heading (did the text move?)")
        problems += [f"{at}: {why}" for why in map(lambda t: missing_test(t, root), row["tests"]) if why]
        problems += [f"{at}: {m} is no entry of MUTATIONS.md" for m in row["mutations"] if m not in entries]
        if row["mutations"] and not row["tests"]:
            problems.append(f"{at}: a mutation without a test that catches it")
    for ident, tests in entries.items():
        problems += [f"MUTATIONS.md {ident}: {why}" for why in map(lambda t: missing_test(t, root), tests) if why]
    return problems


def test_the_ledger_names_only_existing_tests_mutations_and_files():
    rows = claim_rows(CLAIMS.read_text())
    assert len(rows) >= 100, f"{len(rows)} claims"
    assert ledger_problems(CLAIMS.read_text(), MUTATIONS.read_text()) == []


@pytest.mark.parametrize("line, problem", [
    ("| C-TAB-01 | x | README.md § Tables | `tests/python/test_tables.py::test_no_such_test` | none yet |",
     "no function test_no_such_test"),
    ("| C-TAB-01 | x | README.md § Tables | `tests/testthat/test-tables.R::no such description` | none yet |",
     "no test_that"),
    ("| C-TAB-01 | x | README.md § Tables | `tests/python/test_tables.py::test_cli_writes_a_table` | M9999 |",
     "M9999 is no entry"),
    ("| C-TAB-01 | x | NOFILE.md § Tables | none yet | none yet |", "no 'FILE § section'"),
    ("| C-TAB-1 | x | README.md § Tables | none yet | none yet |", "an id like C-TAB-01"),
])
def test_a_broken_ledger_line_is_reported(line, problem):
    """The check can fail: each kind of broken line is named."""
    problems = ledger_problems(line + "\n", MUTATIONS.read_text())
    assert any(problem in p for p in problems), problems


def test_a_duplicate_id_and_a_mutation_naming_a_missing_test_are_reported():
    ok = "| C-TAB-01 | x | docs/tables.md § Tables | `tests/python/test_tables.py::test_cli_writes_a_table` | none yet |"
    assert ledger_problems(ok, "") == []
    assert any("used twice" in p for p in ledger_problems(ok + "\n" + ok, ""))
    broken = "## M1. x\n\nTests: `tests/python/test_tables.py::test_gone`\n"
    assert any("MUTATIONS.md M1" in p and "test_gone" in p for p in ledger_problems(ok, broken))


def mutations_runner():
    """scripts/mutations.py as a module (it is a script, not in a package)."""
    import importlib.util
    import sys

    if "mutations_runner" not in sys.modules:
        spec = importlib.util.spec_from_file_location("mutations_runner", REPO / "scripts" / "mutations.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module   # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
    return sys.modules["mutations_runner"]


def finds_not_found_once(mutations_text: str, root: Path = REPO) -> list[str]:
    """Entries whose `find` text (with its final newline, as scripts/mutations.py reads it) does
    not occur exactly once in the files the runner searches (its `searched_files`: code under
    python/, R/, inst/ and scripts/, README.md and docs/*.md): the runner would report them
    `target not found`, never caught."""
    sources = [p.read_text(errors="replace") for p in mutations_runner().searched_files(root)]
    problems = []
    for block in re.split(r"^## ", mutations_text, flags=re.M)[1:]:
        ident = block.split(".", 1)[0]
        found = dict(re.findall(r"^```(find|replace)\n(.*?)^```$", block, flags=re.M | re.S))
        if "find" not in found:
            problems.append(f"{ident}: no find block")
            continue
        count = sum(text.count(found["find"]) for text in sources)
        if count != 1:
            problems.append(f"{ident}: its find text occurs {count} times")
    return problems


def test_every_mutation_find_occurs_exactly_once():
    """A find that is part of a line (the text ends with its newline) or code that moved: each
    was a `target not found` of the runner (M35, M57, M139, M152, M153, M158, M179 on 2026-12-02)."""
    assert finds_not_found_once(MUTATIONS.read_text()) == []
    moved = "## M1. x\n\nTests: `t`\n\n```find\nno such line in the code\n```\n\n```replace\nx\n```\n"
    assert finds_not_found_once(moved) == ["M1: its find text occurs 0 times"]
