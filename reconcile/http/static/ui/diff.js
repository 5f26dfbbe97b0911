// Differences between two documents: the leaf paths that changed, and a line diff of their
// pretty JSON (longest common subsequence; documents are small).

import { pretty } from "./dom.js";

const IGNORED = new Set(["metadata.resourceVersion", "metadata.managedFields"]);

/** [{path, old, new}] of the leaves that differ, sorted by path. */
export function changedPaths(old, new_, prefix = "") {
  const changes = [];
  const a = old && typeof old === "object" && !Array.isArray(old) ? old : {};
  const b = new_ && typeof new_ === "object" && !Array.isArray(new_) ? new_ : {};
  for (const name of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
    const path = prefix ? `${prefix}.${name}` : name;
    if (IGNORED.has(path)) continue;
    const x = a[name];
    const y = b[name];
    if (JSON.stringify(x) === JSON.stringify(y)) continue;
    const objects = [x, y].every((v) => v && typeof v === "object" && !Array.isArray(v));
    if (objects) changes.push(...changedPaths(x, y, path));
    else changes.push({ path, old: x, new: y });
  }
  return changes;
}

/** A document without what every write changes and nobody reads in a diff. */
export function withoutNoise(document) {
  if (!document || !document.metadata) return document;
  const { managedFields, resourceVersion, ...metadata } = document.metadata;
  return { ...document, metadata };
}

/** [[" " | "-" | "+", line]] turning a's pretty JSON into b's. */
export function lineDiff(a, b) {
  const x = pretty(withoutNoise(a)).split("\n");
  const y = pretty(withoutNoise(b)).split("\n");
  const n = x.length;
  const m = y.length;
  if (n * m > 4_000_000) return [...x.map((l) => ["-", l]), ...y.map((l) => ["+", l])];
  const table = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i -= 1) {
    for (let j = m - 1; j >= 0; j -= 1) {
      table[i][j] = x[i] === y[j] ? table[i + 1][j + 1] + 1 : Math.max(table[i + 1][j], table[i][j + 1]);
    }
  }
  const lines = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) {
      lines.push([" ", x[i]]);
      i += 1;
      j += 1;
    } else if (table[i + 1][j] >= table[i][j + 1]) {
      lines.push(["-", x[i]]);
      i += 1;
    } else {
      lines.push(["+", y[j]]);
      j += 1;
    }
  }
  while (i < n) lines.push(["-", x[i++]]);
  while (j < m) lines.push(["+", y[j++]]);
  return lines;
}
