// Study workspace (admin): copy an entry link to the clipboard. No inline handlers (CSP).
(function () {
  "use strict";
  function copied(button, text) {
    var label = button.textContent;
    button.textContent = text;
    setTimeout(function () { button.textContent = label; }, 1500);
  }
  function fallback(source) {
    if (typeof source.select === "function") { source.select(); try { return document.execCommand("copy"); } catch (e) { return false; } }
    var range = document.createRange();
    range.selectNodeContents(source);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    try { return document.execCommand("copy"); } catch (e) { return false; }
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest("button.copy-button");
    if (!button) return;
    event.preventDefault();
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) return;
    // a text field copies its value, any other element its text, exactly as shown
    var text = typeof source.value === "string" ? source.value : source.textContent;
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(
        function () { copied(button, "Copied"); },
        function () { copied(button, fallback(source) ? "Copied" : "Select and copy"); }
      );
    } else {
      copied(button, fallback(source) ? "Copied" : "Select and copy");
    }
  });
})();
