"""What the extender's JSON routers share, whichever room they are in."""

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException


class JSONRoute(APIRoute):
    """The route class of the JSON routers (dispatch, explain): a body FastAPI cannot decode
    at all (bytes that are not UTF-8) is answered like malformed JSON, ``422`` with
    ``loc: ["body"]``, instead of FastAPI's ``400 There was an error parsing the body``, which
    names nothing."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except StarletteHTTPException as e:  # FastAPI raises Starlette's own here
                cause = e.__cause__
                if e.status_code != 400 or not isinstance(cause, UnicodeDecodeError):
                    raise
                error = {
                    "type": "json_invalid",
                    "loc": ("body",),
                    "msg": f"not UTF-8 JSON: {cause.reason} at byte {cause.start}",
                    "input": {},
                }
                raise RequestValidationError([error]) from e

        return route
