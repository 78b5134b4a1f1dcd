"""Stage registry: ``orgmem up`` runs all of them, ``orgmem run <stage>`` one."""

from __future__ import annotations

from collections.abc import Callable

from services.runtime import Runtime

StageRegistrar = Callable[[Runtime], None]


def _registrars() -> dict[str, StageRegistrar]:
    from embedder.stage import register as embed
    from ingest.stage import register as ingest

    stages: dict[str, StageRegistrar] = {"ingest": ingest, "embed": embed}
    try:
        from retriever.stage import register as retrieve

        stages["retrieve"] = retrieve
    except ImportError:  # pragma: no cover - stage not built yet
        pass
    for name, module in (
        ("extract", "extractor.stage"),
        ("conflicts", "services.conflicts.stage"),
        ("collab", "services.collaboration.stage"),
    ):
        try:
            mod = __import__(module, fromlist=["register"])
            stages[name] = mod.register
        except ImportError:  # pragma: no cover - stage not built yet
            pass
    return stages


def available_stages() -> list[str]:
    return list(_registrars())


def register_stages(rt: Runtime, names: list[str]) -> None:
    registrars = _registrars()
    for name in names:
        if name not in registrars:
            raise SystemExit(f"unknown stage {name!r}; available: {', '.join(registrars)}")
        registrars[name](rt)
        rt.stages.append(name)
