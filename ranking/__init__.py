"""Rankings of systems from pairwise comparisons (pure: no Django, no project imports), so
both the report (``analysis``) and the protocol dashboard (``protocol``) can use them without
one app importing the other (docs/architecture.md)."""

from ranking.bradley_terry import ELO_BASE, ELO_SCALE, bradley_terry, fit_log_strengths

__all__ = ["ELO_BASE", "ELO_SCALE", "bradley_terry", "fit_log_strengths"]
