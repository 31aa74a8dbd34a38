// adam_step_count_: every step count of a group += 1 unless the GradScaler's flag is raised, after
// adam_step_dev_ has read them for all the parameters of a step (backends/rumus_wgpu/optim.py renders one
// variant per group size {{K}}: bindings 0..K-1 the counts, K the flag). One invocation does it all.

struct Config {
    flag: u32,                            // element offset of found_inf
    pad0: u32,
    pad1: u32,
    pad2: u32,
    offsets: array<vec4<u32>, {{K4}}>,    // element offset of count j at offsets[j / 4][j % 4]
}

{{BINDINGS}}
@group(0) @binding({{K}}) var<storage, read> skip: array<f32>;
@group(0) @binding({{K1}}) var<uniform> cfg: Config;

@compute @workgroup_size(1)
fn main() {
    if ((bitcast<u32>(skip[cfg.flag]) & 0x7fffffffu) != 0u) {  // any flag but +-0, NaN included
        return;
    }
{{ADDS}}
}
