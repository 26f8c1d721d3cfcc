from django.urls import path

from . import views

app_name = "annotator"

urlpatterns = [
    path("w/<uuid:study_id>/", views.enter, name="enter"),
    path("w/<uuid:study_id>/task/", views.task, name="task"),
]
