// The overview: each kind's counts (Ready, not Ready, deleting, paused) kept current by the
// watch, and the store's health from /health (its head revision beside the newest revision
// the page has seen: the watch's lag).

import { call } from "./api.js";
import { paused, readiness } from "./cells.js";
import { fill, h } from "./dom.js";
import { kindId } from "./live.js";

export function counts(objects) {
  const result = { total: 0, ready: 0, notReady: 0, deleting: 0, paused: 0 };
  for (const document of objects) {
    result.total += 1;
    const state = readiness(document);
    if (state.deleting) result.deleting += 1;
    else if (state.ready === "True") result.ready += 1;
    else result.notReady += 1;
    if (paused(document)) result.paused += 1;
  }
  return result;
}

function countsTable(live) {
  const rows = live.kinds.map((kind) => {
    const cache = live.cache(kind);
    const c = counts(cache.objects.values());
    const id = kindId(kind);
    const cell = (key, value) => h("td", { "data-count": key, class: "num" }, value);
    return h(
      "tr",
      { "data-kind": kind.kind },
      h("th", { scope: "row" }, h("a", { href: `#/objects/${encodeURIComponent(id)}` }, kind.kind)),
      cell("total", c.total),
      cell("ready", c.ready),
      cell("notReady", c.notReady),
      cell("deleting", c.deleting),
      cell("paused", c.paused),
      h("td", {}, cache.state === "forbidden" ? "no access" : cache.loaded ? "" : "loading…"),
    );
  });
  return h(
    "table",
    { class: "counts", id: "counts" },
    h("caption", {}, "Objects by kind"),
    h(
      "thead",
      {},
      h("tr", {}, ...["Kind", "Total", "Ready", "Not ready", "Deleting", "Paused", ""].map((t, i) => h("th", { scope: "col", class: i && t ? "num" : undefined }, t))),
    ),
    h("tbody", {}, rows),
  );
}

function seenRevision(live) {
  let newest = 0;
  for (const cache of live.caches.values()) newest = Math.max(newest, Number(cache.resourceVersion || 0));
  return newest;
}

function healthList(health, live) {
  const items = [];
  const store = health.store || {};
  items.push(["Store", store.reachable ? "reachable" : `unreachable: ${store.problem}`]);
  if (store.revision !== undefined) {
    items.push(["Head revision", store.revision]);
    const lag = Math.max(0, Number(store.revision) - seenRevision(live));
    items.push(["Watch lag", `${lag} revision${lag === 1 ? "" : "s"} behind`]);
  }
  items.push(["Writes", store.writeRefusal ? `refused: ${store.writeRefusal}` : "accepted"]);
  if (health.sharding) {
    const runners = Object.entries(health.sharding.runners || {});
    items.push(["Shards", `${health.sharding.shards} held by ${runners.length} runner${runners.length === 1 ? "" : "s"}`]);
    for (const [runner, shards] of runners) items.push([`Runner ${runner}`, `shards ${shards.join(", ")}`]);
  }
  if (health.runtime) {
    const runtime = health.runtime;
    items.push(["Runner", runtime.healthy === false ? "unhealthy" : runtime.ready ? "ready" : "starting"]);
    for (const problem of runtime.problems || []) items.push(["Problem", problem]);
    const sharding = runtime.sharding;
    if (sharding) {
      const held = sharding.held.length ? sharding.held.join(", ") : "none";
      items.push(["Shards held", `${held} of ${sharding.shards} (runner ${sharding.runner}, ${sharding.runners} runners)`]);
    }
    for (const c of runtime.controllers || []) {
      const state = !c.running ? "restarting" : !c.watching ? "watch restarting" : c.synced ? "watching" : "syncing";
      const queue = `${c.depth} queued, ${c.processing} in progress, ${c.waiting} waiting`;
      const trouble = c.crashes || c.watch_failures ? `, ${c.crashes} crashes, ${c.watch_failures} watch failures` : "";
      items.push([`Controller ${c.name}`, `${state}; ${queue}${trouble}`]);
    }
  } else {
    items.push(["Runner", "none in this server (reconcile serve without --run)"]);
  }
  return h("dl", { class: "health", id: "health" }, items.map(([term, value]) => [h("dt", {}, term), h("dd", {}, value)]));
}

export function overview(main, live) {
  const countsBox = h("section", { "aria-labelledby": "counts-title" }, h("h3", { id: "counts-title" }, "Kinds"));
  const healthBox = h("section", { "aria-labelledby": "health-title" }, h("h3", { id: "health-title" }, "Health"));
  const countsHolder = h("div", { class: "scroll" });
  const healthHolder = h("div", {}, "loading…");
  countsBox.append(countsHolder);
  healthBox.append(healthHolder);
  fill(main, h("h2", { tabindex: "-1" }, "Overview"), h("div", { class: "panels" }, countsBox, healthBox));
  let health = null;
  const draw = () => {
    fill(countsHolder, countsTable(live));
    if (health) fill(healthHolder, healthList(health, live));
  };
  const refresh = async () => {
    try {
      health = await call("/health");
    } catch (error) {
      health = error.body && typeof error.body === "object" && error.body.store ? error.body : { store: { reachable: false, problem: error.message } };
    }
    draw();
  };
  live.startAll();
  live.addEventListener("change", draw);
  refresh();
  const timer = setInterval(refresh, 5000);
  draw();
  return () => {
    live.removeEventListener("change", draw);
    clearInterval(timer);
  };
}
