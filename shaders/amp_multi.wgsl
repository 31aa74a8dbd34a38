// amp_unscale_check_multi_: the loss scaler's inf/NaN check over a group of gradients in one dispatch
// (backends/rumus_wgpu/amp.py renders one variant per group size {{K}}: bindings 0..K-1 are the
// gradients, K the found-inf flag, K+1 inv_scale). Every gradient is read as 32-bit words, one word per
// invocation: float32 words hold one element, float16/bfloat16 words two (halves outside the tensor are
// written back unchanged; no two gradients of a group share a buffer, so no word is written twice).
// Non-finite tests use the bit patterns, so no fast-math assumption can drop them.

struct Slot {
    start: u32,   // the first invocation of this gradient in the group's range
    offset: u32,  // its element offset in its buffer
    numel: u32,
    kind: u32,    // 0 float32, 1 float16, 2 bfloat16
}

struct Config {
    total: u32,   // invocations of the whole group
    row: u32,     // invocations per grid row
    flag: u32,    // element offsets of found_inf and inv_scale
    inv: u32,
    slots: array<Slot, {{K}}>,
}

{{BINDINGS}}
@group(0) @binding({{K}}) var<storage, read_write> found: array<atomic<u32>>;
@group(0) @binding({{K1}}) var<storage, read> inv_scale: array<f32>;
@group(0) @binding({{K2}}) var<uniform> cfg: Config;

fn half_unscale(h: u32, kind: u32, s: f32) -> vec2<u32> {
    // (new 16 bits, 1 if h is an inf or a NaN): a non-finite value keeps its bits (inf * s, s > 0)
    if (kind == 1u) {
        if ((h & 0x7fffu) >= 0x7c00u) {
            return vec2<u32>(h, 1u);
        }
        let p = unpack2x16float(h).x * s;
        if (abs(p) >= 65520.0) {  // rounds to infinity: pack2x16float leaves that value undefined
            return vec2<u32>(((bitcast<u32>(p) >> 16u) & 0x8000u) | 0x7c00u, 0u);
        }
        return vec2<u32>(pack2x16float(vec2<f32>(p, 0.0)) & 0xffffu, 0u);
    }
    if ((h & 0x7fffu) >= 0x7f80u) {
        return vec2<u32>(h, 1u);
    }
    let x = bitcast<u32>(bitcast<f32>(h << 16u) * s);
    return vec2<u32>((x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u, 0u);  // round to nearest even (csrc half.h)
}

// (new word, 1 if an element of the tensor in it is an inf or a NaN) for word w of gradient slot j
fn unscale_word(word: u32, w: u32, j: u32, s: f32) -> vec2<u32> {
    let slot = cfg.slots[j];
    if (slot.kind == 0u) {
        let v = bitcast<f32>(word);
        return vec2<u32>(bitcast<u32>(v * s), select(0u, 1u, (word & 0x7fffffffu) >= 0x7f800000u));
    }
    var acc = word;
    var bad = 0u;
    for (var part = 0u; part < 2u; part++) {
        let e = 2u * w + part;
        if (e >= slot.offset && e < slot.offset + slot.numel) {
            let r = half_unscale((word >> (16u * part)) & 0xffffu, slot.kind, s);
            acc = (acc & ~(0xffffu << (16u * part))) | (r.x << (16u * part));
            bad |= r.y;
        }
    }
    return vec2<u32>(acc, bad);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * cfg.row + gid.x;
    if (i >= cfg.total) {
        return;
    }
    var j = 0u;
    for (var t = 1u; t < {{K}}u; t++) {
        if (i >= cfg.slots[t].start) {
            j = t;
        }
    }
    let slot = cfg.slots[j];
    let w = i - slot.start + select(slot.offset / 2u, slot.offset, slot.kind == 0u);  // the word this invocation owns
    let s = inv_scale[cfg.inv];
    var r = vec2<u32>(0u, 0u);
    switch j {
{{CASES}}
        default: {}
    }
    if (r.y != 0u) {
        atomicOr(&found[cfg.flag], 0x3f800000u);  // 0.0 | bits(1.0) == 1.0
    }
}
