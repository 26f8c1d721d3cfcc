"""Studies, what workers see (items, assignments) and what they give (annotations)."""

import hashlib
import hmac
import secrets
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.utils import timezone
from django.utils.functional import cached_property

import kinds
from formats import conversation

from .choices import AnnotationSource, AssignmentState, Preference

#: Study fields whose change makes earlier labels answer a different question; editing
#: one of them bumps ``Study.config_version``, which every exported label carries.
CONFIG_FIELDS = (
    "kind",
    "question",
    "instructions",
    "options",
    "render_markdown",
    "show_reference",
    "redundancy",
    "batch_size",
    "budget",
    "gamma",
)


class Study(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=kinds.choices)
    description = models.TextField(blank=True, help_text="For researchers; workers never see it.")
    question = models.CharField(
        max_length=300, blank=True, help_text="Shown above every item, e.g. 'Which is better?'"
    )
    instructions = models.TextField(blank=True, help_text="Markdown shown to workers.")
    options = models.JSONField(
        default=dict,
        blank=True,
        help_text="Every setting of the kind (answer switches such as allow_tie, criteria, "
        "strength …), as the study line gave them and the kind checked them "
        "(docs/import-formats.md).",
    )
    render_markdown = models.BooleanField(
        default=True, help_text="Render outputs as sanitised Markdown (else escaped plain text)."
    )
    show_reference = models.BooleanField(
        default=False, help_text="Show the input's human reference response to workers."
    )
    redundancy = models.PositiveSmallIntegerField(
        default=3,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Annotations collected per item.",
    )
    batch_size = models.PositiveIntegerField(
        default=10, validators=[MinValueValidator(1)], help_text="Inputs per pair per round (N)."
    )
    budget = models.PositiveIntegerField(
        null=True, blank=True, help_text="Most annotations the study may collect (B)."
    )
    gamma = models.FloatField(
        default=0.05,
        validators=[MinValueValidator(1e-6), MaxValueValidator(0.5)],
        help_text="Significance level γ of the decision function.",
    )
    lease_seconds = models.PositiveIntegerField(
        default=1800,
        validators=[MinValueValidator(30)],
        help_text="How long a worker holds an item.",
    )
    items_per_worker = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Items a worker does for the completion code, and the most they may do "
        "(empty: no set number, any number of items earns the code).",
    )
    is_active = models.BooleanField(default=True, help_text="Accepting workers.")
    collection = models.CharField(
        max_length=10,
        choices=[("all", "All items at once"), ("adaptive", "Adaptive rounds (protocol)")],
        default="all",
        help_text="'adaptive': the protocol releases items in rounds and retires decided pairs.",
    )
    # --- crowd workflow -------------------------------------------------------------------
    open_links = models.BooleanField(
        default=False,
        help_text="Accept open links, /w/STUDY_ID/?worker=WORKER_ID (demos; the study's own "
        "link is shown above when this is on). Off: only signed invites and Prolific or MTurk "
        "entry.",
    )
    qualification = models.ForeignKey(
        "QualificationTest",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="studies",
        help_text="Workers must pass this test before any real work.",
    )
    completion_code = models.CharField(max_length=64, blank=True, help_text="Prolific: finished.")
    fail_code = models.CharField(
        max_length=64, blank=True, help_text="Prolific: failed the test or blocked."
    )
    no_work_code = models.CharField(
        max_length=64, blank=True, help_text="Prolific: arrived when no work was left."
    )
    gold_rate_start = models.FloatField(
        default=0.2,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="Chance that a worker's next item is a gold check, at their first item.",
    )
    gold_rate_end = models.FloatField(
        default=0.05,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="The chance it falls towards as the worker completes more items.",
    )
    gold_rate_halflife = models.PositiveIntegerField(
        default=20,
        validators=[MinValueValidator(1)],
        help_text="Items after which the gold rate is half-way from start to end.",
    )
    max_strikes = models.PositiveSmallIntegerField(
        default=3,
        validators=[MinValueValidator(1)],
        help_text="Missed gold checks after which a worker is blocked and their labels flagged.",
    )
    # --- cost estimate (annotator.estimate) --------------------------------------------------
    pay_per_hour = models.DecimalField(
        max_digits=8,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="What a worker is paid per hour, for the cost estimate.",
    )
    pay_currency = models.CharField(
        max_length=3,
        blank=True,
        default="GBP",
        help_text="Currency of the pay rate, e.g. GBP or USD.",
    )
    expected_seconds_per_item = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Your guess of the time per item, used until measured times arrive.",
    )
    platform_fee_percent = models.DecimalField(
        max_digits=5,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(0), MaxValueValidator(100)],
        help_text="The recruiting platform's service fee as a percentage of the workers' pay "
        "(see your platform's pricing page), added to the cost estimate. Empty: no fee line.",
    )
    config_version = models.PositiveIntegerField(default=1, editable=False)
    # --- languages and guideline revisions (annotator/languages.py, annotator/revisions.py)
    language = models.CharField(
        max_length=16,
        default="en",
        help_text="The worker pages' language, a BCP 47 code such as 'ar' (docs/languages.md).",
    )
    languages = models.JSONField(
        default=list,
        blank=True,
        help_text='Other languages a worker may switch the pages to, e.g. ["en", "fr"].',
    )
    instructions_by_language = models.JSONField(
        default=dict,
        blank=True,
        help_text='Optional instructions per worker language, Markdown, e.g. {"de": "…"}; '
        "a language without its own version shows the instructions above.",
    )
    guideline_revision = models.PositiveIntegerField(
        default=1,
        editable=False,
        help_text="The revision of the instructions, criteria and qualification in force; "
        "every label carries it.",
    )
    source = models.CharField(max_length=300, blank=True, help_text="Imported file or dataset.")
    researchers = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="studies",
        help_text="Users who may read and export this study through the API.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "studies"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    def gold_rate(self, completed: int) -> float:
        """Chance that the next item is gold after ``completed`` items: an exponential decay
        from ``gold_rate_start`` towards ``gold_rate_end`` with the given half-life."""
        decay = 0.5 ** (completed / self.gold_rate_halflife)
        return self.gold_rate_end + (self.gold_rate_start - self.gold_rate_end) * decay

    @property
    def kind_impl(self) -> kinds.Kind:
        """The study's task kind (:mod:`kinds`)."""
        return kinds.get(self.kind)

    def clean(self) -> None:
        test = self.qualification
        other_kind = QualificationTest.objects.filter(pk=self.qualification_id).exclude(
            kind=self.kind
        )
        if test is not None and other_kind.exists():
            raise ValidationError(
                {
                    "qualification": f"'{test}' is a {test.kind} test; a {self.kind} study "
                    "screens its workers with a test of its own kind."
                }
            )

    def clean_fields(self, exclude=None) -> None:
        super().clean_fields(exclude)
        from .languages import LanguageError, language_list

        try:
            language_list(self.language, self.languages)
        except LanguageError as exc:
            raise ValidationError({"language": str(exc)}) from exc

    def kind_options(self) -> dict:
        """What the kind reads as ``opts``: ``options`` and the study's ``collection``."""
        return {**(self.options or {}), "collection": self.collection}

    def bound_kind(self) -> kinds.Bound:
        """The study's kind bound to :meth:`kind_options` (``Kind.bind``): what the apps
        call."""
        return self.kind_impl.bind(self.kind_options())

    @cached_property
    def kind_settings(self) -> dict:
        """:meth:`kind_options` with the kind's defaults filled in (``validate_options``):
        what the worker is asked under, e.g. ``allow_tie`` for the instructions."""
        opts = self.kind_options()
        return {**opts, **self.kind_impl.validate_options(opts, None)}


class System(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="systems")
    name = models.CharField(max_length=200)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["study", "name"], name="system_unique_name")]

    def __str__(self) -> str:
        return self.name


class Input(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="inputs")
    external_id = models.CharField(max_length=200)
    text = models.TextField(blank=True)
    reference = models.TextField(blank=True, help_text="Optional human reference response.")
    priority = models.FloatField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "external_id"], name="input_unique_id")
        ]

    def __str__(self) -> str:
        return self.external_id

    @property
    def conversation(self) -> Any:
        """The conversation the input is (``metadata["conversation"]``), or ``None``."""
        return self.metadata.get("conversation") if isinstance(self.metadata, dict) else None


class Output(models.Model):
    input = models.ForeignKey(Input, on_delete=models.CASCADE, related_name="outputs")
    system = models.ForeignKey(System, on_delete=models.CASCADE, related_name="outputs")
    #: The output as text; a conversation output's messages flattened (``role: content``).
    text = models.TextField()
    #: A conversation output as imported: a list of ``{"role", "content"}`` messages.
    messages = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["input", "system"], name="output_unique_per_system")
        ]

    def __str__(self) -> str:
        return f"{self.input_id}/{self.system_id}"

    @property
    def shown(self) -> Any:
        """What a template shows: the text, or the conversation (``kinds/_content.html``)."""
        return conversation.for_display(self.messages) if self.messages else self.text


class Item(models.Model):
    """What a worker sees: an input with the outputs its kind shows (``ItemOutput``, in
    system order: two for pairwise, one for Likert)."""

    # no index of its own: it leads ``item_round_idx`` (see ``Assignment``)
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="items", db_index=False)
    input = models.ForeignKey(Input, on_delete=models.CASCADE, related_name="items")
    outputs = models.ManyToManyField(Output, through="ItemOutput", related_name="items")
    round_number = models.PositiveIntegerField(null=True, blank=True)
    is_gold = models.BooleanField(default=False)
    expected = models.JSONField(
        default=dict,
        blank=True,
        help_text="Known answer in system order, as the kind defines it (pairwise: "
        '{"value": "A"}), when there is one.',
    )
    redundancy = models.PositiveSmallIntegerField()
    #: Submitted annotations plus live leases; never above ``redundancy``.
    n_taken = models.PositiveSmallIntegerField(default=0)
    #: Submitted annotations collected on the platform.
    n_done = models.PositiveSmallIntegerField(default=0)
    is_active = models.BooleanField(default=True)
    #: The judge-clean skip (``annotator.prefill_skip``), decided when the item is first
    #: served: ``skipped`` (left out, inactive) or ``control`` (served); ``""`` undecided.
    prefill_skip = models.CharField(
        max_length=8,
        blank=True,
        default="",
        choices=[("", "not decided"), ("skipped", "skipped"), ("control", "control")],
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            # The worker cycle takes the fullest open item first (``services.leasing._take_item``):
            # this index hands it over in that order, so the statement reads a few index
            # entries instead of sorting every open item of the study.
            models.Index(
                F("study"),
                F("n_taken").desc(),
                F("id"),
                condition=Q(is_active=True, is_gold=False, n_taken__lt=F("redundancy")),
                name="item_fill_idx",
            ),
            # A round's items newest first: whether a round is complete
            # (``protocol.services.round_close_if_complete``, run each time an item is) is
            # answered by the first entries, not by reading every item of the study.
            models.Index(F("study"), F("round_number"), F("id"), name="item_round_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(n_taken__lte=F("redundancy")), name="item_taken_within_redundancy"
            ),
            models.CheckConstraint(
                condition=Q(n_done__lte=F("n_taken")), name="item_done_within_taken"
            ),
        ]

    def __str__(self) -> str:
        return f"item {self.pk}"

    def output_list(self) -> list[Output]:
        """The item's outputs in system order: those the worker cycle loaded with the item
        (``shown_outputs``), else read (prefetch ``item_outputs__output`` for many items)."""
        shown = self.__dict__.get("shown_outputs")
        if shown is not None:
            return shown
        return [link.output for link in self.item_outputs.all()]


class ItemOutput(models.Model):
    """One output an item shows, at its ``position`` in the item's system order."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="item_outputs")
    output = models.ForeignKey(Output, on_delete=models.CASCADE, related_name="item_links")
    position = models.PositiveSmallIntegerField()

    class Meta:
        ordering = ["item", "position"]
        constraints = [
            models.UniqueConstraint(fields=["item", "position"], name="item_output_position"),
            models.UniqueConstraint(fields=["item", "output"], name="item_output_once"),
        ]

    def __str__(self) -> str:
        return f"item {self.item_id} #{self.position}"


def _pseudonym() -> str:
    return secrets.token_hex(8)


class Annotator(models.Model):
    """A worker: a pseudonymous id and the recruiting platform's id, nothing more."""

    pseudonym = models.CharField(max_length=32, unique=True, default=_pseudonym, editable=False)
    platform = models.CharField(max_length=30, default="link")
    external_id = models.CharField(max_length=200)
    is_blocked = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["platform", "external_id"], name="annotator_unique_platform_id"
            )
        ]

    def __str__(self) -> str:
        return self.pseudonym


class Assignment(models.Model):
    """One item leased to one worker, with the display order drawn for it."""

    token = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # No index of their own: each leads an index below, and every lease and answer writes
    # this table (an index fewer is an index entry fewer per INSERT and per state change).
    study = models.ForeignKey(
        Study, on_delete=models.CASCADE, related_name="assignments", db_index=False
    )
    item = models.ForeignKey(
        Item, on_delete=models.CASCADE, related_name="assignments", db_index=False
    )
    annotator = models.ForeignKey(
        Annotator, on_delete=models.CASCADE, related_name="assignments", db_index=False
    )
    display_order = models.JSONField(
        default=list,
        help_text="Positions of the item's outputs in the order shown (left first).",
    )
    state = models.CharField(
        max_length=12, choices=AssignmentState.choices, default=AssignmentState.ISSUED
    )
    issued_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    seen_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Last sign of life of the task page (the lease issued, or a heartbeat); "
        "a lease idle for HUMEVAL_LEASE_IDLE_SECONDS may go to a worker who has no item.",
    )
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["study", "state", "expires_at"], name="assignment_lease_idx"),
            models.Index(fields=["annotator", "study", "state"], name="assignment_worker_idx"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["item", "annotator"], name="assignment_once_per_worker")
        ]

    def __str__(self) -> str:
        return str(self.token)


class Participation(models.Model):
    """One worker in one study: where they came from, how they are doing, what they get."""

    class Status(models.TextChoices):
        QUALIFYING = "qualifying", "Taking the qualification test"
        ACTIVE = "active", "Working"
        FAILED = "failed", "Failed the qualification test"
        BLOCKED = "blocked", "Blocked after missed gold checks"
        FINISHED = "finished", "Finished"
        STOPPED = "stopped", "Stopped early without a code"

    class Review(models.TextChoices):
        PENDING = "pending", "Not reviewed"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="participations")
    annotator = models.ForeignKey(
        Annotator, on_delete=models.CASCADE, related_name="participations"
    )
    platform_session = models.CharField(
        max_length=200, blank=True, help_text="Prolific SESSION_ID or MTurk assignmentId."
    )
    return_url = models.CharField(max_length=300, blank=True, help_text="MTurk turkSubmitTo.")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.ACTIVE)
    review = models.CharField(max_length=10, choices=Review.choices, default=Review.PENDING)
    strikes = models.PositiveSmallIntegerField(default=0)
    gold_seen = models.PositiveIntegerField(default=0)
    gold_correct = models.PositiveIntegerField(default=0)
    last_was_gold = models.BooleanField(default=False)
    browser_key = models.CharField(
        max_length=64,
        blank=True,
        editable=False,
        help_text="SHA-256 of the secret the worker's browser carries in its signed cookie; "
        "only that browser gets the participation's pages (docs/crowd.md).",
    )
    browser_since = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="When the current browser claimed it."
    )
    code_given = models.CharField(
        max_length=64, blank=True, editable=False, help_text="The code the end page gave."
    )
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "annotator"], name="participation_once")
        ]

    def __str__(self) -> str:
        return f"{self.annotator} in {self.study}"

    def held_by(self, secret: str) -> bool:
        """Whether ``secret`` (from a browser's cookie) is the one this participation is
        bound to; constant-time."""
        return bool(self.browser_key) and hmac.compare_digest(self.browser_key, browser_key(secret))


def browser_key(secret: str) -> str:
    """What is stored of a browser's secret: its SHA-256, so the database alone cannot
    stand in for a worker's browser."""
    return hashlib.sha256(secret.encode()).hexdigest()


class QualificationTest(models.Model):
    """Questions with known answers a worker must pass before real work; shareable among
    studies of its kind. Its questions are tasks of that kind (with ``options``, the kind's
    options they are asked with: e.g. a Likert test's criteria)."""

    name = models.CharField(max_length=200)
    kind = models.CharField(
        max_length=16,
        choices=kinds.choices,
        default="pairwise",
        help_text="The task its questions ask; only studies of this kind may use the test.",
    )
    options = models.JSONField(
        default=dict,
        blank=True,
        help_text="The kind's options the questions are asked with, as on a study line "
        '(pairwise: {"allow_tie": true}; Likert: {"criteria": [{"name": "overall", '
        '"scale_min": 1, "scale_max": 5}]}).',
    )
    instructions = models.TextField(blank=True, help_text="Markdown shown before the test.")
    pass_threshold = models.PositiveSmallIntegerField(
        default=9, help_text="Correct answers needed (HREF: 9 of 10)."
    )
    max_attempts = models.PositiveSmallIntegerField(
        default=2,
        validators=[MinValueValidator(1), MaxValueValidator(5)],
        help_text="Attempts a worker gets in each study (Prolific asks for two).",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        editable=False,
        related_name="+",
        help_text="The researcher who wrote it: they (and superusers) may change or delete it; "
        "researchers of a study that uses it may read it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name

    @property
    def kind_impl(self) -> kinds.Kind:
        """The kind of the test's questions (:mod:`kinds`)."""
        return kinds.get(self.kind)

    def kind_options(self) -> dict:
        """The questions' ``opts``: :attr:`options` validated by the kind (its defaults
        filled in); ``kinds.OptionError`` when they are invalid."""
        return {**self.options, **self.kind_impl.validate_options(self.options or {}, None)}

    def bound_kind(self) -> kinds.Bound:
        """The test's kind bound to :meth:`kind_options`; ``kinds.OptionError`` when they
        are invalid."""
        return self.kind_impl.bind(self.kind_options())

    def clean(self) -> None:
        try:
            kinds.get(self.kind)
        except KeyError:
            return  # the field's own choice check names it
        if self.options is None:  # left empty in a form
            self.options = {}
        if not isinstance(self.options, dict):
            raise ValidationError({"options": "Give the options as a JSON object."})
        try:
            self.kind_options()
        except kinds.OptionError as exc:
            raise ValidationError({"options": exc.messages}) from None
        kind = self.kind_impl
        if unused := kind.unused_switches(self.options):
            raise ValidationError(
                {"options": f"{', '.join(unused)}: {kind.a_noun} test has no such answer."}
            )
        if not self.pk:
            return
        if self.pass_threshold > self.questions.count():
            raise ValidationError({"pass_threshold": "More than the number of questions."})
        kind_changed = QualificationTest.objects.filter(pk=self.pk).exclude(kind=self.kind)
        if kind_changed.exists() and self.questions.exists():
            raise ValidationError(
                {"kind": "The test has questions of its kind; make a new test for another kind."}
            )
        other = self.studies.exclude(kind=self.kind).values_list("name", flat=True)[:3]
        if other:
            raise ValidationError(
                {"kind": f"Studies of another kind use this test: {', '.join(other)}."}
            )


class QualificationQuestion(models.Model):
    """A task of the test's kind whose answer is known: a prompt, the outputs shown (in
    system order; the order a worker sees is drawn per attempt) and ``expected``, the known
    answer as the kind stores it (``Kind.parse_expected``: pairwise ``{"value": "A"}``,
    Likert ``{"scores": {"overall": 4}, "tolerance": 1}``)."""

    test = models.ForeignKey(QualificationTest, on_delete=models.CASCADE, related_name="questions")
    prompt = models.TextField()
    conversation = models.JSONField(
        default=list,
        blank=True,
        help_text="A conversation shown as the input instead of the prompt: a JSON list of "
        '{"role": …, "content": …} turns (empty: the prompt is shown).',
    )
    outputs = models.JSONField(
        default=list,
        help_text='The outputs shown, as a JSON list of texts in system order (["first", '
        '"second"]); a pairwise question has two, a ranking question three or more, a Likert '
        "or error-span question one.",
    )
    expected = models.JSONField(
        default=dict,
        help_text='The known answer as the test\'s kind reads it: pairwise "A", "B" '
        '(the first or second output) or "tie"; Likert {"scores": {"overall": 4}, '
        '"tolerance": 1}; ranking {"top": 0} (the best output\'s position) or {"ranking": '
        '[[1], [0, 2]]}; error spans {"spans": [{"start": 0, "end": 3, "severity": "major", '
        '"text": "…"}], "score": 70}. See docs/crowd.md, "Known answers per kind".',
    )
    order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["order", "id"]

    def __str__(self) -> str:
        return self.prompt[:60]

    def clean(self) -> None:
        """Check the outputs and read ``expected`` through the test's kind (stored in the
        kind's form)."""
        outputs = self.outputs
        if (
            not isinstance(outputs, list)
            or not outputs
            or not all(isinstance(o, str) and o.strip() for o in outputs)
        ):
            raise ValidationError(
                {"outputs": "Give the outputs as a JSON list of non-empty texts."}
            )
        if self.conversation is None:  # left empty in a form
            self.conversation = []
        if not isinstance(self.conversation, list) or not all(
            isinstance(t, dict)
            and isinstance(t.get("role"), str)
            and isinstance(t.get("content"), str)
            for t in self.conversation
        ):
            raise ValidationError(
                {"conversation": "Give the conversation as a JSON list of {role, content} turns."}
            )
        try:
            test = self.test
        except QualificationTest.DoesNotExist:
            return  # the test's own form names what is missing
        try:
            kind = test.bound_kind()
        except kinds.OptionError as exc:
            raise ValidationError(f"The test's options are invalid: {exc}") from None
        try:
            self.expected = kind.parse_expected(
                self.expected,
                systems=kinds.position_names(len(outputs)),
                outputs=list(outputs),
            )
        except kinds.AnswerError as exc:
            raise ValidationError({"expected": exc.message}) from None


class QualificationAttempt(models.Model):
    """One attempt by a worker at a study's test: answers in display order, score, verdict.

    Attempts belong to the study they were taken in (a shared test is taken afresh in each
    study) and to the worker's platform id, so a new browser cannot reset them."""

    test = models.ForeignKey(QualificationTest, on_delete=models.CASCADE, related_name="attempts")
    study = models.ForeignKey(
        Study, on_delete=models.CASCADE, related_name="qualification_attempts"
    )
    annotator = models.ForeignKey(
        Annotator, on_delete=models.CASCADE, related_name="qualification_attempts"
    )
    number = models.PositiveSmallIntegerField(default=1, help_text="1 for the first attempt.")
    #: Per question, in the order shown: {"question", "display_order", "answer", "correct"}
    #: (``answer``: what the kind's ``parse_answer`` returned, in system order).
    answers = models.JSONField(default=list)
    order = models.JSONField(
        default=list,
        help_text="Per question in the order shown: {question: id, display_order: the "
        "positions of its outputs as shown, first (left) first}.",
    )
    n_correct = models.PositiveSmallIntegerField(default=0)
    passed = models.BooleanField(null=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["study", "annotator", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["test", "study", "annotator", "number"], name="qualification_attempt_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.annotator} on {self.test} (attempt {self.number})"


class Annotation(models.Model):
    """A submitted label. Never edited after it is stored."""

    # no index of its own: it leads ``annotation_time_idx`` (see ``Assignment``)
    study = models.ForeignKey(
        Study, on_delete=models.CASCADE, related_name="annotations", db_index=False
    )
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="annotations")
    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="annotations")
    assignment = models.OneToOneField(
        Assignment, on_delete=models.CASCADE, null=True, blank=True, related_name="annotation"
    )
    source = models.CharField(
        max_length=10, choices=AnnotationSource.choices, default=AnnotationSource.PLATFORM
    )
    raw_answer = models.CharField(max_length=12, blank=True)
    value = models.CharField(max_length=12, choices=Preference.choices, blank=True)
    scores = models.JSONField(default=dict, blank=True)
    #: The answer in system order as the kind parsed it (``Kind.parse_answer``);
    #: ``raw_answer``, ``value`` and ``scores`` are summaries of it (``Kind.summary``).
    answer = models.JSONField(default=dict, blank=True)
    time_spent_ms = models.PositiveIntegerField(null=True, blank=True)
    config_version = models.PositiveIntegerField()
    #: ``Study.guideline_revision`` when the label was made (``GuidelineRevision.number``).
    guideline_revision = models.PositiveIntegerField(default=1)
    submitted_at = models.DateTimeField()
    is_flagged = models.BooleanField(default=False)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["study", "submitted_at"], name="annotation_time_idx")]

    def __str__(self) -> str:
        return f"annotation {self.pk}"

    def save(self, *args, **kwargs) -> None:
        if not self._state.adding:
            raise ValueError("Annotations are immutable once submitted.")
        super().save(*args, **kwargs)


class JudgeRating(models.Model):
    """A rating by an automatic metric or an LLM judge, never by a person.

    Three shapes: a scalar ``score`` of one output (``system``); a preference ``label``
    (A / B / tie in the order ``system``, ``other_system``) between two outputs; or a
    Likert score or categorical ``label`` of one output on a ``criterion``.

    Ratings made by ``run_judge`` (:mod:`annotator.judging`) also keep the ``raw_answer``,
    the ``prompt_hash`` of the template, the system shown first (``shown_first``) and the
    ``sample`` index; an answer that could not be parsed is kept with ``parse_ok`` false and
    neither score nor label. Reports and the protocol read sample 0 of the parsed ones. An
    error-span run keeps the proposed spans in ``proposal`` (label ``errors`` or ``error_free``).
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="judge_ratings")
    judge = models.CharField(max_length=100)
    input = models.ForeignKey(Input, on_delete=models.CASCADE, related_name="judge_ratings")
    system = models.ForeignKey(System, on_delete=models.CASCADE, related_name="+")
    other_system = models.ForeignKey(
        System, on_delete=models.CASCADE, related_name="+", null=True, blank=True
    )
    criterion = models.CharField(max_length=60, blank=True)
    score = models.FloatField(null=True, blank=True)
    label = models.CharField(max_length=60, blank=True)
    sample = models.PositiveSmallIntegerField(default=0, help_text="Sample index (run_judge).")
    prompt_hash = models.CharField(
        max_length=64, blank=True, help_text="SHA-256 of the prompt template (run_judge)."
    )
    raw_answer = models.TextField(blank=True, help_text="The model's answer as given.")
    parse_ok = models.BooleanField(
        default=True, help_text="False: the answer was not one of the allowed ones."
    )
    shown_first = models.ForeignKey(
        System,
        on_delete=models.CASCADE,
        related_name="+",
        null=True,
        blank=True,
        help_text="Pairwise run_judge: the system whose output the prompt showed first.",
    )
    proposal = models.JSONField(
        null=True,
        blank=True,
        help_text="Error-span run_judge: {'spans': [...]} as parsed, or {'error': why}.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "judge", "input", "system", "criterion", "sample"],
                condition=Q(other_system__isnull=True),
                name="judge_rating_unique_single",
            ),
            models.UniqueConstraint(
                fields=["study", "judge", "input", "system", "other_system", "criterion", "sample"],
                condition=Q(other_system__isnull=False),
                name="judge_rating_unique_pair",
            ),
            models.CheckConstraint(
                condition=Q(score__isnull=False) | ~Q(label="") | Q(parse_ok=False),
                name="judge_rating_has_value",
            ),
            models.CheckConstraint(
                condition=Q(parse_ok=True) | Q(score__isnull=True, label=""),
                name="judge_rating_unparsed_has_no_value",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.judge} on {self.input_id}"


class JudgeRun(models.Model):
    """One run of an LLM judge over a study, queued from the admin (``run_judge`` task): what
    it was asked to do, what it did and which key it sent. A researcher's own key is held
    in ``own_key`` only until the run ends, then erased; an operator's key is never stored
    (the worker reads it from its environment, for a listed endpoint only)."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"
        DEADLINE = "deadline", "stopped at its deadline"

    class Key(models.TextChoices):
        ENDPOINT = "endpoint", "the operator's key bound to the listed endpoint"
        OWN = "own", "the researcher's own key"
        NONE = "none", "no key"

    ACTIVE = (State.QUEUED, State.RUNNING)

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="judge_runs")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    base_url = models.CharField(max_length=500)
    model = models.CharField(max_length=100)
    judge = models.CharField(max_length=100, blank=True, help_text="Blank: the model's name.")
    criterion = models.CharField(max_length=60, blank=True)
    samples = models.PositiveSmallIntegerField(default=1)
    concurrency = models.PositiveSmallIntegerField(default=4)
    prompt = models.TextField(blank=True, help_text="The prompt template; blank: the kind's.")
    key_source = models.CharField(max_length=10, choices=Key.choices)
    own_key = models.TextField(blank=True, help_text="Erased when the run ends.")
    key_sent = models.CharField(max_length=200, blank=True, help_text="What the worker sent.")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    cancel_requested = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    total = models.PositiveIntegerField(default=0)
    stored = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)
    unparseable = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    not_run = models.PositiveIntegerField(default=0)
    message = models.TextField(blank=True)
    #: The failed calls, one line per item (the first 200).
    errors = models.JSONField(default=list, blank=True)
    #: Written every few seconds while the run runs; a running run whose worker died stops
    #: writing it and is shown stale (``is_stale``) after ``HUMEVAL_JUDGE_STALE_SECONDS``.
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.model} on {self.study_id} ({self.state})"

    @property
    def is_stale(self) -> bool:
        """Running, but no heartbeat for ``HUMEVAL_JUDGE_STALE_SECONDS``: its worker died."""
        if self.state != self.State.RUNNING:
            return False
        last = self.heartbeat_at or self.started_at or self.created_at
        limit = timedelta(seconds=settings.HUMEVAL_JUDGE_STALE_SECONDS)
        return last is not None and timezone.now() - last > limit


class ImportJob(models.Model):
    """A background job on a big file (``operation``): a large study import (the API stores the
    upload in ``HUMEVAL_JOB_DIR`` and a Celery task imports it and deletes the file, whatever
    the outcome) or a large Judge-Bench export (a Celery task writes the document to
    ``HUMEVAL_JOB_DIR``; the owner downloads it until ``expires_at``, then the periodic sweep
    deletes it). The API answers 202 with the job's URL (docs/reliability.md)."""

    class Operation(models.TextChoices):
        IMPORT = "import", "Import"
        EXPORT = "export", "Judge-Bench export"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="import_jobs"
    )
    filename = models.CharField(max_length=300)
    size = models.BigIntegerField(default=0)
    overrides = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    study = models.ForeignKey(Study, null=True, blank=True, on_delete=models.SET_NULL)
    errors = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    operation = models.CharField(max_length=10, choices=Operation.choices, default=Operation.IMPORT)
    #: Import: the byte reached in the file's current pass (of ``size``); export: the
    #: instances written (of ``total``).
    progress = models.BigIntegerField(default=0)
    total = models.BigIntegerField(default=0)
    #: An export's file is served until then; the sweep deletes it after.
    expires_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.operation} of {self.filename} ({self.status})"


class GuidelineRevision(models.Model):
    """One wording of a study's guidelines: its instructions, criteria and qualification
    test as workers saw them (``text``), who made it and when. A new one is made by
    ``annotator.revisions.revision_record`` when that wording changes."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    text = models.TextField(help_text="The instructions, criteria and qualification, as text.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "number"]
        constraints = [
            models.UniqueConstraint(fields=["study", "number"], name="guideline_revision_once")
        ]

    def __str__(self) -> str:
        return f"{self.study} · revision {self.number}"
