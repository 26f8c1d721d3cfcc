from django.apps import AppConfig


class ProtocolConfig(AppConfig):
    name = "protocol"
    verbose_name = "Adaptive protocol"

    def ready(self) -> None:
        from . import receivers, tasks  # noqa: F401 - connect signal receivers
