from django.contrib import admin
from django.urls import include, path
from django.views.generic import TemplateView

urlpatterns = [
    path("", TemplateView.as_view(template_name="index.html"), name="index"),
    path("admin/", admin.site.urls),
    path("api/", include("analysis.api_urls")),
    path("api/", include("protocol.api_urls")),
    path("api/", include("annotator.api_urls")),
    path("", include("analysis.urls")),
    path("", include("protocol.urls")),
    path("", include("annotator.urls")),
]
