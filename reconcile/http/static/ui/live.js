// Each kind's objects, kept current by the API's watch: a list (in pages), then
// `?watch=true` read as a stream of newline-delimited JSON events, resumed from the last
// resourceVersion seen when the stream breaks (with backoff), relisted on 410 Gone. Only the
// current objects are held (no event is kept), so memory stays bounded however many
// changes stream in. Listeners hear of changes at most ten times a second.

import { ApiFailure, call, resourcePath, send, tokenGiven } from "./api.js";

const FIRST_PAGE = 100;
const PAGE = 1000;
const NOTIFY_EVERY_MS = 100;
const BACKOFF_FIRST_MS = 500;
const BACKOFF_MAX_MS = 8000;
const WATCH_SECONDS = 290;

class Gone extends Error {}
class WatchUnsupported extends Error {}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export function keyOf(document) {
  const meta = document.metadata || {};
  return `${meta.namespace || ""}/${meta.name}`;
}

/** One kind's objects, listed and watched. Events: "change" (objects), "state" (the stream). */
export class KindCache extends EventTarget {
  constructor(kind) {
    super();
    this.kind = kind;
    this.objects = new Map();
    this.resourceVersion = null;
    this.state = "connecting";
    this.problem = "";
    this.loaded = false;
    this.lostSince = null;
    this.recoveries = 0;
    this.changes = 0;
    this.pending = false;
    this.controller = null;
  }

  start() {
    if (!this.running) {
      this.running = true;
      this.run();
    }
    return this;
  }

  setState(state, problem = "") {
    if (state === "lost" && this.state !== "lost") this.lostSince = Date.now();
    if (state === "live" && this.state === "lost") this.recoveries += 1;
    if (state === "live") this.lostSince = null;
    this.state = state;
    this.problem = problem;
    this.dispatchEvent(new Event("state"));
  }

  notify(now = false) {
    this.changes += 1;
    if (now) {
      this.dispatchEvent(new Event("change"));
      return;
    }
    if (this.pending) return;
    this.pending = true;
    setTimeout(() => {
      this.pending = false;
      this.dispatchEvent(new Event("change"));
    }, NOTIFY_EVERY_MS);
  }

  async run() {
    let backoff = BACKOFF_FIRST_MS;
    while (this.running) {
      const started = Date.now();
      try {
        if (this.resourceVersion === null) await this.relist();
        await this.watch();
        backoff = BACKOFF_FIRST_MS;
        if (Date.now() - started < 1000) await sleep(200); // a stream the server ends at once
      } catch (error) {
        if (error instanceof Gone) {
          this.resourceVersion = null; // compacted past us: list again
          continue;
        }
        if (error instanceof WatchUnsupported) {
          this.setState("unsupported", "this server does not stream changes");
          return;
        }
        if (error instanceof ApiFailure && error.status === 403) {
          this.setState("forbidden", error.message); // this user may not list or watch the kind
          return;
        }
        if (error instanceof ApiFailure && error.status === 401) {
          this.setState("lost", "waiting for a token");
          await tokenGiven();
          continue;
        }
        this.setState("lost", error.message || String(error));
        const wait = backoff * (0.75 + Math.random() / 2);
        this.retryAt = Date.now() + wait;
        this.dispatchEvent(new Event("state"));
        await sleep(wait);
        backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
      }
    }
  }

  async relist() {
    const path = resourcePath(this.kind);
    // The first load fills the map shown, page by page (the first screen from the first,
    // small page); a relist builds a new one and swaps it in whole.
    const first = !this.loaded;
    const fresh = first ? this.objects : new Map();
    let token = null;
    let version = null;
    let limit = FIRST_PAGE;
    do {
      const query = `?limit=${limit}` + (token ? `&continue=${encodeURIComponent(token)}` : "");
      const page = await call(path + query);
      version ??= page.metadata.resourceVersion;
      for (const item of page.items) fresh.set(keyOf(item), item);
      token = page.metadata.continue || null;
      if (first && limit === FIRST_PAGE) performance.mark("reconcile:first-page");
      if (first) this.notify(limit === FIRST_PAGE);
      limit = PAGE;
    } while (token);
    this.objects = fresh;
    this.resourceVersion = version;
    this.loaded = true;
    this.notify();
  }

  async watch() {
    const query = `?watch=true&allowWatchBookmarks=true&timeoutSeconds=${WATCH_SECONDS}` +
      `&resourceVersion=${encodeURIComponent(this.resourceVersion)}`;
    this.controller = new AbortController();
    const response = await send(resourcePath(this.kind) + query, { signal: this.controller.signal });
    if (!response.ok) {
      const body = await response.json().catch(() => null);
      if (response.status === 410) throw new Gone();
      throw new ApiFailure(response.status, body);
    }
    this.setState("live");
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let newline;
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, newline).trim();
        buffer = buffer.slice(newline + 1);
        if (line) this.apply(JSON.parse(line));
      }
    }
    if (buffer.trim()) {
      const last = JSON.parse(buffer);
      if (!last.type) throw new WatchUnsupported(); // a list: the server ignored watch=true
      this.apply(last);
    }
  }

  apply(event) {
    const object = event.object || {};
    if (event.type === "ERROR") {
      if (object.code === 410) throw new Gone();
      throw new Error(object.message || "the watch failed");
    }
    const version = object.metadata && object.metadata.resourceVersion;
    if (version) this.resourceVersion = version;
    if (event.type === "ADDED" || event.type === "MODIFIED") this.objects.set(keyOf(object), object);
    else if (event.type === "DELETED") this.objects.delete(keyOf(object));
    else return; // BOOKMARK: only the version moves
    this.notify();
  }
}

/** Every kind's cache, started on first use, and the stream's state across them. */
export class Live extends EventTarget {
  constructor(kinds) {
    super();
    this.kinds = kinds;
    this.caches = new Map();
    for (const kind of kinds) {
      const cache = new KindCache(kind);
      cache.addEventListener("state", () => this.dispatchEvent(new Event("state")));
      cache.addEventListener("change", () => this.dispatchEvent(new CustomEvent("change", { detail: kind })));
      this.caches.set(kindId(kind), cache);
    }
  }

  cache(kind) {
    return this.caches.get(kindId(kind)).start();
  }

  startAll() {
    for (const kind of this.kinds) this.cache(kind);
  }

  /** "live", "lost", "connecting" or "unsupported", over the caches started. */
  summary() {
    const started = [...this.caches.values()].filter((c) => c.running && c.state !== "forbidden");
    const lost = started.filter((c) => c.state === "lost");
    if (lost.length) {
      const since = Math.min(...lost.map((c) => c.lostSince || Date.now()));
      return { state: "lost", problem: lost[0].problem, since, retryAt: Math.max(...lost.map((c) => c.retryAt || 0)) };
    }
    if (started.some((c) => c.state === "connecting")) return { state: "connecting" };
    if (started.length && started.every((c) => c.state === "unsupported")) return { state: "unsupported" };
    return { state: "live", recoveries: started.reduce((sum, c) => sum + c.recoveries, 0) };
  }
}

export function kindId(kind) {
  return `${kind.group}/${kind.plural}`;
}
