"""Errors a user can cause. Each carries a message fit to show as it is."""


class ServiceError(Exception):
    """A request that cannot be honoured; nothing was changed."""

    code = "invalid"
    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ImportRejected(ServiceError):
    """A study file failed validation; ``errors`` names each bad line or record."""

    code = "import_rejected"

    def __init__(self, errors: list[str]) -> None:
        shown = errors[:50]
        more = f"\n… and {len(errors) - 50} more" if len(errors) > 50 else ""
        super().__init__("The file was rejected, nothing was imported:\n" + "\n".join(shown) + more)
        self.errors = errors


class ImportTooLarge(ImportRejected):
    """A file above ``HUMEVAL_IMPORT_MAX_BYTES``, refused before it was read or parsed."""

    code = "import_too_large"
    status = 413

    def __init__(self, message: str) -> None:
        super().__init__([message])


class AssignmentNotFound(ServiceError):
    code = "assignment_not_found"
    status = 404


class AssignmentExpired(ServiceError):
    code = "assignment_expired"
    status = 409


class InvalidAnswer(ServiceError):
    code = "invalid_answer"


class WorkerBlocked(ServiceError):
    code = "worker_blocked"
    status = 403


class ConfigRefused(ServiceError):
    """A study edit that could not take effect; ``reasons`` says why. Nothing was saved."""

    code = "config_refused"
    status = 409

    def __init__(self, reasons: list[str]) -> None:
        super().__init__(" ".join(reasons))
        self.reasons = reasons


class OpenInAnotherBrowser(ServiceError):
    """The participation belongs to another browser that may still be working in it;
    ``available_at``: when this browser may take it over if nothing happens there."""

    code = "open_in_another_browser"
    status = 409

    def __init__(self, message: str, available_at) -> None:
        super().__init__(message)
        self.available_at = available_at


class NoJudgeBenchForm(ServiceError):
    """A study whose kind has no Judge-Bench form (``Kind.judgebench_form``); ``kind`` names
    it and ``kinds`` the kinds whose studies export as Judge-Bench."""

    code = "no_judgebench_form"
    status = 409

    def __init__(self, kind, kinds_with_form: list) -> None:
        nouns = " or ".join(k.noun or k.name for k in kinds_with_form)
        super().__init__(
            f"A {kind.noun or kind.name} study has no Judge-Bench form: Judge-Bench holds "
            f"{nouns} labels. Export this study as CSV, JSON Lines, JSON or a Hugging Face "
            "dataset."
        )
        self.kind = kind.name
        self.kinds = [k.name for k in kinds_with_form]
