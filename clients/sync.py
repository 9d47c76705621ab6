"""Blocking client for the Vocalis gRPC API, for scripts and the CLI."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import grpc

from vocalis.clients.aio import MAX_MESSAGE_BYTES, session_requests
from vocalis.clients.errors import from_rpc_error
from vocalis.tts.v1 import synthesizer_pb2, synthesizer_pb2_grpc


@dataclass
class SynthesisResult:
    """The audio of a finished session and what the server said about it."""

    audio: bytes
    started: synthesizer_pb2.SessionStarted
    done: synthesizer_pb2.SessionDone
    utterances: list[synthesizer_pb2.UtteranceDone]


class Client:
    """One channel to a Vocalis server; methods raise VocalisError on a non-OK status."""

    def __init__(self, target: str, *, timeout: float | None = None) -> None:
        self.timeout = timeout
        self.channel = grpc.insecure_channel(
            target,
            options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES), ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)],
        )
        self._synthesizer = synthesizer_pb2_grpc.SynthesizerStub(self.channel)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

    def stream(self, config: synthesizer_pb2.SessionConfig, text: str) -> Iterator[synthesizer_pb2.SynthesizeResponse]:
        """Every response of a session that synthesizes `text`, as it arrives."""
        call = self._synthesizer.Synthesize(iter(session_requests(config, [text])), timeout=self.timeout)
        try:
            yield from call
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        finally:
            call.cancel()

    def synthesize(self, config: synthesizer_pb2.SessionConfig, text: str) -> SynthesisResult:
        """Synthesize `text` and return all of its audio."""
        audio = bytearray()
        started = synthesizer_pb2.SessionStarted()
        done = synthesizer_pb2.SessionDone()
        utterances = []
        for response in self.stream(config, text):
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
