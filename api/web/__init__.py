"""What a browser loads: the page at `/` and the API docs at `/docs` and `/redoc`, all
from files installed with the package (nothing from a CDN)."""
