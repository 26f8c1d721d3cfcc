"""Replays of the adaptive protocol on fully rated data, and the synthetic studies of the
sweep: research and validation code, pure (NumPy / pandas). ``python manage.py replay`` and
``bench/`` run it; the live protocol never imports it."""
