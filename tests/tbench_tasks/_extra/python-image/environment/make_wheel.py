"""Write a tiny pure-Python wheel (offline), so the build can `pip install` something."""

import base64
import hashlib
import sys
import zipfile
from pathlib import Path

files = {
    "clover_tiny/__init__.py": 'VALUE = "tiny-ok"\n',
    "clover_tiny-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: clover-tiny\nVersion: 1.0\n",
    "clover_tiny-1.0.dist-info/WHEEL": (
        "Wheel-Version: 1.0\nGenerator: clover-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    ),
}
record = []
for name, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(text.encode())}")
record.append("clover_tiny-1.0.dist-info/RECORD,,")
files["clover_tiny-1.0.dist-info/RECORD"] = "\n".join(record) + "\n"
with zipfile.ZipFile(Path(sys.argv[1]) / "clover_tiny-1.0-py3-none-any.whl", "w") as wheel:
    for name, text in files.items():
        wheel.writestr(name, text)
