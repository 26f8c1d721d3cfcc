from django.urls import path

from . import views

app_name = "annotator"

urlpatterns = [
    path("w/<uuid:study_id>/", views.enter, name="enter"),
    path("w/<uuid:study_id>/i/<str:token>/", views.invite, name="invite"),
    path("w/<uuid:study_id>/prolific/", views.prolific, name="prolific"),
    path("w/<uuid:study_id>/mturk/", views.mturk, name="mturk"),
    path("w/<uuid:study_id>/instructions/", views.instructions, name="instructions"),
    path("w/<uuid:study_id>/qualify/", views.qualify, name="qualify"),
    path("w/<uuid:study_id>/task/", views.task, name="task"),
    path("w/<uuid:study_id>/renew/", views.renew, name="renew"),
    path("w/<uuid:study_id>/end/", views.end, name="end"),
    path("w/jsi18n/<str:language>/", views.js_catalog, name="jsi18n"),
]
