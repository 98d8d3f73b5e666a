"""Write the schemas made from the config model: schemas/*.schema.json and the CRD's spec schema (also in the
chart's copy).

    python -m hack.schemas        # from the repository root, after changing labeler/settings/config.py or a source's options
"""

from __future__ import annotations

from pathlib import Path

from hack import chart_files
from topolabel.schemas import CRD_FILE, crd_text, files

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    for name, text in files().items():
        (ROOT / name).parent.mkdir(exist_ok=True)
        (ROOT / name).write_text(text)
    crd = ROOT / CRD_FILE
    crd.write_text(crd_text(crd.read_text()))
    chart_files.main()  # the chart's copy of the CRD


if __name__ == "__main__":
    main()
