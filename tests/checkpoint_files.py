"""Reading and writing Backplane's safetensors files in Python, sums included,
for the checkpoint scripts beside this one (an implementation of its own:
CRC32C from its definition, the layout from the safetensors format)."""
import json
import struct


def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_T = _table()


def crc32c(data):
    c = 0xFFFFFFFF
    for x in data:
        c = _T[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # the check value of the Castagnoli CRC

HEADER_KEY = "backplane.crc32c.header"
TENSOR_KEY = "backplane.crc32c.tensor."


def split(raw):
    """(header dict, data bytes) of a file's bytes."""
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def verify(raw):
    """Why the file is not whole and verified, or None."""
    if len(raw) < 8:
        return "shorter than 8 bytes"
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        return "the header runs past the end"
    text = raw[8:8 + n].decode()
    h = json.loads(text)
    meta = h.get("__metadata__", {})
    pattern = '"%s":"' % HEADER_KEY
    at = text.find(pattern) + len(pattern)
    zeroed = text[:at] + "00000000" + text[at + 8:]
    if "%08x" % crc32c(zeroed.encode()) != meta.get(HEADER_KEY):
        return "the header's sum differs"
    data = raw[8 + n:]
    end = 0
    for name, e in h.items():
        if name == "__metadata__":
            continue
        b, f = e["data_offsets"]
        end = max(end, f)
        if "%08x" % crc32c(data[b:f]) != meta.get(TENSOR_KEY + name):
            return "tensor %s's sum differs" % name
    if end != len(data):
        return "the data part has %d bytes, the tensors cover %d" % (len(data), end)
    return None


def write(header, data):
    """The bytes of a file with `header` (tensor entries and __metadata__) and
    `data`, its sums made afresh as Backplane makes them."""
    h = dict(header)
    meta = {k: v for k, v in h.get("__metadata__", {}).items() if not k.startswith("backplane.crc32c.")}
    for name, e in h.items():
        if name != "__metadata__":
            b, f = e["data_offsets"]
            meta[TENSOR_KEY + name] = "%08x" % crc32c(data[b:f])
    meta[HEADER_KEY] = "00000000"
    h["__metadata__"] = meta
    text = json.dumps(h, separators=(",", ":"), sort_keys=True)
    text += " " * ((8 - len(text) % 8) % 8)
    pattern = '"%s":"' % HEADER_KEY
    at = text.find(pattern) + len(pattern)
    text = text[:at] + "%08x" % crc32c(text.encode()) + text[at + 8:]
    return struct.pack("<Q", len(text)) + text.encode() + data
