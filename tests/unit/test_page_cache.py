"""What the worker pages make once per process: their links (``{% cached_url %}``) and the
static files' URLs (``config.storage.StaticStorage``), each equal to what Django makes."""

from django.contrib.staticfiles.storage import StaticFilesStorage, staticfiles_storage
from django.template import Context, Template
from django.test import override_settings
from django.urls import reverse, set_script_prefix

from annotator.templatetags import humeval


def test_a_cached_link_is_the_reversed_one_under_each_script_prefix(make_study):
    study = make_study()
    page = Template("{% load humeval %}{% cached_url 'annotator:task' study.public_id %}")
    humeval._reverse.cache_clear()
    assert page.render(Context({"study": study})) == f"/w/{study.public_id}/task/"
    assert page.render(Context({"study": study})) == reverse(
        "annotator:task", args=[study.public_id]
    )
    assert humeval._reverse.cache_info().hits == 1
    try:
        set_script_prefix("/lab/")  # a deployment under a path (SCRIPT_NAME)
        assert page.render(Context({"study": study})) == f"/lab/w/{study.public_id}/task/"
    finally:
        set_script_prefix("/")
    assert page.render(Context({"study": study})) == f"/w/{study.public_id}/task/"


def test_a_static_url_is_made_once_and_again_when_the_setting_changes():
    assert staticfiles_storage.url("humeval/task.js") == StaticFilesStorage().url("humeval/task.js")
    assert "humeval/task.js" in staticfiles_storage._urls
    with override_settings(STATIC_URL="/assets/"):
        assert staticfiles_storage.url("humeval/task.js") == "/assets/humeval/task.js"
    assert staticfiles_storage.url("humeval/task.js") == "/static/humeval/task.js"
