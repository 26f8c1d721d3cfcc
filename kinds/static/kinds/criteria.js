// Pairwise criteria (kinds/_criteria.html): number keys answer the current criterion (the one
// holding focus, else the first unanswered) and move focus on to the next unanswered one, then
// to the reason box or the submit button; Enter submits; the reason's character counter.
(function () {
  var gettext = window.gettext || String; // Django's JavaScript catalog (annotator:jsi18n)
  "use strict";
  var box = document.querySelector("[data-criteria]");
  if (!box) return;
  var form = box.closest("form");
  var rows = Array.prototype.slice.call(box.querySelectorAll("fieldset.pair-criterion"));
  var reason = box.querySelector("textarea[name=rationale]");
  var submit = box.querySelector("button[type=submit]");

  function answered(row) { return !!row.querySelector("input:checked"); }
  function current() {
    var active = document.activeElement;
    var holding = rows.find(function (row) { return row.contains(active); });
    return holding || rows.find(function (row) { return !answered(row); }) || null;
  }
  function mark() {
    var cur = current();
    rows.forEach(function (row) { row.classList.toggle("current", row === cur && rows.length > 1); });
  }
  function focusRow(row) {
    var input = row.querySelector("input:checked") || row.querySelector("input");
    if (input) input.focus();
  }
  function advance(from) {
    var start = rows.indexOf(from);
    var next = rows.slice(start + 1).concat(rows.slice(0, start)).find(function (row) { return !answered(row); });
    if (next) focusRow(next);
    else if (reason && !reason.value.trim()) reason.focus();
    else if (submit) submit.focus();
    mark();
  }

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    var target = event.target;
    if (target && (target.tagName === "TEXTAREA" || target.isContentEditable)) return;
    if (/^[1-9]$/.test(event.key)) {
      var row = current() || rows[rows.length - 1];
      var label = row && row.querySelector('label.choice[data-key="' + event.key + '"] input');
      if (!label || label.disabled) return;
      event.preventDefault();
      event.stopPropagation(); // task.js's own shortcuts are for the one-row answer buttons
      label.checked = true;
      label.dispatchEvent(new Event("change", { bubbles: true }));
      advance(row);
    } else if (event.key === "Enter" && !(target && target.tagName === "BUTTON")) {
      if (!submit || submit.disabled) return; // the preview's inert form
      event.preventDefault();
      event.stopPropagation();
      if (form.reportValidity()) form.requestSubmit(submit);
    }
  }, true);
  box.addEventListener("focusin", mark);
  box.addEventListener("change", mark);
  mark();

  if (reason) {
    var count = box.querySelector("[data-count]");
    var check = function () {
      count.textContent = String(reason.value.length);
      // "required" accepts spaces only; the server does not (it strips the text).
      reason.setCustomValidity(reason.required && !reason.value.trim() ? gettext("Please write a short reason.") : "");
    };
    reason.addEventListener("input", check);
    check();
  }
})();
