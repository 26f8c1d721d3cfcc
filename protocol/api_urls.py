from django.urls import path

from .api import ProtocolStateView

urlpatterns = [
    path("studies/<int:pk>/protocol/", ProtocolStateView.as_view(), name="study-protocol"),
]
