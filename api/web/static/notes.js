// The notes list, search results, the note view (text with the cited span highlighted, or
// a preview) and the editor with its live preview.

import { api } from "./api.js";
import { $, el, show, statusBadge } from "./dom.js";
import { codePointToIndex, renderMarkdown } from "./markdown.js";

const BUSY = new Set(["pending", "indexing"]);
const POLL_MS = 1500;

export function createNotes(report) {
  let current = null; // the open note
  let editing = null; // the note being edited (null: a new one)
  let poll = null;

  function panel(which) {
    show("note-view", which === "view");
    show("editor", which === "editor");
    show("note-empty", which === null);
  }

  async function refreshList() {
    clearTimeout(poll);
    const status = $("show-trash").checked ? "trashed" : "active";
    const page = await api.listNotes(status);
    $("notes").replaceChildren(...page.items.map(listItem));
    const busy = page.items.some((n) => BUSY.has(n.index_status));
    const open = current && page.items.find((n) => n.id === current.id);
    if (open) $("view-status").replaceChildren(statusBadge(open.index_status));
    if (busy) poll = setTimeout(() => refreshList().catch(report), POLL_MS);
  }

  function listItem(note) {
    const item = el(
      "li",
      { class: "note-item", dataset: { id: note.id } },
      el("span", { class: "note-title" }, note.title),
      statusBadge(note.index_status),
      el("span", { class: "meta" }, ` ${new Date(note.updated_at).toLocaleString()}`),
    );
    item.addEventListener("click", () => open(note.id).catch(report));
    return item;
  }

  async function search(query) {
    const found = await api.search(query);
    const items = found.results.map((r) => {
      const sections = r.matching_chunks.map((c) => {
        const label = `${c.section_path || r.title}: ${c.content.slice(0, 140)}`;
        const button = el("button", { type: "button", class: "section-link" }, label);
        const cite = { start: c.start_offset, end: c.end_offset, version: c.note_version };
        button.addEventListener("click", () => open(r.note_id, cite).catch(report));
        return button;
      });
      const title = el("span", { class: "note-title" }, r.title);
      return el("li", { class: "result", dataset: { id: r.note_id } }, title, ...sections);
    });
    if (!items.length) items.push(el("li", { class: "meta" }, "Nothing matches."));
    $("search-results").replaceChildren(...items);
    show("search-results", true);
    show("clear-search", true);
    show("notes", false);
  }

  function clearSearch() {
    show("search-results", false);
    show("clear-search", false);
    show("notes", true);
  }

  // Open a note; with `cite` ({start, end, version}: code-point offsets into content_md),
  // show its text with exactly that span highlighted and scrolled into view.
  async function open(id, cite = null) {
    const note = await api.getNote(id);
    current = note;
    $("view-title").textContent = note.title;
    $("view-status").replaceChildren(statusBadge(note.index_status));
    const tags = note.tags.length ? `tags: ${note.tags.join(", ")} · ` : "";
    $("view-meta").textContent = `${tags}version ${note.version} · ${note.status}`;
    const stale = cite && cite.version != null && cite.version !== note.version;
    $("view-warning").textContent = stale
      ? `This note changed since it was cited (version ${cite.version}, now ${note.version}): the highlight may be off.`
      : "";
    show("view-warning", Boolean(stale));
    show("trash-note", note.status === "active");
    show("restore-note", note.status === "trashed");
    $("note-preview").replaceChildren(renderMarkdown(note.content_md));
    renderText(note.content_md, cite);
    panel("view");
    showTab(cite ? "text" : "preview");
    if (cite) $("cited").scrollIntoView({ block: "center" });
  }

  function renderText(content, cite) {
    if (!cite) {
      $("note-text").replaceChildren(content);
      return;
    }
    const start = codePointToIndex(content, cite.start);
    const end = codePointToIndex(content, cite.end);
    const mark = el(
      "mark",
      { id: "cited", dataset: { start: cite.start, end: cite.end } },
      content.slice(start, end),
    );
    $("note-text").replaceChildren(content.slice(0, start), mark, content.slice(end));
  }

  function showTab(which) {
    show("note-text", which === "text");
    show("note-preview", which === "preview");
  }

  function edit(note) {
    editing = note;
    $("note-title").value = note ? note.title : "";
    $("note-tags").value = note ? note.tags.join(", ") : "";
    $("note-content").value = note ? note.content_md : "";
    updatePreview();
    panel("editor");
    $("note-title").focus();
  }

  function updatePreview() {
    $("editor-preview").replaceChildren(renderMarkdown($("note-content").value));
  }

  async function save() {
    const body = {
      title: $("note-title").value,
      content_md: $("note-content").value,
      tags: $("note-tags").value.split(",").map((t) => t.trim()).filter(Boolean),
    };
    const saved = editing
      ? await api.updateNote(editing.id, editing.version, body)
      : await api.createNote(body);
    editing = null;
    await open(saved.id);
    await refreshList();
  }

  async function trash() {
    await api.trashNote(current.id, current.version);
    panel(null);
    current = null;
    await refreshList();
  }

  async function restore() {
    await api.restoreNote(current.id, current.version);
    await open(current.id);
    await refreshList();
  }

  function wire() {
    $("new-note").addEventListener("click", () => edit(null));
    $("edit-note").addEventListener("click", () => edit(current));
    $("cancel-edit").addEventListener("click", () => panel(current ? "view" : null));
    $("trash-note").addEventListener("click", () => trash().catch(report));
    $("restore-note").addEventListener("click", () => restore().catch(report));
    $("show-text").addEventListener("click", () => showTab("text"));
    $("show-preview").addEventListener("click", () => showTab("preview"));
    $("show-trash").addEventListener("change", () => refreshList().catch(report));
    $("note-content").addEventListener("input", updatePreview);
    $("editor").addEventListener("submit", (e) => {
      e.preventDefault();
      save().catch(report);
    });
    $("search-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const query = $("search-input").value.trim();
      if (query) search(query).catch(report);
      else clearSearch();
    });
    $("clear-search").addEventListener("click", clearSearch);
  }

  function reset() {
    clearTimeout(poll);
    current = null;
    panel(null);
  }

  return { wire, refreshList, open, reset };
}
