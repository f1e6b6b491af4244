"""Draw a record's figures (PNG and SVG) for the docs: bars per variant with CI whiskers.

    python benchmarks/plot_record.py records/nvidia-h200/reference-check.json --out docs/figures
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hello_gpu.bench import plots


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("record", type=Path)
    parser.add_argument("--out", type=Path, default=Path("docs/figures"))
    parser.add_argument("--metric", default="median_us", choices=["median_us", "gb_per_s", "tflop_per_s"])
    arguments = parser.parse_args()
    record = json.loads(arguments.record.read_text())
    entries = record["entries"]
    if arguments.metric != "median_us":
        entries = [e for e in entries if (e.get("derived") or {}).get(arguments.metric)]
    figure = plots.record_bar_chart({**record, "entries": entries}, metric=arguments.metric)
    for path in plots.save(figure, arguments.out / f"{record['device']['slug']}-{record['name']}-{arguments.metric}"):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
