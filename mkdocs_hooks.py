"""MkDocs hooks for the documentation site (``mkdocs.yml``: ``hooks``).

The Markdown files are written to be read on a repository host as well as on the site, so they
link to files outside ``docs/`` (``../CHANGELOG.md``, ``src/cxreval/reward.py`` in the README).
The site holds only ``docs/``, and ``mkdocs build --strict`` refuses a link to a file it does not
publish. These hooks, and nothing else, bridge the two:

- ``docs/index.md`` is the README and ``docs/changelog.md`` is CHANGELOG.md: each stub's Markdown
  is replaced by the repository file's (one source for each text, nothing copied by hand);
- on every page, a link that leaves ``docs/`` is rewritten: to README.md or CHANGELOG.md, to their
  pages (the anchor kept); to any other repository file, to its path as code (the site does not
  publish source files). Links inside ``docs/`` are left to MkDocs, which checks them;
- lists are read as GitHub reads them: Python-Markdown, which MkDocs uses, needs a blank line
  before a list and 4 spaces a nesting level, where the docs write a list right under its
  paragraph and nest by 2 spaces; a blank line is put before such a list and, inside a list, the
  indentation is doubled;
- in the API reference, the Sphinx roles of the docstrings (``:class:`Table```) are shown as the
  code they mark (``Table``), without the role's name.

Fenced code blocks are copied unchanged.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
DOCS = "docs"
#: page of the site -> the repository file that is its Markdown
INCLUDED = {"index.md": "README.md", "changelog.md": "CHANGELOG.md"}
#: repository file -> its page on the site
PAGE_OF = {source: page for page, source in INCLUDED.items()}
FENCE = re.compile(r"^(`{3,}|~{3,})")
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
#: a list item, and its indentation
ITEM = re.compile(r"^( *)(?:[-*+]|\d+[.)]) +\S")
#: a docstring's Sphinx role as Markdown renders it: ``:class:<code>Table</code>``
ROLE = re.compile(r":(?:attr|class|data|exc|func|meth|mod|obj):(?=<code>)")


def _rewrite(match: re.Match[str], source_dir: str, page_dir: str) -> str:
    bang, text, target = match.groups()
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
        return match.group(0)  # a URL, or an anchor on the same page
    path, hash_, anchor = target.partition("#")
    repo_path = posixpath.normpath(posixpath.join(source_dir, path))  # relative to the repository root
    if repo_path.startswith(DOCS + "/"):
        new = posixpath.relpath(repo_path, posixpath.join(DOCS, page_dir) if page_dir else DOCS)
        return f"{bang}[{text}]({new}{hash_}{anchor})"
    if repo_path in PAGE_OF:
        new = posixpath.relpath(PAGE_OF[repo_path], page_dir or ".")
        return f"{bang}[{text}]({new}{hash_}{anchor})"
    # another file of the repository: its path as code, the words kept
    shown = f"`{repo_path}`"
    return shown if text.strip("`") == repo_path else f"{text} ({shown})"


def rewrite_links(markdown: str, source_dir: str, page_dir: str) -> str:
    """``markdown`` read from ``source_dir`` (relative to the repository root), shown as a page in
    ``page_dir`` (relative to ``docs/``), with its links rewritten as the module docstring says."""
    out: list[str] = []
    fence: str | None = None
    for line in markdown.split("\n"):
        opening = FENCE.match(line)
        if fence is None and opening:
            fence = opening.group(1)
        elif fence is not None and line.startswith(fence):
            fence = None
        elif fence is None:
            line = LINK.sub(lambda m: _rewrite(m, source_dir, page_dir), line)
        out.append(line)
    return "\n".join(out)


def gfm_lists(markdown: str) -> str:
    """Lists written for GitHub, made readable to Python-Markdown (the module docstring says how)."""
    out: list[str] = []
    fence: str | None = None
    in_list = False
    prev_blank = True
    for line in markdown.split("\n"):
        if fence is not None:
            if line.startswith(fence):
                fence = None
            out.append(line)
            continue
        opening = FENCE.match(line)
        if opening:
            fence, in_list, prev_blank = opening.group(1), False, False
            out.append(line)
            continue
        blank = not line.strip()
        item = ITEM.match(line)
        if item and not item.group(1):  # an item at the top level
            if not in_list and not prev_blank:
                out.append("")
            in_list = True
        elif not blank and prev_blank and not line.startswith(" "):
            in_list = False  # a paragraph after a blank line ends the list
        if in_list and line.startswith(" "):
            indent = len(line) - len(line.lstrip(" "))
            line = " " * (2 * indent) + line.lstrip(" ")
        out.append(line)
        prev_blank = blank
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any, **kwargs: Any) -> str:
    src_uri: str = page.file.src_uri
    page_dir = posixpath.dirname(src_uri)
    if src_uri in INCLUDED:
        source = INCLUDED[src_uri]
        markdown = (ROOT / source).read_text(encoding="utf-8")
        return gfm_lists(rewrite_links(markdown, posixpath.dirname(source), page_dir))
    return gfm_lists(rewrite_links(markdown, posixpath.join(DOCS, page_dir) if page_dir else DOCS, page_dir))


def on_page_content(html: str, page: Any, config: Any, files: Any, **kwargs: Any) -> str:
    return ROLE.sub("", html) if page.file.src_uri.startswith("api/") else html
