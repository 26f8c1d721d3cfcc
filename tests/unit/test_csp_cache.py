"""The Content-Security-Policy header is built once per policy (the settings', a worker
page's, a framed worker page's) and rebuilt when a setting changes."""

from django.test import Client

from annotator import middleware


def test_the_policy_header_is_built_once_per_policy_and_again_after_a_setting_changes(
    make_study, settings, monkeypatch
):
    study = make_study()
    built = []

    def counting(**parts):
        built.append(parts)
        return real(**parts)

    real = middleware.build_policy
    monkeypatch.setattr(middleware, "build_policy", counting)
    middleware._BUILT.clear()
    client = Client()
    client.get(f"/w/{study.public_id}/", {"worker": "w1"})
    headers = [client.get(f"/w/{study.public_id}/task/")["Content-Security-Policy"] for _ in "abc"]
    assert len(set(headers)) == 1 and "frame-ancestors 'none'" in headers[0]
    assert len(built) == 2  # the policy and the (empty) report-only one, each once
    settings.HUMEVAL_MTURK_SUBMIT_HOSTS = ["https://submit.example.org"]
    header = client.get(f"/w/{study.public_id}/task/")["Content-Security-Policy"]
    assert "form-action 'self' https://submit.example.org " in header and len(built) == 4
