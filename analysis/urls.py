from django.urls import path  # noqa: F401 - the report page routes go here

app_name = "analysis"

urlpatterns: list = []
