"""Readers of the files the platform takes in; pure (no Django), no eager heavy imports.

* :mod:`formats.vocab` -- the label words (A/B/tie) every reader shares;
* :mod:`formats.bundle` -- JSON Lines and CSV records (the study bundles too), each with where;
* :mod:`formats.labels` -- the platform's label exports (JSON Lines, JSON, the API's page, CSV);
* :mod:`formats.ratings` -- judge and metric rating files;
* :mod:`formats.judgebench` -- Judge-Bench JSON, streamed (ijson);
* :mod:`formats.judgebench_export` -- a study's labels written as Judge-Bench JSON;
* :mod:`formats.hf` -- Hugging Face datasets in (rows to study records) and out.

Each reader returns plain records or frames together with every error it found.
"""
