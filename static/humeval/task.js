// Worker task page (and the qualification test's): time on task (visible time only),
// keyboard shortcuts, one submit.
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
    var time = form.querySelector('input[name="time_ms"]');
    if (time) time.value = String(Math.round(total));
    // Keep the chosen button's value: disable the buttons only after the form data is built.
    setTimeout(function () {
      form.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    }, 0);
  });
  // A response taller than its box (desktop: 60 % of the screen) says that more follows,
  // until the worker has scrolled it to the end.
  form.querySelectorAll(".text.scroll").forEach(function (box) {
    var cue = null;
    function check() {
      var more = box.scrollHeight - box.scrollTop - box.clientHeight > 2;
      if (more && !cue) {
        cue = document.createElement("p");
        cue.className = "more-below";
        var gettext = window.gettext || String;
        cue.textContent = gettext("More below: scroll inside the response to read it all.");
        box.insertAdjacentElement("afterend", cue);
      }
      if (cue) cue.hidden = !more;
    }
    box.addEventListener("scroll", check, { passive: true });
    window.addEventListener("resize", check);
    check();
  });
  function clickAnswer(value) {
    var button = form.querySelector('button[name="answer"][value="' + value + '"]');
    if (button) button.click();
  }

  // Likert scales: a digit rates the scale that holds the focus (Tab / Shift+Tab or a click
  // moves it), else the first unanswered one, then the focus moves on to the next scale.
  var scales = Array.prototype.slice.call(form.querySelectorAll("fieldset.criterion"));
  function scaleOf(element) {
    return element && element.closest ? element.closest("fieldset.criterion") : null;
  }
  function focusScale(scale) {
    var radio = scale.querySelector("input:checked") || scale.querySelector("input");
    if (radio) radio.focus();
  }
  function rate(key, target) {
    var scale = scaleOf(target);
    if (!scale) {
      scale = scales.find(function (fs) { return !fs.querySelector("input:checked"); }) ||
        scales[scales.length - 1];
    }
    if (!scale) return;
    var radios = Array.prototype.slice.call(scale.querySelectorAll('input[type="radio"]'));
    var radio = radios.find(function (r) { return r.value === key; });
    // a scale of labels (no numbers): the digit counts its options from 1
    if (!radio && !radios.some(function (r) { return /^-?[0-9]+$/.test(r.value); })) {
      radio = radios[parseInt(key, 10) - 1];
    }
    if (!radio || radio.disabled) return;
    radio.checked = true;
    radio.dispatchEvent(new Event("change", { bubbles: true }));
    var next = scales[scales.indexOf(scale) + 1];
    if (next) focusScale(next); else radio.focus();
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
      if (!scales.length) return;
      event.preventDefault();
      rate(event.key, target);
    } else if (event.key === "Enter" && !(target && target.tagName === "BUTTON")) {
      event.preventDefault();
      if (form.reportValidity()) form.requestSubmit();
    }
  });
})();
