from django.urls import path

from . import views

app_name = "protocol"

urlpatterns = [
    path("studies/<int:pk>/protocol/", views.dashboard, name="dashboard"),
]
