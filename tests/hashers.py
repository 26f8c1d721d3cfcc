"""A fast password hasher for the tests (installed by tests/conftest.py)."""

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class FastPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """PBKDF2-SHA256 with one round instead of a million: a real ``pbkdf2_sha256`` hash (the
    round count is in it, so a server with the production hasher verifies it too), made in
    microseconds. Tests only: production keeps Django's hashers (tests/unit/test_security.py
    checks)."""

    iterations = 1
