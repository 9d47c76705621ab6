"""GET /: the demo page, and the plain HTML/JS files it loads from /static/.

The page is shipped in the package (gateway/static/, no build step) and uses only
the gateway's public API, as any browser client would.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse

STATIC = Path(__file__).resolve().parent / "static"
MEDIA_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}

router = APIRouter(include_in_schema=False)


@router.get("/")
async def demo_page() -> FileResponse:
    return FileResponse(STATIC / "index.html", media_type=MEDIA_TYPES[".html"], headers={"Cache-Control": "no-cache"})


@router.get("/static/{name}")
async def static_file(name: str) -> FileResponse:
    path = STATIC / name
    # `name` cannot hold a "/", so only the files directly in static/ are reachable.
    if path.suffix not in MEDIA_TYPES or not path.is_file():
        raise HTTPException(404, f"no static file {name!r}")
    return FileResponse(path, media_type=MEDIA_TYPES[path.suffix], headers={"Cache-Control": "no-cache"})
