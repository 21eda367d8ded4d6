"""A tiny stand-in for an open-gpu-kernel-modules tree, written for the generator tests.

It has the tree's layout and one or two of everything the generator reads
(escapes and their handlers, classes and RS_ENTRY rows, engine types, control
categories, FINN-built and legacy control commands, UVM ioctls, the vGPU RPC
enums and structs, the GSP queue element), with the C shapes that make DWARF
reading hard: bitfields, an unnamed bitfield, a union, nested arrays of
structs, a flexible array member, char arrays and typedefs of typedefs.
All text here is ours.
"""

from __future__ import annotations

from pathlib import Path

SDK = "src/common/sdk/nvidia/inc"
UNIX = "src/nvidia/arch/nvalloc/unix"
KERNEL = "src/nvidia/inc/kernel"

FILES = {
    "version.mk": "NVIDIA_VERSION = 999.1.2\n",
    f"{SDK}/nvtypes.h": """
#ifndef SYN_NVTYPES_H
#define SYN_NVTYPES_H
typedef unsigned char NvU8;
typedef unsigned short NvU16;
typedef unsigned int NvU32;
typedef unsigned long long NvU64;
typedef signed int NvS32;
typedef NvU8 NvBool;
typedef NvU32 NvHandle;
typedef NvU32 NvV32;
#define NV_DECLARE_ALIGNED(TYPE_VAR, ALIGN) TYPE_VAR __attribute__((aligned(ALIGN)))
typedef NV_DECLARE_ALIGNED(void *NvP64, 8);
#endif
""",
    f"{SDK}/nvstatus.h": """
#ifndef SYN_NVSTATUS_H
#define SYN_NVSTATUS_H
typedef NvU32 NV_STATUS;
enum { NV_OK = 0, NV_ERR_GENERIC = 0xFFFF, NV_ERR_INVALID_ARGUMENT = 0x1F, NV_WARN_NOTHING_TO_DO = 0x10001 };
#endif
""",
    f"{SDK}/nvos.h": """
#ifndef SYN_NVOS_H
#define SYN_NVOS_H
#include "nvstatus.h"
#define NV01_ROOT (0x0U)
typedef struct {
    NvHandle hClient; NvHandle hObject; NvV32 cmd; NvU32 flags;
    NV_DECLARE_ALIGNED(NvP64 params, 8); NvU32 paramsSize; NvV32 status;
} NVOS54_PARAMETERS;
typedef struct {
    NvHandle hRoot; NvHandle hObjectParent; NvHandle hObjectNew; NvV32 hClass;
    NV_DECLARE_ALIGNED(NvP64 pAllocParms, 8); NvU32 paramsSize; NvV32 status;
} NVOS21_PARAMETERS;
typedef struct {
    NvHandle hRoot; NvHandle hObjectParent; NvHandle hObjectNew; NvV32 hClass;
    NV_DECLARE_ALIGNED(NvP64 pAllocParms, 8); NV_DECLARE_ALIGNED(NvP64 pRightsRequested, 8);
    NvU32 paramsSize; NvU32 flags; NvV32 status;
} NVOS64_PARAMETERS;
#define NVOS54_FLAGS_FINN_SERIALIZED 0x00000004
#endif
""",
    f"{SDK}/class/cl0000.h": """
#define NV01_ROOT (0x0U)
typedef struct NV0000_ALLOC_PARAMETERS {
    NvHandle hClient; NvU32 processID; char processName[100];
    NV_DECLARE_ALIGNED(NvP64 pOsPidInfo, 8);
} NV0000_ALLOC_PARAMETERS;
""",
    f"{SDK}/class/clc56f.h": "#define AMPERE_CHANNEL_GPFIFO_A (0x0000C56F)\n",
    # Engine types: an alias defined before its numbered name, a second copy-engine range,
    # and the count, end-marker and function-like macros that are not engine types.
    f"{SDK}/class/cl2080_notification.h": """
#define NV2080_ENGINE_TYPE_NULL (0x00000000)
#define NV2080_ENGINE_TYPE_GRAPHICS (0x00000001)
#define NV2080_ENGINE_TYPE_GR0 NV2080_ENGINE_TYPE_GRAPHICS
#define NV2080_ENGINE_TYPE_COPY0 (0x00000009)
#define NV2080_ENGINE_TYPE_COPY1 (0x0000000a)
#define NV2080_ENGINE_TYPE_BSP (0x00000013)
#define NV2080_ENGINE_TYPE_NVDEC0 NV2080_ENGINE_TYPE_BSP
#define NV2080_ENGINE_TYPE_CIPHER (0x00000023)
#define NV2080_ENGINE_TYPE_TSEC NV2080_ENGINE_TYPE_CIPHER
#define NV2080_ENGINE_TYPE_COPY10 (0x00000034)
#define NV2080_ENGINE_TYPE_LAST (0x00000035)
#define NV2080_ENGINE_TYPE_ALLENGINES (0xffffffff)
#define NV2080_ENGINE_TYPE_COPY_SIZE 10
#define NV2080_ENGINE_TYPE_NVENC_SIZE 3
#define NV2080_ENGINE_TYPE_COPY(i) (((i) < 10) ? (NV2080_ENGINE_TYPE_COPY0 + (i)) : (NV2080_ENGINE_TYPE_COPY10 + (i) - 10))
""",
    f"{SDK}/alloc/alloc_channel.h": """
typedef struct NV_MEMORY_DESC_PARAMS { NvU64 base; NvU64 size; NvU32 addressSpace; NvU32 cacheAttrib; } NV_MEMORY_DESC_PARAMS;
typedef union NV_CHANNEL_ROUTE { NvU32 engineType; NvU8 bytes[4]; } NV_CHANNEL_ROUTE;
typedef struct NV_CHANNEL_ALLOC_PARAMS {
    NvHandle hObjectError;
    NvHandle hUserdMemory[8];
    NV_DECLARE_ALIGNED(NV_MEMORY_DESC_PARAMS mem[2][3], 8);
    NV_CHANNEL_ROUTE route;
    struct { NvU16 lo; NvU16 hi; } window;
} NV_CHANNEL_ALLOC_PARAMS;
typedef NV_CHANNEL_ALLOC_PARAMS NV_CHANNELGPFIFO_ALLOCATION_PARAMETERS;
""",
    # Category defines: a block from RESERVED on, a legacy privileged repeat, and a constant
    # after the block that merely looks like one.
    f"{SDK}/ctrl/ctrl2080/ctrl2080base.h": """
#define NV2080_CTRL_CMD(cat,idx) NVXXXX_CTRL_CMD(0x2080, NV2080_CTRL_##cat, idx)
#define NV2080_CTRL_RESERVED (0x00)
#define NV2080_CTRL_GPU (0x01)
#define NV2080_CTRL_GPU_LEGACY_NON_PRIVILEGED (0x81) /* finn: Evaluated from "(NV2080_CTRL_GPU | 0x80)" */
#define NV2080_CTRL_PMGR (0x26)
#define NV2080_CTRL_OS_UNIX (0x3D)
#define NV2080_CTRL_CMD_NULL (0x20800000) /* finn: Evaluated from "(FINN_SYN_RESERVED_INTERFACE_ID << 8) | 0x0" */
#define NV2080_CTRL_MAX_THINGS (0x10)
""",
    # An interface whose commands are named otherwise than its categories' NVxxxx prefix.
    f"{SDK}/ctrl/ctrlcb33.h": """
#define NV_SYN_CC_CTRL_CMD(cat,idx) NVXXXX_CTRL_CMD(0xCB33, NVCB33_CTRL_##cat, idx)
#define NVCB33_CTRL_RESERVED (0x00U)
#define NVCB33_CTRL_CONF_COMPUTE (0x01U)
#define NVCB33_CTRL_SLOTS 16
#define NVCB33_CTRL_SLOT_DEFAULT (0x02)
#define NV_SYN_CC_CTRL_CMD_NULL (0xcb330000) /* finn: Evaluated from "(FINN_SYN_CC_RESERVED_INTERFACE_ID << 8) | 0x0" */
""",
    f"{SDK}/ctrl/ctrl2080/ctrl2080gpu.h": """
#define NV2080_CTRL_CMD_GPU_GET_INFO (0x20800101) /* finn: Evaluated from "(FINN_SYN_GPU_INTERFACE_ID << 8) | NV2080_CTRL_GPU_GET_INFO_PARAMS_MESSAGE_ID" */
#define NV2080_CTRL_GPU_GET_INFO_PARAMS_MESSAGE_ID (0x1U)
typedef struct NV2080_CTRL_GPU_INFO { NvU32 index; NvU32 data; } NV2080_CTRL_GPU_INFO;
typedef struct NV2080_CTRL_GPU_GET_INFO_PARAMS {
    NvU32 gpuInfoListSize;
    NV_DECLARE_ALIGNED(NvP64 gpuInfoList, 8);
} NV2080_CTRL_GPU_GET_INFO_PARAMS;
#define NV2080_CTRL_CMD_GPU_LEGACY_INFO NV2080_CTRL_CMD_GPU_GET_INFO
#define NV2080_CTRL_CMD_GPU_GET_FLAGS (0x20800102) /* finn: Evaluated from "(FINN_SYN_GPU_INTERFACE_ID << 8) | 0x2" */
typedef struct NV2080_CTRL_GPU_GET_FLAGS_PARAMS {
    NvU32 enabled : 1;
    NvU32 mode : 3;
    NvU32 : 4;
    NvU32 level : 8;
    NvU8 tail;
} NV2080_CTRL_GPU_GET_FLAGS_PARAMS;
#define NV2080_CTRL_CMD_GPU_GET_FLAGS_MODE_FAST (0x00000001)
#define NV2080_CTRL_CMD_GPU_SET_FLAGS (0x20800103) /* finn: Evaluated from "(FINN_SYN_GPU_INTERFACE_ID << 8) | 0x3" */
#define NV2080_CTRL_CMD_INTERNAL_SYN_POKE (0x20800b01) /* finn: Evaluated from "(FINN_SYN_INTERNAL_2_INTERFACE_ID << 8) | 0x1" */
""",
    f"{UNIX}/include/nv_escape.h": "#define NV_ESC_RM_CONTROL 0x2A\n#define NV_ESC_RM_ALLOC 0x2B\n",
    f"{UNIX}/include/nv-ioctl-numbers.h": """
#define NV_IOCTL_MAGIC 'F'
#define NV_IOCTL_BASE 200
#define NV_ESC_CARD_INFO (NV_IOCTL_BASE + 0)
""",
    f"{UNIX}/include/nv-ioctl.h": "typedef struct nv_ioctl_card_info { NvBool valid; NvU32 gpu_id; } nv_ioctl_card_info_t;\n",
    f"{UNIX}/src/escape.c": """
int escape(int cmd) {
    switch (cmd) {
        case NV_ESC_RM_CONTROL: { NVOS54_PARAMETERS *pApi = 0; NV_CTL_DEVICE_ONLY(nv); break; }
        case NV_ESC_RM_ALLOC: { NVOS21_PARAMETERS *a; NVOS64_PARAMETERS *b; NV_CTL_DEVICE_ONLY(nv); break; }
    }
}
""",
    "kernel-open/nvidia/nv.c": """
    switch (arg_cmd) {
        case NV_ESC_CARD_INFO: { n = size / sizeof(nv_ioctl_card_info_t); NV_ACTUAL_DEVICE_ONLY(nv); break; }
    }
""",
    "kernel-open/common/inc/.keep": "",
    "src/common/inc/nvctassert.h": "",
    "src/nvidia/generated/g_allclasses.h": """
#ifndef NV01_ROOT
#define NV01_ROOT (0x00000000)
#endif
#ifndef NV1_ROOT
#define NV1_ROOT (0x00000000) // alias
#endif
#ifndef AMPERE_CHANNEL_GPFIFO_A
#define AMPERE_CHANNEL_GPFIFO_A (0x0000C56F)
#endif
""",
    "src/nvidia/src/kernel/rmapi/resource_list.h": """
RS_ENTRY(
    /* External Class */ NV01_ROOT,
    /* Internal Class */ RmClientResource,
    /* Multi-Instance */ NV_FALSE,
    /* Parents        */ RS_ROOT_OBJECT,
    /* Alloc Param    */ RS_OPTIONAL(NvHandle),
    /* Flags          */ RS_FLAGS_NONE
)
RS_ENTRY(
    /* External Class */ AMPERE_CHANNEL_GPFIFO_A,
    /* Internal Class */ KernelChannel,
    /* Multi-Instance */ NV_TRUE,
    /* Parents        */ RS_LIST(classId(Device), classId(KernelChannelGroupApi)),
    /* Alloc Param    */ RS_REQUIRED(NV_CHANNEL_ALLOC_PARAMS),
    /* Flags          */ RS_FLAGS_NONE
)
""",
    "kernel-open/nvidia-uvm/uvm_ioctl.h": """
#include "nvtypes_uvm.h"
#define UVM_IOCTL_BASE(i) i
#define UVM_MAX_THINGS 32
#define UVM_REGISTER_THING UVM_IOCTL_BASE(5)
typedef struct { NvU8 uuid[16]; NvU32 count; NV_STATUS rmStatus; } UVM_REGISTER_THING_PARAMS;
""",
    "kernel-open/nvidia-uvm/uvm_linux_ioctl.h": """
#ifndef SYN_UVM_LINUX_IOCTL_H
#define SYN_UVM_LINUX_IOCTL_H
#include "uvm_ioctl.h"
#define UVM_INITIALIZE 0x30000001
typedef struct { NvU64 flags __attribute__((aligned(8))); NV_STATUS rmStatus; } UVM_INITIALIZE_PARAMS;
#define UVM_DEINITIALIZE 0x30000002
#endif
""",
    "kernel-open/nvidia-uvm/nvtypes_uvm.h": """
typedef unsigned char NvU8;
typedef unsigned int NvU32;
typedef unsigned long long NvU64;
typedef NvU32 NV_STATUS;
""",
    f"{KERNEL}/vgpu/rpc_headers.h": """
#ifndef SYN_RPC_HEADERS_H
#define SYN_RPC_HEADERS_H
#define NV_VGPU_MSG_HEADER_VERSION_MAJOR_TOT 0x00000003
#define NV_VGPU_MSG_HEADER_VERSION_MINOR_TOT 0x00000000
#define NV_VGPU_MSG_SIGNATURE_VALID 0x43505256
#define NV_VGPU_MSG_RESULT_RPC_PENDING 0xFFFFFFFF
#include "rpc_global_enums.h"
#endif
""",
    f"{KERNEL}/vgpu/rpc_global_enums.h": """
#define X(UNIT, RPC, VAL) NV_VGPU_MSG_FUNCTION_##RPC = VAL,
enum {
    X(RM, NOP, 0)
    X(RM, FREE, 10)
    X(RM, NUM_FUNCTIONS, 11)
};
#undef X
#define E(RPC, VAL) NV_VGPU_MSG_EVENT_##RPC = VAL,
enum {
    E(FIRST_EVENT, 0x1000)
    E(POST_EVENT, 0x1003)
    E(NUM_EVENTS, 0x1004)
};
#undef E
""",
    "src/nvidia/generated/g_rpc-structures.h": """
#ifdef RPC_STRUCTURES
typedef struct NVOS00_PARAMETERS_v03_00 { NvHandle hRoot; NvHandle hObjectParent; NvHandle hObjectOld; NvV32 status; } NVOS00_PARAMETERS_v03_00;
typedef struct rpc_free_v03_00 { NVOS00_PARAMETERS_v03_00 params; } rpc_free_v03_00;
typedef rpc_free_v03_00 rpc_free_v;
typedef struct rpc_post_event_v17_00 {
    NvHandle hClient; NvHandle hEvent; NvU32 notifyIndex; NvU32 data; NvU16 info16; NvU32 status;
    NvU32 eventDataSize; NvBool bNotifyList; NvU8 eventData[];
} rpc_post_event_v17_00;
typedef rpc_post_event_v17_00 rpc_post_event_v;
#endif
""",
    "src/nvidia/generated/g_rpc-message-header.h": """
#ifdef RPC_MESSAGE_STRUCTURES
typedef union rpc_message_rpc_union_field_v03_00 { NvU32 spare; NvU32 cpuRmGfid; } rpc_message_rpc_union_field_v03_00;
typedef rpc_message_rpc_union_field_v03_00 rpc_message_rpc_union_field_v;
typedef struct rpc_message_header_v03_00 {
    NvU32 header_version; NvU32 signature; NvU32 length; NvU32 function;
    NvU32 rpc_result; NvU32 rpc_result_private; NvU32 sequence;
    rpc_message_rpc_union_field_v u;
} rpc_message_header_v03_00;
typedef rpc_message_header_v03_00 rpc_message_header_v;
#endif
""",
    f"{KERNEL}/gpu/gsp/message_queue.h": """
#define RPC_QUEUE_COUNT 1
NV_STATUS GspMsgQueueSendCommand(OBJGPU *pGpu);
""",
    f"{KERNEL}/gpu/mem_mgr/rm_page_size.h": "#define RM_PAGE_SIZE 4096\n",
    f"{KERNEL}/gpu/mem_mgr/virt_mem_allocator_common.h": "#error the generator shadows this header\n",
    f"{KERNEL}/gpu/gsp/message_queue_priv.h": """
#include "msgq/msgq.h"
#include "gpu/mem_mgr/virt_mem_allocator_common.h"
typedef struct GSP_MSG_QUEUE_ELEMENT {
    NvU8 authTagBuffer[16]; NvU8 aadBuffer[16]; NvU32 checkSum; NvU32 seqNum; NvU32 elemCount;
    NV_DECLARE_ALIGNED(rpc_message_header_v rpc, 8);
} GSP_MSG_QUEUE_ELEMENT;
typedef struct { MEMORY_DESCRIPTOR *pSharedMemDesc; RmPhysAddr pa; int queues[RPC_QUEUE_COUNT]; } SYN_COLLECTION;
#define GSP_MSG_QUEUE_ELEMENT_SIZE_MIN RM_PAGE_SIZE
#define GSP_MSG_QUEUE_ELEMENT_SIZE_MAX (GSP_MSG_QUEUE_ELEMENT_SIZE_MIN * 16)
#define GSP_MSG_QUEUE_ELEMENT_HDR_SIZE __builtin_offsetof(GSP_MSG_QUEUE_ELEMENT, rpc)
#define GSP_MSG_QUEUE_RPC_SIZE_MAX (GSP_MSG_QUEUE_ELEMENT_SIZE_MAX - GSP_MSG_QUEUE_ELEMENT_HDR_SIZE)
#define GSP_MSG_QUEUE_HEADER_SIZE RM_PAGE_SIZE
""",
    "src/common/shared/msgq/inc/msgq/msgq.h": "typedef void *msgqHandle;\n",
    "src/common/shared/msgq/inc/msgq/msgq_priv.h": """
typedef struct { NvU32 version; NvU32 size; NvU32 msgSize; NvU32 msgCount; NvU32 writePtr; NvU32 flags;
                 NvU32 rxHdrOff; NvU32 entryOff; } msgqTxHeader;
typedef struct { NvU32 readPtr; } msgqRxHeader;
""",
}


def write_tree(root: Path) -> Path:
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip("\n"))
    return root
