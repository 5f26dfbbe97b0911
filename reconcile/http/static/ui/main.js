// The web view's entry: the kinds, the live caches, the header's "live" indicator and the
// routes (#/ the overview, #/objects[/GROUP/PLURAL] the objects, #/object/... one object).

import { ROOT, auth, call, setToken, token, tokenGiven } from "./api.js";
import { fill, h } from "./dom.js";
import { Live } from "./live.js";
import { objectPage } from "./object.js";
import { objects } from "./objects.js";
import { overview } from "./overview.js";

const main = document.getElementById("main");
const indicator = document.getElementById("live");
let live = null;
let leave = () => {};
let routed = false;

function showIndicator() {
  if (!live) return;
  const summary = live.summary();
  indicator.dataset.state = summary.state;
  if (summary.state === "lost") {
    const seconds = Math.max(0, Math.round((summary.retryAt - Date.now()) / 1000));
    const lostFor = Math.round((Date.now() - summary.since) / 1000);
    indicator.textContent = `Stream lost ${lostFor}s ago — retrying${seconds ? ` in ${seconds}s` : ""}`;
    indicator.title = summary.problem || "";
  } else if (summary.state === "live") {
    indicator.textContent = summary.recoveries ? "Live (reconnected)" : "Live";
    indicator.title = "Changes arrive as they happen";
  } else if (summary.state === "unsupported") {
    indicator.textContent = "Not live: this server does not stream changes";
  } else {
    indicator.textContent = "Connecting…";
  }
}

function route() {
  leave();
  const path = (location.hash || "#/").slice(1).split("/").filter(Boolean).map(decodeURIComponent);
  const query = new URLSearchParams(location.hash.split("?")[1] || "");
  const params = Object.fromEntries(query);
  let title = "Overview";
  if (path[0] === "objects") {
    leave = objects(main, live, { ...params, kind: path.length > 1 ? path.slice(1).join("/") : undefined });
    title = "Objects";
  } else if (path[0] === "object" && path.length >= 6) {
    const [, group, version, plural, namespace, name] = path;
    leave = objectPage(main, live, { group, version, plural, namespace, name });
    title = `${name}`;
  } else {
    leave = overview(main, live);
  }
  document.title = `${title} · reconcile`;
  for (const link of document.querySelectorAll("nav a")) {
    const current = link.getAttribute("href") === "#/" ? path.length === 0 : path[0] === "objects" && link.getAttribute("href") === "#/objects";
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  // A new view starts at its top, its heading focused (a screen reader announces it); not
  // on the first load, where the focus stays at the start of the page.
  window.scrollTo(0, 0);
  const heading = main.querySelector("h2");
  if (heading && routed) {
    heading.focus();
    // The link followed was removed with the old view: the browser may move the focus to
    // the body after this task; the heading takes it back.
    requestAnimationFrame(() => {
      if (heading.isConnected && document.activeElement === document.body) heading.focus();
    });
  }
  routed = true;
}

function tokenDialog() {
  const dialog = document.getElementById("token-dialog");
  const input = dialog.querySelector("input");
  input.value = "";
  dialog.showModal();
  input.focus();
}

async function who() {
  try {
    const answer = await call("/ui/api/access");
    document.getElementById("who").textContent = answer.user.name;
  } catch {
    document.getElementById("who").textContent = "";
  }
}

async function start() {
  const dialog = document.getElementById("token-dialog");
  dialog.addEventListener("close", () => {
    if (dialog.returnValue === "save") {
      setToken(dialog.querySelector("input").value.trim());
      document.getElementById("signout").hidden = false;
      if (live) who();
    }
  });
  document.getElementById("signin").addEventListener("click", tokenDialog);
  document.getElementById("signout").addEventListener("click", () => {
    setToken(null);
    location.reload();
  });
  auth.addEventListener("token-needed", () => {
    if (!dialog.open) tokenDialog();
  });
  let kinds;
  for (;;) {
    try {
      kinds = (await call("/ui/api/kinds")).kinds;
      performance.mark("reconcile:kinds");
      break;
    } catch (error) {
      if (error.status === 401) {
        fill(main, h("h2", { tabindex: "-1" }, "Sign in"), h("p", {}, "The server asks who you are: give your bearer token."));
        await tokenGiven();
        continue;
      }
      fill(main, h("h2", {}, "Cannot reach the server"), h("p", {}, error.message));
      return;
    }
  }
  live = new Live(kinds);
  live.addEventListener("state", showIndicator);
  setInterval(showIndicator, 1000);
  who();
  window.addEventListener("hashchange", route);
  route();
  showIndicator();
}

document.getElementById("signout").hidden = !token();
document.body.dataset.root = ROOT;
start();
