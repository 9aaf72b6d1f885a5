"""The README and the docs site keep their shape: a short README whose commands come first, no
dated runs or commit hashes in hand-written pages, every page in the site's nav and every nav
entry a page, and every relative link of the README pointing at a file that exists."""

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 250

ISO_DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
COMMIT_AT = re.compile(r"\bat [0-9a-f]{7,40}\b")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def nav_entries(nav: object) -> list[str]:
    """Every page a mkdocs nav names, however deeply its sections nest."""
    if isinstance(nav, str):
        return [] if "://" in nav else [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in nav_entries(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_entries(value)]
    return []


def test_readme_is_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES


def test_readme_starts_with_the_two_commands() -> None:
    text = README.read_text()
    section = text.split("## Two commands", 1)
    assert len(section) == 2, "the README has a 'Two commands' section"
    commands = re.findall(r"^make \w+", section[1], flags=re.MULTILINE)
    assert commands[:2] == ["make demo", "make test"]
    first_heading = re.search(r"^## .*$", text, flags=re.MULTILINE)
    assert first_heading is not None and first_heading.group() == "## Two commands"


@pytest.mark.parametrize("path", [README, *pages()], ids=lambda p: str(p.relative_to(ROOT)))
def test_no_dates_or_commit_hashes(path: Path) -> None:
    found = [
        f"{number}: {line.strip()}"
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if ISO_DATE.search(line) or COMMIT_AT.search(line)
    ]
    assert not found, "dated runs and commit hashes belong in git history"


def test_every_page_is_in_the_nav_and_every_entry_exists() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    named = nav_entries(config["nav"])
    on_disk = {str(p.relative_to(DOCS)) for p in pages()}
    assert sorted(set(named)) == sorted(on_disk)
    assert len(named) == len(set(named)), "a page is named twice in the nav"


def test_readme_links_point_at_files() -> None:
    missing = []
    for target in LINK.findall(README.read_text()):
        if "://" in target or target.startswith(("#", "mailto:")):
            continue
        path = target.split("#", 1)[0]
        if path and not (ROOT / path).exists():
            missing.append(target)
    assert not missing
