// bfloat16 operands of the GEMM (gemm.py, after bf16.wgsl): four elements are two u32 words, element
// 2w in the low half of word w. Widening is exact (a shift); a C block is rounded once on store.

fn bf16x4(w: vec2<u32>) -> vec4<f32> {
    return vec4<f32>(bitcast<f32>(w.x << 16u), bitcast<f32>(w.x & 0xffff0000u),
                     bitcast<f32>(w.y << 16u), bitcast<f32>(w.y & 0xffff0000u));
}

fn bf16x4_words(v: vec4<f32>) -> vec2<u32> {
    return vec2<u32>(f32_to_bf16(v.x) | (f32_to_bf16(v.y) << 16u), f32_to_bf16(v.z) | (f32_to_bf16(v.w) << 16u));
}
