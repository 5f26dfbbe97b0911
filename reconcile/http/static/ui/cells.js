// A row's cells, as `reconcile get` and the API's Table print them (reconcile.model.cells):
// name, the kind's printer columns, Ready, Synced, Reason, Age. Computed here from the
// documents the watch brings, so a change shows without asking the server for its row.

export const PAUSED = "reconcile.dev/paused";

const STEP = /^(?:\.([A-Za-z_][A-Za-z0-9_-]*)|\[(-?\d+)\]|\[\?\(@\.([A-Za-z_][A-Za-z0-9_]*)\s*==\s*(["'])([^"']*)\4\)\])/;

/** The steps of a printer column's path (.spec.title, [0], [?(@.type=="Ready")]). */
export function parsePath(path) {
  let text = path.trim();
  if (text.startsWith("{") && text.endsWith("}")) text = text.slice(1, -1);
  const steps = [];
  while (text) {
    const found = STEP.exec(text);
    if (!found) return null;
    if (found[1] !== undefined) steps.push(["field", found[1]]);
    else if (found[2] !== undefined) steps.push(["index", Number(found[2])]);
    else steps.push(["match", found[3], found[5]]);
    text = text.slice(found[0].length);
  }
  return steps;
}

export function walk(document, steps) {
  let current = document;
  for (const step of steps || []) {
    if (step[0] === "field") {
      current = current && typeof current === "object" && !Array.isArray(current) ? current[step[1]] : undefined;
    } else if (step[0] === "index") {
      const index = step[1] < 0 && Array.isArray(current) ? current.length + step[1] : step[1];
      current = Array.isArray(current) ? current[index] : undefined;
    } else {
      const items = Array.isArray(current) ? current : [];
      current = items.find((item) => item && typeof item === "object" && String(item[step[1]]) === step[2]);
    }
    if (current === undefined || current === null) return null;
  }
  return current;
}

/** "42s", "5m", "3h", "12d". */
export function age(since, now = Date.now()) {
  if (!since) return "<unknown>";
  const at = Date.parse(since);
  if (Number.isNaN(at)) return "<unknown>";
  const seconds = Math.max(0, Math.floor((now - at) / 1000));
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) {
    if (seconds >= size * 2 || (unit === "m" && seconds >= size)) return `${Math.floor(seconds / size)}${unit}`;
  }
  return `${seconds}s`;
}

function text(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "boolean") return value ? "true" : "false";
  if (Array.isArray(value) && value.every((v) => ["string", "number"].includes(typeof v))) return value.join(",");
  if (typeof value === "object") return JSON.stringify(value);
  return String(value).split(/\r?\n/).map((line) => line.trim()).filter(Boolean).join(" ");
}

/** Ready, Synced and the reason worth reading (the first of Synced and Ready not True). */
export function readiness(document) {
  const meta = document.metadata || {};
  const status = document.status || {};
  const conditions = {};
  for (const condition of status.conditions || []) conditions[condition.type] = condition;
  const ready = conditions.Ready;
  const synced = conditions.Synced;
  let readyText = ready ? String(ready.status ?? "Unknown") : "Unknown";
  const current = (status.observedGeneration ?? 0) === meta.generation;
  if (ready && ready.status === "True" && !current) readyText = "Updating";
  let reason = "";
  for (const condition of [synced, ready]) {
    if (condition && condition.status !== "True") {
      reason = condition.reason || "";
      break;
    }
  }
  const deleting = Boolean(meta.deletionTimestamp);
  if (deleting) reason = "Deleting";
  return { ready: readyText, synced: synced ? String(synced.status) : "Unknown", reason, deleting };
}

export function paused(document) {
  return ((document.metadata || {}).annotations || {})[PAUSED] === "true";
}

/** The columns of a kind's table (those of priority 0, as `kubectl get` shows them). */
export function columnsOf(kind) {
  const printer = (kind.columns || []).filter((c) => !c.priority).map((c) => ({ ...c, steps: parsePath(c.jsonPath) }));
  return [
    { name: "Name", key: "name" },
    ...printer.map((c) => ({ name: c.name, key: `c:${c.name}`, column: c })),
    { name: "Ready", key: "ready" },
    { name: "Synced", key: "synced" },
    { name: "Reason", key: "reason" },
    { name: "Age", key: "age" },
  ];
}

/** One object's cells, by column key (the sort value of Age is the creation time). */
export function cellsOf(columns, document, now = Date.now()) {
  const meta = document.metadata || {};
  const state = readiness(document);
  const cells = {};
  for (const column of columns) {
    if (column.key === "name") cells.name = meta.name || "";
    else if (column.key === "ready") cells.ready = state.ready;
    else if (column.key === "synced") cells.synced = state.synced;
    else if (column.key === "reason") cells.reason = state.reason;
    else if (column.key === "age") cells.age = age(meta.creationTimestamp, now);
    else if (column.column) {
      const value = walk(document, column.column.steps);
      cells[column.key] = column.column.type === "date" && typeof value === "string" ? age(value, now) : text(value);
    }
  }
  return cells;
}

/** Whether labels match a label selector ("app=web,tier!=db,env in (a,b),!legacy,owner"). */
export function selectorMatcher(selector) {
  const requirements = [];
  const parts = (selector || "").match(/(?:[^,(]|\([^)]*\))+/g) || [];
  for (const raw of parts) {
    const part = raw.trim();
    if (!part) continue;
    let found;
    if ((found = /^(\S+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(part))) {
      const values = found[3].split(",").map((v) => v.trim());
      const key = found[1];
      const inside = found[2] === "in";
      requirements.push((labels) => (key in labels && values.includes(labels[key])) === inside);
    } else if ((found = /^([^!=\s]+)\s*(!=|==|=)\s*(\S*)$/.exec(part))) {
      const [, key, op, value] = found;
      requirements.push((labels) => (op === "!=" ? labels[key] !== value : labels[key] === value));
    } else if ((found = /^!\s*(\S+)$/.exec(part))) {
      const key = found[1];
      requirements.push((labels) => !(key in labels));
    } else if (/^\S+$/.test(part)) {
      requirements.push((labels) => part in labels);
    } else {
      return null;
    }
  }
  return (labels) => requirements.every((requirement) => requirement(labels || {}));
}
