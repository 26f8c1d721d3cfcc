"""Project-level promises: deployment file, rendering of untrusted text, checks."""

import re
from pathlib import Path

import yaml
from django.core.management import call_command

from annotator import rendering
from annotator.rendering import render_untrusted
from tests.conftest import active_markup, settings_under

ROOT = Path(__file__).resolve().parents[2]


def test_docker_compose_runs_web_worker_postgres_and_redis():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"proxy", "web", "worker", "db", "redis"} <= set(services)
    assert services["proxy"]["image"].startswith("nginx")  # buffers slow clients
    assert "gunicorn" in services["web"]["command"]
    assert services["worker"]["command"].startswith("celery -A config worker")
    assert services["db"]["image"].startswith("postgres")
    assert services["redis"]["image"].startswith("redis")
    env = compose["x-app"]["environment"]
    assert env["DATABASE_URL"].startswith("postgres://")
    assert env["CELERY_BROKER_URL"].startswith("redis://")


def test_markdown_is_sanitised():
    html = render_untrusted(
        '# T\n\n<script>x()</script> <a href="javascript:y()" onclick="z()">l</a>\n\n'
        "[ok](https://example.org) [bad](javascript:alert(1))\n\n```python\nprint(1)\n```"
    )
    assert active_markup(html) == []
    assert '<a href="https://example.org" rel="noopener noreferrer nofollow">ok</a>' in html
    assert '<code class="language-python">print(1)\n</code>' in html
    assert "&lt;script&gt;" in html  # raw HTML is shown as text, not run


HOSTILE = '<img src=x onerror="a()"> *b* <script>c()</script> [d](javascript:e())\n'


def test_a_cached_render_is_the_render_and_stays_inert():
    rendering._render_markdown.cache_clear()
    first = render_untrusted(HOSTILE)
    again = render_untrusted(HOSTILE)
    assert again is first  # the second time from the per-process cache
    assert rendering._render_markdown.cache_info().hits == 1
    fresh = rendering._render_markdown.__wrapped__(HOSTILE)
    assert str(again) == str(fresh) and active_markup(again) == []
    assert "<em>b</em>" in again and "&lt;script&gt;" in again
    assert str(render_untrusted(HOSTILE, markdown=False)).startswith('<div class="plain">&lt;img')


def test_plain_text_is_escaped():
    assert str(render_untrusted("<b>x</b>\n", markdown=False)) == (
        '<div class="plain">&lt;b&gt;x&lt;/b&gt;\n</div>'
    )


def test_django_system_check_is_clean(capsys):
    call_command("check", "--fail-level", "WARNING")
    assert "no issues" in capsys.readouterr().out


def test_embedded_default_uses_sqlite_and_eager_celery(settings):
    from config.celery import app

    if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        assert settings.CELERY_TASK_ALWAYS_EAGER is True
        assert app.conf.task_always_eager is True


def _database_options(**env) -> dict:
    """The database options a process started with ``env`` (less any DATABASE_URL of this
    run) reads from the settings (run in this process: tests/conftest.py ``settings_under``)."""
    import os

    base = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    got = settings_under({**base, "DJANGO_SETTINGS_MODULE": "config.settings", **env})
    return got["DATABASES"]["default"].get("OPTIONS", {})


def test_postgresql_statements_are_bound_and_prepared_by_the_server_unless_turned_off(tmp_path):
    url = "postgres://u@db.invalid:5432/humeval"
    on = _database_options(DATABASE_URL=url, HUMEVAL_VAR_DIR=str(tmp_path))
    assert on == {"server_side_binding": True, "prepare_threshold": 5}
    off = _database_options(
        DATABASE_URL=url, HUMEVAL_PG_PREPARED="0", HUMEVAL_VAR_DIR=str(tmp_path)
    )
    assert "server_side_binding" not in off and "prepare_threshold" not in off


def test_the_remembered_answer_buttons_are_the_rendered_fragment():
    from django.template.loader import render_to_string

    from annotator.templatetags.humeval import _answer_buttons, answer_buttons
    from kinds.pairwise import RAW_ANSWERS, Choice

    _answer_buttons.cache_clear()
    every = [Choice(value, label) for value, label in RAW_ANSWERS.items()]
    left = Choice("left", RAW_ANSWERS["left"])
    for answers in (every[:2], every):
        for disabled in (False, True):
            expected = render_to_string(
                "annotator/_answers.html", {"answers": answers, "disabled": disabled}
            )
            assert answer_buttons(answers, disabled) == expected
            assert answer_buttons(answers, disabled) is answer_buttons(answers, disabled)
    assert "disabled" in answer_buttons([left], True)
    assert "disabled" not in answer_buttons([left], False)


def test_the_embedded_sqlite_file_keeps_a_write_ahead_log_and_syncs_every_commit(tmp_path):
    options = _database_options(HUMEVAL_VAR_DIR=str(tmp_path))
    assert options["transaction_mode"] == "IMMEDIATE"
    pragmas = [p.strip() for p in options["init_command"].split(";")]
    assert pragmas == ["PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL"]


def _project_modules() -> list[Path]:
    return sorted(
        f
        for pkg in ("annotator", "protocol", "analysis", "config", "ranking")
        for f in (ROOT / pkg).rglob("*.py")
    )


def test_no_module_uses_a_private_name_of_another_module():
    """``from m import _x``, ``import m._x`` and ``m._x`` / ``C._x`` on an imported name are
    refused; Django's documented ``Model._meta`` is the one exception, and the modules of a
    split module (a package inside an app, e.g. ``annotator/services/``) share its private
    names among themselves (``from .leasing import _x``)."""
    import ast

    found = []
    for path in _project_modules():
        tree = ast.parse(path.read_text(), filename=str(path))
        in_split = len(path.relative_to(ROOT).parts) > 2 and "migrations" not in path.parts
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom | ast.Import):
                sibling = in_split and isinstance(node, ast.ImportFrom) and node.level == 1
                for alias in node.names:
                    parts = alias.name.split(".")
                    private = any(p.startswith("_") and not p.startswith("__") for p in parts)
                    if private and not (sibling and node.module):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {alias.name}")
                    imported.add(alias.asname or parts[0])
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in imported
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.attr != "_meta"
            ):
                found.append(
                    f"{path.relative_to(ROOT)}:{node.lineno} uses {node.value.id}.{node.attr}"
                )
    assert found == []


#: The pure core (no Django) and what each of its modules may import from the project,
#: lowest first (docs/architecture.md, "Layering"); ``formats`` is the readers' package.
PURE_CORE_LAYERS = {
    "analysis.estimates": set(),
    "analysis.counts": {"formats.vocab"},
    "analysis.aggregation": {"analysis.counts"},
    "analysis.pairwise": {"analysis.aggregation", "analysis.estimates"},
    "analysis.perception": {"analysis.counts", "analysis.estimates", "analysis.aggregation"},
    "analysis.agreement": {"analysis.aggregation", "analysis.counts", "analysis.estimates"},
    "analysis.correlation": {"analysis.counts", "analysis.estimates"},
    "analysis.judges": {
        "analysis.aggregation",
        "analysis.agreement",
        "analysis.correlation",
        "analysis.counts",
        "analysis.estimates",
        "analysis.perception",
    },
    "analysis.properties": {"analysis.counts"},
    "analysis.criteria": {"analysis.counts", "analysis.properties"},
    "analysis.spans": {"analysis.estimates"},
    "analysis.sections": {
        "analysis.agreement",
        "analysis.prefill_report",
        "analysis.report",
        "analysis.spans",
    },
    "analysis.assisted": set(),
    "analysis.assisted_report": {
        "analysis.assisted",
        "analysis.properties",
        "formats.vocab",
        "ranking.bradley_terry",
    },
    "analysis.style": {"ranking.bradley_terry"},
    "analysis.style_report": {"analysis.style", "analysis.assisted_report"},
    "analysis.prefill": {"analysis.spans"},
    "analysis.prefill_report": {"analysis.prefill"},
    "analysis.loaders": {
        "analysis.counts",
        "analysis.criteria",
        "analysis.properties",
        "formats.judgebench",
        "formats.labels",
        "formats.ratings",
        "formats.vocab",
    },
    "analysis.report_base": {"analysis.estimates"},
    "analysis.tables": {"analysis.formatting"},
    "analysis.report_systems": {
        "analysis.aggregation",
        "analysis.counts",
        "analysis.pairwise",
        "analysis.report_base",
        "ranking.bradley_terry",
    },
    "analysis.report_judges": {
        "analysis.aggregation",
        "analysis.agreement",
        "analysis.counts",
        "analysis.judges",
        "analysis.perception",
        "analysis.properties",
        "analysis.report_base",
    },
    "analysis.report": {
        "analysis.aggregation",
        "analysis.counts",
        "analysis.estimates",
        "analysis.pairwise",
        "analysis.properties",
        "analysis.perception",
        "analysis.agreement",
        "analysis.judges",
        "analysis.assisted_report",
        "analysis.report_base",
        "analysis.report_judges",
        "analysis.report_systems",
        "analysis.style_report",
        "ranking.bradley_terry",
    },
    "analysis.loaders_judges": {
        "analysis.loaders",
        "analysis.properties",
        "formats.ratings",
        "formats.vocab",
    },
    "ranking.bradley_terry": set(),
    "protocol.settings": set(),
    "protocol.outcome": set(),
    "protocol.decision": set(),
    "protocol.bound": set(),
    "protocol.implied": set(),
    "protocol.predictive": {"protocol.decision", "protocol.implied"},
    "protocol.correlation": {"protocol.predictive"},
    "protocol.rounds": {
        "protocol.correlation",
        "protocol.decision",
        "protocol.implied",
        "protocol.predictive",
        "protocol.settings",
    },
    "formats.vocab": set(),
    "formats.stream": set(),
    "formats.specs": {"formats.stream"},
    "formats.bundle": {"formats.specs", "formats.stream"},
    "formats.judgebench_study": {
        "formats.bundle",
        "formats.judgebench",
        "formats.specs",
        "formats.stream",
        "formats.vocab",
    },
    "formats.ratings": {"formats.bundle"},
    "formats.labels": {"formats.bundle", "formats.judgebench"},
    "formats.judgebench": {"formats.bundle", "formats.vocab"},
    "protocol.replay.simulation": {
        "formats.judgebench",
        "protocol.decision",
        "protocol.predictive",
        "protocol.settings",
        "protocol.rounds",
    },
    "protocol.replay.ranking_sim": {
        "protocol.correlation",
        "protocol.decision",
        "protocol.replay.simulation",
        "protocol.rounds",
        "protocol.settings",
    },
    "protocol.replay.synthetic": set(),
}


#: What a task kind (``kinds/``) may import: the standard library, NumPy, pandas, SciPy, the
#: readers in ``formats`` and other kinds (docs/architecture.md, "Task kinds").
KINDS_MAY_IMPORT = {"numpy", "pandas", "scipy", "formats", "kinds"}
#: The project's own packages and Django: none of them below ``kinds``.
NOT_BELOW_KINDS = {"django", "rest_framework", "annotator", "protocol", "analysis", "config"}


def test_kinds_import_no_django_and_no_app():
    """Every module of ``kinds/`` is pure: the apps call it with plain data."""
    import ast
    import sys

    wrong = []
    modules = sorted((ROOT / "kinds").rglob("*.py"))
    assert {"__init__.py", "base.py", "pairwise.py", "likert.py"} <= {m.name for m in modules}
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                known = top in sys.stdlib_module_names or top in KINDS_MAY_IMPORT
                if top in NOT_BELOW_KINDS or not known:
                    wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert wrong == []


def test_the_pure_core_imports_no_django_and_only_the_modules_below_it():
    import ast

    wrong = []
    for module, allowed in PURE_CORE_LAYERS.items():
        package = module.split(".")[0]
        tree = ast.parse((ROOT / (module.replace(".", "/") + ".py")).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = f"{package}.{node.module or ''}".rstrip(".") if node.level else node.module
                bare = base in ("analysis", "protocol", "annotator", "ranking", "formats")
                names = [f"{base}.{a.name}" for a in node.names] if bare else [base]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top == "django" or (
                    top in ("analysis", "protocol", "annotator", "config", "ranking", "formats")
                    and name not in allowed
                ):
                    wrong.append(f"{module} imports {name}")
    assert wrong == []


#: An opening HTML or SVG tag as the report, dashboard and charts once wrote them in Python.
MARKUP_TAG = re.compile(
    r"<(div|span|table|tr|td|th|svg|rect|line|text|path|circle|g|p|a|h[1-6]|ul|li|style|"
    r"script|section|details|summary)[ >/]"
)


def test_no_html_or_svg_is_written_in_python():
    """Pages and charts are templates (autoescaped); the apps' Python builds data only."""
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for app in ("annotator", "protocol", "analysis", "charts", "ranking")
        for path in sorted((ROOT / app).rglob("*.py"))
        if "migrations" not in path.parts
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if MARKUP_TAG.search(line)
    ]
    assert found == []
    for name in ("mark_safe(", "format_html(", "html.escape(", "class _Safe"):
        used = [
            str(path.relative_to(ROOT))
            for app in ("protocol", "analysis", "charts")
            for path in sorted((ROOT / app).rglob("*.py"))
            if name in path.read_text(encoding="utf-8")
        ]
        assert used == [], name
