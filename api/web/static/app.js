// The page: an API key kept in sessionStorage (gone when the tab closes), the notes and
// the chat. Everything it shows from notes and answers goes through dom.js / markdown.js.

import { api, apiKey, ApiError } from "./api.js";
import { createChat } from "./chat.js";
import { $ } from "./dom.js";
import { createNotes } from "./notes.js";

function report(error) {
  const text = error instanceof ApiError && error.status === 401
    ? "The API key was refused: paste a valid key."
    : error.message || String(error);
  $("message").textContent = text;
  $("message").hidden = false;
}

function clearMessage() {
  $("message").hidden = true;
  $("message").textContent = "";
}

const notes = createNotes(report);
const chat = createChat(notes.open, report);

async function signIn() {
  clearMessage();
  if (!apiKey.get()) {
    $("whoami").textContent = "No API key";
    return;
  }
  const me = await api.me();
  $("whoami").textContent = `Signed in as ${me.name}`;
  await notes.refreshList();
}

function wire() {
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    apiKey.set($("api-key").value.trim());
    $("api-key").value = "";
    signIn().catch(report);
  });
  $("forget-key").addEventListener("click", () => {
    apiKey.clear();
    $("notes").replaceChildren();
    notes.reset();
    signIn().catch(report);
  });
  notes.wire();
  chat.wire();
}

wire();
signIn().catch(report);
