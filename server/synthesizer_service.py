"""The Synthesizer service: opens a session from its config message, then lets `Session` run it."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import uuid
from collections.abc import AsyncIterator

import grpc

from vocalis.server import field_lengths, field_policy, session_config
from vocalis.server.auth import finish_reading
from vocalis.server.config import Limits
from vocalis.server.engine import Engine
from vocalis.server.errors import StatusError, abort, from_request_error
from vocalis.server.log_format import REQUEST_ID
from vocalis.server.reference_audio import ReferenceResolver
from vocalis.server.session import Session
from vocalis.server.voice_resolver import VoiceResolver
from vocalis.stages.api.errors import RequestError, SynthesisFailed
from vocalis.tts.v1 import synthesizer_pb2 as pb
from vocalis.tts.v1 import synthesizer_pb2_grpc

log = logging.getLogger(__name__)


class SynthesizerService(synthesizer_pb2_grpc.SynthesizerServicer):
    def __init__(
        self, engine: Engine, limits: Limits, references: ReferenceResolver | None = None, strict_fields: bool = False
    ) -> None:
        self.engine = engine
        self.strict_fields = strict_fields
        """Refuse what the field policy would accept with a warning (`vocalis serve --strict-fields`)."""
        self.limits = limits
        self.voices = VoiceResolver(references)

    async def Synthesize(
        self, request_iterator: AsyncIterator[pb.SynthesizeRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.SynthesizeResponse]:
        try:
            session = await self._open(request_iterator)
        except StatusError as error:
            # Its config is read: what a client sends with it comes at once, so a short first wait.
            await finish_reading(request_iterator, first_wait_s=0.1)  # let the client finish writing (see finish_reading)
            await abort(context, error)
            return
        except Exception:  # noqa: BLE001
            log.exception("opening a session failed")
            await abort(context, StatusError(grpc.StatusCode.INTERNAL, "internal error opening the session", "INTERNAL"))
            return
        yield pb.SynthesizeResponse(session_started=session.started())
        for warning in session.resolved.warnings:
            yield pb.SynthesizeResponse(warning=warning)
        try:
            async with contextlib.aclosing(session.run(request_iterator)) as responses:
                async for response in responses:
                    yield response
        except StatusError as error:
            await abort(context, error)
        except SynthesisFailed as error:
            await abort(context, StatusError(grpc.StatusCode.INTERNAL, str(error), "SYNTHESIS_FAILED"))
        except RequestError as error:  # a stage refused an utterance's input (e.g. a tag the model does not take)
            await abort(context, from_request_error(error))
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception:  # noqa: BLE001 - a bug fails this session only, with a status the caller can read
            log.exception("session %s failed", session.request_id)
            await abort(
                context,
                StatusError(grpc.StatusCode.INTERNAL, f"internal error in session {session.request_id}", "INTERNAL"),
            )

    async def _open(self, requests: AsyncIterator[pb.SynthesizeRequest]) -> Session:
        try:
            first = await asyncio.wait_for(anext(requests), self.limits.first_message_timeout_s)
        except StopAsyncIteration:
            raise StatusError(
                grpc.StatusCode.FAILED_PRECONDITION, "the stream ended before its config message", "CONFIG_REQUIRED"
            ) from None
        except TimeoutError:
            raise StatusError(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"no config message within {self.limits.first_message_timeout_s:g} s",
                "CONFIG_TIMEOUT",
            ) from None
        if first.WhichOneof("request") != "config":
            raise StatusError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"the first message must be config, got {first.WhichOneof('request') or 'an empty message'}",
                "CONFIG_REQUIRED",
            )
        config = first.config
        field_lengths.check(config)  # before a name is looked up, or a value could come back in the status
        model = self.engine.model(config.model)
        splitter = session_config.text_splitter(config, whole_input=model.capabilities.whole_input)
        model_config = pb.SessionConfig()
        model_config.CopyFrom(config)
        warnings = field_policy.apply(model_config, model, self.strict_fields)  # drops what it accepts and reports
        settings = session_config.validate(model_config, model, self.limits)  # before any voice is fetched or decoded
        try:
            voice = await self.voices.resolve(model_config, model)
        except StatusError as error:
            ignored = field_policy.ignore_unknown_voice(model_config, model, error, self.strict_fields)
            if ignored is None:
                raise
            warnings.append(ignored)
            voice = await self.voices.resolve(model_config, model)
        resolved = session_config.resolve(settings, voice)
        resolved = dataclasses.replace(resolved, warnings=(*warnings, *resolved.warnings))
        request_id = config.request_id or f"tts-{uuid.uuid4().hex}"
        REQUEST_ID.set(request_id)
        return Session(self.engine, self.limits, resolved, splitter, request_id, config.delivery)
