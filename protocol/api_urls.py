from django.urls import path  # noqa: F401 - the protocol API routes go here

urlpatterns: list = []
