"""OmniVoice: a masked-diffusion TTS over 600+ languages (auto voice, voice design, cloning).

config.py reads the checkpoint's files; backbone.py and codec.py are the networks; text.py and
duration.py make a unit's prompt and length; decoding.py is the unmasking loop; stage.py puts
them on the stage runtime; adapter.py says which request fields are honoured; loader.py loads it.
"""
