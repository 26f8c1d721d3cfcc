"""Authentication backends."""

from axes.backends import AxesStandaloneBackend


class LoginAttemptsBackend(AxesStandaloneBackend):
    """django-axes' lockout of a login made through a request (the admin's login form).
    A login without a request (the test client's ``login``, a shell) has no address to
    count: it is left to the next backend, as django-axes would refuse it outright."""

    def authenticate(self, request=None, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def login_client_ip(request) -> str | None:
    """The address django-axes counts a login under: the throttles' client address
    (trusted proxies included), or ``None`` when the request carries none (its database
    column holds only addresses)."""
    from annotator.throttle import client_ip

    address = client_ip(request)
    return None if address == "unknown" else address
