from django.urls import path

from .api import StudyReportView

urlpatterns = [
    path("studies/<int:pk>/report/", StudyReportView.as_view(), name="analysis-study-report"),
]
