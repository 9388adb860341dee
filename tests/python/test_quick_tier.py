"""The quick tier (`scripts/test.sh --quick`, for working between full runs) holds a fast test of
every sub-package and of every R source file; these tests keep it so.

- pytest: a test marked `@pytest.mark.quick("tables", "serving")` is in the tier; the mark's
  arguments name the parts of `python/tpuestimator` it exercises (a sub-package folder or a
  top-level module). A named part must appear in the test's own code or in its file's imports
  (`tpuestimator.tables`, `from tpuestimator import tables`, `tpuestimator/tables`), so a mark
  cannot claim a part its test never reaches.
- testthat: the files named in `tests/quick_testthat.txt`. An `R/*.R` file is covered when a
  function it defines runs in them: called by a quick testthat file or by the package's load
  hook (which runs in every file), directly or through other functions of the package (a
  static call graph read from R/, so generous; a file that only RStudio, a rare option or no
  test reaches shows up).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "python" / "tpuestimator"
TESTS = REPO / "tests" / "python"
QUICK_R = REPO / "tests" / "quick_testthat.txt"


def package_parts() -> set[str]:
    """The sub-package folders and top-level modules of python/tpuestimator."""
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("__")}
    return folders | modules


def _quick_args(decorator: ast.expr) -> list[str] | None:
    """The arguments of a `pytest.mark.quick(...)` decorator, None for any other decorator."""
    if isinstance(decorator, ast.Call) and ast.unparse(decorator.func) == "pytest.mark.quick":
        return [ast.literal_eval(arg) for arg in decorator.args]
    if ast.unparse(decorator) == "pytest.mark.quick":
        return []
    return None


def _mentions(part: str, text: str) -> bool:
    return bool(re.search(rf"tpuestimator[./]{re.escape(part)}\b", text)
                or re.search(rf"from tpuestimator import [^\n]*\b{re.escape(part)}\b", text)
                or re.search(rf"PACKAGE / \"{re.escape(part)}\"", text))


def quick_python_tests() -> list[tuple[str, list[str], bool]]:
    """(test id, the parts its mark names, whether each named part appears in its code or imports)."""
    found = []
    for path in sorted(TESTS.glob("test_*.py")):
        source = path.read_text()
        tree = ast.parse(source)
        imports = "\n".join(ast.unparse(node) for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom))
        helpers = {node.name: ast.get_source_segment(source, node) for node in tree.body
                   if isinstance(node, ast.FunctionDef) and not node.name.startswith("test_")}
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test_"):
                continue
            for decorator in node.decorator_list:
                parts = _quick_args(decorator)
                if parts is not None:   # the test, the file's helpers and fixtures it names, the file's imports
                    code, used = ast.get_source_segment(source, node), set()
                    while new := {name for name in helpers if name not in used and re.search(rf"\b{name}\b", code)}:
                        used |= new
                        code += "\n" + "\n".join(helpers[name] for name in new)
                    code += "\n" + imports
                    found.append((f"{path.name}::{node.name}", parts, all(_mentions(p, code) for p in parts)))
    return found


@pytest.mark.quick()
def test_every_python_part_has_a_quick_test_that_reaches_it():
    tests = quick_python_tests()
    assert len(tests) >= len(package_parts()) // 2, tests
    named = {part for _, parts, _ in tests for part in parts}
    unknown = sorted(named - package_parts())
    assert not unknown, f"quick marks name parts python/tpuestimator does not have: {unknown}"
    missing = sorted(package_parts() - named)
    assert not missing, (f"no quick test for python/tpuestimator/{missing}: mark a fast test of each with "
                         f"@pytest.mark.quick({missing[0]!r})")
    unreached = [(test, parts) for test, parts, reached in tests if not reached]
    assert not unreached, f"quick marks naming parts their test never imports: {unreached}"
    bare = [test for test, parts, _ in tests if not parts and not test.startswith("test_quick_tier.py")]
    assert not bare, f"quick tests naming no part: {bare}"


R_FUNCTION = re.compile(r"^`?([A-Za-z.][A-Za-z0-9._$]*)`?\s*<-\s*function\b", re.MULTILINE)


def r_functions() -> dict[str, str]:
    """function name -> the R/*.R file defining it."""
    return {name: path.name for path in sorted((REPO / "R").glob("*.R")) for name in R_FUNCTION.findall(path.read_text())}


def _calls(text: str, names) -> set[str]:
    """The names called in `text` (`name(`), or passed on as a function (`name,` or `name)`)."""
    text = re.sub(r"#[^\n]*", "", text)   # comments do not call anything
    used = re.findall(r"(?<![\w.$])([A-Za-z.][\w.]*)\s*(?=[(,)])", text)
    return set(used) & set(names)


def r_files_reached(test_files: list[Path]) -> set[str]:
    """The R/*.R files one of whose functions the test files call, directly or through the package."""
    defined = r_functions()
    bodies: dict[str, str] = {}
    for path in (REPO / "R").glob("*.R"):
        text = path.read_text()
        starts = [(m.start(), m.group(1)) for m in R_FUNCTION.finditer(text)] + [(len(text), None)]
        for (start, name), (end, _) in zip(starts, starts[1:]):
            bodies[name] = text[start:end]
    frontier = {name for name in defined if name.startswith(".on")}   # the package's load hooks run in every file
    frontier |= set().union(*(_calls(p.read_text(), defined) for p in test_files))
    reached: set[str] = set()
    while frontier:
        reached |= frontier
        frontier = set().union(*(_calls(bodies.get(name, ""), defined) for name in frontier)) - reached
    return {defined[name] for name in reached}


def quick_testthat_files() -> list[Path]:
    names = [line.split("#", 1)[0].strip() for line in QUICK_R.read_text().splitlines()]
    return [REPO / "tests" / "testthat" / name for name in names if name]


@pytest.mark.quick()
def test_every_r_file_has_a_quick_testthat_file_that_reaches_it():
    files = quick_testthat_files()
    assert files, QUICK_R
    absent = [f.name for f in files if not f.is_file()]
    assert not absent, f"{QUICK_R.name} names testthat files that do not exist: {absent}"
    all_r = {p.name for p in (REPO / "R").glob("*.R")}
    missing = sorted(all_r - r_files_reached(files))
    assert not missing, (f"no quick testthat file calls a function of R/{missing} (directly or through the package):"
                         f" add a fast testthat file that does to {QUICK_R.name}")


@pytest.mark.quick()
def test_the_coverage_checks_catch_a_part_without_a_quick_test(tmp_path):
    """The checks above can fail: a testthat file calling nothing reaches no more than the load
    hooks do, and a mark naming a part its test never imports is seen as such."""
    empty = tmp_path / "test-nothing.R"
    empty.write_text("test_that('nothing', expect_true(TRUE))  # tpu_tuning_run(x)\n")
    assert "tune.R" not in r_files_reached([empty])
    assert "tune.R" in r_files_reached([REPO / "tests" / "testthat" / "test-tune.R"])
    assert _mentions("tables", "from tpuestimator.tables import api")
    assert _mentions("cli", "from tpuestimator import config, cli")
    assert not _mentions("tables", "from tpuestimator.serving import tables_helper")
    assert not _mentions("data", "from tpuestimator.database import x")
    assert _mentions("schema", 'json.loads((PACKAGE / "schema" / "config.schema.json").read_text())')


def start_first_names(description: str) -> list[str]:
    """The testthat files DESCRIPTION's `Config/testthat/start-first` names (as testthat reads
    it: comma-separated, each a file's name without `test-` and `.R`), in order."""
    match = re.search(r"^Config/testthat/start-first:(.*(?:\n[ \t].*)*)", description, re.M)
    return [name.strip() for name in match.group(1).split(",") if name.strip()] if match else []


def names_without_a_file(names: list[str]) -> list[str]:
    return [name for name in names if not (REPO / "tests" / "testthat" / f"test-{name}.R").is_file()]


@pytest.mark.quick()
def test_the_testthat_files_started_first_exist():
    """testthat's parallel sessions start these files first (scripts/run_testthat.R: the slowest,
    so none runs alone at the end); a renamed file would silently drop out of the list."""
    names = start_first_names((REPO / "DESCRIPTION").read_text())
    assert names, "DESCRIPTION has no Config/testthat/start-first"
    assert not names_without_a_file(names), (
        f"DESCRIPTION's Config/testthat/start-first names no file tests/testthat/test-NAME.R for "
        f"{names_without_a_file(names)}: rename them as the files are")
    # the check can fail: a name continued on the next line, and a name with no file
    assert start_first_names("Config/testthat/start-first: train,\n    no-such-file\nNext: x\n") == [
        "train", "no-such-file"]
    assert names_without_a_file(["train", "no-such-file"]) == ["no-such-file"]
