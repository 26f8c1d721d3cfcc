from django.urls import path  # noqa: F401 - the dashboard routes go here

app_name = "protocol"

urlpatterns: list = []
