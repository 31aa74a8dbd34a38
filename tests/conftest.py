import os

os.environ.setdefault("RUMUS_BACKEND", "cpu")
