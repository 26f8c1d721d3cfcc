"""Readers of the files the platform takes in; pure (no Django), no eager heavy imports.

* :mod:`formats.vocab` -- the label words (A/B/tie) every reader shares;
* :mod:`formats.stream` -- an imported file's size limit, encoding check and re-readable stream;
* :mod:`formats.specs` -- what a study file becomes (``StudySpec`` …), with its errors;
* :mod:`formats.conversation` -- an input or output given as a list of messages;
* :mod:`formats.bundle` -- JSON Lines and CSV records (the study bundles too), each with where;
* :mod:`formats.jsonl_study` -- a JSON Lines study bundle read as a study;
* :mod:`formats.labels` -- the platform's label exports (JSON Lines, JSON, the API's page, CSV);
* :mod:`formats.ratings` -- judge and metric rating files;
* :mod:`formats.judgebench` -- Judge-Bench JSON, streamed (ijson);
* :mod:`formats.judgebench_study` -- a Judge-Bench file read as a study;
* :mod:`formats.judgebench_export` -- a study's labels written as Judge-Bench JSON;
* :mod:`formats.hf` -- Hugging Face datasets in (rows to study records) and out.

Each reader returns plain records or frames together with every error it found.
"""
