"""MkDocs hook of the documentation site (mkdocs.yml: `hooks`).

The package's docstrings end a paragraph with `Example::` before an indented example, as
reStructuredText does; the API reference shows that heading as "Example" in bold. And
mkdocs-click shows click 8.3's marker of an option without a default (`Sentinel.UNSET`)
as a default: the command-line reference shows none.
"""

from __future__ import annotations

from typing import Any


def on_page_content(html: str, **_: Any) -> str:
    """The page's HTML with `Example::` paragraphs as bold headings, and no default shown
    for an option that has none."""
    html = html.replace("<p>Example::</p>", "<p><strong>Example</strong></p>")
    return html.replace("<td><code>Sentinel.UNSET</code></td>", "<td>none</td>")
