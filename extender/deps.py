"""Request-scoped dependencies."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from extender.state import ExtenderState


def get_state(request: Request) -> ExtenderState:
    state: ExtenderState = request.app.state.loadsched
    return state


StateDep = Annotated[ExtenderState, Depends(get_state)]
