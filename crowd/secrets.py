"""Researchers' platform tokens and hook secrets at rest: Fernet (AES-128-CBC + HMAC) under
a key derived from ``SECRET_KEY``. The database holds only the ciphertext; nothing shows a
token back (the admin shows whether one is set)."""

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


def _fernet() -> Fernet:
    digest = hashlib.sha256(b"humeval.crowd.secrets:" + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def seal(value: str) -> str:
    return _fernet().encrypt(value.encode()).decode() if value else ""


def unseal(value: str) -> str:
    if not value:
        return ""
    try:
        return _fernet().decrypt(value.encode()).decode()
    except InvalidToken:
        return ""  # sealed under another SECRET_KEY: as good as unset
