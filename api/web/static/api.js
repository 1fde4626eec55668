// The REST API as the page uses it: the key from sessionStorage in every request, errors
// as exceptions carrying the API's `detail`, and chat's Server-Sent Events as a callback.

const KEY = "autonote.apiKey";

export const apiKey = {
  get: () => sessionStorage.getItem(KEY) || "",
  set: (key) => sessionStorage.setItem(KEY, key),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, body) {
    const detail = body && body.detail;
    super(typeof detail === "string" ? detail : `request failed (${status})`);
    this.status = status;
    this.code = body && body.error;
  }
}

async function send(method, path, { json, headers = {} } = {}) {
  const init = { method, headers: { Authorization: `Bearer ${apiKey.get()}`, ...headers } };
  if (json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(json);
  }
  const resp = await fetch(path, init);
  if (!resp.ok) {
    let body = null;
    try {
      body = await resp.json();
    } catch {
      /* not JSON */
    }
    throw new ApiError(resp.status, body);
  }
  return resp;
}

async function call(method, path, options) {
  const resp = await send(method, path, options);
  return resp.status === 204 ? null : resp.json();
}

const ifMatch = (version) => ({ "If-Match": String(version) });

export const api = {
  me: () => call("GET", "/v1/me"),
  listNotes: (status) => call("GET", `/v1/notes?limit=100&status=${status}`),
  getNote: (id) => call("GET", `/v1/notes/${encodeURIComponent(id)}`),
  createNote: (note) => call("POST", "/v1/notes", { json: note }),
  updateNote: (id, version, note) =>
    call("PATCH", `/v1/notes/${encodeURIComponent(id)}`, { json: note, headers: ifMatch(version) }),
  trashNote: (id, version) =>
    call("DELETE", `/v1/notes/${encodeURIComponent(id)}`, { headers: ifMatch(version) }),
  restoreNote: (id, version) =>
    call("POST", `/v1/notes/${encodeURIComponent(id)}/restore`, { headers: ifMatch(version) }),
  search: (query) => call("POST", "/v1/search", { json: { query, limit: 10 } }),
};

// POST /v1/chat with `stream: true`; `onEvent(name, data)` for each event in order
// (citations, token…, possibly reset, done).
export async function streamChat(message, history, onEvent) {
  const resp = await send("POST", "/v1/chat", { json: { message, history, stream: true } });
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      dispatch(buffer.slice(0, cut), onEvent);
      buffer = buffer.slice(cut + 2);
    }
  }
  if (buffer.trim()) dispatch(buffer, onEvent);
}

function dispatch(raw, onEvent) {
  let event = "message";
  const data = [];
  for (const line of raw.split("\n")) {
    if (line.startsWith("event:")) event = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  if (data.length) onEvent(event, JSON.parse(data.join("\n")));
}
