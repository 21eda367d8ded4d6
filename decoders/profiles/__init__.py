"""Driver profiles: the numbers and struct layouts of one NVIDIA driver version, as data.

    from rmtrace.decoders.profiles import select_profile
    profile, warning = select_profile(trace.meta.get("driver_version"))
    control = profile.controls[0x20800102]        # NV2080_CTRL_CMD_GPU_GET_INFO_V2
    layout = profile.layouts[control.params]

See model.py for what a profile holds, loader.py for how one is chosen and
generate.py for how one is made from NVIDIA's open-gpu-kernel-modules headers.
"""

from rmtrace.decoders.profiles.loader import available_profiles, load_profile, select_profile
from rmtrace.decoders.profiles.model import (
                                             ClassInfo,
                                             Control,
                                             DriverProfile,
                                             Escape,
                                             Field,
                                             Layout,
                                             PointerField,
                                             UvmCommand,
)

__all__ = ["available_profiles", "load_profile", "select_profile", "DriverProfile", "Escape", "ClassInfo", "Control",
           "UvmCommand", "Field", "Layout", "PointerField"]
