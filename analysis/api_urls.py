from django.urls import path  # noqa: F401 - the report API routes go here

urlpatterns: list = []
