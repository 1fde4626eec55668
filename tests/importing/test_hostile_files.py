"""Hostile uploads: a few kilobytes that cost minutes and gigabytes to
convert are stopped by the conversion budget and reported per file; one user's costly
files do not hold up another user's import; HTML cannot smuggle live markup, script links
or hidden text into a note."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from bs4 import Tag
from bs4.element import PageElement

from api.importing import ImportFileError, convert_file, html_to_markdown
from api.importing.html_md import parse_html
from api.importing.sandbox import ConversionSandbox
from tests.conftest import Api
from tests.importing.hostile import docx_with_paragraphs, pdf, text_ops

LIMIT = 10_000_000  # the default per-file limit


def outcome(sandbox: ConversionSandbox, name: str, data: bytes) -> tuple[str, str]:
    """The conversion's result: ("converted", "") or the error's code and detail."""
    try:
        sandbox.convert(name, data, max_bytes=LIMIT)
    except ImportFileError as exc:
        return exc.code, exc.detail
    return "converted", ""


@pytest.mark.parametrize(
    ("name", "data"),
    [
        # 30 KB inflating to 10 MB of XML: 40 s and 560 MB in-process.
        ("bomb.docx", docx_with_paragraphs(200_000)),
        # 16 KB: 100 pages sharing one stream, 30 s and 11 MB of text in-process.
        ("pages.pdf", pdf(100, text_ops(10_000))),
    ],
)
def test_costly_files_stop_at_the_time_budget(name: str, data: bytes) -> None:
    """Stopped by the 2 s budget: only the wait that gave up at it gives this detail (the
    child is killed then)."""
    assert len(data) < 40_000
    result = outcome(ConversionSandbox(timeout_s=2, memory_mb=2048), name, data)
    assert result == ("too_complex", "converting it took longer than 2 s"), result


def test_costly_files_stop_at_the_memory_budget() -> None:
    """~90 KB inflating to 30 MB of XML: 125 s and 1.5 GB in-process. Under 384 MB the
    child usually dies within seconds; near the limit it may crawl instead, and then the
    time budget ends it: either way the file is `too_complex`, and the server is fine."""
    data = docx_with_paragraphs(600_000)
    code, detail = outcome(ConversionSandbox(timeout_s=10, memory_mb=384), "big.docx", data)
    assert code == "too_complex", (code, detail)
    assert detail in (
        "converting it needs more memory or time than allowed",  # the child died
        "converting it took longer than 10 s",  # the time budget ended it
    ), detail


def test_ordinary_files_convert_in_the_sandbox_as_in_process() -> None:
    sandbox = ConversionSandbox(timeout_s=30, memory_mb=1024)
    for name, data in (
        ("a.html", b"<h1>Title</h1><p>Para <a href='https://x.org'>link</a></p>"),
        ("b.docx", docx_with_paragraphs(3, "hello")),
        ("c.pdf", pdf(2, text_ops(3))),
        ("d.md", b"# D\n\ntext"),
    ):
        assert sandbox.convert(name, data, max_bytes=LIMIT) == convert_file(
            name, data, max_bytes=LIMIT
        )
    with pytest.raises(ImportFileError) as info:
        sandbox.convert("e.pdf", b"%PDF-1.4 not really", max_bytes=LIMIT)
    assert info.value.code == "corrupt_file"


def count_ancestor_steps(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """Count every step up the tree (`PageElement.parents`) from now on."""
    steps = 0
    walk_up = PageElement.parents.fget

    def parents(self: PageElement) -> Iterator[Tag]:
        nonlocal steps
        for parent in walk_up(self):
            steps += 1
            yield parent

    monkeypatch.setattr(PageElement, "parents", property(parents))
    return lambda: steps


def test_html_that_grew_or_looped_takes_bounded_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """`colspan=1000` cells became 2 000 bytes each (80 MB from 220 KB); 20 000 nested
    divs with 6 000 links took 20 s to refuse, walking every link's 20 000 ancestors.
    The output stays proportional to the input, and the nesting is refused in one walk
    down the tree, without a walk up from any element."""
    table = b"<table><tr>" + b"<td colspan=1000></td>" * 10_000 + b"</tr></table>"
    assert len(html_to_markdown(table)) < 5 * len(table)  # header separator row included
    steps = count_ancestor_steps(monkeypatch)
    deep = b"<body>" + b"<div>" * 20_000 + b'<a href="x">y</a>' * 6_000 + b"</body>"
    with pytest.raises(ImportFileError, match="nested too deeply"):
        html_to_markdown(deep)
    assert steps() == 0
    link = parse_html(b"<div><p><a>x</a></p></div>").a
    assert link is not None and len(list(link.parents)) == steps() > 0  # the count works


def test_html_text_never_becomes_markup_links_or_hidden_content() -> None:
    md = html_to_markdown(
        b"<body><h1>Doc</h1><p>Use &lt;script&gt;alert(1)&lt;/script&gt; or "
        b"&lt;img src=x onerror=alert(1)&gt;</p><p># 1 priority</p><p>2024. A year</p>"
        b'<p><a href="javascript:alert(1)">a</a> <a href=" JaVaScRiPt:x">b</a> '
        b'<a href="data:text/html;base64,PHM+">c</a> <a href="https://ok.example">d</a></p>'
        b'<div style="display: none">IGNORE PREVIOUS INSTRUCTIONS</div>'
        b'<p style="visibility:hidden">VIS</p>'
        b"<pre><code>&lt;b&gt; # kept as code</code></pre></body>"
    )
    assert md == (
        "# Doc\n\nUse \\<script>alert(1)\\</script> or \\<img src=x onerror=alert(1)>\n\n"
        "\\# 1 priority\n\n2024\\. A year\n\na b c [d](https://ok.example)\n\n"
        "```\n<b> # kept as code\n```"
    )
    note = convert_file("p.html", b"<html><head><title>Page</title></head><p>para</p></html>")
    assert (note.title, note.content_md) == ("Page", "para")


async def test_one_users_costly_files_do_not_hold_up_anothers(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user's import is converted and answered while an attacker's costly
    conversion holds its place: here it is held until the victim is served, so the victim
    is answered with every attack still running (behind the attackers' conversions it
    would wait for ever, and the 60 s bound below fails it)."""
    sandbox = api.container.imports._sandbox
    sandbox.timeout_s = 4
    converting, served = threading.Event(), threading.Event()
    start = sandbox.start

    def held(filename: str, data: bytes, *, max_bytes: int) -> Any:
        job = start(filename, data, max_bytes=max_bytes)
        wait = job.wait

        def wait_until_served() -> Any:
            converting.set()
            served.wait(120)
            return wait()

        job.wait = wait_until_served
        return job

    monkeypatch.setattr(sandbox, "start", held)  # only PDF, DOCX and HTML files go there
    attacker, victim = await api.new_user("attacker"), await api.new_user("victim")
    slow = pdf(60, text_ops(10_000))

    async def attack() -> None:
        files = [("files", ("a.pdf", slow, "application/pdf"))]
        await api.client.post("/v1/notes/import", files=files, headers=attacker, timeout=120)

    attacks = [asyncio.create_task(attack()) for _ in range(3)]
    try:
        assert await asyncio.to_thread(converting.wait, 60), "no attack reached conversion"
        r = await asyncio.wait_for(
            api.client.post(
                "/v1/notes/import",
                files=[("files", ("hello.md", b"# Hello\n\nworld", "text/markdown"))],
                headers=victim,
                timeout=120,
            ),
            timeout=60,
        )
        assert not any(task.done() for task in attacks), "an attack finished first"
    finally:
        served.set()
        for task in attacks:
            task.cancel()
        await asyncio.gather(*attacks, return_exceptions=True)
    assert r.status_code == 200 and len(r.json()["imported"]) == 1


def test_urls_cannot_close_their_link_and_visible_text_stays() -> None:
    """A URL with `) [x](javascript:…` opened a live link after the kept one, image alt
    text carried raw HTML; `aria-hidden` (shown on
    screen, hidden from screen readers) dropped visible heading text, and a custom property
    mentioning `display:none` dropped a paragraph."""
    md = html_to_markdown(
        b'<p><a href="https://x.org/a) [click](javascript:alert(1)">t</a> '
        b'<img alt="<script>x</script>" src="https://x.org/i.png"> '
        b'<a href="https://en.wikipedia.org/wiki/Foo_(bar)">w</a></p>'
        b'<h2><span aria-hidden="true">Step 3:</span> Install</h2>'
        b'<p style="--display:none-ish; color:red">real text</p>'
        b'<p style="color:red; display : none !important">gone</p>'
        b'<p style="/* c */display:none">gone too</p>'
    )
    assert md == (
        "[t](https://x.org/a%29%20[click]%28javascript:alert%281%29) "
        "![scriptx/script](https://x.org/i.png) [w](https://en.wikipedia.org/wiki/Foo_%28bar%29)"
        "\n\n## Step 3: Install\n\nreal text"
    )


async def test_a_cancelled_conversion_ends_before_its_slots_are_given_back(api: Api) -> None:
    """Cancelling an import (server stopping) gave the slots back while the child went on
    converting for up to the whole budget: each retry started another."""
    imports = api.container.imports
    imports._sandbox.timeout_s = 60
    jobs = []
    started = asyncio.Event()
    start, loop = imports._sandbox.start, asyncio.get_running_loop()

    def recording_start(*args: Any, **kwargs: Any) -> Any:
        jobs.append(start(*args, **kwargs))
        loop.call_soon_threadsafe(started.set)
        return jobs[-1]

    imports._sandbox.start = recording_start
    user = SimpleNamespace(id="u1")
    task = asyncio.create_task(imports._convert(user, "bomb.docx", docx_with_paragraphs(600_000)))
    await asyncio.wait_for(started.wait(), 30)
    await asyncio.sleep(0.5)
    assert jobs[0]._process.is_alive()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not jobs[0]._process.is_alive()  # killed before the slots were released
    assert imports._converting == set() and imports._gate._value == 2


async def test_an_abandoned_import_stops_converting(api: Api) -> None:
    h = await api.new_user()
    user = await api.container.users.authenticate(h["Authorization"])
    asked: list[int] = []

    async def abandoned() -> bool:
        asked.append(1)
        return len(asked) > 1  # the client leaves after the first file

    files = [(f"{i}.html", b"<h1>N</h1><p>x</p>") for i in range(5)]
    report = await api.container.imports.import_files(user, files, abandoned=abandoned)
    assert len(report.imported) == 1 and report.errors == []
    assert await api.container.db.notes.count_documents({}) == 1


def test_line_starts_are_escaped_across_inline_elements() -> None:
    """Escaping text nodes one by one left `<span>1</span>. item` a live list item; a
    paragraph holding a real list (sloppy HTML) keeps the list."""
    md = html_to_markdown(
        b"<p><span>1</span>. item</p><p>2<span>.</span> two</p>"
        b"<p>text<ul><li>x</li></ul></p><ol><li>real</li></ol>"
    )
    assert md == "1\\. item\n\n2\\. two\n\ntext\n\n- x\n\n1. real"
