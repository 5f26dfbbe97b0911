// Building the page's elements without HTML strings: text is always text (no injection).

/** An element: h("a", {href: "#/"}, "text", child, ...). Attributes starting with "on" are listeners. */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2), value);
    } else if (name === "class") {
      element.className = value;
    } else if (value === true) {
      element.setAttribute(name, "");
    } else {
      element.setAttribute(name, String(value));
    }
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(element, child);
    else element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace what `element` holds with `children`. */
export function fill(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

/** Fill ``element`` with ``children`` unless it shows the same already: drawing a part
 * again on every change would take the keyboard focus from a link or button in it. */
export function refill(element, ...children) {
  const drawn = document.createElement(element.tagName);
  append(drawn, children);
  if (drawn.innerHTML === element.innerHTML) return element;
  element.replaceChildren(...drawn.childNodes);
  return element;
}

/** A pretty JSON text of a value (keys sorted, so two revisions line up). */
export function pretty(value) {
  return JSON.stringify(sorted(value), null, 2) ?? "";
}

function sorted(value) {
  if (Array.isArray(value)) return value.map(sorted);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.keys(value).sort().map((key) => [key, sorted(value[key])]));
  }
  return value;
}
