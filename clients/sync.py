"""Blocking client for the Vocalis gRPC API, for scripts and the CLI.

    from vocalis.clients import Client, session_config

    with Client("localhost:50051", timeout=60) as client:
        client.synthesize_to_file("Hello there.", "hello.wav")
        for chunk in client.stream(session_config(format="pcm"), "Audio as it is made."):
            ...
        with client.session(session_config(format="pcm")) as session:
            session.send("Text can arrive ")
            session.send("bit by bit.")
            session.end()
            audio = b"".join(session.audio())

Every method raises a VocalisError subclass (NotFound, InvalidArgument, ...) on a
non-OK status; `timeout` is a deadline in seconds, per client or per call.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from vocalis.clients.aio import LIST_PAGE_SIZE, MAX_MESSAGE_BYTES, call_metadata, session_requests
from vocalis.clients.errors import from_rpc_error
from vocalis.clients.messages import format_for_path, session_config, voice_request
from vocalis.tts.v1 import models_pb2, models_pb2_grpc, synthesizer_pb2, synthesizer_pb2_grpc, voices_pb2, voices_pb2_grpc


@dataclass
class SynthesisResult:
    """The audio of a finished session and what the server said about it."""

    audio: bytes
    """The encoded audio, all chunks concatenated."""
    started: synthesizer_pb2.SessionStarted
    """What the session resolved to: model, voice, encoding, sample rate."""
    done: synthesizer_pb2.SessionDone
    utterances: list[synthesizer_pb2.UtteranceDone]

    @property
    def sample_rate(self) -> int:
        return self.started.sample_rate

    @property
    def audio_seconds(self) -> float:
        return self.done.audio_seconds

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_bytes(self.audio)
        return path


def collect(responses: Iterator[synthesizer_pb2.SynthesizeResponse]) -> SynthesisResult:
    """Gather the responses of a session into one SynthesisResult."""
    audio = bytearray()
    started = synthesizer_pb2.SessionStarted()
    done = synthesizer_pb2.SessionDone()
    utterances = []
    for response in responses:
        kind = response.WhichOneof("response")
        if kind == "audio":
            audio += response.audio.audio
        elif kind == "session_started":
            started = response.session_started
        elif kind == "utterance_done":
            utterances.append(response.utterance_done)
        elif kind == "session_done":
            done = response.session_done
    return SynthesisResult(bytes(audio), started, done, utterances)


class _End:
    """Put on a session's request queue to half-close it."""


_END = _End()


class TextSession:
    """An open Synthesize call: send text while it runs and read audio as it is made.

    Iterate the session for its responses. `end()` half-closes (no more text: the
    server finishes what is buffered and ends with SessionDone); leaving a `with`
    block before the server is done cancels the call, freeing its work at once.
    """

    def __init__(self, stub: synthesizer_pb2_grpc.SynthesizerStub, config: synthesizer_pb2.SessionConfig, *, timeout, metadata) -> None:
        self._requests: queue.Queue[synthesizer_pb2.SynthesizeRequest | _End] = queue.Queue()
        self._requests.put(synthesizer_pb2.SynthesizeRequest(config=config))
        self._ended = False
        self._call = stub.Synthesize(self._outgoing(), timeout=timeout, metadata=metadata)

    def _outgoing(self) -> Iterator[synthesizer_pb2.SynthesizeRequest]:
        while not isinstance(item := self._requests.get(), _End):
            yield item

    def _put(self, request: synthesizer_pb2.SynthesizeRequest) -> None:
        if self._ended:
            raise RuntimeError("the session was ended; open a new one to send more")
        self._requests.put(request)

    def send(self, text: str) -> None:
        """Append `text` to the session's buffer, verbatim (no separator is added)."""
        self._put(synthesizer_pb2.SynthesizeRequest(text=synthesizer_pb2.TextInput(text=text)))

    def flush(self, flush_id: str = "") -> None:
        """Synthesize what is buffered now; the server answers FlushDone(flush_id)."""
        self._put(synthesizer_pb2.SynthesizeRequest(flush=synthesizer_pb2.Flush(flush_id=flush_id)))

    def clear(self) -> None:
        """Drop buffered text and audio not yet sent (barge-in); the session stays open."""
        self._put(synthesizer_pb2.SynthesizeRequest(clear=synthesizer_pb2.Clear()))

    def end(self) -> None:
        """No more text: the server synthesizes what is buffered and ends the session."""
        if not self._ended:
            self._ended = True
            self._requests.put(_END)

    def cancel(self) -> None:
        """Abort now; the server stops the session's work at once."""
        self._call.cancel()
        self.end()

    def __iter__(self) -> Iterator[synthesizer_pb2.SynthesizeResponse]:
        try:
            yield from self._call
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None

    def audio(self) -> Iterator[bytes]:
        """Only the audio bytes of the responses, as they arrive."""
        for response in self:
            if response.WhichOneof("response") == "audio":
                yield response.audio.audio

    def __enter__(self) -> TextSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class Client:
    """One channel to a Vocalis server; methods raise VocalisError (a subclass per status code) on a non-OK status.

    `timeout` is the default deadline of every call in seconds (None: no deadline);
    `api_key` is sent as `authorization: Bearer <key>`, with any extra `metadata`.
    """

    def __init__(
        self,
        target: str = "localhost:50051",
        *,
        timeout: float | None = None,
        api_key: str | None = None,
        metadata: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.target = target
        self.timeout = timeout
        self.metadata = call_metadata(api_key, metadata)
        self.channel = grpc.insecure_channel(
            target,
            options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES), ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)],
        )
        self._synthesizer = synthesizer_pb2_grpc.SynthesizerStub(self.channel)
        self._models = models_pb2_grpc.ModelsStub(self.channel)
        self._voices = voices_pb2_grpc.VoicesStub(self.channel)
        self._health = health_pb2_grpc.HealthStub(self.channel)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

    def _deadline(self, timeout: float | None) -> float | None:
        return timeout if timeout is not None else self.timeout

    def _unary(self, method, request, timeout: float | None = None):
        try:
            return method(request, timeout=self._deadline(timeout), metadata=self.metadata)
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None

    # Synthesis

    def stream(
        self, config: synthesizer_pb2.SessionConfig | None, text: str, *, timeout: float | None = None
    ) -> Iterator[synthesizer_pb2.SynthesizeResponse]:
        """Every response of a session that synthesizes `text`, as it arrives.

        `config` None: the server's defaults (default model and voice, WAV, streamed).
        Leaving the loop early cancels the call, which stops the work on the server.
        """
        requests = session_requests(config or synthesizer_pb2.SessionConfig(), [text])
        call = self._synthesizer.Synthesize(iter(requests), timeout=self._deadline(timeout), metadata=self.metadata)
        try:
            yield from call
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        finally:
            call.cancel()

    def synthesize(
        self, config: synthesizer_pb2.SessionConfig | None, text: str, *, timeout: float | None = None
    ) -> SynthesisResult:
        """Synthesize `text` and return all of its audio."""
        return collect(self.stream(config, text, timeout=timeout))

    def synthesize_to_file(
        self, text: str, path: str | Path, *, config: synthesizer_pb2.SessionConfig | None = None, timeout: float | None = None
    ) -> SynthesisResult:
        """Synthesize `text` into the file `path`; without `config`, its format follows the extension (else WAV)."""
        if config is None:
            config = session_config(format=format_for_path(str(path)), stream=False)
        result = self.synthesize(config, text, timeout=timeout)
        result.save(path)
        return result

    def session(self, config: synthesizer_pb2.SessionConfig | None = None, *, timeout: float | None = None) -> TextSession:
        """Open an incremental session: send text as it comes (e.g. from an LLM), read audio as it is made."""
        return TextSession(
            self._synthesizer, config or synthesizer_pb2.SessionConfig(), timeout=self._deadline(timeout), metadata=self.metadata
        )

    # Models and voices

    def list_models(self, *, timeout: float | None = None) -> list[models_pb2.Model]:
        return list(self._unary(self._models.ListModels, models_pb2.ListModelsRequest(), timeout).models)

    def get_model(self, name: str, *, timeout: float | None = None) -> models_pb2.Model:
        return self._unary(self._models.GetModel, models_pb2.GetModelRequest(name=name), timeout).model

    def list_voices(self, model: str = "", *, timeout: float | None = None) -> list[voices_pb2.Voice]:
        """Every voice (presets, precomputed, uploaded), or those usable with `model`: all pages, in name order."""
        voices: list[voices_pb2.Voice] = []
        token = ""
        while True:
            page, token = self.list_voices_page(model, page_size=LIST_PAGE_SIZE, page_token=token, timeout=timeout)
            voices.extend(page)
            if not token:
                return voices

    def list_voices_page(
        self, model: str = "", *, page_size: int = 0, page_token: str = "", timeout: float | None = None
    ) -> tuple[list[voices_pb2.Voice], str]:
        """One page of voices and the token of the next ("" after the last page)."""
        request = voices_pb2.ListVoicesRequest(model=model, page_size=page_size, page_token=page_token)
        response = self._unary(self._voices.ListVoices, request, timeout)
        return list(response.voices), response.next_page_token

    def get_voice(self, name: str, *, timeout: float | None = None) -> voices_pb2.Voice:
        return self._unary(self._voices.GetVoice, voices_pb2.GetVoiceRequest(name=name), timeout).voice

    def create_voice(
        self,
        name: str,
        audio: bytes | str | Path,
        *,
        ref_text: str = "",
        consent: str = "",
        description: str = "",
        mime_type: str = "",
        timeout: float | None = None,
    ) -> voices_pb2.Voice:
        """Upload a voice from a reference clip (bytes or a file path); returns the voice as stored."""
        request = voice_request(name, audio, ref_text=ref_text, consent=consent, description=description, mime_type=mime_type)
        return self._unary(self._voices.CreateVoice, request, timeout).voice

    def delete_voice(self, name: str, *, timeout: float | None = None) -> str:
        """Delete an uploaded voice; returns the name the server deleted."""
        return self._unary(self._voices.DeleteVoice, voices_pb2.DeleteVoiceRequest(name=name), timeout).name

    def serving(self, service: str = "", *, timeout: float = 5.0) -> bool:
        """Whether the server's health service reports SERVING (False when unreachable)."""
        try:
            response = self._health.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout, metadata=self.metadata)
        except grpc.RpcError:
            return False
        return response.status == health_pb2.HealthCheckResponse.SERVING
