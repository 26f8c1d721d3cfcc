// Ranking task (kinds/templates/kinds/ranking.html): the worker orders the response cards
// best → worst by drag and drop (pointer events: mouse, touch, pen, on the ⠿ handle), by the
// ↑/↓ buttons, or by keyboard (a focused card: ↑/↓, Home/End; Alt+↑/↓ from inside its text).
// "Tie with the one above" joins a card to the card then above it (studies that allow ties);
// once another card comes between them (a move of either), the tie is undone.
// The hidden input "ranking" always holds the current order as JSON tiers of 0-based
// display positions, e.g. [[1], [0, 2]]; kinds/ranking.py validates it on the server.
(function () {
  // Worker-facing strings through Django's JavaScript catalog (annotator:jsi18n), English
  // when it is absent.
  var gettext = window.gettext || function (s) { return s; };
  var fmt = function (s, o) { return window.interpolate ? window.interpolate(s, o, true) : s.replace(/%\((\w+)\)s/g, function (_, k) { return o[k]; }); };
  "use strict";
  var widget = document.querySelector(".ranking-widget");
  if (!widget) return;
  var list = widget.querySelector(".rank-list");
  var field = widget.querySelector('input[name="ranking"]');
  var live = widget.querySelector(".rank-live");
  var note = widget.querySelector(".rank-note");
  var form = widget.closest("form");
  var preview = widget.hasAttribute("data-preview");
  var touched = false;
  var confirmed = false;

  function cards() { return Array.prototype.slice.call(list.children); }
  function tieBox(card) { return card.querySelector("input.rank-tie-box"); }

  // Whether a card is tied with the card now above it: its box is ticked and the card above
  // is still the one it was tied with.
  function isTied(card, i, all) {
    var box = tieBox(card);
    return Boolean(i > 0 && box && box.checked &&
      all[i - 1].getAttribute("data-display") === card.getAttribute("data-tied-to"));
  }

  function tiers() {
    var out = [];
    var all = cards();
    all.forEach(function (card, i) {
      var shown = parseInt(card.getAttribute("data-display"), 10);
      if (isTied(card, i, all)) out[out.length - 1].push(shown);
      else out.push([shown]);
    });
    return out;
  }

  // Place numbers (tied cards share the place of the card above), buttons at the ends
  // disabled, broken ties unticked (not while a drag passes by), the hidden answer rewritten.
  function refresh() {
    var all = cards();
    var place = 0;
    all.forEach(function (card, i) {
      var box = tieBox(card);
      var tied = isTied(card, i, all);
      if (box) {
        if (box.checked && !tied && !drag) box.checked = false;
        box.disabled = preview || i === 0;
      }
      if (!tied) place = i + 1;
      card.classList.toggle("tied", tied);
      card.querySelector(".rank-place").textContent = String(place);
      card.querySelector('[data-move="-1"]').disabled = preview || i === 0;
      card.querySelector('[data-move="1"]').disabled = preview || i === all.length - 1;
    });
    field.value = JSON.stringify(tiers());
    save();
  }

  // Reload: the order and the ties are kept in this tab's sessionStorage, per task (the
  // assignment's token), like the error-span marks.
  var tokenInput = form ? form.querySelector('input[name="token"]') : null;
  var draft = window.humevalDraft("humeval-rank", tokenInput && tokenInput.value);
  function save() {
    if (preview) return;
    var all = cards();
    draft.save({
      order: all.map(function (c) { return c.getAttribute("data-display"); }),
      tied: all.filter(function (c, i) { return isTied(c, i, all); })
        .map(function (c) { return c.getAttribute("data-display"); }),
      touched: touched
    });
  }
  function restore() {
    if (preview) return;
    var kept = draft.load();
    if (!kept || !Array.isArray(kept.order) || !Array.isArray(kept.tied)) return;
    var byDisplay = {};
    cards().forEach(function (c) { byDisplay[c.getAttribute("data-display")] = c; });
    var order = kept.order.map(String);
    if (order.length !== cards().length || !order.every(function (d) { return byDisplay[d]; }) ||
        new Set(order).size !== order.length) return;
    order.forEach(function (d) { list.appendChild(byDisplay[d]); });
    var all = cards();
    all.forEach(function (card, i) {
      var box = tieBox(card);
      if (!box) return;
      box.checked = i > 0 && kept.tied.map(String).indexOf(card.getAttribute("data-display")) >= 0;
      if (box.checked) card.setAttribute("data-tied-to", all[i - 1].getAttribute("data-display"));
    });
    touched = Boolean(kept.touched);
  }

  function announce(card) {
    var all = cards();
    live.textContent = fmt(gettext("%(label)s: place %(place)s of %(total)s."), {
      label: card.getAttribute("data-label"), place: all.indexOf(card) + 1, total: all.length
    });
  }

  function changed() {
    touched = true;
    note.hidden = true;
    refresh();
  }

  // Move a card by delta places; returns whether it moved.
  function move(card, delta) {
    var all = cards();
    var from = all.indexOf(card);
    var to = Math.max(0, Math.min(all.length - 1, from + delta));
    if (to === from) return false;
    list.insertBefore(card, to < from ? all[to] : all[to].nextSibling);
    changed();
    announce(card);
    card.scrollIntoView({ block: "nearest" });
    return true;
  }

  list.addEventListener("click", function (event) {
    var button = event.target.closest("button.rank-move");
    if (!button || preview) return;
    var card = button.closest(".rank-card");
    move(card, parseInt(button.getAttribute("data-move"), 10));
    // The button keeps focus unless it is now disabled (the card reached an end).
    (button.disabled ? card : button).focus();
  });

  list.addEventListener("change", function (event) {
    if (!event.target.classList.contains("rank-tie-box")) return;
    var card = event.target.closest(".rank-card");
    var above = card.previousElementSibling;
    card.setAttribute("data-tied-to", above ? above.getAttribute("data-display") : "");
    changed();
    live.textContent = fmt(event.target.checked ? gettext("%(label)s: tied with the one above.") : gettext("%(label)s: not tied."), {
      label: card.getAttribute("data-label")
    });
  });

  list.addEventListener("keydown", function (event) {
    if (preview || event.ctrlKey || event.metaKey) return;
    var card = event.target.closest(".rank-card");
    if (!card) return;
    var onCard = event.target === card;
    if (!onCard && !event.altKey) return; // inside the text the arrows scroll it
    var all = cards();
    var delta = 0;
    if (event.key === "ArrowUp") delta = -1;
    else if (event.key === "ArrowDown") delta = 1;
    else if (event.key === "Home") delta = -all.length;
    else if (event.key === "End") delta = all.length;
    if (!delta) return;
    event.preventDefault();
    event.stopPropagation();
    move(card, delta);
    card.focus();
  });

  // Drag and drop. While a card is dragged every card's text is collapsed (class
  // "rank-dragging"), so a move is a short distance; the card changes place as the pointer
  // crosses the middle of its neighbour, and the page scrolls near the window's edges.
  var drag = null;

  function middle(card) {
    var box = card.getBoundingClientRect();
    return box.top + box.height / 2;
  }

  function follow() {
    var all = cards();
    var i = all.indexOf(drag.card);
    var moved = false;
    while (i > 0 && drag.y < middle(all[i - 1])) {
      list.insertBefore(drag.card, all[i - 1]);
      all = cards(); i -= 1; moved = true;
    }
    while (i < all.length - 1 && drag.y > middle(all[i + 1])) {
      list.insertBefore(all[i + 1], drag.card);
      all = cards(); i += 1; moved = true;
    }
    if (moved) { changed(); announce(drag.card); }
  }

  function scrollStep() {
    if (!drag) return;
    var edge = 56;
    var step = drag.y < edge ? -14 : drag.y > window.innerHeight - edge ? 14 : 0;
    if (step) { window.scrollBy(0, step); follow(); }
    drag.frame = window.requestAnimationFrame(scrollStep);
  }

  list.addEventListener("pointerdown", function (event) {
    var grip = event.target.closest(".rank-grip");
    if (!grip || preview || drag || (event.pointerType === "mouse" && event.button !== 0)) return;
    event.preventDefault();
    var card = grip.closest(".rank-card");
    var before = card.getBoundingClientRect().top;
    list.classList.add("rank-dragging");
    card.classList.add("dragged");
    // Keep the grabbed card under the pointer although the cards just got shorter.
    window.scrollBy(0, card.getBoundingClientRect().top - before);
    grip.setPointerCapture(event.pointerId);
    drag = { card: card, grip: grip, id: event.pointerId, y: event.clientY, frame: 0 };
    drag.frame = window.requestAnimationFrame(scrollStep);
  });

  list.addEventListener("pointermove", function (event) {
    if (!drag || event.pointerId !== drag.id) return;
    event.preventDefault();
    drag.y = event.clientY;
    follow();
  });

  function drop(event) {
    if (!drag || event.pointerId !== drag.id) return;
    var card = drag.card;
    window.cancelAnimationFrame(drag.frame);
    if (drag.grip.hasPointerCapture(event.pointerId)) drag.grip.releasePointerCapture(event.pointerId);
    drag = null;
    refresh(); // now untick the ties the drop broke
    list.classList.remove("rank-dragging");
    card.classList.remove("dragged");
    card.focus({ preventScroll: true });
    card.scrollIntoView({ block: "nearest" });
  }
  list.addEventListener("pointerup", drop);
  list.addEventListener("pointercancel", drop);

  // An order nobody changed is most likely the random one shown: ask once before sending it.
  if (form && !preview) {
    form.addEventListener("submit", function (event) {
      if (touched || confirmed) return;
      confirmed = true;
      event.preventDefault();
      event.stopImmediatePropagation();
      note.textContent = gettext("You have not moved any response. If this order is your ranking, press Submit again.");
      note.hidden = false;
    });
  }

  restore();
  refresh();
})();
