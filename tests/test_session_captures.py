"""The session model on the committed H200 captures."""

from pathlib import Path

import pytest

from rmtrace.analysis.wedges import find_wedges
from rmtrace.record import Source
from rmtrace.session import load_session

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
ALL = sorted(CAPTURES.glob("*.trace"))
ROOTS = {"NV01_ROOT", "NV01_ROOT_NON_PRIV", "NV01_ROOT_CLIENT"}
USES = ("hParent", "hObject")


@pytest.fixture(scope="module", params=[p.name for p in ALL])
def model(request):
    return load_session(CAPTURES / request.param)


def test_captures_exist():
    assert {p.name for p in ALL} >= {"nvidia-smi-q.trace", "torch-one-kernel.trace", "cuda-streams.trace",
                                     "cuda-streams-3x-sequential.trace", "cuda-streams-2-together.trace"}


def test_every_handle_allocated_before_use_and_freed(model):
    """RM calls name only objects their client allocated earlier; every object is freed or reclaimed at exit.

    The one exception real CUDA traffic has: libcuda frees a handle of a fresh RM client before it
    allocates it (RM answers NV_OK); the model keeps those as ``stray_frees`` rather than hiding them.
    """
    born: dict[tuple[int, int], list[int]] = {}
    for obj in model.object_list:
        born.setdefault((obj.h_client, obj.handle), []).append(obj.alloc_seq)
    unknown = []
    for call in model.calls:
        if call.source != Source.RM or not call.ok or call in model.stray_frees:
            continue
        h_client = call.handles.get("hClient")
        for role in USES:
            handle = call.handles.get(role)
            if not handle or handle == h_client or (call.name == "RM_ALLOC" and role == "hObject"):
                continue
            if call.name in ("RM_ALLOC", "RM_ALLOC_MEMORY") and (role == "hObject" or call.detail in ROOTS):
                continue
            if not any(seq < call.enter_seq for seq in born.get((h_client, handle), ())):
                unknown.append((call.enter_seq, call.full_name, role, hex(handle)))
    assert unknown == []
    assert all(f.name == "RM_FREE" for f in model.stray_frees)
    assert model.leaked() == []
    for obj in model.object_list:
        assert obj.freed_by in ("RM_FREE", "exit")


def test_no_wedges_in_green_captures(model):
    assert find_wedges(model) == []


def test_channels_belong_to_their_client(model):
    for chan in model.channels.values():
        obj = model.objects[(chan.client_id, chan.handle)]
        assert obj.class_name == chan.class_name and chan.stable_name == obj.stable_name
        assert chan.token is not None  # CUDA asks every channel for its work-submit token


def test_channels_have_their_engines():
    """CUDA runs compute channels on GR0 and copies on several CEs: each copy channel knows its rank."""
    m = load_session(CAPTURES / "cuda-streams.trace")
    engines = {(c.engine, c.rank) for c in m.channels.values()}
    assert ("GR0", None) in engines
    ranks = {rank for engine, rank in engines if engine.startswith("COPY")}
    assert len(ranks) >= 2 and all(f"COPY{r}" in {e for e, _ in engines} for r in ranks)
    for chan in m.channels.values():
        assert chan.engine and not chan.engine.startswith("engine ")  # named from the profile
        assert chan.ring_va  # the GPFIFO ring address the host would derive a rank from


def test_sequential_capture_has_three_green_clients():
    m = load_session(CAPTURES / "cuda-streams-3x-sequential.trace")
    assert len(m.clients) == 3
    for a, b in zip(m.clients, m.clients[1:]):
        assert a.last_ns < b.first_ns  # one after another
    for c in m.clients:
        assert m.processes[c.pid].exit_status == 0
        assert all(call.ok is not False or call.source not in (Source.UVM,) for call in m.calls_of(c.id))
        assert not any(call.in_flight for call in m.calls_of(c.id))
    # the same program: the same object tree by stable names
    names = [sorted(o.stable_name for o in m.objects_of(c.id)) for c in m.clients]
    assert names[0] == names[1] == names[2]


def test_clients_keep_the_gpu_they_registered_with_uvm(model):
    """Every CUDA client registers the H200 with UVM and exits without unregistering it."""
    for client in model.clients:
        if any(call.name == "UVM_REGISTER_GPU" for call in model.calls_of(client.id)):
            assert client.uvm_gpus == {bytes.fromhex("253c0f5c4d3525dad24c627fd03bd6ad")}, client


def test_concurrent_capture_has_two_overlapping_clients():
    m = load_session(CAPTURES / "cuda-streams-2-together.trace")
    assert len(m.clients) == 2
    a, b = m.clients
    assert a.first_ns < b.last_ns and b.first_ns < a.last_ns  # overlapping in time
    assert not any(call.in_flight for call in m.calls)
