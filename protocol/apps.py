from django.apps import AppConfig


class ProtocolConfig(AppConfig):
    name = "protocol"
    verbose_name = "Adaptive protocol"
