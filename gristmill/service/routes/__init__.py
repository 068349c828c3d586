"""The REST API's routers, one per area: the op catalogue, recipes (validate, preview, apply), jobs (runs,
analyses, their reports and outputs), and the pages (web UI, API docs). ``service.api.create_app`` mounts
them; each reads the app's JobManager and settings from ``request.app.state``."""
from . import catalogue, jobs, pages, recipes

ROUTERS = (catalogue.router, recipes.router, jobs.router, pages.router)
