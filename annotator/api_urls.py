from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from .api import StudyLabelsView, StudyViewSet

router = DefaultRouter()
router.register("studies", StudyViewSet, basename="study")

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("studies/<int:pk>/annotations/", StudyLabelsView.as_view(), name="study-annotations"),
    *router.urls,
]
