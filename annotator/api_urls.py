from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from .api import ImportJobView, JobDownloadView, StudyLabelsView, StudyViewSet, not_found

router = DefaultRouter()
router.register("studies", StudyViewSet, basename="study")

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # the split view serves its start-up script as a file: nothing inline, for the CSP
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("studies/<int:pk>/annotations/", StudyLabelsView.as_view(), name="study-annotations"),
    path("jobs/<uuid:public_id>/", ImportJobView.as_view(), name="import-job"),
    path("jobs/<uuid:public_id>/download/", JobDownloadView.as_view(), name="job-download"),
    *router.urls,
    # Last of the /api/ routes (config/urls.py includes this module after the others): any
    # other path ending in a slash answers the API's JSON 404. Without the slash, Django's
    # APPEND_SLASH redirect still applies.
    re_path(r"^[\s\S]*/$", not_found, name="api-not-found"),
]
