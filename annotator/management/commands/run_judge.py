import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotator import judging
from annotator.models import Study


class Command(BaseCommand):
    help = (
        "Rate a study with an LLM judge through an OpenAI-compatible endpoint "
        "(POST {base-url}/chat/completions); see docs/analysis.md."
    )

    def add_arguments(self, parser):
        parser.add_argument("study", type=int)
        parser.add_argument("--base-url", required=True, help="e.g. http://localhost:8000/v1")
        parser.add_argument("--model", required=True, help="Model name; also the judge's name.")
        parser.add_argument("--judge", default="", help="Judge name (default: the model).")
        parser.add_argument("--prompt", type=Path, help="Prompt template (default: built in).")
        parser.add_argument("--criterion", default="", help="Likert: only this criterion.")
        parser.add_argument("--concurrency", type=int, default=4)
        parser.add_argument("--samples", type=int, default=1, help="Answers per item.")
        parser.add_argument("--seed", type=int, default=0, help="Seed of the display order.")
        parser.add_argument("--temperature", type=float, help="Sent when given.")
        parser.add_argument("--max-tries", type=int, default=6, help="Per call, with retries.")
        parser.add_argument("--retry-base", type=float, default=1.0, help="First backoff (s).")
        parser.add_argument(
            "--api-key-env",
            default=judging.API_KEY_ENV,
            help="Environment variable holding the API key (none sent when it is unset).",
        )

    def handle(self, *args, study, api_key_env, **options):
        try:
            study_obj = Study.objects.get(pk=study)
        except Study.DoesNotExist:
            raise CommandError(f"no study with id {study}") from None
        api_key = os.environ.get(api_key_env) or None
        if api_key is None:
            self.stderr.write(f"{api_key_env} is not set: no API key is sent")
        try:
            result = judging.judge_run(
                study_obj,
                base_url=options["base_url"],
                model=options["model"],
                api_key=api_key,
                judge=options["judge"],
                prompt=options["prompt"],
                criterion=options["criterion"],
                samples=options["samples"],
                concurrency=options["concurrency"],
                seed=options["seed"],
                max_tries=options["max_tries"],
                retry_base=options["retry_base"],
                temperature=options["temperature"],
                progress=self._progress,
            )
        except judging.JudgeRefused as exc:
            raise CommandError(exc.message) from None
        finally:
            self.stderr.write("")
        for error in result.errors[:10]:
            self.stderr.write(error)
        self.stdout.write(result.summary())
        if result.failed:
            raise CommandError(f"{result.failed} calls failed; run the command again to retry them")

    def _progress(self, result: judging.RunResult) -> None:
        done = result.skipped + result.stored + result.failed
        self.stderr.write(
            f"\rjudged {done}/{result.total} "
            f"({result.unparseable} unparseable, {result.failed} failed)",
            ending="",
        )
        self.stderr.flush()
