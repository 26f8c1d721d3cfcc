"""Static files storage."""

from django.contrib.staticfiles.storage import StaticFilesStorage


class StaticStorage(StaticFilesStorage):
    """Django's storage of static files, with each file's URL made once per process: every
    worker page names the same few files (``{% static %}`` builds the URL on each call)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._urls: dict[str, str] = {}

    def url(self, name: str | None) -> str:
        if name is None:
            return super().url(name)
        try:
            return self._urls[name]
        except KeyError:
            return self._urls.setdefault(name, super().url(name))
