// DOM helpers: every piece of text goes in as a Text node, never as markup.

export const $ = (id) => document.getElementById(id);

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(name, value);
  }
  node.append(...children);
  return node;
}

export function statusBadge(status) {
  return el("span", { class: `status status-${status}` }, status);
}

export function show(id, visible) {
  $(id).hidden = !visible;
}
