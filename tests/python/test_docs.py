"""The documentation: README.md is one screen, every code block of every page is run by a test or
marked not runnable with the reason, the API reference pages are current, the site checker
finds broken links, and the version is written once (issue 32).

The sites themselves are built and rendered in Chromium by scripts/build_docs.sh, which
scripts/test.sh runs beside R CMD check (a strict mkdocs build and pkgdown take about a minute).
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import check_site  # noqa: E402 (scripts/ is not a package)

# Every page a reader sees: README, the mkdocs pages, the benchmark pages, the pkgdown home, the changelog.
PAGES = sorted({REPO / "README.md", REPO / "CHANGELOG.md", REPO / "pkgdown" / "index.md",
                *(REPO / "docs").glob("*.md"), *(REPO / "docs" / "reference").glob("*.md"),
                *(REPO / "benchmarks").glob("*.md")})
MARKER = re.compile(r"^<!-- (run by|not run): (.+?) -->$")
FENCE = re.compile(r"^\s*(```+|~~~+)")


def code_blocks(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line number, the line before the block that is not blank, the block's lines) per fenced block."""
    lines = path.read_text().splitlines()
    blocks, start = [], None
    for i, line in enumerate(lines):
        if FENCE.match(line):
            if start is None:
                start = i
            else:
                before = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
                blocks.append((start + 1, before, lines[start + 1:i]))
                start = None
    assert start is None, f"{path}: a code block opened at line {start + 1} is never closed"
    return blocks


def _test_exists(test_id: str, page: Path) -> str | None:
    """Why `test_id` (tests/...::name) does not run `page`'s block, or None when it does."""
    file, _, name = test_id.partition("::")
    test_file = REPO / file
    if not test_file.is_file() or not name:
        return f"no test file {file} (write the marker as tests/...::test name)"
    text = test_file.read_text()
    defined = f"def {name}(" in text if file.endswith(".py") else f'test_that("{name}"' in text
    if not defined:
        return f"{file} defines no test '{name}'"
    if page.name not in text:
        return f"{file} never names {page.name}, so it cannot be reading the block"
    return None


def _named_tests_exist(reason: str) -> str | None:
    for name in re.findall(r"\b(test[_-][\w-]+\.(?:py|R))\b", reason):
        if not any((REPO / "tests" / d / name).is_file() for d in ("python", "testthat")):
            return f"the reason names {name}, which is not a test file"
    return None


def test_every_code_block_is_run_by_a_test_or_marked_not_runnable_with_the_reason():
    problems, counts = [], {"run by": 0, "not run": 0}
    for page in PAGES:
        for line, before, _ in code_blocks(page):
            where = f"{page.relative_to(REPO)}:{line}"
            marker = MARKER.match(before)
            if marker is None:
                problems.append(f"{where}: no '<!-- run by: tests/...::test -->' or '<!-- not run: reason -->' "
                                "line before the block")
                continue
            kind, text = marker.groups()
            counts[kind] += 1
            why = _test_exists(text, page) if kind == "run by" else (
                "the reason is too short to say why" if len(text) < 20 else _named_tests_exist(text))
            if why:
                problems.append(f"{where}: {why}")
    assert not problems, "\n".join(problems)
    assert counts["run by"] >= 30 and counts["run by"] + counts["not run"] >= 40, counts


def test_the_block_checker_refuses_an_unmarked_block_and_a_made_up_test(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Text.\n\n```python\nprint(1)\n```\n\n<!-- run by: tests/python/test_docs.py::nope -->\n"
                    "```r\n1\n```\n")
    (first, before1, lines1), (_, before2, _) = code_blocks(page)
    assert first == 3 and before1 == "Text." and lines1 == ["print(1)"] and MARKER.match(before1) is None
    assert _test_exists(MARKER.match(before2).group(2), page) == "tests/python/test_docs.py defines no test 'nope'"
    assert "test_nothing_here.py" in _named_tests_exist("not run: tests/python/test_nothing_here.py runs it")


def test_readme_is_one_screen_with_the_two_commands_first():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    _, _, first_block = code_blocks(REPO / "README.md")[0]
    assert first_block[0].startswith("bash scripts/main.sh") and first_block[1].startswith("bash scripts/test.sh")
    # every docs page is in the README's table
    for page in (REPO / "docs").glob("*.md"):
        if page.name not in ("index.md", "TEAM.md", "changelog.md", "r-package.md"):
            assert f"(docs/{page.name})" in readme, page.name


def test_the_model_function_page_example_builds_a_model_spec():
    from tpuestimator import ModelSpec

    (_, _, block), = code_blocks(REPO / "docs" / "model-function.md")
    scope: dict = {}
    exec("\n".join(block), scope)  # noqa: S102 (the page's lines, as written)
    spec = scope["image_classifier"]({"image": {"height": 16, "width": 16}, "learning_rate": 1e-3})
    assert isinstance(spec, ModelSpec)
    assert tuple(spec.model.output.shape) == (None, 5) and spec.class_names == scope["LIST_OF_LABELS"]
    assert float(spec.optimizer.learning_rate.numpy()) == pytest.approx(1e-3)
    import numpy as np
    out = spec.predictions(spec.model(np.zeros((2, 16, 16, 3), np.float32)))
    np.testing.assert_allclose(out["probabilities"].numpy().sum(axis=1), [1.0, 1.0], rtol=1e-6)
    assert out["class_id"].dtype.name == "int32"


def test_the_api_reference_pages_are_generated_from_the_public_names():
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "api_reference.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    estimator = (REPO / "docs" / "reference" / "estimator.md").read_text()
    assert "::: tpuestimator.core.estimator.Estimator" in estimator
    documented = "".join(p.read_text() for p in (REPO / "docs" / "reference").glob("*.md"))
    import tpuestimator
    for name in tpuestimator.__all__:
        if name != "__version__":
            assert re.search(rf"(::: |\]\[)tpuestimator\.[\w.]*\.{name}\b", documented), name


def test_the_site_checker_finds_broken_links_images_and_anchors(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text('<h1 id="top">A</h1><img src="../shot.png"><a href="../b/#there">b</a>')
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "index.html").write_text('<h2 id="there">B</h2><a href="../a/#top">a</a><a href="https://x.org/">x</a>')
    (tmp_path / "shot.png").write_bytes(b"png")
    assert check_site.broken_links(tmp_path) == []
    (tmp_path / "shot.png").unlink()
    (tmp_path / "b" / "index.html").write_text('<a href="../a/#gone">a</a><a href="../c/">c</a>')
    problems = check_site.broken_links(tmp_path)
    assert len(problems) == 4, problems   # the image, the anchor on a/, c/, and a/'s link to the missing #there
    assert any("img ../shot.png" in p for p in problems) and any("no id 'gone'" in p for p in problems)


def _init_version() -> str:
    tree = ast.parse((REPO / "python" / "tpuestimator" / "__init__.py").read_text())
    (value,) = [n.value.value for n in tree.body if isinstance(n, ast.Assign)
                and any(getattr(t, "id", "") == "__version__" for t in n.targets)]
    return value


def test_the_version_is_written_once_and_carried_by_description_the_cli_and_the_changelog(capsys):
    from tpuestimator.cli import main

    version = _init_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and 'version = { attr = "tpuestimator.__version__" }' in pyproject
    assert not re.search(r"^version\s*=\s*\"", pyproject, re.M)   # no second copy in [project]
    description = (REPO / "DESCRIPTION").read_text()
    assert re.search(r"^Version: (.+)$", description, re.M).group(1) == version, \
        "DESCRIPTION's Version differs from tpuestimator.__version__: write the same in both"
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"tpuestimator {version}"
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert released and released[0] == version, "CHANGELOG.md's latest release is not the version"
