"""The adaptive study's answers to :class:`annotator.collection.Collection` (registered for
``collection="adaptive"`` in :meth:`protocol.apps.ProtocolConfig.ready`)."""

from django.db import transaction

from annotator.collection import Outlook
from annotator.models import Study

from . import services
from .models import ProtocolConfig, Round, SystemPair
from .tasks import decide_round


class AdaptiveCollection:
    def outlook(self, study: Study) -> Outlook:
        """A round still collecting (leases may come back) means more work is coming; a
        complete round awaiting its decision, that the next opens within a moment; once the
        protocol has opened no further round, none comes. One query."""
        states = set(
            Round.objects.filter(
                study=study, state__in=[Round.State.OPEN, Round.State.CLOSED]
            ).values_list("state", flat=True)
        )
        if Round.State.CLOSED in states:
            return Outlook.IMMINENT
        return Outlook.LATER if states else Outlook.NONE

    def round_summary(self, study: Study) -> dict | None:
        """Rounds and pairs of an adaptive study, for the researcher's workspace."""
        config = ProtocolConfig.objects.filter(study=study).first()
        if config is None:
            return None
        last = Round.objects.filter(study=study).order_by("-number").first()
        pairs = SystemPair.objects.filter(study=study)
        open_pairs = pairs.filter(state=SystemPair.State.OPEN).count()
        return {
            "rounds": last.number if last else 0,
            "current": last.number if last else None,
            "current_state": last.get_state_display() if last else None,
            "committed": config.committed,
            "open_pairs": open_pairs,
            "settled_pairs": pairs.count() - open_pairs,
        }

    def reconfigure(self, study: Study, edited: Study, *, apply: bool) -> list[str]:
        """Carry a new redundancy or budget to the open round and the ledger (or refuse it);
        a round that a lower redundancy has completed is closed and decided after commit."""
        notes = services.protocol_reconfigure(study, edited, apply=apply)
        if apply and notes:
            open_rounds = Round.objects.filter(study=study, state=Round.State.OPEN)
            for number in open_rounds.values_list("number", flat=True):
                if services.round_close_if_complete(study.pk, number):
                    transaction.on_commit(lambda n=number: decide_round.delay(study.pk, n))
        return notes
