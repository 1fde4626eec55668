"""The page at `/` in a real headless Chromium: key, create, list with status, search, chat
with streaming, a citation that highlights exactly `content_md[start:end]`, and hostile
note and answer content that runs nothing and fetches nothing."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ServedApp, served_app
from tests.web.conftest import Sentinel, requested_urls

WAIT_S = 120  # a generous ceiling for a page to react, never a performance bound
NOTE = (
    "🚀 Launch checklist 😀 — the ops notes\n\n"
    "## Nightly backup\n\nThe pg_dump job runs at 02:00 UTC and keeps 14 days ✅.\n\n"
    "## Restore\n\nUse pg_restore --clean against an empty database.\n"
)


@pytest.fixture(scope="module")
def web_app(
    mongo_url: str, tmp_path_factory: pytest.TempPathFactory, openai_stub_server: Any
) -> Iterator[ServedApp]:
    """The app served for real, chat on the OpenAI stub (a CHAT_BASE_URL server)."""
    with served_app(
        mongo_url,
        tmp_path_factory,
        "web",
        chat_base_url=openai_stub_server.base_url,
        chat_model="stub-chat",
    ) as app:
        yield app


def wait_for(driver: Any, condition: Any) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S, poll_frequency=0.1).until(condition)


def css(driver: Any, selector: str) -> list[Any]:
    return driver.find_elements("css selector", selector)


def sign_in(driver: Any, app: ServedApp, key: str, name: str) -> None:
    """Open the page and paste `key` (the key of user `name`) as a person would."""
    driver.get(f"{app.url}/")
    driver.execute_script("sessionStorage.clear()")  # the module's browser is shared
    driver.get(f"{app.url}/")
    assert driver.find_element("id", "whoami").text == "No API key"
    driver.find_element("id", "api-key").send_keys(key)
    driver.find_element("id", "save-key").click()
    wait_for(driver, lambda d: d.find_element("id", "whoami").text == f"Signed in as {name}")


def listed(driver: Any) -> list[dict[str, str]]:
    """The notes list as shown (read in one go: the list re-renders while it polls)."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#notes li.note-item')].map(li => ({"
        "id: li.dataset.id, title: li.querySelector('.note-title').textContent,"
        "status: li.querySelector('.status').textContent}))"
    )


def set_value(driver: Any, element_id: str, value: str) -> None:
    """Type into a field (ChromeDriver's send_keys cannot type characters beyond the BMP)."""
    driver.execute_script(
        "const e = document.getElementById(arguments[0]); e.value = arguments[1];"
        "e.dispatchEvent(new Event('input'));",
        element_id,
        value,
    )


def api_note(app: ServedApp, key: str, note_id: str) -> dict[str, Any]:
    resp = httpx.get(f"{app.url}/v1/notes/{note_id}", headers={"Authorization": f"Bearer {key}"})
    return resp.json()


def create_indexed(app: ServedApp, key: str, title: str, content: str) -> str:
    headers = {"Authorization": f"Bearer {key}"}
    note = httpx.post(
        f"{app.url}/v1/notes", json={"title": title, "content_md": content}, headers=headers
    ).json()
    deadline = time.monotonic() + WAIT_S
    while api_note(app, key, note["id"])["index_status"] != "indexed":
        assert time.monotonic() < deadline, "the note was not indexed"
        time.sleep(0.1)
    return note["id"]


def screenshot(driver: Any, name: str) -> None:
    """With AUTONOTE_TEST_SCREENSHOTS=DIR, save the page as DIR/name (docs/web/*.png)."""
    folder = os.environ.get("AUTONOTE_TEST_SCREENSHOTS")
    if folder:
        driver.save_screenshot(str(Path(folder) / name))


def off_origin(urls: list[str], app: ServedApp) -> list[str]:
    """The URLs not on the app's origin (data: URLs and the app's own blob: ones are)."""
    local = (app.url + "/", f"blob:{app.url}/", "data:")
    return [u for u in urls if not u.startswith(local)]


def pwned(driver: Any) -> Any:
    return driver.execute_script("return window.__pwned")


def ref_of(section: str, body: dict[str, Any]) -> str:
    """The reference number the prompt gave the section whose heading is `section`."""
    prompt = body["messages"][-1]["content"]
    return re.search(rf"\[(\d+)\] [^\n]*› {section}", prompt).group(1)


def test_create_list_search_chat_and_open_a_citation(
    browser: Any, web_app: ServedApp, openai_stub: Any
) -> None:
    key = web_app.new_user("web")
    sign_in(browser, web_app, key, "web")

    browser.find_element("id", "new-note").click()
    browser.find_element("id", "note-title").send_keys("Ops notes")
    browser.find_element("id", "note-tags").send_keys("ops, backups")
    set_value(browser, "note-content", NOTE)
    preview = browser.find_element("id", "editor-preview")
    assert "Nightly backup" in preview.find_element("tag name", "h4").text
    screenshot(browser, "editor.png")
    browser.find_element("id", "save-note").click()

    (item,) = wait_for(browser, listed)
    note_id = item["id"]
    assert item["title"] == "Ops notes"
    assert item["status"] in {"pending", "indexing", "indexed"}
    wait_for(browser, lambda d: listed(d)[0]["status"] == "indexed")  # the list polls
    assert browser.find_element("id", "view-title").text == "Ops notes"
    assert browser.find_element("id", "view-status").text == "indexed"

    browser.find_element("id", "search-input").send_keys("how do I restore the database")
    browser.find_element("css selector", "#search-form button[type=submit]").click()
    result = wait_for(browser, lambda d: css(d, "#search-results li.result"))[0]
    assert result.get_attribute("data-id") == note_id
    assert "Restore" in result.text

    openai_stub.set_chat_reply(
        lambda body: f"The dump runs at 02:00 UTC [{ref_of('Nightly backup', body)}]."
    )
    browser.find_element("id", "chat-input").send_keys("When does the nightly backup run?")
    browser.find_element("id", "chat-send").click()
    answer = wait_for(browser, lambda d: css(d, ".answer[data-done=true]"))[0]
    assert "02:00 UTC" in answer.text and "answered by stub-chat" in answer.text
    answer.find_element("class name", "cite-ref").click()

    mark = wait_for(browser, lambda d: css(d, "#note-text mark#cited"))[0]
    start, end = int(mark.get_attribute("data-start")), int(mark.get_attribute("data-end"))
    content = api_note(web_app, key, note_id)["content_md"]
    assert content == NOTE
    assert mark.get_property("textContent") == content[start:end]
    assert content[start:end].startswith("The pg_dump job runs at 02:00 UTC")
    assert content[:start].startswith("🚀"), "offsets count code points, before the span too"
    screenshot(browser, "citation.png")
    box = browser.execute_script("return arguments[0].getBoundingClientRect().toJSON()", mark)
    assert 0 <= box["top"] and box["bottom"] <= browser.execute_script("return innerHeight")


def test_hostile_note_renders_inert(browser: Any, web_app: ServedApp, sentinel: Sentinel) -> None:
    key = web_app.new_user("hostile")
    remote = sentinel.url
    hostile = (
        f"# Hostile <script>window.__pwned = 'script'</script>\n\n"
        f"<img src={remote}/raw.png onerror=\"window.__pwned = 'img'\">\n\n"
        f"![pixel]({remote}/markdown.png) and [click me](javascript:window.__pwned='link')\n\n"
        f'<a href="javascript:window.__pwned=1">raw link</a> <iframe src="{remote}/frame">\n\n'
        f"[safe]({remote}/page) <{remote}/auto>\n"
    )
    create_indexed(web_app, key, "<img src=x onerror=\"window.__pwned='title'\">", hostile)
    requested_urls(browser)  # empty the log
    sign_in(browser, web_app, key, "hostile")
    wait_for(browser, listed)
    browser.find_element("css selector", "#notes li.note-item").click()  # indexed: no polling
    preview = wait_for(browser, lambda d: d.find_element("id", "note-preview"))
    wait_for(browser, lambda d: "click me" in preview.text)
    browser.find_element("id", "show-text").click()
    browser.find_element("id", "edit-note").click()
    wait_for(browser, lambda d: "click me" in d.find_element("id", "editor-preview").text)
    time.sleep(0.5)  # time for anything that would load or run (a lower bound only)

    assert pwned(browser) is None
    assert not css(browser, "img, script:not([src]), iframe, object, embed")
    hrefs = browser.execute_script("return [...document.links].map(a => a.href)")
    assert hrefs and all(h.startswith(("http://", "https://")) for h in hrefs), hrefs
    assert "<script>" in browser.find_element("id", "note-text").get_property("textContent")
    assert sentinel.hits == []
    assert off_origin(requested_urls(browser), web_app) == []


def test_chat_answer_with_markup_runs_nothing(
    browser: Any, web_app: ServedApp, openai_stub: Any, sentinel: Sentinel
) -> None:
    key = web_app.new_user("answers")
    create_indexed(web_app, key, "Backups", NOTE)
    remote = sentinel.url
    openai_stub.set_chat_reply(
        lambda body: (
            f"Nightly at 02:00 [{ref_of('Nightly backup', body)}]. "
            "[open](javascript:window.__pwned='answer') "
            f"<img src={remote}/answer.png onerror=\"window.__pwned='img'\"> "
            f"![chart]({remote}/chart.png) <script>window.__pwned='script'</script>"
        )
    )
    requested_urls(browser)
    sign_in(browser, web_app, key, "answers")
    browser.find_element("id", "chat-input").send_keys("When is the backup?")
    browser.find_element("id", "chat-send").click()
    answer = wait_for(browser, lambda d: css(d, ".answer[data-done=true]"))[0]
    for text in answer.find_elements("css selector", ".answer-body *"):
        if "open" in text.text:
            text.click()
    time.sleep(0.5)
    assert "Nightly at 02:00" in answer.text
    assert pwned(browser) is None
    assert not css(browser, "img, iframe, .answer script")
    assert not browser.execute_script(
        "return [...document.links].filter(a => !/^https?:/.test(a.protocol)).length"
    )
    assert sentinel.hits == []
    assert off_origin(requested_urls(browser), web_app) == []


@pytest.mark.parametrize(("page", "rendered"), [("/docs", ".opblock"), ("/redoc", ".api-content")])
def test_api_docs_render_from_local_assets(
    browser: Any, web_app: ServedApp, page: str, rendered: str
) -> None:
    requested_urls(browser)
    browser.get(f"{web_app.url}{page}")
    wait_for(browser, lambda d: css(d, rendered))
    urls = requested_urls(browser)
    assert urls and off_origin(urls, web_app) == []
