"""MTurk with botocore's Stubber: the HIT's ExternalQuestion, assignments added with an
idempotency token (a retry adds none), approve / reject, a bonus paid once when retried,
and a qualification that keeps earlier workers out of a later HIT."""

from decimal import Decimal

import boto3
import pytest
from botocore.stub import Stubber

from annotator import services as annotator_services
from crowd import mturk
from crowd.client import CrowdError
from tests.conftest import pairwise_bundle


@pytest.fixture
def stubbed():
    client = boto3.client(
        "mturk",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",  # noqa: S106 - never sent: the Stubber answers
    )
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


@pytest.mark.django_db
def test_a_hit_is_created_with_the_external_question_and_excludes_a_wave(stubbed):
    client, stub = stubbed
    study = annotator_services.study_import(pairwise_bundle(), filename="p.jsonl")
    url = f"https://eval.example.org/w/{study.public_id}/mturk/"
    stub.add_response(
        "create_hit",
        {"HIT": {"HITId": "H1", "MaxAssignments": 4}},
        {
            "Title": study.name,
            "Description": study.description or study.name,
            "Reward": "1.50",
            "MaxAssignments": 4,
            "AssignmentDurationInSeconds": 600,
            "LifetimeInSeconds": 7 * 86400,
            "Question": mturk.EXTERNAL_QUESTION.format(url=url),
            "QualificationRequirements": [
                {"QualificationTypeId": "Q-wave1", "Comparator": "DoesNotExist"}
            ],
            "RequesterAnnotation": f"humeval {study.public_id}",
            "UniqueRequestToken": mturk.token("hit", study.public_id),
        },
    )
    hit = mturk.hit_create(
        client,
        study,
        "https://eval.example.org/",
        reward=Decimal("1.5"),
        assignments=4,
        minutes=5,
        exclude_qualification="Q-wave1",
    )
    assert hit["HITId"] == "H1"


def test_assignments_and_bonuses_are_not_repeated_on_retry(stubbed):
    client, stub = stubbed
    params = {
        "HITId": "H1",
        "NumberOfAdditionalAssignments": 3,
        "UniqueRequestToken": mturk.token("assignments", "H1", 7),
    }
    stub.add_response("create_additional_assignments_for_hit", {}, params)
    stub.add_client_error(
        "create_additional_assignments_for_hit",
        service_error_code="RequestError",
        service_message="The value of UniqueRequestToken has already been used",
        expected_params=params,
    )
    assert mturk.assignments_add(client, "H1", 3, total_after=7) == {}
    assert mturk.assignments_add(client, "H1", 3, total_after=7)["already"] is True

    bonus = {
        "WorkerId": "W1",
        "AssignmentId": "A1",
        "BonusAmount": "0.30",
        "Reason": "3 items",
        "UniqueRequestToken": mturk.token("bonus", "A1"),
    }
    stub.add_response("send_bonus", {}, bonus)
    stub.add_client_error(
        "send_bonus",
        service_error_code="RequestError",
        service_message="UniqueRequestToken already used: the bonus was paid",
        expected_params=bonus,
    )
    assert mturk.bonus(client, "W1", "A1", Decimal("0.3"), "3 items") == {}
    assert mturk.bonus(client, "W1", "A1", Decimal("0.3"), "3 items")["already"] is True


def test_reviews_and_the_wave_qualification(stubbed):
    client, stub = stubbed
    stub.add_response("approve_assignment", {}, {"AssignmentId": "A1"})
    stub.add_response(
        "reject_assignment", {}, {"AssignmentId": "A2", "RequesterFeedback": "failed checks"}
    )
    stub.add_client_error(
        "approve_assignment",
        service_error_code="RequestError",
        service_message="This assignment is not Submitted",
        expected_params={"AssignmentId": "A3"},
    )
    mturk.approve(client, "A1")
    mturk.reject(client, "A2", "failed checks")
    with pytest.raises(CrowdError, match="not Submitted"):
        mturk.approve(client, "A3")
    with pytest.raises(CrowdError):
        mturk.reject(client, "A4", "")  # MTurk needs a reason: nothing sent

    stub.add_response(
        "create_qualification_type",
        {"QualificationType": {"QualificationTypeId": "Q-wave1"}},
        {"Name": "humeval s", "Description": "Took part in s", "QualificationTypeStatus": "Active"},
    )
    stub.add_response(
        "associate_qualification_with_worker",
        {},
        {
            "QualificationTypeId": "Q-wave1",
            "WorkerId": "W1",
            "IntegerValue": 1,
            "SendNotification": False,
        },
    )

    class S:
        public_id, name = "s", "s"

    assert mturk.wave_qualification(client, S) == "Q-wave1"
    mturk.mark_worker(client, "Q-wave1", "W1")
