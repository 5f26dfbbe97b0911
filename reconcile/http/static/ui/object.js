// One object: its state (Ready, Synced, conditions), spec and status, its owner and its
// children (links both ways), the actions the user may take, and its timeline from the
// log (/history: who, when, what, the change each event made), with the document at any
// revision and a diff between any two.

import { call, resourcePath } from "./api.js";
import { access, actionBar } from "./actions.js";
import { paused, readiness } from "./cells.js";
import { changedPaths, lineDiff } from "./diff.js";
import { fill, h, pretty, refill } from "./dom.js";

function hrefOf(kind, namespace, name) {
  return `#/object/${[kind.group, kind.version, kind.plural, namespace || "-", name].map(encodeURIComponent).join("/")}`;
}

function kindOfReference(live, reference) {
  const group = (reference.apiVersion || "").split("/").slice(0, -1).join("/");
  return live.kinds.find((k) => k.kind === reference.kind && k.group === group) || live.kinds.find((k) => k.kind === reference.kind);
}

function short(value) {
  if (value === undefined) return "∅";
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > 120 ? `${text.slice(0, 117)}…` : text;
}

function conditionsTable(document) {
  const conditions = (document.status || {}).conditions || [];
  if (!conditions.length) return h("p", {}, "No conditions yet.");
  return h(
    "table",
    { class: "conditions" },
    h("caption", { class: "visually-hidden" }, "Conditions"),
    h("thead", {}, h("tr", {}, ["Type", "Status", "Reason", "Message", "Since"].map((t) => h("th", { scope: "col" }, t)))),
    h(
      "tbody",
      {},
      conditions.map((c) =>
        h("tr", { "data-condition": c.type }, h("th", { scope: "row" }, c.type), h("td", {}, c.status), h("td", {}, c.reason || ""), h("td", {}, c.message || ""), h("td", {}, c.lastTransitionTime || "")),
      ),
    ),
  );
}

function relations(live, kind, document) {
  const meta = document.metadata;
  const owners = (meta.ownerReferences || []).map((reference) => {
    const ownerKind = kindOfReference(live, reference);
    const label = `${reference.kind} ${reference.name}`;
    return h("li", {}, ownerKind ? h("a", { href: hrefOf(ownerKind, meta.namespace, reference.name) }, label) : label);
  });
  const children = [];
  for (const other of live.kinds) {
    for (const child of live.cache(other).objects.values()) {
      if ((child.metadata.ownerReferences || []).some((r) => r.uid === meta.uid)) {
        children.push(h("li", {}, h("a", { href: hrefOf(other, child.metadata.namespace, child.metadata.name) }, `${other.kind} ${child.metadata.name}`)));
      }
    }
  }
  return h(
    "div",
    { class: "relations" },
    h("h3", {}, "Owner"),
    owners.length ? h("ul", { id: "owners" }, owners) : h("p", {}, "None."),
    h("h3", {}, "Children"),
    children.length ? h("ul", { id: "children" }, children) : h("p", {}, "None."),
  );
}

function timeline(items, onView) {
  const entries = [...items].reverse().map((item) => {
    const who = item.user ? `${item.user} (${item.actor})` : item.actor;
    const details = [];
    if (item.changes && item.changes.length) {
      details.push(
        h(
          "ul",
          { class: "changes" },
          item.changes.map((c) => h("li", {}, h("code", {}, c.path), ": ", h("del", {}, short(c.old)), " → ", h("ins", {}, short(c.new)))),
        ),
      );
    }
    if (item.data) {
      const message = item.data.message || item.data.reason;
      details.push(message ? h("p", { class: "message" }, String(message)) : null);
      const rest = Object.fromEntries(Object.entries(item.data).filter(([k]) => k !== "message"));
      if (Object.keys(rest).length) details.push(h("details", {}, h("summary", {}, "Details"), h("pre", {}, pretty(rest))));
    }
    return h(
      "li",
      { "data-type": item.type, "data-revision": item.revision },
      h(
        "div",
        { class: "event" },
        h("strong", { class: "type" }, item.type),
        " ",
        h("time", { datetime: item.time }, new Date(item.time).toLocaleString()),
        " by ",
        h("span", { class: "who" }, who),
        ` · revision ${item.revision}`,
        item.object ? h("button", { type: "button", class: "link", onclick: () => onView(item.revision) }, "View document") : "",
      ),
      details,
    );
  });
  return h("ol", { class: "timeline", id: "timeline", reversed: true }, entries);
}

/** The changed lines with three lines of context around each, "⋯" where lines are left out. */
function hunks(lines) {
  const near = (i) => lines.slice(Math.max(0, i - 3), i + 4).some(([mark]) => mark !== " ");
  const kept = [];
  let skipped = false;
  lines.forEach((line, i) => {
    if (line[0] !== " " || near(i)) {
      if (skipped && kept.length) kept.push([" ", "⋯"]);
      kept.push(line);
      skipped = false;
    } else {
      skipped = true;
    }
  });
  return kept;
}

function revisionsView(items, chosen) {
  const versions = items.filter((item) => item.object);
  const holder = h("section", { id: "revisions", "aria-labelledby": "revisions-title" }, h("h3", { id: "revisions-title" }, "Revisions"));
  if (!versions.length) return holder;
  const option = (item, selected) => h("option", { value: item.revision, selected }, `${item.revision} · ${item.type}`);
  const last = versions[versions.length - 1];
  const previous = versions.length > 1 ? versions[versions.length - 2] : last;
  const from = h("select", { id: "from", name: "from" }, versions.map((v) => option(v, v === previous)));
  const to = h("select", { id: "to", name: "to" }, versions.map((v) => option(v, v === last)));
  const shown = h("select", { id: "at", name: "at" }, versions.map((v) => option(v, String(v.revision) === String(chosen ?? last.revision))));
  const result = h("div", { id: "diff" });
  const documentBox = h("pre", { id: "document-at", tabindex: "0" });
  const byRevision = (select) => versions.find((v) => String(v.revision) === select.value);
  const drawDiff = () => {
    const a = byRevision(from).object;
    const b = byRevision(to).object;
    const paths = changedPaths(a, b);
    fill(
      result,
      h("p", {}, paths.length ? `${paths.length} field${paths.length === 1 ? "" : "s"} changed:` : "No difference."),
      h("ul", { class: "changes", id: "diff-paths" }, paths.map((c) => h("li", {}, h("code", {}, c.path), ": ", h("del", {}, short(c.old)), " → ", h("ins", {}, short(c.new))))),
      h(
        "pre",
        { class: "diff", tabindex: "0", "aria-label": "Line diff" },
        hunks(lineDiff(a, b)).map(([mark, line]) =>
          h("span", { class: mark === "+" ? "add" : mark === "-" ? "del" : "same" }, `${mark} ${line}\n`),
        ),
      ),
    );
  };
  const drawDocument = () => {
    const { managedFields, ...metadata } = byRevision(shown).object.metadata || {};
    documentBox.textContent = pretty({ ...byRevision(shown).object, metadata });
  };
  from.addEventListener("change", drawDiff);
  to.addEventListener("change", drawDiff);
  shown.addEventListener("change", drawDocument);
  holder.append(
    h("div", { class: "filters" }, h("label", { for: "at" }, "Document at revision", shown)),
    documentBox,
    h("h4", {}, "Diff between revisions"),
    h("div", { class: "filters" }, h("label", { for: "from" }, "From", from), h("label", { for: "to" }, "To", to)),
    result,
  );
  drawDiff();
  drawDocument();
  return holder;
}

export function objectPage(main, live, params) {
  const kind = live.kinds.find((k) => k.group === params.group && k.plural === params.plural);
  const namespace = params.namespace === "-" ? "" : params.namespace;
  const name = params.name;
  if (!kind) {
    fill(main, h("h2", { tabindex: "-1" }, "Unknown kind"), h("p", {}, `${params.plural}.${params.group} is not served here.`));
    return () => {};
  }
  const cache = live.cache(kind);
  const key = `${namespace}/${name}`;
  const heading = h("h2", { tabindex: "-1" }, `${kind.kind} `, h("span", { class: "name" }, name));
  const notice = h("p", { id: "notice", role: "status", "aria-live": "polite" });
  const top = h("div", { id: "state" });
  const side = h("div", { id: "relations" });
  const history = h("section", { "aria-labelledby": "timeline-title" }, h("h3", { id: "timeline-title" }, "Timeline"), h("p", {}, "loading…"));
  const revisions = h("div", {});
  fill(main, h("p", {}, h("a", { href: `#/objects/${encodeURIComponent(`${kind.group}/${kind.plural}`)}` }, `← ${kind.kind} objects`)), heading, notice, top, side, history, revisions);

  let allowed = {};
  let document = cache.objects.get(key) || null;
  let lastVersion = null;
  let viewing = null;
  let historyTimer = null;
  let historySeen = null;

  const report = async (promise, done) => {
    try {
      const answer = await promise;
      notice.textContent = `${done}.`;
      notice.className = "ok";
      if (answer && answer.kind === kind.kind && answer.metadata) {
        // The server's answer is the object now: shown at once, the watch confirms it.
        document = answer;
        lastVersion = answer.metadata.resourceVersion;
        drawState();
        loadHistory();
      }
    } catch (error) {
      notice.textContent = `Refused: ${error.message}`;
      notice.className = "bad";
    }
  };

  const drawState = () => {
    if (!document) {
      fill(top, h("p", {}, cache.loaded ? "This object does not exist (any more)." : "loading…"));
      return;
    }
    const state = readiness(document);
    const meta = document.metadata;
    fill(
      top,
      h(
        "dl",
        { class: "summary" },
        h("dt", {}, "Ready"), h("dd", { id: "ready" }, h("span", { class: `badge ${state.ready === "True" ? "ok" : state.ready === "False" ? "bad" : "unknown"}` }, state.ready)),
        h("dt", {}, "Synced"), h("dd", { id: "synced" }, state.synced),
        h("dt", {}, "Reason"), h("dd", { id: "reason" }, state.reason || "—"),
        h("dt", {}, "Namespace"), h("dd", {}, meta.namespace || "—"),
        h("dt", {}, "Paused"), h("dd", { id: "paused" }, paused(document) ? "yes" : "no"),
        h("dt", {}, "Created"), h("dd", {}, meta.creationTimestamp || ""),
        h("dt", {}, "Revision"), h("dd", {}, meta.resourceVersion),
      ),
      actionBar(kind, document, allowed, report),
      h("h3", {}, "Conditions"),
      conditionsTable(document),
      h("details", { open: true }, h("summary", {}, "Spec"), h("pre", { id: "spec", tabindex: "0" }, pretty(document.spec))),
      h("details", {}, h("summary", {}, "Status"), h("pre", { id: "status", tabindex: "0" }, pretty(document.status))),
      h("details", {}, h("summary", {}, "Metadata"), h("pre", { id: "metadata", tabindex: "0" }, pretty({ ...meta, managedFields: undefined }))),
    );
    refill(side, relations(live, kind, document));
  };

  const loadHistory = async () => {
    try {
      const found = await call(`${resourcePath(kind, namespace, name)}/history?includeObject=Object`);
      const seen = `${found.metadata.resourceVersion}/${found.items.length}`;
      if (seen === historySeen) return; // nothing new: the timeline stays as it is (and the focus in it)
      historySeen = seen;
      fill(history, h("h3", { id: "timeline-title" }, "Timeline"), timeline(found.items, (revision) => {
        viewing = revision;
        fill(revisions, revisionsView(found.items, viewing));
        revisions.querySelector("#document-at")?.focus();
      }));
      fill(revisions, revisionsView(found.items, viewing));
    } catch (error) {
      fill(history, h("h3", { id: "timeline-title" }, "Timeline"), h("p", {}, `No history: ${error.message}`));
    }
  };

  const onChange = (event) => {
    if (event.detail !== kind) {
      if (document) refill(side, relations(live, kind, document));
      return;
    }
    document = cache.objects.get(key) || null;
    const version = document ? document.metadata.resourceVersion : "gone";
    if (version === lastVersion) return;
    lastVersion = version;
    drawState();
    clearTimeout(historyTimer);
    historyTimer = setTimeout(loadHistory, 150);
  };
  live.addEventListener("change", onChange);
  live.startAll();
  (async () => {
    try {
      const answer = await access(kind, namespace, name);
      allowed = answer.allowed || {};
    } catch {
      allowed = {};
    }
    if (!document) {
      try {
        document = await call(resourcePath(kind, namespace, name));
      } catch {
        document = null;
      }
    }
    lastVersion = document ? document.metadata.resourceVersion : null;
    drawState();
    loadHistory();
  })();
  drawState();
  return () => {
    live.removeEventListener("change", onChange);
    clearTimeout(historyTimer);
  };
}

