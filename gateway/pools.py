"""Several upstream pools behind one gateway: one pool of Vocalis servers per model, chosen by a request's `model`.

`vocalis gateway --upstream MODEL=HOST:PORT[,HOST:PORT...]` (repeatable) builds one pool per model; a plain
`--upstream HOST:PORT[,...]` is the default pool (the first pool when none is plain), which takes requests that name
no model. The pools look like one AsyncClient to the routes: synthesis goes to the model's pool (its members taken in
turn; a WebSocket keeps the member it opened with), /v1/models and /v1/audio/voices merge every pool's answer, and an
upload or delete goes to every pool, so that each pool's store has the voice (pools that share one voice store
simply get a new generation of the same clip).

Members are health-checked as a proxy would (gateway/members.py): one that fails its checks, or whose call fails
before reaching it, gets no requests until it passes again. A call that failed with UNAVAILABLE before any answer
(connection refused, a draining replica's refusal) did no work, so it is made again on the next live member; one
that had begun answering is never repeated.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import itertools
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence

import grpc

from vocalis.clients.aio import AsyncClient, AsyncTextSession
from vocalis.clients.errors import FieldViolation, InvalidArgument, NotFound, VocalisError
from vocalis.gateway.members import Member, Watch, never_reached
from vocalis.tts.v1 import metrics_pb2, models_pb2, synthesizer_pb2, voices_pb2

log = logging.getLogger(__name__)


def parse_upstreams(values: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """`--upstream` values into {model: addresses}; "" is the default pool. ValueError says what is wrong."""
    pools: dict[str, tuple[str, ...]] = {}
    for value in values:
        model, _, addresses = value.rpartition("=")
        members = tuple(a.strip() for a in addresses.split(",") if a.strip())
        if not members or any(":" not in member for member in members):
            raise ValueError(f"--upstream {value!r}: expected HOST:PORT[,HOST:PORT...] or MODEL=HOST:PORT[,HOST:PORT...]")
        key = model.strip().lower()
        if key in pools:
            raise ValueError(f"--upstream: two pools for {'the default' if not key else repr(model)}")
        pools[key] = members
    return pools


class Pool:
    """The servers of one model: calls go to the live ones in turn."""

    def __init__(self, clients: Sequence[AsyncClient]) -> None:
        self.members = [Member(client) for client in clients]
        self._turn = itertools.count()

    @property
    def clients(self) -> list[AsyncClient]:
        return [member.client for member in self.members]

    def order(self) -> list[Member]:
        """Every member, the live ones first, starting at the next in turn (the down ones last: if all are down, they
        are tried anyway, and the caller hears why they failed)."""
        start = next(self._turn) % len(self.members)
        turn = self.members[start:] + self.members[:start]
        return [m for m in turn if m.up] + [m for m in turn if not m.up]

    def next(self) -> AsyncClient:
        return self.order()[0].client


class UpstreamPools:
    """The AsyncClient methods the gateway's routes use, spread over one pool per model."""

    def __init__(self, pools: Mapping[str, Sequence[str]], root_certificates: bytes | None = None) -> None:
        if not pools:
            raise ValueError("no upstream pools")
        self.pools = {model: Pool([AsyncClient(a, root_certificates=root_certificates) for a in addresses]) for model, addresses in pools.items()}
        self._watch = Watch([member for pool in self.pools.values() for member in pool.members])
        self.default = "" if "" in self.pools else next(iter(self.pools))
        self.metadata: tuple[tuple[str, str], ...] = ()
        self._names: dict[str, str] = {}
        """Every served name and alias (lower case) -> its pool, learnt from the pools' ListModels."""

    def with_metadata(self, metadata: Sequence[tuple[str, str]]) -> UpstreamPools:
        view = copy.copy(self)
        view.metadata = tuple((key.lower(), value) for key, value in metadata)
        return view

    def _client(self, pool: str) -> AsyncClient:
        self._watch.start()
        return self.pools[pool].next().with_metadata(self.metadata)

    async def _call(self, pool: str, call):  # noqa: ANN001, ANN202
        """`call(client)` on the pool's next live member; made again on the next one while it fails before reaching one."""
        self._watch.start()
        failure: VocalisError | None = None
        for member in self.pools[pool].order():
            try:
                return await call(member.client.with_metadata(self.metadata))
            except VocalisError as error:
                if not never_reached(error):
                    raise
                member.call_failed(error)
                failure = error
        assert failure is not None
        raise failure

    async def close(self) -> None:
        await self._watch.stop()
        for pool in self.pools.values():
            for client in pool.clients:
                await client.close()

    async def _pool_for(self, model: str) -> str:
        key = model.lower()
        if not key:
            return self.default
        if key in self.pools:
            return key
        if key not in self._names:
            await self._learn_names()
        if key in self._names:
            return self._names[key]
        known = ", ".join(sorted({*self._names, *(p for p in self.pools if p)}))
        raise NotFound(
            grpc.StatusCode.NOT_FOUND, f"unknown model {model!r}; this gateway has: {known}", "UNKNOWN_MODEL",
            field_violations=[FieldViolation("model", "no upstream pool serves this model")],
        )

    async def _learn_names(self) -> None:
        for pool in self.pools:
            try:
                models = await self._call(pool, lambda c: c.list_models())
            except VocalisError:
                continue  # that pool is down: its names are learnt next time
            for model in models:
                for name in (model.name, *model.aliases):
                    self._names.setdefault(name.lower(), pool)

    # -- synthesis: the model's pool ------------------------------------------------------

    async def synthesize(
        self, config: synthesizer_pb2.SessionConfig, text: str, *, timeout: float | None = None
    ) -> AsyncIterator[synthesizer_pb2.SynthesizeResponse]:
        pool = await self._pool_for(config.model)
        self._watch.start()
        members = self.pools[pool].order()
        for index, member in enumerate(members):
            answered = False
            try:
                async for response in member.client.with_metadata(self.metadata).synthesize(config, text, timeout=timeout):
                    answered = True
                    yield response
                return
            except VocalisError as error:
                if answered or not never_reached(error) or index == len(members) - 1:
                    raise
                member.call_failed(error)

    async def session(self, config: synthesizer_pb2.SessionConfig, *, timeout: float | None = None) -> AsyncTextSession:
        return await self._client(await self._pool_for(config.model)).session(config, timeout=timeout)

    # -- models: merged -------------------------------------------------------------------

    async def list_models(self) -> list[models_pb2.Model]:
        merged: dict[str, models_pb2.Model] = {}
        for pool, models in zip(self.pools, await self._gather(lambda c: c.list_models()), strict=True):
            for model in models:
                if model.name.lower() in merged:
                    continue
                copy_ = models_pb2.Model()
                copy_.CopyFrom(model)
                copy_.is_default = model.is_default and pool == self.default
                merged[model.name.lower()] = copy_
        return list(merged.values())

    async def get_model(self, name: str) -> models_pb2.Model:
        return await self._call(await self._pool_for(name), lambda c: c.get_model(name))

    # -- voices: merged listings, changes on every pool -------------------------------------

    async def list_voices(self, model: str = "") -> list[voices_pb2.Voice]:
        if model:
            return await self._call(await self._pool_for(model), lambda c: c.list_voices(model))
        merged: dict[str, voices_pb2.Voice] = {}
        for voices in await self._gather(lambda c: c.list_voices()):
            for voice in voices:
                current = merged.get(voice.name.lower())
                if current is None:
                    merged[voice.name.lower()] = current = voices_pb2.Voice()
                    current.CopyFrom(voice)
                else:
                    current.models.extend(m for m in voice.models if m not in current.models)
        return [merged[key] for key in sorted(merged)]

    async def list_voices_page(self, model: str = "", *, page_size: int = 0, page_token: str = "") -> tuple[list[voices_pb2.Voice], str]:
        if model or len(self.pools) == 1:
            pool = await self._pool_for(model) if model else self.default
            return await self._call(pool, lambda c: c.list_voices_page(model, page_size=page_size, page_token=page_token))
        after = _read_token(page_token)
        voices = [v for v in await self.list_voices() if v.name.lower() > after]
        size = page_size or 100
        page = voices[:size]
        more = len(voices) > size
        return page, (_token(page[-1].name.lower()) if more and page else "")

    async def get_voice(self, name: str) -> voices_pb2.Voice:
        return await self._call(self.default, lambda c: c.get_voice(name))

    async def create_voice(self, request: voices_pb2.CreateVoiceRequest) -> voices_pb2.Voice:
        return (await self.upload(request))[0]

    async def upload(self, request: voices_pb2.CreateVoiceRequest) -> tuple[voices_pb2.Voice, dict[str, str]]:
        """Stored through one live member of every pool. The answer is what was stored: the voice when a pool stored
        it, with each pool's outcome ("stored", or why not: that pool takes the voice on the next upload), the error
        when none did."""
        outcomes = await asyncio.gather(*(self._call(pool, lambda c: c.create_voice(request)) for pool in self.pools),
                                        return_exceptions=True)
        stored = [o for o in outcomes if isinstance(o, voices_pb2.Voice)]
        if not stored:
            raise next(o for o in outcomes if isinstance(o, BaseException))
        report: dict[str, str] = {}
        for pool, outcome in zip(self.pools, outcomes, strict=True):
            report[pool or "default"] = "stored" if isinstance(outcome, voices_pb2.Voice) else str(outcome)
            if isinstance(outcome, BaseException):
                log.warning("upload of %r: stored, but not through pool %r: %s", request.name, pool or "default", outcome)
        return stored[0], report

    async def delete_voice(self, name: str) -> str:
        outcomes = await asyncio.gather(*(self._call(pool, lambda c: c.delete_voice(name)) for pool in self.pools), return_exceptions=True)
        deleted = [o for o in outcomes if isinstance(o, str)]
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        other = [f for f in failures if not isinstance(f, NotFound)]
        if other:
            raise other[0]  # a pool that could not answer: the caller should know the delete may be partial
        if deleted:
            return deleted[0]  # NOT_FOUND elsewhere: pools sharing one store, where the first delete took it
        raise failures[0]

    # -- health and metrics ---------------------------------------------------------------

    async def serving(self, service: str = "", *, raise_refusals: bool = False) -> bool:
        """Every pool has a member that serves."""
        return all(
            await asyncio.gather(*(self._any_member(pool, lambda c: c.serving(service, raise_refusals=raise_refusals)) for pool in self.pools))
        )

    async def probe(self, service: str, timeout: float = 2.0) -> tuple[bool, dict]:
        """Every pool has a member that passes `service`. Per pool: the admission state of the first that did, and
        every member's state: "up", "down" (did not pass), or "rising" (passes again, but takes requests only after
        `rise` checks); `degraded` names the pools with a member not up, `down` those with no member passing."""
        self._watch.start()
        answers = await asyncio.gather(*(
            asyncio.gather(*(m.client.with_metadata(self.metadata).probe(service, timeout) for m in pool.members))
            for pool in self.pools.values()
        ))
        admission: dict[str, dict] = {}
        members: dict[str, dict[str, str]] = {}
        degraded, down = [], []
        for (name, pool), results in zip(self.pools.items(), answers, strict=True):
            label = name or "default"
            admission[label] = next((a for ok, a in results if ok), {})
            members[label] = {m.client.target: ("up" if m.up else "rising") if ok else "down"
                              for m, (ok, _) in zip(pool.members, results, strict=True)}
            if any(state != "up" for state in members[label].values()):
                degraded.append(label)
            if not any(ok for ok, _ in results):
                down.append(label)
        return not down, {"pools": admission, "members": members, "degraded": degraded, "down": down}

    async def _any_member(self, pool: str, check) -> bool:  # noqa: ANN001
        for member in self.pools[pool].order():
            if await check(member.client.with_metadata(self.metadata)):
                return True
        return False

    async def get_metrics(self) -> metrics_pb2.GetMetricsResponse:
        """The default pool's metrics (expositions of several servers cannot be merged into one; scrape each replica),
        with the gateway's own view of every pool: its members, and how many take requests (0: the pool is down)."""
        exposition = await self._call(self.default, lambda c: c.get_metrics())
        lines = [
            "# HELP vocalis_gateway_pool_members Upstream servers in each pool of this gateway.",
            "# TYPE vocalis_gateway_pool_members gauge",
            *(f'vocalis_gateway_pool_members{{pool="{name or "default"}"}} {len(pool.members)}' for name, pool in self.pools.items()),
            "# HELP vocalis_gateway_pool_members_up Members of each pool taking requests (passing their health checks).",
            "# TYPE vocalis_gateway_pool_members_up gauge",
            *(f'vocalis_gateway_pool_members_up{{pool="{name or "default"}"}} {sum(m.up for m in pool.members)}'
              for name, pool in self.pools.items()),
        ]
        text, end = exposition.text, ""
        if text.rstrip().endswith("# EOF"):  # OpenMetrics: families go before the end marker
            text, end = text.rstrip()[: -len("# EOF")], "# EOF\n"
        merged = metrics_pb2.GetMetricsResponse()
        merged.CopyFrom(exposition)
        merged.text = text.rstrip("\n") + "\n" + "\n".join(lines) + "\n" + end
        return merged

    async def _gather(self, call) -> list:  # noqa: ANN001
        """`call` on one live member of each pool (the next one when it fails before reaching it)."""
        return list(await asyncio.gather(*(self._call(pool, call) for pool in self.pools)))


def _token(after: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": after, "pools": True}).encode()).decode()


def _read_token(token: str) -> str:
    if not token:
        return ""
    try:
        after = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))["after"]
        if isinstance(after, str):
            return after
    except (ValueError, TypeError, KeyError, binascii.Error, UnicodeError):
        pass
    raise InvalidArgument(
        grpc.StatusCode.INVALID_ARGUMENT, "page_token is not a token this gateway returned", "INVALID_PAGE_TOKEN",
        field_violations=[FieldViolation("page_token", "not a token this gateway returned")],
    )
