// A small markdown renderer that builds DOM nodes: text only ever becomes a Text node or a
// textContent, never markup, so note and answer content cannot add a script, an event
// handler or an element that fetches something. Images are shown as their alt text, and a
// link keeps its href only for http(s) and mailto.

const SAFE_SCHEMES = new Set(["http:", "https:", "mailto:"]);

function el(tag, text) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  return node;
}

export function safeHref(raw) {
  try {
    const url = new URL(raw, window.location.href);
    return SAFE_SCHEMES.has(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

// Inline spans: code, image, link, bold, emphasis, autolink, and (for answers) [n] markers.
const INLINE = new RegExp(
  [
    "(`+)([\\s\\S]*?[^`])\\1(?!`)", // 1,2 code
    "!\\[([^\\]]*)\\]\\(([^)\\s]*)[^)]*\\)", // 3,4 image
    "\\[([^\\]]+)\\]\\(([^)\\s]*)[^)]*\\)", // 5,6 link
    "\\*\\*([\\s\\S]+?)\\*\\*|__([\\s\\S]+?)__", // 7,8 strong
    "\\*([^*\\s][^*]*?)\\*|\\b_([^_\\s][^_]*?)_\\b", // 9,10 emphasis
    "<((?:https?|mailto):[^>\\s]+)>", // 11 autolink
    "\\[(\\d{1,3})\\]", // 12 citation marker
  ].join("|"),
  "g",
);

function link(text, href) {
  const safe = safeHref(href);
  if (!safe) return document.createTextNode(text);
  const a = el("a", text);
  a.href = safe;
  a.rel = "noopener noreferrer nofollow";
  a.target = "_blank";
  return a;
}

export function renderInline(text, options, parent) {
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) parent.append(text.slice(last, m.index));
    last = m.index + m[0].length;
    if (m[2] !== undefined) parent.append(el("code", m[2]));
    else if (m[4] !== undefined) parent.append(`[image: ${m[3] || "untitled"}]`);
    else if (m[6] !== undefined) parent.append(link(m[5], m[6]));
    else if (m[7] !== undefined || m[8] !== undefined) {
      renderInline(m[7] ?? m[8], options, parent.appendChild(el("strong")));
    } else if (m[9] !== undefined || m[10] !== undefined) {
      renderInline(m[9] ?? m[10], options, parent.appendChild(el("em")));
    } else if (m[11] !== undefined) parent.append(link(m[11], m[11]));
    else if (m[12] !== undefined && options.cite) parent.append(options.cite(Number(m[12])));
    else parent.append(m[0]);
  }
  if (last < text.length) parent.append(text.slice(last));
}

const FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const LIST_ITEM = /^ {0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const TABLE = /^\s*\|.*\|\s*$/;

function fence(lines, i, out) {
  const [, marker, info] = lines[i].match(FENCE);
  const body = [];
  let j = i + 1;
  while (j < lines.length && !lines[j].trim().startsWith(marker)) body.push(lines[j++]);
  const code = el("code", body.join("\n"));
  if (info.trim()) code.dataset.lang = info.trim().split(/\s/)[0];
  out.appendChild(el("pre")).append(code);
  return j + 1;
}

function list(lines, i, out, options) {
  const ordered = /\d/.test(lines[i].match(LIST_ITEM)[1]);
  const node = out.appendChild(el(ordered ? "ol" : "ul"));
  let item = null;
  while (i < lines.length && lines[i].trim()) {
    const m = lines[i].match(LIST_ITEM);
    if (m) {
      item = node.appendChild(el("li"));
      renderInline(m[2], options, item);
    } else {
      item.append(" ");
      renderInline(lines[i].trim(), options, item);
    }
    i += 1;
  }
  return i;
}

function gather(lines, i, test) {
  const taken = [];
  while (i < lines.length && test(lines[i])) taken.push(lines[i++]);
  return [taken, i];
}

function paragraph(lines, i, out, options) {
  const startsBlock = (l) => FENCE.test(l) || HEADING.test(l) || QUOTE.test(l) || LIST_ITEM.test(l);
  const [taken, next] = gather(lines, i + 1, (l) => l.trim() && !startsBlock(l));
  const p = out.appendChild(el("p"));
  [lines[i], ...taken].forEach((line, k) => {
    if (k) p.append(el("br"));
    renderInline(line.trim(), options, p);
  });
  return next;
}

function block(lines, i, out, options) {
  const line = lines[i];
  let m;
  if (!line.trim()) return i + 1;
  if (FENCE.test(line)) return fence(lines, i, out);
  if ((m = line.match(HEADING))) {
    renderInline(m[2], options, out.appendChild(el(`h${Math.min(m[1].length + 2, 6)}`)));
    return i + 1;
  }
  if (RULE.test(line)) {
    out.append(el("hr"));
    return i + 1;
  }
  if (QUOTE.test(line)) {
    const [taken, next] = gather(lines, i, (l) => QUOTE.test(l));
    const inner = taken.map((l) => l.match(QUOTE)[1]);
    renderBlocks(inner, options, out.appendChild(el("blockquote")));
    return next;
  }
  if (LIST_ITEM.test(line)) return list(lines, i, out, options);
  if (TABLE.test(line)) {
    const [taken, next] = gather(lines, i, (l) => TABLE.test(l));
    out.append(el("pre", taken.join("\n")));
    return next;
  }
  return paragraph(lines, i, out, options);
}

function renderBlocks(lines, options, out) {
  let i = 0;
  while (i < lines.length) i = block(lines, i, out, options);
  return out;
}

// `options.cite(n)`: the node that stands for citation marker [n] (answers only).
export function renderMarkdown(source, options = {}) {
  const lines = String(source).replace(/\r\n?/g, "\n").split("\n");
  return renderBlocks(lines, options, document.createDocumentFragment());
}

// Offsets from the API count code points; JavaScript strings index UTF-16 units.
export function codePointToIndex(text, codePoints) {
  let index = 0;
  for (let seen = 0; seen < codePoints && index < text.length; seen += 1) {
    const unit = text.charCodeAt(index);
    const next = text.charCodeAt(index + 1);
    const pair = unit >= 0xd800 && unit <= 0xdbff && next >= 0xdc00 && next <= 0xdfff;
    index += pair ? 2 : 1;
  }
  return index;
}
