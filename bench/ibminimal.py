"""The floor bench/topograph.py measures beside topolabel: a minimal Python reader of `ibnetdiscover` output.

Each node line and port line into a dict per node (kind, description, port -> (remote id, remote port)),
nothing checked, placed or printed: what parsing the capture costs Python at the least, start-up included.
Run: python bench/ibminimal.py CAPTURE (prints the number of nodes read)
"""

import re
import sys

HEAD = re.compile(r'^(Switch|Ca)\s+\d+\s+"([^"]+)"\s+# "([^"]+)"')
PORT = re.compile(r'^\[(\d+)\][^"]*"([^"]+)"\[(\d+)\]')


def read(text: str) -> dict[str, dict]:
    nodes: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("["):
            match = PORT.match(line)
            if match and current is not None:
                current["ports"][int(match.group(1))] = (match.group(2), int(match.group(3)))
        elif line.startswith(("Switch", "Ca")):
            match = HEAD.match(line)
            if match:
                current = nodes[match.group(2)] = {"kind": match.group(1), "desc": match.group(3), "ports": {}}
    return nodes


if __name__ == "__main__":
    with open(sys.argv[1]) as capture:
        print(len(read(capture.read())))
