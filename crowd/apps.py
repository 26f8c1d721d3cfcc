from django.apps import AppConfig


class CrowdConfig(AppConfig):
    name = "crowd"
    verbose_name = "Crowd platforms"

    def ready(self) -> None:
        from . import receivers  # noqa: F401 - connect signal receivers
