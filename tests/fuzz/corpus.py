"""Inputs an independent attack run used against the server (issue 13), replayed by test_corpus.py on every run.

Each entry is an input and what a healthy server answers; none may take the process down, answer 5xx /
INTERNAL for a client's fault, or log a traceback.
"""

from __future__ import annotations

from vocalis.tts.v1 import synthesizer_pb2 as pb

CRASH_TEXTS = [
    "U.S.A." * 50,
    "a." * 150,
    "A.B.C.D.E.F.G.H.I.J.K.L.M.N.O.P.Q.R.S.T.U.V.W.X.Y.Z." * 6,
]
"""Texts that made Piper's bundled espeak-ng segfault inside the server process (piper-tts 1.8.0)."""

LONG_UNITS = [
    "漢" * 300,
    "x" * 1000,
]
"""Units with no place to split, that grew onnxruntime's arena by gigabytes."""

HTTP_BODIES: list[tuple[bytes, int]] = [
    (b'{"input": "Hi.", "extra_params": {"noise_scale": NaN}}', 400),
    (b'{"input": "Hi.", "extra_params": {"noise_scale": Infinity}}', 400),
    (b'{"input": "Hi.", "extra_params": {"noise_scale": -Infinity}}', 400),
    (('{"input": "Hi.", "extra_params": ' + '{"a": ' * 60 + "1" + "}" * 60 + "}").encode(), 400),
    (('{"input": "Hi.", "extra_params": ' + "[" * 5000 + "]" * 5000 + "}").encode(), 400),
    (b'{"input": "Hi.", "extra_params": {"k": "a\\udc00b"}}', 400),
    (b'{"input": "Hi.", "extra_params": {"a\\udc00b": 1}}', 400),
    (b'{"input": "a\\udc00b"}', 400),
    (b'{"input": "Hi.", "references": [{"audio_path": "\\ud800"}]}', 400),
    (b'{"input": "Hi.", "speaker_embedding": [NaN]}', 400),
    (b'{"input": "Hi.", "ref_audio": "/etc/passwd\\u0000"}', 400),
    (b'{"input": "Hi.", "instructions": "' + b"x" * 20_000_000 + b'"}', 413),
]
"""HTTP bodies for POST /v1/audio/speech, with the status a healthy server answers."""

AUTHORIZATIONS = [b"Bearer a\tb", b"Bearer caf\xc3\xa9", b"Bearer \x01", b"Bearer \x7f"]
"""Authorization headers gRPC metadata cannot carry: 401, never 500."""

_CONFIG = pb.SynthesizeRequest(config=pb.SessionConfig()).SerializeToString()
_TEXT = pb.SynthesizeRequest(text=pb.TextInput(text="Hi.")).SerializeToString()
GRPC_STREAMS: list[list[bytes]] = [
    [b"\xff\xff\xff\xff"],
    [b"\x0a"],
    [_CONFIG, b"\x12\x05\x0a\x03\xed\xa0\x80"],  # text with a lone surrogate in UTF-8
    [_CONFIG, _TEXT, b"\x1a\x80\x80\x80\x80\x10"],  # a flush whose length runs past the message
    [_CONFIG, _TEXT, pb.SynthesizeRequest(flush=pb.Flush(flush_id="f" * 1_000_000)).SerializeToString()],
]
"""Raw Synthesize streams: INVALID_ARGUMENT (or another client status), never INTERNAL or UNKNOWN."""

WS_FRAMES: list[str] = [
    '{"type": "input.text", "text": "a\\udc00b."}',
    '{"type": "input.flush", "flush_id": "\\ud800"}',
    '{"type": "input.flush", "flush_id": {"deep": [[[[[]]]]]}}',
    '{"type": "input.text", "text": ' + "[" * 5000 + "]" * 5000 + "}",
    "x" * 4_500_000,
]
"""WebSocket frames after a session.config: each an `error` frame, and the session goes on."""
