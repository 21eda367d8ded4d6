"""What every decoder of one profile shares: the profile, its construct definitions, its names."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from rmtrace.decoders.names import Names, names
from rmtrace.decoders.profiles.model import DriverProfile
from rmtrace.decoders.structs import Definitions, Flex, definitions

FLEX_RULES = {
    "rpc_message_data": Flex("length", bias_is_size=True),  # rpc_message_header: length counts the header
    "params": Flex("paramsSize"),                            # rpc_gsp_rm_control / rpc_gsp_rm_alloc
    "eventData": Flex("eventDataSize"),                      # rpc_post_event
    "rcJournalBuffer": Flex("rcJournalBufferSize"),          # rpc_rc_triggered
    "commandBuffer": Flex("bufferSizeDWord", elem_size=4),   # rpc_run_cpu_sequencer
}
"""Which member sizes each flexible array member NVIDIA's structs end in (by member name)."""


@dataclass(frozen=True)
class Context:
    profile: DriverProfile
    defs: Definitions
    names: Names


_CONTEXTS: weakref.WeakKeyDictionary[Any, Context] = weakref.WeakKeyDictionary()


def context(profile: DriverProfile) -> Context:
    """The (cached) shared decoding context of ``profile``."""
    found = _CONTEXTS.get(profile)
    if found is None:
        found = _CONTEXTS[profile] = Context(profile, definitions(profile, FLEX_RULES), names(profile))
    return found
