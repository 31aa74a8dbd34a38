"""Vulkan cooperative-matrix support of the GPU and what wgpu-native (wgpu 0.32) exposes of it. Run on the lent GPU:
    source .gpu/setup.sh; python3 benchmarks/gpu_vulkan_matrix_probe.py   (writes $OUT/probe.json)
"""
import ctypes as C
import json
import os
import sys

out = {}
vk = C.CDLL("libvulkan.so.1")
vk.vkGetInstanceProcAddr.restype = C.c_void_p
vk.vkGetInstanceProcAddr.argtypes = [C.c_void_p, C.c_char_p]


class AppInfo(C.Structure):
    _fields_ = [("sType", C.c_int), ("pNext", C.c_void_p), ("pApplicationName", C.c_char_p),
                ("applicationVersion", C.c_uint32), ("pEngineName", C.c_char_p), ("engineVersion", C.c_uint32),
                ("apiVersion", C.c_uint32)]


class InstInfo(C.Structure):
    _fields_ = [("sType", C.c_int), ("pNext", C.c_void_p), ("flags", C.c_uint32), ("pApplicationInfo", C.c_void_p),
                ("enabledLayerCount", C.c_uint32), ("ppEnabledLayerNames", C.c_void_p),
                ("enabledExtensionCount", C.c_uint32), ("ppEnabledExtensionNames", C.c_void_p)]


app = AppInfo(0, None, b"probe", 1, b"probe", 1, (1 << 22) | (3 << 12))
info = InstInfo(1, None, 0, C.addressof(app), 0, None, 0, None)
inst = C.c_void_p()
r = vk.vkCreateInstance(C.byref(info), None, C.byref(inst))
out["vkCreateInstance"] = r
n = C.c_uint32()
vk.vkEnumeratePhysicalDevices(inst, C.byref(n), None)
devs = (C.c_void_p * n.value)()
vk.vkEnumeratePhysicalDevices(inst, C.byref(n), devs)
names = {0: "FLOAT16", 1: "FLOAT32", 2: "FLOAT64", 3: "SINT8", 4: "SINT16", 5: "SINT32", 6: "SINT64", 7: "UINT8",
         8: "UINT16", 9: "UINT32", 10: "UINT64", 1000141000: "BFLOAT16", 1000491002: "FLOAT8_E4M3",
         1000491003: "FLOAT8_E5M2"}
for d in devs:
    props = C.create_string_buffer(4096)
    vk.vkGetPhysicalDeviceProperties(C.c_void_p(d), props)
    name = props.raw[20:276].split(b"\0")[0].decode()
    api = int.from_bytes(props.raw[0:4], "little")
    cnt = C.c_uint32()
    vk.vkEnumerateDeviceExtensionProperties(C.c_void_p(d), None, C.byref(cnt), None)
    ext = C.create_string_buffer(260 * cnt.value)
    vk.vkEnumerateDeviceExtensionProperties(C.c_void_p(d), None, C.byref(cnt), ext)
    exts = [ext.raw[i * 260:i * 260 + 256].split(b"\0")[0].decode() for i in range(cnt.value)]
    entry = {"name": name, "api": f"{api >> 22}.{(api >> 12) & 0x3ff}.{api & 0xfff}",
             "coop_exts": [e for e in exts if "cooperative" in e.lower() or "shader_float16" in e
                           or "bfloat16" in e.lower() or "16bit_storage" in e or "subgroup" in e.lower()],
             "n_exts": len(exts)}
    fn = vk.vkGetInstanceProcAddr(inst, b"vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
    if fn:
        f = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.c_uint32), C.c_void_p)(fn)
        k = C.c_uint32()
        f(C.c_void_p(d), C.byref(k), None)
        size = 56
        buf = C.create_string_buffer(size * k.value)
        for i in range(k.value):
            C.memmove(C.addressof(buf) + i * size, (1000506001).to_bytes(4, "little"), 4)
        f(C.c_void_p(d), C.byref(k), buf)
        tiles = []
        for i in range(k.value):
            vals = [int.from_bytes(buf.raw[i * size + 16 + 4 * j:i * size + 20 + 4 * j], "little") for j in range(9)]
            m, nn, kk, a, b, c, res, sat, scope = vals
            tiles.append(f"{m}x{nn}x{kk} A={names.get(a, a)} B={names.get(b, b)} C={names.get(c, c)} "
                         f"R={names.get(res, res)} scope={scope}")
        entry["coop_matrix_khr"] = tiles
    fn2 = vk.vkGetInstanceProcAddr(inst, b"vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV")
    entry["nv_coop2_fn"] = bool(fn2)
    out.setdefault("devices", []).append(entry)

try:
    import wgpu
    a = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    out["wgpu_adapter"] = str(a.info.get("device")) + " / " + str(a.info.get("backend_type"))
    feats = sorted(a.features)
    out["wgpu_features"] = feats
    for feat in ("cooperative-matrix", "spirv-shader-passthrough", "passthrough-shaders", "shader-f16"):
        try:
            a.request_device_sync(required_features=[feat])
            out[f"device_with_{feat}"] = "ok"
        except Exception as exc:  # noqa: BLE001
            out[f"device_with_{feat}"] = f"{type(exc).__name__}: {str(exc)[:200]}"
except Exception as exc:  # noqa: BLE001
    out["wgpu_error"] = f"{type(exc).__name__}: {exc}"

text = json.dumps(out, indent=1)
print(text)
with open(os.path.join(os.environ.get("OUT", "/tmp"), "probe.json"), "w") as fh:
    fh.write(text)
sys.exit(0)
