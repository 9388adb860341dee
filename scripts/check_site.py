"""Checks a built documentation site (mkdocs at the root, pkgdown under r/) as a reader sees it.

1. Every local link (`<a href>`) and image (`<img src>`) of every HTML page resolves to a file
   of the site (and a `#fragment` to an id on that page), and the two sites link to each other.
2. Headless Chromium renders the home page, the tables page, the API reference of `Estimator`
   and the pkgdown reference index; each rendered DOM carries its headings, and a PNG screenshot
   of each is written to SHOTS_DIR when given.
Usage: python scripts/check_site.py SITE_DIR [SHOTS_DIR]   (exit 1 with the problems listed)
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

# page -> the headings its rendered DOM must show (text of h1-h4 elements)
PAGES = {
    "index.html": ["tpuestimator", "The two commands", "The pages"],
    "tables/index.html": ["Tables"],
    "reference/estimator/index.html": ["Estimator and RunConfig", "Estimator", "RunConfig", "train", "evaluate"],
    "r/reference/index.html": ["Training", "Tables", "Runs", "Export and predict", "Configuration", "Installation"],
}
SHOT_NAMES = {"index.html": "home.png", "tables/index.html": "tables.png",
              "reference/estimator/index.html": "api-estimator.png", "r/reference/index.html": "pkgdown-reference.png"}


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []   # (tag, url)
        self.ids: set[str] = set()
        self.headings: list[str] = []
        self._heading: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        if tag == "a" and attrs.get("href"):
            self.links.append(("a", attrs["href"]))
        if tag == "img" and attrs.get("src"):
            self.links.append(("img", attrs["src"]))
        if tag in ("h1", "h2", "h3", "h4"):
            self._heading = []

    def handle_endtag(self, tag):
        if tag in ("h1", "h2", "h3", "h4") and self._heading is not None:
            self.headings.append(" ".join("".join(self._heading).split()).rstrip("¶").strip())
            self._heading = None

    def handle_data(self, data):
        if self._heading is not None:
            self._heading.append(data)


def parse(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    return page


def broken_links(site: Path) -> list[str]:
    """Each local link or image of the site's HTML pages that does not resolve: 'page: url (why)'."""
    # 404.html links site-absolute (/page/): it is served from any depth, so its links need a server
    parsed = {p: parse(p.read_text(errors="replace")) for p in site.rglob("*.html") if p.name != "404.html"}
    problems = []
    for page, doc in parsed.items():
        for tag, url in doc.links:
            parts = urlsplit(url)
            if parts.scheme or parts.netloc or url.startswith(("mailto:", "javascript:", "data:")):
                continue
            target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
            if parts.path.endswith("/") or target.is_dir():
                target = target / "index.html"
            rel = page.relative_to(site)
            if not target.is_file():
                problems.append(f"{rel}: {tag} {url} (no file {target})")
            elif parts.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else parse(target.read_text(errors="replace")).ids
                if unquote(parts.fragment) not in ids:
                    problems.append(f"{rel}: {tag} {url} (no id '{parts.fragment}' on that page)")
    return problems


def missing_cross_links(site: Path) -> list[str]:
    """The two sites link to each other: the mkdocs page about the R package to pkgdown's home,
    and every pkgdown page (its navbar) to the mkdocs home."""
    def targets(page: Path) -> set[Path]:
        return {(page.parent / urlsplit(url).path).resolve() for tag, url in parse(page.read_text()).links
                if tag == "a" and not urlsplit(url).scheme and urlsplit(url).path}
    problems = []
    if (site / "r" / "index.html").resolve() not in targets(site / "r-package" / "index.html"):
        problems.append("r-package/index.html: no link to the R package's site (r/index.html)")
    for page in (site / "r").rglob("*.html"):
        if page.name != "404.html" and (site / "index.html").resolve() not in targets(page):
            problems.append(f"{page.relative_to(site)}: no link to the main site's home (index.html)")
    return problems


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return name
    raise SystemExit("check_site: Chromium is not installed: run bash scripts/setup_system.sh browser")


def render(page: Path, shot: Path | None) -> str:
    """The DOM of `page` after Chromium has loaded it (and its screenshot, when asked)."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,1400"]
    with tempfile.TemporaryDirectory() as profile:
        flags.append(f"--user-data-dir={profile}")
        dom = subprocess.run([chromium(), *flags, "--dump-dom", page.as_uri()], capture_output=True,
                             text=True, timeout=120, check=True).stdout
        if shot is not None:
            subprocess.run([chromium(), *flags, f"--screenshot={shot}", page.as_uri()], capture_output=True,
                           timeout=120, check=True)
    return dom


def missing_headings(site: Path, shots: Path | None) -> list[str]:
    problems = []
    for rel, wanted in PAGES.items():
        page = site / rel
        if not page.is_file():
            problems.append(f"{rel}: not built")
            continue
        shot = shots / SHOT_NAMES[rel] if shots else None
        headings = parse(render(page, shot)).headings
        # mkdocstrings appends a label to a heading ("RunConfig dataclass", "state property")
        problems += [f"{rel}: no heading '{h}' in the rendered page (headings: {headings[:12]})"
                     for h in wanted if not any(x == h or x.startswith(h + " ") for x in headings)]
        if shot is not None and (not shot.is_file() or shot.stat().st_size < 10_000):
            problems.append(f"{rel}: no screenshot at {shot}")
    return problems


def main(argv: list[str]) -> int:
    site = Path(argv[0]).resolve()
    shots = Path(argv[1]).resolve() if len(argv) > 1 else None
    if shots:
        shots.mkdir(parents=True, exist_ok=True)
    problems = broken_links(site) + missing_cross_links(site) + missing_headings(site, shots)
    for p in problems:
        print(f"check_site: {p}", file=sys.stderr)
    pages = sum(1 for _ in site.rglob("*.html"))
    print(f"check_site: {pages} pages, {len(problems)} problems" + (f"; screenshots in {shots}" if shots else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
