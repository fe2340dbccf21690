"""Hugging Face `generate` without a host wait per token.

transformers' decoding loop asks every step whether all sequences have finished
(`unfinished_sequences.max() == 0` read on the host), which waits for the step's GPU work
to end before the host may queue the next one: host and GPU take turns. On Apple's mps it
instead copies that flag with `non_blocking=True`, records an event and reads the flag one
step later (`DeferredStopCheck`: one extra forward at the end, which it undoes), so the
host runs a step ahead. Our non-blocking copies to the host are asynchronous (settled when
an event recorded after them completes), which is what that scheme needs; transformers
just enables it for mps only.

    import torch_webgpu.generation
    torch_webgpu.generation.defer_stop_check()            # webgpu
    torch_webgpu.generation.defer_stop_check(("webgpu", "cuda"))

changes `generate` in this process for those device types (the same tokens: the extra step
is dropped). `defer_stop_check(())` restores transformers' own choice.
"""
from __future__ import annotations

import torch

_original = None


def defer_stop_check(device_types=("webgpu",)) -> bool:
    """Makes transformers defer its stop check on `device_types` as it does on mps (where
    the rest of its conditions, such as a croppable cache, still apply). Returns False, and
    changes nothing, where this transformers has no deferred stop check."""
    global _original
    try:
        from transformers.generation import utils
    except ImportError:
        return False
    deferred = getattr(utils, "DeferredStopCheck", None)
    if deferred is None or not hasattr(deferred, "is_supported"):
        return False
    if _original is None:
        _original = deferred.is_supported
    original, types = _original, frozenset(device_types)

    def is_supported(device, cache, cache_is_returned, is_assistant):
        device = torch.device(device)
        # transformers' own rules, asked as for mps (a device object of that type needs no
        # mps hardware).
        return original(torch.device("mps") if device.type in types else device, cache, cache_is_returned,
                        is_assistant)

    deferred.is_supported = staticmethod(is_supported) if types else staticmethod(original)
    return True
