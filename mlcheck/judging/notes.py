"""Notes a check logs and never fails for (GPU locality that could not be read, GPU telemetry
that is not available): on a partition whose GPUs are stand-ins (gpu_vendor 'stand-in', the
simulated partition) no rank ever uses a GPU, so every test would read the same note: it is said
once per session and kind. On real GPUs a test that could not read them says so each time.
"""

#: (partition, kind) of the notes said in this session (this process: ReFrame runs every test of
#: a session in it)
_SAID_ON_STAND_INS = set()


def to_say(settings, kind, note):
    """The note of `kind` ('locality', 'telemetry') to log for one test, or None."""
    if not note or not settings.stand_in_gpus:
        return note
    if (settings.partition, kind) in _SAID_ON_STAND_INS:
        return None
    _SAID_ON_STAND_INS.add((settings.partition, kind))
    return f'{note} (the partition\'s GPUs are stand-ins: said once per session)'
