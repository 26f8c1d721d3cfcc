from django.urls import path

from . import views

app_name = "crowd"
urlpatterns = [
    path("crowd/hooks/prolific/<uuid:study_id>/", views.prolific_hook, name="prolific-hook"),
    path("crowd/panel/<int:pk>/", views.panel, name="panel"),
]
