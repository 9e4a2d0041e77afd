"""Small validation tables for the tests: TOML text that loads, and its variants."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pinlab.validate.schema import ValidationTable, load_table

PERFTEST = """\
[table]
id = "{id}"
title = "ib_write_bw on two test hosts"
kind = "perftest"
setup = "two hosts, one ConnectX-6 each, IB, MTU 4096, host memory"
notes = "made up for the tests"

[table.source]
repo = "example/measurements"
file = "results/perftest.md"
commit = "0123456789abcdef0123456789abcdef01234567"
url = "https://github.com/example/measurements/blob/0123456/results/perftest.md"

[run]
tool = "perftest"
argv = ["ib_write_bw", "-a", "--report_gbits"]
platform = "cx-pair"
platform_params = {{ nic = "cx6", link = "ib" }}
nodes = 2

[compare]
x = "#bytes"
y = "BW average[Gb/sec]"
unit = "Gb/s"
tolerance = 0.10

[[points]]
x = 2
y = 0.06

[[points]]
x = 65536
y = 98.3

[[points]]
x = 8388608
y = 98.4
"""

NCCL = """\
[table]
id = "{id}"
title = "all_reduce_perf on one node"
kind = "nccl-tests"
setup = "one 8-GPU NVSwitch node"
notes = "made up for the tests"

[table.source]
repo = "example/measurements"
issue = 7
author = "someone"
date = "2024-01-02"
url = "https://github.com/example/measurements/issues/7"

[run]
tool = "nccl-tests"
argv = ["all_reduce_perf", "-b", "8", "-e", "128M", "-f", "2", "-g", "8"]
platform = "dgx-a100"
nodes = 1

[compare]
x = "size"
y = "time"
placement = "out-of-place"
unit = "us"
tolerance = 0.2

[[points]]
x = 8
y = 40.5

[[points]]
x = 134217728
y = 1300.0
"""

P2P = """\
[table]
id = "{id}"
title = "p2pBandwidthLatencyTest on two GPUs"
kind = "p2p"
setup = "two PCIe GPUs under one host bridge"
notes = "made up for the tests"

[table.source]
repo = "example/measurements"
pr = 3
author = "someone"
url = "https://github.com/example/measurements/pull/3"

[run]
tool = "p2p"
argv = ["p2pBandwidthLatencyTest"]
platform = "gpu-box"
platform_params = {{ gpus = 2, gpu = "rtx6000-ada" }}
nodes = 1

[compare]
x = "row->column"
y = "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)"
unit = "GB/s"
tolerance = 0.05
label = "P2P enabled"

[series.off]
label = "P2P disabled"
y = "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)"

[[points]]
x = "gpu0->gpu1"
y = 26.32

[[points]]
x = "gpu1->gpu0"
y = 26.32

[[points]]
x = "gpu0->gpu1"
y = 22.23
series = "off"
"""

NVBW = """\
[table]
id = "{id}"
title = "nvbandwidth host copies"
kind = "nvbandwidth"
setup = "two GPUs, PCIe Gen5"
notes = "made up for the tests"

[table.source]
repo = "example/measurements"
issue = 9
author = "someone"
url = "https://github.com/example/measurements/issues/9"

[run]
tool = "nvbandwidth"
argv = ["nvbandwidth", "-t", "host_to_device_memcpy_sm"]
platform = "gpu-box"
platform_params = {{ gpus = 2 }}
nodes = 1

[compare]
x = "row->column"
y = "memcpy SM CPU(row) -> GPU(column) bandwidth (GB/s)"
unit = "GB/s"
tolerance = 0.05

[series.d2h]
y = "memcpy SM CPU(row) <- GPU(column) bandwidth (GB/s)"
argv = ["nvbandwidth", "-t", "device_to_host_memcpy_sm"]

[[points]]
x = "cpu0->gpu0"
y = 35.2

[[points]]
x = "cpu0->gpu1"
y = 35.3

[[points]]
x = "cpu0->gpu0"
y = 52.8
series = "d2h"
"""

GDRCOPY = """\
[table]
id = "{id}"
title = "gdrcopy_copylat reads"
kind = "gdrcopy"
setup = "one PCIe GPU"
notes = "made up for the tests"

[table.source]
repo = "example/measurements"
file = "README.md"
author = "someone"
url = "https://github.com/example/measurements/blob/main/README.md"

[run]
tool = "gdrcopy"
argv = ["gdrcopy_copylat"]
platform = "gpu-box"
nodes = 1

[compare]
x = "Size(B)"
y = "Avg.Time(us)"
where = {{ Test = "gdr_copy_from_mapping" }}
unit = "us"
tolerance = 0.25

[[points]]
x = 4
y = 1.7

[[points]]
x = 65536
y = 114.1
"""

TEMPLATES = {"perftest": PERFTEST, "nccl": NCCL, "p2p": P2P, "nvbw": NVBW, "gdrcopy": GDRCOPY}


def write_table(
    directory: Path,
    name: str,
    template: str = PERFTEST,
    changes: Sequence[tuple[str, str]] = (),
) -> Path:
    """Write ``template`` as ``directory/<name>.toml`` (id = name), each (old, new) of
    ``changes`` replaced first (the old text must be there)."""
    text = template.format(id=name)
    for old, new in changes:
        assert old in text, f"{old!r} not in the template"
        text = text.replace(old, new)
    path = directory / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def table(directory: Path, name: str, template: str = PERFTEST) -> ValidationTable:
    return load_table(write_table(directory, name, template))
