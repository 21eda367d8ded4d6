"""The profile generator: an open-gpu-kernel-modules tree in, a ``DriverProfile`` out.

    rmtrace profiles build --from /tmp/ogkm-580.142 --out 580.142.json.zst

Five probe units (``probes.py``) include the public headers: ``rm`` (nvos.h,
the escapes, every class header, g_allclasses.h), two halves of the ``ctrl/``
headers, ``uvm`` (uvm_linux_ioctl.h) and ``gsp`` (the vGPU RPC headers and
the GSP message-queue element).  gcc compiles them; layouts come from DWARF,
numbers from the preprocessor (macro values compiled into ``.rodata``) and
from C enums (GSP functions and events, status codes).

How each table is derived (rules, not lists):

* escapes: every ``NV_ESC_*`` macro.  Its struct is the first struct the
  kernel's handler for it names (``case NV_ESC_X:`` or ``arg_cmd == NV_ESC_X``
  in escape.c, osapi.c and nv.c); its device is ``ctl``/``gpu`` where that
  handler calls ``NV_CTL_DEVICE_ONLY``/``NV_ACTUAL_DEVICE_ONLY``, else ``any``.
* classes: every macro g_allclasses.h defines; the first name of an id is its
  name, later ones (and those the file marks ``// alias``) are aliases.  Alloc params from the RS_ENTRY rows of
  resource_list.h (``RS_REQUIRED(T)``/``RS_OPTIONAL(T)``).
* controls: a macro whose FINN comment says it is built from an interface id
  (``(FINN_..._INTERFACE_ID << 8) | ...``); a ``*_CTRL_CMD_*`` macro without
  that comment whose value is such a command's becomes an alias of it.
  Params: the ``X`` of the FINN comment's ``X_MESSAGE_ID``, else
  ``<PREFIX>_CTRL_<REST>_PARAMS``, else ``<NAME>_PARAMS``, else the same with
  the verb (GET/SET...) or a leading ``INTERNAL_`` dropped, else the params of
  its GET/SET twin.
* UVM: macros of the UVM ioctl headers that expand ``UVM_IOCTL_BASE(n)``, and
  the integer macros of uvm_linux_ioctl.h; params ``<NAME>_PARAMS``.
* GSP: the ``NV_VGPU_MSG_FUNCTION_*``/``NV_VGPU_MSG_EVENT_*`` enumerators;
  each one's payload is the struct behind the ``rpc_<name>_v`` typedef (the
  generated headers point that at the current ``_vXX_YY`` version).
* status: the ``NV_OK``/``NV_ERR_*``/``NV_WARN_*`` enumerators.
* engine types: the ``NV2080_ENGINE_TYPE_*`` macros but the counts (``*_SIZE``)
  and the end marker (``LAST``).  Where names share a value the first ending in
  a digit (GR0 over GRAPHICS, NVDEC0 over BSP) names it, the others are aliases.
* control categories: each interface's block of category defines, from
  ``<NVxxxx>_CTRL_RESERVED`` on through the ``<NVxxxx>_CTRL_<NAME> (value)``
  macros of the same header that follow it (a parenthesised literal: the
  block ends at the first other macro); the class is the prefix's ``xxxx``.
  Values with the legacy privilege bits (0x80, 0x40) repeat a category.
  A category no define names (NV2080's 0x0B) is named by its commands' FINN
  interface, ``FINN_NV20_SUBDEVICE_0_INTERNAL_2_INTERFACE_ID``, less the
  class part its defined categories' interfaces share.
  An interface's command prefix is the head of its reserved command
  (``NV_CONF_COMPUTE_CTRL_CMD_NULL``), else the categories' ``NVxxxx``.

``OVERRIDES`` holds the few facts these rules cannot see, each with its reason.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, replace
from itertools import takewhile
from pathlib import Path
from types import MappingProxyType

from rmtrace.decoders.profiles.model import ClassInfo, Control, DriverProfile, Escape, Layout, UvmCommand
from rmtrace.decoders.profiles.probes import Macro, Unit, compile_unit, list_macros, value_symbol

from rmtrace.dwarf import ObjectFacts
from rmtrace.errors import RmtraceError

# Where things live in an open-gpu-kernel-modules tree (the first that exists wins).
TREE = {
    "sdk": ("src/common/sdk/nvidia/inc",),
    "unix": ("src/nvidia/arch/nvalloc/unix/include",),
    "generated": ("src/nvidia/generated",),
    "kernel": ("src/nvidia/inc/kernel",),
    "kernel_old": ("src/nvidia/kernel/inc",),  # vgpu/ lived here up to 550
    "nvidia_inc": ("src/nvidia/inc",),
    "msgq": ("src/common/shared/msgq/inc", "src/nvidia/inc/libraries"),  # moved in 595
    "common_src": ("src/common/inc",),
    "uvm": ("kernel-open/nvidia-uvm",),
    "common": ("kernel-open/common/inc",),
    "resource_list": ("src/nvidia/src/kernel/rmapi/resource_list.h",),
    "escape_c": ("src/nvidia/arch/nvalloc/unix/src/escape.c",),
    "osapi_c": ("src/nvidia/arch/nvalloc/unix/src/osapi.c",),
    "nv_c": ("kernel-open/nvidia/nv.c",),
    "version_mk": ("version.mk",),
}
# The subtrees the generator reads, for extracting a tree quickly (git archive TAG <these>).
NEEDED_PATHS = tuple(p for paths in TREE.values() for p in paths)
OPTIONAL = frozenset(("escape_c", "osapi_c", "nv_c", "resource_list", "version_mk", "kernel_old"))

# g_allclasses.h comes first: it defines each class id only where no class header has yet.
RM_HEADERS = ("nvtypes.h", "g_allclasses.h", "nvstatus.h", "nvos.h")
RM_TAIL = ("nv_escape.h", "nv-ioctl.h", "nv-ioctl-numbers.h", "nv-ioctl-numa.h", "nv-ioctl-lockless-diag.h",
           "nv-unix-nvos-params-wrappers.h")
CTRL_UNITS = 2
GSP_HEADERS = ("nvtypes.h", "nvstatus.h", "vgpu/rpc_headers.h")
# g_rpc-structures.h and g_rpc-message-header.h define their structs only under these switches.
GSP_SWITCHED = (("RPC_STRUCTURES RPC_GENERIC_UNION", "g_rpc-structures.h"),
                ("RPC_MESSAGE_STRUCTURES RPC_MESSAGE_GENERIC_UNION", "g_rpc-message-header.h"))
GSP_TAIL = ("gpu/gsp/message_queue_priv.h", "msgq/msgq_priv.h")
# message_queue_priv.h includes this RM-internal header, which pulls in NVOC and the
# resource server; the queue element needs only the page size, the queue count and
# opaque names of a few RM objects from it.
GSP_SHADOWS = (("gpu/mem_mgr/virt_mem_allocator_common.h",
                "typedef struct OBJGPU OBJGPU;\n"
                "typedef struct MEMORY_DESCRIPTOR MEMORY_DESCRIPTOR;\n"
                "typedef NvU64 RmPhysAddr;\n"
                '#include "gpu/mem_mgr/rm_page_size.h"\n'
                '#include "gpu/gsp/message_queue.h"\n'),)

# Named constants: the first C expression that compiles in its unit wins.
CONSTANTS: dict[str, dict[str, tuple[str, ...]]] = {
    "rm": {
        "nv_ioctl_magic": ("NV_IOCTL_MAGIC",),
        "nv_ioctl_base": ("NV_IOCTL_BASE",),
        "nv_max_ioctl_size": ("NV_ABSOLUTE_MAX_IOCTL_SIZE",),
        "nv_rm_api_version_string_length": ("NV_RM_API_VERSION_STRING_LENGTH",),
        "nvos54_flags_finn_serialized": ("NVOS54_FLAGS_FINN_SERIALIZED",),
        "nvos64_size": ("sizeof(NVOS64_PARAMETERS)",),
    },
    "gsp": {
        "rpc_signature": ("NV_VGPU_MSG_SIGNATURE_VALID",),
        "rpc_header_version": ("(NV_VGPU_MSG_HEADER_VERSION_MAJOR_TOT << 24) | (NV_VGPU_MSG_HEADER_VERSION_MINOR_TOT << 16)",),
        "rpc_header_size": ("sizeof(rpc_message_header_v)",),
        "rpc_result_pending": ("NV_VGPU_MSG_RESULT_RPC_PENDING",),
        "msgq_prefix_size": ("GSP_MSG_QUEUE_ELEMENT_HDR_SIZE", "NV_OFFSETOF(GSP_MSG_QUEUE_ELEMENT, rpc)"),
        # 595 sets these at run time (message_queue_cpu.c: RM_PAGE_SIZE and 16 pages).
        "msgq_element_size": ("GSP_MSG_QUEUE_ELEMENT_SIZE_MIN", "RM_PAGE_SIZE"),
        "msgq_element_size_max": ("GSP_MSG_QUEUE_ELEMENT_SIZE_MAX", "RM_PAGE_SIZE * 16"),
        "max_rpc_size": ("GSP_MSG_QUEUE_RPC_SIZE_MAX", "RM_PAGE_SIZE * 16 - NV_OFFSETOF(GSP_MSG_QUEUE_ELEMENT, rpc)"),
        "msgq_header_size": ("GSP_MSG_QUEUE_HEADER_SIZE", "RM_PAGE_SIZE"),
        "rmapi_rpc_flags_serialized": ("RMAPI_RPC_FLAGS_SERIALIZED",),
        "rmapi_rpc_flags_copyout_on_error": ("RMAPI_RPC_FLAGS_COPYOUT_ON_ERROR",),
    },
}
# Layouts every profile carries besides those the tables point at.
KEY_LAYOUTS = ("rpc_message_header_v", "GSP_MSG_QUEUE_ELEMENT", "msgqTxHeader", "msgqRxHeader",
               "NVOS64_PARAMETERS", "NV0000_ALLOC_PARAMETERS")
KEY_LAYOUT_PREFIXES = ("NVOS",)  # every NVOSnn_* struct of nvos.h

# Facts the rules above cannot see.
OVERRIDES = {
    # nv.c hands CHECK_VERSION_STR to rm_perform_version_check() without naming the struct.
    "escape_structs": {"NV_ESC_CHECK_VERSION_STR": "nv_ioctl_rm_api_version_t",
                       # Defined, but the Linux escape switch has no case for them; nvos.h gives their params.
                       "NV_ESC_RM_ADD_VBLANK_CALLBACK": "NVOS61_PARAMETERS",
                       "NV_ESC_RM_EXPORT_OBJECT_TO_FD": "NVOS62_PARAMETERS",
                       "NV_ESC_RM_IMPORT_OBJECT_FROM_FD": "NVOS63_PARAMETERS"},
    # FINN builds these commands from a literal message id, so no _MESSAGE_ID names their
    # params; the header documents each beside the struct it takes.
    "control_params": {"NV83DE_CTRL_CMD_READ_SURFACE": "NV83DE_CTRL_DEBUG_ACCESS_SURFACE_PARAMETERS",
                       "NV83DE_CTRL_CMD_WRITE_SURFACE": "NV83DE_CTRL_DEBUG_ACCESS_SURFACE_PARAMETERS",
                       "NV83DE_CTRL_CMD_GET_MAPPINGS": "NV83DE_CTRL_DEBUG_GET_MAPPINGS_PARAMETERS",
                       "NV83DE_CTRL_CMD_DEBUG_READ_BATCH_MEMORY": "NV83DE_CTRL_DEBUG_ACCESS_MEMORY_PARAMS",
                       "NV83DE_CTRL_CMD_DEBUG_WRITE_BATCH_MEMORY": "NV83DE_CTRL_DEBUG_ACCESS_MEMORY_PARAMS",
                       "NVC637_CTRL_CMD_EXEC_PARTITIONS_EXPORT": "NVC637_CTRL_EXEC_PARTITIONS_IMPORT_EXPORT_PARAMS",
                       "NVC637_CTRL_CMD_EXEC_PARTITIONS_IMPORT": "NVC637_CTRL_EXEC_PARTITIONS_IMPORT_EXPORT_PARAMS"},
    # resource_list.h says RS_OPTIONAL(NvHandle) for the root classes, but clients pass
    # NV0000_ALLOC_PARAMETERS and the GSP path sizes root allocs as that struct.
    "alloc_params": {"NV01_ROOT": "NV0000_ALLOC_PARAMETERS", "NV01_ROOT_CLIENT": "NV0000_ALLOC_PARAMETERS",
                     "NV01_ROOT_NON_PRIV": "NV0000_ALLOC_PARAMETERS"},
}

ENGINE_TYPE_PREFIX = "NV2080_ENGINE_TYPE_"
_NOT_AN_ENGINE = re.compile(r"_SIZE$|_LAST$")
CATEGORY_MASK = 0x3F  # the category is 6 bits; the top two mark legacy (non-)privileged commands
CTRL_CMD = "_CTRL_CMD_"
_CATEGORY_START = re.compile(r"^(NV([0-9A-F]{4})_CTRL_)RESERVED$")
_CATEGORY_VALUE = re.compile(r"^\(\s*(0[xX][0-9a-fA-F]+|\d+)[uU]?\s*\)$")

_FINN_CMD = re.compile(r"_INTERFACE_ID\s*<<\s*8")
_FINN_INTERFACE = re.compile(r"FINN_(\w+?)_INTERFACE_ID")
_FINN_MESSAGE = re.compile(r"(\w+)_MESSAGE_ID")
_IDENT = re.compile(r"^[A-Za-z_]\w*$")
_CLASS_PREFIX = re.compile(r"^NV([0-9A-F]{4})_")
_RS_ENTRY = re.compile(r"RS_ENTRY\s*\(")
_RS_ALLOC = re.compile(r"RS_(?:REQUIRED|OPTIONAL)\s*\(\s*(\w+)\s*\)")
_C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_VERSION = re.compile(r"^NVIDIA_VERSION\s*=\s*(\S+)", re.M)


@dataclass
class UnitResult:
    macros: list[Macro]
    values: dict[str, int]      # value key -> integer
    facts: ObjectFacts


def extract_tag(repo: str | Path, tag: str, dest: str | Path) -> Path:
    """Extract just the files the generator reads from ``tag`` of a git clone of
    open-gpu-kernel-modules (bare or not) into ``dest``; returns ``dest``."""
    dest = Path(dest)
    git = ["git", "-C", str(repo)]
    listed = subprocess.run([*git, "ls-tree", "-r", "--name-only", tag, "--", *NEEDED_PATHS],
                            capture_output=True, text=True)
    if listed.returncode != 0:
        raise RmtraceError(f"{repo}: cannot list tag {tag!r}: {listed.stderr.strip()}")
    present = sorted({p for p in NEEDED_PATHS if any(f == p or f.startswith(p + "/") for f in listed.stdout.split())})
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.Popen([*git, "archive", tag, "--", *present], stdout=subprocess.PIPE)
    untar = subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, capture_output=True)
    if archive.stdout is not None:
        archive.stdout.close()
    if archive.wait() != 0 or untar.returncode != 0:
        raise RmtraceError(f"{repo}: extracting {tag} failed: {untar.stderr.decode(errors='replace').strip()}")
    return dest


def locate(tree: Path) -> dict[str, Path]:
    found = {}
    for key, candidates in TREE.items():
        for rel in candidates:
            if (tree / rel).exists():
                found[key] = tree / rel
                break
        else:
            if key not in OPTIONAL:
                raise RmtraceError(f"{tree} is not an open-gpu-kernel-modules tree: {candidates[0]} is missing")
    return found


def tree_version(paths: dict[str, Path]) -> str | None:
    mk = paths.get("version_mk")
    m = _VERSION.search(mk.read_text()) if mk else None
    return m.group(1) if m else None


def make_units(paths: dict[str, Path]) -> list[Unit]:
    sdk = paths["sdk"]
    rm_dirs = (str(sdk), str(paths["unix"]), str(paths["generated"]), str(paths["common"]))
    classes = sorted(str(p.relative_to(sdk)) for sub in ("class", "alloc") for p in (sdk / sub).rglob("*.h"))
    present = [h for h in RM_HEADERS + RM_TAIL if any((Path(d) / h).exists() for d in rm_dirs)]
    units = [Unit("rm", tuple([h for h in present if h in RM_HEADERS] + classes +
                              [h for h in present if h in RM_TAIL]), rm_dirs)]
    ctrl = sorted(str(p.relative_to(sdk)) for p in (sdk / "ctrl").rglob("*.h"))
    for i in range(CTRL_UNITS):
        units.append(Unit(f"ctrl{i}", ("nvtypes.h", "nvos.h", *ctrl[i::CTRL_UNITS]), (str(sdk),)))
    units.append(Unit("uvm", ("uvm_linux_ioctl.h",), (str(paths["uvm"]), str(paths["common"]))))
    gsp_dirs = tuple(str(paths[k]) for k in ("kernel", "kernel_old", "nvidia_inc", "generated", "sdk", "msgq",
                                             "common_src") if k in paths)
    prelude = []
    for switches, header in GSP_SWITCHED:
        prelude += [f"#define {s}" for s in switches.split()] + [f'#include "{header}"']
        prelude += [f"#undef {s}" for s in switches.split()]
    units.append(Unit("gsp", GSP_HEADERS + GSP_TAIL, gsp_dirs, shadows=GSP_SHADOWS,
                      prelude="\n".join([f'#include "{h}"' for h in GSP_HEADERS] + prelude)))
    return units


# -- which macros each unit evaluates ----------------------------------------------------------

def _wanted_values(unit: Unit, macros: list[Macro]) -> dict[str, str]:
    wanted: dict[str, str] = {}
    for m in macros:
        if _is_value_candidate(unit.name, m):
            wanted[m.name] = m.name
    for key, exprs in CONSTANTS.get(unit.name, {}).items():
        for i, expr in enumerate(exprs):
            wanted[f"const:{key}:{i}"] = expr
    return wanted


def _is_value_candidate(unit: str, m: Macro) -> bool:
    base = Path(m.file).name
    if not m.body:
        return False
    if unit == "rm":
        return m.name.startswith(("NV_ESC_", ENGINE_TYPE_PREFIX)) or _in_file(m, "g_allclasses.h")
    if unit.startswith("ctrl"):
        return CTRL_CMD in m.name or bool(_FINN_CMD.search(m.comment))
    if unit == "uvm":
        return base in ("uvm_ioctl.h", "uvm_linux_ioctl.h") and m.name.startswith("UVM_")
    return False


def _in_file(m: Macro, basename: str) -> bool:
    return any(Path(f).name == basename for f in m.files)


def run_unit(unit: Unit, workdir: Path) -> tuple[list[Macro], dict[str, int], str]:
    macros = list_macros(unit, workdir)
    compiled = compile_unit(unit, _wanted_values(unit, macros), workdir)
    return macros, {k: i for i, k in enumerate(compiled.values)}, str(compiled.object_path)


# -- assembling the tables ---------------------------------------------------------------------

def _value(result: UnitResult, key: str) -> int | None:
    symbol = value_symbol(result.values[key]) if key in result.values else None
    return result.facts.symbols.get(symbol) if symbol else None


def _constants(results: dict[str, UnitResult]) -> dict[str, int]:
    out = {}
    for unit, table in CONSTANTS.items():
        for key, exprs in table.items():
            for i in range(len(exprs)):
                v = _value(results[unit], f"const:{key}:{i}")
                if v is not None:
                    out[key] = v
                    break
    return out


def _handler_regions(sources: list[str], name: str) -> str:
    """The text of the kernel's handlers for one escape: its ``case`` labels first, then
    the ``== NV_ESC_X`` tests, each up to the next escape's."""
    regions = []
    end_of_region = re.compile(r"case\s+NV_ESC_\w+\s*:|arg_cmd\s*==")
    for pattern in (rf"case\s+{name}\s*:", rf"==\s*{name}\b"):
        for text in sources:
            for m in re.finditer(pattern, text):
                end = end_of_region.search(text, m.end())
                regions.append(text[m.end(): end.start() if end else m.end() + 4000])
    return "\n".join(regions)


def _escapes(rm: UnitResult, sources: list[str], magic: int | None) -> dict[int, Escape]:
    aggregates = _aggregate_typedefs(rm.facts)
    out: dict[int, Escape] = {}
    for m in rm.macros:
        nr = _value(rm, m.name) if m.name.startswith("NV_ESC_") else None
        if nr is None or nr in out:
            continue
        region = _handler_regions(sources, m.name)
        struct = OVERRIDES["escape_structs"].get(m.name)
        if struct is None:
            struct = next((w for w in re.findall(r"\b\w+\b", region) if w in aggregates), None)
        struct = rm.facts.layout_name(struct) or struct if struct else None
        size = rm.facts.size_of(struct) if struct else None
        device = "ctl" if "NV_CTL_DEVICE_ONLY" in region else "gpu" if "NV_ACTUAL_DEVICE_ONLY" in region else "any"
        request = (3 << 30) | (size << 16) | (magic << 8) | nr if size is not None and magic is not None else None
        out[nr] = Escape(nr, m.name, struct, size, request, device)
    return dict(sorted(out.items()))


def _rs_entries(text: str) -> dict[str, str | None]:
    """External class name -> alloc param type, from resource_list.h's RS_ENTRY rows."""
    text = _C_COMMENT.sub("", text)
    rows: dict[str, str | None] = {}
    for m in _RS_ENTRY.finditer(text):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        args = _split_top(text[m.end(): i - 1])
        if len(args) < 5:
            continue
        alloc = _RS_ALLOC.search(args[4])
        rows.setdefault(args[0].strip(), alloc.group(1) if alloc else None)
    return rows


def _split_top(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _classes(rm: UnitResult, rs_rows: dict[str, str | None], aliases: dict[str, int]) -> dict[int, ClassInfo]:
    out: dict[int, ClassInfo] = {}
    for m in rm.macros:
        if not _in_file(m, "g_allclasses.h"):
            continue
        cid = _value(rm, m.name)
        if cid is None:
            continue
        if cid in out or m.comment.strip() == "alias":  # g_allclasses.h marks other names "// alias"
            aliases[m.name] = cid
            continue
        out[cid] = ClassInfo(cid, m.name, None)
    for cid, info in out.items():
        names = [info.name] + [a for a, v in aliases.items() if v == cid]
        alloc = next((OVERRIDES["alloc_params"][n] for n in names if n in OVERRIDES["alloc_params"]), None)
        alloc = alloc or next((rs_rows[n] for n in names if rs_rows.get(n)), None)
        out[cid] = ClassInfo(cid, info.name, alloc)
    return dict(sorted(out.items()))


def _controls(ctrl: list[UnitResult], aliases: dict[str, int]) -> tuple[dict[int, Control], dict[int, str]]:
    """Control commands and, per command, the struct name of its params (layouts come later).

    Commands are the macros FINN built from an interface id; a ``*_CTRL_CMD_*`` macro
    without that comment whose value is such a command's is an alias of it (the
    headers keep legacy names for some ids).  Names whose params FINN ties to a
    message id come first: when two FINN names share an id, that one is canonical.
    """
    found: list[tuple[Macro, int, UnitResult]] = []
    for result in ctrl:
        for m in result.macros:
            v = _value(result, m.name)
            if v is not None and 0 <= v <= 0xFFFFFFFF:
                found.append((m, v, result))
    finn_values = {v for m, v, _ in found if _FINN_CMD.search(m.comment)}
    commands = [(m, v, r) for m, v, r in found
                if _FINN_CMD.search(m.comment) or (v in finn_values and _may_alias(m, v))]
    rank = {m.name: (not _FINN_CMD.search(m.comment), not _FINN_MESSAGE.search(m.comment)) for m, _, _ in commands}
    commands.sort(key=lambda t: rank[t[0].name])
    names: dict[int, str] = {}
    params: dict[int, str] = {}
    for m, v, result in commands:
        p = _control_params(m, result)
        if v not in names:
            names[v] = m.name
        elif m.name != names[v]:
            aliases[m.name] = v
        if p and v not in params:
            params[v] = p
    _params_from_twins(names, params)
    controls = {v: Control(v, names[v], params.get(v), None) for v in sorted(names)}
    return controls, params


def _may_alias(m: Macro, v: int) -> bool:
    """A legacy name for a command id: ``*_CTRL_CMD_*``, outside the reserved category 0, and
    of the class its ``NVxxxx_`` prefix names unless it is spelled as another macro's name."""
    if CTRL_CMD not in m.name or (v >> 8) & 0xFF == 0:
        return False
    prefix = _CLASS_PREFIX.match(m.name)
    return prefix is None or int(prefix.group(1), 16) == v >> 16 or bool(_IDENT.match(m.body.strip("() ")))


# A GET without a params message of its own takes its SET twin's (and so on).
TWIN_VERBS = ("GET", "SET", "CLEAR", "READ", "WRITE")


def _verb_split(name: str) -> tuple[list[str], int] | None:
    """The words after ``_CTRL_CMD_`` and the position of the first verb among them."""
    _, sep, rest = name.partition(CTRL_CMD)
    words = rest.split("_")
    at = next((i for i, w in enumerate(words) if w in TWIN_VERBS), None)
    return (words, at) if sep and at is not None else None


def _params_from_twins(names: dict[int, str], params: dict[int, str]) -> None:
    by_name = {name: v for v, name in names.items()}
    for v, name in names.items():
        split = _verb_split(name)
        if v in params or split is None:
            continue
        words, at = split
        head = name.partition(CTRL_CMD)[0]
        for other in TWIN_VERBS:
            twin = by_name.get(f"{head}{CTRL_CMD}" + "_".join(words[:at] + [other] + words[at + 1:]))
            if twin is not None and twin in params:
                params[v] = params[twin]
                break


def _control_params(m: Macro, result: UnitResult) -> str | None:
    facts = result.facts
    finn = _FINN_MESSAGE.search(m.comment)
    head, _, rest = m.name.partition(CTRL_CMD)
    split = _verb_split(m.name)
    verbless = "_".join(split[0][:split[1]] + split[0][split[1] + 1:]) if split else None
    candidates = [OVERRIDES["control_params"].get(m.name), finn.group(1) if finn else None,
                  f"{head}_CTRL_{rest}_PARAMS", m.name + "_PARAMS",
                  f"{head}_CTRL_{verbless}_PARAMS" if verbless else None,
                  # an INTERNAL_ command often takes its public twin's params
                  f"{head}_CTRL_{rest.removeprefix('INTERNAL_')}_PARAMS"]
    return next((c for c in candidates if c and facts.layout_name(c)), None)


def _engine_types(rm: UnitResult, aliases: dict[str, int]) -> dict[int, str]:
    """NV2080 engine types by value; a numbered name (COPY0) where names share one, since
    the session model reads a copy engine's index from the name's trailing number."""
    names: dict[int, list[str]] = {}
    for m in rm.macros:
        value = _value(rm, m.name) if m.name.startswith(ENGINE_TYPE_PREFIX) else None
        if value is not None and not _NOT_AN_ENGINE.search(m.name):
            names.setdefault(value, []).append(m.name)
    out = {}
    for value, group in sorted(names.items()):
        out[value] = next((n for n in group if n[-1].isdigit()), group[0])
        aliases.update({n: value for n in group if n != out[value]})
    return out


def _categories(ctrl: list[UnitResult]) -> tuple[dict[tuple[int, int], str], dict[int, str]]:
    """Control categories by (interface class, category) and each class's category prefix
    (``NV2080``), from the category define blocks (see the module doc)."""
    categories: dict[tuple[int, int], str] = {}
    prefixes: dict[int, str] = {}
    for result in ctrl:
        macros = result.macros
        for i, first in enumerate(macros):
            start = _CATEGORY_START.match(first.name)
            if start is None:
                continue
            prefix, cls = start.group(1), int(start.group(2), 16)
            prefixes.setdefault(cls, prefix.removesuffix("_CTRL_"))
            # takewhile is consumed inside this iteration, so the lambda sees this iteration's first and prefix
            block = takewhile(lambda m: m.file == first.file and m.name.startswith(prefix) and CTRL_CMD not in m.name  # noqa: B023
                              and _CATEGORY_VALUE.match(m.body), macros[i:])
            for m in block:
                found = _CATEGORY_VALUE.match(m.body)
                if found is None:  # the block only takes macros that match
                    continue
                value = int(found.group(1), 0)
                if value <= CATEGORY_MASK:
                    categories.setdefault((cls, value), m.name[len(prefix):])
    _categories_from_interfaces(ctrl, categories)
    return dict(sorted(categories.items())), prefixes


def _categories_from_interfaces(ctrl: list[UnitResult], categories: dict[tuple[int, int], str]) -> None:
    """Name the categories that only FINN names: a command's interface is ``<FINN class>_<category>``,
    and a class's FINN name is what its commands of defined categories have before theirs."""
    interfaces: dict[tuple[int, int], str] = {}
    for result in ctrl:
        for m in result.macros:
            finn = _FINN_INTERFACE.search(m.comment)
            v = _value(result, m.name) if finn else None
            if finn is not None and v is not None:
                interfaces.setdefault((v >> 16, (v >> 8) & CATEGORY_MASK), finn.group(1))
    finn_class: dict[int, str] = {}
    for (cls, cat), interface in interfaces.items():
        name = categories.get((cls, cat))
        if name and interface.endswith("_" + name):
            finn_class.setdefault(cls, interface[: -len(name) - 1])
    for (cls, cat), interface in interfaces.items():
        head = finn_class.get(cls)
        if (cls, cat) not in categories and head and interface.startswith(head + "_"):
            categories[(cls, cat)] = interface[len(head) + 1:]


def _interface_prefixes(controls: dict[int, Control], category_prefixes: dict[int, str]) -> dict[int, str]:
    """The head its commands are named with, per interface class: that of its reserved command
    (class << 16) where the headers define one, else its categories' prefix."""
    out = dict(category_prefixes)
    for cmd, control in controls.items():
        head, sep, _ = control.name.partition(CTRL_CMD)
        if cmd & 0xFFFF == 0 and sep:
            out[control.cls] = head
    return dict(sorted(out.items()))


def _uvm(uvm: UnitResult) -> tuple[dict[int, UvmCommand], dict[int, str]]:
    out: dict[int, UvmCommand] = {}
    params: dict[int, str] = {}
    for m in uvm.macros:
        base = Path(m.file).name
        is_ioctl = "UVM_IOCTL_BASE" in m.body if base == "uvm_ioctl.h" else base == "uvm_linux_ioctl.h"
        nr = _value(uvm, m.name) if is_ioctl else None
        if nr is None or nr in out:
            continue
        p = m.name + "_PARAMS"
        if uvm.facts.layout_name(p):
            params[nr] = p
        out[nr] = UvmCommand(nr, m.name, p if nr in params else None, uvm.facts.size_of(p) if nr in params else None)
    return dict(sorted(out.items())), params


def _enumerators(facts: ObjectFacts, prefix: str) -> dict[int, str]:
    """Enumerators named ``prefix``+NAME, by value, without the prefix (the first name of a value)."""
    out: dict[int, str] = {}
    for name, value in facts.enumerators.items():
        if name.startswith(prefix):
            out.setdefault(value, name[len(prefix):])
    return dict(sorted(out.items()))


def _status(facts: ObjectFacts) -> dict[int, str]:
    out: dict[int, str] = {}
    for name, value in facts.enumerators.items():
        if name == "NV_OK" or name.startswith(("NV_ERR_", "NV_WARN_")):
            out.setdefault(value, name)
    return dict(sorted(out.items()))


def _gsp_payloads(facts: ObjectFacts, functions: dict[int, str], events: dict[int, str]) -> dict[int, str]:
    out = {}
    for table in (functions, events):
        for number, name in table.items():
            low = name.lower()
            for candidate in (f"rpc_{low}_v", f"rpc_{low.removeprefix('gsp_')}_v"):
                layout = facts.layout_name(candidate)
                if layout:
                    out[number] = layout
                    break
    return dict(sorted(out.items()))


def _aggregate_typedefs(facts: ObjectFacts) -> set[str]:
    return {name for name in facts.typedefs if facts.layout_name(name)}


def _merge_layouts(parts: list[dict[str, Layout]]) -> dict[str, Layout]:
    out: dict[str, Layout] = {}
    for part in parts:
        for name, layout in part.items():
            out.setdefault(name, layout)
    return dict(sorted(out.items()))


def build_profile(tree: str | Path, version: str | None = None, jobs: int | None = None) -> DriverProfile:
    """Generate the profile of the driver whose open-gpu-kernel-modules tree is at ``tree``.

    ``version`` overrides the tree's version.mk; ``jobs`` bounds the gcc threads and the
    worker processes that read DWARF (default: Python's, by core count)."""
    tree = Path(tree)
    if not tree.is_dir():
        raise RmtraceError(f"{tree}: no such directory (give an extracted open-gpu-kernel-modules tree)")
    paths = locate(tree)
    version = version or tree_version(paths)
    if not version:
        raise RmtraceError(f"{tree}: no version.mk; say which driver version this is (--version)")
    units = make_units(paths)
    with tempfile.TemporaryDirectory(prefix="rmtrace-probe-") as tmp:
        workdir = Path(tmp)
        with ThreadPoolExecutor(max_workers=jobs) as pool:  # gcc runs in subprocesses
            compiled = list(pool.map(lambda u: run_unit(u, workdir), units))
        with ProcessPoolExecutor(max_workers=jobs) as pool:  # DWARF reading is pure Python
            facts = list(pool.map(ObjectFacts, [obj for _, _, obj in compiled]))
    results = {u.name: UnitResult(macros, values, f) for u, (macros, values, _), f in zip(units, compiled, facts)}
    return assemble(version, results, paths)


def assemble(version: str, results: dict[str, UnitResult], paths: dict[str, Path]) -> DriverProfile:
    rm, uvm, gsp = results["rm"], results["uvm"], results["gsp"]
    ctrl = [r for name, r in results.items() if name.startswith("ctrl")]
    constants = _constants(results)
    sources = [_C_COMMENT.sub("", paths[k].read_text(errors="replace")) for k in ("escape_c", "osapi_c", "nv_c")
               if k in paths]
    aliases: dict[str, dict[str, int]] = {"classes": {}, "controls": {}, "engine_types": {}}
    escapes = _escapes(rm, sources, constants.get("nv_ioctl_magic"))
    rs_rows = _rs_entries(paths["resource_list"].read_text()) if "resource_list" in paths else {}
    classes = _classes(rm, rs_rows, aliases["classes"])
    controls, control_params = _controls(ctrl, aliases["controls"])
    categories, category_prefixes = _categories(ctrl)
    uvm_cmds, uvm_params = _uvm(uvm)
    functions = _enumerators(gsp.facts, "NV_VGPU_MSG_FUNCTION_")
    events = _enumerators(gsp.facts, "NV_VGPU_MSG_EVENT_")
    payloads = _gsp_payloads(gsp.facts, functions, events)

    rm_roots = [e.struct for e in escapes.values() if e.struct] + [c.alloc_params for c in classes.values() if c.alloc_params]
    rm_roots += list(KEY_LAYOUTS) + [t for t in rm.facts.typedefs if t.startswith(KEY_LAYOUT_PREFIXES)]
    # Every struct the control headers name, not only params: embedded pointers point at them.
    wanted = [(rm.facts, rm_roots), *[(r.facts, sorted(set(control_params.values()) | _aggregate_typedefs(r.facts)))
                                      for r in ctrl],
              (uvm.facts, list(uvm_params.values())), (gsp.facts, list(payloads.values()) + list(KEY_LAYOUTS))]
    layouts = _merge_layouts([facts.layouts(roots) for facts, roots in wanted])
    # A table may name a struct by a typedef of another name: file the layout under it too.
    for facts, roots in wanted:
        for root in roots:
            canonical = facts.layout_name(root)
            if canonical and canonical != root and canonical in layouts and root not in layouts:
                layouts[root] = replace(layouts[canonical], name=root)
    controls = {cmd: Control(cmd, c.name, c.params, layouts[c.params].size if c.params in layouts else None)
                for cmd, c in controls.items()}
    return DriverProfile(
        version=version,
        branch=version.split(".")[0],
        escapes=MappingProxyType(escapes),
        classes=MappingProxyType(classes),
        controls=MappingProxyType(controls),
        uvm=MappingProxyType(uvm_cmds),
        status=MappingProxyType(_status(rm.facts)),
        gsp_functions=MappingProxyType(functions),
        gsp_events=MappingProxyType(events),
        gsp_payloads=MappingProxyType(payloads),
        layouts=MappingProxyType(layouts),
        constants=MappingProxyType(constants),
        engine_types=MappingProxyType(_engine_types(rm, aliases["engine_types"])),
        categories=MappingProxyType(categories),
        interface_prefixes=MappingProxyType(_interface_prefixes(controls, category_prefixes)),
        aliases=MappingProxyType({k: MappingProxyType(v) for k, v in aliases.items() if v}),
    )


def timed_build(tree: str | Path, version: str | None = None) -> tuple[DriverProfile, float]:
    start = time.monotonic()
    profile = build_profile(tree, version)
    return profile, time.monotonic() - start
