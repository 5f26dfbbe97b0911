// The objects of a kind (or of all kinds): the kind's printer columns, Ready, Synced with
// the reason, age; filtered by namespace, label selector and free text; sorted by any
// column; redrawn as the watch brings changes (only the rows on screen are built).

import { age, cellsOf, columnsOf, selectorMatcher } from "./cells.js";
import { fill, h } from "./dom.js";
import { kindId } from "./live.js";

const SHOWN = 200;
const ALL = "*";

function objectHref(kind, document) {
  const meta = document.metadata || {};
  const parts = [kind.group, kind.version, kind.plural, meta.namespace || "-", meta.name].map(encodeURIComponent);
  return `#/object/${parts.join("/")}`;
}

function readyClass(value) {
  return value === "True" ? "ok" : value === "False" ? "bad" : "unknown";
}

export function objects(main, live, params) {
  const chosen = params.kind || ALL;
  const kinds = chosen === ALL ? live.kinds : live.kinds.filter((k) => kindId(k) === chosen);
  const single = kinds.length === 1 ? kinds[0] : null;
  const columns = single ? columnsOf(single) : [{ name: "Kind", key: "kind" }, ...columnsOf({ columns: [] })];
  const view = { sort: params.sort || "name", descending: params.desc === "1", shown: SHOWN };

  const kindSelect = h(
    "select",
    { id: "kind", name: "kind" },
    h("option", { value: ALL }, "All kinds"),
    live.kinds.map((k) => h("option", { value: kindId(k), selected: kindId(k) === chosen }, k.kind)),
  );
  const namespaceSelect = h("select", { id: "namespace", name: "namespace" }, h("option", { value: "" }, "All namespaces"));
  const selectorInput = h("input", {
    id: "selector", name: "selector", type: "text", placeholder: "app=web,tier!=db", value: params.l || "",
    autocomplete: "off", spellcheck: "false",
  });
  const textInput = h("input", { id: "text", name: "text", type: "search", placeholder: "name, reason…", value: params.q || "" });
  const summary = h("p", { id: "summary", role: "status", "aria-live": "polite" });
  const tableHolder = h("div", { class: "scroll" });
  const more = h("button", { type: "button", id: "more", hidden: true }, "Show more");

  fill(
    main,
    h("h2", { tabindex: "-1" }, single ? single.kind : "Objects"),
    h(
      "form",
      { class: "filters", role: "search", onsubmit: (event) => event.preventDefault() },
      h("label", { for: "kind" }, "Kind", kindSelect),
      h("label", { for: "namespace" }, "Namespace", namespaceSelect),
      h("label", { for: "selector" }, "Label selector", selectorInput),
      h("label", { for: "text" }, "Search", textInput),
    ),
    summary,
    tableHolder,
    more,
  );

  kindSelect.addEventListener("change", () => {
    location.hash = kindSelect.value === ALL ? "#/objects" : `#/objects/${encodeURIComponent(kindSelect.value)}`;
  });

  let namespaces = "";
  const computed = new WeakMap();
  const collator = new Intl.Collator(undefined, { numeric: true });
  let scheduled = false;
  const draw = () => {
    scheduled = false;
    const now = Date.now();
    const found = new Set();
    const rows = [];
    const matcher = selectorMatcher(selectorInput.value);
    selectorInput.setAttribute("aria-invalid", matcher ? "false" : "true");
    const wanted = namespaceSelect.value;
    const needle = textInput.value.trim().toLowerCase();
    let total = 0;
    for (const kind of kinds) {
      const cache = live.cache(kind);
      for (const document of cache.objects.values()) {
        total += 1;
        const meta = document.metadata || {};
        if (meta.namespace) found.add(meta.namespace);
        if (wanted && meta.namespace !== wanted) continue;
        if (matcher && !matcher(meta.labels)) continue;
        let known = computed.get(document);
        if (!known) {
          // Each document's cells once: a change brings a new document, the others keep theirs.
          const cells = cellsOf(columns, document, now);
          if (!single) cells.kind = kind.kind;
          const haystack = [meta.namespace || "", ...Object.values(cells)].join(" ").toLowerCase();
          known = { cells, haystack };
          computed.set(document, known);
        }
        if (needle && !known.haystack.includes(needle)) continue;
        rows.push({ kind, document, cells: known.cells });
      }
    }
    const key = view.sort;
    const byAge = key === "age";
    const value = (row) => (byAge ? -Date.parse(row.document.metadata.creationTimestamp || 0) : row.cells[key] ?? "");
    rows.sort((a, b) => {
      const x = value(a);
      const y = value(b);
      const order = typeof x === "number" && typeof y === "number" ? x - y : collator.compare(String(x), String(y));
      return view.descending ? -order : order;
    });
    const listed = [...found].sort().join("\n");
    if (listed !== namespaces) {
      namespaces = listed;
      const current = namespaceSelect.value;
      fill(
        namespaceSelect,
        h("option", { value: "" }, "All namespaces"),
        [...found].sort().map((ns) => h("option", { value: ns, selected: ns === current }, ns)),
      );
    }
    const shown = rows.slice(0, view.shown);
    for (const row of shown) row.cells = { ...row.cells, age: age(row.document.metadata.creationTimestamp, now) };
    const denied = kinds.filter((kind) => live.cache(kind).state === "forbidden").map((kind) => kind.kind);
    summary.textContent = `${rows.length} of ${total} object${total === 1 ? "" : "s"}` +
      (shown.length < rows.length ? `, the first ${shown.length} shown` : "") +
      (denied.length ? ` (you may not list ${denied.join(", ")})` : "");
    more.hidden = shown.length >= rows.length;
    const head = h(
      "tr",
      {},
      columns.map((column) => {
        const sorted = view.sort === column.key;
        return h(
          "th",
          { scope: "col", "aria-sort": sorted ? (view.descending ? "descending" : "ascending") : "none" },
          h(
            "button",
            {
              type: "button",
              class: "sort",
              "data-focus": `sort:${column.key}`,
              onclick: () => {
                view.descending = sorted ? !view.descending : false;
                view.sort = column.key;
                draw();
              },
            },
            column.name,
            sorted ? (view.descending ? " ▼" : " ▲") : "",
          ),
        );
      }),
    );
    const body = shown.map(({ kind, document, cells }) =>
      h(
        "tr",
        { "data-key": `${kind.kind}/${document.metadata.namespace || ""}/${document.metadata.name}` },
        columns.map((column) => {
          const text = cells[column.key];
          if (column.key === "name") {
            return h("th", { scope: "row" }, h("a", { href: objectHref(kind, document), "data-focus": `row:${kind.kind}/${document.metadata.namespace}/${text}` }, text), document.metadata.namespace ? h("span", { class: "ns" }, document.metadata.namespace) : "");
          }
          if (column.key === "ready" || column.key === "synced") {
            return h("td", { "data-column": column.key }, h("span", { class: `badge ${readyClass(text)}` }, text));
          }
          return h("td", { "data-column": column.key }, text);
        }),
      ),
    );
    // Redrawn as changes come: the focus stays on the control it was on.
    const focused = tableHolder.contains(window.document.activeElement) ? window.document.activeElement.dataset.focus : null;
    fill(tableHolder, h("table", { class: "objects", id: "objects" }, h("caption", { class: "visually-hidden" }, "Objects"), h("thead", {}, head), h("tbody", {}, body)));
    if (shown.length && !performance.getEntriesByName("reconcile:first-rows").length) {
      performance.mark("reconcile:first-rows"); // the first screen (benchmarks/ui.py reads it)
    }
    if (focused) tableHolder.querySelector(`[data-focus="${CSS.escape(focused)}"]`)?.focus();
  };
  const later = () => {
    if (!scheduled) {
      scheduled = true;
      requestAnimationFrame(draw);
    }
  };
  for (const input of [namespaceSelect, selectorInput, textInput]) input.addEventListener("input", later);
  more.addEventListener("click", () => {
    view.shown += SHOWN;
    draw();
  });
  const onChange = (event) => {
    if (kinds.includes(event.detail)) later();
  };
  live.addEventListener("change", onChange);
  for (const kind of kinds) live.cache(kind);
  draw();
  return () => live.removeEventListener("change", onChange);
}
