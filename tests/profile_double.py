"""A small driver profile for unit tests: a handful of escapes, classes, controls and GSP messages.

The numbers, sizes and offsets are NVIDIA facts (580 branch) as the shipped
profiles carry them; only a few structs are here, so tests of the decoders'
machinery run without the shipped profiles.  ``gsp_control_layout`` lets a
test swap in the 24-byte rpc_gsp_rm_control of the 570 branch.
"""

from __future__ import annotations

from types import MappingProxyType

from rmtrace.decoders.profiles.model import (
    ClassInfo, Control, DriverProfile, Escape, Field, Layout, PointerField, UvmCommand,
)


def f(name, offset, size, type_="NvU32", kind="uint", dims=(), elem=None, elem_kind=None, bits=None):
    count = 1
    for d in dims:
        count *= d
    return Field(name, offset, size, type_, "array" if dims else kind, count=count if dims else 1, dims=tuple(dims),
                 elem=elem, elem_kind=elem_kind, bit_offset=bits[0] if bits else None, bit_size=bits[1] if bits else None)


def h(name, offset):
    return f(name, offset, 4, "NvHandle")


def u8s(name, offset, n, kind="uint"):
    return f(name, offset, n, f"NvU8[{n}]", dims=(n,), elem="NvU8", elem_kind=kind)


def flex(name, offset, elem="NvU8", elem_kind="uint"):
    return Field(name, offset, 0, f"{elem}[0]", "array", count=0, dims=(0,), elem=elem, elem_kind=elem_kind)


def L(name, size, *fields, kind="struct"):
    return name, Layout(name, size, tuple(fields), kind)


GSP_CONTROL_575 = L("rpc_gsp_rm_control_v03_00", 40,
                    h("hClient", 0), h("hObject", 4), f("cmd", 8, 4), f("status", 12, 4), f("paramsSize", 16, 4),
                    f("rmapiRpcFlags", 20, 4), f("rmctrlFlags", 24, 4), f("rmctrlAccessRight", 28, 4),
                    f("reserved0", 32, 8, "NvU64"), flex("params", 40))
GSP_CONTROL_570 = L("rpc_gsp_rm_control_v03_00", 24,
                    h("hClient", 0), h("hObject", 4), f("cmd", 8, 4), f("status", 12, 4), f("paramsSize", 16, 4),
                    f("flags", 20, 4), flex("params", 24))

LAYOUTS = dict([
    L("NVOS00_PARAMETERS", 16, h("hRoot", 0), h("hObjectParent", 4), h("hObjectOld", 8), f("status", 12, 4, "NvV32")),
    L("NVOS54_PARAMETERS", 32, h("hClient", 0), h("hObject", 4), f("cmd", 8, 4, "NvV32"), f("flags", 12, 4),
      f("params", 16, 8, "NvP64", "ptr"), f("paramsSize", 24, 4), f("status", 28, 4, "NvV32")),
    L("NVOS21_PARAMETERS", 32, h("hRoot", 0), h("hObjectParent", 4), h("hObjectNew", 8), f("hClass", 12, 4, "NvV32"),
      f("pAllocParms", 16, 8, "NvP64", "ptr"), f("paramsSize", 24, 4), f("status", 28, 4, "NvV32")),
    L("NVOS64_PARAMETERS", 48, h("hRoot", 0), h("hObjectParent", 4), h("hObjectNew", 8), f("hClass", 12, 4, "NvV32"),
      f("pAllocParms", 16, 8, "NvP64", "ptr"), f("pRightsRequested", 24, 8, "NvP64", "ptr"), f("paramsSize", 32, 4),
      f("flags", 36, 4), f("status", 40, 4, "NvV32")),
    L("nv_ioctl_xfer_t", 16, f("cmd", 0, 4), f("size", 4, 4), f("ptr", 8, 8, "NvP64", "ptr")),
    L("NV0000_ALLOC_PARAMETERS", 120, h("hClient", 0), f("processID", 4, 4),
      f("processName", 8, 100, "char[100]", dims=(100,), elem="char", elem_kind="char"),
      f("pOsPidInfo", 112, 8, "NvP64", "ptr")),
    L("NV0080_ALLOC_PARAMETERS", 56, f("deviceId", 0, 4), h("hClientShare", 4), h("hTargetClient", 8),
      h("hTargetDevice", 12), f("flags", 16, 4, "NvV32"), f("vaSpaceSize", 24, 8, "NvU64"),
      f("vaStartInternal", 32, 8, "NvU64"), f("vaLimitInternal", 40, 8, "NvU64"), f("vaMode", 48, 4, "NvV32")),
    L("NV2080_CTRL_GPU_INFO", 8, f("index", 0, 4), f("data", 4, 4)),
    L("NV2080_CTRL_GPU_GET_INFO_V2_PARAMS", 564, f("gpuInfoListSize", 0, 4),
      f("gpuInfoList", 4, 560, "NV2080_CTRL_GPU_INFO[70]", dims=(70,), elem="NV2080_CTRL_GPU_INFO", elem_kind="struct")),
    L("NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS", 16, f("numClasses", 0, 4), f("classList", 8, 8, "NvP64", "ptr")),
    L("NV2080_CTRL_BUS_GET_PCI_INFO_PARAMS", 16, f("pciDeviceId", 0, 4), f("pciSubSystemId", 4, 4),
      f("pciRevisionId", 8, 4), f("pciExtDeviceId", 12, 4)),
    L("NvProcessorUuid", 16, u8s("uuid", 0, 16)),
    L("UVM_REGISTER_GPU_PARAMS", 40, f("gpuUuid", 0, 16, "NvProcessorUuid", "struct"), f("numaEnabled", 16, 1, "NvBool", "bool"),
      f("numaNodeId", 20, 4, "NvS32", "int"), f("rmCtrlFd", 24, 4, "NvS32", "int"), h("hClient", 28), h("hSmcPartRef", 32),
      f("rmStatus", 36, 4, "NV_STATUS")),
    L("UVM_INITIALIZE_PARAMS", 16, f("flags", 0, 8, "NvU64"), f("rmStatus", 8, 4, "NV_STATUS")),
    L("BITS_PARAMS", 8, f("a", 0, 4, bits=(0, 3)), f("b", 0, 4, bits=(3, 5)), f("c", 4, 2, "NvU16"),
      f("d", 6, 1, "NvU8"), f("e", 7, 1, "NvU8", bits=(4, 4))),
    L("rpc_message_rpc_union_field_v03_00", 4, f("spare", 0, 4), f("cpuRmGfid", 0, 4), kind="union"),
    L("rpc_message_header_v03_00", 32, f("header_version", 0, 4), f("signature", 4, 4), f("length", 8, 4),
      f("function", 12, 4), f("rpc_result", 16, 4), f("rpc_result_private", 20, 4), f("sequence", 24, 4),
      f("u", 28, 4, "rpc_message_rpc_union_field_v03_00", "union"),
      Field("rpc_message_data", 32, 0, "rpc_generic_union[0]", "array", count=0, dims=(0,),
            elem="rpc_generic_union", elem_kind="union")),
    L("GSP_MSG_QUEUE_ELEMENT", 80, u8s("authTagBuffer", 0, 16), u8s("aadBuffer", 16, 16), f("checkSum", 32, 4),
      f("seqNum", 36, 4), f("elemCount", 40, 4), f("rpc", 48, 32, "rpc_message_header_v03_00", "struct")),
    GSP_CONTROL_575,
    L("rpc_gsp_rm_alloc_v03_00", 32, h("hClient", 0), h("hParent", 4), h("hObject", 8), f("hClass", 12, 4),
      f("status", 16, 4), f("paramsSize", 20, 4), f("flags", 24, 4), u8s("reserved", 28, 4), flex("params", 32)),
    L("NVOS00_PARAMETERS_v03_00", 16, h("hRoot", 0), h("hObjectParent", 4), h("hObjectOld", 8), f("status", 12, 4, "NvV32")),
    L("rpc_free_v03_00", 16, f("params", 0, 16, "NVOS00_PARAMETERS_v03_00", "struct")),
    L("rpc_post_event_v17_00", 32, h("hClient", 0), h("hEvent", 4), f("notifyIndex", 8, 4), f("data", 12, 4),
      f("info16", 16, 2, "NvU16"), f("status", 20, 4), f("eventDataSize", 24, 4), f("bNotifyList", 28, 1, "NvBool", "bool"),
      flex("eventData", 29)),
    L("rpc_init_done_v17_00", 4, f("not_used", 0, 4)),
])

CONTROLS = [
    Control(0x20800102, "NV2080_CTRL_CMD_GPU_GET_INFO_V2", "NV2080_CTRL_GPU_GET_INFO_V2_PARAMS", 564),
    Control(0x20800110, "NV2080_CTRL_CMD_GPU_GET_NAME_STRING", None, None),
    Control(0x20800111, "NV2080_CTRL_CMD_GPU_GET_SHORT_NAME_STRING", None, None),
    Control(0x20801801, "NV2080_CTRL_CMD_BUS_GET_PCI_INFO", "NV2080_CTRL_BUS_GET_PCI_INFO_PARAMS", 16),
    Control(0x00800201, "NV0080_CTRL_CMD_GPU_GET_CLASSLIST", "NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS", 16),
]


class _Profile(DriverProfile):
    """A DriverProfile whose embedded pointers are given directly (the real one derives them)."""

    def embedded_pointers(self, cmd):
        return POINTERS.get(cmd, ())


POINTERS = {0x00800201: (PointerField(8, 0, 4, 4, None, "classList"),)}


def make_profile(version="580.142", gsp_control=GSP_CONTROL_575, status_8b="NV_ERR_DMA_XFER_FAILED"):
    layouts = dict(LAYOUTS)
    layouts[gsp_control[0]] = gsp_control[1]
    return _Profile(
        version=version, branch=version.split(".")[0],
        escapes=MappingProxyType({e.nr: e for e in (
            Escape(0x29, "NV_ESC_RM_FREE", "NVOS00_PARAMETERS", 16, 0xC0104629, "any"),
            Escape(0x2A, "NV_ESC_RM_CONTROL", "NVOS54_PARAMETERS", 32, 0xC020462A, "any"),
            Escape(0x2B, "NV_ESC_RM_ALLOC", "NVOS21_PARAMETERS", 32, 0xC020462B, "any"),
            Escape(211, "NV_ESC_IOCTL_XFER_CMD", "nv_ioctl_xfer_t", 16, None, "any"),
            Escape(0x99, "NV_ESC_BITS_TEST", "BITS_PARAMS", 8, None, "any"),
        )}),
        classes=MappingProxyType({c.id: c for c in (
            ClassInfo(0x0041, "NV01_ROOT_CLIENT", "NV0000_ALLOC_PARAMETERS"),
            ClassInfo(0x0080, "NV01_DEVICE_0", "NV0080_ALLOC_PARAMETERS"),
            ClassInfo(0x2080, "NV20_SUBDEVICE_0", None),
            ClassInfo(0xC86F, "HOPPER_CHANNEL_GPFIFO_A", None),
        )}),
        controls=MappingProxyType({c.cmd: c for c in CONTROLS}),
        uvm=MappingProxyType({u.nr: u for u in (
            UvmCommand(37, "UVM_REGISTER_GPU", "UVM_REGISTER_GPU_PARAMS", 40),
            UvmCommand(0x30000001, "UVM_INITIALIZE", "UVM_INITIALIZE_PARAMS", 16),
        )}),
        status=MappingProxyType({0: "NV_OK", 0x1F: "NV_ERR_INVALID_ARGUMENT", 0x57: "NV_ERR_OBJECT_NOT_FOUND",
                                 0x8B: status_8b, 0x10001: "NV_WARN_HOT_SWITCH"}),
        gsp_functions=MappingProxyType({10: "FREE", 71: "CONTINUATION_RECORD", 76: "GSP_RM_CONTROL", 103: "GSP_RM_ALLOC"}),
        gsp_events=MappingProxyType({0x1001: "GSP_INIT_DONE", 0x1003: "POST_EVENT"}),
        gsp_payloads=MappingProxyType({10: "rpc_free_v03_00", 76: "rpc_gsp_rm_control_v03_00",
                                       103: "rpc_gsp_rm_alloc_v03_00", 0x1001: "rpc_init_done_v17_00",
                                       0x1003: "rpc_post_event_v17_00"}),
        layouts=MappingProxyType(layouts),
        constants=MappingProxyType({"rpc_signature": 0x43505256, "rpc_header_version": 0x03000000,
                                    "msgq_element_size": 4096, "msgq_prefix_size": 48, "max_rpc_size": 65488}),
    )
