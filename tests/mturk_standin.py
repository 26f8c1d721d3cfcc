"""A stand-in MTurk (a boto3 client's methods, in process): each call is checked against
botocore's own model of MTurk's API, UniqueRequestTokens are honoured as MTurk does, and a
HIT made with fewer than 10 assignments never reaches 10. Used where a Stubber's fixed
order of calls does not fit (the protocol decides when calls happen)."""

import boto3
from botocore.exceptions import ClientError
from botocore.validate import validate_parameters

HIT = "3HITAAAAAAAAAAAAAAAAAAAAAAAAAA"  # MTurk's ids: 30 capitals and digits


def boto_client():
    return boto3.client(
        "mturk",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",  # noqa: S106 - never sent: a stub answers
    )


class StandIn:
    """MTurk as far as a HIT goes: each call checked against botocore's model of MTurk's
    API, UniqueRequestTokens honoured (a repeat is refused as MTurk does), and MTurk's rule
    that a HIT made with fewer than 10 assignments never reaches 10."""

    def __init__(self):
        model = boto_client().meta
        self._model, self._api = model.service_model, model.method_to_api_mapping
        self.hits: dict[str, dict] = {}
        self.tokens: set[str] = set()
        self.calls: list[str] = []
        self.assignments: list[dict] = []
        self.bonuses: list[tuple[str, str]] = []

    def _check(self, method: str, params: dict) -> None:
        self.calls.append(method)
        validate_parameters(params, self._model.operation_model(self._api[method]).input_shape)
        token = params.get("UniqueRequestToken")
        if token:
            if token in self.tokens:
                raise ClientError(
                    {"Error": {"Code": "RequestError", "Message": "UniqueRequestToken used"}},
                    self._api[method],
                )
            self.tokens.add(token)

    def create_hit(self, **params):
        self._check("create_hit", params)
        hit = {**params, "HITId": HIT, "HITStatus": "Assignable", "Made": params["MaxAssignments"]}
        self.hits[HIT] = hit
        return {"HIT": {"HITId": HIT, "MaxAssignments": params["MaxAssignments"]}}

    def create_additional_assignments_for_hit(self, **params):
        self._check("create_additional_assignments_for_hit", params)
        hit = self.hits[params["HITId"]]
        total = hit["MaxAssignments"] + params["NumberOfAdditionalAssignments"]
        if hit["Made"] < 10 <= total:
            raise ClientError(
                {"Error": {"Code": "InvalidMaximumAssignmentsIncrease", "Message": "under 10"}},
                "CreateAdditionalAssignmentsForHIT",
            )
        hit["MaxAssignments"] = total
        return {}

    def update_expiration_for_hit(self, **params):
        self._check("update_expiration_for_hit", params)
        self.hits[params["HITId"]]["HITStatus"] = "Reviewable"
        return {}

    def list_assignments_for_hit(self, **params):
        self._check("list_assignments_for_hit", params)
        return {"Assignments": list(self.assignments), "NumResults": len(self.assignments)}

    def approve_assignment(self, **params):
        self._check("approve_assignment", params)
        self._set(params["AssignmentId"], "Approved")
        return {}

    def reject_assignment(self, **params):
        self._check("reject_assignment", params)
        self._set(params["AssignmentId"], "Rejected")
        return {}

    def send_bonus(self, **params):
        self._check("send_bonus", params)
        self.bonuses.append((params["WorkerId"], params["BonusAmount"]))
        return {}

    def _set(self, assignment: str, status: str) -> None:
        for row in self.assignments:
            if row["AssignmentId"] == assignment:
                row["AssignmentStatus"] = status
