// Chat: the question streamed over SSE, tokens shown as plain text while they arrive, and
// the final answer (`done`) rendered with its [n] markers as buttons that open the cited
// span. The answer is rendered by markdown.js, so a link or markup in it runs nothing.

import { streamChat } from "./api.js";
import { $, el } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

const HISTORY_MESSAGES = 20; // what the API accepts
const HISTORY_CHARS = 8000; // per message

export function createChat(openNote, report) {
  const history = [];

  function citationButton(c, label) {
    const button = el("button", { type: "button", dataset: { ref: c.ref } }, label);
    const cite = { start: c.start_offset, end: c.end_offset, version: c.note_version };
    button.addEventListener("click", () => openNote(c.note_id, cite).catch(report));
    return button;
  }

  function finish(turn, done) {
    const byRef = new Map(done.citations.map((c) => [c.ref, c]));
    const cite = (n) => {
      const c = byRef.get(n);
      if (!c) return document.createTextNode(`[${n}]`);
      const button = citationButton(c, `[${n}]`);
      button.className = "cite-ref";
      return button;
    };
    turn.body.replaceChildren(renderMarkdown(done.answer, { cite }));
    const about = done.mode === "llm" ? `answered by ${done.model}` : "quoted from your notes";
    turn.meta.textContent = done.warning ? `${about} · ${done.warning}` : about;
    turn.sources.replaceChildren(
      ...done.citations.map((c) => {
        const label = `[${c.ref}] ${c.heading_path.join(" › ") || c.title}`;
        const button = citationButton(c, label);
        button.className = "citation";
        return el("li", {}, button);
      }),
    );
    turn.answer.dataset.done = "true";
  }

  async function ask(message) {
    const body = el("div", { class: "answer-body" });
    const meta = el("p", { class: "meta" });
    const sources = el("ul", { class: "citations" });
    const answer = el("div", { class: "answer" }, body, meta, sources);
    const turn = { body, meta, sources, answer };
    $("chat-log").append(el("div", { class: "turn" }, el("p", { class: "question" }, message), answer));
    answer.scrollIntoView({ block: "end" });
    let text = "";
    let final = null;
    await streamChat(message, history.slice(-HISTORY_MESSAGES), (event, data) => {
      if (event === "token") {
        text += data.text;
        body.textContent = text;
      } else if (event === "reset") {
        text = "";
        body.textContent = "";
      } else if (event === "done") {
        final = data;
        finish(turn, data);
      }
    });
    if (!final) throw new Error("the answer stopped before it was complete");
    history.push(
      { role: "user", content: message.slice(0, HISTORY_CHARS) },
      { role: "assistant", content: final.answer.slice(0, HISTORY_CHARS) },
    );
  }

  function wire() {
    $("chat-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const message = $("chat-input").value.trim();
      if (!message) return;
      $("chat-input").value = "";
      $("chat-send").disabled = true;
      ask(message)
        .catch(report)
        .finally(() => {
          $("chat-send").disabled = false;
        });
    });
  }

  return { wire };
}
