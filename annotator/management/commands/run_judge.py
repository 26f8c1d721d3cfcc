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
        parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8080/v1")
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
            "--run-seconds",
            type=float,
            help="Stop the run after this long (default HUMEVAL_JUDGE_RUN_SECONDS).",
        )
        parser.add_argument(
            "--api-key-env",
            help="Environment variable holding the API key to send. Default: the key bound "
            "to the base URL in HUMEVAL_JUDGE_ENDPOINTS; none for an unlisted URL.",
        )

    def handle(self, *args, study, api_key_env, **options):
        try:
            study_obj = Study.objects.get(pk=study)
        except Study.DoesNotExist:
            raise CommandError(f"no study with id {study}") from None
        if api_key_env is None:  # the operator's key goes only where it is bound
            api_key_env = judging.endpoint_key(options["base_url"]) or ""
        api_key = os.environ.get(api_key_env) or None if api_key_env else None
        if api_key is None:
            reason = f"{api_key_env} is not set" if api_key_env else "no key variable for this URL"
            self.stderr.write(f"{reason}: no API key is sent")
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
                run_seconds=options["run_seconds"],
                progress=self._progress,
            )
        except judging.JudgeRefused as exc:
            raise CommandError(exc.message) from None
        finally:
            self.stderr.write("")
        for error in result.errors[:10]:
            self.stderr.write(error)
        self.stdout.write(result.summary())
        if result.stopped:
            raise CommandError(f"{result.summary()}; run the command again to go on")
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
