from django.apps import AppConfig


class ProtocolConfig(AppConfig):
    name = "protocol"
    verbose_name = "Adaptive protocol"

    def ready(self) -> None:
        from annotator.collection import register

        from . import receivers, tasks  # noqa: F401 - connect signal receivers
        from .collection import AdaptiveCollection

        register("adaptive", AdaptiveCollection())
