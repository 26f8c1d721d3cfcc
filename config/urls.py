from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe
from django.views.generic import TemplateView

FAVICON = settings.BASE_DIR / "static" / "humeval" / "favicon.ico"


@require_safe
@cache_control(max_age=86400, public=True)
def favicon(request: HttpRequest) -> HttpResponse:
    """The icon a browser asks for on every site's first page (else a 404 in every log)."""
    return HttpResponse(FAVICON.read_bytes(), content_type="image/x-icon")


urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    path("", TemplateView.as_view(template_name="index.html"), name="index"),
    path("admin/", admin.site.urls),
    path("api/", include("analysis.api_urls")),
    path("api/", include("protocol.api_urls")),
    path("api/", include("annotator.api_urls")),
    path("", include("crowd.urls")),
    path("", include("analysis.urls")),
    path("", include("protocol.urls")),
    path("", include("annotator.urls")),
]
