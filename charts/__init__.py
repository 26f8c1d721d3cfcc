"""Chart data shared by the report (analysis) and the dashboard (protocol); no Django."""
