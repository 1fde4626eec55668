"""Hypothesis strategies that compose messy markdown notes from real block types."""

from __future__ import annotations

from hypothesis import strategies as st

WORDS = st.sampled_from(
    [
        "the",
        "chunker",
        "keeps",
        "every",
        "heading",
        "path",
        "API",
        "token",
        "x",
        "a",
        "sentence.",
        "end!",
        "really?",
        "(note)",
        "`code`",
        "**bold**",
        "_em_",
        "[link](/u)",
        "naïve",
        "café",
        "日本語の文章。",
        "中文内容",
        "😀",
        "👩‍💻",
        "שלום",
        "مرحبا",
        "Ω≈ç√",
        "don't",
        "it's",
        "e.g.",
        "1234567",
        "3.14",
        "a/b",
        "<br>",
        "&amp;",
        "\\*",
        "\x00",
        "supercalifragilisticexpialidocious" * 3,
        "—",
        "…",
        "\u3000",
        "\u00a0",
        "#hash",
        # pasted images: payloads the chunker keeps but does not embed (data_uri.py), and
        # a plane-15 private-use character like the ones standing for them
        "![img](data:image/png;base64," + "iVBORw0KGgoAAAANSUhEUg" * 14 + "==)",
        '<img src="data:image/jpeg;base64,' + "/9j/4AAQSkZJRgABAQ" * 16 + '">',
        "\U000f0000\U000f1234",
        "data:image/png;name=a(1).png;base64," + "R0lGODlhAQABAIAAAP" * 16,  # bare, in headings too
        "`data:;BASE64," + "AAAA" * 70 + "`",
    ]
)


def _line(min_words: int = 1, max_words: int = 14) -> st.SearchStrategy[str]:
    return st.lists(WORDS, min_size=min_words, max_size=max_words).map(" ".join)


paragraph = st.lists(_line(), min_size=1, max_size=4).map("\n".join)
heading_text = _line(0, 5)
atx = st.tuples(st.integers(1, 6), heading_text, st.booleans()).map(
    lambda t: "#" * t[0] + (" " + t[1] if t[1] else "") + (" " + "#" * t[0] if t[2] else "")
)
setext = st.tuples(_line(1, 5), st.sampled_from(["===", "---", "="])).map(
    lambda t: f"{t[0]}\n{t[1]}"
)
code_line = st.one_of(
    _line(0, 8),
    st.just("# not a heading"),
    st.just("    indented();"),
    st.just("| not | a | table |"),
    st.just(""),
)


@st.composite
def fence(draw: st.DrawFn) -> str:
    marker = draw(st.sampled_from(["```", "~~~", "````"]))
    lang = draw(st.sampled_from(["", "python", "js extra", "{.rust}"]))
    body = draw(st.lists(code_line, min_size=0, max_size=25))
    closed = draw(st.booleans()) or draw(st.booleans())
    return "\n".join([marker + lang, *body] + ([marker] if closed else []))


@st.composite
def listing(draw: st.DrawFn, depth: int = 0) -> str:
    bullet = draw(st.sampled_from(["-", "*", "+", "1."]))
    items = []
    for _ in range(draw(st.integers(1, 5))):
        item = f"{bullet} {draw(_line())}"
        if depth < 3 and draw(st.integers(0, 4)) == 0:
            nested = draw(listing(depth + 1))
            item += "\n" + "\n".join("   " + ln if ln else ln for ln in nested.split("\n"))
        if draw(st.integers(0, 8)) == 0:
            item += "\n   # heading inside an item"
        items.append(item)
    sep = "\n\n" if draw(st.booleans()) else "\n"
    return sep.join(items)


@st.composite
def table(draw: st.DrawFn) -> str:
    cols = draw(st.integers(1, 4))
    header = "| " + " | ".join(draw(_line(1, 3)) for _ in range(cols)) + " |"
    sep = "|" + "|".join("---" for _ in range(cols)) + "|"
    rows = [
        "| " + " | ".join(draw(_line(0, 4)) for _ in range(cols)) + " |"
        for _ in range(draw(st.integers(0, 30)))
    ]
    return "\n".join([header, sep, *rows])


quote = st.lists(
    st.one_of(_line(), st.just("# quoted heading"), st.just("")), min_size=1, max_size=6
).map(lambda lines: "\n".join("> " + ln for ln in lines))
html = _line().map(lambda t: f'<div class="x">\n{t}\n</div>')
misc = st.sampled_from(
    [
        "---",
        "***",
        "[ref]: https://example.com/a",
        "    indented code",
        "\x00",
        "\u3000",
        "<!-- comment -->",
        "1) ordered",
    ]
)

block = st.one_of(
    paragraph, paragraph, atx, atx, setext, fence(), listing(), table(), quote, html, misc
)


@st.composite
def markdown_docs(draw: st.DrawFn) -> str:
    """A note: optional BOM/front matter, blocks with varied blank lines, line endings
    "\n", "\r\n" or a bare "\r" (all three are CommonMark line endings)."""
    blocks = draw(st.lists(block, min_size=0, max_size=14))
    seps = [draw(st.sampled_from(["\n\n", "\n", "\n\n\n", "\n \n"])) for _ in blocks]
    text = "".join(b + s for b, s in zip(blocks, seps, strict=True))
    if draw(st.integers(0, 5)) == 0:
        cover = draw(st.sampled_from(["", "cover: data:image/png;base64," + "QUJD" * 80 + "\n"]))
        text = "---\ntitle: x\ntags: [a]\n" + cover + "---\n" + text
    if draw(st.integers(0, 8)) == 0:
        text = "\ufeff" + text
    newline = draw(st.sampled_from(["\n", "\n", "\n", "\n", "\r\n", "\r\n", "\r"]))
    if newline != "\n":
        text = text.replace("\n", newline)
    if draw(st.integers(0, 6)) == 0:
        text = "  \n" + text + draw(st.sampled_from(["", "  ", "\n\n", "tail"]))
    return text


titles = st.sampled_from(
    [
        "Note",
        "",
        "  ",
        "Ünïcode 标题 🎉",
        "Title > with > arrows",
        "Same",
        "a very long title " * 20,
    ]
)
