"""Readers of the files the platform takes in; pure (no Django), no eager heavy imports.

* :mod:`formats.vocab` -- the label words (A/B/tie) every reader shares;
* :mod:`formats.bundle` -- JSON Lines and CSV records, each with where it was read;
* :mod:`formats.labels` -- the platform's label exports (CSV, JSON Lines, JSON, API page);
* :mod:`formats.ratings` -- judge and metric rating files;
* :mod:`formats.judgebench` -- Judge-Bench JSON, streamed (ijson).

Each reader returns plain records or frames together with every error it found.
"""
