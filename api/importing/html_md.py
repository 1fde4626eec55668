"""HTML → markdown that keeps the structure the chunker splits on.

BeautifulSoup cleans the tree (page chrome, hidden text and unsafe links out; only the main
content when the page marks it), then `markdownify` renders ATX headings, GFM tables and
`- ` bullets; page text never becomes markup (tests/importing/test_html_rules.py).
"""

from __future__ import annotations

import re

from bs4 import BeautifulSoup, Tag
from markdownify import ATX, MarkdownConverter

from api.importing.types import ImportFileError

_REMOVED_TAGS = (
    "script",
    "style",
    "noscript",
    "template",
    "nav",
    "aside",
    "form",
    "iframe",
    "svg",
    "button",
)
_PAGE_CHROME_TAGS = ("header", "footer")
# Sectioning ancestors that make a header/footer belong to the content (HTML-AAM mapping).
_SECTIONING = ("article", "section", "main")
_LANDMARK_ROLES = ("navigation", "banner", "contentinfo", "complementary", "search")
# Generators that mark their navigation bars by class only: Texinfo (`nav-panel`), DocBook.
_NAV_CLASSES = ("nav-panel", "navheader", "navfooter")
_GENERATOR_META = re.compile(r"^generator$", re.IGNORECASE)
_TEXINFO = re.compile(r"makeinfo|texi2any", re.IGNORECASE)
_THEMATIC_BREAK = re.compile(r"^ {0,3}([-*_])(?:\s*\1){2,}\s*$")
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_PERMALINK_TEXTS = frozenset({"", "¶", "§", "#", "🔗", "link"})
_LANGUAGE_PREFIXES = ("language-", "lang-")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


_HIDDEN_STYLE = re.compile(
    r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*hidden)\s*(?:!important\s*)?(?:;|$)",
    re.IGNORECASE,
)
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_URL_UNSAFE = str.maketrans({" ": "%20", "(": "%28", ")": "%29", "<": "%3C", ">": "%3E"})
_ALT_UNSAFE = str.maketrans("", "", "<>[]")
_UNSAFE_SCHEMES = ("javascript:", "vbscript:", "data:")
_SCHEME_NOISE = re.compile(r"[\x00-\x20]+")  # browsers ignore these inside a scheme
# Backslash, brackets, backtick, and `&` where it would start an entity reference.
_INLINE_MARKUP = re.compile(r"[\\\[\]`]|&(?=#?[0-9A-Za-z]+;)")
_LINE_START_MARKUP = re.compile(r"(?m)^([ \t]*)(#{1,6}(?=\s|$)|>|[-+](?=\s|$))")
_LINE_START_NUMBER = re.compile(r"(?m)^([ \t]*\d{1,9})([.)](?=\s|$))")  # "1." → "1\."
_BLOCK_TAGS = ["p", "div", "ul", "ol", "pre", "blockquote", "table", "hr", *_HEADINGS]


def _escape_line_starts(text: str) -> str:
    """A backslash before what would start a heading, quote or list at a line start."""
    return _LINE_START_NUMBER.sub(r"\1\\\2", _LINE_START_MARKUP.sub(r"\1\\\2", text))


MAX_COLSPAN = 10  # GFM has no colspan: the cell is padded, and 1000 made 2 000 bytes of "|"
MAX_DEPTH = 400  # below markdownify's recursion limit; real pages nest far less


class _NoteConverter(MarkdownConverter):
    """markdownify with GFM-safe table cells and text that cannot turn into markup."""

    def escape(self, text: str, parent_tags: set[str]) -> str:
        # Page text that spells markdown stays text: `[x](javascript:…)` in a paragraph is
        # no live link, `&amp;lt;` no entity that renders `<`, backticks no code. A
        # backslash is escaped first, or `\[` in the text would cancel the escape added to
        # its bracket.
        text = _INLINE_MARKUP.sub(r"\\\g<0>", text)
        text = super().escape(text, parent_tags)
        return _escape_line_starts(text.replace("<", "\\<"))

    def convert_p(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        # Text nodes are escaped one by one, so `<span>1</span>. item` still made a list
        # item: a paragraph of inline content is escaped again as a whole.
        if el.find(_BLOCK_TAGS) is None:
            text = _escape_line_starts(text.strip(" \t\r\n"))
        return super().convert_p(el, text, parent_tags)

    def convert_td(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        return super().convert_td(el, _escape_cell(text), parent_tags)

    def convert_th(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        return super().convert_th(el, _escape_cell(text), parent_tags)

    def convert_pre(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        block = super().convert_pre(el, text, parent_tags)
        runs = re.findall(r"`{3,}", text)
        if not runs or not block.strip():
            return block
        # markdownify always fences with ```; code containing ``` needs a longer fence.
        fence = "`" * (max(map(len, runs)) + 1)
        inner = block.strip("\n")
        return "\n\n" + fence + inner[3:-3] + fence + "\n\n"


def _escape_cell(text: str) -> str:
    # GFM splits rows on every unescaped pipe, code spans included.
    return re.sub(r"(?<!\\)\|", r"\\|", text)


def _code_language(pre: Tag) -> str | None:
    """Language of a `<pre>` block from the class conventions highlighters use."""
    candidates: list[Tag] = [pre]
    code = pre.find("code")
    if isinstance(code, Tag):
        candidates.append(code)
    for node in candidates:
        for cls in node.get("class") or []:
            for prefix in _LANGUAGE_PREFIXES:
                if cls.startswith(prefix) and len(cls) > len(prefix):
                    return cls[len(prefix) :]
    # Sphinx: <div class="highlight-python"><div class="highlight"><pre>
    for parent in pre.parents:
        for cls in parent.get("class") or []:
            if cls.startswith("highlight-") and cls not in ("highlight-default",):
                return cls[len("highlight-") :]
    return None


def _converter() -> _NoteConverter:
    return _NoteConverter(
        heading_style=ATX,
        bullets="-",
        table_infer_header=True,
        code_language_callback=_code_language,
        newline_style="backslash",
        escape_misc=False,
    )


def _is_permalink(link: Tag) -> bool:
    """A heading/definition permalink marker (Sphinx `¶`, rustdoc `§`): no text of its own."""
    href = str(link.get("href") or "")
    text = link.get_text().strip()
    return href.startswith("#") and text in _PERMALINK_TEXTS


def _is_chrome(tag: Tag, texinfo: bool) -> bool:
    if tag.name in _REMOVED_TAGS or tag.has_attr("hidden"):
        return True
    if tag.get("role") in _LANDMARK_ROLES:
        return True
    classes = tag.get("class") or ()
    if any(cls in _NAV_CLASSES for cls in classes):
        return True
    # Texinfo 6 calls its nav bar `div.header`, too common a class to drop on every page.
    return texinfo and tag.name == "div" and "header" in classes


def _is_hidden(tag: Tag) -> bool:
    style = _CSS_COMMENT.sub("", str(tag.get("style") or ""))
    return tag.has_attr("hidden") or bool(_HIDDEN_STYLE.search(style))


def _unsafe_href(href: str) -> bool:
    return _SCHEME_NOISE.sub("", href).lower().startswith(_UNSAFE_SCHEMES)


def _outermost(soup: BeautifulSoup, texinfo: bool) -> tuple[list[Tag], dict[int, int]]:
    """One walk of the tree (iterative: pages may nest thousands deep): the outermost
    chrome elements, and for every other element whether it lies within a sectioning
    element (bit 1) or a heading (bit 2). ImportFileError("too_large") beyond MAX_DEPTH.
    Asking each element for its ancestors instead would cost depth × elements
    (tests/importing/test_hostile_files.py)."""
    chrome: list[Tag] = []
    context: dict[int, int] = {}
    stack: list[tuple[Tag, int, int]] = [(soup, 0, 0)]
    while stack:
        node, flags, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ImportFileError("too_large", "the document is nested too deeply to convert")
        for child in node.children:
            if not isinstance(child, Tag):
                continue
            if _is_chrome(child, texinfo) or _is_hidden(child):
                chrome.append(child)
                continue
            context[id(child)] = flags
            inner = flags | (1 if child.name in _SECTIONING else 0)
            inner |= 2 if child.name in _HEADINGS else 0
            stack.append((child, inner, depth + 1))
    return chrome, context


def _clean(soup: BeautifulSoup) -> Tag:
    """Remove page chrome and return the element whose content is the document."""
    texinfo = soup.find("meta", attrs={"name": _GENERATOR_META, "content": _TEXINFO}) is not None
    chrome, context = _outermost(soup, texinfo)
    for tag in chrome:
        tag.decompose()  # descendants go with it
    remaining = _without_page_chrome(soup, context)
    _cap_colspans(remaining)
    _clean_links(remaining, context)
    _clean_images(remaining)
    return _content_root(soup, remaining)


def _without_page_chrome(soup: BeautifulSoup, context: dict[int, int]) -> list[Tag]:
    """The elements left after page-level headers and footers (outside any sectioning
    element) are removed, in document order."""
    remaining = [tag for tag in soup.find_all(True) if id(tag) in context]
    for tag in remaining:
        if tag.name in _PAGE_CHROME_TAGS and not context[id(tag)] & 1:
            tag.decompose()
    return [tag for tag in remaining if tag.name]  # decomposed tags have name ""


def _cap_colspans(tags: list[Tag]) -> None:
    for tag in tags:
        if tag.name in ("td", "th") and str(tag.get("colspan") or "").isdigit():
            tag["colspan"] = str(min(int(tag["colspan"]), MAX_COLSPAN))


def _clean_links(tags: list[Tag], context: dict[int, int]) -> None:
    """Drop permalink markers; unwrap links into the page, inside headings or to unsafe
    schemes; make the URLs kept unable to close their markdown link."""
    for link in (tag for tag in tags if tag.name == "a"):  # lazily: a link may go with one
        href = str(link.get("href") or "")
        if _is_permalink(link):
            link.decompose()
        elif href.startswith("#") or context[id(link)] & 2 or _unsafe_href(href):
            link.unwrap()
        elif href:
            link["href"] = href.strip().translate(_URL_UNSAFE)


def _clean_images(tags: list[Tag]) -> None:
    """Safe alt text and URLs; an image without a usable source becomes its alt text."""
    for img in (tag for tag in tags if tag.name == "img"):
        src = str(img.get("src") or "")
        if img.get("alt"):
            img["alt"] = str(img["alt"]).translate(_ALT_UNSAFE)
        if src and not _unsafe_href(src):
            img["src"] = src.strip().translate(_URL_UNSAFE)
            continue
        alt = str(img.get("alt") or "").strip()
        if alt:
            img.replace_with(alt)
        else:
            img.decompose()


def _content_root(soup: BeautifulSoup, remaining: list[Tag]) -> Tag:
    """The single `<main>` (or `role="main"`) element, else the body, else the whole
    document without its `<head>`."""
    mains = [tag for tag in remaining if tag.name == "main"] or [
        tag for tag in remaining if tag.name and tag.get("role") == "main"
    ]
    if len(mains) == 1:
        return mains[0]
    if soup.body is not None:
        return soup.body
    for head in [tag for tag in remaining if tag.name == "head"]:
        head.decompose()
    return soup


def _tidy(markdown: str) -> str:
    """Collapse blank-line runs and trim trailing spaces outside fenced code."""
    out: list[str] = []
    fence: str | None = None
    blank_run = 0
    for line in markdown.split("\n"):
        if fence is not None:
            out.append(line)
            stripped = line.strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = None
            continue
        line = line.rstrip()
        match = _FENCE_RE.match(line)
        if match:
            fence = match.group(1)
        if not line:
            blank_run += 1
            if blank_run > 1:
                continue
        else:
            blank_run = 0
        out.append(line)
    # Rules that separated the removed chrome from the content would open or close the note.
    while out and (not out[0] or _THEMATIC_BREAK.match(out[0])):
        out.pop(0)
    while out and (not out[-1] or _THEMATIC_BREAK.match(out[-1])):
        out.pop()
    return "\n".join(out)


def parse_html(html: bytes | str) -> BeautifulSoup:
    """Parse HTML; bytes are decoded the way browsers do (BOM, `<meta charset>`, sniffing)."""
    return BeautifulSoup(html, "html.parser")


def soup_title(soup: BeautifulSoup) -> str | None:
    """The document's `<title>` text, if any (call before `soup_to_markdown` cleans)."""
    title = soup.find("title")
    if isinstance(title, Tag):
        text = " ".join(title.get_text(" ").split())
        return text or None
    return None


def soup_to_markdown(soup: BeautifulSoup) -> str:
    """Convert a parsed document to markdown (mutates `soup` while cleaning it).

    Raises `ImportFileError("too_large")` for markup nested deeper than markdownify's
    recursion allows (a few hundred levels; real pages stay far below that).
    """
    root = _clean(soup)
    try:
        return _tidy(_converter().convert_soup(root))
    except RecursionError as exc:
        raise ImportFileError("too_large", "the document is nested too deeply to convert") from exc


def html_to_markdown(html: bytes | str) -> str:
    """Convert an HTML document or fragment to structure-preserving markdown.

    Headings become ATX `#` headings, tables GFM tables with a header and `| --- |`
    separator, lists `- ` bullets, `<pre>` fenced code with its language; links are kept;
    scripts, styles and navigation chrome are dropped. No output has three consecutive
    newlines outside code blocks. Raises `ImportFileError` only for pathological nesting.
    """
    return soup_to_markdown(parse_html(html))
