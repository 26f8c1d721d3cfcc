// Worker task page: time on task (visible time only), keyboard shortcuts, one submit.
(function () {
  "use strict";
  var form = document.getElementById("task-form");
  if (!form) return;
  var visibleMs = 0;
  var since = document.hidden ? null : performance.now();
  document.addEventListener("visibilitychange", function () {
    if (document.hidden && since !== null) { visibleMs += performance.now() - since; since = null; }
    else if (!document.hidden && since === null) { since = performance.now(); }
  });
  var submitted = false;
  form.addEventListener("submit", function (event) {
    if (submitted) { event.preventDefault(); return; }
    submitted = true;
    var total = visibleMs + (since === null ? 0 : performance.now() - since);
    document.getElementById("time_ms").value = String(Math.round(total));
    // Keep the chosen button's value: disable the buttons only after the form data is built.
    setTimeout(function () {
      form.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    }, 0);
  });
  function clickAnswer(value) {
    var button = form.querySelector('button[name="answer"][value="' + value + '"]');
    if (button) button.click();
  }
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    var target = event.target;
    if (target && (target.tagName === "TEXTAREA" || target.isContentEditable)) return;
    if (form.classList.contains("pairwise")) {
      if (event.key === "ArrowLeft") { clickAnswer("left"); return; }
      if (event.key === "ArrowRight") { clickAnswer("right"); return; }
      var button = form.querySelector('button[data-key="' + event.key + '"]');
      if (button) button.click();
      return;
    }
    if (/^[0-9]$/.test(event.key)) {
      var open = Array.prototype.find.call(
        form.querySelectorAll("fieldset.criterion"),
        function (fs) { return !fs.querySelector("input:checked"); }
      ) || form.querySelector("fieldset.criterion:last-of-type");
      if (!open) return;
      var radio = open.querySelector('input[value="' + event.key + '"]');
      if (radio) { radio.checked = true; radio.focus(); }
    } else if (event.key === "Enter" && !(target && target.tagName === "BUTTON")) {
      event.preventDefault();
      if (form.reportValidity()) form.requestSubmit();
    }
  });
})();
