"""Text fitted to its columns: names lose their middle, the events columns give way to the operation."""

from rmtrace.tui.fit import elide, elide_middle
from rmtrace.tui.widgets.events.columns import fit_columns

CONTROL = "→ RM_CONTROL NV2080_CTRL_CMD_BUS_GET_PCIE_SUPPORTED_GPU_ATOMICS"


def test_a_control_keeps_its_verb_class_and_command():
    for width in (30, 40, 50):
        shown = elide_middle(CONTROL, width)
        assert len(shown) == width and shown.startswith("→ RM_CONTROL NV2080…") and shown.endswith("_ATOMICS")
    assert elide_middle(CONTROL, len(CONTROL)) == CONTROL


def test_other_text_loses_its_middle_or_its_end():
    assert elide_middle("cuda-streams-3x-sequential.trace", 20) == "cuda-strea…ial.trace"
    assert elide_middle("ch0 0x5c00001c GR0", 16).endswith("GR0") and len(elide_middle("ch0 0x5c00001c GR0", 16)) == 16
    assert elide("abcdef", 4) == "abc…" and elide("abc", 4) == "abc" and elide("abc", 0) == ""


def test_the_operation_gets_the_room_the_others_leave():
    def keys(width):
        return [c.key for c, _ in fit_columns(width)]
    assert keys(78) == ["time", "client", "operation", "status", "latency"]  # 80 columns, less the border
    assert keys(40) == ["time", "operation", "status"]
    assert keys(200) == ["time", "pid", "client", "source", "operation", "object", "status", "latency"]
    for width in (40, 78, 120, 200):
        cols = fit_columns(width)
        assert sum(w for _, w in cols) + len(cols) == width  # each column and its gap fill the width
        assert dict((c.key, w) for c, w in cols)["operation"] >= (24 if width >= 50 else 16)
