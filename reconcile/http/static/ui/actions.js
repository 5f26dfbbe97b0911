// Actions on an object, as resource changes through the API (never RPCs): pause and resume
// (the reconcile.dev/paused annotation, by a merge patch) and delete with a propagation
// policy. Each asks for confirmation; the server records it under the user's name. Shown
// only when the server says the user may do them (/ui/api/access, the API's authorizer).

import { call, resourcePath } from "./api.js";
import { PAUSED, paused } from "./cells.js";
import { fill, h } from "./dom.js";

/** Ask the user to confirm in the page's dialog; resolves true or false. */
export function confirmAction(title, body, confirmLabel) {
  const dialog = document.getElementById("confirm");
  fill(dialog.querySelector(".title"), title);
  fill(dialog.querySelector(".body"), body);
  dialog.querySelector("button[value=confirm]").textContent = confirmLabel;
  dialog.returnValue = "";
  dialog.showModal();
  dialog.querySelector("button[value=cancel]").focus();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "confirm"), { once: true });
  });
}

export async function access(kind, namespace, name) {
  const query = new URLSearchParams({ group: kind.group, plural: kind.plural, name });
  if (namespace) query.set("namespace", namespace);
  return call(`/ui/api/access?${query}`);
}

export function actionBar(kind, document, allowed, report) {
  const meta = document.metadata;
  const path = resourcePath(kind, meta.namespace, meta.name);
  const buttons = [];
  if (allowed.patch) {
    const isPaused = paused(document);
    buttons.push(
      h(
        "button",
        {
          type: "button",
          id: isPaused ? "resume" : "pause",
          onclick: async () => {
            const verb = isPaused ? "Resume" : "Pause";
            const what = isPaused ? "The controller reconciles it again." : "The controller leaves it alone until it is resumed.";
            if (!(await confirmAction(`${verb} ${kind.kind} ${meta.name}?`, what, verb))) return;
            const patch = { metadata: { annotations: { [PAUSED]: isPaused ? null : "true" } } };
            await report(call(path, { method: "PATCH", body: patch, contentType: "application/merge-patch+json" }), `${verb}d`);
          },
        },
        isPaused ? "Resume" : "Pause",
      ),
    );
  }
  if (allowed.delete && !meta.deletionTimestamp) {
    const policy = h(
      "select",
      { id: "propagation", name: "propagation" },
      ["Background", "Foreground", "Orphan"].map((p) => h("option", { value: p }, p)),
    );
    buttons.push(
      h("label", { for: "propagation" }, "Propagation", policy),
      h(
        "button",
        {
          type: "button",
          id: "delete",
          class: "danger",
          onclick: async () => {
            const text = `Its children: ${policy.value === "Orphan" ? "kept (orphaned)" : `deleted (${policy.value.toLowerCase()})`}.`;
            if (!(await confirmAction(`Delete ${kind.kind} ${meta.name}?`, text, "Delete"))) return;
            const body = { kind: "DeleteOptions", apiVersion: "v1", propagationPolicy: policy.value };
            await report(call(path, { method: "DELETE", body, contentType: "application/json" }), "Deletion requested");
          },
        },
        "Delete…",
      ),
    );
  }
  return buttons.length ? h("div", { class: "actions", role: "group", "aria-label": "Actions" }, buttons) : null;
}
