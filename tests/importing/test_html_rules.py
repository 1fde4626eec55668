"""`html_to_markdown` beyond the plan's cases: each documented rule, on exact output."""

from __future__ import annotations

import re
from html import escape, unescape

import pyromark
import pytest

from api.importing import ImportFileError, convert_file, html_to_markdown


def test_all_six_heading_levels_are_atx() -> None:
    html = "".join(f"<h{n}>Level {n}</h{n}>" for n in range(1, 7))
    assert html_to_markdown(html) == "\n\n".join(f"{'#' * n} Level {n}" for n in range(1, 7))


def test_table_without_header_row_gets_first_row_as_header() -> None:
    html = "<table><tr><td>a</td><td>b</td></tr><tr><td>c</td><td>d</td></tr></table>"
    assert html_to_markdown(html) == "| a | b |\n| --- | --- |\n| c | d |"


def test_thead_table_and_pipes_in_cells() -> None:
    html = (
        "<table><thead><tr><th>Op</th><th>Meaning</th></tr></thead>"
        "<tbody><tr><td><code>a|b</code></td><td>either | or</td></tr></tbody></table>"
    )
    assert html_to_markdown(html) == (
        "| Op | Meaning |\n| --- | --- |\n| `a\\|b` | either \\| or |"
    )


def test_nested_lists_use_dash_bullets_and_ordered_lists_numbers() -> None:
    html = "<ul><li>one<ul><li>inner</li></ul></li><li>two</li></ul><ol><li>x</li><li>y</li></ol>"
    assert html_to_markdown(html) == "- one\n  - inner\n- two\n\n1. x\n2. y"


def test_code_language_from_class_conventions() -> None:
    assert html_to_markdown('<pre><code class="language-python">x = 1</code></pre>') == (
        "```python\nx = 1\n```"
    )
    assert html_to_markdown('<pre class="lang-sql">SELECT 1;</pre>') == "```sql\nSELECT 1;\n```"
    sphinx = (
        '<div class="highlight-bash notranslate"><div class="highlight"><pre>ls</pre></div></div>'
    )
    assert html_to_markdown(sphinx) == "```bash\nls\n```"
    assert html_to_markdown("<pre>plain</pre>") == "```\nplain\n```"


def test_code_keeps_blank_lines_and_backtick_runs() -> None:
    html = "<pre><code>a\n\n\n\nb\n```\nc</code></pre><p>after</p>"
    assert html_to_markdown(html) == "````\na\n\n\n\nb\n```\nc\n````\n\nafter"


def test_links_kept_fragment_links_unwrapped_permalinks_dropped() -> None:
    html = (
        '<h2 id="s">Setup<a class="headerlink" href="#s" title="Link">¶</a></h2>'
        '<p>See <a href="https://example.org/doc">the docs</a> and <a href="#s">setup</a>.</p>'
        '<h3><a href="/guide.html">Guide</a> part</h3>'
    )
    assert html_to_markdown(html) == (
        "## Setup\n\nSee [the docs](https://example.org/doc) and setup.\n\n### Guide part"
    )


def test_chrome_removed_but_article_header_kept() -> None:
    html = (
        "<header><h1>Site name</h1></header>"
        '<div role="navigation">Home | About</div>'
        "<aside>Related posts</aside>"
        "<article><header><h1>Post title</h1></header><p>Post body.</p>"
        "<footer>Tagged: x</footer></article>"
        "<form><input value='q'><button>Search</button></form>"
        "<footer>© Site</footer><noscript>Enable JS</noscript><p hidden>secret</p>"
    )
    assert html_to_markdown(html) == "# Post title\n\nPost body.\n\nTagged: x"


def test_only_main_is_converted_when_the_page_marks_it() -> None:
    html = "<div><h1>Menu bar</h1></div><main><h1>Article</h1><p>Text</p></main><div>x</div>"
    assert html_to_markdown(html) == "# Article\n\nText"
    two_mains = "<main><p>a</p></main><main><p>b</p></main>"
    assert html_to_markdown(two_mains) == "a\n\nb"


def test_data_uri_images_become_alt_text_and_real_images_stay() -> None:
    html = (
        '<p><img src="data:image/png;base64,' + "A" * 5000 + '" alt="chart"></p>'
        '<p><img src="data:image/png;base64,AAAA"></p>'
        '<img src="https://example.org/a.png" alt="photo">'
    )
    assert html_to_markdown(html) == "chart\n\n![photo](https://example.org/a.png)"


def test_br_trailing_spaces_and_blank_line_runs() -> None:
    html = "<p>line one<br>line two   </p>\n\n\n<div>\n\n<p>B</p>\n\n</div><hr><p>C</p><hr>"
    md = html_to_markdown(html)
    assert md == "line one\\\nline two\n\nB\n\n---\n\nC"


def test_literal_markdown_characters_are_escaped() -> None:
    assert html_to_markdown("<p>snake_case and 2*3*4</p>") == "snake\\_case and 2\\*3\\*4"


@pytest.mark.parametrize(
    "text",
    [
        "[md link](javascript:alert(10))",
        "![img](javascript:alert(1)) and <https://evil.example>",
        "\\[a\\](javascript:x) with a backslash before each bracket",
        "[ref]\n\n[ref]: javascript:alert(2)",
        "&lt;script&gt; spelled as entities, &copy; &#169; &#xA9;",
        "`not code` and ``neither``",
        "C:\\path\\to\\file and a \\` lone",
    ],
)
def test_page_text_that_spells_markdown_renders_as_the_same_text(text: str) -> None:
    """Rendered by a CommonMark renderer, the converted page shows its text as written: no
    link, image, code span or entity appears (page text became a live `javascript:` link,
    also when split over spans)."""

    def page(split: bool) -> str:
        paragraphs = []
        for line in text.split("\n\n"):
            shown = escape(line)
            if split and "](" in shown:  # the markup split over two elements
                left, right = shown.split("](", 1)
                shown = f"<span>{left}</span><span>]({right}</span>"
            paragraphs.append(f"<p>{shown}</p>")
        return "<div>" + "".join(paragraphs) + "</div>"

    for split in (False, True):
        rendered = pyromark.html(html_to_markdown(page(split)))
        assert "<a " not in rendered and "<img" not in rendered and "<code>" not in rendered
        shown = unescape(re.sub(r"<[^>]+>", "", rendered)).replace("\n\n", "\n").strip()
        assert shown.split() == text.replace("\n\n", " ").split(), rendered


def test_charset_from_meta_is_honoured() -> None:
    html = '<html><head><meta charset="iso-8859-1"></head><body><p>café</p></body></html>'
    assert html_to_markdown(html.encode("iso-8859-1")) == "café"


def test_html_title_order_first_h1_then_title_tag_then_file_name() -> None:
    page = b"<html><head><title>Tab title</title></head><body><h2>Sub</h2><p>x</p></body></html>"
    assert convert_file("p.html", page).title == "Tab title"
    with_h1 = page.replace(b"<h2>Sub</h2>", b"<h1>Real <em>title</em></h1>")
    assert convert_file("p.html", with_h1).title == "Real title"
    assert convert_file("page-name.htm", b"<p>just text</p>").title == "page-name"


def test_pathologically_deep_nesting_is_a_per_file_error_not_a_crash() -> None:
    html = ("<div>" * 2000 + "deep" + "</div>" * 2000).encode()
    with pytest.raises(ImportFileError) as info:
        convert_file("deep.html", html)
    assert info.value.code == "too_large"
    # Ordinary depth converts.
    assert convert_file("ok.html", b"<div>" * 60 + b"fine" + b"</div>" * 60).content_md == "fine"
