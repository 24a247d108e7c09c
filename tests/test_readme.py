"""The README and docs/ say what the code does: every `stenoflow` command in their shell blocks
parses with the CLI's own parser, every Python block compiles, and every page they link exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from stenoflow.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(kind: str) -> list[tuple[str, str]]:
    """(page name, block text) of every fenced block of ``kind`` in the README and docs/."""
    return [(p.name, m[2]) for p in PAGES for m in BLOCK.finditer(p.read_text()) if m[1] == kind]


def commands() -> list[tuple[str, list[str]]]:
    """Each ``stenoflow`` invocation in the shell blocks, as (page, arguments after the program)."""
    out = []
    for page, text in blocks("bash"):
        for line in text.replace("\\\n", " ").splitlines():
            for part in re.split(r"\||&&", line):
                words = shlex.split(part, comments=True)
                if words and Path(words[0]).name == "stenoflow":
                    out.append((page, words[1:]))
    return out


def test_the_docs_show_commands() -> None:
    assert len(commands()) >= 30
    assert {page for page, _ in commands()} >= {"README.md", "cluster.md"}


@pytest.mark.parametrize(("page", "args"), commands(), ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_every_command_shown_parses(page: str, args: list[str]) -> None:
    try:
        build_parser().parse_args(args)
    except SystemExit as e:  # argparse's way of saying the command line is wrong
        pytest.fail(f"{page}: `stenoflow {' '.join(args)}` does not parse (exit {e.code})")


def test_every_python_block_compiles() -> None:
    found = blocks("python")
    assert found
    for page, text in found:
        compile(text, page, "exec")


def test_every_linked_page_exists() -> None:
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#]+\.md)\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.name} links {target}, which does not exist"
