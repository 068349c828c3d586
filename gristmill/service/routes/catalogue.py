"""The op catalogue, input formats and the recipe gallery: read-only, the same for every caller."""
from __future__ import annotations

from fastapi import APIRouter, Query

from .. import core
from ..http import ApiError, CleanJSON

router = APIRouter(tags=["catalogue"])


@router.get("/api/health", tags=["meta"])
def health():
    from ... import __version__
    return {"ok": True, "version": __version__}


@router.get("/api/ops")
def ops(q: str | None = Query(None, max_length=200, description="Substring of the name or doc."),
        kind: str | None = Query(None, max_length=50, description="mapper, filter, deduplicator, ...")):
    return CleanJSON({"ops": core.list_ops(q, kind)})


def described(name: str) -> dict:
    try:
        return core.describe_op(name)
    except KeyError as e:
        raise ApiError(404, e.args[0]) from None


@router.get("/api/ops/{name}")
def op(name: str):
    return CleanJSON(described(name))


@router.get("/api/ops/{name}/schema",
            description="The JSON schema of the op's params (also in this document's components as op_NAME).")
def op_schema(name: str):
    return CleanJSON(described(name)["schema"])


@router.get("/api/formats")
def formats():
    return CleanJSON({"formats": core.list_formats()})


@router.get("/api/recipes", description="The recipe gallery shipped with gristmill.")
def gallery():
    from .. import gallery as g
    return {"recipes": g.recipes()}


@router.get("/api/recipes/{name}")
def gallery_recipe(name: str):
    from .. import gallery as g
    try:
        return {"name": name.removesuffix(".yaml"), "yaml": g.read(name)}
    except KeyError as e:
        raise ApiError(404, e.args[0]) from None
