"""MkDocs hook of the documentation site (mkdocs.yml: `hooks`).

The package's docstrings end a paragraph with `Example::` before an indented example, as
reStructuredText does; the API reference shows that heading as "Example" in bold.
"""

from __future__ import annotations

from typing import Any


def on_page_content(html: str, **_: Any) -> str:
    """The page's HTML with `Example::` paragraphs as bold headings."""
    return html.replace("<p>Example::</p>", "<p><strong>Example</strong></p>")
