"""The hub's HTTP edges below the routers: the ASGI guard and fast paths, upload bodies, HSTS, and serving with uvicorn."""
