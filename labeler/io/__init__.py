"""The core's I/O: files read bounded and written atomically, YAML and JSON documents, node lists streamed
from files or pages, and the host's programs run under a deadline."""
