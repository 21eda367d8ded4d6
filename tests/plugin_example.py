"""The plugin of docs/decoders.md, as a module a test registers under the rmtrace.decoders entry point group."""

from rmtrace.decoders import Decoded, Label, Op

from rmtrace.record import Source


class Hello(Op):
    name = "MY_HELLO"

    def label(self, record):
        return Label(self.name)

    def decode(self, records, level):
        return Decoded(Source.SEMA, records[0].op, self.name, args={"bytes": len(records[0].buffers[0].data)})


def tables(profile):
    return {Source.SEMA: {0x80: Hello()}}


def broken(profile):
    raise RuntimeError("this plugin is broken on purpose")
