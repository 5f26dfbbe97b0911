// Requests to the API the page is served by, with the user's credentials: a bearer token
// entered once and kept in sessionStorage (this tab only, gone when it closes), or none when
// the server asks for none. Every request carries X-Requested-With, which a cross-site form
// cannot send (the server refuses a browser's state-changing request without it).

export const ROOT = (document.querySelector('meta[name="reconcile-root"]')?.content || "").replace(/\/$/, "");
const TOKEN_KEY = "reconcile.token";
/** Tells the page a request needs a token ("token-needed") and that one was given ("token"). */
export const auth = new EventTarget();

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
  auth.dispatchEvent(new Event("token"));
}

/** Resolves once a token is given (after a 401). */
export function tokenGiven() {
  return new Promise((resolve) => auth.addEventListener("token", resolve, { once: true }));
}

export class ApiFailure extends Error {
  constructor(status, body) {
    const message = body && typeof body === "object" && body.message ? body.message : `HTTP ${status}`;
    super(message);
    this.status = status;
    this.body = body;
  }
}

export function headers(extra = {}) {
  const result = { Accept: "application/json", "X-Requested-With": "reconcile-ui", ...extra };
  const given = token();
  if (given) result.Authorization = `Bearer ${given}`;
  return result;
}

/** A request's raw response (a 401 asks the page for a token, then fails). */
export async function send(path, { method = "GET", body, contentType, signal } = {}) {
  const extra = contentType ? { "Content-Type": contentType } : {};
  const response = await fetch(ROOT + path, {
    method,
    headers: headers(extra),
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
    credentials: "same-origin",
    cache: "no-store",
  });
  if (response.status === 401) auth.dispatchEvent(new Event("token-needed"));
  return response;
}

/** A request's JSON answer; an ApiFailure with the Status's message when refused. */
export async function call(path, options = {}) {
  const response = await send(path, options);
  const type = response.headers.get("content-type") || "";
  const data = type.includes("json") ? await response.json() : await response.text();
  if (!response.ok) throw new ApiFailure(response.status, data);
  return data;
}

/** The path of a kind's resources: /apis/GROUP/VERSION[/namespaces/NS]/PLURAL[/NAME]. */
export function resourcePath(kind, namespace, name) {
  const base = `/apis/${kind.group}/${kind.version}`;
  const scoped = kind.namespaced && namespace ? `${base}/namespaces/${encodeURIComponent(namespace)}` : base;
  return `${scoped}/${kind.plural}` + (name ? `/${encodeURIComponent(name)}` : "");
}
