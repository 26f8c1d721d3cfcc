from django.urls import path

from . import views

app_name = "analysis"

urlpatterns = [
    path("studies/<int:pk>/report/", views.study_report, name="report"),
]
