"""Child process of the phonemizer pool: Piper's text front end (espeak-ng and the rest), one text in, phonemes out.

Run as a script (not `-m`), so that it imports piper and nothing of Vocalis:
    python phonemizer_worker.py VOICE_CONFIG_JSON READ_FD WRITE_FD
It answers ("ready", None) once espeak-ng is initialized, then for each text it
receives ("ok", phonemes by sentence) or ("error", message); for a list of words, ("ok", the phonemes
of each word said on its own). A native crash in
the front end ends only this process; the pool sees the pipe close and restarts it.
"""

import sys

sys.path.pop(0)  # this folder holds modules named voice.py, stage.py: never let them shadow a library's

import json  # noqa: E402
from multiprocessing.connection import Connection  # noqa: E402
from pathlib import Path  # noqa: E402


def main(config_path: str, read_fd: int, write_fd: int) -> None:
    from piper import PiperConfig, PiperVoice

    inbox = Connection(read_fd, writable=False)
    outbox = Connection(write_fd, readable=False)
    config = PiperConfig.from_dict(json.loads(Path(config_path).read_text(encoding="utf-8")))
    voice = PiperVoice(session=None, config=config)  # type: ignore[arg-type] - the front end needs no ONNX session
    voice.phonemize("ready")  # loads espeak-ng's data now rather than on the first request
    outbox.send(("ready", None))
    while True:
        try:
            text = inbox.recv()
        except EOFError:  # the server closed the pipe (or died): nothing left to do
            return
        try:
            if isinstance(text, list):  # words, each phonemized on its own (for word times)
                outbox.send(("ok", [[p for sentence in voice.phonemize(word) for p in sentence] for word in text]))
            else:
                outbox.send(("ok", voice.phonemize(text)))
        except Exception as exc:  # noqa: BLE001 - a Python-level refusal goes back to the caller
            outbox.send(("error", f"{type(exc).__name__}: {exc}"))


if __name__ == "__main__":
    try:
        main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
    except (BrokenPipeError, EOFError, KeyboardInterrupt):  # the server went away first: nothing to report
        pass
